/* optimizer.c: AdamW and SGD with momentum (optimizer.h). AdamW's pass over
 * weights, gradients and moments, and the clip's sum of squares, run on the
 * CPU's widest vectors (tensor/adamw.c); AdamW's on the worker's threads
 * too. */
#include "runtime/optimizer.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "tensor/adamw.h"
#include "tensor/error.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"

/* The moments of the parameter arena's floats [lo, hi), at offset `at` of
 * the moment buffers. */
typedef struct {
    size_t lo, hi, at;
} owned_range;

struct pt_optimizer {
    pt_optim_config cfg;
    pt_arena m1, m2;     /* first and second moments of the owned ranges, one after another */
    owned_range *ranges; /* ascending, disjoint; one [0, capacity) unless sharded */
    int n_ranges;
};

pt_optim_config pt_optim_config_default(pt_optim_kind kind)
{
    pt_optim_config c = {.kind = kind,
                         .lr = 3e-4f,
                         .min_lr = 3e-5f,
                         .beta1 = 0.9f,
                         .beta2 = 0.95f,
                         .eps = 1e-8f,
                         .momentum = 0.9f,
                         .grad_clip = 1.0f};
    c.weight_decay = kind == PT_OPTIM_ADAMW ? 0.1f : 0.0f;
    return c;
}

int pt_optimizer_create(const pt_model *m, const pt_optim_config *cfg, pt_optimizer **out)
{
    *out = NULL;
    if (cfg->kind != PT_OPTIM_ADAMW && cfg->kind != PT_OPTIM_SGD)
        return pt_fail(PT_EINVAL, "unknown optimizer %d", (int)cfg->kind);
    if (!(cfg->lr >= 0) || !(cfg->min_lr >= 0) || cfg->warmup_steps < 0 || cfg->decay_steps < 0 ||
        !(cfg->grad_clip >= 0) || !(cfg->weight_decay >= 0))
        return pt_fail(PT_EINVAL, "optimizer settings must not be negative");
    if (!isfinite(cfg->lr) || !isfinite(cfg->min_lr) || !isfinite(cfg->grad_clip) ||
        !isfinite(cfg->weight_decay) || !isfinite(cfg->momentum))
        return pt_fail(PT_EINVAL,
                       "optimizer settings must be finite (lr %g, min_lr %g, clip %g, "
                       "weight decay %g, momentum %g)",
                       cfg->lr, cfg->min_lr, cfg->grad_clip, cfg->weight_decay, cfg->momentum);
    if (cfg->kind == PT_OPTIM_ADAMW &&
        !(cfg->beta1 >= 0 && cfg->beta1 < 1 && cfg->beta2 >= 0 && cfg->beta2 < 1 && cfg->eps > 0))
        return pt_fail(PT_EINVAL, "AdamW needs 0 <= beta1, beta2 < 1 and eps > 0");
    size_t lo = 0, hi = m->data.capacity;
    return pt_optimizer_create_sharded(m, cfg, &lo, &hi, 1, out);
}

int pt_optimizer_create_sharded(const pt_model *m, const pt_optim_config *cfg, const size_t *lo,
                                const size_t *hi, int n, pt_optimizer **out)
{
    *out = NULL;
    size_t floats = 0;
    for (int r = 0; r < n; r++) {
        if (lo[r] > hi[r] || hi[r] > m->data.capacity || (r > 0 && lo[r] < hi[r - 1]))
            return pt_fail(PT_EINVAL,
                           "optimizer shard %d [%zu, %zu) is not an ascending range of the "
                           "%zu parameters",
                           r, lo[r], hi[r], m->data.capacity);
        floats += hi[r] - lo[r];
    }
    pt_optimizer *o = calloc(1, sizeof *o);
    if (!o || !(o->ranges = calloc((size_t)n + 1, sizeof *o->ranges))) {
        free(o);
        return pt_fail(PT_ENOMEM, "cannot allocate an optimizer");
    }
    o->cfg = *cfg;
    o->n_ranges = n;
    for (size_t r = 0, at = 0; r < (size_t)n; at += hi[r] - lo[r], r++)
        o->ranges[r] = (owned_range){lo[r], hi[r], at};
    int rc = pt_arena_init(&o->m1, floats);
    if (rc == PT_OK && cfg->kind == PT_OPTIM_ADAMW)
        rc = pt_arena_init(&o->m2, floats);
    if (rc != PT_OK) {
        pt_optimizer_destroy(o);
        return rc;
    }
    *out = o;
    return PT_OK;
}

