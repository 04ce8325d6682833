/* block_harness.h: a single block on its own, for the block tests: its
 * parameters and gradients allocated and filled with random values, a
 * micro-batch of random tokens, inputs and targets, and the loss
 * L = sum(out * R) for a fixed random R (so dL/dout = R), or the block's own
 * loss for the loss heads. Header-only: each test includes it once. */
#ifndef PT_TESTS_BLOCK_HARNESS_H
#define PT_TESTS_BLOCK_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/block.h"
#include "tensor/arena.h"

typedef struct {
    pt_block b;
    int B, is_loss;
    pt_microbatch mb;
    int *tokens, *targets;
    float *in, *out, *saved, *R, *din;
    float *grads, *work; /* the block's b->grads and b->work */
    size_t n_in, n_out, n_saved;
} harness;

static inline float *harness_floats(size_t n) { return pt_alloc_floats(n ? n : 1); }

/* The block's grads area and workspace for B samples under its kernels */
static inline float *harness_grads(const pt_block *b, int B)
{
    return harness_floats(pt_arena_floats_for(b->ops->grads_bytes ? b->ops->grads_bytes(b, B) : 0));
}
static inline float *harness_work(const pt_block *b, int B)
{
    return harness_floats(pt_arena_floats_for(b->ops->work_bytes ? b->ops->work_bytes(b, B) : 0));
}

static inline void harness_fill(pt_rng *r, float *x, size_t n, float mean, float std)
{
    for (size_t i = 0; i < n; i++)
        x[i] = mean + (float)pt_rng_normal(r) * std;
}

/* b must have been initialised by its constructor; V/classes bound the
 * tokens and targets. */
static inline void harness_setup(harness *h, int B, int is_loss, int targets_per_sample, int V,
                                 uint64_t seed)
{
    pt_rng r;
    pt_rng_seed(&r, seed);
    h->b.k = pt_kernels_cpu();
    h->B = B;
    h->is_loss = is_loss;
    for (int i = 0; i < h->b.n_params; i++) {
        size_t n = pt_param_decl_numel(&h->b.decl[i]);
        h->b.p[i] = harness_floats(n);
        h->b.g[i] = harness_floats(n);
        float mean = h->b.decl[i].init == PT_INIT_ONES ? 1.0f : 0.0f;
        harness_fill(&r, h->b.p[i], n, mean, 0.3f);
    }
    int nt = B * (targets_per_sample ? targets_per_sample : 1);
    h->tokens = calloc((size_t)nt, sizeof(int));
    h->targets = calloc((size_t)nt, sizeof(int));
    for (int i = 0; i < nt; i++) {
        h->tokens[i] = (int)pt_rng_below(&r, (uint64_t)V);
        h->targets[i] = (int)pt_rng_below(&r, (uint64_t)V);
    }
    h->n_in = (size_t)B * h->b.in_floats;
    h->n_out = (size_t)B * h->b.out_floats;
    h->n_saved = pt_arena_floats_for(h->b.ops->saved_bytes(&h->b, B));
    h->in = harness_floats(h->n_in);
    h->din = harness_floats(h->n_in);
    h->out = harness_floats(h->n_out);
    h->saved = harness_floats(h->n_saved);
    h->R = harness_floats(h->n_out);
    h->b.grads = h->grads = harness_grads(&h->b, B);
    h->b.work = h->work = harness_work(&h->b, B);
    harness_fill(&r, h->in, h->n_in, 0.0f, 1.0f);
    harness_fill(&r, h->R, h->n_out, 0.0f, 1.0f);
    h->mb =
        (pt_microbatch){.batch = B, .tokens = h->tokens, .inputs = h->in, .targets = h->targets};
}

static inline void harness_free(harness *h)
{
    for (int i = 0; i < h->b.n_params; i++) {
        pt_free(h->b.p[i]);
        pt_free(h->b.g[i]);
    }
    free(h->tokens);
    free(h->targets);
    pt_free(h->in), pt_free(h->din), pt_free(h->out), pt_free(h->saved), pt_free(h->R);
    pt_free(h->grads), pt_free(h->work);
}

/* L at the current parameters and input, in double. */
static inline double harness_loss(harness *h)
{
    double loss_sum = 0.0;
    int rows = 0;
    h->b.ops->forward(&h->b, &h->mb, h->in, h->out, h->saved, &loss_sum, &rows);
    if (h->is_loss)
        return loss_sum / rows;
    double L = 0.0;
    for (size_t i = 0; i < h->n_out; i++)
        L += (double)h->out[i] * h->R[i];
    return L;
}

/* Analytic gradients: forward, backward_input into h->din, backward_weight
 * into the (zeroed) parameter gradients. */
static inline void harness_backward(harness *h)
{
    for (int i = 0; i < h->b.n_params; i++)
        memset(h->b.g[i], 0, pt_param_decl_numel(&h->b.decl[i]) * sizeof(float));
    harness_loss(h);
    h->b.ops->backward_input(&h->b, &h->mb, h->in, h->out, h->saved, h->R, h->din, 1.0f);
    h->b.ops->backward_weight(&h->b, &h->mb, h->in, h->out, h->saved, h->R);
}

#endif
