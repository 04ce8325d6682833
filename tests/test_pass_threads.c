/* test_pass_threads: the passes outside the products (LayerNorm with and
 * without its residual add, forward and both backward halves; the
 * activations; the bias gradient; adds and stores; the loss, forward and
 * backward; RMSNorm and SwiGLU, forward and backward) shared between a
 * worker's threads store the same bits as on
 * one thread, on 2, 3 and 5 threads, in fp32 and in bf16 (its portable
 * table), for the product kernel `auto` picks and for the generic one.
 * Shapes are odd and large enough to be cut; pt_parallel_ranges itself
 * is checked to cut [0, n) into aligned ranges that cover it once, on
 * more than one thread, and to leave short work whole. pt_zero_floats,
 * which zeroes large ranges on the product threads (and with them every
 * new buffer, pt_alloc_floats), is checked on a dirty buffer to zero its
 * range, and nothing beside it, on 1, 2 and 3 threads. Which tables share
 * their passes at all is checked too, by counting the parts a helper ran:
 * the fp32 passes wherever pipetrain's own product runs and not beside
 * OpenBLAS's threads, the bf16 passes by the bf16 table in use (with AMX
 * or AVX512_BF16 whatever multiplies fp32). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "tensor/arena.h"
#include "tensor/bf16.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

#include "kernel_acts.h"

#include "check.h"

enum { N = 301, C = 389, V = 517 };

/* ---- pt_parallel_ranges ---- */

enum { MAX_RANGES = 16 };

typedef struct {
    atomic_int count;
    size_t lo[MAX_RANGES], hi[MAX_RANGES];
    pthread_t who[MAX_RANGES];
} seen_ranges;

static void note_range(void *arg, size_t lo, size_t hi)
{
    seen_ranges *s = arg;
    int i = atomic_fetch_add(&s->count, 1);
    if (i < MAX_RANGES)
        s->lo[i] = lo, s->hi[i] = hi, s->who[i] = pthread_self();
}

static void check_ranges(int threads, size_t n, size_t least, size_t align, int want)
{
    seen_ranges s = {0};
    pt_parallel_ranges(threads, n, least, align, note_range, &s);
    int k = atomic_load(&s.count);
    CHECK(k == want, "%d threads, n %zu, least %zu: %d ranges, want %d", threads, n, least, k,
          want);
    size_t covered = 0;
    int others = 0;
    for (int i = 0; i < k && i < MAX_RANGES; i++) {
        covered += s.hi[i] - s.lo[i];
        CHECK(s.lo[i] % align == 0, "range %zu..%zu does not start on a multiple of %zu", s.lo[i],
              s.hi[i], align);
        others += !pthread_equal(s.who[i], pthread_self());
        for (int j = 0; j < i; j++)
            CHECK(s.hi[i] <= s.lo[j] || s.hi[j] <= s.lo[i], "ranges %zu..%zu and %zu..%zu overlap",
                  s.lo[i], s.hi[i], s.lo[j], s.hi[j]);
    }
    CHECK(covered == n, "the ranges cover %zu of %zu", covered, n);
    CHECK(want < 2 || others > 0, "%d ranges, all on the calling thread", k);
}

/* ---- the passes ---- */

typedef struct {
    void *ln, *sum, *res_ln, *dx, *dx_res, *act, *dact, *erf, *derf, *silu, *dsilu, *relu, *drelu,
        *added, *stored, *probs_bf, *rms, *drms, *swi, *dgate, *dup;
    float *mean, *rstd, *rmean, *rrstd, *dw, *db, *dbias, *acc, *probs, *dprobs, *rms_rstd, *rms_dw;
    double loss;
} outputs;

