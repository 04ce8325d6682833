/* transformer_split.c: the GPT-2 transformer block (transformer.c) as slice
 * t of T, Megatron-LM's tensor-parallel scheme:
 *   c_attn      column-parallel: the slice holds the Q, K and V columns of
 *               heads t H/T .. (t+1) H/T - 1 (and their biases), so its
 *               attention runs on its own H/T heads;
 *   attn.c_proj row-parallel: the rows (inputs) of those heads; its
 *               product is a partial sum that the tensor group sums, and
 *               the bias is added once, after the sum;
 *   mlp.c_fc    column-parallel: I/T of the MLP's columns;
 *   mlp.c_proj  row-parallel: the matching I/T rows, summed like c_proj.
 * The LayerNorms and the two row-parallel biases are whole on every slice
 * and see the same (summed) inputs, so every slice keeps them equal.
 *
 * The block runs in three pieces each way; between two pieces the tensor
 * group sums a buffer (the program's TENSOR_SUM actions, never a call from
 * here):
 *   forward:  0 ln_1, c_attn, attention, c_proj -> partial (N,C)   [sum: g]
 *             1 + bias + x, ln_2, c_fc, act, c_proj -> partial (N,C) [sum: g]
 *             2 + bias + x2
 *   backward: 0 dout through mlp.c_proj, act, c_fc -> dln2 partial  [sum: f]
 *             1 ln_2, + dout, c_proj, attention, c_attn -> dln1 partial [f]
 *             2 ln_1 + dx2 -> din
 * backward_weight needs no sum: each slice's gradients are its own. */
#include <stdbool.h>

#include "nn/attention.h"
#include "nn/block.h"
#include "nn/linear.h"
#include "nn/split_products.h"

enum { LN1_W, LN1_B, ATTN_W, ATTN_B, APROJ_W, APROJ_B, LN2_W, LN2_B, FC_W, FC_B, FPROJ_W, FPROJ_B };

/* The slice's widths: channels of its heads, its heads, its MLP columns. */
typedef struct {
    int C, Cl, Hl, Il;
} split_widths;

static split_widths widths(const pt_block *b)
{
    int T = b->shape.tensor;
    return (split_widths){b->shape.C, b->shape.C / T, b->shape.H / T, b->shape.n_inner / T};
}

typedef struct {
    size_t ln1, mean1, rstd1, qkv, stats, y, x2, ln2, mean2, rstd2, h, g;
    size_t dqkv, dy, dx2, dln1, dln2, dh, scratch;
    /* the partial sums the group adds, in float: under bf16 four buffers of
     * their own (rounded once, after the sum), under fp32 x2, the output,
     * dln2 and dln1 themselves (out_sum 0: the block's output) */
    size_t x2_sum, out_sum, dln2_sum, dln1_sum, total;
    bool floats; /* activations are floats: the sums are in place */
} split_layout;

static split_layout layout(const pt_block *b, int B)
{
    split_widths w = widths(b);
    size_t T = b->shape.T, n = (size_t)B * T, at = 0;
    pt_elem_type t = b->k->act;
    split_layout l;
    l.ln1 = pt_saved_take(&at, n * w.C, t);
    l.mean1 = pt_saved_take(&at, n, PT_F32);
    l.rstd1 = pt_saved_take(&at, n, PT_F32);
    l.qkv = pt_saved_take(&at, n * 3 * w.Cl, t);
    l.stats = pt_saved_take(&at, (size_t)B * w.Hl * T * 2, PT_F32);
    l.y = pt_saved_take(&at, n * w.Cl, t);
    l.x2 = pt_saved_take(&at, n * w.C, t);
    l.ln2 = pt_saved_take(&at, n * w.C, t);
    l.mean2 = pt_saved_take(&at, n, PT_F32);
    l.rstd2 = pt_saved_take(&at, n, PT_F32);
    l.h = pt_saved_take(&at, n * w.Il, t);
    l.g = pt_saved_take(&at, n * w.Il, t);
    l.dqkv = pt_saved_take(&at, n * 3 * w.Cl, t);
    l.dy = pt_saved_take(&at, n * w.Cl, t);
    l.dx2 = pt_saved_take(&at, n * w.C, t);
    l.dln1 = pt_saved_take(&at, n * w.C, t);
    l.dln2 = pt_saved_take(&at, n * w.C, t);
    l.dh = pt_saved_take(&at, n * w.Il, t);
    l.scratch = pt_saved_take(&at, pt_attention_scratch_floats((int)T, w.Cl, w.Hl, t), PT_F32);
    l.floats = t == PT_F32;
    l.x2_sum = l.floats ? l.x2 : pt_saved_take(&at, n * w.C, PT_F32);
    l.out_sum = l.floats ? 0 : pt_saved_take(&at, n * w.C, PT_F32);
    l.dln2_sum = l.floats ? l.dln2 : pt_saved_take(&at, n * w.C, PT_F32);
    l.dln1_sum = l.floats ? l.dln1 : pt_saved_take(&at, n * w.C, PT_F32);
    l.total = at;
    return l;
}

