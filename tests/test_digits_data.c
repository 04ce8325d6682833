/* test_digits_data: scikit-learn's digits as the mlp reads them: 1797 rows
 * of 64 features scaled to [0, 1] (multiples of 1/16) and labels 0..9,
 * split 1437 / 360 the same way for the same seed and another way for
 * another seed; the batch sampler visits each training sample once per
 * epoch and resumes from `drawn`; a malformed file is refused naming the
 * line and field. The data file comes from scripts/install-deps.sh
 * (data/digits.csv.gz in the source tree); without it the test is skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "io/digits.h"

#include "check.h"

static void check_split(const char *what, const pt_digits_split *s)
{
    int counts[PT_DIGITS_CLASSES] = {0}, bad_x = 0, bad_y = 0;
    for (int i = 0; i < s->n; i++) {
        for (int f = 0; f < PT_DIGITS_FEATURES; f++) {
            float v = s->x[(size_t)i * PT_DIGITS_FEATURES + f];
            float sixteenths = v * 16.0f;
            bad_x += !(v >= 0.0f && v <= 1.0f) || sixteenths != (float)(int)sixteenths;
        }
        if (s->y[i] < 0 || s->y[i] >= PT_DIGITS_CLASSES)
            bad_y++;
        else
            counts[s->y[i]]++;
    }
    CHECK(bad_x == 0, "%s: %d features outside [0, 1] or not k/16", what, bad_x);
    CHECK(bad_y == 0, "%s: %d labels outside 0..9", what, bad_y);
    for (int c = 0; c < PT_DIGITS_CLASSES; c++)
        CHECK(counts[c] > s->n / 20, "%s: class %d has only %d samples", what, c, counts[c]);
}

static int same_split(const pt_digits_split *a, const pt_digits_split *b)
{
    return a->n == b->n &&
           memcmp(a->x, b->x, (size_t)a->n * PT_DIGITS_FEATURES * sizeof(float)) == 0 &&
           memcmp(a->y, b->y, (size_t)a->n * sizeof(int)) == 0;
}

static void sampler(const pt_digits_split *train)
{
    pt_digits_sampler s, s2;
    CHECK(pt_digits_sampler_init(&s, train, 5) == PT_OK, "init: %s", pt_last_error());
    CHECK(pt_digits_sampler_init(&s2, train, 5) == PT_OK, "init: %s", pt_last_error());
    enum { B = 32 };
    float x[B * PT_DIGITS_FEATURES], x2[B * PT_DIGITS_FEATURES];
    int y[B], y2[B];
    /* One epoch in batches of 32 (the last straddles into the next epoch):
     * the label histogram of the first n draws is the training set's. */
    int want[PT_DIGITS_CLASSES] = {0}, got[PT_DIGITS_CLASSES] = {0};
    for (int i = 0; i < train->n; i++)
        want[train->y[i]]++;
    int drawn = 0;
    while (drawn < train->n) {
        pt_digits_batch_next(&s, B, x, y);
        for (int b = 0; b < B && drawn < train->n; b++, drawn++)
            got[y[b]]++;
    }
    CHECK(memcmp(want, got, sizeof want) == 0, "an epoch does not visit every sample once");
    /* Resuming from `drawn` gives the same next batch. */
    s2.drawn = s.drawn;
    pt_digits_batch_next(&s, B, x, y);
    pt_digits_batch_next(&s2, B, x2, y2);
    CHECK(memcmp(x, x2, sizeof x) == 0 && memcmp(y, y2, sizeof y) == 0,
          "resumed sampler gave another batch");
    /* A sample's features travel with its label. */
    pt_digits_sampler_free(&s);
    pt_digits_sampler_free(&s2);
}

