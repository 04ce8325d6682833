/* activation.c: the MLP activations GPT2Config names (gelu_new, gelu, relu,
 * silu): which kernels of the seam compute each (pt_activation_pick, read by
 * the transformer block and by the elementwise block below), and the
 * elementwise block itself, in (B,n) -> out (B,n) with no parameters (the
 * mlp's ReLU). Each needs only its input for the backward, which the caller
 * keeps. */
#include "nn/block.h"

pt_activation_kernels pt_activation_pick(const pt_kernels *k, pt_activation act)
{
    switch (act) {
    case PT_ACT_GELU_NEW: return (pt_activation_kernels){k->gelu_forward, k->gelu_backward, 8, 12};
    case PT_ACT_GELU:
        return (pt_activation_kernels){k->gelu_erf_forward, k->gelu_erf_backward, 10, 14};
    case PT_ACT_RELU: return (pt_activation_kernels){k->relu_forward, k->relu_backward, 1, 1};
    case PT_ACT_SILU: return (pt_activation_kernels){k->silu_forward, k->silu_backward, 5, 8};
    }
    return (pt_activation_kernels){0};
}

static pt_activation_kernels kernels_of(const pt_block *b)
{
    return pt_activation_pick(b->k, b->shape.act);
}

static size_t width(const pt_block *b, const pt_microbatch *mb)
{
    return (size_t)mb->batch * (size_t)b->in_floats;
}

// in (B,n) -> out (B,n)
static void activation_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                               void *saved, double *loss_sum, int *loss_rows)
{
    (void)saved, (void)loss_sum, (void)loss_rows;
    kernels_of(b).forward(out, in, width(b, mb));
}

// dout (B,n) -> din (B,n)
static void activation_backward_input(pt_block *b, const pt_microbatch *mb, const void *in,
                                      void *out, void *saved, const void *dout, void *din,
                                      float loss_scale)
{
    (void)out, (void)saved, (void)loss_scale;
    if (din)
        kernels_of(b).backward(din, in, dout, width(b, mb));
}

static pt_block_cost activation_cost(const pt_block *b)
{
    pt_activation_kernels a = kernels_of(b);
    return (pt_block_cost){.forward_flops = a.forward_flops * b->in_floats,
                           .backward_input_flops = a.backward_flops * b->in_floats};
}

/* One table per activation: a block's kind is its activation's name. */
#define ACTIVATION_OPS(kind_name)                                                                \
    {                                                                                            \
        .kind = kind_name, .saved_bytes = pt_block_saves_nothing, .forward = activation_forward, \
        .backward_input = activation_backward_input, .backward_weight = pt_block_no_weights,     \
        .cost = activation_cost                                                                  \
    }

static const pt_block_ops activation_ops[] = {
    [PT_ACT_GELU_NEW] = ACTIVATION_OPS("gelu_new"),
    [PT_ACT_GELU] = ACTIVATION_OPS("gelu"),
    [PT_ACT_RELU] = ACTIVATION_OPS("relu"),
    [PT_ACT_SILU] = ACTIVATION_OPS("silu"),
};

void pt_activation_init(pt_block *b, const pt_block_shape *s, pt_activation act)
{
    b->ops = &activation_ops[act];
    b->shape = *s;
    b->shape.act = act;
    b->in_floats = b->out_floats = s->in;
}
