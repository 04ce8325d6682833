/* projection.h: y = x W^T with W stored (out, in), as torch.nn.Linear
 * stores it (Llama's projections, the sequence classifier's score), and no
 * bias. Rows of x and y may sit inside wider rows (row strides ldx, ldy),
 * so q, k and v write their columns of one (T, q + 2 kv) row. W is the
 * block's parameter w; x, y and their gradients are activations. */
#ifndef PT_NN_PROJECTION_H
#define PT_NN_PROJECTION_H

#include "nn/block.h"

// x (N,in) -> y (N,out)
void pt_projection_forward(const pt_block *b, int w, void *y, int ldy, const void *x, int ldx,
                           int N, int in, int out);
// dx (N,in) = dy (N,out) W, plus beta times what dx held
void pt_projection_backward_input(const pt_block *b, int w, void *dx, int ldx, const void *dy,
                                  int ldy, int N, int in, int out, float beta);
// dW (out,in) += dy^T x
void pt_projection_backward_weight(pt_block *b, int w, const void *dy, int ldy, const void *x,
                                   int ldx, int N, int in, int out);
/* <name> (out, in), normal with std */
int pt_projection_declare(pt_block *b, const char *name, int in, int out, float std);

#endif
