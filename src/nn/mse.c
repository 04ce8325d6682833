/* mse.c: the mean-squared error head (torch.nn.MSELoss, mean reduction):
 *   in (n) -> out (n) predictions (float); loss = the mean over the
 *   micro-batch's samples and outputs of (prediction - target)^2
 * with the targets in the micro-batch's target_values (batch, n). No
 * parameters: a regression net ends in a linear block and this. */
#include "nn/block.h"

// in (B,n) -> out (B,n) predictions (float); loss over target_values (B,n)
static void mse_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                        void *saved, double *loss_sum, int *loss_rows)
{
    (void)saved;
    double sum = b->k->mse_forward(out, in, mb->target_values, mb->batch, b->in_floats);
    if (loss_sum)
        *loss_sum = sum;
    if (loss_rows)
        *loss_rows = mb->target_values ? mb->batch : 0;
}

// loss -> din (B,n)
static void mse_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                               void *saved, const void *dout, void *din, float loss_scale)
{
    (void)in, (void)saved, (void)dout;
    int B = mb->batch, n = b->in_floats;
    if (din)
        b->k->mse_backward(din, out, mb->target_values, B, n, 2.0f * loss_scale / ((float)B * n));
}

static pt_block_cost mse_cost(const pt_block *b)
{
    return (pt_block_cost){.forward_flops = 3.0 * b->in_floats,
                           .backward_input_flops = 2.0 * b->in_floats};
}

static const pt_block_ops mse_ops = {
    .kind = "mse",
    .out_is_float = 1,
    .saved_bytes = pt_block_saves_nothing,
    .forward = mse_forward,
    .backward_input = mse_backward_input,
    .backward_weight = pt_block_no_weights,
    .cost = mse_cost,
};

void pt_mse_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    (void)prefix;
    b->ops = &mse_ops;
    b->shape = *s;
    b->in_floats = b->out_floats = s->in;
    b->values = s->in;
}
