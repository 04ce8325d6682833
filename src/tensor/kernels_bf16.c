/* kernels_bf16.c: the bf16 mixed-precision backends of the kernel seam
 * (kernels.h), and which one a run takes.
 *
 * Activations are stored as bf16 (kernels_body.h with pt_bf16: every kernel
 * widens what it reads, computes in float and rounds what it writes once);
 * parameters, gradients, LayerNorm statistics, scores and the loss stay
 * float. Three tables share every kernel but the product (matmul_bf16.h):
 * "cpu-bf16-amx" where the CPU has AMX, "cpu-bf16-avx512bf16" where it has
 * AVX512_BF16, "cpu-bf16-portable" everywhere. pt_kernels_for() picks by
 * pt_bf16_set_kernel(): "auto" (the default: amx where this CPU runs it,
 * else portable), or one of them by name. auto leaves avx512bf16 out: on
 * the CPU it was measured on (a Sapphire Rapids Xeon, where VDPBF16PS runs
 * at half the float FMA rate) it is 0.6-0.7x sgemm (docs/bf16.md); a run
 * that knows its CPU does better with it asks for it by name. */
#include <math.h>
#include <string.h>

#include "tensor/error.h"
#include "tensor/gemm.h"
#include "tensor/matmul_bf16.h"
#include "tensor/scratch.h"

/* n floats rounded to bf16 with pt_bf16_round's bits: 32 at a time by
 * AVX512_BF16's VCVTNE2PS2BF16 where the CPU has it (round to nearest
 * even, a NaN quieted as pt_bf16_round quiets it: the same bits for every
 * float but a denormal, which the instruction takes as zero, so 32 holding
 * one go the integer way; all 2^32 floats checked); the rest, and every
 * float elsewhere, the integer way. */
#if defined(__x86_64__) && defined(__GNUC__)
#include "tensor/bf16_avx512.h"

