// kmeans: the assignment step of k-means (Rodinia's kmeans kernel): each of n points, its F features stored
// feature-major (features[f * n + p], so consecutive work-items read consecutive addresses), finds the nearest of
// K cluster centres (clusters[c * F + f], read by every work-item) by squared Euclidean distance and writes its
// index and that distance
#ifndef K
#define K 5
#endif
#ifndef F
#define F 34
#endif

__kernel void kmeans(int n, __global const float *features, __global const float *clusters,
                     __global int *membership, __global float *dist)
{
    int p = get_global_id(0);
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
