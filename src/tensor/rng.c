/* rng.c: see rng.h. */
#include "tensor/rng.h"

#include <math.h>

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

uint64_t pt_rng_next(pt_rng *r)
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

double pt_rng_uniform(pt_rng *r) { return (double)(pt_rng_next(r) >> 11) * 0x1.0p-53; }

uint64_t pt_rng_below(pt_rng *r, uint64_t n)
{
    /* Rejection keeps the draw exactly uniform. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = pt_rng_next(r);
    while (x >= limit);
    return x % n;
}

/* Natural logarithm for x > 0 from frexp and the atanh series: exact IEEE
 * operations only, so the same on every machine. The series stops where a
 * term is below an eighth of the sum's last place: |z| < 0.18, so every
 * later term is smaller still, and adding any of them (to nearest) would
 * leave the sum as it is; the result is the one of all 30 terms. */
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

double pt_rng_normal(pt_rng *r)
{
    double u, v, s;
    do {
        u = 2.0 * pt_rng_uniform(r) - 1.0;
        v = 2.0 * pt_rng_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    return u * sqrt(-2.0 * portable_log(s) / s);
}

void pt_rng_fill_normal(pt_rng *r, float *x, size_t n, float std)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(pt_rng_normal(r) * std);
}
