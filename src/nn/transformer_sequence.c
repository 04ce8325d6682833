/* transformer_sequence.c: the GPT-2 transformer block as slice t of T with
 * sequence parallelism (Megatron-LM's, sequence_split.h): the slice's
 * parameters are transformer_split.c's, but its input and output are its
 * own L/T positions of every sample, and so are the LayerNorms and the
 * residual adds. Each tensor-parallel region starts with an all-gather of
 * the LayerNorm's output and ends with a reduce-scatter of the row-parallel
 * product, so the block runs in five pieces each way:
 *   forward:  0 ln_1 (own rows)                          [gather ln_1]
 *             1 c_attn, attention, c_proj -> partial     [reduce-scatter]
 *             2 + bias + x, ln_2 (own rows)              [gather ln_2]
 *             3 c_fc, act, c_proj -> partial             [reduce-scatter]
 *             4 + bias + x2
 *   backward: 0                                  [gather dout and ln_2]
 *             1 mlp.c_proj, act, c_fc -> partial dln2    [reduce-scatter]
 *             2 ln_2 (own rows)                  [gather dx2 and ln_1]
 *             3 attn.c_proj, attention, c_attn -> partial dln1 [r-s]
 *             4 ln_1 (own rows) -> din
 * A micro-batch keeps only its own rows of x2 and of the two LayerNorms'
 * outputs (and the regions' split tensors); whole-sequence tensors live in
 * the stage's workspace for the length of one pass. So the backward
 * computes the weight gradients as the whole tensors pass by (the
 * LayerNorms' gradients are their rows' part, summed over the group before
 * the norm) and backward_weight has nothing left to do: a zero-bubble
 * schedule's W costs nothing here. Under bf16 the gathers and the partial
 * sums are floats (a gathered tensor is rounded once into the activations
 * the products read; a partial sum is rounded once after the group's sum,
 * as transformer_split.c does). */
#include <stdbool.h>

#include "nn/attention.h"
#include "nn/block.h"
#include "nn/linear.h"
#include "nn/sequence_split.h"
#include "nn/split_products.h"

enum { LN1_W, LN1_B, ATTN_W, ATTN_B, APROJ_W, APROJ_B, LN2_W, LN2_B, FC_W, FC_B, FPROJ_W, FPROJ_B };

/* The slice's widths: channels of its heads, its heads, its MLP columns. */
typedef struct {
    int C, Cl, Hl, Il;
} seq_widths;

static seq_widths widths(const pt_block *b)
{
    int T = b->shape.tensor;
    return (seq_widths){b->shape.C, b->shape.C / T, b->shape.H / T, b->shape.n_inner / T};
}

/* Kept per micro-batch (saved): own rows (own) or every row (n). */
typedef struct {
    size_t ln1, mean1, rstd1, qkv, stats, y, x2, ln2, mean2, rstd2, h, g, total;
} seq_saved;

/* The stage's workspace for one pass: pair holds one or two gathered
 * tensors in floats and act the same as activations (pair itself under
 * fp32), part a reduce-scatter's partial sums. */
typedef struct {
    size_t pair, act, part, dh, dqkv, dy, dln, dx2, scratch, total;
} seq_work;

static seq_saved saved_layout(const pt_block *b, int B)
{
    seq_widths w = widths(b);
    size_t L = b->shape.T, n = (size_t)B * L, own = n / b->shape.tensor, at = 0;
    pt_elem_type t = b->k->act;
    seq_saved l;
    l.ln1 = pt_saved_take(&at, own * w.C, t);
    l.mean1 = pt_saved_take(&at, own, PT_F32);
    l.rstd1 = pt_saved_take(&at, own, PT_F32);
    l.qkv = pt_saved_take(&at, n * 3 * w.Cl, t);
    l.stats = pt_saved_take(&at, (size_t)B * w.Hl * L * 2, PT_F32);
    l.y = pt_saved_take(&at, n * w.Cl, t);
    l.x2 = pt_saved_take(&at, own * w.C, t);
    l.ln2 = pt_saved_take(&at, own * w.C, t);
    l.mean2 = pt_saved_take(&at, own, PT_F32);
    l.rstd2 = pt_saved_take(&at, own, PT_F32);
    l.h = pt_saved_take(&at, n * w.Il, t);
    l.g = pt_saved_take(&at, n * w.Il, t);
    l.total = at;
    return l;
}

