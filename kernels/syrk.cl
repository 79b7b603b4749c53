// syrk: C = alpha * A @ A^T + beta * C for n x n row-major float32 matrices (the full C, as PolyBench/GPU computes
// it), one work-item per C element (dim 0 = column j, dim 1 = row i): row i of A is the same for a row of
// work-items, row j is read with stride n across them
__kernel void syrk(int n, float alpha, float beta, __global const float *A, __global float *C)
{
    int j = get_global_id(0);
    int i = get_global_id(1);
    if (i < n && j < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k)
            acc += A[i * n + k] * A[j * n + k];
        C[i * n + j] = alpha * acc + beta * C[i * n + j];
    }
}
