// kmeans: the assignment step of k-means (Rodinia's kmeans kernel): each of n points, its F features stored
// feature-major (features[f * n + p], so consecutive threads read consecutive addresses), finds the nearest of
// K cluster centres (clusters[c * F + f], read by every thread) by squared Euclidean distance and writes its
// index and that distance
#ifndef K
#define K 5
#endif
#ifndef F
#define F 34
#endif

extern "C" __global__ void kmeans(int n, const float *features, const float *clusters, int *membership, float *dist)
{
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < n) {
        int best = 0;
        float best_d = 3.402823466e+38f;
        for (int c = 0; c < K; ++c) {
            float d = 0.0f;
            for (int f = 0; f < F; ++f) {
                float diff = features[f * n + p] - clusters[c * F + f];
                d += diff * diff;
            }
            if (d < best_d) {
                best_d = d;
                best = c;
            }
        }
        membership[p] = best;
        dist[p] = best_d;
    }
}