static seq_work work_layout(const pt_block *b, int B)
{
    seq_widths w = widths(b);
    size_t L = b->shape.T, n = (size_t)B * L, own = n / b->shape.tensor, at = 0;
    pt_elem_type t = b->k->act;
    seq_work l;
    l.pair = pt_saved_take(&at, 2 * n * w.C, PT_F32);
    l.act = t == PT_F32 ? l.pair : pt_saved_take(&at, 2 * n * w.C, t);
    l.part = pt_saved_take(&at, n * w.C, PT_F32);
    l.dh = pt_saved_take(&at, n * w.Il, t);
    l.dqkv = pt_saved_take(&at, n * 3 * w.Cl, t);
    l.dy = pt_saved_take(&at, n * w.Cl, t);
    l.dln = pt_saved_take(&at, own * w.C, t);
    l.dx2 = pt_saved_take(&at, own * w.C, t);
    l.scratch = pt_saved_take(&at, pt_attention_scratch_floats((int)L, w.Cl, w.Hl, t), PT_F32);
    l.total = at;
    return l;
}

static size_t seq_saved_bytes(const pt_block *b, int B) { return saved_layout(b, B).total; }
static size_t seq_work_bytes(const pt_block *b, int B) { return work_layout(b, B).total; }

#define S(name)  pt_saved_at(s, l.name)
#define SF(name) pt_saved_floats(s, l.name)
#define W(name)  pt_saved_at(b->work, k.name)
#define WF(name) pt_saved_floats(b->work, k.name)

/* The gathered tensors (floats) as the activations the products read:
 * rounded once under bf16, themselves under fp32. */
static void gathered_as_act(const pt_block *b, const seq_work *k, size_t n)
{
    if (k->act != k->pair)
        b->k->store_floats(pt_saved_at(b->work, k->act), pt_saved_floats(b->work, k->pair), n);
}

/* x (own rows, activations) = the slice's rows of the group's sum + bias */
static void own_rows_plus_bias(const pt_block *b, void *x, const float *sum, const float *bias,
                               pt_seq_rows r)
{
    for (int i = 0; i < r.B; i++)
        pt_add_bias_rows(b, pt_elems_at(x, pt_seq_own_at(r, i), b->k->act),
                         sum + pt_seq_whole_at(r, i), bias, r.R, r.C);
}

// in (B,L/T,C) -> out (B,L/T,C), piece by piece
static void seq_forward_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                              void *out, void *s, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    const pt_kernels *kr = b->k;
    float *const *p = b->p;
    seq_widths w = widths(b);
    int B = mb->batch, L = b->shape.T, N = B * L;
    pt_seq_rows r = pt_seq_rows_of(b, B, w.C);
    int own = B * r.R;
    seq_saved l = saved_layout(b, B);
    seq_work k = work_layout(b, B);
    float eps = b->shape.ln_eps;
    pt_elem_type t = kr->act;
    switch (piece) {
    case 0:
        kr->layernorm_forward(S(ln1), SF(mean1), SF(rstd1), in, p[LN1_W], p[LN1_B], own, w.C, eps);
        pt_seq_put(WF(pair), S(ln1), t, r);
        break;
    case 1: /* the gathered ln_1 */
        gathered_as_act(b, &k, (size_t)N * w.C);
        pt_linear_forward(b, ATTN_W, S(qkv), W(act), N, w.C, 3 * w.Cl);
        pt_attention_forward(kr, S(y), SF(stats), WF(scratch), S(qkv), B, L, w.Cl, w.Hl,
                             pt_attention_scale(&b->shape, b->layer));
        pt_row_parallel(b, APROJ_W, WF(part), S(y), N, w.Cl, w.C);
        break;
    case 2:
        own_rows_plus_bias(b, S(x2), WF(part), p[APROJ_B], r);
        kr->residual_layernorm_forward(S(x2), S(ln2), SF(mean2), SF(rstd2), S(x2), in, p[LN2_W],
                                       p[LN2_B], own, w.C, eps);
        pt_seq_put(WF(pair), S(ln2), t, r);
        break;
    case 3: /* the gathered ln_2 */
        gathered_as_act(b, &k, (size_t)N * w.C);
        pt_linear_forward(b, FC_W, S(h), W(act), N, w.C, w.Il);
        pt_activation_pick(kr, b->shape.act).forward(S(g), S(h), (size_t)N * w.Il);
        pt_row_parallel(b, FPROJ_W, WF(part), S(g), N, w.Il, w.C);
        break;
    case 4:
        own_rows_plus_bias(b, out, WF(part), p[FPROJ_B], r);
        kr->add(out, out, S(x2), (size_t)own * w.C);
        break;
    }
}

