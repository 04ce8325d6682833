/* kernels.h: the kernel seam. Blocks do arithmetic only through this table.
 *
 * A backend (fp32 on OpenBLAS today; bf16 on oneDNN or CUDA later) is one
 * pt_kernels filled with its functions, chosen at run time. Blocks hold a
 * pointer to the table and never call BLAS or a loop of their own, so a new
 * backend replaces arithmetic without touching a block.
 *
 * All tensors are row-major float arrays; N counts rows (tokens or samples),
 * C the row width. "Backward" kernels that produce a gradient for an input
 * overwrite it unless their comment says "adds"; weight gradients always
 * add, so micro-batches accumulate.
 */
#ifndef PT_TENSOR_KERNELS_H
#define PT_TENSOR_KERNELS_H

#include <stddef.h>

typedef struct pt_kernels {
    const char *name;

    /* C(M,N) = alpha op(A) op(B) + beta C; op transposes when trans* != 0.
     * lda, ldb, ldc are row strides, so heads can be read in place from a
     * (T, 3C) qkv row. */
    void (*matmul)(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc);

    /* out (N,C) = normalise(inp) * w + b, with rstd = 1 / sqrt(var + eps);
     * mean, rstd (N) kept for backward */
    void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C, float eps);
    /* dinp (N,C) adds the input gradient */
    void (*layernorm_backward_input)(float *dinp, const float *dout, const float *inp,
                                     const float *w, const float *mean, const float *rstd, int N,
                                     int C);
    /* dw, db (C) add the parameter gradients */
    void (*layernorm_backward_weight)(float *dw, float *db, const float *dout, const float *inp,
                                      const float *mean, const float *rstd, int N, int C);

    /* The activations, elementwise over n, under GPT2Config's names:
     * gelu_new (GPT-2's tanh form) 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
     * gelu (exact)                 0.5 x (1 + erf(x / sqrt 2));
     * relu                         max(x, 0), gradient 0 at 0;
     * silu                         x sigmoid(x).
     * Each backward overwrites dinp with dout times the derivative at inp. */
    void (*gelu_forward)(float *out, const float *inp, size_t n);
    void (*gelu_backward)(float *dinp, const float *inp, const float *dout, size_t n);
    void (*gelu_erf_forward)(float *out, const float *inp, size_t n);
    void (*gelu_erf_backward)(float *dinp, const float *inp, const float *dout, size_t n);
    void (*relu_forward)(float *out, const float *inp, size_t n);
    void (*relu_backward)(float *dinp, const float *inp, const float *dout, size_t n);
    void (*silu_forward)(float *out, const float *inp, size_t n);
    void (*silu_backward)(float *dinp, const float *inp, const float *dout, size_t n);

    /* out (N,C) += bias (C) on every row */
    void (*bias_add)(float *out, const float *bias, int N, int C);
    /* dbias (C) += column sums of dout (N,C) */
    void (*bias_backward)(float *dbias, const float *dout, int N, int C);
    /* out = a + b, elementwise over n (out may alias a or b) */
    void (*add)(float *out, const float *a, const float *b, size_t n);

    /* In place over att (T,T): scale, mask j > i, softmax each row. */
    void (*softmax_causal_forward)(float *att, int T, float scale);
    /* datt (T,T) = gradient through the causal softmax and its scale, given
     * the probabilities att and the gradient dprob, both (T,T) */
    void (*softmax_causal_backward)(float *datt, const float *att, const float *dprob, int T,
                                    float scale);

    /* In place: logits (N,V) become probabilities. When targets != NULL,
     * returns the sum over rows of -log p[target]; rows whose target is
     * negative are ignored. */
    double (*crossentropy_forward)(float *probs, const int *targets, int N, int V);
    /* In place: probs (N,V) become scale * (probs - onehot(target)) */
    void (*crossentropy_backward)(float *probs, const int *targets, int N, int V, float scale);
} pt_kernels;

/* fp32 kernels: products through cblas_sgemm, the rest in single passes. */
const pt_kernels *pt_kernels_cpu(void);

#endif
