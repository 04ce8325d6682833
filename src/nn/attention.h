/* attention.h: multi-head causal self-attention on a (T, 3C) row of q, k, v,
 * with every product through the kernel seam's matmul (heads are read in
 * place through row strides). Used by the attention block and the GPT-2
 * transformer block. */
#ifndef PT_NN_ATTENTION_H
#define PT_NN_ATTENTION_H

#include "tensor/kernels.h"

// qkv (B,T,3C) -> y (B,T,C); att (B,H,T,T) keeps the probabilities
void pt_attention_forward(const pt_kernels *k, float *y, float *att, const float *qkv, int B, int T,
                          int C, int H);
// dy (B,T,C) -> dqkv (B,T,3C). att is overwritten (it becomes the score
// gradient); scratch holds T*T floats.
void pt_attention_backward(const pt_kernels *k, float *dqkv, float *att, float *scratch,
                           const float *dy, const float *qkv, int B, int T, int C, int H);
/* FLOPs per sample: the products run over the full (T,T) square */
double pt_attention_forward_flops(int T, int C);
double pt_attention_backward_flops(int T, int C);

#endif
