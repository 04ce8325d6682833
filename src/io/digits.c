/* digits.c: loading, splitting and batching the 8x8 digits (see digits.h). */
#include "io/digits.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "tensor/error.h"
#include "tensor/rng.h"

#define FIELDS (PT_DIGITS_FEATURES + 1)

/* Parses one CSV line of 64 pixels and a label into row[0..65). */
static int parse_line(const char *path, long line_no, const char *line, int *row)
{
    const char *p = line;
    for (int f = 0; f < FIELDS; f++) {
        int max = f < PT_DIGITS_FEATURES ? 16 : PT_DIGITS_CLASSES - 1;
        const char *start = p;
        int v = 0, digits = 0;
        while (*p >= '0' && *p <= '9' && digits < 4) {
            v = v * 10 + (*p - '0');
            p++;
            digits++;
        }
        char end = f + 1 < FIELDS ? ',' : '\0';
        int at_end = *p == end || (end == '\0' && (*p == '\n' || *p == '\r'));
        if (digits > 0 && v <= max && end == ',' && (*p == '\0' || *p == '\n' || *p == '\r'))
            return pt_fail(PT_EFORMAT, "%s: line %ld: %d fields, expected %d", path, line_no, f + 1,
                           FIELDS);
        if (digits == 0 || !at_end || v > max) {
            size_t len = strcspn(start, ",\r\n");
            return pt_fail(PT_EFORMAT, "%s: line %ld: field %d is \"%.*s\", not %s 0..%d", path,
                           line_no, f + 1, (int)(len > 20 ? 20 : len), start,
                           f < PT_DIGITS_FEATURES ? "a pixel value" : "a label", max);
        }
        row[f] = v;
        if (*p == ',')
            p++;
    }
    while (*p == '\r' || *p == '\n')
        p++;
    if (*p != '\0')
        return pt_fail(PT_EFORMAT, "%s: line %ld: more than %d fields", path, line_no, FIELDS);
    return PT_OK;
}

/* All rows of the file, as ints, (n, 65). */
static int read_rows(const char *path, int **out, int *out_n)
{
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return pt_fail(PT_EIO, "%s: %s", path, errno ? strerror(errno) : "cannot open");
    int *rows = NULL, n = 0, cap = 0, r = PT_OK;
    char line[1024];
    long line_no = 0;
    while (gzgets(gz, line, sizeof line)) {
        line_no++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            r = pt_fail(PT_EFORMAT, "%s: line %ld is too long for a row of %d values", path,
                        line_no, FIELDS);
            break;
        }
        if (strspn(line, " \t\r\n") == len)
            continue; /* blank, e.g. at the end */
        if (n == cap) {
            int ncap = cap ? cap * 2 : 2048;
            int *nr = realloc(rows, (size_t)ncap * FIELDS * sizeof *nr);
            if (!nr) {
                r = pt_fail(PT_ENOMEM, "out of memory");
                break;
            }
            rows = nr;
            cap = ncap;
        }
        r = parse_line(path, line_no, line, rows + (size_t)n * FIELDS);
        if (r != PT_OK)
            break;
        n++;
    }
    int err;
    const char *msg = gzerror(gz, &err);
    if (r == PT_OK && err != Z_OK && err != Z_STREAM_END)
        r = pt_fail(PT_EFORMAT, "%s: after line %ld: %s", path, line_no,
                    err == Z_ERRNO ? strerror(errno) : msg);
    gzclose(gz);
    if (r == PT_OK && n < 2)
        r = pt_fail(PT_EFORMAT, "%s: %d rows: too few to split", path, n);
    if (r != PT_OK) {
        free(rows);
        return r;
    }
    *out = rows;
    *out_n = n;
    return PT_OK;
}

