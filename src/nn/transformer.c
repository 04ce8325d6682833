/* transformer.c: the GPT-2 transformer block, pre-LayerNorm with residuals:
 *   x2  = x  + c_proj(attention(c_attn(ln_1(x))))
 *   out = x2 + mlp.c_proj(act(mlp.c_fc(ln_2(x2))))
 * with GPT2Config's arithmetic from the block's shape: the MLP's width
 * (n_inner) and activation, the LayerNorms' epsilon, and how the attention
 * scores are scaled (by 1 / sqrt(head size), and by 1 / (layer + 1)).
 * Parameters carry Hugging Face's names under transformer.h.<layer>; the two
 * residual projections start with std 0.02 / sqrt(2 n_layer), as GPT-2 does.
 *
 * Three areas for a micro-batch: `saved` (what forward keeps for both
 * backward passes), `grads` (what backward_input leaves for
 * backward_weight: the gradient at every projection's output and every
 * LayerNorm's output, so that backward_weight is products and sums only
 * and can run any time later, as zero-bubble schedules need) and the
 * stage's workspace (what one pass needs and nothing after it: the
 * attention output's gradient and the attention's scratch). A micro-batch
 * waiting for its backward holds `saved` alone. */
#include <math.h>
#include <stdio.h>

#include "nn/attention.h"
#include "nn/block.h"
#include "nn/linear.h"

enum { LN1_W, LN1_B, ATTN_W, ATTN_B, APROJ_W, APROJ_B, LN2_W, LN2_B, FC_W, FC_B, FPROJ_W, FPROJ_B };

/* Byte offsets into the three areas for a micro-batch of B samples.
 * LayerNorm statistics and the score scratch are float; the rest are
 * activations. */
typedef struct {
    size_t ln1, mean1, rstd1, qkv, stats, y, x2, ln2, mean2, rstd2, h, g, saved; /* saved */
    size_t dqkv, dx2, dln1, dln2, dh, grads;                                     /* grads */
    size_t dy, scratch, work;                                                    /* work */
} transformer_layout;

static transformer_layout layout(const pt_block *b, int B)
{
    size_t T = b->shape.T, C = b->shape.C, I = b->shape.n_inner, n = (size_t)B * T, at = 0;
    pt_elem_type t = b->k->act;
    transformer_layout l;
    l.ln1 = pt_saved_take(&at, n * C, t);
    l.mean1 = pt_saved_take(&at, n, PT_F32);
    l.rstd1 = pt_saved_take(&at, n, PT_F32);
    l.qkv = pt_saved_take(&at, n * 3 * C, t);
    l.stats = pt_saved_take(&at, (size_t)B * b->shape.H * T * 2, PT_F32);
    l.y = pt_saved_take(&at, n * C, t);
    l.x2 = pt_saved_take(&at, n * C, t);
    l.ln2 = pt_saved_take(&at, n * C, t);
    l.mean2 = pt_saved_take(&at, n, PT_F32);
    l.rstd2 = pt_saved_take(&at, n, PT_F32);
    l.h = pt_saved_take(&at, n * I, t);
    l.g = pt_saved_take(&at, n * I, t);
    l.saved = at, at = 0;
    l.dqkv = pt_saved_take(&at, n * 3 * C, t);
    l.dx2 = pt_saved_take(&at, n * C, t);
    l.dln1 = pt_saved_take(&at, n * C, t);
    l.dln2 = pt_saved_take(&at, n * C, t);
    l.dh = pt_saved_take(&at, n * I, t);
    l.grads = at, at = 0;
    l.dy = pt_saved_take(&at, n * C, t);
    l.scratch = pt_saved_take(&at, pt_attention_scratch_floats(T, C, b->shape.H, t), PT_F32);
    l.work = at;
    return l;
}

static size_t transformer_saved(const pt_block *b, int B) { return layout(b, B).saved; }
static size_t transformer_grads(const pt_block *b, int B) { return layout(b, B).grads; }
static size_t transformer_work(const pt_block *b, int B) { return layout(b, B).work; }

#define S(name)  pt_saved_at(s, l.name)
#define F(name)  pt_saved_floats(s, l.name)
#define G(name)  pt_saved_at(b->grads, l.name)
#define W(name)  pt_saved_at(b->work, l.name)
#define WF(name) pt_saved_floats(b->work, l.name)

