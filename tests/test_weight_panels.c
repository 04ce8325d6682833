/* test_weight_panels: the weights' packed panels kept between products
 * (gemm.h's pt_gemm_packed) change no bit of what is computed, are really
 * read, and are packed again whenever the weights change.
 *
 * The product, on every micro-kernel this CPU runs, one and two threads,
 * both readings of B, with edges in every dimension, two blocks of K and
 * two blocks of the kept panels' columns:
 *   - a product that fills the panels and one that reads them store what a
 *     product without them stores, bit for bit;
 *   - B changed behind the panels' back (filled left set): the next product
 *     reads the old panels, so it differs from a fresh one (they are used);
 *     with filled cleared it equals the fresh one again, and so it does
 *     after the owner packs them again itself (pt_gemm_packed_refill);
 *   - a narrower reading of B reads a prefix of the panels' columns (the
 *     same bits, and the panels, not B, are what it reads); panels asked to
 *     hold more columns than the first product reads (cols) hold them, and
 *     the wider product then reads them;
 *   - another reading of B (its stride, the other kernel) or too little
 *     room leaves the panels alone and packs as before;
 *   - inside a part of pt_gemm_parallel, shared panels are left alone and
 *     a part's own (local) are used.
 * A pipeline, on pipetrain's own products, for 1f1b, zbh1 (split
 * backward), interleaved, zbv, gpipe with activation checkpointing,
 * PipeDream's asynchronous 1f1b with weight stashing, and 1f1b over two
 * replicas with sharded optimizer state: three AdamW steps keep every
 * micro-batch's loss and every parameter bit-identical to the same pipeline
 * with repack_weights (nothing kept), and the panels are the only
 * difference in what its workers hold. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "tensor/gemm.h"
#include "tensor/rng.h"

#include "check.h"
#include "pipeline_params.h"

/* ---- the product ---- */

static float *random_floats(pt_rng *r, size_t n)
{
    float *x = malloc(sizeof(float) * n);
    if (x)
        pt_rng_fill_normal(r, x, n, 1.0f);
    return x;
}

typedef struct {
    int M, N, K, trans_b, threads;
} shape;

/* C = A op(B) (+ bias) with the given panels (NULL: none), into c */
static void product(const pt_gemm_kernel *k, const shape *s, const float *A, const float *B,
                    int ldb, float *c, const float *bias, pt_gemm_packed *kept)
{
    int rc = pt_gemm(k, s->threads, 0, s->trans_b, s->M, s->N, s->K, 1.0f, A, s->K, B, ldb, 0.0f, c,
                     s->N, bias, kept);
    CHECK(rc == 0, "pt_gemm could not allocate its packing buffers");
}

static int same(const float *x, const float *y, size_t n)
{
    return !memcmp(x, y, sizeof(float) * n);
}

/* the panels hold what they held: field by field (not the padding) */
static int unchanged(const pt_gemm_packed *x, const pt_gemm_packed *y)
{
    return x->panels == y->panels && x->capacity == y->capacity && x->k == y->k && x->B == y->B &&
           x->trans_b == y->trans_b && x->K == y->K && x->N == y->N && x->ldb == y->ldb &&
           x->filled == y->filled;
}

/* the product inside part 0 of pt_gemm_parallel (the other parts idle) */
typedef struct {
    const pt_gemm_kernel *k;
    const shape *s;
    const float *A, *B;
    int ldb;
    float *c;
    pt_gemm_packed kept;
} in_part_job;

static void product_in_part(void *arg, int i)
{
    in_part_job *j = arg;
    if (i == 0)
        product(j->k, j->s, j->A, j->B, j->ldb, j->c, NULL, &j->kept);
}

