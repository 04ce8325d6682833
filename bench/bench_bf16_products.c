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
 *   onednn       oneDNN's bf16 matmul primitive, the kernel PyTorch's
 *                autocast runs (where the bench was built with oneDNN:
 *                bench_onednn_bf16.h); a peer, not one of pipetrain's;
 * each the median of `reps` timed calls after a warm-up, one BLAS thread
 * (and one OpenMP thread for oneDNN). oneDNN's C is checked against the
 * portable product's first: a shape it gets wrong is marked "wrong", one it
 * does not take "n/a", neither timed.
 * Around them, one core's float FMA, VDPBF16PS and AMX TDPBF16PS peaks
 * (bench_peak.h), before and after, so each rate is read against the peaks of the same run.
 * Usage: bench_bf16_products [reps] (default 9). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_onednn_bf16.h"
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

/* One shape's operands, as a kernel reads them */
typedef struct {
    float *fa, *fb, *bias, *c;
    pt_bf16 *a, *b;
    size_t nc;
} operands;

static operands operands_of(const shape *s)
{
    size_t na = (size_t)s->M * s->K, nb = (size_t)s->K * s->N, nc = (size_t)s->M * s->N;
    operands o = {pt_alloc_floats(na),
                  pt_alloc_floats(nb),
                  pt_alloc_floats(s->N),
                  pt_alloc_floats(nc),
                  malloc(sizeof(pt_bf16) * na),
                  malloc(sizeof(pt_bf16) * nb),
                  nc};
    pt_rng r;
    pt_rng_seed(&r, 5);
    pt_rng_fill_normal(&r, o.fa, na, 1.0f);
    pt_rng_fill_normal(&r, o.fb, nb, 1.0f);
    pt_rng_fill_normal(&r, o.bias, s->N, 1.0f);
    pt_bf16_from_floats(o.a, o.fa, na);
    pt_bf16_from_floats(o.b, o.fb, nb);
    memset(o.c, 0, sizeof(float) * nc);
    return o;
}

static void operands_free(operands *o)
{
    pt_free(o->fa), pt_free(o->fb), pt_free(o->bias), pt_free(o->c), free(o->a), free(o->b);
}

/* C = op(A) op(B) (+ beta C + bias) by kernel k, on C as it is */
static void run_once(const kernel *k, const shape *s, operands *o)
{
    pt_elem_type in = k->fp32 ? PT_F32 : PT_BF16, out = k->fp32 ? PT_F32 : s->c;
    pt_mat A = pt_mat_of(k->fp32 ? (void *)o->fa : o->a, s->ta ? s->M : s->K, in);
    pt_mat B = pt_mat_of(k->fp32 ? (void *)o->fb : o->b, s->tb ? s->K : s->N, in);
    pt_mat C = pt_mat_of(o->c, s->N, out);
    k->run(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, B, s->beta, C, s->bias ? o->bias : NULL);
}

/* GFLOP/s of one kernel at one shape: the median of reps calls */
static double rate(const kernel *k, const shape *s, int reps)
{
    operands o = operands_of(s);
    double t[64];
    for (int i = 0; i <= reps; i++) {
        double t0 = bench_now();
        run_once(k, s, &o);
        if (i > 0)
            t[i - 1] = 2.0 * s->M * s->N * s->K / (bench_now() - t0) / 1e9;
    }
    operands_free(&o);
    return bench_median(t, reps);
}

/* C's element i widened to float */
static double c_at(const float *c, pt_elem_type t, size_t i)
{
    return t == PT_BF16 ? pt_bf16_widen(((const pt_bf16 *)c)[i]) : c[i];
}

/* Whether kernel k's C agrees with ref's at this shape: the largest
 * difference within 1% of C's largest element (the two sum in different
 * orders; C may be bf16) */
