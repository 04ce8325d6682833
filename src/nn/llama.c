/* llama.c: the Llama family's decoder layer (Hugging Face's
 * LlamaDecoderLayer), pre-norm with residuals:
 *   x2  = x  + o_proj(attention(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1)))
 *         with n1 = input_layernorm(x)
 *   out = x2 + down_proj(silu(gate_proj(n2)) * up_proj(n2))
 *         with n2 = post_attention_layernorm(x2)
 *   in (T, C) -> out (T, C)
 * RMSNorm with epsilon rms_eps, rotary positions with base rope_theta on
 * the first half / second half of each head (rotate_half), causal
 * grouped-query attention with H query heads of C / H and n_kv_heads
 * key/value heads, a SwiGLU MLP of width n_inner (0: 4C); no biases.
 * Parameters carry Hugging Face's names under the prefix
 * ("model.layers.3"), weights stored (out, in) as torch.nn.Linear does.
 * Attention keeps each row's softmax statistics, not the (T,T)
 * probabilities (attention.c recomputes them in backward, a band at a
 * time). backward_input leaves in the grads area the gradient at every
 * projection's output and both norms' outputs, so backward_weight is
 * products and sums only. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/attention.h"
#include "nn/projection.h"

enum { IN_NORM, Q, K, V, O, POST_NORM, GATE, UP, DOWN };

typedef struct {
    int T, C, H, KV, hd, I;
    float eps, theta;
} llama_geometry;

static llama_geometry geometry_of(const pt_block *b)
{
    const pt_block_shape *s = &b->shape;
    llama_geometry g = {s->T,
                        s->C,
                        s->H,
                        s->n_kv_heads ? s->n_kv_heads : s->H,
                        s->C / s->H,
                        s->n_inner ? s->n_inner : 4 * s->C,
                        s->rms_eps != 0.0f ? s->rms_eps : 1e-6f,
                        s->rope_theta != 0.0f ? s->rope_theta : 10000.0f};
    return g;
}

static pt_gqa gqa_of(const llama_geometry *g)
{
    return (pt_gqa){g->T, g->H, g->KV, g->hd, 1.0f / sqrtf((float)g->hd)};
}

/* Byte offsets for B samples into the saved area (what forward keeps),
 * the grads area (what backward_input leaves for backward_weight, from B
 * to W only) and the stage's workspace (what one pass needs and nothing
 * after it). Statistics, the rotary tables and the score scratch are
 * float; the rest are activations. */
typedef struct {
    size_t n1, rstd1, qkv, stats, y, x2, n2, rstd2, gate, up, h, cos, sin, saved;
    size_t dgate, dup, dn2, dx2, dqkv, dn1, grads;
    size_t dh, dy, scratch, work;
} llama_layout;

static llama_layout layout(const pt_block *b, int B)
{
    llama_geometry g = geometry_of(b);
    pt_gqa a = gqa_of(&g);
    size_t n = (size_t)B * g.T, C = g.C, I = g.I, W = pt_gqa_row(&a), at = 0;
    size_t rot = (size_t)g.T * (g.hd / 2);
    pt_elem_type t = b->k->act;
    llama_layout l;
    l.n1 = pt_saved_take(&at, n * C, t);
    l.rstd1 = pt_saved_take(&at, n, PT_F32);
    l.qkv = pt_saved_take(&at, n * W, t);
    l.stats = pt_saved_take(&at, (size_t)B * g.H * g.T * 2, PT_F32);
    l.y = pt_saved_take(&at, n * C, t);
    l.x2 = pt_saved_take(&at, n * C, t);
    l.n2 = pt_saved_take(&at, n * C, t);
    l.rstd2 = pt_saved_take(&at, n, PT_F32);
    l.gate = pt_saved_take(&at, n * I, t);
    l.up = pt_saved_take(&at, n * I, t);
    l.h = pt_saved_take(&at, n * I, t);
    l.cos = pt_saved_take(&at, rot, PT_F32);
    l.sin = pt_saved_take(&at, rot, PT_F32);
    l.saved = at, at = 0;
    l.dgate = pt_saved_take(&at, n * I, t);
    l.dup = pt_saved_take(&at, n * I, t);
    l.dn2 = pt_saved_take(&at, n * C, t);
    l.dx2 = pt_saved_take(&at, n * C, t);
    l.dqkv = pt_saved_take(&at, n * W, t);
    l.dn1 = pt_saved_take(&at, n * C, t);
    l.grads = at, at = 0;
    l.dh = pt_saved_take(&at, n * I, t);
    l.dy = pt_saved_take(&at, n * C, t);
    l.scratch = pt_saved_take(&at, pt_gqa_scratch_floats(&a, t), PT_F32);
    l.work = at;
    return l;
}

static size_t llama_saved(const pt_block *b, int B) { return layout(b, B).saved; }
static size_t llama_grads(const pt_block *b, int B) { return layout(b, B).grads; }
static size_t llama_work(const pt_block *b, int B) { return layout(b, B).work; }