void pt_optimizer_destroy(pt_optimizer *o)
{
    if (!o)
        return;
    pt_arena_free(&o->m1);
    pt_arena_free(&o->m2);
    free(o->ranges);
    free(o);
}

const pt_optim_config *pt_optimizer_config(const pt_optimizer *o) { return &o->cfg; }

size_t pt_optimizer_bytes(const pt_optimizer *o)
{
    return o ? (o->m1.capacity + o->m2.capacity) * sizeof(float) : 0;
}

float pt_optimizer_lr(const pt_optim_config *c, long step)
{
    if (c->warmup_steps > 0 && step < c->warmup_steps)
        return c->lr * (float)(step + 1) / (float)c->warmup_steps;
    if (c->decay_steps <= 0)
        return c->lr;
    long span = c->decay_steps - c->warmup_steps;
    if (span <= 0 || step >= c->decay_steps)
        return c->min_lr;
    double progress = (double)(step - c->warmup_steps) / (double)span;
    double cosine = 0.5 * (1.0 + cos(M_PI * progress));
    return (float)(c->min_lr + cosine * (c->lr - c->min_lr));
}

/* The part of parameter p inside the arena's floats [lo, hi): its first
 * element and count (0: none). */
static size_t overlap(const pt_model *m, const pt_param *p, size_t lo, size_t hi, size_t *first)
{
    size_t a = (size_t)(p->data - m->data.base), b = a + p->numel;
    a = a > lo ? a : lo;
    b = b < hi ? b : hi;
    *first = a - (size_t)(p->data - m->data.base);
    return b > a ? b - a : 0;
}

/* Is parameter i cut across tensor slices (each holds a part)? */
static bool split(const pt_model *m, int i) { return pt_model_param_decl(m, i)->split_parts > 1; }

double pt_optimizer_grad_sq_range(const pt_model *m, int first, int last, size_t lo, size_t hi,
                                  int slice)
{
    double sq = 0.0;
    for (int i = 0; i < m->n_params; i++) {
        const pt_param *p = &m->params[i];
        if (p->block < first || p->block > last || p->tied_to || !p->grad ||
            (slice > 0 && !split(m, i)))
            continue;
        size_t at, n = overlap(m, p, lo, hi, &at);
        sq += pt_sum_squares(p->grad + at, n);
    }
    return sq;
}

double pt_optimizer_grad_sq(const pt_model *m, int first, int last)
{
    return pt_optimizer_grad_sq_range(m, first, last, 0, SIZE_MAX, 0);
}

float pt_optimizer_clip_factor(const pt_optim_config *cfg, double norm)
{
    if (cfg->grad_clip <= 0 || !(norm > cfg->grad_clip))
        return 1.0f;
    return (float)(cfg->grad_clip / (norm + 1e-6));
}

float *pt_optimizer_moments(pt_optimizer *o, int which, size_t off, size_t n)
{
    pt_arena *a = which == 0 ? &o->m1 : &o->m2;
    for (int r = 0; a->base && r < o->n_ranges; r++)
        if (off >= o->ranges[r].lo && off + n <= o->ranges[r].hi)
            return a->base + o->ranges[r].at + (off - o->ranges[r].lo);
    return NULL;
}

float *pt_optimizer_state(pt_optimizer *o, const pt_model *m, int i, int which)
{
    const pt_param *p = &m->params[i];
    if (!p->data)
        return NULL;
    return pt_optimizer_moments(o, which, (size_t)(p->data - m->data.base), p->numel);
}

int pt_optimizer_n_ranges(const pt_optimizer *o) { return o->n_ranges; }

void pt_optimizer_range(const pt_optimizer *o, int r, size_t *lo, size_t *hi)
{
    *lo = o->ranges[r].lo;
    *hi = o->ranges[r].hi;
}

