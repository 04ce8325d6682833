/* bench_bf16_products: each bf16 product kernel against sgemm at the
 * products GPT-small trains with, on one core.
 *
 * GPT-small (384 channels, 6 heads, MLP width 1536, context 256) with a
 * micro-batch of 4 samples: 1024 rows. For each product as a block calls it
 * (operands and C in the types the block passes: bf16 activations and
 * weight copies, float weight gradients accumulated with beta 1), the
 * GFLOP/s of
 *   sgemm        the fp32 product (float operands, cblas_sgemm);
 *   portable     operands rounded to bf16, then sgemm;
 *   amx          AMX tiles (where the CPU and Linux allow them);
 *   avx512bf16   VDPBF16PS (where the CPU has it);
 * each the median of `reps` timed calls after a warm-up, one BLAS thread.
 * Around them, one core's float FMA, VDPBF16PS and AMX TDPBF16PS peaks
 * (bench_peak.h), before and after, so each rate is read against the peaks of the same run.
 * Usage: bench_bf16_products [reps] (default 9). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_peak.h"
#include "tensor/bf16.h"
#include "tensor/matmul_bf16.h"

typedef struct {
    const char *what;
    int ta, tb, M, N, K;
    pt_elem_type c; /* C's type */
    float beta;
    int bias;
} shape;

static const shape shapes[] = {
    {"c_attn forward", 0, 0, 1024, 1152, 384, PT_BF16, 0, 1},
    {"mlp.c_fc forward", 0, 0, 1024, 1536, 384, PT_BF16, 0, 1},
    {"mlp.c_proj forward", 0, 0, 1024, 384, 1536, PT_BF16, 0, 1},
    {"c_attn input grad", 0, 1, 1024, 384, 1152, PT_BF16, 0, 0},
    {"mlp.c_proj input grad", 0, 1, 1024, 1536, 384, PT_BF16, 0, 0},
    {"c_attn weight grad", 1, 0, 384, 1152, 1024, PT_F32, 1, 0},
    {"mlp.c_proj weight grad", 1, 0, 1536, 384, 1024, PT_F32, 1, 0},
    {"attention q k^T (band)", 0, 1, 64, 256, 64, PT_F32, 0, 0},
    {"attention att v (band)", 0, 0, 64, 64, 256, PT_BF16, 0, 0},
};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };

typedef void (*product)(int, int, int, int, int, float, pt_mat, pt_mat, float, pt_mat,
                        const float *);

/* the fp32 seam's product: float operands, float C */
static void sgemm(int ta, int tb, int M, int N, int K, float alpha, pt_mat A, pt_mat B, float beta,
                  pt_mat C, const float *bias)
{
    pt_kernels_cpu()->matmul(ta, tb, M, N, K, alpha, A, B, beta, C, bias);
}

typedef struct {
    const char *name;
    product run;
    int usable;
    int fp32; /* float operands and C */
} kernel;

