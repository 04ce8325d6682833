/* bench_products: which fp32 product kernel is fastest on this machine, at
 * the shapes pipetrain's GPT models multiply.
 *
 * Prints the CPU (model, the vector features the kernels need), OpenBLAS's
 * core (openblas_get_corename(): what OPENBLAS_CORETYPE would change), the
 * kernel pipetrain's auto choice takes, and the FMA peak of the widest
 * vectors the CPU has on one core and on two, measured before and after in
 * this run. Then, for each product of GPT 4 layers / 384 / 6 heads and
 * 12 / 768 / 12 at context 256 and micro-batches of 2 sequences (512 rows;
 * forward, dX = dY W^T, dW = X^T dY, one head's attention in place in its
 * (T, 3C) rows), every kernel of the seam this CPU runs on one thread, and
 * beside them BLIS, oneDNN and libxsmm where their packages are installed
 * (bench_peers.h): GFLOP/s in the thread's CPU time (the machine may be
 * shared), median of repeats, and its share of the one-core peak; a result
 * that differs from the first kernel's is printed as wrong. Last, the MLP
 * product on two threads in wall time: pipetrain's pool against the
 * libraries' own threading.
 * Usage: bench_products [reps] (default 5). */
#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_peak.h"
#include "bench_peers.h"

typedef struct {
    const char *what;
    int ta, tb, M, N, K, lda, ldb; /* ld 0: the operand's own width */
} shape;

#define GPT_SHAPES(C, T, R)                                                                       \
    {"qkv  x W", 0, 0, R, 3 * C, C, 0, 0}, {"fc   x W", 0, 0, R, 4 * C, C, 0, 0},                 \
        {"proj x W (fc)", 0, 0, R, C, 4 * C, 0, 0}, {"proj x W (attn)", 0, 0, R, C, C, 0, 0},     \
        {"lm   x E^T", 0, 1, R, 256, C, 0, 0}, {"dX qkv dY W^T", 0, 1, R, C, 3 * C, 0, 0},        \
        {"dX fc dY W^T", 0, 1, R, C, 4 * C, 0, 0}, {"dX proj dY W^T", 0, 1, R, 4 * C, C, 0, 0},   \
        {"dW qkv X^T dY", 1, 0, C, 3 * C, R, 0, 0}, {"dW fc X^T dY", 1, 0, C, 4 * C, R, 0, 0},    \
        {"dW proj X^T dY", 1, 0, 4 * C, C, R, 0, 0}, {"att q k^T", 0, 1, T, T, 64, 3 * C, 3 * C}, \
        {"att p v", 0, 0, T, 64, T, T, 3 * C},                                                    \
    {                                                                                             \
        "att dV p^T dy", 1, 0, T, 64, T, T, C                                                     \
    }

static const shape small[] = {GPT_SHAPES(384, 256, 512)};
static const shape large[] = {GPT_SHAPES(768, 256, 512)};

/* the generic kernel is left out: plain C, a fallback, far behind */
static const char *kernel_names[] = {"avx512", "avx2", "openblas"};
enum { N_SEAM = 3, N_KERNELS = N_SEAM + 3 };

/* the other libraries this machine has (bench_peers.h), after the seam's
 * kernels in every table */
static bench_peer peers[3];
static int n_peers;

static const char *column_name(int k)
{
    return k < N_SEAM ? kernel_names[k] : peers[k - N_SEAM].name;
}

static void set_threads(int n)
{
    pt_blas_set_threads(n);
    for (int i = 0; i < n_peers; i++)
        peers[i].set_threads(n);
}

/* one product on column k's kernel; -1 where it does not take it */
static int product(int k, const shape *s, int lda, int ldb, const float *a, const float *b,
                   float beta, float *c)
{
    if (k >= N_SEAM)
        return peers[k - N_SEAM].sgemm(s->ta, s->tb, s->M, s->N, s->K, a, lda, b, ldb, beta, c,
                                       s->N);
    pt_kernels_cpu()->matmul(s->ta, s->tb, s->M, s->N, s->K, 1.0f, pt_mat_of(a, lda, PT_F32),
                             pt_mat_of(b, ldb, PT_F32), beta, pt_mat_of(c, s->N, PT_F32), NULL);
    return 0;
}

