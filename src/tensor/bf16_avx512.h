/* bf16_avx512.h: 16 lanes of bf16 at a time in AVX-512 registers, shared by
 * the two bf16 products that pack with them (matmul_amx.c,
 * matmul_avx512bf16.c): rounding with pt_bf16_round's bits, loading any
 * operand as bf16, and the seam's finish of a row of C.
 *
 * Each function is compiled for AVX-512 F, BW and VL by its own attribute;
 * the files that call them offer their product only where the CPU has those
 * (and the operating system saves the registers). */
#ifndef PT_TENSOR_BF16_AVX512_H
#define PT_TENSOR_BF16_AVX512_H

#include "tensor/matmul_bf16.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define PT_TARGET_BF16X16 __attribute__((target("avx512f,avx512bw,avx512vl")))

/* 1 when the CPU runs these functions */
static inline int pt_bf16x16_usable(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}

/* mask of the first n (0..16) lanes */
static inline __mmask16 pt_lanes16(int n)
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* pt_bf16_round on 16 floats: the bf16 bits in the low half of each lane */
PT_TARGET_BF16X16 static inline __m512i pt_bf16x16_round(__m512 x)
{
    __m512i u = _mm512_castps_si512(x);
    __m512i one = _mm512_set1_epi32(1);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_mask_blend_epi32(nan, r, quiet);
}

/* n (<= 16) consecutive elements of X from element `at`, as bf16 bits in the
 * low half of each lane, zero past n */
PT_TARGET_BF16X16 static inline __m512i pt_bf16x16_load(pt_mat X, size_t at, int n)
{
    __mmask16 m = pt_lanes16(n);
    if (X.dt == PT_BF16)
        return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const pt_bf16 *)X.p + at));
    return _mm512_maskz_mov_epi32(
        m, pt_bf16x16_round(_mm512_maskz_loadu_ps(m, (const float *)X.p + at)));
}

/* pt_matmul_finish on `cols` elements of row i of C from column j: C = (alpha
 * sum + beta C) + bias, rounded once where C is bf16 */
PT_TARGET_BF16X16 static inline void pt_bf16x16_finish_row(pt_mat C, int i, int j, int cols,
                                                           const float *sum, float alpha,
                                                           float beta, const float *bias)
{
    size_t at = (size_t)i * C.ld + j;
    for (int c = 0; c < cols; c += 16) {
        __mmask16 m = pt_lanes16(cols - c);
        __m512 v = _mm512_mul_ps(_mm512_set1_ps(alpha), _mm512_maskz_loadu_ps(m, sum + c));
        if (beta != 0.0f) {
            __m512 old = C.dt == PT_BF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(
                                               _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(
                                                   m, (const pt_bf16 *)C.p + at + c)),
                                               16))
                                         : _mm512_maskz_loadu_ps(m, (const float *)C.p + at + c);
            v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_set1_ps(beta), old));
        }
        if (bias)
            v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + j + c));
        if (C.dt == PT_BF16)
            _mm256_mask_storeu_epi16((pt_bf16 *)C.p + at + c, m,
                                     _mm512_cvtepi32_epi16(pt_bf16x16_round(v)));
        else
            _mm512_mask_storeu_ps((float *)C.p + at + c, m, v);
    }
}

#endif
#endif
