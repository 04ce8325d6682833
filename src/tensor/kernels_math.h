/* kernels_math.h: the scalar functions the elementwise kernels use: exp,
 * tanh, erf and sigmoid without a libm call, so the loops over them
 * vectorise and give the same bits on every machine. Included by the
 * kernel bodies (kernels_body.h). */
#ifndef PT_TENSOR_KERNELS_MATH_H
#define PT_TENSOR_KERNELS_MATH_H

#include <math.h>
#include <string.h>

/* exp(x) without a libm call, so loops over it vectorise: x = n ln2 + r with
 * |r| <= ln2/2, e^r by its degree-6 Taylor polynomial (relative error below
 * 2e-7), and 2^n put into the exponent bits. Inputs are clamped to where
 * float exp is finite and normal. */
static inline float fast_expf(float x)
{
    float given = x;
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    x = x == x ? x : 0.0f; /* NaN: no integer of it below; the result is NaN again */
    /* round to nearest by adding and taking away 1.5 * 2^23: no libm call */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f; /* ln2 in two parts */
    float p =
        1.0f +
        r * (1.0f +
             r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    int bits = ((int)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return given == given ? p * scale : given; /* selects: the loop still vectorises */
}

/* tanh(u) = 1 - 2 / (e^{2u} + 1): absolute error about 1e-7, which is what
 * GELU's 0.5 x (1 + tanh) needs. */
static inline float fast_tanhf(float u) { return 1.0f - 2.0f / (fast_expf(2.0f * u) + 1.0f); }

/* erf(x) by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7) on
 * |x|, the sign put back after: no libm call, so the loops over it
 * vectorise and give the same bits everywhere. */
static inline float fast_erff(float x)
{
    float a = fabsf(x), t = 1.0f / (1.0f + 0.3275911f * a);
    float p =
        t * (0.254829592f +
             t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    return copysignf(1.0f - p * fast_expf(-a * a), x);
}

static inline float fast_sigmoidf(float x) { return 1.0f / (1.0f + fast_expf(-x)); }

#endif
