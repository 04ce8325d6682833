/* spec_tanh.c: the tanh block, in (B,n) -> out (B,n), no parameters.
 * Element by element in plain C: it is cheap next to the products around
 * it. Its backward needs only its input, which the caller keeps. */
#include <math.h>

#include "nn/block.h"

// in (B,n) -> out (B,n)
static void tanh_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                         void *saved, double *loss_sum, int *loss_rows)
{
    (void)saved, (void)loss_sum, (void)loss_rows;
    size_t n = (size_t)mb->batch * b->in_floats;
    for (size_t i = 0; i < n; i++)
        pt_act_store(b, out, i, tanhf(pt_act_load(b, in, i)));
}

// dout (B,n) -> din (B,n) = dout (1 - tanh(in)^2)
static void tanh_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                void *saved, const void *dout, void *din, float loss_scale)
{
    (void)out, (void)saved, (void)loss_scale;
    size_t n = (size_t)mb->batch * b->in_floats;
    for (size_t i = 0; din && i < n; i++) {
        float t = tanhf(pt_act_load(b, in, i));
        pt_act_store(b, din, i, pt_act_load(b, dout, i) * (1.0f - t * t));
    }
}

static pt_block_cost tanh_cost(const pt_block *b)
{
    return (pt_block_cost){.forward_flops = 10.0 * b->in_floats,
                           .backward_input_flops = 13.0 * b->in_floats};
}

static const pt_block_ops tanh_ops = {
    .kind = "tanh",
    .saved_bytes = pt_block_saves_nothing,
    .forward = tanh_forward,
    .backward_input = tanh_backward_input,
    .backward_weight = pt_block_no_weights,
    .cost = tanh_cost,
};

void pt_tanh_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    (void)prefix;
    b->ops = &tanh_ops;
    b->shape = *s;
    b->in_floats = b->out_floats = s->in;
}
