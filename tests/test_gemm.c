/* test_gemm: every fp32 product kernel this CPU runs (pipetrain's avx512,
 * avx2 and generic micro-kernels, and each table of the seam) computes
 * C = alpha op(A) op(B) + beta C + bias as a plain triple loop does, and
 * stores the same bits however many threads share it.
 * - Against a sum in double, each element within what the order of float
 *   sums can move it (2 (K + 3) 2^-24 times the sum of magnitudes), over
 *   shapes off every tile size (1 x 1 x 1 up, K 0, K past one and two
 *   blocks of 384, N of 1100), all four transposes,
 *   leading dimensions wider than the rows, alpha and beta (0, 1 and
 *   others) and a bias or none. Elements beyond N in C's rows stay as they
 *   were.
 * - beta 0 ignores C: a NaN there does not reach the result.
 * - Threads 1, 2, 3 and 5 store C bit for bit alike (C is split, never K):
 *   what keeps a pipelined run equal to a sequential one; pipetrain's own
 *   kernels are shared there (a helper runs a part). OpenBLAS keeps
 *   the bits on some CPUs only (not its Zen driver), and
 *   pt_fp32_openblas_keeps_bits() says which.
 * - The blocks of op(B)'s columns sized for an L2 of 64 KiB, 1 MiB or
 *   1 GiB (pt_gemm_set_l2_bytes: 256 to 4096 columns) store the same bits,
 *   with the weight's panels kept and without, on one thread and two.
 * - The start-up check passes every kernel here, and fails one that drops
 *   a term of the sum.
 * - pt_fp32_set_kernel: each name this CPU runs is taken and named by
 *   pt_fp32_kernel(); one it lacks is PT_EUNSUPPORTED; an unknown name is
 *   PT_EINVAL; auto takes gemm-avx512, else gemm-avx2, else openblas,
 *   whatever OpenBLAS's core;
 *   and with OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU (this program run
 *   again with it set) auto runs gemm-avx512, not OpenBLAS's AVX2 kernel.
 * A micro-kernel this CPU lacks is skipped with a line saying so. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "pipetrain.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

#include "check.h"

typedef struct {
    int M, N, K;
} dims;

static const dims shapes[] = {{1, 1, 1},     {1, 1, 0},     {3, 5, 7},     {12, 32, 2},
                              {13, 33, 3},   {6, 16, 9},    {7, 17, 10},   {31, 17, 64},
                              {40, 70, 385}, {25, 47, 800}, {5, 1100, 20}, {130, 96, 129}};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };

static const float alphas[] = {1.0f, 0.5f, -1.25f}, betas[] = {0.0f, 1.0f, -0.75f};

typedef struct {
    float *a, *b, *c, *c0, *bias;
    int lda, ldb, ldc;
} operands;

static float at(const float *x, int ld, int trans, int r, int c)
{
    return trans ? x[(size_t)c * ld + r] : x[(size_t)r * ld + c];
}

static int make(operands *o, dims d, pt_rng *r)
{
    int big = (d.M > d.N ? d.M : d.N) + d.K;
    o->lda = big + 3, o->ldb = big + 1, o->ldc = d.N + 5;
    size_t na = (size_t)o->lda * big, nb = (size_t)o->ldb * big, nc = (size_t)o->ldc * d.M;
    o->a = malloc(sizeof(float) * na), o->b = malloc(sizeof(float) * nb);
    o->c = malloc(sizeof(float) * nc), o->c0 = malloc(sizeof(float) * nc);
    o->bias = malloc(sizeof(float) * (size_t)d.N);
    if (!o->a || !o->b || !o->c || !o->c0 || !o->bias)
        return 1;
    pt_rng_fill_normal(r, o->a, na, 1.0f);
    pt_rng_fill_normal(r, o->b, nb, 1.0f);
    pt_rng_fill_normal(r, o->c0, nc, 1.0f);
    pt_rng_fill_normal(r, o->bias, (size_t)d.N, 1.0f);
    return 0;
}

static void drop(operands *o) { free(o->a), free(o->b), free(o->c), free(o->c0), free(o->bias); }

typedef void product_fn(void *ctx, int ta, int tb, dims d, float alpha, const operands *o,
                        float beta, const float *bias, int threads);

/* C after the product, checked element by element against double sums */
static int check_against_loop(const char *what, product_fn *run, void *ctx, dims d, int ta, int tb,
                              float alpha, float beta, int with_bias, operands *o)
{
    memcpy(o->c, o->c0, sizeof(float) * (size_t)o->ldc * d.M);
    run(ctx, ta, tb, d, alpha, o, beta, with_bias ? o->bias : NULL, 1);
    int bad = 0;
    for (int i = 0; i < d.M; i++) {
        for (int j = 0; j < d.N; j++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < d.K; k++) {
                double p = (double)at(o->a, o->lda, ta, i, k) * at(o->b, o->ldb, tb, k, j);
                sum += p, mag += fabs(p);
            }
            double old = o->c0[(size_t)i * o->ldc + j], bj = with_bias ? o->bias[j] : 0;
            double want = alpha * sum + (beta != 0.0f ? beta * old : 0) + bj;
            double tol =
                2.0 * (d.K + 3) * 0x1p-24 * (fabs(alpha) * mag + fabs(beta * old) + fabs(bj)) +
                1e-30;
            float got = o->c[(size_t)i * o->ldc + j];
            if (!(fabs(got - want) <= tol) && !bad++)
                CHECK(0,
                      "%s %dx%dx%d ta %d tb %d alpha %g beta %g bias %d: C[%d][%d] = %.9g, "
                      "want %.9g (tol %.3g)",
                      what, d.M, d.N, d.K, ta, tb, alpha, beta, with_bias, i, j, got, want, tol);
        }
        for (int j = d.N; j < o->ldc; j++)
            if (memcmp(&o->c[(size_t)i * o->ldc + j], &o->c0[(size_t)i * o->ldc + j],
                       sizeof(float)) &&
                !bad++)
                CHECK(0, "%s %dx%dx%d: C[%d][%d] past N was written", what, d.M, d.N, d.K, i, j);
    }
    return bad;
}

