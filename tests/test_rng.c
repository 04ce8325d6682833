/* test_rng: the random streams are the same bits on every machine and in
 * every version, so a seed gives the same initial weights wherever it runs.
 * The normal draws of two seeds are pinned as exact doubles (the values the
 * atanh series gives with all its 30 terms), and a million draws are summed
 * exactly as before; the moments of the draws are checked too. */
#include <math.h>

#include "check.h"
#include "tensor/rng.h"

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
    return failures != 0;
}