void pt_optimizer_copy_moments(pt_optimizer *dst, pt_optimizer *src, size_t lo, size_t hi)
{
    for (int which = 0; which < 2; which++) {
        float *d = pt_optimizer_moments(dst, which, lo, hi - lo);
        const float *s = pt_optimizer_moments(src, which, lo, hi - lo);
        if (d && s && hi > lo)
            memcpy(d, s, (hi - lo) * sizeof(float));
    }
}

/* AdamW is elementwise: a worker on several threads shares each
 * parameter's update out in contiguous ranges (pt_parallel_ranges), every
 * element computed as on one thread, so the bits do not depend on the
 * thread count. ADAMW_LEAST floats are worth a helper. */
#define ADAMW_LEAST ((size_t)1 << 15)

typedef struct {
    const pt_adamw_step *s;
    float *w, *m1, *m2;
    const float *g;
} adamw_job;

static void adamw_range(void *arg, size_t lo, size_t hi)
{
    const adamw_job *j = arg;
    pt_adamw_update(j->s, j->w + lo, j->g + lo, j->m1 + lo, j->m2 + lo, hi - lo);
}

static void adamw(const pt_kernels *k, const pt_optim_config *c, float *w, const float *g,
                  float *m1, float *m2, size_t n, long step, float lr, float clip, float decay)
{
    pt_adamw_step s = {.beta1 = c->beta1,
                       .beta2 = c->beta2,
                       .eps = c->eps,
                       .corr1 = (float)(1.0 - pow(c->beta1, (double)(step + 1))),
                       .corr2 = (float)(1.0 - pow(c->beta2, (double)(step + 1))),
                       .lr = lr,
                       .clip = clip,
                       .decay = decay};
    adamw_job j = {.s = &s, .w = w, .m1 = m1, .m2 = m2, .g = g};
    pt_parallel_ranges(pt_kernels_threads(k), n, ADAMW_LEAST, 16, adamw_range, &j);
}

static void sgd(const pt_optim_config *c, float *w, const float *g, float *mom, size_t n, float lr,
                float clip, float decay)
{
    for (size_t j = 0; j < n; j++) {
        float grad = g[j] * clip + decay * w[j];
        mom[j] = c->momentum * mom[j] + grad;
        w[j] -= lr * mom[j];
    }
}

void pt_optimizer_step_range(pt_optimizer *o, pt_model *m, int first, int last, size_t lo,
                             size_t hi, long step, float lr, float clip)
{
    const pt_optim_config *c = &o->cfg;
    for (int i = 0; i < m->n_params; i++) {
        pt_param *p = &m->params[i];
        if (p->block < first || p->block > last || !p->data)
            continue;
        size_t at, n = overlap(m, p, lo, hi, &at), off = (size_t)(p->data - m->data.base) + at;
        float *m1 = pt_optimizer_moments(o, 0, off, n);
        if (!n || !m1)
            continue; /* not this optimizer's shard */
        /* decay matrices and embeddings, not biases or LayerNorm gains */
        float decay = p->ndim >= 2 ? c->weight_decay : 0.0f;
        if (c->kind == PT_OPTIM_ADAMW)
            adamw(m->k, c, p->data + at, p->grad + at, m1, pt_optimizer_moments(o, 1, off, n), n,
                  step, lr, clip, decay);
        else
            sgd(c, p->data + at, p->grad + at, m1, n, lr, clip, decay);
    }
    pt_model_params_changed(m); /* bf16: the products' copy follows */
}

void pt_optimizer_step(pt_optimizer *o, pt_model *m, int first, int last, long step, float lr,
                       float clip)
{
    pt_optimizer_step_range(o, m, first, last, 0, SIZE_MAX, step, lr, clip);
}

void pt_optimizer_step_model(pt_optimizer *o, pt_model *m, long step)
{
    int last = pt_model_n_blocks(m) - 1;
    pt_model_sum_tied_grads(m);
    float clip = pt_optimizer_clip_factor(&o->cfg, sqrt(pt_optimizer_grad_sq(m, 0, last)));
    pt_optimizer_step(o, m, 0, last, step, pt_optimizer_lr(&o->cfg, step), clip);
}