/* the largest difference from ref, as a fraction of ref's largest value */
static double difference(const float *c, const float *ref, size_t n)
{
    double most = 0, top = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)c[i] - ref[i]);
        most = d > most ? d : most;
        top = fabs(ref[i]) > top ? fabs(ref[i]) : top;
    }
    return top > 0 ? most / top : most;
}

/* what a column's rate holds where it has none */
enum { NOT_TAKEN = -1, WRONG = -2 };

/* GFLOP/s of each kernel in have[] on s, median of reps rounds; one
 * thread's in its CPU time, several threads' in wall time. On one thread
 * the rounds take the kernels in turn (a shared machine's load then falls
 * on all alike). On several, each kernel runs its rounds alone after a
 * pause: OpenBLAS's threads spin for a while after a call, and taken in
 * turn they would take the cores from the next kernel's threads. */
static void rates(const shape *s, const int *have, int reps, float *a, float *b, float *c,
                  double *out)
{
    int lda = s->lda ? s->lda : s->ta ? s->M : s->K, ldb = s->ldb ? s->ldb : s->tb ? s->K : s->N;
    double flops = 2.0 * s->M * s->N * s->K, t[N_KERNELS][32];
    int inner = (int)(1e8 / flops) + 1; /* about 0.1 GFLOP a timing */
    bool apart = pt_blas_threads() > 1;
    size_t nc = (size_t)s->M * s->N;
    float *ref = malloc(sizeof(float) * nc);
    int first = -1;
    for (int k = 0; k < N_KERNELS; k++)
        out[k] = have[k] ? 0 : NOT_TAKEN;
    for (int i = 0; ref && i < (reps + 1) * N_KERNELS; i++) {
        int r = apart ? i % (reps + 1) : i / N_KERNELS, k = apart ? i / (reps + 1) : i % N_KERNELS;
        if (!have[k] || out[k] < 0)
            continue;
        if (apart && r == 0)
            bench_pause(0.5);
        if (k < N_SEAM)
            pt_fp32_set_kernel(kernel_names[k]);
        double (*clock)(void) = pt_blas_threads() == 1 ? bench_thread_seconds : bench_now;
        double t0 = clock();
        for (int j = 0; j < inner && out[k] == 0; j++)
            if (product(k, s, lda, ldb, a, b, r ? 1.0f : 0.0f, c))
                out[k] = NOT_TAKEN;
        if (out[k] < 0)
            continue;
        if (r) { /* round 0 warms up, and checks the product against the first kernel's */
            t[k][r - 1] = inner * flops / (clock() - t0) / 1e9;
        } else if (first < 0) {
            first = k;
            memcpy(ref, c, sizeof(float) * nc);
        } else if (difference(c, ref, nc) > 1e-4) {
            out[k] = WRONG;
        }
    }
    for (int k = 0; k < N_KERNELS; k++)
        if (out[k] == 0)
            out[k] = bench_median(t[k], reps);
    free(ref);
}