/* Hugging Face's rotary tables: inv_freq[j] = 1 / theta^(2j / hd) in float,
 * angle t inv_freq[j] at position t. */
static void rope_tables(const llama_geometry *g, float *cos_t, float *sin_t)
{
    int half = g->hd / 2;
    for (int j = 0; j < half; j++) {
        float inv = (float)(1.0 / pow((double)g->theta, 2.0 * j / g->hd));
        for (int t = 0; t < g->T; t++) {
            float angle = (float)t * inv;
            cos_t[(size_t)t * half + j] = (float)cos((double)angle);
            sin_t[(size_t)t * half + j] = (float)sin((double)angle);
        }
    }
}

/* rotates (or, inverse, rotates back) the q and k heads of every sample */
static void rotate(const pt_kernels *k, const llama_geometry *g, void *qkv, const float *cos_t,
                   const float *sin_t, int B, int inverse)
{
    pt_gqa a = gqa_of(g);
    int W = pt_gqa_row(&a);
    for (int b = 0; b < B; b++) {
        void *rows = pt_elems_at(qkv, (size_t)b * g->T * W, k->act);
        k->rope(rows, W, g->T, g->H, g->hd, cos_t, sin_t, inverse);
        k->rope(pt_elems_at(rows, (size_t)g->C, k->act), W, g->T, g->KV, g->hd, cos_t, sin_t,
                inverse);
    }
}

#define S(name)  pt_saved_at(s, l.name)
#define F(name)  pt_saved_floats(s, l.name)
#define G(name)  pt_saved_at(b->grads, l.name)
#define WK(name) pt_saved_at(b->work, l.name)
/* q, k or v's columns of a qkv row */
#define QKV_AT(p, part) pt_elems_at(p, (part) == Q ? 0 : (part) == K ? C : C + KVd, k->act)

// in (B,T,C) -> out (B,T,C)
static void llama_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out, void *s,
                          double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    const pt_kernels *k = b->k;
    llama_geometry g = geometry_of(b);
    pt_gqa a = gqa_of(&g);
    llama_layout l = layout(b, mb->batch);
    int N = mb->batch * g.T, C = g.C, I = g.I, KVd = g.KV * g.hd, W = pt_gqa_row(&a);

    k->rmsnorm_forward(S(n1), F(rstd1), in, b->p[IN_NORM], N, C, g.eps);
    pt_projection_forward(b, Q, QKV_AT(S(qkv), Q), W, S(n1), C, N, C, C);
    pt_projection_forward(b, K, QKV_AT(S(qkv), K), W, S(n1), C, N, C, KVd);
    pt_projection_forward(b, V, QKV_AT(S(qkv), V), W, S(n1), C, N, C, KVd);
    rope_tables(&g, F(cos), F(sin));
    rotate(k, &g, S(qkv), F(cos), F(sin), mb->batch, 0);
    pt_gqa_forward(k, &a, S(y), F(stats), WK(scratch), S(qkv), mb->batch);
    pt_projection_forward(b, O, S(x2), C, S(y), C, N, C, C);
    k->add(S(x2), S(x2), in, (size_t)N * C);
    k->rmsnorm_forward(S(n2), F(rstd2), S(x2), b->p[POST_NORM], N, C, g.eps);
    pt_projection_forward(b, GATE, S(gate), I, S(n2), C, N, C, I);
    pt_projection_forward(b, UP, S(up), I, S(n2), C, N, C, I);
    k->swiglu_forward(S(h), S(gate), S(up), (size_t)N * I);
    pt_projection_forward(b, DOWN, out, C, S(h), I, N, I, C);
    k->add(out, out, S(x2), (size_t)N * C);
}

// dout (B,T,C) -> din (B,T,C)
static void llama_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                 void *s, const void *dout, void *din, float loss_scale)
{
    (void)out, (void)loss_scale;
    const pt_kernels *k = b->k;
    llama_geometry g = geometry_of(b);
    pt_gqa a = gqa_of(&g);
    llama_layout l = layout(b, mb->batch);
    int N = mb->batch * g.T, C = g.C, I = g.I, KVd = g.KV * g.hd, W = pt_gqa_row(&a);
    size_t nc_bytes = (size_t)N * C * pt_elem_size(k->act);

    /* MLP branch: dout -> dh -> dgate, dup -> dn2 -> dx2 (plus the residual) */
    pt_projection_backward_input(b, DOWN, WK(dh), I, dout, C, N, I, C, 0.0f);
    k->swiglu_backward(G(dgate), G(dup), S(gate), S(up), WK(dh), (size_t)N * I);
    pt_projection_backward_input(b, GATE, G(dn2), C, G(dgate), I, N, C, I, 0.0f);
    pt_projection_backward_input(b, UP, G(dn2), C, G(dup), I, N, C, I, 1.0f);
    memcpy(G(dx2), dout, nc_bytes);
    k->rmsnorm_backward_input(G(dx2), G(dn2), S(x2), b->p[POST_NORM], F(rstd2), N, C);
    /* attention branch: dx2 -> dy -> dqkv (rotated back) -> dn1 -> din */
    pt_projection_backward_input(b, O, WK(dy), C, G(dx2), C, N, C, C, 0.0f);
    pt_gqa_backward(k, &a, G(dqkv), F(stats), WK(scratch), WK(dy), S(qkv), mb->batch);
    rotate(k, &g, G(dqkv), F(cos), F(sin), mb->batch, 1);
    pt_projection_backward_input(b, Q, G(dn1), C, QKV_AT(G(dqkv), Q), W, N, C, C, 0.0f);
    pt_projection_backward_input(b, K, G(dn1), C, QKV_AT(G(dqkv), K), W, N, C, KVd, 1.0f);
    pt_projection_backward_input(b, V, G(dn1), C, QKV_AT(G(dqkv), V), W, N, C, KVd, 1.0f);
    if (din) {
        memcpy(din, G(dx2), nc_bytes);
        k->rmsnorm_backward_input(din, G(dn1), in, b->p[IN_NORM], F(rstd1), N, C);
    }
}