/* ---- the two ways in: a micro-kernel through pt_gemm, a seam table ---- */

static void run_gemm(void *ctx, int ta, int tb, dims d, float alpha, const operands *o, float beta,
                     const float *bias, int threads)
{
    int rc = pt_gemm(ctx, threads, ta, tb, d.M, d.N, d.K, alpha, o->a, o->lda, o->b, o->ldb, beta,
                     o->c, o->ldc, bias, NULL);
    CHECK(rc == 0, "pt_gemm could not allocate its packing buffers");
}

static void run_table(void *ctx, int ta, int tb, dims d, float alpha, const operands *o, float beta,
                      const float *bias, int threads)
{
    const pt_kernels *t = ctx;
    pt_blas_set_threads(threads);
    t->matmul(ta, tb, d.M, d.N, d.K, alpha, pt_mat_of(o->a, o->lda, PT_F32),
              pt_mat_of(o->b, o->ldb, PT_F32), beta, pt_mat_of(o->c, o->ldc, PT_F32), bias);
}

static void check_products(const char *what, product_fn *run, void *ctx, pt_rng *r)
{
    for (int s = 0; s < N_SHAPES; s++) {
        operands o;
        if (make(&o, shapes[s], r)) {
            CHECK(0, "cannot allocate the operands");
            drop(&o);
            return;
        }
        int v = 0;
        for (int tr = 0; tr < 4; tr++)
            for (int ai = 0; ai < 3; ai++)
                for (int bi = 0; bi < 3; bi++, v++)
                    check_against_loop(what, run, ctx, shapes[s], tr & 1, tr >> 1, alphas[ai],
                                       betas[bi], v % 2, &o);
        drop(&o);
    }
}

/* beta 0 with NaN in C, and the same bits from every thread count (or,
 * with only_say, 0 where the bits differ, without a failure); `pooled`:
 * shared by pipetrain's own threads, so a helper runs a part of it */