static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(out, n, "%s", strchr(line, ':') + 2);
            out[strcspn(out, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
}

static void table(const char *title, const shape *s, int n, const int *have, int reps, double peak1,
                  float *a, float *b, float *c)
{
    printf("\n%s\n%-18s %-16s", title, "product", "M x N x K");
    for (int k = 0; k < N_KERNELS; k++)
        if (have[k])
            printf(" %15s", column_name(k));
    printf("   best\n");
    for (int i = 0; i < n; i++) {
        char dims[32];
        snprintf(dims, sizeof dims, "%dx%dx%d", s[i].M, s[i].N, s[i].K);
        printf("%-18s %-16s", s[i].what, dims);
        double g[N_KERNELS], best = 0;
        int bk = 0;
        rates(&s[i], have, reps, a, b, c, g);
        for (int k = 0; k < N_KERNELS; k++) {
            if (!have[k])
                continue;
            if (g[k] > best)
                best = g[k], bk = k;
            if (g[k] < 0)
                printf(" %15s", g[k] == WRONG ? "wrong" : "-");
            else
                printf(" %7.1f (%3.0f%%)", g[k], 100 * g[k] / peak1);
        }
        printf("   %s\n", column_name(bk));
    }
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    reps = reps < 1 ? 1 : reps > 32 ? 32 : reps;
    char model[256];
    cpu_model(model, sizeof model);
    printf("cpu: %s; avx2 %d, fma %d, avx512f %d, avx512_bf16 %d, amx_bf16 %d\n", model,
           !!__builtin_cpu_supports("avx2"), !!__builtin_cpu_supports("fma"),
           !!__builtin_cpu_supports("avx512f"), !!__builtin_cpu_supports("avx512bf16"),
           pt_kernels_bf16_amx() != NULL);
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("openblas core: %s (OPENBLAS_CORETYPE %s); pipetrain's fp32 kernel (auto): %s\n",
           openblas_get_corename(), ct ? ct : "unset", pt_fp32_kernel());
    pt_blas_set_threads(1);
    double p1 = bench_fma_peak(), p2 = bench_fma_peak_cores(2);

    int have[N_KERNELS] = {0};
    for (int k = 0; k < N_SEAM; k++)
        have[k] = pt_fp32_set_kernel(kernel_names[k]) == PT_OK;
    n_peers = bench_peers_load(peers);
    for (int i = 0; i < n_peers; i++)
        have[N_SEAM + i] = 1;
    printf("other libraries: ");
    for (int i = 0; i < n_peers; i++)
        printf("%s%s", i ? ", " : "", peers[i].name);
    printf("%s (a - where one does not take the product, wrong where its result differs from the "
           "first column's)\n",
           n_peers ? "" : "none installed (apt-get install libblis-dev libdnnl-dev libxsmm-dev)");
    set_threads(1);
    size_t big = (size_t)4 * 768 * 3072 + 4096;
    float *a = pt_alloc_floats(big), *b = pt_alloc_floats(big), *c = pt_alloc_floats(big);
    pt_rng r;
    pt_rng_seed(&r, 3);
    pt_rng_fill_normal(&r, a, big, 1.0f);
    pt_rng_fill_normal(&r, b, big, 1.0f);
    pt_rng_fill_normal(&r, c, big, 1.0f);

    printf("GFLOP/s on one thread, in its CPU time (%% of the one-core %d-bit FMA peak), median "
           "of %d:\n",
           bench_fma_bits(), reps);
    table("gpt 4 layers, 384 channels, 6 heads, context 256, 512 rows", small,
          sizeof small / sizeof small[0], have, reps, p1, a, b, c);
    table("gpt 12 layers, 768 channels, 12 heads, context 256, 512 rows", large,
          sizeof large / sizeof large[0], have, reps, p1, a, b, c);

    printf("\ntwo threads, %s (%% of the two-core peak):\n", small[1].what);
    set_threads(2);
    double g2[N_KERNELS], g1[N_KERNELS];
    rates(&small[1], have, reps, a, b, c, g2);
    set_threads(1);
    rates(&small[1], have, reps, a, b, c, g1);
    for (int k = 0; k < N_KERNELS; k++)
        if (have[k] && g2[k] > 0 && g1[k] > 0)
            printf("%-10s %7.1f GFLOP/s (%3.0f%%), %.2fx its one thread\n", column_name(k), g2[k],
                   100 * g2[k] / p2, g2[k] / g1[k]);
    pt_fp32_set_kernel("auto");
    double p1b = bench_fma_peak(), p2b = bench_fma_peak_cores(2);
    printf("\n%d-bit FMA peak: one core %.1f GFLOP/s before, %.1f after; two cores %.1f before, "
           "%.1f after\n",
           bench_fma_bits(), p1, p1b, p2, p2b);
    pt_free(a), pt_free(b), pt_free(c);
    return 0;
}
