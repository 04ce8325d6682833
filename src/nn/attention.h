/* attention.h: causal self-attention, multi-head on a (T, 3C) row of q, k,
 * v (GPT-2's) or grouped-query (Llama's), with every product through the
 * kernel seam's matmul (heads are read in place through row strides). Used
 * by the attention block and the GPT-2 and Llama transformer blocks. */
#ifndef PT_NN_ATTENTION_H
#define PT_NN_ATTENTION_H

#include "nn/block.h"

/* What the scores q k^T of layer `layer` are multiplied by before the
 * softmax, as GPT2Attention scales them: 1 / sqrt(head size) unless
 * attn_unscaled, and also 1 / (layer + 1) under attn_by_layer. */
float pt_attention_scale(const pt_block_shape *s, int layer);

// qkv (B,T,3C) -> y (B,T,C); stats (B,H,T,2) keeps each row's softmax max
// and 1/sum, from which backward recomputes the probabilities; scratch
// holds pt_attention_scratch_floats() floats. qkv, y: activations.
void pt_attention_forward(const pt_kernels *k, void *y, float *stats, float *scratch,
                          const void *qkv, int B, int T, int C, int H, float scale);
// dy (B,T,C) -> dqkv (B,T,3C), with the forward's stats and scale.
void pt_attention_backward(const pt_kernels *k, void *dqkv, const float *stats, float *scratch,
                           const void *dy, const void *qkv, int B, int T, int C, int H,
                           float scale);
/* Floats of scratch attention needs: a band of query rows' scores and
 * their gradients and probabilities (rows x T), and one head's key and
 * value gradients (T x C/H); never (T,T). */
size_t pt_attention_scratch_floats(int T, int C, int H, pt_elem_type act);
/* Grouped-query attention: H query heads share KV key/value heads, query
 * head h reading kv head h / (H / KV), all of size hd. A token's row of
 * qkv holds its H query heads, then its KV key heads, then its KV value
 * heads: (H + 2 KV) hd elements; its row of y the H heads' outputs. GPT-2's
 * heads are KV = H, hd = C / H. */
typedef struct {
    int T, H, KV, hd;
    float scale; /* of the scores (1 / sqrt(hd)) */
} pt_gqa;

/* elements of a qkv row */
static inline int pt_gqa_row(const pt_gqa *a) { return (a->H + 2 * a->KV) * a->hd; }

// qkv (B,T,(H+2KV)hd) -> y (B,T,H hd); stats (B,H,T,2) as above; scratch
// holds pt_gqa_scratch_floats() floats
void pt_gqa_forward(const pt_kernels *k, const pt_gqa *a, void *y, float *stats, float *scratch,
                    const void *qkv, int B);
// dy (B,T,H hd) -> dqkv (B,T,(H+2KV)hd); each key/value head's gradient
// summed in float over the query heads that read it, in order
void pt_gqa_backward(const pt_kernels *k, const pt_gqa *a, void *dqkv, const float *stats,
                     float *scratch, const void *dy, const void *qkv, int B);
size_t pt_gqa_scratch_floats(const pt_gqa *a, pt_elem_type act);

/* FLOPs per sample: the products run over the full (T,T) square */
double pt_attention_forward_flops(int T, int C);
double pt_attention_backward_flops(int T, int C);

#endif