static int check_nan_and_threads_at(const char *what, product_fn *run, void *ctx, pt_rng *r,
                                    int only_say, int pooled, dims d)
{
    operands o;
    if (make(&o, d, r)) {
        CHECK(0, "cannot allocate the operands");
        drop(&o);
        return 0;
    }
    size_t nc = (size_t)o.ldc * d.M;
    float *first = malloc(sizeof(float) * nc);
    int same = first != NULL;
    static const int threads[] = {1, 2, 3, 5};
    for (int tr = 0; first && tr < 4; tr++)
        for (int t = 0; t < 4; t++) {
            for (size_t i = 0; i < nc; i++)
                o.c[i] = NAN;
            long helped = pt_gemm_parts_helped();
            run(ctx, tr & 1, tr >> 1, d, 0.5f, &o, 0.0f, o.bias, threads[t]);
            helped = pt_gemm_parts_helped() - helped;
            CHECK(!pooled || threads[t] == 1 || helped > 0,
                  "%s: %d threads, no part ran on a helper (ta %d tb %d)", what, threads[t], tr & 1,
                  tr >> 1);
            int nan = 0;
            for (int i = 0; i < d.M; i++)
                for (int j = 0; j < d.N; j++)
                    nan += isnan(o.c[(size_t)i * o.ldc + j]);
            CHECK(!nan, "%s: beta 0 let %d NaNs of C through (ta %d tb %d, %d threads)", what, nan,
                  tr & 1, tr >> 1, threads[t]);
            if (t == 0)
                memcpy(first, o.c, sizeof(float) * nc);
            else if (memcmp(first, o.c, sizeof(float) * nc)) {
                same = 0;
                CHECK(only_say, "%s: %d threads store other bits than one (ta %d tb %d)", what,
                      threads[t], tr & 1, tr >> 1);
            }
        }
    free(first);
    drop(&o);
    pt_blas_set_threads(1);
    return same;
}

/* the same on a product of two blocks of K, and on one of several blocks
 * of M, N and K each (every thread's rows against every block) */
static int check_nan_and_threads(const char *what, product_fn *run, void *ctx, pt_rng *r,
                                 int only_say, int pooled)
{
    int same = check_nan_and_threads_at(what, run, ctx, r, only_say, pooled, (dims){149, 203, 401});
    return check_nan_and_threads_at(what, run, ctx, r, only_say, pooled, (dims){211, 1061, 397}) &&
           same;
}

/* a product that leaves out the last term of every sum: the check must
 * fail it */
static void dropping_matmul(int ta, int tb, int M, int N, int K, float alpha, pt_mat A, pt_mat B,
                            float beta, pt_mat C, const float *bias)
{
    pt_kernels_cpu()->matmul(ta, tb, M, N, K > 1 ? K - 1 : K, alpha, A, B, beta, C, bias);
}

static void check_selection(void)
{
    static const struct {
        const char *name, *products;
        const pt_gemm_kernel *(*gemm)(void);
    } names[] = {{"avx512", "gemm-avx512", pt_gemm_avx512},
                 {"avx2", "gemm-avx2", pt_gemm_avx2},
                 {"generic", "gemm-generic", pt_gemm_generic},
                 {"openblas", "openblas", NULL}};
    const char *want_auto = pt_gemm_avx512() ? "gemm-avx512"
                            : pt_gemm_avx2() ? "gemm-avx2"
                                             : "openblas";
    CHECK(!strcmp(pt_fp32_kernel(), want_auto), "auto runs %s, want %s", pt_fp32_kernel(),
          want_auto);
    for (int i = 0; i < 4; i++) {
        int here = !names[i].gemm || names[i].gemm();
        int rc = pt_fp32_set_kernel(names[i].name);
        if (here) {
            CHECK(rc == PT_OK, "fp32 kernel %s refused: %s", names[i].name, pt_last_error());
            CHECK(!strcmp(pt_fp32_kernel(), names[i].products), "%s set, %s runs", names[i].name,
                  pt_fp32_kernel());
            CHECK(!strcmp(pt_kernels_for(PT_PRECISION_FP32)->products, names[i].products),
                  "the fp32 table does not run %s", names[i].name);
            CHECK(pt_fp32_kernel_error(pt_kernels_cpu(), 29, 45, 785) <= 1.0,
                  "%s fails the start-up check", names[i].name);
        } else {
            CHECK(rc == PT_EUNSUPPORTED && strstr(pt_last_error(), names[i].name),
                  "%s where the CPU lacks it: rc %d, '%s'", names[i].name, rc, pt_last_error());
        }
    }
    int rc = pt_fp32_set_kernel("cublas");
    CHECK(rc == PT_EINVAL && strstr(pt_last_error(), "cublas"), "unknown name: rc %d, '%s'", rc,
          pt_last_error());
    CHECK(pt_fp32_set_kernel("auto") == PT_OK && !strcmp(pt_fp32_kernel(), want_auto),
          "auto again runs %s", pt_fp32_kernel());
    pt_kernels wrong = *pt_kernels_cpu();
    wrong.matmul = dropping_matmul;
    CHECK(pt_fp32_kernel_error(&wrong, 29, 45, 785) > 1.0,
          "the start-up check passes a product that drops a term");
}