static void run(const pt_kernels *k, int threads, const float *x, const float *y, const float *w,
                const float *logits, const int *targets, outputs *o)
{
    size_t n = (size_t)N * C, e = pt_elem_size(k->act);
    void *xa = kernel_acts(k, x, n), *ya = kernel_acts(k, y, n);
    pt_blas_set_threads(threads);
    o->ln = calloc(n, e), o->mean = calloc(N, sizeof(float)), o->rstd = calloc(N, sizeof(float));
    k->layernorm_forward(o->ln, o->mean, o->rstd, xa, w, y, N, C, 1e-5f);
    o->sum = calloc(n, e), o->res_ln = calloc(n, e);
    o->rmean = calloc(N, sizeof(float)), o->rrstd = calloc(N, sizeof(float));
    k->residual_layernorm_forward(o->sum, o->res_ln, o->rmean, o->rrstd, xa, ya, w, y, N, C, 1e-5f);
    o->dx = calloc(n, e), o->dx_res = calloc(n, e);
    k->layernorm_backward_input(o->dx, NULL, ya, xa, w, o->mean, o->rstd, N, C);
    k->layernorm_backward_input(o->dx_res, xa, ya, xa, w, o->mean, o->rstd, N, C);
    o->dw = calloc(C, sizeof(float)), o->db = calloc(C, sizeof(float));
    k->layernorm_backward_weight(o->dw, o->db, ya, xa, o->mean, o->rstd, N, C);
    k->layernorm_backward_weight(o->dw, o->db, xa, ya, o->mean, o->rstd, N, C);
    o->act = calloc(n, e), o->dact = calloc(n, e), o->erf = calloc(n, e), o->derf = calloc(n, e);
    o->silu = calloc(n, e), o->dsilu = calloc(n, e), o->relu = calloc(n, e),
    o->drelu = calloc(n, e);
    k->gelu_forward(o->act, xa, n), k->gelu_backward(o->dact, xa, ya, n);
    k->gelu_erf_forward(o->erf, xa, n), k->gelu_erf_backward(o->derf, xa, ya, n);
    k->silu_forward(o->silu, xa, n), k->silu_backward(o->dsilu, xa, ya, n);
    k->relu_forward(o->relu, xa, n), k->relu_backward(o->drelu, xa, ya, n);
    o->dbias = calloc(C, sizeof(float));
    k->bias_backward(o->dbias, ya, N, C);
    o->added = calloc(n, e), o->stored = calloc(n, e), o->acc = calloc(n, sizeof(float));
    k->add(o->added, xa, ya, n);
    k->add_floats(o->stored, x, y, n);
    memcpy(o->acc, y, n * sizeof(float));
    k->accumulate(o->acc, xa, n);
    o->probs_bf = calloc(n, e);
    k->store_floats(o->probs_bf, x, n);
    size_t nv = (size_t)N * V;
    o->probs = malloc(nv * sizeof(float)), o->dprobs = malloc(nv * sizeof(float));
    memcpy(o->probs, logits, nv * sizeof(float));
    o->loss = k->crossentropy_forward(o->probs, targets, N, V);
    memcpy(o->dprobs, o->probs, nv * sizeof(float));
    k->crossentropy_backward(o->dprobs, targets, N, V, 1.0f / N);
    o->rms = calloc(n, e), o->rms_rstd = calloc(N, sizeof(float));
    k->rmsnorm_forward(o->rms, o->rms_rstd, xa, w, N, C, 1e-6f);
    o->drms = kernel_acts(k, y, n), o->rms_dw = calloc(C, sizeof(float));
    k->rmsnorm_backward_input(o->drms, xa, ya, w, o->rms_rstd, N, C);
    k->rmsnorm_backward_weight(o->rms_dw, xa, ya, o->rms_rstd, N, C);
    o->swi = calloc(n, e), o->dgate = calloc(n, e), o->dup = calloc(n, e);
    k->swiglu_forward(o->swi, xa, ya, n);
    k->swiglu_backward(o->dgate, o->dup, xa, ya, o->act, n);
    pt_blas_set_threads(1);
    free(xa), free(ya);
}

