/* optimizer.c: AdamW and SGD with momentum (optimizer.h). AdamW's pass over
 * weights, gradients and moments, and the clip's sum of squares, run on the
 * CPU's widest vectors (tensor/adamw.c). */
#include "runtime/optimizer.h"

#include <math.h>
#include <stdlib.h>

#include "model/model.h"
#include "tensor/adamw.h"
#include "tensor/error.h"

struct pt_optimizer {
    pt_optim_config cfg;
    pt_arena m1, m2; /* first and second moments, laid out as the parameters */
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
    pt_optimizer *o = calloc(1, sizeof *o);
    if (!o)
        return pt_fail(PT_ENOMEM, "cannot allocate an optimizer");
    o->cfg = *cfg;
    int rc = pt_arena_init(&o->m1, m->data.capacity);
    if (rc == PT_OK && cfg->kind == PT_OPTIM_ADAMW)
        rc = pt_arena_init(&o->m2, m->data.capacity);
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

double pt_optimizer_grad_sq(const pt_model *m, int first, int last)
{
    double sq = 0.0;
    for (int i = 0; i < m->n_params; i++) {
        const pt_param *p = &m->params[i];
        if (p->block < first || p->block > last || p->tied_to || !p->grad)
            continue;
        sq += pt_sum_squares(p->grad, p->numel);
    }
    return sq;
}

float pt_optimizer_clip_factor(const pt_optim_config *cfg, double norm)
{
    if (cfg->grad_clip <= 0 || !(norm > cfg->grad_clip))
        return 1.0f;
    return (float)(cfg->grad_clip / (norm + 1e-6));
}

float *pt_optimizer_state(pt_optimizer *o, const pt_model *m, int i, int which)
{
    const pt_param *p = &m->params[i];
    pt_arena *a = which == 0 ? &o->m1 : &o->m2;
    if (!a->base || !p->data)
        return NULL;
    return a->base + (p->data - m->data.base);
}

static void adamw(const pt_optim_config *c, float *w, const float *g, float *m1, float *m2,
                  size_t n, long step, float lr, float clip, float decay)
{
    pt_adamw_step s = {.beta1 = c->beta1,
                       .beta2 = c->beta2,
                       .eps = c->eps,
                       .corr1 = (float)(1.0 - pow(c->beta1, (double)(step + 1))),
                       .corr2 = (float)(1.0 - pow(c->beta2, (double)(step + 1))),
                       .lr = lr,
                       .clip = clip,
                       .decay = decay};
    pt_adamw_update(&s, w, g, m1, m2, n);
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

void pt_optimizer_step(pt_optimizer *o, pt_model *m, int first, int last, long step, float lr,
                       float clip)
{
    const pt_optim_config *c = &o->cfg;
    for (int i = 0; i < m->n_params; i++) {
        pt_param *p = &m->params[i];
        if (p->block < first || p->block > last || !p->data)
            continue;
        /* decay matrices and embeddings, not biases or LayerNorm gains */
        float decay = p->ndim >= 2 ? c->weight_decay : 0.0f;
        float *m1 = pt_optimizer_state(o, m, i, 0);
        if (c->kind == PT_OPTIM_ADAMW)
            adamw(c, p->data, p->grad, m1, pt_optimizer_state(o, m, i, 1), p->numel, step, lr, clip,
                  decay);
        else
            sgd(c, p->data, p->grad, m1, p->numel, lr, clip, decay);
    }
    pt_model_params_changed(m); /* bf16: the products' copy follows */
}

void pt_optimizer_step_model(pt_optimizer *o, pt_model *m, long step)
{
    int last = pt_model_n_blocks(m) - 1;
    pt_model_sum_tied_grads(m);
    float clip = pt_optimizer_clip_factor(&o->cfg, sqrt(pt_optimizer_grad_sq(m, 0, last)));
    pt_optimizer_step(o, m, 0, last, step, pt_optimizer_lr(&o->cfg, step), clip);
}
