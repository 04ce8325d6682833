/* kernels_cpu.c: the fp32 CPU backends of the kernel seam (kernels.h), and
 * which product kernel they run on.
 *
 * Everything memory-bound (layernorm, the activations, softmax, residuals,
 * the loss) is one pass over its rows (kernels_body.h with float
 * activations), shared by every table; the tables differ in the product:
 *   gemm-avx512, gemm-avx2, gemm-generic  pipetrain's blocked product
 *                                         (gemm.h), per instruction set;
 *   openblas                              OpenBLAS's cblas_sgemm, whose
 *                                         kernel OpenBLAS picks (and
 *                                         OPENBLAS_CORETYPE overrides).
 * "auto" (the default) decides by the CPU's features, never by the
 * environment: pipetrain's kernel for the widest vectors this CPU has
 * (gemm-avx512, else gemm-avx2), and OpenBLAS where neither runs. So an
 * OpenBLAS built for an older CPU, or OPENBLAS_CORETYPE=Haswell on an
 * AVX-512 one (which halves OpenBLAS's speed), changes nothing. OpenBLAS
 * had been preferred where its own core used the CPU's widest vectors and
 * kept its bits on every thread count; on the AVX-512 Xeon of
 * docs/performance.md gemm-avx512 now runs 1.05-1.10x OpenBLAS's SkylakeX
 * kernel on one thread, 1.07-1.11x at P = 2, and 1.3x one worker on two
 * threads (where OpenBLAS's idle threads leave the passes outside the
 * products on one thread: PASS_THREADS below). A kernel must pass the
 * start-up check to be chosen: the check multiplies small odd shapes
 * (every transpose, strides, alpha, beta, a bias, K over two blocks) and
 * compares with a sum in double; a kernel that fails it is never
 * selected: auto goes on to the next with a line on stderr, and asking for
 * it by name fails. pt_fp32_openblas_keeps_bits() says whether OpenBLAS
 * stores the same bits on 1, 2, 3 and 5 threads, which a pipelined run's
 * equality to a one-worker run needs of `--kernel openblas` (OpenBLAS
 * 0.3.21's Zen driver on an AMD EPYC, Zen 3, does not keep them)
 * (docs/performance.md). */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"
#include "tensor/matmul_bf16.h"

#define ACT      float
#define LD(x)    (x)
#define ST(x)    (x)
#define KN(name) f32_##name
/* the fp32 table's threads: none besides the caller's where OpenBLAS's
 * threads do the products (its idle threads would contend with the pool's:
 * one worker on two threads ran 0.8x with its passes shared) */
#define PASS_THREADS() pt_kernels_threads(pt_kernels_cpu())
#include "tensor/kernels_body.h"

/* threads of each product, per worker (pt_blas_set_threads) */
static _Atomic int product_threads = 1;

static void gemm_matmul(const pt_gemm_kernel *k, int trans_a, int trans_b, int M, int N, int K,
                        float alpha, pt_mat A, pt_mat B, float beta, pt_mat C, const float *bias)
{
    if (pt_gemm(k, product_threads + pt_gemm_spare(), trans_a, trans_b, M, N, K, alpha, A.p, A.ld,
                B.p, B.ld, beta, C.p, C.ld, bias, B.packed ? &B.packed[trans_b != 0] : NULL) != 0)
        pt_matmul_poison(M, N, C);
}

