/* data_api.c: the data sets of the public API (include/pipetrain.h) as a
 * library user sees them: the digits and token batches, each a handle over
 * what the trainer reads (io/digits.h, io/text_data.h). The synthetic
 * regression set is its own file (io/regression.c). */
#include <stdlib.h>

#include "io/digits.h"
#include "io/text_data.h"
#include "tensor/error.h"
#include "text/text_tokens.h"

struct pt_digit_set {
    pt_digits d;
};

int pt_digit_set_load(const char *path, double test_fraction, uint64_t seed, pt_digit_set **out)
{
    *out = NULL;
    pt_digit_set *s = calloc(1, sizeof *s);
    if (!s)
        return pt_fail(PT_ENOMEM, "cannot allocate the digits");
    int rc = pt_digits_load(path, test_fraction, seed, &s->d);
    if (rc != PT_OK) {
        free(s);
        return rc;
    }
    *out = s;
    return PT_OK;
}

void pt_digit_set_destroy(pt_digit_set *s)
{
    if (!s)
        return;
    pt_digits_free(&s->d);
    free(s);
}

int pt_digit_set_split(const pt_digit_set *s, int split, const float **x, const int **y)
{
    const pt_digits_split *p = split ? &s->d.test : &s->d.train;
    *x = p->x;
    *y = p->y;
    return p->n;
}

struct pt_token_batches {
    pt_token_data data;
    pt_batch_sampler sampler;
    int B, T;
};

int pt_token_batches_open(const char *const *paths, int n_paths, const char *tokenizer, int vocab,
                          int seq_len, int batch, double val_fraction, uint64_t seed,
                          pt_token_batches **out)
{
    *out = NULL;
    pt_token_batches *b = calloc(1, sizeof *b);
    if (!b)
        return pt_fail(PT_ENOMEM, "cannot allocate token batches");
    int rc;
    if (pt_data_is_token_file(paths, n_paths))
        rc = pt_token_data_load_files(paths[0], NULL, vocab, val_fraction, &b->data);
    else if (tokenizer)
        rc = pt_text_data_encode_path(paths, n_paths, val_fraction, tokenizer, vocab, &b->data);
    else if (vocab != 256)
        rc = pt_fail(PT_EINVAL, "text read as bytes has a vocab of 256 (got %d)", vocab);
    else
        rc = pt_text_data_load(paths, n_paths, val_fraction, &b->data);
    if (rc == PT_OK)
        rc = pt_batch_sampler_init(&b->sampler, b->data.train, b->data.n_train, batch, seq_len,
                                   seed);
    if (rc != PT_OK) {
        pt_token_batches_destroy(b);
        return rc;
    }
    b->B = batch, b->T = seq_len;
    *out = b;
    return PT_OK;
}

void pt_token_batches_destroy(pt_token_batches *b)
{
    if (!b)
        return;
    pt_token_data_free(&b->data);
    free(b);
}

void pt_token_batches_next(pt_token_batches *b, int *tokens, int *targets)
{
    pt_batch_next(&b->sampler, tokens, targets);
}

size_t pt_token_batches_val_count(const pt_token_batches *b)
{
    return pt_eval_batch_count(b->data.n_val, b->B, b->T);
}

int pt_token_batches_val(const pt_token_batches *b, size_t k, int *tokens, int *targets)
{
    return pt_eval_batch(b->data.val, b->data.n_val, b->B, b->T, k, tokens, targets);
}