static void release(outputs *o)
{
    void *all[] = {o->ln,     o->sum,      o->res_ln, o->dx,       o->dx_res, o->act,   o->dact,
                   o->erf,    o->derf,     o->silu,   o->dsilu,    o->relu,   o->drelu, o->added,
                   o->stored, o->probs_bf, o->mean,   o->rstd,     o->rmean,  o->rrstd, o->dw,
                   o->db,     o->dbias,    o->acc,    o->probs,    o->dprobs, o->rms,   o->drms,
                   o->swi,    o->dgate,    o->dup,    o->rms_rstd, o->rms_dw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

static void same(const char *what, const char *pass, int threads, const void *a, const void *b,
                 size_t bytes)
{
    CHECK(!memcmp(a, b, bytes), "%s: %d threads change %s", what, threads, pass);
}

static void check_table(const char *what, const pt_kernels *k, const float *x, const float *y,
                        const float *w, const float *logits, const int *targets)
{
    outputs one, many;
    run(k, 1, x, y, w, logits, targets, &one);
    size_t n = (size_t)N * C, e = pt_elem_size(k->act), f = sizeof(float), nv = (size_t)N * V * f;
    static const int threads[] = {2, 3, 5};
    for (int i = 0; i < 3; i++) {
        int t = threads[i];
        run(k, t, x, y, w, logits, targets, &many);
        printf("  %s (%s, %s), %d threads\n", what, k->name, k->products, t);
        same(what, "layernorm", t, one.ln, many.ln, n * e);
        same(what, "layernorm's mean", t, one.mean, many.mean, N * f);
        same(what, "layernorm's rstd", t, one.rstd, many.rstd, N * f);
        same(what, "the residual's sum", t, one.sum, many.sum, n * e);
        same(what, "residual + layernorm", t, one.res_ln, many.res_ln, n * e);
        same(what, "residual + layernorm's rstd", t, one.rrstd, many.rrstd, N * f);
        same(what, "layernorm's input gradient", t, one.dx, many.dx, n * e);
        same(what, "layernorm's input gradient with a residual", t, one.dx_res, many.dx_res, n * e);
        same(what, "layernorm's weight gradient", t, one.dw, many.dw, C * f);
        same(what, "layernorm's bias gradient", t, one.db, many.db, C * f);
        same(what, "gelu_new", t, one.act, many.act, n * e);
        same(what, "gelu_new's gradient", t, one.dact, many.dact, n * e);
        same(what, "gelu", t, one.erf, many.erf, n * e);
        same(what, "gelu's gradient", t, one.derf, many.derf, n * e);
        same(what, "silu", t, one.silu, many.silu, n * e);
        same(what, "silu's gradient", t, one.dsilu, many.dsilu, n * e);
        same(what, "relu", t, one.relu, many.relu, n * e);
        same(what, "relu's gradient", t, one.drelu, many.drelu, n * e);
        same(what, "the bias gradient", t, one.dbias, many.dbias, C * f);
        same(what, "add", t, one.added, many.added, n * e);
        same(what, "add_floats", t, one.stored, many.stored, n * e);
        same(what, "accumulate", t, one.acc, many.acc, n * f);
        same(what, "store_floats", t, one.probs_bf, many.probs_bf, n * e);
        same(what, "the loss's probabilities", t, one.probs, many.probs, nv);
        same(what, "the loss's gradient", t, one.dprobs, many.dprobs, nv);
        same(what, "rmsnorm", t, one.rms, many.rms, n * e);
        same(what, "rmsnorm's rstd", t, one.rms_rstd, many.rms_rstd, N * f);
        same(what, "rmsnorm's input gradient", t, one.drms, many.drms, n * e);
        same(what, "rmsnorm's weight gradient", t, one.rms_dw, many.rms_dw, C * f);
        same(what, "swiglu", t, one.swi, many.swi, n * e);
        same(what, "swiglu's gate gradient", t, one.dgate, many.dgate, n * e);
        same(what, "swiglu's up gradient", t, one.dup, many.dup, n * e);
        CHECK(!memcmp(&one.loss, &many.loss, sizeof one.loss), "%s: %d threads change the loss",
              what, t);
        release(&many);
    }
    release(&one);
}

/* ---- who runs the passes ---- */

/* Whether table k's GELU over n elements on 2 threads ran a part on a
 * helper of this thread */
static int shared_out(const pt_kernels *k, const float *x, size_t n)
{
    void *xa = kernel_acts(k, x, n), *out = calloc(n, pt_elem_size(k->act));
    pt_blas_set_threads(2);
    long before = pt_gemm_parts_helped();
    k->gelu_forward(out, xa, n);
    long helped = pt_gemm_parts_helped() - before;
    pt_blas_set_threads(1);
    free(xa), free(out);
    return helped > 0;
}

static const char *where(int shared) { return shared ? "shared" : "on one thread"; }

/* The passes share a worker's threads as documented: the fp32 table's
 * wherever pipetrain's own product runs (not beside OpenBLAS's threads);
 * bf16's by the bf16 table in use, so with AMX or AVX512_BF16 whatever
 * multiplies fp32 (one bf16 worker with OpenBLAS for fp32 had run every
 * pass on one of its two threads), and with the portable products as fp32
 * does. */
static void check_sharing(const float *x, size_t n)
{
    static const char *const fp32[] = {"openblas", "generic", "avx2", "avx512"};
    static const char *const bf16[] = {"portable", "avx512bf16", "amx"};
    for (int f = 0; f < 4; f++) {
        if (pt_fp32_set_kernel(fp32[f]) != 0)
            continue;
        int own = f > 0; /* pipetrain's product, with threads of its own */
        int got = shared_out(pt_kernels_cpu(), x, n);
        CHECK(got == own, "fp32 %s on 2 threads: its passes %s, want %s", fp32[f], where(got),
              where(own));
        for (int b = 0; b < 3; b++) {
            if (pt_bf16_set_kernel(bf16[b]) != 0)
                continue;
            int want = b > 0 || own;
            got = shared_out(pt_kernels_for(PT_PRECISION_BF16), x, n);
            CHECK(got == want, "bf16 %s with fp32 %s on 2 threads: its passes %s, want %s", bf16[b],
                  fp32[f], where(got), where(want));
            printf("  passes: fp32 %s, bf16 %s: %s\n", fp32[f], bf16[b], where(got));
        }
    }
    pt_bf16_set_kernel("auto");
    pt_fp32_set_kernel("auto");
}

/* ---- zeroing ---- */

static void check_zeroing(int threads)
{
    pt_blas_set_threads(threads);
    size_t n = ((size_t)24 << 20) / sizeof(float) + 3; /* past the split, not whole pages */
    float *x = malloc(n * sizeof(float));
    CHECK(x != NULL, "cannot allocate %zu floats", n);
    if (!x)
        return;
    memset(x, 0xff, n * sizeof(float));
    pt_zero_floats(x + 1, n - 2); /* not on a page boundary at either end */
    size_t dirty = 0;
    for (size_t i = 1; i < n - 1; i++)
        dirty += x[i] != 0.0f;
    unsigned ends[2];
    memcpy(&ends[0], &x[0], sizeof(unsigned));
    memcpy(&ends[1], &x[n - 1], sizeof(unsigned));
    CHECK(dirty == 0 && ends[0] == 0xffffffffu && ends[1] == 0xffffffffu,
          "%d threads: %zu of %zu floats not zeroed, or the floats beside them zeroed", threads,
          dirty, n - 2);
    free(x);
    float *y = pt_alloc_floats(n);
    CHECK(y != NULL, "%d threads: cannot allocate %zu floats", threads, n);
    size_t nonzero = 0;
    for (size_t i = 0; y && i < n; i++)
        nonzero += y[i] != 0.0f;
    CHECK(nonzero == 0, "%d threads: pt_alloc_floats gave %zu floats not zero", threads, nonzero);
    pt_free(y);
    pt_blas_set_threads(1);
}

int main(void)
{
    for (int t = 1; t <= 3; t++)
        check_zeroing(t);
    check_ranges(3, 100000, 1000, 64, 3);
    check_ranges(2, 100001, 1000, 1, 2);
    check_ranges(5, 4000, 1000, 16, 4); /* no more ranges than `least` allows */
    check_ranges(4, 999, 1000, 64, 1);  /* too short to cut */
    check_ranges(1, 100000, 10, 64, 1);

    size_t n = (size_t)N * C, nv = (size_t)N * V;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n),
          *w = malloc(sizeof(float) * C), *logits = malloc(sizeof(float) * nv);
    int *targets = malloc(sizeof(int) * N);
    pt_rng r;
    pt_rng_seed(&r, 11);
    pt_rng_fill_normal(&r, x, n, 1.5f);
    pt_rng_fill_normal(&r, y, n, 1.0f);
    pt_rng_fill_normal(&r, w, C, 1.0f);
    pt_rng_fill_normal(&r, logits, nv, 3.0f);
    for (int i = 0; i < N; i++)
        targets[i] = i % 7 == 3 ? -1 : (i * 131) % V; /* some rows ignored */
    static const char *const kernels[] = {"auto", "generic"};
    for (int i = 0; i < 2; i++) {
        if (pt_fp32_set_kernel(kernels[i]) != 0) {
            printf("  %s: not on this CPU\n", kernels[i]);
            continue;
        }
        check_table(kernels[i], pt_kernels_cpu(), x, y, w, logits, targets);
        check_table(kernels[i], pt_kernels_bf16_portable(), x, y, w, logits, targets);
    }
    pt_fp32_set_kernel("auto");
    check_sharing(x, n);
    free(x), free(y), free(w), free(logits), free(targets);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
