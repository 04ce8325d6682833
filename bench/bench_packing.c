/* bench_packing: what the fp32 product's handling of op(A), and its blocks
 * of op(B), are worth, as a pipeline stage multiplies: the weights' panels
 * kept (pt_gemm_packed), the activations coming from memory (16 operands
 * in turn, 12-48 MiB of op(A) in all).
 *
 * For the weight products of GPT 4 layers / 384 and 12 layers / 768 at
 * context 256 (forward x W and input gradient dY W^T; 512 or 256 rows),
 * the CPU's widest micro-kernel three ways, rounds taken in turn so that
 * the machine's load falls on all alike:
 *   portable   op(A) packed by gemm.c's portable interleave
 *   interleave op(A) packed by the kernel's vector interleave
 *   in place   op(A) read where it is (tile_rows), the last rows packed
 *   one block  the same, with op(B)'s columns in blocks of up to 4096 (as
 *              for an L2 of 1 GiB: every weight here in one block of K)
 *              instead of the blocks that fill half of this CPU's L2
 * (the kernel as pt_gemm_avx2() or pt_gemm_avx512() gives it is the third
 * column; where it lacks a piece, that column repeats the one before).
 * Prints the L2 size the CPU reports, GFLOP/s in wall time, median of the
 * rounds, and the geometric means' ratios to the portable packing and of
 * the L2 blocks to one block. The results are compared bit for bit: the
 * four store the same sums.
 * Usage: bench_packing [rounds] [threads] [rows] (default 9, 1, and 512
 * rows for 384 channels, 256 for 768: the benches' micro-batches). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "tensor/gemm.h"

#define OPERANDS 16
#define WAYS     4

typedef struct {
    const char *what;
    int trans_b, M, N, K;
} shape;

static const char *way_name[WAYS] = {"portable", "interleave", "in place", "one block"};

/* the L2 each way's blocks are sized for (0: the CPU's) */
static const long way_l2[WAYS] = {0, 0, 0, 1L << 30};

/* GFLOP/s of each way on s, median of rounds; -1 when a result differed.
 * The ways share one copy of the kept panels, which their one nr makes
 * the same: apart, three copies would crowd each other out of the cache. */
