/* linear.c: the projection y = x W + b (linear.h) and the Linear block built
 * on it: in (B,in) -> out (B,out), parameters <prefix>.weight (in,out) and
 * <prefix>.bias (out). */
#include "nn/linear.h"

#include <math.h>
#include <stdio.h>

void pt_linear_forward(const pt_block *b, int w, void *out, const void *inp, int N, int in,
                       int out_w)
{
    b->k->matmul(0, 0, N, out_w, in, 1.0f, pt_block_act(b, inp, in), pt_block_weight(b, w, out_w),
                 0.0f, pt_block_act(b, out, out_w), b->p[w + 1]);
}

void pt_linear_backward_input(const pt_block *b, int w, void *dinp, const void *dout, int N, int in,
                              int out_w)
{
    b->k->matmul(0, 1, N, in, out_w, 1.0f, pt_block_act(b, dout, out_w),
                 pt_block_weight(b, w, out_w), 0.0f, pt_block_act(b, dinp, in), NULL);
}

void pt_linear_backward_weight(pt_block *b, int w, const void *dout, const void *inp, int N, int in,
                               int out_w)
{
    b->k->matmul(1, 0, in, out_w, N, 1.0f, pt_block_act(b, inp, in), pt_block_act(b, dout, out_w),
                 1.0f, pt_mat_of(b->g[w], out_w, PT_F32), NULL);
    if (b->g[w + 1]) /* NULL past the last parameter: a Linear without bias */
        b->k->bias_backward(b->g[w + 1], dout, N, out_w);
}

/* ---- the Linear block ---- */

/* Rows of a micro-batch: each sample is s.T rows of `in` (0: one row) */
static int rows(const pt_block *b, const pt_microbatch *mb)
{
    return mb->batch * (b->shape.T ? b->shape.T : 1);
}

static size_t linear_saved(const pt_block *b, int B)
{
    (void)b;
    (void)B;
    return 0; /* needs only its input, which the caller keeps */
}

// in (B,in) -> out (B,out)
static void linear_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                           void *saved, double *loss_sum, int *loss_rows)
{
    (void)saved, (void)loss_sum, (void)loss_rows;
    pt_linear_forward(b, 0, out, in, rows(b, mb), b->shape.in, b->shape.out);
}

// dout (B,out) -> din (B,in)
static void linear_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                  void *saved, const void *dout, void *din, float loss_scale)
{
    (void)in, (void)out, (void)saved, (void)loss_scale;
    if (din)
        pt_linear_backward_input(b, 0, din, dout, rows(b, mb), b->shape.in, b->shape.out);
}

static void linear_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                   const void *out, const void *saved, const void *dout)
{
    (void)out, (void)saved;
    pt_linear_backward_weight(b, 0, dout, in, rows(b, mb), b->shape.in, b->shape.out);
}

static pt_block_cost linear_cost(const pt_block *b)
{
    double n = b->shape.T ? b->shape.T : 1, mac = n * b->shape.in * b->shape.out;
    return (pt_block_cost){.forward_flops = 2 * mac,
                           .backward_input_flops = 2 * mac,
                           .backward_weight_flops = 2 * mac + (b->n_params > 1) * n * b->shape.out};
}

static const pt_block_ops linear_ops = {
    .kind = "linear",
    .saved_bytes = linear_saved,
    .forward = linear_forward,
    .backward_input = linear_backward_input,
    .backward_weight = linear_backward_weight,
    .cost = linear_cost,
};

/* He initialisation: the Linear block feeds ReLUs in the mlp model */
static float he_std(const pt_block_shape *s) { return sqrtf(2.0f / (float)s->in); }

static void shape_linear(pt_block *b, const pt_block_shape *s)
{
    b->ops = &linear_ops;
    b->shape = *s;
    b->in_floats = (s->T ? s->T : 1) * s->in;
    b->out_floats = (s->T ? s->T : 1) * s->out;
}

void pt_linear_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    shape_linear(b, s);
    pt_block_declare_linear(b, prefix, s->in, s->out, he_std(s));
}

void pt_linear_init_no_bias(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    shape_linear(b, s);
    char name[96];
    int ws[2] = {s->in, s->out};
    snprintf(name, sizeof name, "%s.weight", prefix);
    pt_block_declare(b, name, 2, ws, PT_INIT_NORMAL, he_std(s));
}
