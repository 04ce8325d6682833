/* layernorm.c: the LayerNorm block: in (B,T,C) -> out (B,T,C), normalising
 * each row of C with the shape's epsilon, parameters <prefix>.weight (C) and
 * <prefix>.bias (C).
 * Saved: each row's mean and reciprocal deviation, and for backward_weight
 * the gradient of the normalised output, which is dout itself. */

#include "nn/block.h"

static int rows(const pt_block *b, const pt_microbatch *mb) { return mb->batch * b->shape.T; }

static size_t layernorm_saved(const pt_block *b, int B)
{
    return 2 * (size_t)B * b->shape.T * sizeof(float);
}

// in (B,T,C) -> out (B,T,C); saved: mean (B,T), rstd (B,T)
static void layernorm_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                              void *saved, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    int N = rows(b, mb);
    float *stats = saved;
    b->k->layernorm_forward(out, stats, stats + N, in, b->p[0], b->p[1], N, b->shape.C,
                            b->shape.ln_eps);
}

// dout (B,T,C) -> din (B,T,C)
static void layernorm_backward_input(pt_block *b, const pt_microbatch *mb, const void *in,
                                     void *out, void *saved, const void *dout, void *din,
                                     float loss_scale)
{
    (void)out, (void)loss_scale;
    if (!din)
        return;
    int N = rows(b, mb), C = b->shape.C;
    const float *stats = saved;
    b->k->layernorm_backward_input(din, NULL, dout, in, b->p[0], stats, stats + N, N, C);
}

static void layernorm_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                      const void *out, const void *saved, const void *dout)
{
    (void)out;
    int N = rows(b, mb);
    const float *stats = saved;
    b->k->layernorm_backward_weight(b->g[0], b->g[1], dout, in, stats, stats + N, N, b->shape.C);
}

static pt_block_cost layernorm_cost(const pt_block *b)
{
    double n = (double)b->shape.T * b->shape.C;
    return (pt_block_cost){
        .forward_flops = 8 * n, .backward_input_flops = 10 * n, .backward_weight_flops = 4 * n};
}

static const pt_block_ops layernorm_ops = {
    .kind = "layernorm",
    .saved_bytes = layernorm_saved,
    .forward = layernorm_forward,
    .backward_input = layernorm_backward_input,
    .backward_weight = layernorm_backward_weight,
    .cost = layernorm_cost,
};

void pt_layernorm_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    b->ops = &layernorm_ops;
    b->shape = pt_block_shape_gpt(s);
    b->in_floats = b->out_floats = s->T * s->C;
    pt_block_declare_layernorm(b, prefix, s->C);
}
