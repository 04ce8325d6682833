/* spec_user.c: a user-defined layer (pt_layer_type, include/pipetrain.h)
 * as a block: each piece of work calls the user's callback with the
 * micro-batch's tensors. User-defined layers run under fp32 only (spec.c
 * refuses them under bf16), so every tensor is float. */
#include <stdio.h>

#include "nn/block.h"

static size_t user_saved(const pt_block *b, int B)
{
    return (size_t)B * (size_t)b->user->saved_floats * sizeof(float);
}

static pt_layer_call call_of(pt_block *b, const pt_microbatch *mb, const void *in, const void *out,
                             const void *saved)
{
    return (pt_layer_call){.batch = mb->batch,
                           .in = in,
                           .out = (float *)out,
                           .saved = (float *)saved,
                           .params = b->p,
                           .grads = b->g,
                           .user = b->user->user};
}

// in (B,in_floats) -> out (B,out_floats)
static void user_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                         void *saved, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    pt_layer_call c = call_of(b, mb, in, out, saved);
    b->user->forward(&c);
}

// dout (B,out_floats) -> din (B,in_floats), NULL for the first layer
static void user_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                void *saved, const void *dout, void *din, float loss_scale)
{
    (void)loss_scale;
    pt_layer_call c = call_of(b, mb, in, out, saved);
    c.dout = dout, c.din = din;
    b->user->backward_input(&c);
}

static void user_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                 const void *out, const void *saved, const void *dout)
{
    pt_layer_call c = call_of(b, mb, in, out, saved);
    c.dout = dout;
    b->user->backward_weight(&c);
}

static pt_block_cost user_cost(const pt_block *b)
{
    return (pt_block_cost){.forward_flops = b->user->forward_flops,
                           .backward_input_flops = b->user->backward_input_flops,
                           .backward_weight_flops = b->user->backward_weight_flops};
}

static const pt_block_ops user_ops = {
    .kind = "user",
    .saved_bytes = user_saved,
    .forward = user_forward,
    .backward_input = user_backward_input,
    .backward_weight = user_backward_weight,
    .cost = user_cost,
};

void pt_user_layer_init(pt_block *b, const pt_layer_type *t, int in_floats, const char *prefix)
{
    b->ops = &user_ops;
    b->user = t;
    b->in_floats = in_floats;
    b->out_floats = t->out_floats ? t->out_floats : in_floats;
    for (int i = 0; i < t->n_params; i++) {
        const pt_layer_param *p = &t->params[i];
        char name[96];
        snprintf(name, sizeof name, "%s.%s", prefix, p->name);
        if (p->std > 0)
            pt_block_declare(b, name, p->ndim, p->shape, PT_INIT_NORMAL, p->std);
        else
            pt_block_declare(b, name, p->ndim, p->shape, PT_INIT_CONSTANT, p->value);
        b->decl[i].float_read = 1; /* the layer's code reads the floats */
    }
}