static size_t split_saved(const pt_block *b, int B) { return layout(b, B).total; }

#define S(name) pt_saved_at(s, l.name)
#define F(name) pt_saved_floats(s, l.name)

/* After the group's sum: the floats stored as activations (in place under fp32) */
static void store_sum(const pt_block *b, void *x, const float *sum, size_t n)
{
    if (x != (const void *)sum)
        b->k->store_floats(x, sum, n);
}

// in (B,T,C) -> out (B,T,C), piece by piece
static void split_forward_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                                void *out, void *s, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    const pt_kernels *k = b->k;
    float *const *p = b->p;
    split_widths w = widths(b);
    int B = mb->batch, T = b->shape.T, N = B * T;
    split_layout l = layout(b, B);
    float eps = b->shape.ln_eps;
    switch (piece) {
    case 0:
        k->layernorm_forward(S(ln1), F(mean1), F(rstd1), in, p[LN1_W], p[LN1_B], N, w.C, eps);
        pt_linear_forward(b, ATTN_W, S(qkv), S(ln1), N, w.C, 3 * w.Cl);
        pt_attention_forward(k, S(y), F(stats), F(scratch), S(qkv), B, T, w.Cl, w.Hl,
                             pt_attention_scale(&b->shape, b->layer));
        pt_row_parallel(b, APROJ_W, F(x2_sum), S(y), N, w.Cl, w.C);
        break;
    case 1:
        pt_add_bias_rows(b, S(x2), F(x2_sum), p[APROJ_B], N, w.C);
        k->residual_layernorm_forward(S(x2), S(ln2), F(mean2), F(rstd2), S(x2), in, p[LN2_W],
                                      p[LN2_B], N, w.C, eps);
        pt_linear_forward(b, FC_W, S(h), S(ln2), N, w.C, w.Il);
        pt_activation_pick(k, b->shape.act).forward(S(g), S(h), (size_t)N * w.Il);
        pt_row_parallel(b, FPROJ_W, l.floats ? out : F(out_sum), S(g), N, w.Il, w.C);
        break;
    case 2:
        pt_add_bias_rows(b, out, l.floats ? out : F(out_sum), p[FPROJ_B], N, w.C);
        k->add(out, out, S(x2), (size_t)N * w.C);
        break;
    }
}

// dout (B,T,C) -> din (B,T,C), piece by piece
static void split_backward_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                                 void *out, void *s, const void *dout, void *din, float loss_scale)
{
    (void)out, (void)loss_scale;
    const pt_kernels *k = b->k;
    float *const *p = b->p;
    split_widths w = widths(b);
    int B = mb->batch, T = b->shape.T, N = B * T;
    split_layout l = layout(b, B);
    switch (piece) {
    case 0:
        pt_linear_backward_input(b, FPROJ_W, S(dh), dout, N, w.Il, w.C);
        pt_activation_pick(k, b->shape.act).backward(S(dh), S(h), S(dh), (size_t)N * w.Il);
        pt_column_input_grad(b, FC_W, F(dln2_sum), S(dh), N, w.C, w.Il);
        break;
    case 1:
        store_sum(b, S(dln2), F(dln2_sum), (size_t)N * w.C);
        k->layernorm_backward_input(S(dx2), dout, S(dln2), S(x2), p[LN2_W], F(mean2), F(rstd2), N,
                                    w.C);
        pt_linear_backward_input(b, APROJ_W, S(dy), S(dx2), N, w.Cl, w.C);
        pt_attention_backward(k, S(dqkv), F(stats), F(scratch), S(dy), S(qkv), B, T, w.Cl, w.Hl,
                              pt_attention_scale(&b->shape, b->layer));
        pt_column_input_grad(b, ATTN_W, F(dln1_sum), S(dqkv), N, w.C, 3 * w.Cl);
        break;
    case 2:
        store_sum(b, S(dln1), F(dln1_sum), (size_t)N * w.C);
        if (din)
            k->layernorm_backward_input(din, S(dx2), S(dln1), in, p[LN1_W], F(mean1), F(rstd1), N,
                                        w.C);
        break;
    }
}

