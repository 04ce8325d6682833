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
 * backward_weight needs no sum. The sums add floats: under bf16 the partial
 * products are written as floats (the saved area) and stored as
 * activations, rounded once, after the sum. */
#include "nn/linear.h"

enum { W, BIAS };

static int rows(const pt_block *b, const pt_microbatch *mb)
{
    return mb->batch * (b->shape.T ? b->shape.T : 1);
}

/* The slice's widths: what it reads and what it writes. */
static int in_width(const pt_block *b) { return b->in_floats / (b->shape.T ? b->shape.T : 1); }
static int out_width(const pt_block *b) { return b->out_floats / (b->shape.T ? b->shape.T : 1); }

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
    int in_w = in_width(b), out_w = out_width(b);
    if (piece == 0)
        b->k->matmul(0, 1, N, in_w, out_w, 1.0f, pt_block_act(b, dout, out_w),
                     pt_block_weight(b, W, out_w), 0.0f, pt_mat_of(saved, in_w, PT_F32), NULL);
    else if (din)
        b->k->store_floats(din, saved, (size_t)N * in_w);
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

/* the partial product the group sums, in floats: the output itself under
 * fp32, the saved area under bf16 */
static size_t row_saved(const pt_block *b, int B)
{
    return b->k->act == PT_F32 ? 0 : (size_t)B * (size_t)b->out_floats * sizeof(float);
}

static float *row_sums_at(const pt_block *b, void *out, void *saved)
{
    return b->k->act == PT_F32 ? out : saved;
}

static void row_forward_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                              void *out, void *saved, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    int N = rows(b, mb), in_w = in_width(b), out_w = out_width(b);
    float *sum = row_sums_at(b, out, saved);
    if (piece == 0) { /* the partial product, without the bias */
        b->k->matmul(0, 0, N, out_w, in_w, 1.0f, pt_block_act(b, in, in_w),
                     pt_block_weight(b, W, out_w), 0.0f, pt_mat_of(sum, out_w, PT_F32), NULL);
        return;
    }
    if (!b->p[BIAS]) {
        if ((void *)sum != out)
            b->k->store_floats(out, sum, (size_t)N * out_w);
        return;
    }
    for (int i = 0; i < N; i++) /* stored as activations, rounded once */
        b->k->add_floats(pt_elems_at(out, (size_t)i * out_w, b->k->act), sum + (size_t)i * out_w,
                         b->p[BIAS], (size_t)out_w);
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
    (void)backward, (void)piece;
    *count = (size_t)B * (size_t)b->out_floats;
    return row_sums_at(b, out, saved);
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
    .saved_bytes = row_saved,
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