static int fill_split(pt_digits_split *s, const int *rows, const int *idx, int n)
{
    s->n = n;
    s->x = malloc((size_t)n * PT_DIGITS_FEATURES * sizeof *s->x);
    s->y = malloc((size_t)n * sizeof *s->y);
    if (!s->x || !s->y)
        return pt_fail(PT_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const int *row = rows + (size_t)idx[i] * FIELDS;
        for (int f = 0; f < PT_DIGITS_FEATURES; f++)
            s->x[(size_t)i * PT_DIGITS_FEATURES + f] = (float)row[f] / 16.0f;
        s->y[i] = row[PT_DIGITS_FEATURES];
    }
    return PT_OK;
}

int pt_digits_load(const char *path, double test_fraction, uint64_t split_seed, pt_digits *out)
{
    memset(out, 0, sizeof *out);
    if (!(test_fraction > 0.0 && test_fraction < 1.0))
        return pt_fail(PT_EINVAL, "test fraction %g is not in (0, 1)", test_fraction);
    int *rows, n;
    int r = read_rows(path, &rows, &n);
    if (r != PT_OK)
        return r;
    int *perm = malloc((size_t)n * sizeof *perm);
    if (!perm) {
        free(rows);
        return pt_fail(PT_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++)
        perm[i] = i;
    pt_rng rng;
    pt_rng_seed(&rng, split_seed);
    for (int i = n - 1; i > 0; i--) {
        int j = (int)pt_rng_below(&rng, (uint64_t)i + 1);
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    double want = (double)n * test_fraction;
    int n_test = (int)want;
    if ((double)n_test < want)
        n_test++;
    if (n_test >= n)
        n_test = n - 1;
    int n_train = n - n_test;
    r = fill_split(&out->train, rows, perm, n_train);
    if (r == PT_OK)
        r = fill_split(&out->test, rows, perm + n_train, n_test);
    free(perm);
    free(rows);
    if (r != PT_OK)
        pt_digits_free(out);
    return r;
}

void pt_digits_free(pt_digits *d)
{
    if (!d)
        return;
    free(d->train.x);
    free(d->train.y);
    free(d->test.x);
    free(d->test.y);
    memset(d, 0, sizeof *d);
}

int pt_digits_sampler_init(pt_digits_sampler *s, const pt_digits_split *data, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    if (!data || data->n < 1)
        return pt_fail(PT_EINVAL, "no samples to draw batches from");
    s->order = malloc((size_t)data->n * sizeof *s->order);
    if (!s->order)
        return pt_fail(PT_ENOMEM, "out of memory");
    s->data = data;
    s->seed = seed;
    s->order_epoch = UINT64_MAX;
    return PT_OK;
}

void pt_digits_sampler_free(pt_digits_sampler *s)
{
    free(s->order);
    s->order = NULL;
}

static void shuffle_epoch(pt_digits_sampler *s, uint64_t epoch)
{
    int n = s->data->n;
    pt_rng rng;
    /* One stream per epoch, a function of (seed, epoch) only. */
    pt_rng_seed(&rng, s->seed ^ (0x9e3779b97f4a7c15ULL * (epoch + 1)));
    for (int i = 0; i < n; i++)
        s->order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)pt_rng_below(&rng, (uint64_t)i + 1);
        int t = s->order[i];
        s->order[i] = s->order[j];
        s->order[j] = t;
    }
    s->order_epoch = epoch;
}

void pt_digits_batch_next(pt_digits_sampler *s, int B, float *x, int *y)
{
    uint64_t n = (uint64_t)s->data->n;
    for (int b = 0; b < B; b++, s->drawn++) {
        uint64_t epoch = s->drawn / n;
        if (epoch != s->order_epoch)
            shuffle_epoch(s, epoch);
        int i = s->order[s->drawn % n];
        memcpy(x + (size_t)b * PT_DIGITS_FEATURES, s->data->x + (size_t)i * PT_DIGITS_FEATURES,
               PT_DIGITS_FEATURES * sizeof *x);
        y[b] = s->data->y[i];
    }
}
