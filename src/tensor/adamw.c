/* adamw.c: AdamW's update and the clip's sum of squares on AVX-512, AVX2
 * or plain C (adamw.h). The vector paths spell out the portable loop's
 * operations lane by lane, so they agree with it on every bit. */
#include "tensor/adamw.h"

#include <math.h>

#include "tensor/simd.h"

/* one element, as every path computes it */
static inline void adamw_one(const pt_adamw_step *s, float *w, const float *g, float *m1, float *m2)
{
    float grad = *g * s->clip;
    *m1 = s->beta1 * *m1 + (1.0f - s->beta1) * grad;
    *m2 = s->beta2 * *m2 + (1.0f - s->beta2) * grad * grad;
    float mhat = *m1 / s->corr1, vhat = *m2 / s->corr2;
    *w -= s->lr * (mhat / (sqrtf(vhat) + s->eps) + s->decay * *w);
}

#define LANES 8 /* the sum's partial sums */

static double sum_lanes(const double *acc, const float *x, size_t from, size_t n)
{
    double sum = 0.0;
    for (int l = 0; l < LANES; l++)
        sum += acc[l];
    for (size_t i = from; i < n; i++)
        sum += (double)x[i] * x[i];
    return sum;
}

static void adamw_portable(const pt_adamw_step *s, float *w, const float *g, float *m1, float *m2,
                           size_t n)
{
    for (size_t i = 0; i < n; i++)
        adamw_one(s, w + i, g + i, m1 + i, m2 + i);
}

static double sum_squares_portable(const float *x, size_t n)
{
    double acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] += (double)x[i + l] * x[i + l];
    return sum_lanes(acc, x, i, n);
}

#if PT_SIMD_X86
#include <immintrin.h>

/* The update on W floats of a vector type V: the ops of adamw_one, in order.
 * OP(name) is the vector width's intrinsic prefix. */
#define ADAMW_BODY(V, W, OP)                                                                     \
    V b1 = OP(set1_ps)(s->beta1), b2 = OP(set1_ps)(s->beta2);                                    \
    V c1 = OP(set1_ps)(1.0f - s->beta1), c2 = OP(set1_ps)(1.0f - s->beta2);                      \
    V k1 = OP(set1_ps)(s->corr1), k2 = OP(set1_ps)(s->corr2), eps = OP(set1_ps)(s->eps);         \
    V lr = OP(set1_ps)(s->lr), clip = OP(set1_ps)(s->clip), dec = OP(set1_ps)(s->decay);         \
    size_t i = 0;                                                                                \
    for (; i + W <= n; i += W) {                                                                 \
        V grad = OP(mul_ps)(OP(loadu_ps)(g + i), clip);                                          \
        V a = OP(add_ps)(OP(mul_ps)(b1, OP(loadu_ps)(m1 + i)), OP(mul_ps)(c1, grad));            \
        V v = OP(add_ps)(OP(mul_ps)(b2, OP(loadu_ps)(m2 + i)),                                   \
                         OP(mul_ps)(OP(mul_ps)(c2, grad), grad));                                \
        OP(storeu_ps)(m1 + i, a);                                                                \
        OP(storeu_ps)(m2 + i, v);                                                                \
        V x = OP(loadu_ps)(w + i);                                                               \
        V step = OP(div_ps)(OP(div_ps)(a, k1), OP(add_ps)(OP(sqrt_ps)(OP(div_ps)(v, k2)), eps)); \
        step = OP(add_ps)(step, OP(mul_ps)(dec, x));                                             \
        OP(storeu_ps)(w + i, OP(sub_ps)(x, OP(mul_ps)(lr, step)));                               \
    }                                                                                            \
    adamw_portable(s, w + i, g + i, m1 + i, m2 + i, n - i)

#define M512(name) _mm512_##name
#define M256(name) _mm256_##name

PT_TARGET_AVX512 static void adamw_avx512(const pt_adamw_step *s, float *w, const float *g,
                                          float *m1, float *m2, size_t n)
{
    ADAMW_BODY(__m512, 16, M512);
}

PT_TARGET_AVX2 static void adamw_avx2(const pt_adamw_step *s, float *w, const float *g, float *m1,
                                      float *m2, size_t n)
{
    ADAMW_BODY(__m256, 8, M256);
}

PT_TARGET_AVX512 static double sum_squares_avx512(const float *x, size_t n)
{
    __m512d acc = _mm512_setzero_pd();
    double lanes[LANES];
    size_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        __m512d d = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
        acc = _mm512_add_pd(acc, _mm512_mul_pd(d, d));
    }
    _mm512_storeu_pd(lanes, acc);
    return sum_lanes(lanes, x, i, n);
}

PT_TARGET_AVX2 static double sum_squares_avx2(const float *x, size_t n)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    double lanes[LANES];
    size_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(x + i)),
                b = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
        lo = _mm256_add_pd(lo, _mm256_mul_pd(a, a));
        hi = _mm256_add_pd(hi, _mm256_mul_pd(b, b));
    }
    _mm256_storeu_pd(lanes, lo);
    _mm256_storeu_pd(lanes + 4, hi);
    return sum_lanes(lanes, x, i, n);
}
#endif

void pt_adamw_update(const pt_adamw_step *s, float *w, const float *g, float *m1, float *m2,
                     size_t n)
{
#if PT_SIMD_X86
    pt_simd_level level = pt_simd_level_of_cpu();
    if (level == PT_SIMD_AVX512)
        adamw_avx512(s, w, g, m1, m2, n);
    else if (level == PT_SIMD_AVX2)
        adamw_avx2(s, w, g, m1, m2, n);
    else
#endif
        adamw_portable(s, w, g, m1, m2, n);
}

double pt_sum_squares(const float *x, size_t n)
{
#if PT_SIMD_X86
    pt_simd_level level = pt_simd_level_of_cpu();
    if (level == PT_SIMD_AVX512)
        return sum_squares_avx512(x, n);
    if (level == PT_SIMD_AVX2)
        return sum_squares_avx2(x, n);
#endif
    return sum_squares_portable(x, n);
}
