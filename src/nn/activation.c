/* activation.c: the elementwise blocks, GELU (GPT-2's tanh form) and ReLU:
 * in (B,n) -> out (B,n), no parameters. Each needs only its input for the
 * backward, which the caller keeps; the work is in the kernel seam. */
#include "nn/block.h"

static size_t no_saved(const pt_block *b, int B)
{
    (void)b, (void)B;
    return 0;
}

static size_t width(const pt_block *b, const pt_microbatch *mb)
{
    return (size_t)mb->batch * (size_t)b->in_floats;
}

static void nothing_to_weigh(pt_block *b, const pt_microbatch *mb, const float *in,
                             const float *out, const float *saved, const float *dout)
{
    (void)b, (void)mb, (void)in, (void)out, (void)saved, (void)dout;
}

// in (B,n) -> out (B,n)
static void gelu_forward(pt_block *b, const pt_microbatch *mb, const float *in, float *out,
                         float *saved, double *loss_sum, int *loss_rows)
{
    (void)saved, (void)loss_sum, (void)loss_rows;
    b->k->gelu_forward(out, in, width(b, mb));
}

// dout (B,n) -> din (B,n)
static void gelu_backward_input(pt_block *b, const pt_microbatch *mb, const float *in, float *out,
                                float *saved, const float *dout, float *din, float loss_scale)
{
    (void)out, (void)saved, (void)loss_scale;
    if (din)
        b->k->gelu_backward(din, in, dout, width(b, mb));
}

static pt_block_cost gelu_cost(const pt_block *b)
{
    return (pt_block_cost){.forward_flops = 8.0 * b->in_floats,
                           .backward_input_flops = 12.0 * b->in_floats};
}

// in (B,n) -> out (B,n)
static void relu_forward(pt_block *b, const pt_microbatch *mb, const float *in, float *out,
                         float *saved, double *loss_sum, int *loss_rows)
{
    (void)saved, (void)loss_sum, (void)loss_rows;
    b->k->relu_forward(out, in, width(b, mb));
}

// dout (B,n) -> din (B,n)
static void relu_backward_input(pt_block *b, const pt_microbatch *mb, const float *in, float *out,
                                float *saved, const float *dout, float *din, float loss_scale)
{
    (void)out, (void)saved, (void)loss_scale;
    if (din)
        b->k->relu_backward(din, in, dout, width(b, mb));
}

static pt_block_cost relu_cost(const pt_block *b)
{
    return (pt_block_cost){.forward_flops = b->in_floats, .backward_input_flops = b->in_floats};
}

static const pt_block_ops gelu_ops = {
    .kind = "gelu",
    .saved_floats = no_saved,
    .forward = gelu_forward,
    .backward_input = gelu_backward_input,
    .backward_weight = nothing_to_weigh,
    .cost = gelu_cost,
};

static const pt_block_ops relu_ops = {
    .kind = "relu",
    .saved_floats = no_saved,
    .forward = relu_forward,
    .backward_input = relu_backward_input,
    .backward_weight = nothing_to_weigh,
    .cost = relu_cost,
};

static void elementwise_init(pt_block *b, const pt_block_shape *s, const pt_block_ops *ops)
{
    b->ops = ops;
    b->shape = *s;
    b->in_floats = b->out_floats = s->in;
}

void pt_gelu_init(pt_block *b, const pt_block_shape *s) { elementwise_init(b, s, &gelu_ops); }
void pt_relu_init(pt_block *b, const pt_block_shape *s) { elementwise_init(b, s, &relu_ops); }
