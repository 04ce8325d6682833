/* linear.h: y = x W + b with W stored (in, out), as Hugging Face's Conv1D
 * stores GPT-2's weights. The three pieces every block with a projection
 * uses (attention, transformer, classifier, the Linear block). */
#ifndef PT_NN_LINEAR_H
#define PT_NN_LINEAR_H

#include "tensor/kernels.h"

/* inp (N,in) -> out (N,out); bias may be NULL */
void pt_linear_forward(const pt_kernels *k, float *out, const float *inp, const float *w,
                       const float *bias, int N, int in, int out_w);
/* dinp (N,in) = dout (N,out) W^T, or += when accumulate != 0 */
void pt_linear_backward_input(const pt_kernels *k, float *dinp, const float *dout, const float *w,
                              int N, int in, int out_w, int accumulate);
/* dw (in,out) += inp^T dout; dbias (out) += column sums of dout (if not NULL) */
void pt_linear_backward_weight(const pt_kernels *k, float *dw, float *dbias, const float *dout,
                               const float *inp, int N, int in, int out_w);

#endif
