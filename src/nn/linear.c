/* linear.c: the projection y = x W + b (linear.h) and the Linear block built
 * on it: in (B,in) -> out (B,out), parameters <prefix>.weight (in,out) and
 * <prefix>.bias (out). */
#include "nn/linear.h"

#include <math.h>

#include "nn/block.h"

void pt_linear_forward(const pt_kernels *k, float *out, const float *inp, const float *w,
                       const float *bias, int N, int in, int out_w)
{
    k->matmul(0, 0, N, out_w, in, 1.0f, inp, in, w, out_w, 0.0f, out, out_w);
    if (bias)
        k->bias_add(out, bias, N, out_w);
}

void pt_linear_backward_input(const pt_kernels *k, float *dinp, const float *dout, const float *w,
                              int N, int in, int out_w, int accumulate)
{
    k->matmul(0, 1, N, in, out_w, 1.0f, dout, out_w, w, out_w, accumulate ? 1.0f : 0.0f, dinp, in);
}

void pt_linear_backward_weight(const pt_kernels *k, float *dw, float *dbias, const float *dout,
                               const float *inp, int N, int in, int out_w)
{
    k->matmul(1, 0, in, out_w, N, 1.0f, inp, in, dout, out_w, 1.0f, dw, out_w);
    if (dbias)
        k->bias_backward(dbias, dout, N, out_w);
}

/* ---- the Linear block ---- */

static size_t linear_saved(const pt_block *b, int B)
{
    (void)b;
    (void)B;
    return 0; /* needs only its input, which the caller keeps */
}

// in (B,in) -> out (B,out)
static void linear_forward(pt_block *b, const pt_microbatch *mb, const float *in, float *out,
                           float *saved, double *loss_sum, int *loss_rows)
{
    (void)saved, (void)loss_sum, (void)loss_rows;
    pt_linear_forward(b->k, out, in, b->p[0], b->p[1], mb->batch, b->shape.in, b->shape.out);
}

// dout (B,out) -> din (B,in)
static void linear_backward_input(pt_block *b, const pt_microbatch *mb, const float *in, float *out,
                                  float *saved, const float *dout, float *din, float loss_scale)
{
    (void)in, (void)out, (void)saved, (void)loss_scale;
    if (din)
        pt_linear_backward_input(b->k, din, dout, b->p[0], mb->batch, b->shape.in, b->shape.out, 0);
}

static void linear_backward_weight(pt_block *b, const pt_microbatch *mb, const float *in,
                                   const float *out, const float *saved, const float *dout)
{
    (void)out, (void)saved;
    pt_linear_backward_weight(b->k, b->g[0], b->g[1], dout, in, mb->batch, b->shape.in,
                              b->shape.out);
}

static pt_block_cost linear_cost(const pt_block *b)
{
    double mac = (double)b->shape.in * b->shape.out;
    return (pt_block_cost){.forward_flops = 2 * mac,
                           .backward_input_flops = 2 * mac,
                           .backward_weight_flops = 2 * mac + b->shape.out};
}

static const pt_block_ops linear_ops = {
    .kind = "linear",
    .saved_floats = linear_saved,
    .forward = linear_forward,
    .backward_input = linear_backward_input,
    .backward_weight = linear_backward_weight,
    .cost = linear_cost,
};

void pt_linear_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    b->ops = &linear_ops;
    b->shape = *s;
    b->in_floats = s->in;
    b->out_floats = s->out;
    /* He initialisation: the Linear block feeds ReLUs in the mlp model */
    pt_block_declare_linear(b, prefix, s->in, s->out, sqrtf(2.0f / (float)s->in));
}