#define GEMM_MATMUL(isa)                                                                           \
    static void isa##_matmul(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A, \
                             pt_mat B, float beta, pt_mat C, const float *bias)                    \
    {                                                                                              \
        gemm_matmul(pt_gemm_##isa(), trans_a, trans_b, M, N, K, alpha, A, B, beta, C, bias);       \
    }                                                                                              \
    static size_t isa##_packed_floats(int K, int N)                                                \
    {                                                                                              \
        return pt_gemm_packed_floats(pt_gemm_##isa(), K, N);                                       \
    }
GEMM_MATMUL(avx512)
GEMM_MATMUL(avx2)
GEMM_MATMUL(generic)

static void openblas_matmul(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A,
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

/* pipetrain's own products share a worker's threads; a block's pieces
 * running on them take one each (gemm_pool.c runs nested parts serially) */
static int own_threads(void) { return product_threads + pt_gemm_spare(); }

#define F32_KERNELS(products_, matmul_, packed_, threads_)                           \
    {                                                                                \
        .name = "cpu-fp32", .products = products_, .act = PT_F32, .matmul = matmul_, \
        .packed_floats = packed_, .threads = threads_, PT_KERNELS_BODY               \
    }

static const pt_kernels tables[] = {
    F32_KERNELS("gemm-avx512", avx512_matmul, avx512_packed_floats, own_threads),
    F32_KERNELS("gemm-avx2", avx2_matmul, avx2_packed_floats, own_threads),
    F32_KERNELS("gemm-generic", generic_matmul, generic_packed_floats, own_threads),
    F32_KERNELS("openblas", openblas_matmul, NULL, NULL),
};

/* The product kernels by name, auto's order first. */
static const struct {
    const char *name;
    const pt_gemm_kernel *(*gemm)(void); /* NULL: OpenBLAS */
    const char *lacks;                   /* why not, for the refusal */
    int for_auto;
} kernels[] = {
    {"avx512", pt_gemm_avx512,
     "this CPU has no AVX-512F, or the system does not save its registers", 1},
    {"avx2", pt_gemm_avx2, "this CPU has no AVX2 and FMA3", 1},
    {"generic", pt_gemm_generic, "", 0},
    {"openblas", NULL, "", 1},
};
enum { N_KERNELS = sizeof kernels / sizeof kernels[0] };

static int runs_here(int i) { return !kernels[i].gemm || kernels[i].gemm(); }

/* ---- the start-up check ---- */

/* op(X)'s element (r, c) */
static float at(const float *x, int ld, int trans, int r, int c)
{
    return trans ? x[(size_t)c * ld + r] : x[(size_t)r * ld + c];
}

/* The largest error of table t's product against a sum in double, over
 * the four transposes, in units of the bound a correct float sum keeps
 * (2 K eps of the sum of magnitudes): above 1 is wrong. */
double pt_fp32_kernel_error(const pt_kernels *t, int M, int N, int K)
{
    int pad = 3, ld = (M > N ? M : N) + (K > 0 ? K : 0) + pad;
    size_t big = (size_t)ld * ld;
    float *a = malloc(sizeof(float) * big), *b = malloc(sizeof(float) * big),
          *c = malloc(sizeof(float) * big), *c0 = malloc(sizeof(float) * big),
          *bias = malloc(sizeof(float) * (size_t)(N + 1));
    double worst = INFINITY;
    if (a && b && c && c0 && bias) {
        unsigned s = 12345;
        for (size_t i = 0; i < big; i++) {
            s = s * 1664525u + 1013904223u;
            a[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
            s = s * 1664525u + 1013904223u;
            b[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
            c0[i] = a[i] * 0.5f - b[i];
        }
        for (int j = 0; j <= N; j++)
            bias[j] = 0.125f * (float)(j % 7) - 0.25f;
        float alpha = 0.75f, beta = -0.5f;
        worst = 0;
        for (int tr = 0; tr < 4; tr++) {
            int ta = tr & 1, tb = tr >> 1;
            memcpy(c, c0, sizeof(float) * big);
            t->matmul(ta, tb, M, N, K, alpha, pt_mat_of(a, ld, PT_F32),
                      pt_mat_of(b, ld - 1, PT_F32), beta, pt_mat_of(c, ld - 2, PT_F32),
                      tr == 3 ? NULL : bias);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double sum = 0, mag = 0;
                    for (int k = 0; k < K; k++) {
                        double p = (double)at(a, ld, ta, i, k) * at(b, ld - 1, tb, k, j);
                        sum += p, mag += fabs(p);
                    }
                    double old = c0[(size_t)i * (ld - 2) + j], bj = tr == 3 ? 0 : bias[j];
                    double want = alpha * sum + beta * old + bj;
                    double bound =
                        2.0 * (K + 3) * 6e-8 * (fabs(alpha) * mag + fabs(beta * old) + fabs(bj)) +
                        1e-30;
                    double e = fabs(c[(size_t)i * (ld - 2) + j] - want) / bound;
                    if (!(e <= worst)) /* NaN counts as the worst */
                        worst = isnan(e) ? INFINITY : e;
                }
        }
    }
    free(a), free(b), free(c), free(c0), free(bias);
    return worst;
}

/* 1 when kernel i runs here and passes the check (once per kernel) */
static int passes(int i, int quiet)
{
    static _Atomic int verdict[N_KERNELS]; /* 0 unknown, 1 passed, -1 failed */
    if (!runs_here(i))
        return 0;
    if (!verdict[i]) {
        double e = pt_fp32_kernel_error(&tables[i], 29, 45, 2 * 384 + 17);
        if (e <= 1.0)
            e = pt_fp32_kernel_error(&tables[i], 7, 5, 3);
        verdict[i] = e <= 1.0 ? 1 : -1;
        if (verdict[i] < 0 && !quiet)
            fprintf(stderr,
                    "pipetrain: fp32 product kernel %s fails its start-up check (error %.3g "
                    "times a correct sum's bound); not used\n",
                    tables[i].products, e);
    }
    return verdict[i] > 0;
}

/* what pt_fp32_set_kernel asked for: an index of kernels[], -1 auto */
static _Atomic int wanted = -1;
static int chosen_auto = -1;
static pthread_once_t auto_once = PTHREAD_ONCE_INIT;

/* Whether OpenBLAS stores the same bits of a product (149 x 203 x 401,
 * every transpose) on 1, 2, 3 and 5 threads; its thread count is restored. */
int pt_fp32_openblas_keeps_bits(void)
{
    enum { M = 149, N = 203, K = 401 };
    static const int threads[] = {2, 3, 5};
    size_t big = (size_t)K * (M > N ? M : N);
    float *a = malloc(sizeof(float) * big), *b = malloc(sizeof(float) * big),
          *c1 = malloc(sizeof(float) * M * N), *c = malloc(sizeof(float) * M * N);
    int same = a && b && c1 && c;
    unsigned x = 2463534242u;
    for (size_t i = 0; same && i < big; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        a[i] = (float)(x & 0xffff) / 32768.0f - 1.0f;
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        b[i] = (float)(x & 0xffff) / 32768.0f - 1.0f;
    }
    for (int tr = 0; same && tr < 4; tr++) {
        int ta = tr & 1, tb = tr >> 1;
        for (int t = -1; same && t < 3; t++) {
            openblas_set_num_threads(t < 0 ? 1 : threads[t]);
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                        tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, a, ta ? M : K, b, tb ? K : N,
                        0.0f, t < 0 ? c1 : c, N);
            same = t < 0 || !memcmp(c1, c, sizeof(float) * M * N);
        }
    }
    openblas_set_num_threads(product_threads);
    free(a), free(b), free(c1), free(c);
    return same;
}

static void choose_auto(void)
{
    for (int i = 0; i < N_KERNELS && chosen_auto < 0; i++)
        if (kernels[i].for_auto && passes(i, 0))
            chosen_auto = i;
    if (chosen_auto < 0) /* nothing passed: OpenBLAS, as pipetrain always had */
        chosen_auto = N_KERNELS - 1;
}

int pt_fp32_set_kernel(const char *name)
{
    if (name && !strcmp(name, "auto")) {
        wanted = -1;
        return PT_OK;
    }
    for (int i = 0; i < N_KERNELS; i++)
        if (name && !strcmp(name, kernels[i].name)) {
            if (!runs_here(i))
                return pt_fail(PT_EUNSUPPORTED,
                               "fp32 kernel %s: %s (auto, avx2 where the CPU has it, generic and "
                               "openblas run everywhere)",
                               name, kernels[i].lacks);
            if (!passes(i, 1))
                return pt_fail(PT_EUNSUPPORTED,
                               "fp32 kernel %s gives wrong products on this machine (its "
                               "start-up check against a sum in double failed)",
                               name);
            wanted = i;
            return PT_OK;
        }
    return pt_fail(PT_EINVAL, "fp32 kernel '%s' is none of auto, avx512, avx2, generic, openblas",
                   name ? name : "(null)");
}

const pt_kernels *pt_kernels_cpu(void)
{
    int w = wanted;
    if (w >= 0)
        return &tables[w];
    pthread_once(&auto_once, choose_auto);
    return &tables[chosen_auto];
}

const char *pt_fp32_kernel(void) { return pt_kernels_cpu()->products; }

const pt_gemm_kernel *pt_fp32_gemm(void)
{
    int i = (int)(pt_kernels_cpu() - tables);
    return kernels[i].gemm ? kernels[i].gemm() : NULL;
}

int pt_blas_set_threads(int n)
{
    if (n < 1)
        return pt_fail(PT_EINVAL, "BLAS threads must be at least 1 (got %d)", n);
    openblas_set_num_threads(n);
    product_threads = n;
    return PT_OK;
}

int pt_blas_threads(void) { return product_threads; }
