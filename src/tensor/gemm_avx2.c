/* gemm_avx2.c: the AVX2 + FMA3 micro-kernel of the fp32 product (gemm.h),
 * for x86-64 CPUs without AVX-512 (AMD Zen 1-3, Intel Haswell to Alder
 * Lake's cores).
 *
 * A tile of C is 6 rows x 16 columns: 12 ymm registers of sums, two for
 * the packed B row of each k and one for A's broadcast element, 15 of the
 * 16 there are: per k, 12 FMAs against 2 loads and 6 broadcasts, and 12
 * independent chains cover two FMA units' latency. The tile of C is
 * prefetched before the sums (3-4% on GPT's products when beta is 1, as for
 * every block of K after the first). Compiled for AVX2 and FMA by a target
 * attribute on the function alone. */
#include "tensor/gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define MR 6
#define NR 16

#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static void tile_avx2(int kc, const float *a, const float *b, float *c, long ldc, float alpha,
                           float beta, const float *bias)
{
    __m256 s0[MR], s1[MR];
    /* the tile of C, wanted when the sums are done (beta != 0 reads it) */
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        s0[i] = s1[i] = _mm256_setzero_ps();
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int p = 0; p < kc; p++, a += MR, b += NR) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            __m256 ai = _mm256_broadcast_ss(a + i);
            s0[i] = _mm256_fmadd_ps(ai, b0, s0[i]);
            s1[i] = _mm256_fmadd_ps(ai, b1, s1[i]);
        }
    }
    /* (alpha sum + beta c) + bias, unfused, as gemm.c's edges do it */
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    __m256 bias0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
    __m256 bias1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++, c += ldc) {
        __m256 v0 = _mm256_mul_ps(va, s0[i]), v1 = _mm256_mul_ps(va, s1[i]);
        if (beta != 0.0f) {
            v0 = _mm256_add_ps(v0, _mm256_mul_ps(vb, _mm256_loadu_ps(c)));
            v1 = _mm256_add_ps(v1, _mm256_mul_ps(vb, _mm256_loadu_ps(c + 8)));
        }
        if (bias) {
            v0 = _mm256_add_ps(v0, bias0);
            v1 = _mm256_add_ps(v1, bias1);
        }
        _mm256_storeu_ps(c, v0);
        _mm256_storeu_ps(c + 8, v1);
    }
}

static const pt_gemm_kernel avx2 = {"avx2", MR, NR, tile_avx2};

const pt_gemm_kernel *pt_gemm_avx2(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &avx2 : NULL;
}
#else
const pt_gemm_kernel *pt_gemm_avx2(void) { return NULL; }
#endif
