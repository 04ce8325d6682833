/* attention.c: causal multi-head self-attention (attention.h), and the
 * attention block that wraps it between its two projections:
 *   in (B,T,C) -c_attn-> qkv (B,T,3C) -attention-> y (B,T,C) -c_proj-> out
 * with parameters <prefix>.c_attn.{weight (C,3C), bias} and
 * <prefix>.c_proj.{weight (C,C), bias}, Hugging Face's names. */
#include "nn/attention.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/block.h"
#include "nn/linear.h"

/* The causal mask makes the (T,T) score and probability matrices lower
 * triangular, so the products run over bands of ATT_ROWS rows (or columns)
 * that stop at the diagonal: about 5/8 of the full square at T = 256. The
 * softmax reads only j <= i and writes zeros above the diagonal, so what the
 * bands leave uncomputed is never read. */
#define ATT_ROWS 64

static int band(int T, int r0) { return T - r0 < ATT_ROWS ? T - r0 : ATT_ROWS; }

float pt_attention_scale(const pt_block_shape *s, int layer)
{
    float scale = s->attn_unscaled ? 1.0f : 1.0f / sqrtf((float)(s->C / s->H));
    return s->attn_by_layer ? scale / (float)(layer < 0 ? 1 : layer + 1) : scale;
}

/* an activation operand n elements into p */
#define ACT(p, n, ld) pt_mat_of(pt_elems_at(p, n, k->act), ld, k->act)

// qkv (B,T,3C) -> y (B,T,C); att (B,H,T,T)
void pt_attention_forward(const pt_kernels *k, void *y, void *att, float *scratch, const void *qkv,
                          int B, int T, int C, int H, float scale)
{
    size_t hs = (size_t)(C / H), C3 = 3 * (size_t)C, TT = (size_t)T * T;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t q = (size_t)b * T * C3 + h * hs, kk = q + C, v = q + 2 * (size_t)C;
            size_t a = ((size_t)b * H + h) * TT, yh = (size_t)b * T * C + h * hs;
            for (int r0 = 0; r0 < T; r0 += ATT_ROWS) /* q k^T, rows r0.. up to the diagonal */
                k->matmul(0, 1, band(T, r0), r0 + band(T, r0), (int)hs, 1.0f,
                          ACT(qkv, q + r0 * C3, (int)C3), ACT(qkv, kk, (int)C3), 0.0f,
                          pt_mat_of(scratch + (size_t)r0 * T, T, PT_F32), NULL);
            k->softmax_causal_forward(pt_elems_at(att, a, k->act), scratch, T, scale);
            for (int r0 = 0; r0 < T; r0 += ATT_ROWS) /* att v */
                k->matmul(0, 0, band(T, r0), (int)hs, r0 + band(T, r0), 1.0f,
                          ACT(att, a + (size_t)r0 * T, T), ACT(qkv, v, (int)C3), 0.0f,
                          ACT(y, yh + (size_t)r0 * C, C), NULL);
        }
}

// dy (B,T,C) -> dqkv (B,T,3C)
void pt_attention_backward(const pt_kernels *k, void *dqkv, void *att, float *scratch,
                           const void *dy, const void *qkv, int B, int T, int C, int H, float scale)
{
    size_t hs = (size_t)(C / H), C3 = 3 * (size_t)C, TT = (size_t)T * T;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t q = (size_t)b * T * C3 + h * hs, kk = q + C, v = q + 2 * (size_t)C;
            size_t dq = q, dk = kk, dv = v; /* dqkv is laid out as qkv */
            size_t a = ((size_t)b * H + h) * TT, dyh = (size_t)b * T * C + h * hs;
            for (int r0 = 0; r0 < T; r0 += ATT_ROWS) { /* dP = dy v^T, and dv = att^T dy */
                int n = band(T, r0);
                k->matmul(0, 1, n, r0 + n, (int)hs, 1.0f, ACT(dy, dyh + (size_t)r0 * C, C),
                          ACT(qkv, v, (int)C3), 0.0f,
                          pt_mat_of(scratch + (size_t)r0 * T, T, PT_F32), NULL);
                k->matmul(1, 0, n, (int)hs, T - r0, 1.0f, ACT(att, a + (size_t)r0 * T + r0, T),
                          ACT(dy, dyh + (size_t)r0 * C, C), 0.0f,
                          ACT(dqkv, dv + (size_t)r0 * C3, (int)C3), NULL);
            }
            void *ah = pt_elems_at(att, a, k->act);
            k->softmax_causal_backward(ah, ah, scratch, T, scale); /* dS, in place */
            for (int r0 = 0; r0 < T; r0 += ATT_ROWS) {             /* dq = dS k, and dk = dS^T q */
                int n = band(T, r0);
                k->matmul(0, 0, n, (int)hs, r0 + n, 1.0f, ACT(att, a + (size_t)r0 * T, T),
                          ACT(qkv, kk, (int)C3), 0.0f, ACT(dqkv, dq + (size_t)r0 * C3, (int)C3),
                          NULL);
                k->matmul(1, 0, n, (int)hs, T - r0, 1.0f, ACT(att, a + (size_t)r0 * T + r0, T),
                          ACT(qkv, q + (size_t)r0 * C3, (int)C3), 0.0f,
                          ACT(dqkv, dk + (size_t)r0 * C3, (int)C3), NULL);
            }
        }
}

