/* kernels.h: the kernel seam. Blocks do arithmetic only through this table.
 *
 * A backend is one pt_kernels filled with its functions, chosen at run time
 * (pt_kernels_for): fp32 on pipetrain's blocked product for the CPU's
 * widest vectors (gemm.h) or on OpenBLAS, or bf16 mixed precision, whose
 * products run on the fastest bf16 unit the CPU has (AMX tiles, else
 * AVX512_BF16's VDPBF16PS) or on a portable path (operands rounded to bf16,
 * multiplied by the fp32 product). Blocks hold
 * a pointer to the table and never call BLAS or a loop of their own, so a
 * new backend replaces arithmetic without touching a block.
 *
 * Tensors are row-major; N counts rows (tokens or samples), C the row width.
 * Activations (what a block writes and keeps: its outputs, what its backward
 * reads, the gradients between blocks) are stored in the table's `act`
 * type: float under fp32, bf16 under bf16. Their arguments are void *; the
 * float * arguments (parameters, gradients, LayerNorm statistics, scores,
 * probabilities) are float under every precision. Each kernel computes in
 * float and rounds an activation once, when it writes it.
 * "Backward" kernels that produce a gradient for an input overwrite it
 * unless their comment says "adds"; weight gradients always add, so
 * micro-batches accumulate. */
#ifndef PT_TENSOR_KERNELS_H
#define PT_TENSOR_KERNELS_H

#include <stddef.h>

#include "pipetrain.h"

typedef enum { PT_F32 = 0, PT_BF16 = 1 } pt_elem_type;

static inline size_t pt_elem_size(pt_elem_type t) { return t == PT_BF16 ? 2 : 4; }

struct pt_gemm_packed;

/* A matrix of a product: its first element, its row stride (elements, so
 * heads are read in place from a (T, 3C) qkv row) and its element type;
 * for a weight, the room its packed panels are kept in as op(B),
 * untransposed [0] and transposed [1] (gemm.h; NULL: none), which the
 * products that pack the way gemm.h does use. */
typedef struct {
    void *p;
    int ld;
    pt_elem_type dt;
    struct pt_gemm_packed *packed;
} pt_mat;

static inline pt_mat pt_mat_of(const void *p, int ld, pt_elem_type dt)
{
    return (pt_mat){(void *)p, ld, dt, NULL};
}

/* (char *)p advanced by n elements of type t */
static inline void *pt_elems_at(const void *p, size_t n, pt_elem_type t)
{
    return (char *)p + n * pt_elem_size(t);
}

/* A window sliding over a sample's (C,H,W) image, NCHW as PyTorch: kh x kw,
 * one stride and one zero padding for both axes, giving (OH,OW) positions
 * (pt_window_make). Convolutions, pools and their backward read it. */
typedef struct {
    int C, H, W, kh, kw, stride, pad, OH, OW;
} pt_window;

static inline pt_window pt_window_make(int C, int H, int W, int kh, int kw, int stride, int pad)
{
    pt_window g = {C, H, W, kh, kw, stride, pad, 0, 0};
    g.OH = stride > 0 ? (H + 2 * pad - kh) / stride + 1 : 0;
    g.OW = stride > 0 ? (W + 2 * pad - kw) / stride + 1 : 0;
    return g;
}