static void rates(const pt_gemm_kernel *way, const shape *s, int rounds, int threads,
                  float *const *a, const float *b, float *c, float *ref, double *out)
{
    size_t floats = pt_gemm_packed_floats(way, s->K, s->N);
    pt_gemm_packed kept = {.panels = pt_alloc_floats(floats), .capacity = floats};
    double flops = 2.0 * s->M * s->N * s->K, t[WAYS][32];
    int ldb = s->trans_b ? s->K : s->N, wrong[WAYS] = {0};
    size_t nc = (size_t)s->M * s->N;
    for (int r = 0; r <= rounds; r++)
        for (int w = 0; w < WAYS; w++) {
            kept.k = &way[w]; /* the panels way 0 filled, as this way's */
            pt_gemm_set_l2_bytes(way_l2[w]);
            double t0 = bench_now();
            for (int i = 0; i < OPERANDS; i++)
                pt_gemm(&way[w], threads, 0, s->trans_b, s->M, s->N, s->K, 1.0f, a[i], s->K, b, ldb,
                        0.0f, c, s->N, NULL, &kept);
            if (r)
                t[w][r - 1] = OPERANDS * flops / (bench_now() - t0) / 1e9;
            else if (w == 0) /* round 0 warms up and fills the panels */
                memcpy(ref, c, sizeof(float) * nc);
            else
                wrong[w] = memcmp(ref, c, sizeof(float) * nc) != 0;
        }
    pt_gemm_set_l2_bytes(0);
    for (int w = 0; w < WAYS; w++)
        out[w] = wrong[w] ? -1 : bench_median(t[w], rounds);
    pt_free(kept.panels);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 9, threads = argc > 2 ? atoi(argv[2]) : 1;
    rounds = rounds < 1 ? 1 : rounds > 32 ? 32 : rounds;
    threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
    int rows_asked = argc > 3 ? atoi(argv[3]) : 0; /* 0: each model's own */
    rows_asked = rows_asked < 0 ? 0 : rows_asked > 512 ? 512 : rows_asked;
    const pt_gemm_kernel *k = pt_gemm_avx512() ? pt_gemm_avx512() : pt_gemm_avx2();
    if (!k)
        return printf("bench_packing: this CPU has neither avx512 nor avx2: skipped\n"), 0;
    pt_gemm_kernel way[WAYS] = {*k, *k, *k, *k};
    way[0].tile_rows = NULL, way[0].interleave = NULL;
    way[1].tile_rows = NULL;
    printf("kernel %s (MR %d x NR %d), %d thread%s; op(B) kept, op(A) from %d operands in turn; "
           "L2 %ld KiB; GFLOP/s, median of %d rounds\n",
           k->name, k->mr, k->nr, threads, threads > 1 ? "s" : "", OPERANDS,
           sysconf(_SC_LEVEL2_CACHE_SIZE) / 1024, rounds);
    if (!k->interleave)
        printf("(%s has no vector interleave: that column repeats the portable one)\n", k->name);
    if (!k->tile_rows)
        printf("(%s reads no op(A) in place: that column repeats the interleave)\n", k->name);

    static const int channels[2] = {384, 768}, rows[2] = {512, 256};
    size_t most = (size_t)512 * 4 * 768;
    float *a[OPERANDS], *b = pt_alloc_floats((size_t)16 * 768 * 768);
    float *c = pt_alloc_floats(most), *ref = pt_alloc_floats(most);
    pt_rng r;
    pt_rng_seed(&r, 5);
    for (int i = 0; i < OPERANDS; i++) {
        a[i] = pt_alloc_floats(most);
        pt_rng_fill_normal(&r, a[i], most, 1.0f);
    }
    pt_rng_fill_normal(&r, b, (size_t)16 * 768 * 768, 0.02f);
    double logs[WAYS] = {0};
    int n = 0;
    printf("\n%-22s %-16s %10s %10s %10s %10s\n", "product", "M x N x K", way_name[0], way_name[1],
           way_name[2], way_name[3]);
    for (int m = 0; m < 2; m++) {
        int C = channels[m], R = rows_asked ? rows_asked : rows[m];
        shape s[] = {{"qkv x W", 0, R, 3 * C, C},       {"fc x W", 0, R, 4 * C, C},
                     {"proj x W (fc)", 0, R, C, 4 * C}, {"proj x W (attn)", 0, R, C, C},
                     {"dX qkv dY W^T", 1, R, C, 3 * C}, {"dX fc dY W^T", 1, R, C, 4 * C},
                     {"dX proj dY W^T", 1, R, 4 * C, C}};
        printf("gpt, %d channels, %d rows\n", C, R);
        for (size_t i = 0; i < sizeof s / sizeof s[0]; i++, n++) {
            double g[WAYS];
            rates(way, &s[i], rounds, threads, a, b, c, ref, g);
            char dims[32];
            snprintf(dims, sizeof dims, "%dx%dx%d", s[i].M, s[i].N, s[i].K);
            printf("%-22s %-16s", s[i].what, dims);
            for (int w = 0; w < WAYS; w++) {
                if (g[w] < 0) {
                    printf(" %10s", "WRONG");
                    return 1;
                }
                printf(" %10.1f", g[w]);
                logs[w] += log(g[w]);
            }
            printf("\n");
        }
    }
    printf("\ngeometric mean against the portable packing: interleave %.3fx, in place %.3fx\n",
           exp((logs[1] - logs[0]) / n), exp((logs[2] - logs[0]) / n));
    printf("blocks of op(B) in half of L2 against one block of up to 4096 columns: %.3fx\n",
           exp((logs[2] - logs[3]) / n));
    for (int i = 0; i < OPERANDS; i++)
        pt_free(a[i]);
    pt_free(b), pt_free(c), pt_free(ref);
    return 0;
}
