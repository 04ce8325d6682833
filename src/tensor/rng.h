/* rng.h: seeded random streams that give the same numbers on every run and
 * every machine.
 *
 * xoshiro256** seeded through splitmix64. Normal deviates use the polar
 * method with a logarithm computed here rather than by libm, whose last bit
 * may differ between C libraries, so initial weights are bit-reproducible.
 * A stream can be derived from a seed and a name (one per parameter), so what
 * a tensor gets does not depend on the order tensors are created in. */
#ifndef PT_TENSOR_RNG_H
#define PT_TENSOR_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t s[4];
} pt_rng;

void pt_rng_seed(pt_rng *r, uint64_t seed);
/* A stream for (seed, name): independent of other names. */
void pt_rng_seed_named(pt_rng *r, uint64_t seed, const char *name);
uint64_t pt_rng_next(pt_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double pt_rng_uniform(pt_rng *r);
/* Uniform integer in [0, n). */
uint64_t pt_rng_below(pt_rng *r, uint64_t n);
/* Standard normal deviate. */
double pt_rng_normal(pt_rng *r);
/* n standard normal deviates: the bits of n calls of pt_rng_normal, taken
 * several at a time where the CPU allows. */
void pt_rng_normals(pt_rng *r, double *x, size_t n);
/* Fills x[0..n) with normal(0, std): (float)(pt_rng_normal(r) * std) each. */
void pt_rng_fill_normal(pt_rng *r, float *x, size_t n, float std);

#endif