typedef struct pt_kernels {
    const char *name;     /* "cpu-fp32", "cpu-bf16-amx", "cpu-bf16-avx512bf16", ... */
    const char *products; /* what multiplies: "gemm-avx512", "gemm-avx2", "gemm-generic",
                           * "openblas"; "amx", "avx512bf16", "portable" */
    pt_elem_type act;     /* how activations are stored */

    /* C(M,N) = alpha op(A) op(B) + beta C (+ bias (N) on every row when
     * bias != NULL); op transposes when trans* != 0. Under bf16 the operands
     * are taken as bf16 (float ones rounded first) and summed in float; a
     * bf16 C is rounded once at the end. */
    void (*matmul)(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A, pt_mat B,
                   float beta, pt_mat C, const float *bias);
    /* Floats a weight's kept panels take as an op(B) of K x N (pt_mat's
     * packed); NULL: these products keep none. */
    size_t (*packed_floats)(int K, int N);
    /* The threads a block may share independent pieces of its work between
     * (attention's heads) with pt_gemm_parallel; the products inside a piece
     * then run on its thread alone. NULL: one (the products thread
     * themselves, as OpenBLAS's do). */
    int (*threads)(void);

    /* out (N,C) = normalise(inp) * w + b, with rstd = 1 / sqrt(var + eps);
     * mean, rstd (N) kept for backward */
    void (*layernorm_forward)(void *out, float *mean, float *rstd, const void *inp, const float *w,
                              const float *b, int N, int C, float eps);
    /* A residual add and the LayerNorm that reads it, a row at a time:
     * sum (N,C) = a + b (sum may alias a or b), out = layernorm(sum) */
    void (*residual_layernorm_forward)(void *sum, void *out, float *mean, float *rstd,
                                       const void *a, const void *b, const float *w,
                                       const float *bias, int N, int C, float eps);
    /* dinp (N,C) = dres + the input gradient (dres: the gradient a residual
     * path brings to the same input, or NULL for none; dinp may alias it) */
    void (*layernorm_backward_input)(void *dinp, const void *dres, const void *dout,
                                     const void *inp, const float *w, const float *mean,
                                     const float *rstd, int N, int C);
    /* dw, db (C) add the parameter gradients */
    void (*layernorm_backward_weight)(float *dw, float *db, const void *dout, const void *inp,
                                      const float *mean, const float *rstd, int N, int C);

    /* The activations, elementwise over n, under GPT2Config's names:
     * gelu_new (GPT-2's tanh form) 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
     * gelu (exact)                 0.5 x (1 + erf(x / sqrt 2));
     * relu                         max(x, 0), gradient 0 at 0;
     * silu                         x sigmoid(x).
     * Each backward overwrites dinp with dout times the derivative at inp. */
    void (*gelu_forward)(void *out, const void *inp, size_t n);
    void (*gelu_backward)(void *dinp, const void *inp, const void *dout, size_t n);
    void (*gelu_erf_forward)(void *out, const void *inp, size_t n);
    void (*gelu_erf_backward)(void *dinp, const void *inp, const void *dout, size_t n);
    void (*relu_forward)(void *out, const void *inp, size_t n);
    void (*relu_backward)(void *dinp, const void *inp, const void *dout, size_t n);
    void (*silu_forward)(void *out, const void *inp, size_t n);
    void (*silu_backward)(void *dinp, const void *inp, const void *dout, size_t n);

    /* dbias (C) += column sums of dout (N,C) */
    void (*bias_backward)(float *dbias, const void *dout, int N, int C);
    /* out = a + b, elementwise over n (out may alias a or b) */
    void (*add)(void *out, const void *a, const void *b, size_t n);
    /* out = a + b from two float rows (the embedding's two tables) */
    void (*add_floats)(void *out, const float *a, const float *b, size_t n);
    /* g += d, elementwise over n (a gradient table gathers its rows) */
    void (*accumulate)(float *g, const void *d, size_t n);

    /* The causal softmax of attention, a band of n query rows r0.. at a
     * time (no (T,T) matrix is ever whole): row i of the band sees keys
     * 0..r0+i. scores (n, ld), in place: scale, mask, softmax each row;
     * the probabilities go to att (n, ld) (which may be scores under fp32),
     * zeros past the diagonal up to column r0+n, and each row's max and
     * 1/sum to stats (n, 2), what backward recomputes them from. */
    void (*softmax_causal_forward)(void *att, float *scores, float *stats, int r0, int n, int ld,
                                   float scale);
    /* att (n, ld): the forward's probabilities again, bit for bit, from the
     * same (unscaled) scores and the stats it kept */
    void (*softmax_causal_recompute)(void *att, const float *scores, const float *stats, int r0,
                                     int n, int ld, float scale);
    /* datt (n, ld) = gradient through the causal softmax and its scale, given
     * the band's probabilities att and the gradient dprob (datt may alias att) */
    void (*softmax_causal_backward)(void *datt, const void *att, const float *dprob, int r0, int n,
                                    int ld, float scale);
    /* out = in, n floats stored as activations (rounded once) */
    void (*store_floats)(void *out, const float *in, size_t n);

    /* In place: logits (N,V) become probabilities. When targets != NULL,
     * returns the sum over rows of -log p[target]; rows whose target is
     * negative are ignored. */
    double (*crossentropy_forward)(float *probs, const int *targets, int N, int V);
    /* In place: probs (N,V) become scale * (probs - onehot(target)) */
    void (*crossentropy_backward)(float *probs, const int *targets, int N, int V, float scale);

    /* ---- images and the Llama block (kernels_layers_body.h) ---- */

    /* col (C kh kw, OH OW) of one image (C,H,W): row (c, ky, kx) holds the
     * pixel each output position's window puts there (0 in the padding) */
    void (*im2col)(void *col, const void *img, const pt_window *g);
    /* img (C,H,W) = the sum, for each pixel, of the col entries im2col
     * copied it to (the adjoint of im2col; overwrites) */
    void (*col2im)(void *img, const void *col, const pt_window *g);
    /* out (C,P) += bias[c] on row c; dbias (C) adds the row sums of dout */
    void (*channel_bias_forward)(void *out, const float *bias, int C, int P);
    void (*channel_bias_backward)(float *dbias, const void *dout, int C, int P);
    /* out (C,OH,OW) = each window's maximum (the padding never wins);
     * argmax keeps the pixel (y W + x) it came from */
    void (*maxpool_forward)(void *out, int *argmax, const void *inp, const pt_window *g);
    /* dinp (C,H,W) = the sum of dout over the windows a pixel won (overwrites) */
    void (*maxpool_backward)(void *dinp, const int *argmax, const void *dout, const pt_window *g);
    /* out (C,OH,OW) = each window's mean, padding counted as zeros
     * (PyTorch's count_include_pad); backward overwrites dinp (C,H,W) */
    void (*avgpool_forward)(void *out, const void *inp, const pt_window *g);
    void (*avgpool_backward)(void *dinp, const void *dout, const pt_window *g);

    /* GroupNorm over N samples of (C,HW): G groups of C/G channels each
     * normalised together, then w[c] x + b[c]; mean, rstd (N,G) kept. Its
     * backward_input overwrites dinp; backward_weight adds dw, db (C). */
    void (*groupnorm_forward)(void *out, float *mean, float *rstd, const void *inp, const float *w,
                              const float *b, int N, int C, int HW, int G, float eps);
    void (*groupnorm_backward_input)(void *dinp, const void *dout, const void *inp, const float *w,
                                     const float *mean, const float *rstd, int N, int C, int HW,
                                     int G);
    void (*groupnorm_backward_weight)(float *dw, float *db, const void *dout, const void *inp,
                                      const float *mean, const float *rstd, int N, int C, int HW,
                                      int G);

    /* RMSNorm, as LlamaRMSNorm: out (N,C) = w * x / sqrt(mean(x^2) + eps),
     * rstd (N) kept. backward_input adds to dinp (as layernorm's does);
     * backward_weight adds dw (C). */
    void (*rmsnorm_forward)(void *out, float *rstd, const void *inp, const float *w, int N, int C,
                            float eps);
    void (*rmsnorm_backward_input)(void *dinp, const void *dout, const void *inp, const float *w,
                                   const float *rstd, int N, int C);
    void (*rmsnorm_backward_weight)(float *dw, const void *dout, const void *inp, const float *rstd,
                                    int N, int C);
    /* Rotary positions, in place, on `heads` heads of hd at the start of
     * each of T rows of x (row stride ld): Hugging Face Llama's half split,
     * x[j] cos - x[j + hd/2] sin and x[j + hd/2] cos + x[j] sin at row t
     * with cos, sin (T, hd/2). inverse != 0 rotates back (the gradient). */
    void (*rope)(void *x, int ld, int T, int heads, int hd, const float *cos, const float *sin,
                 int inverse);
    /* SwiGLU: out = silu(gate) * up, elementwise over n; backward writes
     * dgate and dup from dout */
    void (*swiglu_forward)(void *out, const void *gate, const void *up, size_t n);
    void (*swiglu_backward)(void *dgate, void *dup, const void *gate, const void *up,
                            const void *dout, size_t n);

    /* Mean-squared error over N rows of n: pred (N,n) = inp widened to
     * float; returns the sum over rows of each row's mean of (pred -
     * target)^2 (0 when targets is NULL). */
    double (*mse_forward)(float *pred, const void *inp, const float *targets, int N, int n);
    /* dinp (N,n) = scale * (pred - target) */
    void (*mse_backward)(void *dinp, const float *pred, const float *targets, int N, int n,
                         float scale);
} pt_kernels;

