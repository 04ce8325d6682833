/* transformer.c: the GPT-2 transformer block, pre-LayerNorm with residuals:
 *   x2  = x  + c_proj(attention(c_attn(ln_1(x))))
 *   out = x2 + mlp.c_proj(act(mlp.c_fc(ln_2(x2))))
 * with GPT2Config's arithmetic from the block's shape: the MLP's width
 * (n_inner) and activation, the LayerNorms' epsilon, and how the attention
 * scores are scaled (by 1 / sqrt(head size), and by 1 / (layer + 1)).
 * Parameters carry Hugging Face's names under transformer.h.<layer>; the two
 * residual projections start with std 0.02 / sqrt(2 n_layer), as GPT-2 does.
 *
 * backward_input leaves in `saved` the gradient at every projection's output
 * and every LayerNorm's output, so backward_weight is products and sums only
 * and can run any time later (zero-bubble schedules need that). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/attention.h"
#include "nn/block.h"
#include "nn/linear.h"

enum { LN1_W, LN1_B, ATTN_W, ATTN_B, APROJ_W, APROJ_B, LN2_W, LN2_B, FC_W, FC_B, FPROJ_W, FPROJ_B };

/* Offsets into the saved area for a micro-batch of B samples. Forward fills
 * the first group, backward_input the second. */
typedef struct {
    size_t ln1, mean1, rstd1, qkv, att, y, x2, ln2, mean2, rstd2, h, g;
    size_t dqkv, dy, dx2, dln1, dln2, dh, scratch, total;
} transformer_layout;

static transformer_layout layout(const pt_block *b, int B)
{
    size_t T = b->shape.T, C = b->shape.C, I = b->shape.n_inner, n = (size_t)B * T, at = 0;
    transformer_layout l;
    l.ln1 = at, at += n * C;
    l.mean1 = at, at += n;
    l.rstd1 = at, at += n;
    l.qkv = at, at += n * 3 * C;
    l.att = at, at += (size_t)B * b->shape.H * T * T;
    l.y = at, at += n * C;
    l.x2 = at, at += n * C;
    l.ln2 = at, at += n * C;
    l.mean2 = at, at += n;
    l.rstd2 = at, at += n;
    l.h = at, at += n * I;
    l.g = at, at += n * I;
    l.dqkv = at, at += n * 3 * C;
    l.dy = at, at += n * C;
    l.dx2 = at, at += n * C;
    l.dln1 = at, at += n * C;
    l.dln2 = at, at += n * C;
    l.dh = at, at += n * I;
    l.scratch = at, at += T * T;
    l.total = at;
    return l;
}

static size_t transformer_saved(const pt_block *b, int B) { return layout(b, B).total; }

// in (B,T,C) -> out (B,T,C)
static void transformer_forward(pt_block *b, const pt_microbatch *mb, const float *in, float *out,
                                float *s, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    const pt_kernels *k = b->k;
    float *const *p = b->p;
    int B = mb->batch, T = b->shape.T, C = b->shape.C, I = b->shape.n_inner, N = B * T;
    transformer_layout l = layout(b, B);
    size_t nc = (size_t)N * C;
    float eps = b->shape.ln_eps;

    k->layernorm_forward(s + l.ln1, s + l.mean1, s + l.rstd1, in, p[LN1_W], p[LN1_B], N, C, eps);
    pt_linear_forward(k, s + l.qkv, s + l.ln1, p[ATTN_W], p[ATTN_B], N, C, 3 * C);
    pt_attention_forward(k, s + l.y, s + l.att, s + l.qkv, B, T, C, b->shape.H,
                         pt_attention_scale(&b->shape, b->layer));
    pt_linear_forward(k, s + l.x2, s + l.y, p[APROJ_W], p[APROJ_B], N, C, C);
    k->add(s + l.x2, s + l.x2, in, nc);
    k->layernorm_forward(s + l.ln2, s + l.mean2, s + l.rstd2, s + l.x2, p[LN2_W], p[LN2_B], N, C,
                         eps);
    pt_linear_forward(k, s + l.h, s + l.ln2, p[FC_W], p[FC_B], N, C, I);
    pt_activation_pick(k, b->shape.act).forward(s + l.g, s + l.h, (size_t)N * I);
    pt_linear_forward(k, out, s + l.g, p[FPROJ_W], p[FPROJ_B], N, I, C);
    k->add(out, out, s + l.x2, nc);
}

