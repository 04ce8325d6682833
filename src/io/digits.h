/* digits.h: scikit-learn's 8x8 handwritten digits, the labelled data set the
 * mlp model trains on.
 *
 * The file is sklearn's digits.csv.gz (from Debian's python3-sklearn; the
 * setup script puts it at data/digits.csv.gz): gzip-compressed CSV, no
 * header, one image per line: 64 pixel values 0..16 (row-major 8x8), then
 * the label 0..9; 1797 lines. A plain uncompressed CSV reads too.
 *
 * Features are scaled to [0, 1] (divided by 16). The split is deterministic:
 * the rows are shuffled with a pt_rng seeded by split_seed (Fisher-Yates from
 * the last row down), and the last ceil(n * test_fraction) rows of the
 * shuffled order are the test set, as scikit-learn's train_test_split sizes
 * it. Callers: the train command (--model mlp) and tests. */
#ifndef PT_IO_DIGITS_H
#define PT_IO_DIGITS_H

#include "pipetrain.h"

#include <stddef.h>
#include <stdint.h>

#define PT_DIGITS_FEATURES              64
#define PT_DIGITS_CLASSES               10
#define PT_DIGITS_TEST_FRACTION_DEFAULT 0.2

typedef struct {
    float *x; /* (n, 64), in [0, 1] */
    int *y;   /* (n), in 0..9 */
    int n;
} pt_digits_split;

typedef struct {
    pt_digits_split train, test;
} pt_digits;

/* Loads and splits; 0 < test_fraction < 1. PT_EIO if the file cannot be
 * opened, PT_EFORMAT naming the line and field of a malformed value. */
int pt_digits_load(const char *path, double test_fraction, uint64_t split_seed, pt_digits *out);
void pt_digits_free(pt_digits *d);

/* Training batches by epochs: each epoch visits every sample once, in an
 * order shuffled by (seed, epoch number), so a batch depends only on the
 * seed and `drawn`, the samples handed out so far. A checkpoint saves
 * `drawn` (and the seed) to resume the exact sequence. */
typedef struct {
    const pt_digits_split *data; /* not owned */
    uint64_t seed;
    uint64_t drawn;
    int *order;           /* the current epoch's order (owned) */
    uint64_t order_epoch; /* which epoch `order` holds; UINT64_MAX: none */
} pt_digits_sampler;

int pt_digits_sampler_init(pt_digits_sampler *s, const pt_digits_split *data, uint64_t seed);
void pt_digits_sampler_free(pt_digits_sampler *s);
/* Fills x (B, 64) and y (B); a batch may straddle two epochs. */
void pt_digits_batch_next(pt_digits_sampler *s, int B, float *x, int *y);

#endif