// in (B,T,C) -> out (B,T,C)
static void transformer_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                void *s, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    const pt_kernels *k = b->k;
    float *const *p = b->p;
    int B = mb->batch, T = b->shape.T, C = b->shape.C, I = b->shape.n_inner, N = B * T;
    transformer_layout l = layout(b, B);
    size_t nc = (size_t)N * C;
    float eps = b->shape.ln_eps;

    k->layernorm_forward(S(ln1), F(mean1), F(rstd1), in, p[LN1_W], p[LN1_B], N, C, eps);
    pt_linear_forward(b, ATTN_W, S(qkv), S(ln1), N, C, 3 * C);
    pt_attention_forward(k, S(y), F(stats), WF(scratch), S(qkv), B, T, C, b->shape.H,
                         pt_attention_scale(&b->shape, b->layer));
    pt_linear_forward(b, APROJ_W, S(x2), S(y), N, C, C);
    k->residual_layernorm_forward(S(x2), S(ln2), F(mean2), F(rstd2), S(x2), in, p[LN2_W], p[LN2_B],
                                  N, C, eps);
    pt_linear_forward(b, FC_W, S(h), S(ln2), N, C, I);
    pt_activation_pick(k, b->shape.act).forward(S(g), S(h), (size_t)N * I);
    pt_linear_forward(b, FPROJ_W, out, S(g), N, I, C);
    k->add(out, out, S(x2), nc);
}

// dout (B,T,C) -> din (B,T,C)
static void transformer_backward_input(pt_block *b, const pt_microbatch *mb, const void *in,
                                       void *out, void *s, const void *dout, void *din,
                                       float loss_scale)
{
    (void)out, (void)loss_scale;
    const pt_kernels *k = b->k;
    float *const *p = b->p;
    int B = mb->batch, T = b->shape.T, C = b->shape.C, I = b->shape.n_inner, N = B * T;
    transformer_layout l = layout(b, B);

    /* MLP branch: dout -> dh (through the activation) -> dln2 -> dx2 (plus the residual) */
    pt_linear_backward_input(b, FPROJ_W, G(dh), dout, N, I, C);
    pt_activation_pick(k, b->shape.act).backward(G(dh), S(h), G(dh), (size_t)N * I);
    pt_linear_backward_input(b, FC_W, G(dln2), G(dh), N, C, I);
    k->layernorm_backward_input(G(dx2), dout, G(dln2), S(x2), p[LN2_W], F(mean2), F(rstd2), N, C);
    /* attention branch: dx2 -> dy -> dqkv -> dln1 -> din (plus the residual) */
    pt_linear_backward_input(b, APROJ_W, W(dy), G(dx2), N, C, C);
    pt_attention_backward(k, G(dqkv), F(stats), WF(scratch), W(dy), S(qkv), B, T, C, b->shape.H,
                          pt_attention_scale(&b->shape, b->layer));
    pt_linear_backward_input(b, ATTN_W, G(dln1), G(dqkv), N, C, 3 * C);
    if (din)
        k->layernorm_backward_input(din, G(dx2), G(dln1), in, p[LN1_W], F(mean1), F(rstd1), N, C);
}

static void transformer_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                        const void *out, const void *s, const void *dout)
{
    (void)out;
    const pt_kernels *k = b->k;
    float *const *g = b->g;
    int B = mb->batch, C = b->shape.C, I = b->shape.n_inner, N = B * b->shape.T;
    transformer_layout l = layout(b, B);

    pt_linear_backward_weight(b, FPROJ_W, dout, S(g), N, I, C);
    pt_linear_backward_weight(b, FC_W, G(dh), S(ln2), N, C, I);
    k->layernorm_backward_weight(g[LN2_W], g[LN2_B], G(dln2), S(x2), F(mean2), F(rstd2), N, C);
    pt_linear_backward_weight(b, APROJ_W, G(dx2), S(y), N, C, C);
    pt_linear_backward_weight(b, ATTN_W, G(dqkv), S(ln1), N, C, 3 * C);
    k->layernorm_backward_weight(g[LN1_W], g[LN1_B], G(dln1), in, F(mean1), F(rstd1), N, C);
}

#undef S
#undef F
#undef G
#undef W
#undef WF

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
    .saved_bytes = transformer_saved,
    .grads_bytes = transformer_grads,
    .work_bytes = transformer_work,
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
    if (s->tensor > 1)
        pt_transformer_split(b);
}
