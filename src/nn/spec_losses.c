/* spec_losses.c: the loss head a spec ends with that holds no parameters,
 * so a spec writes its last projection as a linear layer of its own:
 *   cross_entropy  in (B,R,classes) logits -> out probabilities (float);
 *                  loss against a label per row (R = s->T, or 1)
 * The loss of a micro-batch is the sum over its samples divided by the
 * samples counted (model.c), so per sample each head gives its mean. */
#include <string.h>

#include "nn/block.h"

/* The input as float, into out */
static void widen_input(const pt_block *b, float *out, const void *in, size_t n)
{
    if (b->k->act == PT_F32)
        memcpy(out, in, n * sizeof(float));
    else
        pt_bf16_to_floats(out, in, n);
}

/* ---- cross-entropy ---- */

static int rows_of(const pt_block *b, const pt_microbatch *mb)
{
    return mb->batch * (b->shape.T ? b->shape.T : 1);
}

static int counted(const int *targets, int N)
{
    int n = 0;
    for (int i = 0; i < N; i++)
        n += targets[i] >= 0;
    return n;
}

// in (B,R,V) -> out (B,R,V) probabilities (float); loss over targets (B,R)
static void ce_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out, void *saved,
                       double *loss_sum, int *loss_rows)
{
    (void)saved;
    int N = rows_of(b, mb), V = b->shape.in;
    widen_input(b, out, in, (size_t)N * V);
    double sum = b->k->crossentropy_forward(out, mb->targets, N, V);
    *loss_sum = sum;
    *loss_rows = mb->targets ? counted(mb->targets, N) : 0;
}

// loss -> din (B,R,V); out becomes dlogits
static void ce_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                              void *saved, const void *dout, void *din, float loss_scale)
{
    (void)in, (void)saved, (void)dout;
    int N = rows_of(b, mb), V = b->shape.in, rows = counted(mb->targets, N);
    b->k->crossentropy_backward(out, mb->targets, N, V, rows ? loss_scale / rows : 0.0f);
    for (size_t i = 0; din && i < (size_t)N * V; i++)
        pt_act_store(b, din, i, ((float *)out)[i]);
}

static pt_block_cost ce_cost(const pt_block *b)
{
    double n = (double)(b->shape.T ? b->shape.T : 1) * b->shape.in;
    return (pt_block_cost){.forward_flops = 5 * n, .backward_input_flops = 2 * n};
}

static const pt_block_ops cross_entropy_ops = {
    .kind = "cross_entropy",
    .out_is_float = 1,
    .saved_bytes = pt_block_saves_nothing,
    .forward = ce_forward,
    .backward_input = ce_backward_input,
    .backward_weight = pt_block_no_weights,
    .cost = ce_cost,
};

void pt_cross_entropy_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    (void)prefix;
    b->ops = &cross_entropy_ops;
    b->shape = *s;
    b->in_floats = b->out_floats = (s->T ? s->T : 1) * s->in;
    b->labels = s->T ? s->T : 1;
    b->classes = s->in;
}