// dout (B,T,C) -> din (B,T,C)
static void transformer_backward_input(pt_block *b, const pt_microbatch *mb, const float *in,
                                       float *out, float *s, const float *dout, float *din,
                                       float loss_scale)
{
    (void)out, (void)loss_scale;
    const pt_kernels *k = b->k;
    float *const *p = b->p;
    int B = mb->batch, T = b->shape.T, C = b->shape.C, I = b->shape.n_inner, N = B * T;
    transformer_layout l = layout(b, B);
    size_t nc = (size_t)N * C;

    /* MLP branch: dout -> dh (through the activation) -> dln2 -> dx2 (plus the residual) */
    pt_linear_backward_input(k, s + l.dh, dout, p[FPROJ_W], N, I, C, 0);
    pt_activation_pick(k, b->shape.act).backward(s + l.dh, s + l.h, s + l.dh, (size_t)N * I);
    pt_linear_backward_input(k, s + l.dln2, s + l.dh, p[FC_W], N, C, I, 0);
    memcpy(s + l.dx2, dout, nc * sizeof(float));
    k->layernorm_backward_input(s + l.dx2, s + l.dln2, s + l.x2, p[LN2_W], s + l.mean2, s + l.rstd2,
                                N, C);
    /* attention branch: dx2 -> dy -> dqkv -> dln1 -> din (plus the residual) */
    pt_linear_backward_input(k, s + l.dy, s + l.dx2, p[APROJ_W], N, C, C, 0);
    pt_attention_backward(k, s + l.dqkv, s + l.att, s + l.scratch, s + l.dy, s + l.qkv, B, T, C,
                          b->shape.H, pt_attention_scale(&b->shape, b->layer));
    pt_linear_backward_input(k, s + l.dln1, s + l.dqkv, p[ATTN_W], N, C, 3 * C, 0);
    if (din) {
        memcpy(din, s + l.dx2, nc * sizeof(float));
        k->layernorm_backward_input(din, s + l.dln1, in, p[LN1_W], s + l.mean1, s + l.rstd1, N, C);
    }
}

static void transformer_backward_weight(pt_block *b, const pt_microbatch *mb, const float *in,
                                        const float *out, const float *s, const float *dout)
{
    (void)out;
    const pt_kernels *k = b->k;
    float *const *g = b->g;
    int B = mb->batch, C = b->shape.C, I = b->shape.n_inner, N = B * b->shape.T;
    transformer_layout l = layout(b, B);

    pt_linear_backward_weight(k, g[FPROJ_W], g[FPROJ_B], dout, s + l.g, N, I, C);
    pt_linear_backward_weight(k, g[FC_W], g[FC_B], s + l.dh, s + l.ln2, N, C, I);
    k->layernorm_backward_weight(g[LN2_W], g[LN2_B], s + l.dln2, s + l.x2, s + l.mean2, s + l.rstd2,
                                 N, C);
    pt_linear_backward_weight(k, g[APROJ_W], g[APROJ_B], s + l.dx2, s + l.y, N, C, C);
    pt_linear_backward_weight(k, g[ATTN_W], g[ATTN_B], s + l.dqkv, s + l.ln1, N, C, 3 * C);
    k->layernorm_backward_weight(g[LN1_W], g[LN1_B], s + l.dln1, in, s + l.mean1, s + l.rstd1, N,
                                 C);
}

static pt_block_cost transformer_cost(const pt_block *b)
{
    /* c_attn 3C^2, c_proj C^2, c_fc and mlp.c_proj C I each: 12 C^2 for GPT-2 */
    double T = b->shape.T, C = b->shape.C, I = b->shape.n_inner;
    double proj = 2 * T * (4 * C * C + 2 * C * I);
    return (pt_block_cost){
        .forward_flops = proj + pt_attention_forward_flops(b->shape.T, b->shape.C),
        .backward_input_flops = proj + pt_attention_backward_flops(b->shape.T, b->shape.C),
        .backward_weight_flops = proj};
}

static const pt_block_ops transformer_ops = {
    .kind = "transformer",
    .saved_floats = transformer_saved,
    .forward = transformer_forward,
    .backward_input = transformer_backward_input,
    .backward_weight = transformer_backward_weight,
    .cost = transformer_cost,
};

void pt_transformer_init(pt_block *b, const pt_block_shape *s, int layer)
{
    char name[96];
    int C = s->C, I;
    float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)s->n_layer);
    b->ops = &transformer_ops;
    b->shape = pt_block_shape_gpt(s);
    I = b->shape.n_inner;
    b->layer = layer;
    b->in_floats = b->out_floats = s->T * C;
#define DECLARE(fmt, ...) (snprintf(name, sizeof name, fmt, layer), __VA_ARGS__)
    DECLARE("transformer.h.%d.ln_1", pt_block_declare_layernorm(b, name, C));
    DECLARE("transformer.h.%d.attn.c_attn", pt_block_declare_linear(b, name, C, 3 * C, std));
    DECLARE("transformer.h.%d.attn.c_proj", pt_block_declare_linear(b, name, C, C, proj_std));
    DECLARE("transformer.h.%d.ln_2", pt_block_declare_layernorm(b, name, C));
    DECLARE("transformer.h.%d.mlp.c_fc", pt_block_declare_linear(b, name, C, I, std));
    DECLARE("transformer.h.%d.mlp.c_proj", pt_block_declare_linear(b, name, I, C, proj_std));
#undef DECLARE
}
