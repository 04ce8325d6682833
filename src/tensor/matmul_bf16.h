/* matmul_bf16.h: the bf16 products behind the kernel seam's matmul under
 * --precision bf16 (kernels_bf16.c puts them in its tables).
 *
 * All take any mix of float and bf16 operands, read every operand as bf16
 * (a float one rounded to nearest even), sum the products in float, and
 * finish each element of C as (alpha * sum + beta * C) + bias, rounded once
 * when C is bf16. They differ only in the order of the float sums inside
 * the product, so what they store may differ in the last bit of a sum, never
 * in where it is rounded:
 *   portable    operands widened to float (exactly: bf16 is a float with a
 *               shorter mantissa), multiplied by the fp32 product; any CPU;
 *               on pipetrain's own fp32 product the widening is its
 *               packing's and the finish its tiles' (gemm.h's
 *               pt_gemm_bf16), with a weight's panels kept;
 *   amx         operands packed into bf16 tiles and multiplied by AMX's
 *               TDPBF16PS (Intel Sapphire Rapids and later); shared
 *               between a worker's threads (pt_blas_set_threads);
 *   avx512bf16  operands packed into pairs along K and multiplied by
 *               AVX512_BF16's VDPBF16PS (AMD Zen 4 and 5, Intel Cooper Lake
 *               and later); shared between a worker's threads likewise.
 * The two instructions also take bf16 and float denormals (below 1.2e-38)
 * as zero where the portable path keeps them.
 * Each thread's packing and conversion buffers come from scratch.h. A
 * buffer that cannot be allocated leaves C all NaN, which the step's
 * non-finite check reports. */
#ifndef PT_TENSOR_MATMUL_BF16_H
#define PT_TENSOR_MATMUL_BF16_H

#include "tensor/bf16.h"
#include "tensor/kernels.h"

void pt_matmul_bf16_portable(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A,
                             pt_mat B, float beta, pt_mat C, const float *bias);
void pt_matmul_bf16_amx(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A,
                        pt_mat B, float beta, pt_mat C, const float *bias);
void pt_matmul_bf16_avx512(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A,
                           pt_mat B, float beta, pt_mat C, const float *bias);
/* 1 when this CPU has AVX512_BF16 (with AVX-512 F, BW and VL) and the
 * operating system saves the AVX-512 registers. */
int pt_avx512bf16_usable(void);
/* floats of the room (4-byte words of bf16 pairs) a weight's op(B) of
 * K x N takes packed into AMX's tiles, kept between products */
size_t pt_amx_packed_floats(int K, int N);
/* 1 when this CPU has AMX's bf16 tiles and Linux lets this process use
 * them (the permission is asked for once, for the whole process). */
int pt_amx_usable(void);

/* How many parts a bf16 product is shared into between a worker's threads
 * (pt_blas_set_threads): 1 inside a part of pt_gemm_parallel, with one
 * thread, or below 2^21 multiply-adds; else the threads, at most `most`
 * (the product's strips or blocks of C). */
int pt_bf16_parts(int M, int N, int K, int most);

/* the start of part i of n things cut into `parts` */
static inline int pt_bf16_share(int n, int parts, int i) { return (int)((long)n * i / parts); }

/* C's element (i, j) finished from the product's sum: shared by every path */
static inline void pt_matmul_finish(pt_mat C, int i, int j, float sum, float alpha, float beta,
                                    const float *bias)
{
    size_t at = (size_t)i * C.ld + j;
    float old = beta == 0.0f      ? 0.0f
                : C.dt == PT_BF16 ? pt_bf16_widen(((pt_bf16 *)C.p)[at])
                                  : ((float *)C.p)[at];
    float v = alpha * sum;
    if (beta != 0.0f)
        v += beta * old;
    if (bias)
        v += bias[j];
    if (C.dt == PT_BF16)
        ((pt_bf16 *)C.p)[at] = pt_bf16_round(v);
    else
        ((float *)C.p)[at] = v;
}

/* op(X)'s element (r, c) read as bf16 */
static inline pt_bf16 pt_mat_bf16(pt_mat X, int trans, int r, int c)
{
    size_t at = trans ? (size_t)c * X.ld + r : (size_t)r * X.ld + c;
    return X.dt == PT_BF16 ? ((const pt_bf16 *)X.p)[at] : pt_bf16_round(((const float *)X.p)[at]);
}

/* C (M,N) set to NaN: a product that could not get its buffers */
void pt_matmul_poison(int M, int N, pt_mat C);

#endif
