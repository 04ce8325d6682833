/* image_norm.c: GroupNorm and LayerNorm over (C, H, W) (image_norm.h), and
 * their blocks:
 *   groupnorm  in (C,H,W) -> out (C,H,W), <prefix>.weight, .bias (C)
 *   layernorm over an image  in (C,H,W) -> out (C,H,W),
 *              <prefix>.weight, .bias (C,H,W)
 * as torch.nn.GroupNorm and torch.nn.LayerNorm([C, H, W]) name them. The
 * LayerNorm is the seam's row LayerNorm with a sample as the row.
 * Saved: each sample's (or group's) mean and reciprocal deviation. */
#include "nn/image_norm.h"

#include <stdio.h>

static int rows(const pt_image_norm *n) { return n->groups ? n->groups : 1; }
static int per_sample(const pt_image_norm *n) { return n->C * n->H * n->W; }

int pt_image_norm_declare(pt_block *b, const char *prefix, const pt_image_norm *n)
{
    char name[96];
    int chw[3] = {n->C, n->H, n->W}, ndim = n->groups ? 1 : 3;
    snprintf(name, sizeof name, "%s.weight", prefix);
    int w = pt_block_declare(b, name, ndim, chw, PT_INIT_ONES, 0.0f);
    snprintf(name, sizeof name, "%s.bias", prefix);
    pt_block_declare(b, name, ndim, chw, PT_INIT_ZEROS, 0.0f);
    return w;
}

size_t pt_image_norm_stats(const pt_image_norm *n, int B) { return 2 * (size_t)B * rows(n); }

void pt_image_norm_forward(const pt_block *b, int w, const pt_image_norm *n, void *out,
                           float *stats, const void *in, int B)
{
    const pt_kernels *k = b->k;
    float *mean = stats, *rstd = stats + (size_t)B * rows(n);
    if (n->groups)
        k->groupnorm_forward(out, mean, rstd, in, b->p[w], b->p[w + 1], B, n->C, n->H * n->W,
                             n->groups, n->eps);
    else
        k->layernorm_forward(out, mean, rstd, in, b->p[w], b->p[w + 1], B, per_sample(n), n->eps);
}

void pt_image_norm_backward_input(const pt_block *b, int w, const pt_image_norm *n, void *din,
                                  const void *dout, const void *in, const float *stats, int B)
{
    const pt_kernels *k = b->k;
    const float *mean = stats, *rstd = stats + (size_t)B * rows(n);
    if (n->groups) {
        k->groupnorm_backward_input(din, dout, in, b->p[w], mean, rstd, B, n->C, n->H * n->W,
                                    n->groups);
        return;
    }
    k->layernorm_backward_input(din, NULL, dout, in, b->p[w], mean, rstd, B, per_sample(n));
}

void pt_image_norm_backward_weight(pt_block *b, int w, const pt_image_norm *n, const void *dout,
                                   const void *in, const float *stats, int B)
{
    const pt_kernels *k = b->k;
    const float *mean = stats, *rstd = stats + (size_t)B * rows(n);
    if (n->groups)
        k->groupnorm_backward_weight(b->g[w], b->g[w + 1], dout, in, mean, rstd, B, n->C,
                                     n->H * n->W, n->groups);
    else
        k->layernorm_backward_weight(b->g[w], b->g[w + 1], dout, in, mean, rstd, B, per_sample(n));
}

pt_block_cost pt_image_norm_cost(const pt_image_norm *n)
{
    double e = per_sample(n);
    return (pt_block_cost){
        .forward_flops = 8 * e, .backward_input_flops = 10 * e, .backward_weight_flops = 4 * e};
}

/* ---- the two norm blocks ---- */

static pt_image_norm norm_of(const pt_block *b)
{
    const pt_block_shape *s = &b->shape;
    return (pt_image_norm){s->channels, s->height, s->width, s->groups,
                           s->ln_eps != 0.0f ? s->ln_eps : 1e-5f};
}

static size_t norm_saved(const pt_block *b, int B)
{
    pt_image_norm n = norm_of(b);
    return pt_image_norm_stats(&n, B) * sizeof(float);
}

// in (B,C,H,W) -> out (B,C,H,W)
static void norm_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out, void *s,
                         double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    pt_image_norm n = norm_of(b);
    pt_image_norm_forward(b, 0, &n, out, s, in, mb->batch);
}

// dout (B,C,H,W) -> din (B,C,H,W)
static void norm_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                void *s, const void *dout, void *din, float loss_scale)
{
    (void)out, (void)loss_scale;
    pt_image_norm n = norm_of(b);
    if (din)
        pt_image_norm_backward_input(b, 0, &n, din, dout, in, s, mb->batch);
}

static void norm_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                 const void *out, const void *s, const void *dout)
{
    (void)out;
    pt_image_norm n = norm_of(b);
    pt_image_norm_backward_weight(b, 0, &n, dout, in, s, mb->batch);
}

static pt_block_cost norm_cost(const pt_block *b)
{
    pt_image_norm n = norm_of(b);
    return pt_image_norm_cost(&n);
}

#define NORM_OPS(kind_name)                                                             \
    {                                                                                   \
        .kind = kind_name, .saved_bytes = norm_saved, .forward = norm_forward,          \
        .backward_input = norm_backward_input, .backward_weight = norm_backward_weight, \
        .cost = norm_cost                                                               \
    }

static const pt_block_ops groupnorm_ops = NORM_OPS("groupnorm");
static const pt_block_ops layernorm_image_ops = NORM_OPS("layernorm_image");

static void norm_init(pt_block *b, const pt_block_shape *s, const char *prefix, int groups)
{
    b->shape = *s;
    b->shape.groups = groups;
    b->in_floats = b->out_floats = s->channels * s->height * s->width;
    pt_image_norm n = norm_of(b);
    pt_image_norm_declare(b, prefix, &n);
}

void pt_groupnorm_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    b->ops = &groupnorm_ops;
    norm_init(b, s, prefix, s->groups > 0 ? s->groups : 1);
}

void pt_layernorm_image_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    b->ops = &layernorm_image_ops;
    norm_init(b, s, prefix, 0);
}