// dout (B,L/T,C) -> din (B,L/T,C), piece by piece, with the weight gradients
static void seq_backward_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                               void *out, void *s, const void *dout, void *din, float loss_scale)
{
    (void)out, (void)loss_scale;
    const pt_kernels *kr = b->k;
    float *const *p = b->p, *const *g = b->g;
    seq_widths w = widths(b);
    int B = mb->batch, L = b->shape.T, N = B * L;
    pt_seq_rows r = pt_seq_rows_of(b, B, w.C);
    int own = B * r.R;
    size_t whole = (size_t)N * w.C;
    seq_saved l = saved_layout(b, B);
    seq_work k = work_layout(b, B);
    pt_elem_type t = kr->act;
    /* the two gathered tensors, in floats and as activations */
    float *first = WF(pair), *second = WF(pair) + whole;
    void *first_act = W(act), *second_act = pt_elems_at(W(act), whole, t);
    switch (piece) {
    case 0:
        pt_seq_put(first, dout, t, r);
        pt_seq_put(second, S(ln2), t, r);
        break;
    case 1: /* first: dout, second: ln_2's output, every row */
        gathered_as_act(b, &k, 2 * whole);
        pt_linear_backward_weight(b, FPROJ_W, first_act, S(g), N, w.Il, w.C);
        pt_linear_backward_input(b, FPROJ_W, W(dh), first_act, N, w.Il, w.C);
        pt_activation_pick(kr, b->shape.act).backward(W(dh), S(h), W(dh), (size_t)N * w.Il);
        pt_linear_backward_weight(b, FC_W, W(dh), second_act, N, w.C, w.Il);
        pt_column_input_grad(b, FC_W, WF(part), W(dh), N, w.C, w.Il);
        break;
    case 2:
        pt_seq_take(kr, W(dln), WF(part), r);
        kr->layernorm_backward_weight(g[LN2_W], g[LN2_B], W(dln), S(x2), SF(mean2), SF(rstd2), own,
                                      w.C);
        kr->layernorm_backward_input(W(dx2), dout, W(dln), S(x2), p[LN2_W], SF(mean2), SF(rstd2),
                                     own, w.C);
        pt_seq_put(first, W(dx2), t, r);
        pt_seq_put(second, S(ln1), t, r);
        break;
    case 3: /* first: dx2, second: ln_1's output, every row */
        gathered_as_act(b, &k, 2 * whole);
        pt_linear_backward_weight(b, APROJ_W, first_act, S(y), N, w.Cl, w.C);
        pt_linear_backward_input(b, APROJ_W, W(dy), first_act, N, w.Cl, w.C);
        pt_attention_backward(kr, W(dqkv), SF(stats), WF(scratch), W(dy), S(qkv), B, L, w.Cl, w.Hl,
                              pt_attention_scale(&b->shape, b->layer));
        pt_linear_backward_weight(b, ATTN_W, W(dqkv), second_act, N, w.C, 3 * w.Cl);
        pt_column_input_grad(b, ATTN_W, WF(part), W(dqkv), N, w.C, 3 * w.Cl);
        break;
    case 4:
        pt_seq_take(kr, W(dln), WF(part), r);
        kr->layernorm_backward_weight(g[LN1_W], g[LN1_B], W(dln), in, SF(mean1), SF(rstd1), own,
                                      w.C);
        if (din)
            kr->layernorm_backward_input(din, W(dx2), W(dln), in, p[LN1_W], SF(mean1), SF(rstd1),
                                         own, w.C);
        break;
    }
}