double pt_attention_forward_flops(int T, int C) { return 4.0 * T * T * C; }
double pt_attention_backward_flops(int T, int C) { return 8.0 * T * T * C; }

/* ---- the attention block ---- */

typedef struct {
    size_t qkv, att, y, dqkv, dy, scratch, total; /* bytes */
} attention_layout;

static attention_layout layout(const pt_block *b, int B)
{
    size_t n = (size_t)B * b->shape.T, C = b->shape.C, T = b->shape.T, at = 0;
    pt_elem_type t = b->k->act;
    attention_layout l;
    l.qkv = pt_saved_take(&at, n * 3 * C, t);
    l.att = pt_saved_take(&at, (size_t)B * b->shape.H * T * T, t);
    l.y = pt_saved_take(&at, n * C, t);
    l.dqkv = pt_saved_take(&at, n * 3 * C, t);
    l.dy = pt_saved_take(&at, n * C, t);
    l.scratch = pt_saved_take(&at, T * T, PT_F32);
    l.total = at;
    return l;
}

static size_t attention_saved(const pt_block *b, int B) { return layout(b, B).total; }

// in (B,T,C) -> out (B,T,C)
static void attention_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                              void *s, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    int B = mb->batch, T = b->shape.T, C = b->shape.C, N = B * T;
    attention_layout l = layout(b, B);
    pt_linear_forward(b, 0, pt_saved_at(s, l.qkv), in, N, C, 3 * C);
    pt_attention_forward(b->k, pt_saved_at(s, l.y), pt_saved_at(s, l.att),
                         pt_saved_floats(s, l.scratch), pt_saved_at(s, l.qkv), B, T, C, b->shape.H,
                         pt_attention_scale(&b->shape, b->layer));
    pt_linear_forward(b, 2, out, pt_saved_at(s, l.y), N, C, C);
}

// dout (B,T,C) -> din (B,T,C)
static void attention_backward_input(pt_block *b, const pt_microbatch *mb, const void *in,
                                     void *out, void *s, const void *dout, void *din,
                                     float loss_scale)
{
    (void)in, (void)out, (void)loss_scale;
    int B = mb->batch, T = b->shape.T, C = b->shape.C, N = B * T;
    attention_layout l = layout(b, B);
    pt_linear_backward_input(b, 2, pt_saved_at(s, l.dy), dout, N, C, C);
    pt_attention_backward(b->k, pt_saved_at(s, l.dqkv), pt_saved_at(s, l.att),
                          pt_saved_floats(s, l.scratch), pt_saved_at(s, l.dy),
                          pt_saved_at(s, l.qkv), B, T, C, b->shape.H,
                          pt_attention_scale(&b->shape, b->layer));
    if (din)
        pt_linear_backward_input(b, 0, din, pt_saved_at(s, l.dqkv), N, C, 3 * C);
}

static void attention_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                      const void *out, const void *s, const void *dout)
{
    (void)out;
    int B = mb->batch, C = b->shape.C, N = B * b->shape.T;
    attention_layout l = layout(b, B);
    pt_linear_backward_weight(b, 2, dout, pt_saved_at(s, l.y), N, C, C);
    pt_linear_backward_weight(b, 0, pt_saved_at(s, l.dqkv), in, N, C, 3 * C);
}
static pt_block_cost attention_cost(const pt_block *b)
{
    double T = b->shape.T, C = b->shape.C, proj = 2 * T * C * 4 * C;
    return (pt_block_cost){
        .forward_flops = proj + pt_attention_forward_flops(b->shape.T, b->shape.C),
        .backward_input_flops = proj + pt_attention_backward_flops(b->shape.T, b->shape.C),
        .backward_weight_flops = proj};
}

static const pt_block_ops attention_ops = {
    .kind = "attention",
    .saved_bytes = attention_saved,
    .forward = attention_forward,
    .backward_input = attention_backward_input,
    .backward_weight = attention_backward_weight,
    .cost = attention_cost,
};

void pt_attention_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    char name[96];
    b->ops = &attention_ops;
    b->layer = -1;
    b->shape = *s;
    b->in_floats = b->out_floats = s->T * s->C;
    snprintf(name, sizeof name, "%s.c_attn", prefix);
    pt_block_declare_linear(b, name, s->C, 3 * s->C, 0.02f);
    snprintf(name, sizeof name, "%s.c_proj", prefix);
    pt_block_declare_linear(b, name, s->C, s->C, 0.02f);
}
