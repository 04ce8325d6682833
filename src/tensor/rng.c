/* rng.c: see rng.h. */
#include "tensor/rng.h"

#include <math.h>
#include <stdbool.h>

#include "tensor/simd.h"

#if PT_SIMD_X86
#include <immintrin.h>
#endif

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void pt_rng_seed(pt_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

void pt_rng_seed_named(pt_rng *r, uint64_t seed, const char *name)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 1099511628211ULL;
    }
    pt_rng_seed(r, seed ^ h);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256**'s step; inlined into the draws below */
static inline uint64_t next(pt_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t pt_rng_next(pt_rng *r) { return next(r); }

static inline double uniform(pt_rng *r) { return (double)(next(r) >> 11) * 0x1.0p-53; }

double pt_rng_uniform(pt_rng *r) { return uniform(r); }

uint64_t pt_rng_below(pt_rng *r, uint64_t n)
{
    /* Rejection keeps the draw exactly uniform. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = next(r);
    while (x >= limit);
    return x % n;
}

/* Natural logarithm for x > 0 from frexp and the atanh series: exact IEEE
 * operations only, so the same on every machine. The series stops where a
 * term is below an eighth of the sum's last place: |z| < 0.18, so every
 * later term is smaller still, and adding any of them (to nearest) would
 * leave the sum as it is; the result is the one of all 30 terms.
 * normals_avx2 below runs the same operations on four at a time. */
static double portable_log(double x)
{
    int e;
    double m = frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        e -= 1;
    }
    double z = (m - 1.0) / (m + 1.0), z2 = z * z, term = z, sum = 0.0;
    for (int k = 1; k < 60; k += 2) {
        double t = term / k;
        if (fabs(t) < fabs(sum) * 0x1p-56)
            break;
        sum += t;
        term *= z2;
    }
    return 2.0 * sum + e * 0.69314718055994530942;
}

/* The polar method's try: u, and s = u^2 + v^2, taken when inside(s). */
static inline double polar_try(pt_rng *r, double *u)
{
    *u = 2.0 * uniform(r) - 1.0;
    double v = 2.0 * uniform(r) - 1.0;
    return *u * *u + v * v;
}

static bool inside(double s) { return s < 1.0 && s != 0.0; }

static double polar_normal(double u, double s) { return u * sqrt(-2.0 * portable_log(s) / s); }

double pt_rng_normal(pt_rng *r)
{
    double u, s;
    do
        s = polar_try(r, &u);
    while (!inside(s));
    return polar_normal(u, s);
}

#if PT_SIMD_X86
/* portable_log's reduction on four points: s = m 2^e with m in [sqrt(1/2),
 * sqrt 2), from the bits (s is a normal double, at least 2^-104), and z =
 * (m - 1) / (m + 1). */
PT_TARGET_AVX2 static inline __m256d log_reduce(__m256d s, __m256d *e)
{
    const __m256d one = _mm256_set1_pd(1.0);
    __m256i bits = _mm256_castpd_si256(s), field = _mm256_srli_epi64(bits, 52); /* s > 0 */
    /* frexp: m in [0.5, 1) with the exponent field set to 1022, e = field - 1022 */
    __m256d m = _mm256_castsi256_pd(
        _mm256_or_si256(_mm256_andnot_si256(_mm256_set1_epi64x(0x7ff0000000000000LL), bits),
                        _mm256_set1_epi64x(0x3fe0000000000000LL)));
    *e = _mm256_sub_pd(
        _mm256_castsi256_pd(_mm256_or_si256(field, _mm256_set1_epi64x(0x4330000000000000LL))),
        _mm256_set1_pd(0x1p52 + 1022.0));
    __m256d low = _mm256_cmp_pd(m, _mm256_set1_pd(0.70710678118654752440), _CMP_LT_OQ);
    m = _mm256_blendv_pd(m, _mm256_mul_pd(m, _mm256_set1_pd(2.0)), low);
    *e = _mm256_blendv_pd(*e, _mm256_sub_pd(*e, one), low);
    return _mm256_div_pd(_mm256_sub_pd(m, one), _mm256_add_pd(m, one));
}

/* portable_log and polar_normal on four points: each lane does the scalar
 * code's operations in its order and stops adding where the scalar loop
 * breaks, so every lane's bits are the scalar's. n is a multiple of 4.
 * (Two vectors' series side by side ran no faster.) */
PT_TARGET_AVX2 static void normals_avx2(const double *u, const double *s, double *x, size_t n)
{
    const __m256d sign = _mm256_set1_pd(-0.0), ulp = _mm256_set1_pd(0x1p-56);
    for (size_t i = 0; i < n; i += 4) {
        __m256d sv = _mm256_loadu_pd(s + i), e, term = log_reduce(sv, &e);
        __m256d z2 = _mm256_mul_pd(term, term), sum = _mm256_setzero_pd();
        __m256d active = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
        for (int k = 1; k < 60; k += 2) {
            __m256d t = _mm256_div_pd(term, _mm256_set1_pd(k));
            __m256d small =
                _mm256_cmp_pd(_mm256_andnot_pd(sign, t),
                              _mm256_mul_pd(_mm256_andnot_pd(sign, sum), ulp), _CMP_LT_OQ);
            active = _mm256_andnot_pd(small, active);
            if (!_mm256_movemask_pd(active))
                break;
            sum = _mm256_blendv_pd(sum, _mm256_add_pd(sum, t), active);
            term = _mm256_mul_pd(term, z2);
        }
        __m256d log = _mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(2.0), sum),
                                    _mm256_mul_pd(e, _mm256_set1_pd(0.69314718055994530942)));
        __m256d r = _mm256_sqrt_pd(_mm256_div_pd(_mm256_mul_pd(_mm256_set1_pd(-2.0), log), sv));
        _mm256_storeu_pd(x + i, _mm256_mul_pd(_mm256_loadu_pd(u + i), r));
    }
}
#endif

enum { BATCH = 256 };

/* At most BATCH normals: the points drawn in turn, as pt_rng_normal draws
 * them, then their normals four at a time where the CPU has AVX2 (about
 * half of the time each: the stream's steps are one chain). */
static void normals_batch(pt_rng *r, double *x, size_t n)
{
    double u[BATCH], s[BATCH];
    for (size_t j = 0; j < n;) { /* a rejected try is overwritten: no branch */
        s[j] = polar_try(r, &u[j]);
        j += inside(s[j]);
    }
    size_t i = 0;
#if PT_SIMD_X86
    if (pt_simd_level_of_cpu() >= PT_SIMD_AVX2) {
        i = n / 4 * 4;
        normals_avx2(u, s, x, i);
    }
#endif
    for (; i < n; i++)
        x[i] = polar_normal(u[i], s[i]);
}

void pt_rng_normals(pt_rng *r, double *x, size_t n)
{
    for (size_t at = 0; at < n; at += BATCH)
        normals_batch(r, x + at, n - at < BATCH ? n - at : BATCH);
}

void pt_rng_fill_normal(pt_rng *r, float *x, size_t n, float std)
{
    double d[BATCH];
    for (size_t at = 0; at < n; at += BATCH) {
        size_t len = n - at < BATCH ? n - at : BATCH;
        normals_batch(r, d, len);
        for (size_t i = 0; i < len; i++)
            x[at + i] = (float)(d[i] * std);
    }
}
