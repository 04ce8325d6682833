/* attention_gqa.h: causal grouped-query attention (Llama's): H query heads
 * share KV key/value heads, query head h reading kv head h / (H / KV), all
 * of size hd. A token's row of qkv holds its H query heads, then its KV key
 * heads, then its KV value heads: (H + 2 KV) hd floats. Products go through
 * the seam's matmul over the causal bands, as attention.c's do. Used by the
 * Llama block. */
#ifndef PT_NN_ATTENTION_GQA_H
#define PT_NN_ATTENTION_GQA_H

#include "nn/block.h"

typedef struct {
    int T, H, KV, hd;
    float scale; /* of the scores (1 / sqrt(hd)) */
} pt_gqa;

/* floats of a qkv row */
static inline int pt_gqa_row(const pt_gqa *a) { return (a->H + 2 * a->KV) * a->hd; }

// qkv (B,T,(H+2KV)hd) -> y (B,T,H hd); att (B,H,T,T) keeps the
// probabilities; scratch holds T*T + 2T floats (scores, then the softmax's row statistics)
void pt_gqa_forward(const pt_kernels *k, const pt_gqa *a, void *y, void *att, float *scratch,
                    const void *qkv, int B);
// dy (B,T,H hd) -> dqkv (B,T,(H+2KV)hd); att is overwritten
void pt_gqa_backward(const pt_kernels *k, const pt_gqa *a, void *dqkv, void *att, float *scratch,
                     const void *dy, const void *qkv, int B);

#endif