static float *seq_sum_buffer(const pt_block *b, int backward, int piece, int B, void *out, void *s,
                             size_t *count)
{
    (void)out, (void)s;
    seq_work k = work_layout(b, B);
    size_t whole = (size_t)B * b->shape.T * b->shape.C;
    bool pair = piece % 2 == 0; /* gathers: forward's one tensor, backward's two */
    *count = pair && backward ? 2 * whole : whole;
    return pair ? WF(pair) : WF(part);
}

#undef S
#undef SF
#undef W
#undef WF

/* even pieces end in a gather (backward's of two tensors), odd ones in a
 * reduce-scatter */
static pt_group_how seq_sum_how(const pt_block *b, int backward, int piece, int B)
{
    pt_seq_rows r = pt_seq_rows_of(b, B, b->shape.C);
    return piece % 2 ? pt_seq_how(PT_GROUP_SCATTER, r, 1)
                     : pt_seq_how(PT_GROUP_GATHER, r, backward ? 2 : 1);
}

static int seq_sums(const pt_block *b, int backward)
{
    (void)b, (void)backward;
    return 4;
}

/* The pieces without the sums: what a profile of the slice times. */
static void seq_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out, void *s,
                        double *loss_sum, int *loss_rows)
{
    for (int i = 0; i < 5; i++)
        seq_forward_piece(b, i, mb, in, out, s, loss_sum, loss_rows);
}

static void seq_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                               void *s, const void *dout, void *din, float loss_scale)
{
    for (int i = 0; i < 5; i++)
        seq_backward_piece(b, i, mb, in, out, s, dout, din, loss_scale);
}

/* transformer_split.c's products, the weights' in the backward */
static pt_block_cost seq_cost(const pt_block *b)
{
    seq_widths w = widths(b);
    double L = b->shape.T, C = w.C, Cl = w.Cl, I = w.Il;
    double proj = 2 * L * (4 * C * Cl + 2 * C * I);
    double attn_f = pt_attention_forward_flops(b->shape.T, b->shape.C) / b->shape.tensor;
    double attn_b = pt_attention_backward_flops(b->shape.T, b->shape.C) / b->shape.tensor;
    return (pt_block_cost){.forward_flops = proj + attn_f,
                           .backward_input_flops = 2 * proj + attn_b,
                           .backward_weight_flops = 0};
}

static const pt_block_ops seq_ops = {
    .kind = "transformer",
    .saved_bytes = seq_saved_bytes,
    .forward = seq_forward,
    .backward_input = seq_backward_input,
    .backward_weight = pt_block_no_weights,
    .tensor_sums = seq_sums,
    .forward_piece = seq_forward_piece,
    .backward_input_piece = seq_backward_piece,
    .tensor_sum_buffer = seq_sum_buffer,
    .tensor_sum_how = seq_sum_how,
    .cost = seq_cost,
    .work_bytes = seq_work_bytes,
};

void pt_transformer_sequence(pt_block *b)
{
    b->ops = &seq_ops;
    b->in_floats = b->out_floats = b->shape.T / b->shape.tensor * b->shape.C;
    int partial[] = {LN1_W, LN1_B, LN2_W, LN2_B};
    for (size_t i = 0; i < sizeof partial / sizeof *partial; i++)
        b->decl[partial[i]].sequence_partial = 1;
}
