/* classifier.c: the mlp model's output block: a linear layer to class scores
 * and softmax cross-entropy.
 *   in (B,in) -> logits (B,classes) -> out = probabilities; loss over
 *   targets (B)
 * Parameters <prefix>.weight (in,classes) and <prefix>.bias (classes).
 * backward_input turns `out` into the logits' gradient in place. */
#include <math.h>

#include "nn/block.h"
#include "nn/linear.h"

static size_t classifier_saved(const pt_block *b, int B)
{
    (void)b, (void)B;
    return 0;
}

// in (B,in) -> out (B,classes)
static void classifier_forward(pt_block *b, const pt_microbatch *mb, const float *in, float *out,
                               float *saved, double *loss_sum, int *loss_rows)
{
    (void)saved;
    int B = mb->batch;
    pt_linear_forward(b->k, out, in, b->p[0], b->p[1], B, b->shape.in, b->shape.out);
    double sum = b->k->crossentropy_forward(out, mb->targets, B, b->shape.out);
    if (loss_sum)
        *loss_sum = sum;
    if (loss_rows)
        *loss_rows = mb->targets ? B : 0;
}

// loss -> din (B,in); out becomes dlogits (B,classes)
static void classifier_backward_input(pt_block *b, const pt_microbatch *mb, const float *in,
                                      float *out, float *saved, const float *dout, float *din,
                                      float loss_scale)
{
    (void)in, (void)saved, (void)dout;
    int B = mb->batch;
    b->k->crossentropy_backward(out, mb->targets, B, b->shape.out, loss_scale / B);
    if (din)
        pt_linear_backward_input(b->k, din, out, b->p[0], B, b->shape.in, b->shape.out, 0);
}

static void classifier_backward_weight(pt_block *b, const pt_microbatch *mb, const float *in,
                                       const float *out, const float *saved, const float *dout)
{
    (void)saved, (void)dout;
    pt_linear_backward_weight(b->k, b->g[0], b->g[1], out, in, mb->batch, b->shape.in,
                              b->shape.out);
}

static pt_block_cost classifier_cost(const pt_block *b)
{
    double mac = (double)b->shape.in * b->shape.out;
    return (pt_block_cost){.forward_flops = 2 * mac + 5.0 * b->shape.out,
                           .backward_input_flops = 2 * mac + 2.0 * b->shape.out,
                           .backward_weight_flops = 2 * mac + b->shape.out};
}

static const pt_block_ops classifier_ops = {
    .kind = "classifier",
    .saved_floats = classifier_saved,
    .forward = classifier_forward,
    .backward_input = classifier_backward_input,
    .backward_weight = classifier_backward_weight,
    .cost = classifier_cost,
};

void pt_classifier_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    b->ops = &classifier_ops;
    b->shape = *s;
    b->in_floats = s->in;
    b->out_floats = s->out;
    pt_block_declare_linear(b, prefix, s->in, s->out, sqrtf(1.0f / (float)s->in));
}
