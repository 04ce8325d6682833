/* gemm_avx512.c: the AVX-512 micro-kernel of the fp32 product (gemm.h).
 *
 * A tile of C is 12 rows x 32 columns: 24 zmm registers of sums, two for
 * the packed B row of each k, and one for each of A's 12 elements in turn,
 * broadcast from memory: from a packed panel, or (tile_rows) from A's 12
 * rows where they are, one register of offsets each. Per k, 24 FMAs
 * against 2 loads and 12 broadcasts, which two FMA units retire in 12
 * cycles, and 24 independent chains hide their 4-cycle latency. Compiled
 * for AVX-512 by a target attribute on the function alone;
 * pt_gemm_avx512() offers it only where the CPU has AVX-512F and the
 * operating system saves the zmm registers. */
#include "tensor/gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define MR 12
#define NR 32

#define AVX512 __attribute__((target("avx512f")))

/* The tile, with A's element (i, p) at a[i a_row + p a_col]: a packed
 * panel (a_row 1, a_col MR) or MR rows of A read where they are (a_row
 * their stride, a_col 1). Inlined into each, so the packed tile's
 * addressing stays constant. */
AVX512 static inline __attribute__((always_inline)) void
tile_body(int kc, const float *a, long a_row, long a_col, const float *b, float *c, long ldc,
          float alpha, float beta, const float *bias)
{
    __m512 s0[MR], s1[MR];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        s0[i] = s1[i] = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int p = 0; p < kc; p++, a += a_col, b += NR) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            __m512 ai = _mm512_set1_ps(a[i * a_row]);
            s0[i] = _mm512_fmadd_ps(ai, b0, s0[i]);
            s1[i] = _mm512_fmadd_ps(ai, b1, s1[i]);
        }
    }
    /* (alpha sum + beta c) + bias, unfused, as gemm.c's edges do it */
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __m512 bias0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    __m512 bias1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++, c += ldc) {
        __m512 v0 = _mm512_mul_ps(va, s0[i]), v1 = _mm512_mul_ps(va, s1[i]);
        if (beta != 0.0f) {
            v0 = _mm512_add_ps(v0, _mm512_mul_ps(vb, _mm512_loadu_ps(c)));
            v1 = _mm512_add_ps(v1, _mm512_mul_ps(vb, _mm512_loadu_ps(c + 16)));
        }
        if (bias) {
            v0 = _mm512_add_ps(v0, bias0);
            v1 = _mm512_add_ps(v1, bias1);
        }
        _mm512_storeu_ps(c, v0);
        _mm512_storeu_ps(c + 16, v1);
    }
}

AVX512 static void tile_avx512(int kc, const float *a, const float *b, float *c, long ldc,
                               float alpha, float beta, const float *bias)
{
    tile_body(kc, a, 1, MR, b, c, ldc, alpha, beta, bias);
}

AVX512 static void tile_rows_avx512(int kc, const float *a, long lda, const float *b, float *c,
                                    long ldc, float alpha, float beta, const float *bias)
{
    tile_body(kc, a, lda, 1, b, c, ldc, alpha, beta, bias);
}

static const pt_gemm_kernel avx512 = {
    "avx512", MR, NR, tile_avx512, tile_rows_avx512, pt_gemm_interleave_avx2};

const pt_gemm_kernel *pt_gemm_avx512(void)
{
    return __builtin_cpu_supports("avx512f") ? &avx512 : NULL;
}
#else
const pt_gemm_kernel *pt_gemm_avx512(void) { return NULL; }
#endif
