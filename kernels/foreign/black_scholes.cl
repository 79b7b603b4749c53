// European call and put prices (Black-Scholes), one option per work-item.
// The normal CDF goes through an erf approximation (Abramowitz & Stegun
// 7.1.26: a degree-5 polynomial in t = 1 / (1 + p|x|) times exp(-x^2)).

#define ERF_P  0.3275911f
#define ERF_A1 0.254829592f
#define ERF_A2 -0.284496736f
#define ERF_A3 1.421413741f
#define ERF_A4 -1.453152027f
#define ERF_A5 1.061405429f

static float erf_as(float x)
{
    const float s = (x < 0.0f) ? -1.0f : 1.0f;
    x = fabs(x);
    const float t = 1.0f / (1.0f + ERF_P * x);
    const float poly = ((((ERF_A5 * t + ERF_A4) * t + ERF_A3) * t + ERF_A2) * t + ERF_A1) * t;
    return s * (1.0f - poly * exp(-x * x));
}

static float norm_cdf(float d)
{
    return 0.5f * (1.0f + erf_as(d * M_SQRT1_2_F));
}

__kernel void black_scholes(const int n,
                            const float r,      /* riskless rate */
                            const float v,      /* volatility */
                            __global const float* restrict S,   /* spot */
                            __global const float* restrict X,   /* strike */
                            __global const float* restrict T,   /* years to expiry */
                            __global float* restrict call,
                            __global float* restrict put)
{
    const int i = get_global_id(0);
    if (i >= n) return;

    const float s = S[i], k = X[i], t = T[i];
    const float sq = sqrt(t);
    const float d1 = (log(s / k) + (r + 0.5f * v * v) * t) / (v * sq);
    const float d2 = d1 - v * sq;
    const float disc = k * exp(-r * t);
    const float n1 = norm_cdf(d1), n2 = norm_cdf(d2);

    call[i] = s * n1 - disc * n2;
    put[i]  = disc * (1.0f - n2) - s * (1.0f - n1);
}
