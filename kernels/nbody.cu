// nbody: all-pairs gravitational acceleration with softening eps2, n bodies stored as (x, y, z, m) float32
// quadruples; one thread per body i loops over every body j (j = i adds nothing: its distance is 0):
// acc_i = sum_j m_j (p_j - p_i) / (|p_j - p_i|^2 + eps2)^(3/2), written as (ax, ay, az, 0)
extern "C" __global__ void nbody(int n, float eps2, const float *pos, float *acc)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float xi = pos[4 * i];
        float yi = pos[4 * i + 1];
        float zi = pos[4 * i + 2];
        float ax = 0.0f;
        float ay = 0.0f;
        float az = 0.0f;
        for (int j = 0; j < n; ++j) {
            float dx = pos[4 * j] - xi;
            float dy = pos[4 * j + 1] - yi;
            float dz = pos[4 * j + 2] - zi;
            float inv = rsqrtf(dx * dx + dy * dy + dz * dz + eps2);
            float s = pos[4 * j + 3] * inv * inv * inv;
            ax += dx * s;
            ay += dy * s;
            az += dz * s;
        }
        acc[4 * i] = ax;
        acc[4 * i + 1] = ay;
        acc[4 * i + 2] = az;
        acc[4 * i + 3] = 0.0f;
    }
}
