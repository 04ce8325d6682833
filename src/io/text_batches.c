/* text_batches.c: (B, T) batches of token windows for language-model
 * training and evaluation (see text_data.h). The train command draws a
 * training batch per step with pt_batch_next() and evaluates on the fixed
 * pt_eval_batch() sequence. Tokens come out as int, the type the model's
 * micro-batches (pt_microbatch.tokens and .targets) hold. */
#include "io/text_data.h"
#include "tensor/error.h"

int pt_batch_sampler_init(pt_batch_sampler *s, const uint32_t *tokens, size_t n, int B, int T,
                          uint64_t seed)
{
    if (B < 1 || T < 1)
        return pt_fail(PT_EINVAL, "batch %d x sequence %d: both must be at least 1", B, T);
    if (!tokens || n < (size_t)T + 1)
        return pt_fail(PT_EINVAL,
                       "%zu tokens are too few for sequences of %d (need at least %d: inputs "
                       "and the target after them)",
                       n, T, T + 1);
    s->tokens = tokens;
    s->n = n;
    s->B = B;
    s->T = T;
    pt_rng_seed(&s->rng, seed);
    return PT_OK;
}

static void fill_row(const uint32_t *window, int T, int *inputs, int *targets)
{
    for (int t = 0; t < T; t++) {
        inputs[t] = window[t];
        targets[t] = window[t + 1];
    }
}

void pt_batch_next(pt_batch_sampler *s, int *inputs, int *targets)
{
    /* Window [off, off + T] must fit: off <= n - T - 1. */
    uint64_t positions = (uint64_t)(s->n - (size_t)s->T);
    for (int b = 0; b < s->B; b++) {
        size_t off = (size_t)pt_rng_below(&s->rng, positions);
        fill_row(s->tokens + off, s->T, inputs + (size_t)b * s->T, targets + (size_t)b * s->T);
    }
}

size_t pt_eval_batch_count(size_t n, int B, int T)
{
    if (B < 1 || T < 1 || n < 1)
        return 0;
    /* The last window needs one token past its end for its last target. */
    return (n - 1) / ((size_t)B * (size_t)T);
}

int pt_eval_batch(const uint32_t *tokens, size_t n, int B, int T, size_t k, int *inputs,
                  int *targets)
{
    size_t count = pt_eval_batch_count(n, B, T);
    if (k >= count)
        return pt_fail(
            PT_EINVAL,
            "evaluation batch %zu does not exist: %zu tokens hold %zu batches of %d x %d", k, n,
            count, B, T);
    for (int b = 0; b < B; b++) {
        size_t off = (k * (size_t)B + (size_t)b) * (size_t)T;
        fill_row(tokens + off, T, inputs + (size_t)b * T, targets + (size_t)b * T);
    }
    return PT_OK;
}