static int product_keeps_panels(const pt_gemm_kernel *k, const pt_gemm_kernel *other,
                                const shape *s)
{
    pt_rng r;
    pt_rng_seed(&r, 7);
    int ldb = s->trans_b ? s->K + 3 : s->N + 5; /* B is (N, K) read transposed, else (K, N) */
    size_t nb = (size_t)(s->trans_b ? s->N : s->K) * ldb, nc = (size_t)s->M * s->N;
    float *A = random_floats(&r, (size_t)s->M * s->K), *B = random_floats(&r, nb),
          *bias = random_floats(&r, (size_t)s->N), *want = malloc(sizeof(float) * nc),
          *got = malloc(sizeof(float) * nc), *room = NULL;
    size_t floats = pt_gemm_packed_floats(k, s->K, s->N);
    room = malloc(sizeof(float) * floats);
    REQUIRE(A && B && bias && want && got && room, "out of memory");
    pt_gemm_packed kept = {.panels = room, .capacity = floats};
    const char *name = k->name;
    int t = s->trans_b, th = s->threads;

    product(k, s, A, B, ldb, want, bias, NULL);
    product(k, s, A, B, ldb, got, bias, &kept);
    CHECK(kept.filled, "%s trans_b %d threads %d: the first product did not fill the panels", name,
          t, th);
    CHECK(same(got, want, nc), "%s trans_b %d threads %d: filling the panels changed the product",
          name, t, th);
    memset(got, 0, sizeof(float) * nc);
    product(k, s, A, B, ldb, got, NULL, &kept);
    product(k, s, A, B, ldb, want, NULL, NULL);
    CHECK(same(got, want, nc), "%s trans_b %d threads %d: reading the panels changed the product",
          name, t, th);

    /* B changes behind the panels: they are what the product reads */
    for (size_t i = 0; i < nb; i++)
        B[i] = -0.5f * B[i] + 0.25f;
    product(k, s, A, B, ldb, want, NULL, NULL);
    product(k, s, A, B, ldb, got, NULL, &kept);
    CHECK(!same(got, want, nc),
          "%s trans_b %d threads %d: a product with filled panels read B itself", name, t, th);
    kept.filled = 0; /* what the weights' owner does when they change */
    product(k, s, A, B, ldb, got, NULL, &kept);
    CHECK(kept.filled && same(got, want, nc),
          "%s trans_b %d threads %d: emptied panels were not packed again from B", name, t, th);

    /* emptied and packed again by their owner: read, not packed, next */
    for (size_t i = 0; i < nb; i++)
        B[i] = -B[i];
    product(k, s, A, B, ldb, want, NULL, NULL);
    kept.filled = 0;
    CHECK(pt_gemm_packed_refill(&kept), "%s trans_b %d threads %d: refill left the panels empty",
          name, t, th);
    for (size_t i = 0; i < nb; i++) /* behind the refilled panels */
        B[i] = -B[i];
    product(k, s, A, B, ldb, got, NULL, &kept);
    CHECK(same(got, want, nc),
          "%s trans_b %d threads %d: the refilled panels are not B's as it was when refilled", name,
          t, th);
    kept.filled = 0; /* the panels follow B as it is again, for what follows */
    pt_gemm_packed_refill(&kept);
    product(k, s, A, B, ldb, want, NULL, NULL);

    /* a narrower reading of B reads a prefix of the panels' columns */
    pt_gemm_packed before = kept;
    shape narrow = *s;
    narrow.N = s->N - 1 - s->N / 3;
    size_t nn = (size_t)s->M * narrow.N;
    product(k, &narrow, A, B, ldb, want, NULL, NULL);
    product(k, &narrow, A, B, ldb, got, NULL, &kept);
    CHECK(same(got, want, nn) && unchanged(&kept, &before),
          "%s trans_b %d threads %d: a narrower reading of the panels differs or changed them",
          name, t, th);
    for (size_t i = 0; i < nb; i++) /* behind the panels' back, and back */
        B[i] = -B[i];
    product(k, &narrow, A, B, ldb, got, NULL, &kept);
    for (size_t i = 0; i < nb; i++)
        B[i] = -B[i];
    CHECK(same(got, want, nn), "%s trans_b %d threads %d: a narrower reading packed B itself", name,
          t, th);

    /* panels filled for more columns than the first product reads */
    pt_gemm_packed wide = {.panels = room, .capacity = floats, .cols = s->N};
    product(k, &narrow, A, B, ldb, got, NULL, &wide);
    CHECK(wide.filled && wide.N == s->N && same(got, want, nn),
          "%s trans_b %d threads %d: panels for %d columns filled by a product of %d", name, t, th,
          s->N, narrow.N);
    product(k, s, A, B, ldb, want, NULL, NULL);
    product(k, s, A, B, ldb, got, NULL, &wide);
    CHECK(same(got, want, nc), "%s trans_b %d threads %d: the whole read from wider panels differs",
          name, t, th);

    /* other readings of B leave the panels alone */
    product(k, s, A, B, ldb - 1, want, NULL, NULL);
    product(k, s, A, B, ldb - 1, got, NULL, &kept);
    CHECK(same(got, want, nc) && unchanged(&kept, &before),
          "%s trans_b %d threads %d: B at another stride used or changed the panels", name, t, th);
    if (other) {
        product(other, s, A, B, ldb, want, NULL, NULL);
        product(other, s, A, B, ldb, got, NULL, &kept);
        CHECK(same(got, want, nc) && unchanged(&kept, &before),
              "%s trans_b %d threads %d: kernel %s read %s's panels", name, t, th, other->name,
              name);
    }
    pt_gemm_packed small = {.panels = room, .capacity = floats - 1};
    product(k, s, A, B, ldb, want, NULL, NULL);
    product(k, s, A, B, ldb, got, NULL, &small);
    CHECK(same(got, want, nc) && !small.filled,
          "%s trans_b %d threads %d: panels without room enough were filled", name, t, th);

    /* inside a part of pt_gemm_parallel only a part's own panels are used */
    in_part_job job = {k, s, A, B, ldb, got, {.panels = room, .capacity = floats}};
    pt_gemm_parallel(1 + (th > 1), product_in_part, &job);
    CHECK(same(got, want, nc) && !job.kept.filled,
          "%s trans_b %d threads %d: shared panels were filled inside a part", name, t, th);
    job.kept.local = 1;
    pt_gemm_parallel(1 + (th > 1), product_in_part, &job);
    CHECK(same(got, want, nc) && job.kept.filled,
          "%s trans_b %d threads %d: a part's own panels were not used inside it", name, t, th);
    free(A), free(B), free(bias), free(want), free(got), free(room);
    return 0;
}

