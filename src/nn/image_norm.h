/* image_norm.h: the normalisations a conv net can use with micro-batches:
 * statistics per sample, never across the batch (batch norm's statistics
 * would differ with the micro-batch size and the split, so pipelined runs
 * would not equal the whole batch's). Either
 *   GroupNorm(groups, C)     each group of C/groups channels of a sample
 *                            normalised together, weight and bias (C);
 *   LayerNorm((C, H, W))     the whole sample normalised, weight and bias
 *                            (C, H, W) (groups = 0).
 * The pieces the norm blocks and the residual block share. */
#ifndef PT_NN_IMAGE_NORM_H
#define PT_NN_IMAGE_NORM_H

#include "nn/block.h"

typedef struct {
    int C, H, W;
    int groups; /* 0: LayerNorm over (C, H, W) */
    float eps;
} pt_image_norm;

/* <prefix>.weight = 1 and <prefix>.bias = 0; returns the weight's index */
int pt_image_norm_declare(pt_block *b, const char *prefix, const pt_image_norm *n);
/* floats of statistics kept for B samples */
size_t pt_image_norm_stats(const pt_image_norm *n, int B);

// in (B,C,H,W) -> out (B,C,H,W); stats (pt_image_norm_stats floats)
void pt_image_norm_forward(const pt_block *b, int w, const pt_image_norm *n, void *out,
                           float *stats, const void *in, int B);
// dout -> din (B,C,H,W), overwritten
void pt_image_norm_backward_input(const pt_block *b, int w, const pt_image_norm *n, void *din,
                                  const void *dout, const void *in, const float *stats, int B);
// dweight, dbias add
void pt_image_norm_backward_weight(pt_block *b, int w, const pt_image_norm *n, const void *dout,
                                   const void *in, const float *stats, int B);
/* FLOPs per sample: forward, backward_input, backward_weight */
pt_block_cost pt_image_norm_cost(const pt_image_norm *n);

#endif