static int agrees(const kernel *k, const kernel *ref, const shape *s)
{
    operands x = operands_of(s), y = operands_of(s);
    run_once(k, s, &x);
    run_once(ref, s, &y);
    double diff = 0, most = 0;
    for (size_t i = 0; i < x.nc; i++) {
        double a = c_at(x.c, s->c, i), b = c_at(y.c, s->c, i);
        double d = a == a ? fabs(a - b) : INFINITY; /* a NaN disagrees */
        diff = d > diff ? d : diff;
        most = fabs(b) > most ? fabs(b) : most;
    }
    operands_free(&x), operands_free(&y);
    return diff <= 0.01 * most;
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
        {"onednn", bench_onednn_product, bench_onednn_usable(), 0},
    };
    enum { PEER = 4 }; /* ks[PEER] is not pipetrain's */
    enum { N_K = sizeof ks / sizeof ks[0] };
    /* the float peak on the widest vectors the CPU has (an AVX2-only CPU's
     * ymm, not 0 for want of zmm) */
    double fma0 = bench_fma_peak(), dp0 = bench_dpbf16_gflops(), amx0 = bench_amx_gflops();
    double rates[N_SHAPES][N_K];
    const char *impl[N_SHAPES] = {0};
    for (int i = 0; i < N_SHAPES; i++)
        for (int k = 0; k < N_K; k++) {
            /* the peer checked first: -1 where its C is wrong, -2 where
             * it takes no such product */
            int wrong = k == PEER && ks[k].usable && !agrees(&ks[k], &ks[1], &shapes[i]);
            int taken = k != PEER || *bench_onednn_impl();
            rates[i][k] = !ks[k].usable ? 0
                          : !taken      ? -2
                          : wrong       ? -1
                                        : rate(&ks[k], &shapes[i], reps);
            if (k == PEER)
                impl[i] = bench_onednn_impl();
        }
    double fma1 = bench_fma_peak(), dp1 = bench_dpbf16_gflops(), amx1 = bench_amx_gflops();

    printf("one core, GFLOP/s (median of %d calls); M x N x K, op(A) (M,K) op(B) (K,N)\n", reps);
    printf("peaks: float FMA (%d-bit) %.0f before, %.0f after; VDPBF16PS %.0f before, %.0f "
           "after%s; TDPBF16PS %.0f before, %.0f after%s\n\n",
           bench_fma_bits(), fma0, fma1, dp0, dp1, dp0 > 0 ? "" : " (no AVX512_BF16: not measured)",
           amx0, amx1, amx0 > 0 ? "" : " (no AMX: not measured)");
    printf("%-24s %-21s", "product", "M x N x K");
    for (int k = 0; k < N_K; k++)
        printf(" %10s", ks[k].name);
    printf(" %11s %11s %11s %11s\n", "best/sgemm", "avx512/VDP", "amx/TDP", "amx/onednn");
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
            if (rates[i][k] < 0)
                printf(" %10s", rates[i][k] == -1 ? "wrong" : "n/a");
            else if (ks[k].usable)
                printf(" %10.0f", rates[i][k]);
            else
                printf(" %10s", "-");
            if (k > 0 && k != PEER && rates[i][k] > best)
                best = rates[i][k];
        }
        printf(" %10.2fx", best / rates[i][0]);
        if (dp > 0 && ks[3].usable)
            printf(" %10.0f%%", 100 * rates[i][3] / dp);
        else
            printf(" %11s", "-");
        if (amx > 0 && ks[2].usable)
            printf(" %10.0f%%", 100 * rates[i][2] / amx);
        else
            printf(" %11s", "-");
        if (ks[2].usable && rates[i][PEER] > 0)
            printf(" %10.2fx", rates[i][2] / rates[i][PEER]);
        printf("\n");
    }
    if (ks[PEER].usable) {
        printf("\noneDNN's implementation at each shape in turn:");
        for (int i = 0; i < N_SHAPES; i++)
            printf("%s%s", i ? ", " : " ", impl[i] && *impl[i] ? impl[i] : "?");
        printf("\n");
    } else {
        printf("\noneDNN: not built in (apt-get install libdnnl-dev, then cmake again)\n");
    }
    printf("\nsgemm at its best is %.0f%% of the FMA peak", fma > 0 ? 100 * sgemm_best / fma : 0);
    if (dp > 0)
        printf("; VDPBF16PS's peak is %.2fx the FMA peak on this CPU\n", fma > 0 ? dp / fma : 0);
    else
        printf("; this CPU has no VDPBF16PS (AVX512_BF16)\n");
    return 0;
}
