/* gemm_avx2.c: the AVX2 + FMA3 micro-kernel of the fp32 product (gemm.h),
 * for x86-64 CPUs without AVX-512 (AMD Zen 1-3, Intel Haswell to Alder
 * Lake's cores).
 *
 * A tile of C is 6 rows x 16 columns: 12 ymm registers of sums, two for
 * the packed B row of each k and one for A's broadcast element, 15 of the
 * 16 there are: per k, 12 FMAs against 2 loads and 6 broadcasts, and 12
 * independent chains cover two FMA units' latency. The tile of C is
 * prefetched before the sums (3-4% on GPT's products when beta is 1, as for
 * every block of K after the first). Also here: packing's interleave on
 * AVX2 registers, which the AVX-512 kernel packs with too. Compiled for
 * AVX2 and FMA by a target attribute on each function alone. */
#include "tensor/gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define MR 6
#define NR 16

#define AVX2 __attribute__((target("avx2,fma")))

/* The tile, with A's element (i, p) at a[i a_row + p a_col]: a packed
 * panel (a_row 1, a_col MR) or MR rows of A read where they are (a_row
 * their stride, a_col 1). Inlined into each, so the packed tile's
 * addressing stays constant. */
AVX2 static inline __attribute__((always_inline)) void tile_body(int kc, const float *a, long a_row,
                                                                 long a_col, const float *b,
                                                                 float *c, long ldc, float alpha,
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
    for (int p = 0; p < kc; p++, a += a_col, b += NR) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            __m256 ai = _mm256_broadcast_ss(a + i * a_row);
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

AVX2 static void tile_avx2(int kc, const float *a, const float *b, float *c, long ldc, float alpha,
                           float beta, const float *bias)
{
    tile_body(kc, a, 1, MR, b, c, ldc, alpha, beta, bias);
}

AVX2 static void tile_rows_avx2(int kc, const float *a, long lda, const float *b, float *c,
                                long ldc, float alpha, float beta, const float *bias)
{
    tile_body(kc, a, lda, 1, b, c, ldc, alpha, beta, bias);
}

/* the 8 x 8 block r transposed: r[j] gets element j of each r[i] */
AVX2 static inline void transpose8(__m256 r[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* out[p][i] = src[i][p] for `width` streams (gemm.h), eight steps of p at a
 * time: each group of eight streams is loaded eight floats deep and
 * transposed in registers, where the portable loop moves one float at a
 * time (packing op(A) ran twice as fast). The last group may hold fewer
 * than eight streams (widths 6 and 12); it is padded with zeros, stored
 * first and eight wide: each row's spill lands on the start of the next
 * row, which is stored after it (by this group and then the others). Its
 * last row is stored with a mask, so nothing lands past the eight rows. */
AVX2 void pt_gemm_interleave_avx2(float *out, const float *const *src, int kc, int width)
{
    int p = 0;
    for (; p + 8 <= kc; p += 8) {
        for (int g = (width - 1) / 8 * 8; g >= 0; g -= 8) {
            int n = width - g < 8 ? width - g : 8;
            __m256 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = i < n ? _mm256_loadu_ps(src[g + i] + p) : _mm256_setzero_ps();
            transpose8(r);
            float *o = out + (size_t)p * width + g;
            for (int j = 0; j < 7; j++)
                _mm256_storeu_ps(o + (size_t)j * width, r[j]);
            __m256i mask =
                _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            _mm256_maskstore_ps(o + (size_t)7 * width, mask, r[7]);
        }
    }
    for (; p < kc; p++)
        for (int i = 0; i < width; i++)
            out[(size_t)p * width + i] = src[i][p];
}

static const pt_gemm_kernel avx2 = {
    "avx2", MR, NR, tile_avx2, tile_rows_avx2, pt_gemm_interleave_avx2};

const pt_gemm_kernel *pt_gemm_avx2(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &avx2 : NULL;
}
#else
const pt_gemm_kernel *pt_gemm_avx2(void) { return NULL; }
#endif