/* fp32 kernels on the product kernel chosen by pt_fp32_set_kernel() (by
 * default the fastest this CPU runs that passes the start-up check:
 * kernels_cpu.c), the rest in single passes. */
const pt_kernels *pt_kernels_cpu(void);
/* k->threads(), or 1 */
static inline int pt_kernels_threads(const pt_kernels *k) { return k->threads ? k->threads() : 1; }
/* The start-up check of an fp32 table's product on (M,N,K), every
 * transpose, strides, alpha, beta and bias: the largest error against a
 * sum in double, in units of the bound a correct float sum keeps (<= 1:
 * correct; INFINITY for NaN or when the check could not allocate). */
double pt_fp32_kernel_error(const pt_kernels *t, int M, int N, int K);
/* 1 when OpenBLAS stores the same bits of a product on 1, 2, 3 and 5
 * threads (auto takes OpenBLAS only then). */
int pt_fp32_openblas_keeps_bits(void);
/* bf16 kernels with the portable products (rounded operands, sgemm): the
 * same values stored as the fast path, on every CPU. */
const pt_kernels *pt_kernels_bf16_portable(void);
/* bf16 kernels with AMX products; NULL where the CPU or the kernel lacks
 * AMX (or the permission to use its tiles). */
const pt_kernels *pt_kernels_bf16_amx(void);
/* bf16 kernels with AVX512_BF16 products (VDPBF16PS); NULL where the CPU
 * lacks the instruction. */
const pt_kernels *pt_kernels_bf16_avx512(void);
/* The table a precision runs on: fp32, or bf16 on the product kernel chosen
 * by pt_bf16_set_kernel() (by default the fastest this CPU has). */
const pt_kernels *pt_kernels_for(pt_precision precision);

#endif
