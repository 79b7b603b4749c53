// saxpy on an interleaved array of (x, y) pairs, updated in place:
// xy[i].y = alpha * xy[i].x + xy[i].y. One float2 load and one float2
// store per work-item.

__kernel void saxpy_float2(const int n,
                           const float alpha,
                           __global float2* xy)
{
    const int i = get_global_id(0);
    if (i >= n) return;

    float2 p = xy[i];
    p.y = mad(alpha, p.x, p.y);
    xy[i] = p;
}
