/* checkpoint_harness.h: what the checkpoint set tests share: small models
 * (a gpt and an mlp of five blocks each) trained a step or two by hand,
 * part models cut at block boundaries that hold copies of a whole model's
 * values and moments, saving a set from such parts as a pipeline's stages
 * would, and bit-for-bit comparisons. Include after check.h. */
#ifndef PT_TESTS_CHECKPOINT_HARNESS_H
#define PT_TESTS_CHECKPOINT_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "pipetrain.h"

static inline pt_model_config small_gpt(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 3, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 32;
    return c;
}

static inline pt_model_config small_mlp(void)
{
    int widths[] = {8, 6, 5, 4};
    return pt_model_config_mlp(4, widths);
}

/* A whole model and its optimizer after `steps` steps on fixed random data,
 * with the tied copies' gradients summed as a pipeline does. */
static inline int trained(const pt_model_config *c, pt_optim_kind kind, int steps, pt_model **m,
                          pt_optimizer **opt)
{
    pt_optim_config oc = pt_optim_config_default(kind);
    oc.lr = 1e-2f;
    if (pt_model_create(c, m) || pt_optimizer_create(*m, &oc, opt))
        return -1;
    enum { B = 2 };
    int gpt = c->kind == PT_MODEL_GPT, rows = gpt ? c->seq_len : 1;
    int classes = gpt ? c->vocab : c->widths[c->n_widths - 1];
    int tokens[B * 64], targets[B * 64];
    float inputs[B * 64];
    pt_rng r;
    pt_rng_seed(&r, 3);
    for (int i = 0; i < B * rows; i++) {
        tokens[i] = (int)pt_rng_below(&r, (uint64_t)classes);
        targets[i] = (int)pt_rng_below(&r, (uint64_t)classes);
    }
    for (int i = 0; i < B * 64; i++)
        inputs[i] = (float)pt_rng_uniform(&r);
    pt_microbatch mb = {.batch = B, .tokens = tokens, .inputs = inputs, .targets = targets};
    int last = pt_model_n_blocks(*m) - 1;
    pt_activations *a;
    if (pt_activations_create(*m, 0, last, B, &a))
        return -1;
    int rc = 0;
    for (int s = 0; rc == 0 && s < steps; s++) {
        pt_model_zero_grads(*m);
        rc = pt_model_step_microbatch(*m, &mb, 1.0f, a, NULL);
        pt_model_sum_tied_grads(*m);
        double norm = sqrt(pt_optimizer_grad_sq(*m, 0, last));
        pt_optimizer_step(*opt, *m, 0, last, s, oc.lr, pt_optimizer_clip_factor(&oc, norm));
    }
    pt_activations_destroy(a);
    return rc;
}

typedef struct {
    pt_model *m;
    pt_optimizer *opt;
} part;

/* Blocks first..last of c, with the whole model's values and moments when
 * whole is not NULL (else as a fresh part of seed `seed` would start). */
static inline int make_part(const pt_model_config *c, int first, int last, const pt_model *whole,
                            pt_optimizer *wopt, const pt_optim_config *oc, part *out)
{
    unsigned char hold[64] = {0};
    for (int b = first; b <= last; b++)
        hold[b] = 1;
    if (pt_model_create_part(c, hold, &out->m) || pt_optimizer_create(out->m, oc, &out->opt))
        return -1;
    for (int i = 0; whole && i < pt_model_n_params(out->m); i++) {
        const pt_param *p = pt_model_param(out->m, i);
        if (!p->data)
            continue;
        memcpy(p->data, pt_model_param(whole, i)->data, p->numel * sizeof(float));
        for (int w = 0; w < 2; w++)
            if (pt_optimizer_state(out->opt, out->m, i, w))
                memcpy(pt_optimizer_state(out->opt, out->m, i, w),
                       pt_optimizer_state(wopt, whole, i, w), p->numel * sizeof(float));
    }
    return 0;
}

/* The parts of a cut: ends[k] is one past shard k's last block. */
static inline int make_parts(const pt_model_config *c, const int *ends, int n,
                             const pt_model *whole, pt_optimizer *wopt, const pt_optim_config *oc,
                             part *parts)
{
    for (int k = 0; k < n; k++)
        if (make_part(c, k ? ends[k - 1] : 0, ends[k] - 1, whole, wopt, oc, &parts[k]))
            return -1;
    return 0;
}

static inline void free_parts(part *parts, int n)
{
    for (int k = 0; k < n; k++) {
        pt_optimizer_destroy(parts[k].opt);
        pt_model_destroy(parts[k].m);
    }
}

/* A save as a pipeline makes it: begin, every stage's shard, publish. */
static inline int save_set(const char *dest, const part *parts, int n, const pt_model *desc,
                           int with_opt, const pt_train_state *st, const char *run_id)
{
    char staging[4096];
    int rc = pt_checkpoint_begin(dest, staging, sizeof staging);
    for (int k = 0; rc == PT_OK && k < n; k++)
        rc = pt_checkpoint_write_shard(staging, k, n, parts[k].m, with_opt ? parts[k].opt : NULL,
                                       st, run_id);
    if (rc == PT_OK)
        rc = pt_checkpoint_publish(staging, dest, n, desc, with_opt ? parts[0].opt : NULL, st,
                                   run_id);
    return rc;
}

/* Every tensor and moment m holds equals the reference's, bit for bit. */
static inline int same_held(const pt_model *m, pt_optimizer *opt, const pt_model *ref,
                            pt_optimizer *ref_opt)
{
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *p = pt_model_param(m, i);
        if (!p->data)
            continue;
        if (memcmp(p->data, pt_model_param(ref, i)->data, p->numel * sizeof(float)))
            return 0;
        for (int w = 0; opt && w < 2; w++) {
            const float *a = pt_optimizer_state(opt, m, i, w);
            const float *b = pt_optimizer_state(ref_opt, ref, i, w);
            if ((a == NULL) != (b == NULL) || (a && memcmp(a, b, p->numel * sizeof(float))))
                return 0;
        }
    }
    return 1;
}

static inline char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(len > 0 ? (size_t)len + 1 : 1);
    if (b && fread(b, 1, (size_t)len, f) == (size_t)len)
        *n = (size_t)len;
    if (b)
        b[*n] = '\0';
    fclose(f);
    return b;
}

static inline int same_bytes(const char *a, const char *b)
{
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && na > 0 && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

#endif
