/* rmsnorm.c: the RMSNorm block (LlamaRMSNorm, the Llama family's final
 * norm): in (T, C) -> out (T, C) = weight * x / sqrt(mean(x^2) + eps) on
 * each row, with eps rms_eps (0: 1e-6); parameter <prefix>.weight (C)
 * ("model.norm"). Saved: each row's reciprocal root mean square. */
#include <stdio.h>
#include <string.h>

#include "nn/block.h"

static int rows(const pt_block *b, const pt_microbatch *mb) { return mb->batch * b->shape.T; }

static size_t rmsnorm_saved(const pt_block *b, int B)
{
    return (size_t)B * b->shape.T * sizeof(float);
}

// in (B,T,C) -> out (B,T,C); saved: rstd (B,T)
static void rmsnorm_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                            void *saved, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    b->k->rmsnorm_forward(out, saved, in, b->p[0], rows(b, mb), b->shape.C, b->shape.rms_eps);
}

// dout (B,T,C) -> din (B,T,C)
static void rmsnorm_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                   void *saved, const void *dout, void *din, float loss_scale)
{
    (void)out, (void)loss_scale;
    if (!din)
        return;
    int N = rows(b, mb), C = b->shape.C;
    memset(din, 0, (size_t)N * C * pt_elem_size(b->k->act)); /* the kernel adds */
    b->k->rmsnorm_backward_input(din, dout, in, b->p[0], saved, N, C);
}

static void rmsnorm_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                    const void *out, const void *saved, const void *dout)
{
    (void)out;
    b->k->rmsnorm_backward_weight(b->g[0], dout, in, saved, rows(b, mb), b->shape.C);
}

static pt_block_cost rmsnorm_cost(const pt_block *b)
{
    double n = (double)b->shape.T * b->shape.C;
    return (pt_block_cost){
        .forward_flops = 5 * n, .backward_input_flops = 8 * n, .backward_weight_flops = 3 * n};
}

static const pt_block_ops rmsnorm_ops = {
    .kind = "rmsnorm",
    .saved_bytes = rmsnorm_saved,
    .forward = rmsnorm_forward,
    .backward_input = rmsnorm_backward_input,
    .backward_weight = rmsnorm_backward_weight,
    .cost = rmsnorm_cost,
};

void pt_rmsnorm_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    char name[160];
    int cs[1] = {s->C};
    b->ops = &rmsnorm_ops;
    b->shape = *s;
    b->shape.rms_eps = s->rms_eps != 0.0f ? s->rms_eps : 1e-6f;
    b->in_floats = b->out_floats = s->T * s->C;
    snprintf(name, sizeof name, "%s.weight", prefix);
    pt_block_declare(b, name, 1, cs, PT_INIT_ONES, 0.0f);
}
