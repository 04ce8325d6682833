/* classifier.c: the mlp model's output block: a linear layer to class scores
 * and softmax cross-entropy.
 *   in (B,in) -> logits (B,classes) -> out = probabilities; loss over
 *   targets (B)
 * Parameters <prefix>.weight (in,classes) and <prefix>.bias (classes).
 * backward_input turns `out` into the logits' gradient in place. */
#include <math.h>

#include "nn/block.h"

// in (B,in) -> out (B,classes) probabilities (float)
static void classifier_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                               void *saved, double *loss_sum, int *loss_rows)
{
    (void)saved;
    int B = mb->batch, n_in = b->shape.in, classes = b->shape.out;
    b->k->matmul(0, 0, B, classes, n_in, 1.0f, pt_block_act(b, in, n_in),
                 pt_block_weight(b, 0, classes), 0.0f, pt_mat_of(out, classes, PT_F32), b->p[1]);
    double sum = b->k->crossentropy_forward(out, mb->targets, B, classes);
    if (loss_sum)
        *loss_sum = sum;
    if (loss_rows)
        *loss_rows = mb->targets ? B : 0;
}

// loss -> din (B,in); out becomes dlogits (B,classes)
static void classifier_backward_input(pt_block *b, const pt_microbatch *mb, const void *in,
                                      void *out, void *saved, const void *dout, void *din,
                                      float loss_scale)
{
    (void)in, (void)saved, (void)dout;
    int B = mb->batch, n_in = b->shape.in, classes = b->shape.out;
    b->k->crossentropy_backward(out, mb->targets, B, classes, loss_scale / B);
    if (din)
        b->k->matmul(0, 1, B, n_in, classes, 1.0f, pt_mat_of(out, classes, PT_F32),
                     pt_block_weight(b, 0, classes), 0.0f, pt_block_act(b, din, n_in), NULL);
}

/* The logits' gradient is float under every precision: its column sums are
 * the float kernels'. */
static void classifier_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                       const void *out, const void *saved, const void *dout)
{
    (void)saved, (void)dout;
    int B = mb->batch, n_in = b->shape.in, classes = b->shape.out;
    b->k->matmul(1, 0, n_in, classes, B, 1.0f, pt_block_act(b, in, n_in),
                 pt_mat_of(out, classes, PT_F32), 1.0f, pt_mat_of(b->g[0], classes, PT_F32), NULL);
    pt_kernels_cpu()->bias_backward(b->g[1], out, B, classes);
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
    .out_is_float = 1,
    .saved_bytes = pt_block_saves_nothing,
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
    b->labels = 1;
    b->classes = s->out;
    pt_block_declare_linear(b, prefix, s->in, s->out, sqrtf(1.0f / (float)s->in));
}
