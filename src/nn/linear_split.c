/* linear_split.c: the Linear block (linear.c) as slice t of T, Megatron-LM's
 * ColumnParallelLinear and RowParallelLinear, for any sequence of layers
 * (the spec's column_linear and row_linear):
 *   column  the slice holds columns t out/T .. (t+1) out/T - 1 of the
 *           weight and of the bias: it reads the whole input and writes
 *           its out/T columns. Its input's gradient is a partial sum that
 *           the tensor group sums (Megatron's f): backward runs in two
 *           pieces, the product into the block's saved area, then (after
 *           the sum) its copy into the input's gradient;
 *   row     the slice holds the matching rows t in/T .. of the weight and
 *           the whole bias: it reads its in/T columns and writes a partial
 *           product that the tensor group sums (g): forward runs in two
 *           pieces, the product, then (after the sum) the bias, added once.
 * Layers between a column and a row split (activations) run on the slice's
 * columns. The parameters keep the Linear's names: a slice's tensors are
 * the whole model's by name and offset. Each slice's gradients are its own:
 * backward_weight needs no sum. fp32 only (the sums add floats). */
#include "nn/linear.h"

#include <string.h>

enum { W, BIAS };

static int rows(const pt_block *b, const pt_microbatch *mb)
{
    return mb->batch * (b->shape.T ? b->shape.T : 1);
}

/* The slice's widths: what it reads and what it writes. */
static int in_width(const pt_block *b) { return b->in_floats / (b->shape.T ? b->shape.T : 1); }
static int out_width(const pt_block *b) { return b->out_floats / (b->shape.T ? b->shape.T : 1); }

static size_t no_saved(const pt_block *b, int B)
{
    (void)b, (void)B;
    return 0;
}

/* ---- column ---- */

/* the partial input gradient, summed in the saved area */
static size_t column_saved(const pt_block *b, int B)
{
    return (size_t)B * (size_t)b->in_floats * sizeof(float);
}

static void column_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                           void *saved, double *loss_sum, int *loss_rows)
{
    (void)saved, (void)loss_sum, (void)loss_rows;
    pt_linear_forward(b, W, out, in, rows(b, mb), in_width(b), out_width(b));
}

static void column_backward_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                                  void *out, void *saved, const void *dout, void *din,
                                  float loss_scale)
{
    (void)in, (void)out, (void)loss_scale;
    int N = rows(b, mb);
    if (piece == 0)
        pt_linear_backward_input(b, W, saved, dout, N, in_width(b), out_width(b));
    else if (din)
        memcpy(din, saved, (size_t)N * in_width(b) * sizeof(float));
}

static void column_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                  void *saved, const void *dout, void *din, float loss_scale)
{
    for (int piece = 0; piece < 2; piece++)
        column_backward_piece(b, piece, mb, in, out, saved, dout, din, loss_scale);
}

static int column_sums(const pt_block *b, int backward)
{
    (void)b;
    return backward ? 1 : 0;
}

static float *column_sum_buffer(const pt_block *b, int backward, int piece, int B, void *out,
                                void *saved, size_t *count)
{
    (void)backward, (void)piece, (void)out;
    *count = (size_t)B * (size_t)b->in_floats;
    return saved;
}

/* ---- row ---- */

static void row_forward_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                              void *out, void *saved, double *loss_sum, int *loss_rows)
{
    (void)saved, (void)loss_sum, (void)loss_rows;
    int N = rows(b, mb), in_w = in_width(b), out_w = out_width(b);
    if (piece == 0) { /* the partial product, without the bias */
        b->k->matmul(0, 0, N, out_w, in_w, 1.0f, pt_block_act(b, in, in_w),
                     pt_block_weight(b, W, out_w), 0.0f, pt_block_act(b, out, out_w), NULL);
        return;
    }
    for (int i = 0; b->p[BIAS] && i < N; i++) {
        float *row = (float *)out + (size_t)i * out_w;
        b->k->add_floats(row, row, b->p[BIAS], (size_t)out_w);
    }
}

static void row_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                        void *saved, double *loss_sum, int *loss_rows)
{
    for (int piece = 0; piece < 2; piece++)
        row_forward_piece(b, piece, mb, in, out, saved, loss_sum, loss_rows);
}

static void row_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                               void *saved, const void *dout, void *din, float loss_scale)
{
    (void)in, (void)out, (void)saved, (void)loss_scale;
    if (din)
        pt_linear_backward_input(b, W, din, dout, rows(b, mb), in_width(b), out_width(b));
}

static int row_sums(const pt_block *b, int backward)
{
    (void)b;
    return backward ? 0 : 1;
}

static float *row_sum_buffer(const pt_block *b, int backward, int piece, int B, void *out,
                             void *saved, size_t *count)
{
    (void)backward, (void)piece, (void)saved;
    *count = (size_t)B * (size_t)b->out_floats;
    return out;
}

/* ---- both ---- */

static void split_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                  const void *out, const void *saved, const void *dout)
{
    (void)out, (void)saved;
    pt_linear_backward_weight(b, W, dout, in, rows(b, mb), in_width(b), out_width(b));
}

static pt_block_cost split_cost(const pt_block *b)
{
    double n = b->shape.T ? b->shape.T : 1, mac = n * in_width(b) * out_width(b);
    return (pt_block_cost){.forward_flops = 2 * mac,
                           .backward_input_flops = 2 * mac,
                           .backward_weight_flops = 2 * mac + (b->n_params > 1) * n * out_width(b)};
}

static const pt_block_ops column_ops = {
    .kind = "column_linear",
    .saved_bytes = column_saved,
    .forward = column_forward,
    .backward_input = column_backward_input,
    .backward_weight = split_backward_weight,
    .tensor_sums = column_sums,
    .backward_input_piece = column_backward_piece,
    .tensor_sum_buffer = column_sum_buffer,
    .cost = split_cost,
};

static const pt_block_ops row_ops = {
    .kind = "row_linear",
    .saved_bytes = no_saved,
    .forward = row_forward,
    .backward_input = row_backward_input,
    .backward_weight = split_backward_weight,
    .tensor_sums = row_sums,
    .forward_piece = row_forward_piece,
    .tensor_sum_buffer = row_sum_buffer,
    .cost = split_cost,
};

void pt_linear_split(pt_block *b, int row)
{
    int T = b->shape.tensor, t = b->shape.tensor_rank, n = b->shape.T ? b->shape.T : 1;
    b->ops = row ? &row_ops : &column_ops;
    if (row) {
        pt_block_split_param(b, W, 0, 1, T, t); /* the bias stays whole */
        b->in_floats = n * (b->shape.in / T);
    } else {
        pt_block_split_param(b, W, 1, 1, T, t);
        if (b->n_params > 1)
            pt_block_split_param(b, BIAS, 0, 1, T, t);
        b->out_floats = n * (b->shape.out / T);
    }
}
