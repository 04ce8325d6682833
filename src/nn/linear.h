/* linear.h: y = x W + b with W stored (in, out), as Hugging Face's Conv1D
 * stores GPT-2's weights. The three pieces every block with a projection
 * uses (attention, transformer, the Linear block). The projection is the
 * block's parameter w (weight) and w + 1 (bias); x, y and their gradients
 * are activations in the block's kernels' type. */
#ifndef PT_NN_LINEAR_H
#define PT_NN_LINEAR_H

#include "nn/block.h"

/* inp (N,in) -> out (N,out) */
void pt_linear_forward(const pt_block *b, int w, void *out, const void *inp, int N, int in,
                       int out_w);
/* dinp (N,in) = dout (N,out) W^T */
void pt_linear_backward_input(const pt_block *b, int w, void *dinp, const void *dout, int N, int in,
                              int out_w);
/* dW (in,out) += inp^T dout; dbias (out) += column sums of dout */
void pt_linear_backward_weight(pt_block *b, int w, const void *dout, const void *inp, int N, int in,
                               int out_w);

/* A Linear block made slice shape.tensor_rank of shape.tensor: its columns
 * (row 0: ColumnParallelLinear) or its rows (row 1: RowParallelLinear),
 * with the tensor group's sums between its pieces (linear_split.c). */
void pt_linear_split(pt_block *b, int row);

#endif
