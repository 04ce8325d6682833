/* last_token.c: sequence classification on the last token, as
 * GPT2ForSequenceClassification (and LlamaForSequenceClassification) score
 * a sequence: a bias-free projection of the last position's hidden state
 * to class scores, then softmax cross-entropy against one class per
 * sample.
 *   in (T, C) -> logits (classes) -> out = probabilities; loss over
 *   targets (B)
 * Parameter <prefix>.weight (classes, C) ("score.weight"), stored as
 * torch.nn.Linear stores it. Every sequence counts as full: the last
 * position is T - 1 (Hugging Face looks for the last non-padding token).
 * The model's final norm is the block before this one. backward_input
 * turns `out` into the logits' gradient in place. */
#include <stdio.h>
#include <string.h>

#include "nn/block.h"

/* the last token's row of every sample: a (B, C) operand of stride T C */
static pt_mat last_rows(const pt_block *b, const void *x)
{
    int T = b->shape.T, C = b->shape.C;
    return pt_mat_of(pt_elems_at(x, (size_t)(T - 1) * C, b->k->act), T * C, b->k->act);
}

// in (B,T,C) -> out (B,classes) probabilities (float); loss over targets (B)
static void head_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                         void *saved, double *loss_sum, int *loss_rows)
{
    (void)saved;
    int B = mb->batch, C = b->shape.C, classes = b->shape.out;
    b->k->matmul(0, 1, B, classes, C, 1.0f, last_rows(b, in), pt_block_weight(b, 0, C), 0.0f,
                 pt_mat_of(out, classes, PT_F32), NULL);
    double sum = b->k->crossentropy_forward(out, mb->targets, B, classes);
    if (loss_sum)
        *loss_sum = sum;
    if (loss_rows)
        *loss_rows = mb->targets ? B : 0;
}

// loss -> din (B,T,C), zero but at the last tokens; out becomes dlogits
static void head_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                void *saved, const void *dout, void *din, float loss_scale)
{
    (void)in, (void)saved, (void)dout;
    int B = mb->batch, T = b->shape.T, C = b->shape.C, classes = b->shape.out;
    b->k->crossentropy_backward(out, mb->targets, B, classes, loss_scale / B);
    if (!din)
        return;
    memset(din, 0, (size_t)B * T * C * pt_elem_size(b->k->act));
    b->k->matmul(0, 0, B, C, classes, 1.0f, pt_mat_of(out, classes, PT_F32),
                 pt_block_weight(b, 0, C), 0.0f, last_rows(b, din), NULL);
}

/* dW (classes, C) += dlogits^T x_last */
static void head_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                 const void *out, const void *saved, const void *dout)
{
    (void)saved, (void)dout;
    int B = mb->batch, C = b->shape.C, classes = b->shape.out;
    b->k->matmul(1, 0, classes, C, B, 1.0f, pt_mat_of(out, classes, PT_F32), last_rows(b, in), 1.0f,
                 pt_mat_of(b->g[0], C, PT_F32), NULL);
}

static pt_block_cost head_cost(const pt_block *b)
{
    double mac = (double)b->shape.C * b->shape.out;
    return (pt_block_cost){.forward_flops = 2 * mac + 5.0 * b->shape.out,
                           .backward_input_flops = 2 * mac + 2.0 * b->shape.out,
                           .backward_weight_flops = 2 * mac};
}

static const pt_block_ops head_ops = {
    .kind = "last_token_classifier",
    .out_is_float = 1,
    .saved_bytes = pt_block_saves_nothing,
    .forward = head_forward,
    .backward_input = head_backward_input,
    .backward_weight = head_backward_weight,
    .cost = head_cost,
};

void pt_last_token_classifier_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    char name[96];
    int ws[2] = {s->out, s->C};
    b->ops = &head_ops;
    b->shape = *s;
    b->in_floats = s->T * s->C;
    b->out_floats = s->out;
    b->labels = 1;
    b->classes = s->out;
    snprintf(name, sizeof name, "%s.weight", prefix);
    pt_block_declare(b, name, 2, ws, PT_INIT_NORMAL, 0.02f);
}