static void llama_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                  const void *out, const void *s, const void *dout)
{
    (void)out;
    const pt_kernels *k = b->k;
    llama_geometry g = geometry_of(b);
    pt_gqa a = gqa_of(&g);
    llama_layout l = layout(b, mb->batch);
    int N = mb->batch * g.T, C = g.C, I = g.I, KVd = g.KV * g.hd, W = pt_gqa_row(&a);

    pt_projection_backward_weight(b, DOWN, dout, C, S(h), I, N, I, C);
    pt_projection_backward_weight(b, GATE, G(dgate), I, S(n2), C, N, C, I);
    pt_projection_backward_weight(b, UP, G(dup), I, S(n2), C, N, C, I);
    k->rmsnorm_backward_weight(b->g[POST_NORM], G(dn2), S(x2), F(rstd2), N, C);
    pt_projection_backward_weight(b, O, G(dx2), C, S(y), C, N, C, C);
    pt_projection_backward_weight(b, Q, QKV_AT(G(dqkv), Q), W, S(n1), C, N, C, C);
    pt_projection_backward_weight(b, K, QKV_AT(G(dqkv), K), W, S(n1), C, N, C, KVd);
    pt_projection_backward_weight(b, V, QKV_AT(G(dqkv), V), W, S(n1), C, N, C, KVd);
    k->rmsnorm_backward_weight(b->g[IN_NORM], G(dn1), in, F(rstd1), N, C);
}

#undef S
#undef F
#undef G
#undef WK
#undef QKV_AT

static pt_block_cost llama_cost(const pt_block *b)
{
    llama_geometry g = geometry_of(b);
    double T = g.T, C = g.C, KVd = (double)g.KV * g.hd, I = g.I;
    double proj = 2 * T * (2 * C * C + 2 * C * KVd + 3 * C * I);
    double att = 4.0 * T * T * C; /* the full (T,T) square, as attention.c counts */
    return (pt_block_cost){.forward_flops = proj + att + T * (8 * C + 6 * I),
                           .backward_input_flops = proj + 2 * att + T * (10 * C + 10 * I),
                           .backward_weight_flops = proj + 6 * T * C};
}

static const pt_block_ops llama_ops = {
    .kind = "llama",
    .saved_bytes = llama_saved,
    .grads_bytes = llama_grads,
    .work_bytes = llama_work,
    .forward = llama_forward,
    .backward_input = llama_backward_input,
    .backward_weight = llama_backward_weight,
    .cost = llama_cost,
};

void pt_llama_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    char name[160];
    int cs[1] = {s->C};
    b->ops = &llama_ops;
    b->shape = *s;
    b->layer = -1;
    llama_geometry g = geometry_of(b);
    int KVd = g.KV * g.hd;
    b->in_floats = b->out_floats = s->T * s->C;
#define NAME(part) (snprintf(name, sizeof name, "%s." part, prefix), name)
    pt_block_declare(b, NAME("input_layernorm.weight"), 1, cs, PT_INIT_ONES, 0.0f);
    pt_projection_declare(b, NAME("self_attn.q_proj.weight"), g.C, g.C, 0.02f);
    pt_projection_declare(b, NAME("self_attn.k_proj.weight"), g.C, KVd, 0.02f);
    pt_projection_declare(b, NAME("self_attn.v_proj.weight"), g.C, KVd, 0.02f);
    pt_projection_declare(b, NAME("self_attn.o_proj.weight"), g.C, g.C, 0.02f);
    pt_block_declare(b, NAME("post_attention_layernorm.weight"), 1, cs, PT_INIT_ONES, 0.0f);
    pt_projection_declare(b, NAME("mlp.gate_proj.weight"), g.C, g.I, 0.02f);
    pt_projection_declare(b, NAME("mlp.up_proj.weight"), g.C, g.I, 0.02f);
    pt_projection_declare(b, NAME("mlp.down_proj.weight"), g.I, g.C, 0.02f);
#undef NAME
}
