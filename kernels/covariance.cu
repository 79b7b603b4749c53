// covariance: the m x m covariance matrix of n observations of m variables (data: n x m row-major float32),
// PolyBench/GPU's covar kernel with its mean and centring steps folded in (cov = (sum xy - sum x sum y / n) / (n-1)):
// one thread per variable j1 fills row j1 from the diagonal on (j2 >= j1) and mirrors it into column j1, so
// thread j1 does (m - j1) * n steps: the triangle leaves the threads unevenly loaded
extern "C" __global__ void covariance(int n, int m, const float *data, float *cov)
{
    int j1 = blockIdx.x * blockDim.x + threadIdx.x;
    if (j1 < m) {
        for (int j2 = j1; j2 < m; ++j2) {
            float sxy = 0.0f;
            float sx = 0.0f;
            float sy = 0.0f;
            for (int i = 0; i < n; ++i) {
                float a = data[i * m + j1];
                float b = data[i * m + j2];
                sxy += a * b;
                sx += a;
                sy += b;
            }
            float c = (sxy - sx * sy / n) / (n - 1);
            cov[j1 * m + j2] = c;
            cov[j2 * m + j1] = c;
        }
    }
}
