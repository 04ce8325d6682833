/* fuzz_digits: the digits CSV reader (src/io/digits.c): 64 pixel values
 * 0..16 and a label 0..9 per line, plain or gzip-compressed (zlib's gzopen
 * reads both). The input is written as a file and loaded with
 * pt_digits_load(); a split it accepts must hold features in [0, 1] and
 * labels in 0..9, and a batch drawn from its training half must be its
 * rows. */
#include <stdlib.h>

#include "io/digits.h"

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096];
    pt_digits d;
    fuzz_write("digits.csv.gz", data, size, path, sizeof path);
    if (pt_digits_load(path, 0.2, 7, &d) != PT_OK)
        return 0;
    FUZZ_REQUIRE(d.train.n >= 1 && d.test.n >= 1, "split %d / %d", d.train.n, d.test.n);
    const pt_digits_split *parts[2] = {&d.train, &d.test};
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < parts[p]->n; i++) {
            FUZZ_REQUIRE(parts[p]->y[i] >= 0 && parts[p]->y[i] < PT_DIGITS_CLASSES, "label %d",
                         parts[p]->y[i]);
            for (int f = 0; f < PT_DIGITS_FEATURES; f++) {
                float x = parts[p]->x[(size_t)i * PT_DIGITS_FEATURES + f];
                FUZZ_REQUIRE(x >= 0.0f && x <= 1.0f, "feature %g", x);
            }
        }
    pt_digits_sampler s;
    float x[3 * PT_DIGITS_FEATURES];
    int y[3];
    FUZZ_REQUIRE(pt_digits_sampler_init(&s, &d.train, 1) == PT_OK, "sampler");
    pt_digits_batch_next(&s, 3, x, y);
    for (int b = 0; b < 3; b++)
        FUZZ_REQUIRE(y[b] >= 0 && y[b] < PT_DIGITS_CLASSES, "batch label %d", y[b]);
    pt_digits_sampler_free(&s);
    pt_digits_free(&d);
    return 0;
}
