/* test_rng: the random streams are the same bits on every machine and in
 * every version, so a seed gives the same initial weights wherever it runs.
 * The normal draws of two seeds are pinned as exact doubles (the values the
 * atanh series gives with all its 30 terms), and a million draws are summed
 * exactly as before; the moments of the draws are checked too. Draws
 * taken in batches (four at a time on AVX2), and a tensor's fill, give the
 * bits of one draw after another on every vector path the CPU has. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "tensor/rng.h"
#include "tensor/simd.h"

/* n draws of seed 11 by pt_rng_normals and by pt_rng_fill_normal against
 * pt_rng_normal's, at every length up to 9 (the four-wide path's tails) and
 * at n. */
static void check_batches(size_t n, float std)
{
    const char *path = pt_simd_name(pt_simd_level_of_cpu());
    double *d = malloc(n * sizeof(double));
    float *x = malloc(n * sizeof(float));
    CHECK(d && x, "cannot allocate %zu draws", n);
    for (size_t len = 1; d && x; len = len < 9 ? len + 1 : n) {
        pt_rng a, b, c;
        pt_rng_seed(&a, 11);
        pt_rng_seed(&b, 11);
        pt_rng_seed(&c, 11);
        pt_rng_normals(&a, d, len);
        pt_rng_fill_normal(&c, x, len, std);
        size_t bad = len, bad_float = len;
        for (size_t i = 0; i < len; i++) {
            double want = pt_rng_normal(&b);
            bad = bad == len && d[i] != want ? i : bad;
            bad_float = bad_float == len && x[i] != (float)(want * std) ? i : bad_float;
        }
        CHECK(bad == len, "%s: normal %zu of %zu differs from pt_rng_normal's", path, bad, len);
        CHECK(bad_float == len, "%s: fill %zu of %zu differs", path, bad_float, len);
        uint64_t next = pt_rng_next(&b);
        CHECK(pt_rng_next(&a) == next && pt_rng_next(&c) == next,
              "%s: %zu draws leave the stream elsewhere", path, len);
        if (len == n)
            break;
    }
    free(d);
    free(x);
}

int main(void)
{
    static const double first[] = {0x1.9356a7a1bbe22p-1, -0x1.45648f30d6b8ep-1,
                                   0x1.430bd816b81ecp-4, 0x1.48298177b4179p-3,
                                   0x1.bc6e210b757c2p-1, 0x1.2750fef4397fdp-1};
    pt_rng r;
    pt_rng_seed(&r, 2024);
    for (int i = 0; i < 6; i++) {
        double x = pt_rng_normal(&r);
        CHECK(x == first[i], "normal draw %d of seed 2024: %a, not %a", i, x, first[i]);
    }

    enum { N = 1000000 };
    pt_rng_seed(&r, 7);
    double sum = 0.0, squares = 0.0;
    for (int i = 0; i < N; i++) {
        double x = pt_rng_normal(&r);
        sum += x;
        squares += x * x;
    }
    CHECK(sum == -0x1.95bb3383f4a4ap+6, "sum of a million draws of seed 7: %a", sum);
    double mean = sum / N, var = squares / N - mean * mean;
    CHECK(fabs(mean) < 5.0 / sqrt(N), "mean of the normal draws %g", mean);
    CHECK(fabs(var - 1.0) < 0.01, "variance of the normal draws %g", var);

    pt_simd_level widest = pt_simd_level_of_cpu();
    for (int level = PT_SIMD_PORTABLE; level <= (int)widest; level++) {
        pt_simd_limit((pt_simd_level)level);
        check_batches(1000003, 0.02f);
    }
    pt_simd_limit(PT_SIMD_AVX512);
    return failures != 0;
}
