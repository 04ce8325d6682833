/* kernels_cpu.c: the fp32 CPU backend of the kernel seam (kernels.h).
 *
 * Products go to OpenBLAS's cblas_sgemm; everything memory-bound (layernorm,
 * the activations, softmax, residuals, the loss) is one pass over its rows
 * (kernels_body.h with float activations), so the time of a step is
 * dominated by the products. */
#include <cblas.h>

#include "tensor/kernels.h"

#define ACT      float
#define LD(x)    (x)
#define ST(x)    (x)
#define KN(name) f32_##name
#include "tensor/kernels_body.h"

/* Every operand is float under fp32. */
static void f32_matmul(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A,
                       pt_mat B, float beta, pt_mat C, const float *bias)
{
    float *c = C.p;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A.p, A.ld, B.p, B.ld, beta, c,
                C.ld);
    for (int i = 0; bias && i < M; i++) {
        float *o = c + (size_t)i * C.ld;
        for (int j = 0; j < N; j++)
            o[j] += bias[j];
    }
}

static const pt_kernels cpu_kernels = {
    .name = "cpu-fp32",
    .products = "sgemm",
    .act = PT_F32,
    .matmul = f32_matmul,
    PT_KERNELS_BODY,
};

const pt_kernels *pt_kernels_cpu(void) { return &cpu_kernels; }
