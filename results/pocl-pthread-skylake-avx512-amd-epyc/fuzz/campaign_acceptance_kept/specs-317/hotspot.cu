// hotspot: one explicit step of Rodinia's HotSpot thermal simulation on an n x n row-major float32 grid, one
// thread per cell (x = column c, y = row r); neighbours past the edge clamp to the cell's own row/column:
// out = t + step/Cap * (power + (tS + tN - 2t) / Ry + (tE + tW - 2t) / Rx + (amb - t) / Rz)
extern "C" __global__ void hotspot(int n, float step_div_cap, float rx_1, float ry_1, float rz_1, float amb,
                                   const float *power, const float *temp, float *out)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < n && c < n) {
        int rn = r > 0 ? r - 1 : 0;
        int rs = r < n - 1 ? r + 1 : n - 1;
        int cw = c > 0 ? c - 1 : 0;
        int ce = c < n - 1 ? c + 1 : n - 1;
        float t = temp[r * n + c];
        out[r * n + c] = t + step_div_cap * (power[r * n + c]
                                             + (temp[rs * n + c] + temp[rn * n + c] - 2.0f * t) * ry_1
                                             + (temp[r * n + ce] + temp[r * n + cw] - 2.0f * t) * rx_1
                                             + (amb - t) * rz_1);
    }
}
