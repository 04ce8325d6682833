/* bf16.h: bfloat16 values, the storage of activations under --precision
 * bf16: the upper 16 bits of an IEEE float (8 exponent bits, 7 mantissa
 * bits), so widening is a shift and rounding is an add on the bits.
 *
 * One rounding everywhere: to nearest, ties to even; a NaN stays a NaN (its
 * quiet bit set, so it cannot round into infinity). Every bf16 kernel, the
 * portable and the fast products alike, rounds through pt_bf16_round, which
 * is what lets the two paths agree on every value they store. */
#ifndef PT_TENSOR_BF16_H
#define PT_TENSOR_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t pt_bf16;

static inline pt_bf16 pt_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (pt_bf16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (pt_bf16)(u >> 16);
}

static inline float pt_bf16_widen(pt_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x rounded to the nearest bf16, as a float */
static inline float pt_bf16_rounded(float x) { return pt_bf16_widen(pt_bf16_round(x)); }

static inline void pt_bf16_from_floats(pt_bf16 *out, const float *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = pt_bf16_round(in[i]);
}

static inline void pt_bf16_to_floats(float *out, const pt_bf16 *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = pt_bf16_widen(in[i]);
}

#endif