/* the whole runs of 32 of v rounded by the instruction; how many done */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))) static size_t
store_runs_cvt(pt_bf16 *out, const float *v, size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 lo = _mm512_loadu_ps(v + i), hi = _mm512_loadu_ps(v + i + 16);
        if (_mm512_fpclass_ps_mask(lo, 0x20) | _mm512_fpclass_ps_mask(hi, 0x20)) /* denormal */
            pt_bf16_from_floats(out + i, v + i, 32);
        else
            _mm512_storeu_si512((void *)(out + i), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
    return i;
}

static size_t store_runs(pt_bf16 *out, const float *v, size_t n)
{
    /* the denormal check is AVX512DQ's (every CPU with AVX512_BF16 has it) */
    return pt_avx512bf16_usable() && __builtin_cpu_supports("avx512dq") ? store_runs_cvt(out, v, n)
                                                                        : 0;
}
#else
static size_t store_runs(pt_bf16 *out, const float *v, size_t n)
{
    (void)out, (void)v, (void)n;
    return 0;
}
#endif

static void store_run(pt_bf16 *out, const float *v, size_t n)
{
    size_t done = store_runs(out, v, n);
    pt_bf16_from_floats(out + done, v + done, n - done);
}

#define ACT             pt_bf16
#define LD(x)           pt_bf16_widen(x)
#define ST(x)           pt_bf16_round(x)
#define ST_RUN(o, v, n) store_run(o, v, n)
#define KN(name)        bf16_##name
/* the threads of the bf16 table in use: AMX's and AVX512_BF16's products
 * are pipetrain's own and share the worker's threads, so its passes do too
 * whatever multiplies fp32 (with OpenBLAS there, one worker's GELU,
 * LayerNorm and bias gradients had run on one of its two threads) */
#define PASS_THREADS() pt_kernels_threads(pt_kernels_for(PT_PRECISION_BF16))
#include "tensor/kernels_body.h"

void pt_matmul_poison(int M, int N, pt_mat C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            pt_matmul_finish(C, i, j, NAN, 1.0f, 0.0f, NULL);
}

/* stored rows x cols of X, every element as the float of its bf16 */
static void widen_rounded(float *out, pt_mat X, int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            out[(size_t)r * cols + c] = pt_bf16_widen(pt_mat_bf16(X, 0, r, c));
}

/* how pipetrain's blocked product reads X as bf16 */
static pt_gemm_reading reading(pt_mat X)
{
    return X.dt == PT_BF16 ? PT_GEMM_BF16 : PT_GEMM_ROUNDED;
}

/* AMX's and AVX512_BF16's products share a worker's threads as
 * pipetrain's fp32 products do, and so do the portable ones on them */
static int product_threads(void) { return pt_blas_threads() + pt_gemm_spare(); }

void pt_matmul_bf16_portable(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A,
                             pt_mat B, float beta, pt_mat C, const float *bias)
{
    /* on pipetrain's blocked product: the widening is its packing's, the
     * finish its tiles', and a weight's panels are kept */
    const pt_gemm_kernel *k = pt_fp32_gemm();
    if (k) {
        if (pt_gemm_bf16(k, product_threads(), trans_a, trans_b, M, N, K, alpha, A.p, reading(A),
                         A.ld, B.p, reading(B), B.ld, beta, C.p, C.dt == PT_BF16, C.ld, bias,
                         B.packed ? &B.packed[trans_b != 0] : NULL) != 0)
            pt_matmul_poison(M, N, C);
        return;
    }
    /* on OpenBLAS's: the operands widened into floats first, C finished
     * after. Stored shapes: op(A) is (M,K), so A is (K,M) when transposed */
    int ar = trans_a ? K : M, ac = trans_a ? M : K, br = trans_b ? N : K, bc = trans_b ? K : N;
    float *a = pt_scratch(0, sizeof(float) * (size_t)ar * ac);
    float *b = pt_scratch(1, sizeof(float) * (size_t)br * bc);
    float *sum = pt_scratch(2, sizeof(float) * (size_t)M * N);
    if (!a || !b || !sum) {
        pt_matmul_poison(M, N, C);
        return;
    }
    widen_rounded(a, A, ar, ac);
    widen_rounded(b, B, br, bc);
    pt_kernels_cpu()->matmul(trans_a, trans_b, M, N, K, 1.0f, pt_mat_of(a, ac, PT_F32),
                             pt_mat_of(b, bc, PT_F32), 0.0f, pt_mat_of(sum, N, PT_F32), NULL);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            pt_matmul_finish(C, i, j, sum[(size_t)i * N + j], alpha, beta, bias);
}

/* Products smaller than this many multiply-adds run on one thread */
#define PARALLEL_MIN_FMAS (1L << 21)

int pt_bf16_parts(int M, int N, int K, int most)
{
    int threads = pt_gemm_in_part() ? 1 : pt_blas_threads() + pt_gemm_spare();
    if (threads < 2 || (double)M * N * K < (double)PARALLEL_MIN_FMAS)
        return 1;
    return threads < most ? threads : most;
}

/* the portable products are the fp32 kernel's, and share what it shares */
static int portable_threads(void) { return pt_kernels_threads(pt_kernels_cpu()); }

/* a bf16 table: the shared kernels and one product */
#define BF16_KERNELS(products_, matmul_, packed_, threads_)                                      \
    {                                                                                            \
        .name = "cpu-bf16-" products_, .products = products_, .act = PT_BF16, .matmul = matmul_, \
        .packed_floats = packed_, .threads = threads_, PT_KERNELS_BODY                           \
    }

/* the room a weight's kept panels take: the fp32 product's, whose panels
 * the portable products read (none on OpenBLAS) */
static size_t portable_packed_floats(int K, int N)
{
    const pt_gemm_kernel *k = pt_fp32_gemm();
    return k ? pt_gemm_packed_floats(k, K, N) : 0;
}

static const pt_kernels portable =
    BF16_KERNELS("portable", pt_matmul_bf16_portable, portable_packed_floats, portable_threads);
static const pt_kernels amx =
    BF16_KERNELS("amx", pt_matmul_bf16_amx, pt_amx_packed_floats, product_threads);
static const pt_kernels avx512 =
    BF16_KERNELS("avx512bf16", pt_matmul_bf16_avx512, NULL, product_threads);

const pt_kernels *pt_kernels_bf16_portable(void) { return &portable; }

const pt_kernels *pt_kernels_bf16_amx(void) { return pt_amx_usable() ? &amx : NULL; }

const pt_kernels *pt_kernels_bf16_avx512(void) { return pt_avx512bf16_usable() ? &avx512 : NULL; }

/* The product kernels by name: "auto" takes the first this CPU runs of
 * those marked for it. */
static const struct {
    const char *name;
    const pt_kernels *(*table)(void); /* NULL where this CPU cannot run it */
    const char *lacks;                /* why not, for the refusal */
    int for_auto;
} kernels[] = {
    {"amx", pt_kernels_bf16_amx,
     "this CPU has no AMX bf16 tiles, or Linux does not let this process use them", 1},
    {"avx512bf16", pt_kernels_bf16_avx512,
     "this CPU has no AVX512_BF16 (VDPBF16PS), or the system does not save the AVX-512 "
     "registers",
     0},
    {"portable", pt_kernels_bf16_portable, "", 1},
};
enum { N_KERNELS = sizeof kernels / sizeof kernels[0] };

/* what pt_bf16_set_kernel asked for: an index of kernels[], -1 auto */
static int wanted = -1;

int pt_bf16_set_kernel(const char *name)
{
    if (name && !strcmp(name, "auto")) {
        wanted = -1;
        return PT_OK;
    }
    for (int i = 0; i < N_KERNELS; i++)
        if (name && !strcmp(name, kernels[i].name)) {
            if (!kernels[i].table())
                return pt_fail(PT_EUNSUPPORTED,
                               "bf16 kernel %s: %s (auto or portable run everywhere)", name,
                               kernels[i].lacks);
            wanted = i;
            return PT_OK;
        }
    return pt_fail(PT_EINVAL, "bf16 kernel '%s' is none of auto, amx, avx512bf16, portable",
                   name ? name : "(null)");
}

const char *pt_bf16_kernel(void) { return pt_kernels_for(PT_PRECISION_BF16)->products; }

const pt_kernels *pt_kernels_for(pt_precision precision)
{
    if (precision != PT_PRECISION_BF16)
        return pt_kernels_cpu();
    if (wanted >= 0)
        return kernels[wanted].table();
    for (int i = 0; i < N_KERNELS; i++) {
        const pt_kernels *k = kernels[i].for_auto ? kernels[i].table() : NULL;
        if (k)
            return k;
    }
    return &portable;
}