/* This program again with OPENBLAS_CORETYPE=Haswell: what auto runs there */
static void check_coretype_ignored(const char *self)
{
    if (!pt_gemm_avx512()) {
        printf("skipped: OPENBLAS_CORETYPE=Haswell is this CPU's own width (no AVX-512)\n");
        return;
    }
    char cmd[4200], got[64] = "";
    snprintf(cmd, sizeof cmd, "OPENBLAS_CORETYPE=Haswell '%s' --print-auto", self);
    FILE *f = popen(cmd, "r");
    CHECK(f && fgets(got, sizeof got, f), "cannot run %s", cmd);
    if (f)
        pclose(f);
    got[strcspn(got, "\n")] = 0;
    CHECK(!strcmp(got, "gemm-avx512"), "with OPENBLAS_CORETYPE=Haswell auto runs %s", got);
}

/* The AVX2 interleave against its definition, at the panel widths of both
 * x86 kernels (avx2 6 and 16, avx512 12 and 32) and depths around its
 * steps of eight: every float of the panel right, and nothing written
 * past it. */
static void check_interleave(void)
{
#if !(defined(__x86_64__) && defined(__GNUC__))
    printf("skipped: the AVX2 interleave (not an x86-64 build)\n");
#else
    if (!pt_gemm_avx2()) {
        printf("skipped: the AVX2 interleave (this CPU has no avx2)\n");
        return;
    }
    enum { KC = 41, GUARD = 16 };
    static const int widths[] = {6, 12, 16, 32}, depths[] = {1, 7, 8, 9, 16, 23, KC};
    static float streams[32][KC], out[32 * KC + GUARD];
    const float *src[32];
    for (int i = 0; i < 32; i++) {
        src[i] = streams[i];
        for (int p = 0; p < KC; p++)
            streams[i][p] = (float)(1000 * i + p + 1);
    }
    for (int w = 0; w < 4; w++)
        for (int d = 0; d < 7; d++) {
            int width = widths[w], kc = depths[d], bad = 0;
            for (int i = 0; i < width * kc + GUARD; i++)
                out[i] = -1.0f;
            pt_gemm_interleave_avx2(out, src, kc, width);
            for (int p = 0; p < kc; p++)
                for (int i = 0; i < width; i++)
                    bad += out[p * width + i] != streams[i][p];
            for (int i = width * kc; i < width * kc + GUARD; i++)
                bad += out[i] != -1.0f;
            CHECK(!bad, "interleave of width %d, depth %d: %d floats wrong or past the panel",
                  width, kc, bad);
        }
#endif
}

/* A kernel's tile on op(A) read in place against its tile on the same
 * rows packed: the same bits, with beta and a bias, at depths around the
 * unrolling. */
static void check_tile_rows(const pt_gemm_kernel *k, pt_rng *r)
{
    if (!k->tile_rows)
        return;
    enum { KC = 37, LDA = 45, LDC = 40 };
    int mr = k->mr, nr = k->nr;
    float a[12 * LDA], packed[12 * KC], b[KC * 32], bias[32], c[12 * LDC], want[12 * LDC],
        got[12 * LDC];
    for (int i = 0; i < 12 * LDA; i++)
        a[i] = pt_rng_normal(r);
    for (int i = 0; i < KC * 32; i++)
        b[i] = pt_rng_normal(r);
    for (int i = 0; i < 32; i++)
        bias[i] = pt_rng_normal(r);
    for (int i = 0; i < 12 * LDC; i++)
        c[i] = pt_rng_normal(r);
    static const int depths[] = {1, 2, 3, 16, KC};
    for (int d = 0; d < 5; d++) {
        int kc = depths[d], differ = 0;
        for (int p = 0; p < kc; p++)
            for (int i = 0; i < mr; i++)
                packed[p * mr + i] = a[i * LDA + p];
        memcpy(want, c, sizeof c);
        memcpy(got, c, sizeof c);
        k->tile(kc, packed, b, want, LDC, 0.75f, -0.5f, bias);
        k->tile_rows(kc, a, LDA, b, got, LDC, 0.75f, -0.5f, bias);
        for (int i = 0; i < mr; i++)
            differ += memcmp(want + i * LDC, got + i * LDC, sizeof(float) * (size_t)nr) != 0;
        CHECK(!differ, "%s: the tile on A in place stores other bits than on A packed (depth %d)",
              k->name, kc);
    }
}

