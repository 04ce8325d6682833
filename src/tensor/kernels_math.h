/* kernels_math.h: the scalar functions the elementwise kernels use: exp,
 * tanh, erf and sigmoid without a libm call, so the loops over them
 * vectorise and give the same bits on every machine. Included by the
 * kernel bodies (kernels_body.h). */
#ifndef PT_TENSOR_KERNELS_MATH_H
#define PT_TENSOR_KERNELS_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* a * b + c for the polynomials below: one fused multiply-add where the
 * build's CPU has the instruction (-march=native on any x86-64 of the last
 * decade, every ARM64), which halves the instructions of their loops
 * (GELU's passes 1.3-1.5x faster, the causal softmax's 1.15x:
 * bench_passes); a multiply and an add in a portable build
 * (-DPT_NATIVE=OFF), where fmaf would be a slow libm call. Either way one
 * binary gives the same bits on every machine it runs on; the two builds
 * may differ in the last bit of an exp. */
#if defined(__FMA__) || defined(__aarch64__)
#define PT_FMA(a, b, c) fmaf(a, b, c)
#else
#define PT_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* e^x for x in [-87, 88] (not NaN), without a libm call, so loops over it
 * vectorise: x = n ln2 + r with |r| <= ln2/2, e^r by its degree-6 Taylor
 * polynomial (relative error below 2e-7), and 2^n put into the exponent
 * bits. */
static inline float exp_in_range(float x)
{
    /* round to nearest by adding and taking away 1.5 * 2^23: no libm call */
    float n = PT_FMA(x, 1.44269504088896341f, 12582912.0f) - 12582912.0f;
    float r = PT_FMA(n, 2.12194440e-4f, PT_FMA(n, -0.693359375f, x)); /* ln2 in two parts */
    float p = PT_FMA(r, 1.0f / 720, 1.0f / 120);
    p = PT_FMA(p, r, 1.0f / 24);
    p = PT_FMA(p, r, 1.0f / 6);
    p = PT_FMA(p, r, 0.5f);
    p = PT_FMA(p, r, 1.0f);
    p = PT_FMA(p, r, 1.0f);
    int bits = ((int)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* exp(x) for any float: inputs clamped to where float exp is finite and
 * normal, below that the result 0 (so a softmax's -infinity contributes
 * nothing), a NaN given back. */
static inline float fast_expf(float x)
{
    float given = x;
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    x = x == x ? x : 0.0f; /* NaN: no integer of it in exp_in_range; the result is NaN again */
    float p = exp_in_range(x);
    p = given == given ? p : given;   /* selects: the loop still vectorises */
    return given < -87.0f ? 0.0f : p; /* e^-87 is float's least normal: below, 0 */
}

/* 1 / (e^{2u} + 1), from which GELU's tanh form takes everything it needs
 * with one division: tanh(u) = 1 - 2d, 1 + tanh(u) = 2 (1 - d) and
 * 1 - tanh(u)^2 = 4 d (1 - d); absolute error about 1e-7. The same bits as
 * with fast_expf for every u that is not NaN (below -87, e^-87 + 1 rounds
 * to 1 as 0 + 1 does), with a third of its selects: a NaN u gives a
 * number here, and GELU's x, a factor of everything it computes, carries
 * the NaN (GELU's passes 1.2x faster). */
static inline float tanh_part(float u)
{
    float t = 2.0f * u;
    t = t > -87.0f ? t : -87.0f; /* NaN too */
    t = t < 88.0f ? t : 88.0f;
    return 1.0f / (exp_in_range(t) + 1.0f);
}

/* erf(x) by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7) on
 * |x|, the sign put back after: no libm call, so the loops over it
 * vectorise and give the same bits everywhere. */
static inline float fast_erff(float x)
{
    float a = fabsf(x), t = 1.0f / (1.0f + 0.3275911f * a);
    float p = PT_FMA(t, 1.061405429f, -1.453152027f);
    p = PT_FMA(p, t, 1.421413741f);
    p = PT_FMA(p, t, -0.284496736f);
    p = PT_FMA(p, t, 0.254829592f) * t;
    return copysignf(1.0f - p * fast_expf(-a * a), x);
}

static inline float fast_sigmoidf(float x) { return 1.0f / (1.0f + fast_expf(-x)); }

/* A float's bits as an integer that orders as the floats do (a negative
 * float's magnitude bits turned over: -0 just below +0, NaNs beyond the
 * infinities), and back: the same map both ways. Loops that take a maximum
 * of these vectorise where a float comparison's would not. */
static inline int32_t pt_float_order(float x)
{
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i ^ (int32_t)((uint32_t)(i >> 31) >> 1);
}

static inline float pt_float_of_order(int32_t i)
{
    i ^= (int32_t)((uint32_t)(i >> 31) >> 1);
    float x;
    memcpy(&x, &i, sizeof x);
    return x;
}

#endif
