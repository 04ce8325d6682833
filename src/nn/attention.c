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

// qkv (B,T,3C) -> y (B,T,C); att (B,H,T,T)
void pt_attention_forward(const pt_kernels *k, float *y, float *att, const float *qkv, int B, int T,
                          int C, int H, float scale)
{
    int hs = C / H, C3 = 3 * C;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *q = qkv + (size_t)b * T * C3 + h * hs;
            const float *kk = q + C, *v = q + 2 * C;
            float *a = att + ((size_t)b * H + h) * T * T;
            float *yh = y + (size_t)b * T * C + h * hs;
            for (int r0 = 0; r0 < T; r0 += ATT_ROWS) /* q k^T, rows r0.. up to the diagonal */
                k->matmul(0, 1, band(T, r0), r0 + band(T, r0), hs, 1.0f, q + (size_t)r0 * C3, C3,
                          kk, C3, 0.0f, a + (size_t)r0 * T, T);
            k->softmax_causal_forward(a, T, scale);
            for (int r0 = 0; r0 < T; r0 += ATT_ROWS) /* att v */
                k->matmul(0, 0, band(T, r0), hs, r0 + band(T, r0), 1.0f, a + (size_t)r0 * T, T, v,
                          C3, 0.0f, yh + (size_t)r0 * C, C);
        }
}

// dy (B,T,C) -> dqkv (B,T,3C)
void pt_attention_backward(const pt_kernels *k, float *dqkv, float *att, float *scratch,
                           const float *dy, const float *qkv, int B, int T, int C, int H,
                           float scale)
{
    int hs = C / H, C3 = 3 * C;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *q = qkv + (size_t)b * T * C3 + h * hs;
            const float *kk = q + C, *v = q + 2 * C;
            float *dq = dqkv + (size_t)b * T * C3 + h * hs;
            float *dk = dq + C, *dv = dq + 2 * C;
            float *a = att + ((size_t)b * H + h) * T * T;
            const float *dyh = dy + (size_t)b * T * C + h * hs;
            for (int r0 = 0; r0 < T; r0 += ATT_ROWS) { /* dP = dy v^T, and dv = att^T dy */
                int n = band(T, r0);
                k->matmul(0, 1, n, r0 + n, hs, 1.0f, dyh + (size_t)r0 * C, C, v, C3, 0.0f,
                          scratch + (size_t)r0 * T, T);
                k->matmul(1, 0, n, hs, T - r0, 1.0f, a + (size_t)r0 * T + r0, T,
                          dyh + (size_t)r0 * C, C, 0.0f, dv + (size_t)r0 * C3, C3);
            }
            k->softmax_causal_backward(a, a, scratch, T, scale); /* dS, in place */
            for (int r0 = 0; r0 < T; r0 += ATT_ROWS) {           /* dq = dS k, and dk = dS^T q */
                int n = band(T, r0);
                k->matmul(0, 0, n, hs, r0 + n, 1.0f, a + (size_t)r0 * T, T, kk, C3, 0.0f,
                          dq + (size_t)r0 * C3, C3);
                k->matmul(1, 0, n, hs, T - r0, 1.0f, a + (size_t)r0 * T + r0, T,
                          q + (size_t)r0 * C3, C3, 0.0f, dk + (size_t)r0 * C3, C3);
            }
        }
}

double pt_attention_forward_flops(int T, int C) { return 4.0 * T * T * C; }
double pt_attention_backward_flops(int T, int C) { return 8.0 * T * T * C; }

/* ---- the attention block ---- */

typedef struct {
    size_t qkv, att, y, dqkv, dy, scratch, total;
} attention_layout;

static attention_layout layout(const pt_block *b, int B)
{
    size_t n = (size_t)B * b->shape.T, C = b->shape.C, T = b->shape.T;
    attention_layout l;
    size_t at = 0;
    l.qkv = at, at += n * 3 * C;
    l.att = at, at += (size_t)B * b->shape.H * T * T;
    l.y = at, at += n * C;
    l.dqkv = at, at += n * 3 * C;
    l.dy = at, at += n * C;
    l.scratch = at, at += T * T;
    l.total = at;
    return l;
}

static size_t attention_saved(const pt_block *b, int B) { return layout(b, B).total; }

// in (B,T,C) -> out (B,T,C)
static void attention_forward(pt_block *b, const pt_microbatch *mb, const float *in, float *out,
                              float *saved, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    const pt_kernels *k = b->k;
    int B = mb->batch, T = b->shape.T, C = b->shape.C, N = B * T;
    attention_layout l = layout(b, B);
    pt_linear_forward(k, saved + l.qkv, in, b->p[0], b->p[1], N, C, 3 * C);
    pt_attention_forward(k, saved + l.y, saved + l.att, saved + l.qkv, B, T, C, b->shape.H,
                         pt_attention_scale(&b->shape, b->layer));
    pt_linear_forward(k, out, saved + l.y, b->p[2], b->p[3], N, C, C);
}

// dout (B,T,C) -> din (B,T,C)
static void attention_backward_input(pt_block *b, const pt_microbatch *mb, const float *in,
                                     float *out, float *saved, const float *dout, float *din,
                                     float loss_scale)
{
    (void)in, (void)out, (void)loss_scale;
    const pt_kernels *k = b->k;
    int B = mb->batch, T = b->shape.T, C = b->shape.C, N = B * T;
    attention_layout l = layout(b, B);
    pt_linear_backward_input(k, saved + l.dy, dout, b->p[2], N, C, C, 0);
    pt_attention_backward(k, saved + l.dqkv, saved + l.att, saved + l.scratch, saved + l.dy,
                          saved + l.qkv, B, T, C, b->shape.H,
                          pt_attention_scale(&b->shape, b->layer));
    if (din)
        pt_linear_backward_input(k, din, saved + l.dqkv, b->p[0], N, C, 3 * C, 0);
}

static void attention_backward_weight(pt_block *b, const pt_microbatch *mb, const float *in,
                                      const float *out, const float *saved, const float *dout)
{
    (void)out;
    const pt_kernels *k = b->k;
    int B = mb->batch, C = b->shape.C, N = B * b->shape.T;
    attention_layout l = layout(b, B);
    pt_linear_backward_weight(k, b->g[2], b->g[3], dout, saved + l.y, N, C, C);
    pt_linear_backward_weight(k, b->g[0], b->g[1], saved + l.dqkv, in, N, C, 3 * C);
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
    .saved_floats = attention_saved,
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