static void products(void)
{
    const pt_gemm_kernel *ks[] = {pt_gemm_avx512(), pt_gemm_avx2(), pt_gemm_generic()};
    /* two blocks of K (at most 384 deep), edges in M, N and K; two blocks
     * of the kept panels' columns (at most 4096 wide: an LM head's) */
    const shape shapes[] = {{37, 53, 700, 0, 1},   {37, 53, 700, 1, 1},  {131, 300, 390, 0, 2},
                            {131, 300, 390, 1, 2}, {64, 1100, 96, 0, 2}, {64, 1100, 96, 1, 2},
                            {13, 4200, 400, 0, 1}, {13, 4200, 400, 1, 2}};
    int ran = 0;
    for (int i = 0; i < 3; i++) {
        if (!ks[i]) {
            printf("micro-kernel %d of 3 does not run on this CPU: skipped\n", i + 1);
            continue;
        }
        const pt_gemm_kernel *other = ks[i] == pt_gemm_generic() ? NULL : pt_gemm_generic();
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++)
            product_keeps_panels(ks[i], other, &shapes[j]);
        ran++;
    }
    printf("products: %d micro-kernels, kept panels bit-identical, used and refreshed\n", ran);
}

/* ---- a pipeline ---- */

#define STEPS 3
#define MBS   2

typedef struct {
    const char *schedule;
    int P, v, M, D, zero, ckpt;
} run_t;

static pt_model_config gpt(int repack)
{
    pt_model_config c = pt_model_config_gpt();
    /* widths that are no multiple of any panel: every edge is packed */
    c.n_layer = 4, c.n_head = 2, c.n_embd = 20, c.seq_len = 8, c.vocab = 37, c.seed = 3;
    c.repack_weights = repack;
    return c;
}

/* Trains STEPS steps; losses[s * M + k], the parameters into `into` and
 * what each worker holds into held[]. */
static int train(const run_t *r, int repack, float *losses, pt_model *into, pt_memory_use *held)
{
    pt_model_config c = gpt(repack);
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = r->P, pc.virtual_stages = r->v, pc.microbatches = r->M;
    pc.micro_batch_size = MBS, pc.schedule = r->schedule, pc.replicas = r->D ? r->D : 1;
    pc.zero = r->zero, pc.checkpoint_activations = r->ckpt, pc.blas_threads = 1;
    pc.transport = PT_PIPELINE_THREADS;
    int balance[] = {2, 1, 1, 2}; /* blocks per chunk: no profiling, the same cut both times */
    pc.balance = balance, pc.n_balance = r->P * (r->v ? r->v : 1);
    if (pc.n_balance == 2)
        balance[0] = 3, balance[1] = 3;
    pt_pipeline *p;
    if (pt_pipeline_create(&c, &oc, &pc, &p) != PT_OK)
        return printf("%s: %s\n", r->schedule, pt_last_error()), 1;
    int rows = r->M * MBS * c.seq_len, fail = 0;
    int *tok = malloc(sizeof(int) * (size_t)(rows + 1));
    pt_rng g;
    pt_rng_seed(&g, 99);
    for (int s = 0; s < STEPS && !fail; s++) {
        for (int i = 0; i <= rows; i++)
            tok[i] = (int)pt_rng_below(&g, (uint64_t)c.vocab);
        pt_microbatch b = {.batch = r->M * MBS, .tokens = tok, .targets = tok + 1};
        if (pt_pipeline_train_step(p, &b, s, 3e-2f, NULL) != PT_OK) {
            printf("%s step %d: %s\n", r->schedule, s, pt_last_error());
            fail = 1;
            break;
        }
        memcpy(losses + (size_t)s * r->M, pt_pipeline_losses(p), sizeof(float) * (size_t)r->M);
    }
    if (!fail && pipeline_copy_out(p, into, NULL, NULL) != pt_model_n_params(into))
        fail = (printf("%s: the workers do not hold every parameter\n", r->schedule), 1);
    if (!fail && pt_pipeline_memory(p, held, NULL, NULL) != PT_OK)
        fail = (printf("%s: memory: %s\n", r->schedule, pt_last_error()), 1);
    free(tok);
    pt_pipeline_destroy(p);
    return fail;
}