/* The blocks of op(B)'s columns change no bit: N of 1100 in one block,
 * in two and in five (K of 400: two blocks of K, 200 deep) */
static void check_blockings(const pt_gemm_kernel *k, pt_rng *r)
{
    enum { M = 37, N = 1100, K = 400 };
    static const long l2[] = {1L << 30, 1L << 20, 1L << 16};
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N),
          *bias = malloc(sizeof(float) * N), *want = malloc(sizeof(float) * M * N),
          *got = malloc(sizeof(float) * M * N);
    size_t floats = pt_gemm_packed_floats(k, K, N);
    pt_gemm_packed kept = {.panels = malloc(sizeof(float) * floats), .capacity = floats};
    if (!a || !b || !bias || !want || !got || !kept.panels) {
        CHECK(0, "out of memory");
        goto done;
    }
    pt_rng_fill_normal(r, a, (size_t)M * K, 1.0f);
    pt_rng_fill_normal(r, b, (size_t)K * N, 1.0f);
    pt_rng_fill_normal(r, bias, N, 1.0f);
    for (int tb = 0; tb < 2; tb++)
        for (int i = 0; i < 3; i++)
            for (int threads = 1; threads <= 2; threads++)
                for (int keep = 0; keep < 2; keep++) {
                    pt_gemm_set_l2_bytes(l2[i]);
                    kept.filled = 0;
                    float *c = i || threads > 1 || keep ? got : want;
                    int rc = pt_gemm(k, threads, 0, tb, M, N, K, 0.5f, a, K, b, tb ? K : N, 0.0f, c,
                                     N, bias, keep ? &kept : NULL);
                    CHECK(rc == 0, "pt_gemm could not allocate its packing buffers");
                    CHECK(c == want || !memcmp(want, got, sizeof(float) * M * N),
                          "%s: blocks sized for an L2 of %ld bytes store other bits than one "
                          "block (tb %d, %d threads, panels %s)",
                          k->name, l2[i], tb, threads, keep ? "kept" : "packed");
                }
    pt_gemm_set_l2_bytes(0);
done:
    free(a), free(b), free(bias), free(want), free(got), free(kept.panels);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--print-auto"))
        return printf("%s\n", pt_fp32_kernel()) < 0;
    check_coretype_ignored(argv[0]);
    check_interleave();
    pt_rng r;
    pt_rng_seed(&r, 11);
    const pt_gemm_kernel *micro[] = {pt_gemm_avx512(), pt_gemm_avx2(), pt_gemm_generic()};
    const char *isa[] = {"avx512", "avx2", "generic"};
    for (int i = 0; i < 3; i++) {
        if (!micro[i]) {
            printf("skipped: this CPU has no %s\n", isa[i]);
            continue;
        }
        check_tile_rows(micro[i], &r);
        check_blockings(micro[i], &r);
        check_products(micro[i]->name, run_gemm, (void *)micro[i], &r);
        check_nan_and_threads(micro[i]->name, run_gemm, (void *)micro[i], &r, 0, 1);
    }
    const char *tables[] = {"avx512", "avx2", "generic", "openblas"};
    for (int i = 0; i < 4; i++) {
        if (pt_fp32_set_kernel(tables[i]) != PT_OK)
            continue;
        check_products(pt_fp32_kernel(), run_table, (void *)pt_kernels_cpu(), &r);
        int openblas = !strcmp(tables[i], "openblas");
        int same = check_nan_and_threads(pt_fp32_kernel(), run_table, (void *)pt_kernels_cpu(), &r,
                                         openblas, !openblas);
        if (openblas) {
            CHECK(same == pt_fp32_openblas_keeps_bits(),
                  "OpenBLAS %s its bits on other thread counts, but the library says it %s",
                  same ? "keeps" : "changes", same ? "does not" : "does");
            if (!same)
                printf("openblas (core %s) stores other bits on other thread counts here\n",
                       openblas_get_corename());
        }
    }
    pt_fp32_set_kernel("auto");
    check_selection();
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