static void split_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                  const void *out, const void *s, const void *dout)
{
    (void)out;
    const pt_kernels *k = b->k;
    float *const *g = b->g;
    split_widths w = widths(b);
    int N = mb->batch * b->shape.T;
    split_layout l = layout(b, mb->batch);
    pt_linear_backward_weight(b, FPROJ_W, dout, S(g), N, w.Il, w.C);
    pt_linear_backward_weight(b, FC_W, S(dh), S(ln2), N, w.C, w.Il);
    k->layernorm_backward_weight(g[LN2_W], g[LN2_B], S(dln2), S(x2), F(mean2), F(rstd2), N, w.C);
    pt_linear_backward_weight(b, APROJ_W, S(dx2), S(y), N, w.Cl, w.C);
    pt_linear_backward_weight(b, ATTN_W, S(dqkv), S(ln1), N, w.C, 3 * w.Cl);
    k->layernorm_backward_weight(g[LN1_W], g[LN1_B], S(dln1), in, F(mean1), F(rstd1), N, w.C);
}

static float *split_sum_buffer(const pt_block *b, int backward, int piece, int B, void *out,
                               void *s, size_t *count)
{
    split_layout l = layout(b, B);
    *count = (size_t)B * b->shape.T * b->shape.C;
    if (backward)
        return piece == 0 ? F(dln2_sum) : F(dln1_sum);
    return piece == 0 ? F(x2_sum) : l.floats ? (float *)out : F(out_sum);
}

#undef S
#undef F

static int split_sums(const pt_block *b, int backward)
{
    (void)b, (void)backward;
    return 2;
}

/* The pieces without the sums: what a profile of the slice times. */
static void split_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out, void *s,
                          double *loss_sum, int *loss_rows)
{
    for (int i = 0; i < 3; i++)
        split_forward_piece(b, i, mb, in, out, s, loss_sum, loss_rows);
}

static void split_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                 void *s, const void *dout, void *din, float loss_scale)
{
    for (int i = 0; i < 3; i++)
        split_backward_piece(b, i, mb, in, out, s, dout, din, loss_scale);
}

static pt_block_cost split_cost(const pt_block *b)
{
    split_widths w = widths(b);
    double T = b->shape.T, C = w.C, Cl = w.Cl, I = w.Il;
    double proj = 2 * T * (4 * C * Cl + 2 * C * I);
    double attn_f = pt_attention_forward_flops(b->shape.T, b->shape.C) / b->shape.tensor;
    double attn_b = pt_attention_backward_flops(b->shape.T, b->shape.C) / b->shape.tensor;
    return (pt_block_cost){.forward_flops = proj + attn_f,
                           .backward_input_flops = proj + attn_b,
                           .backward_weight_flops = proj};
}

static const pt_block_ops split_ops = {
    .kind = "transformer",
    .saved_bytes = split_saved,
    .forward = split_forward,
    .backward_input = split_backward_input,
    .backward_weight = split_backward_weight,
    .tensor_sums = split_sums,
    .forward_piece = split_forward_piece,
    .backward_input_piece = split_backward_piece,
    .tensor_sum_buffer = split_sum_buffer,
    .cost = split_cost,
};

void pt_transformer_split(pt_block *b)
{
    int T = b->shape.tensor, t = b->shape.tensor_rank;
    b->ops = &split_ops;
    /* columns of Q, K and V alike; rows of the two projections */
    pt_block_split_param(b, ATTN_W, 1, 3, T, t);
    pt_block_split_param(b, ATTN_B, 0, 3, T, t);
    pt_block_split_param(b, APROJ_W, 0, 1, T, t);
    pt_block_split_param(b, FC_W, 1, 1, T, t);
    pt_block_split_param(b, FC_B, 0, 1, T, t);
    pt_block_split_param(b, FPROJ_W, 0, 1, T, t);
    if (b->shape.sequence_parallel)
        pt_transformer_sequence(b);
}