static int pipeline_keeps_bits(const run_t *r)
{
    enum { MAX_M = 8, MAX_W = 8 };
    float kept[STEPS * MAX_M], repacked[STEPS * MAX_M];
    pt_memory_use held_kept[MAX_W], held_repacked[MAX_W];
    pt_model_config ck = gpt(0), cr = gpt(1);
    pt_model *mk, *mr;
    REQUIRE(pt_model_create(&ck, &mk) == PT_OK && pt_model_create(&cr, &mr) == PT_OK, "model: %s",
            pt_last_error());
    if (train(r, 0, kept, mk, held_kept) || train(r, 1, repacked, mr, held_repacked)) {
        CHECK(0, "%s: the pipeline did not train", r->schedule);
        pt_model_destroy(mk), pt_model_destroy(mr);
        return 1;
    }
    for (int i = 0; i < STEPS * r->M; i++)
        CHECK(kept[i] == repacked[i],
              "%s: step %d micro-batch %d: loss %.9g with kept panels, "
              "%.9g repacked",
              r->schedule, i / r->M, i % r->M, kept[i], repacked[i]);
    int which, i = pipeline_first_difference(mk, NULL, mr, NULL, NULL, &which);
    CHECK(i < 0, "%s: parameter %s differs with kept panels after %d steps", r->schedule,
          i < 0 ? "" : pt_model_param(mk, i)->name, STEPS);
    /* the panels are what the workers hold beyond nothing kept */
    size_t extra = 0;
    int W = r->P * (r->D ? r->D : 1);
    for (int w = 0; w < W && w < MAX_W; w++) {
        CHECK(held_kept[w].grads == held_repacked[w].grads &&
                  held_kept[w].moments == held_repacked[w].moments &&
                  held_kept[w].activations == held_repacked[w].activations,
              "%s worker %d: keeping panels changed what else it holds", r->schedule, w);
        CHECK(held_kept[w].params > held_repacked[w].params,
              "%s worker %d: holds no panels (%zu parameter bytes either way)", r->schedule, w,
              held_kept[w].params);
        extra += held_kept[w].params - held_repacked[w].params;
    }
    printf("%-11s P=%d v=%d M=%d D=%d zero=%d ckpt=%d: bit-identical over %d steps, panels %zu "
           "bytes\n",
           r->schedule, r->P, r->v, r->M, r->D, r->zero, r->ckpt, STEPS, extra);
    pt_model_destroy(mk), pt_model_destroy(mr);
    return 0;
}

int main(void)
{
    products();
    /* the pipeline on pipetrain's own products, whichever this CPU runs */
    const char *own[] = {"avx512", "avx2", "generic"};
    int k = 0;
    while (k < 3 && pt_fp32_set_kernel(own[k]) != PT_OK)
        k++;
    REQUIRE(k < 3, "no own product kernel runs here: %s", pt_last_error());
    printf("pipelines on %s\n", pt_fp32_kernel());
    const run_t runs[] = {
        {"1f1b", 2, 0, 4, 0, 0, 0}, {"zbh1", 2, 0, 4, 0, 0, 0},  {"interleaved", 2, 2, 4, 0, 0, 0},
        {"zbv", 2, 2, 4, 0, 0, 0},  {"gpipe", 2, 0, 4, 0, 0, 1}, {"pipedream", 2, 0, 4, 0, 0, 0},
        {"1f1b", 2, 0, 4, 2, 1, 0},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++)
        pipeline_keeps_bits(&runs[i]);
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