/* GFLOP/s of one kernel at one shape: the median of reps calls */
static double rate(const kernel *k, const shape *s, int reps)
{
    size_t na = (size_t)s->M * s->K, nb = (size_t)s->K * s->N, nc = (size_t)s->M * s->N;
    float *fa = pt_alloc_floats(na), *fb = pt_alloc_floats(nb), *bias = pt_alloc_floats(s->N);
    float *c = pt_alloc_floats(nc);
    pt_bf16 *a = malloc(sizeof(pt_bf16) * na), *b = malloc(sizeof(pt_bf16) * nb);
    pt_rng r;
    pt_rng_seed(&r, 5);
    pt_rng_fill_normal(&r, fa, na, 1.0f);
    pt_rng_fill_normal(&r, fb, nb, 1.0f);
    pt_rng_fill_normal(&r, bias, s->N, 1.0f);
    pt_bf16_from_floats(a, fa, na);
    pt_bf16_from_floats(b, fb, nb);
    memset(c, 0, sizeof(float) * nc);
    pt_elem_type in = k->fp32 ? PT_F32 : PT_BF16, out = k->fp32 ? PT_F32 : s->c;
    pt_mat A = pt_mat_of(k->fp32 ? (void *)fa : a, s->ta ? s->M : s->K, in);
    pt_mat B = pt_mat_of(k->fp32 ? (void *)fb : b, s->tb ? s->K : s->N, in);
    pt_mat C = pt_mat_of(c, s->N, out);
    double t[64];
    for (int i = 0; i <= reps; i++) {
        double t0 = bench_now();
        k->run(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, B, s->beta, C, s->bias ? bias : NULL);
        if (i > 0)
            t[i - 1] = 2.0 * s->M * s->N * s->K / (bench_now() - t0) / 1e9;
    }
    pt_free(fa), pt_free(fb), pt_free(bias), pt_free(c), free(a), free(b);
    return bench_median(t, reps);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    reps = reps < 1 ? 1 : reps > 63 ? 63 : reps;
    pt_blas_set_threads(1);
    kernel ks[] = {
        {"sgemm", sgemm, 1, 1},
        {"portable", pt_matmul_bf16_portable, 1, 0},
        {"amx", pt_matmul_bf16_amx, pt_amx_usable(), 0},
        {"avx512bf16", pt_matmul_bf16_avx512, pt_avx512bf16_usable(), 0},
    };
    enum { N_K = sizeof ks / sizeof ks[0] };
    /* the float peak on the widest vectors the CPU has (an AVX2-only CPU's
     * ymm, not 0 for want of zmm) */
    double fma0 = bench_fma_peak(), dp0 = bench_dpbf16_gflops(), amx0 = bench_amx_gflops();
    double rates[N_SHAPES][N_K];
    for (int i = 0; i < N_SHAPES; i++)
        for (int k = 0; k < N_K; k++)
            rates[i][k] = ks[k].usable ? rate(&ks[k], &shapes[i], reps) : 0;
    double fma1 = bench_fma_peak(), dp1 = bench_dpbf16_gflops(), amx1 = bench_amx_gflops();

    printf("one core, GFLOP/s (median of %d calls); M x N x K, op(A) (M,K) op(B) (K,N)\n", reps);
    printf("peaks: float FMA (%d-bit) %.0f before, %.0f after; VDPBF16PS %.0f before, %.0f "
           "after%s; TDPBF16PS %.0f before, %.0f after%s\n\n",
           bench_fma_bits(), fma0, fma1, dp0, dp1, dp0 > 0 ? "" : " (no AVX512_BF16: not measured)",
           amx0, amx1, amx0 > 0 ? "" : " (no AMX: not measured)");
    printf("%-24s %-21s", "product", "M x N x K");
    for (int k = 0; k < N_K; k++)
        printf(" %10s", ks[k].name);
    printf(" %11s %11s %11s\n", "best/sgemm", "avx512/VDP", "amx/TDP");
    double fma = (fma0 + fma1) / 2, dp = (dp0 + dp1) / 2, amx = (amx0 + amx1) / 2, sgemm_best = 0;
    for (int i = 0; i < N_SHAPES; i++) {
        if (rates[i][0] > sgemm_best)
            sgemm_best = rates[i][0];
        const shape *s = &shapes[i];
        char dims[40];
        snprintf(dims, sizeof dims, "%d x %d x %d%s", s->M, s->N, s->K,
                 s->ta   ? " At"
                 : s->tb ? " Bt"
                         : "");
        printf("%-24s %-21s", s->what, dims);
        double best = 0;
        for (int k = 0; k < N_K; k++) {
            if (ks[k].usable)
                printf(" %10.0f", rates[i][k]);
            else
                printf(" %10s", "-");
            if (k > 0 && rates[i][k] > best)
                best = rates[i][k];
        }
        printf(" %10.2fx", best / rates[i][0]);
        if (dp > 0 && ks[3].usable)
            printf(" %10.0f%%", 100 * rates[i][3] / dp);
        else
            printf(" %11s", "-");
        if (amx > 0 && ks[2].usable)
            printf(" %10.0f%%", 100 * rates[i][2] / amx);
        printf("\n");
    }
    printf("\nsgemm at its best is %.0f%% of the FMA peak", fma > 0 ? 100 * sgemm_best / fma : 0);
    if (dp > 0)
        printf("; VDPBF16PS's peak is %.2fx the FMA peak on this CPU\n", fma > 0 ? dp / fma : 0);
    else
        printf("; this CPU has no VDPBF16PS (AVX512_BF16)\n");
    return 0;
}