static void refusals(void)
{
    char dir[] = "/tmp/pt_digits_XXXXXX", path[256];
    if (!mkdtemp(dir))
        return;
    snprintf(path, sizeof path, "%s/bad.csv.gz", dir);
    const char *cases[][2] = {
        {"0,1,2", "line 1: 3 fields, expected 65"},
        {"0,,2", "line 1: field 2 is \"\", not a pixel value"},
        {"17,0,0", "line 1: field 1 is \"17\", not a pixel value 0..16"},
        {"x,0,0", "line 1: field 1 is \"x\""},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gzFile gz = gzopen(path, "wb");
        gzprintf(gz, "%s\n", cases[c][0]);
        gzclose(gz);
        pt_digits d;
        int r = pt_digits_load(path, 0.2, 1, &d);
        CHECK(r == PT_EFORMAT && strstr(pt_last_error(), cases[c][1]) &&
                  strstr(pt_last_error(), "bad.csv.gz"),
              "case %zu: %d \"%s\"", c, r, pt_last_error());
    }
    /* A good row, then a label out of range on line 2. */
    gzFile gz = gzopen(path, "wb");
    for (int line = 0; line < 2; line++) {
        for (int f = 0; f < PT_DIGITS_FEATURES; f++)
            gzprintf(gz, "%d,", f % 17);
        gzprintf(gz, "%d\n", line ? 10 : 3);
    }
    gzclose(gz);
    pt_digits d;
    int r = pt_digits_load(path, 0.2, 1, &d);
    CHECK(r == PT_EFORMAT && strstr(pt_last_error(), "line 2: field 65 is \"10\", not a label"),
          "bad label: %d \"%s\"", r, pt_last_error());
    /* A gzip stream cut short. */
    gz = gzopen(path, "wb");
    for (int line = 0; line < 200; line++) {
        for (int f = 0; f < PT_DIGITS_FEATURES; f++)
            gzprintf(gz, "%d,", (line * 31 + f * 7) % 17);
        gzprintf(gz, "%d\n", line % 10);
    }
    gzclose(gz);
    FILE *f = fopen(path, "r+b");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    CHECK(truncate(path, size / 2) == 0, "truncate");
    r = pt_digits_load(path, 0.2, 1, &d);
    CHECK(r == PT_EFORMAT, "truncated gzip: %d \"%s\"", r, pt_last_error());
    if (r == PT_OK)
        pt_digits_free(&d);
    snprintf(path, sizeof path, "%s/absent.csv.gz", dir);
    r = pt_digits_load(path, 0.2, 1, &d);
    CHECK(r == PT_EIO && strstr(pt_last_error(), "absent.csv.gz"), "absent: %d", r);
    snprintf(path, sizeof path, "%s/bad.csv.gz", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    refusals();

    const char *data = getenv("PT_TEST_DATA");
    char path[1024];
    snprintf(path, sizeof path, "%s/../../data/digits.csv.gz", data ? data : "tests/data");
    if (access(path, R_OK) != 0) {
        printf("%s not found (scripts/install-deps.sh puts it there): skipping\n", path);
        return failures ? 1 : 77;
    }
    pt_digits d, again, other;
    int r = pt_digits_load(path, PT_DIGITS_TEST_FRACTION_DEFAULT, 1, &d);
    CHECK(r == PT_OK, "load: %s", pt_last_error());
    if (r != PT_OK)
        return 1;
    CHECK(d.train.n + d.test.n == 1797, "%d rows", d.train.n + d.test.n);
    CHECK(d.test.n == 360 && d.train.n == 1437, "split %d / %d, expected 1437 / 360", d.train.n,
          d.test.n);
    check_split("train", &d.train);
    check_split("test", &d.test);

    CHECK(pt_digits_load(path, 0.2, 1, &again) == PT_OK, "reload");
    CHECK(same_split(&d.train, &again.train) && same_split(&d.test, &again.test),
          "the same seed gave another split");
    CHECK(pt_digits_load(path, 0.2, 2, &other) == PT_OK, "reload");
    CHECK(!same_split(&d.test, &other.test), "seeds 1 and 2 gave the same split");
    pt_digits_free(&again);
    pt_digits_free(&other);

    sampler(&d.train);
    pt_digits_free(&d);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("digits: ok\n");
    return 0;
}
