/* zero_runs.h: the runs the sharded-optimizer tests compare
 * (test_zero_matches_unsharded on threads, test_mpi_zero under MPI): a
 * small GPT (its token embedding and LM head tied, so the tied sum crosses
 * shards) on P stages x D replicas with a given zero, a few AdamW steps
 * with clipping that bites, then every parameter, both moments (gathered
 * from the shards' owners) and every loss copied out for memcmp. */
#ifndef PT_TESTS_ZERO_RUNS_H
#define PT_TESTS_ZERO_RUNS_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "runtime/pipeline_internal.h"
#include "tensor/rng.h"

#include "check.h"
#include "pipeline_params.h"

#define ZR_STEPS 4
#define ZR_MBS   2
#define ZR_M     8
#define ZR_LR    1e-2f
/* zero 2 against zero 0 (zr_close): the losses as the layouts of a run are
 * held to each other; parameters and moments looser, as AdamW's first
 * steps move a weight by lr whatever the size of its gradient, and the
 * key bias's gradient (zero in exact arithmetic) is float noise whose
 * sign follows the order of the sums (measured: 2e-5 to 6e-5) */
#define ZR_LOSS_TOL   1e-5
#define ZR_TENSOR_TOL 2e-4

typedef struct {
    const char *schedule;
    int stages, replicas, zero;
    size_t bucket; /* floats per bucket of the replicas' sums; 0: the default */
    pt_pipeline_transport transport;
} zr_layout;

typedef struct {
    pt_model *m;
    pt_optimizer *o;
    pt_pipeline *p;
    float losses[ZR_STEPS][ZR_M];
    unsigned char held[1024];
    size_t moment_bytes; /* this process's workers' optimizers, allocated */
} zr_run;

static pt_model_config zr_model(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 6, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 37, c.seed = 11;
    return c; /* 8 blocks; 37: spans that D does not divide */
}

static void zr_end(zr_run *r)
{
    pt_pipeline_destroy(r->p);
    pt_optimizer_destroy(r->o);
    pt_model_destroy(r->m);
    memset(r, 0, sizeof *r);
}

/* Creates the run's pipeline; returns pt_pipeline_create's status. */
static int zr_start(const zr_layout *l, zr_run *r)
{
    memset(r, 0, sizeof *r);
    pt_model_config mc = zr_model();
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    oc.grad_clip = 0.5f; /* the norm decides every step */
    int rc = pt_model_create(&mc, &r->m);
    rc = rc == PT_OK ? pt_optimizer_create(r->m, &oc, &r->o) : rc;
    if (rc != PT_OK)
        return rc;
    int v = !strcmp(l->schedule, "interleaved") ? 2 : 0;
    int K = (!strcmp(l->schedule, "zbv") || v ? 2 : 1) * l->stages, balance[8];
    for (int c = 0; c < K; c++)
        balance[c] = 8 / K;
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = l->stages, pc.replicas = l->replicas, pc.zero = l->zero;
    pc.microbatches = ZR_M, pc.micro_batch_size = ZR_MBS;
    pc.schedule = l->schedule, pc.virtual_stages = v;
    pc.balance = balance, pc.n_balance = K;
    pc.blas_threads = 1, pc.transport = l->transport;
    if ((rc = pt_pipeline_create(&mc, &oc, &pc, &r->p)) != PT_OK)
        return rc;
    for (int w = 0; w < pt_pipeline_workers(r->p); w++)
        r->moment_bytes += pt_optimizer_bytes(pt_pipeline_stage_optimizer(r->p, w));
    if (l->bucket) {
        r->p->reduce_bucket_floats = l->bucket;
        for (int w = 0; rc == PT_OK && w < pt_pipeline_workers(r->p); w++) {
            pt_worker *wk = &r->p->workers[w];
            if (!wk->local)
                continue;
            pt_reduce_free(&wk->reduce);
            rc = pt_reduce_init(&wk->reduce, wk);
        }
    }
    return rc;
}

static int zr_gather(pt_pipeline *p, int worker, void *user)
{
    (void)user;
    return pt_pipeline_gather_moments(p, worker);
}

static int zr_release(pt_pipeline *p, int worker, void *user)
{
    (void)user;
    pt_pipeline_release_moments(p, worker);
    return PT_OK;
}

/* Steps from..to-1 (each its own batch, whatever the layout). */
static int zr_steps(zr_run *r, int from, int to)
{
    pt_model_config mc = zr_model();
    int rows = ZR_M * ZR_MBS * mc.seq_len;
    int *tokens = malloc(sizeof(int) * (size_t)(rows + 1));
    REQUIRE(tokens, "out of memory");
    for (int s = from; s < to; s++) {
        pt_rng g;
        pt_rng_seed(&g, 700 + (uint64_t)s);
        for (int i = 0; i <= rows; i++)
            tokens[i] = (int)pt_rng_below(&g, (uint64_t)mc.vocab);
        pt_microbatch mb = {.batch = ZR_M * ZR_MBS, .tokens = tokens, .targets = tokens + 1};
        int rc = pt_pipeline_train_step(r->p, &mb, s, ZR_LR, NULL);
        if (rc != PT_OK) {
            free(tokens);
            REQUIRE(0, "step %d: %s", s, pt_last_error());
        }
        memcpy(r->losses[s], pt_pipeline_losses(r->p), sizeof(float) * ZR_M);
    }
    free(tokens);
    return 0;
}

/* ZR_STEPS steps; then parameters, moments and losses copied out. */
static inline int zr_train(zr_run *r)
{
    if (zr_steps(r, 0, ZR_STEPS))
        return 1;
    REQUIRE(pt_pipeline_run(r->p, zr_gather, NULL) == PT_OK, "gather: %s", pt_last_error());
    /* the moments gather on replica 0: an MPI rank of another replica
     * compares its parameters alone */
    int replica = 0;
    pt_pipeline_worker_stage(r->p, pt_pipeline_rank(r->p), &replica);
    if (replica != 0) {
        pt_optimizer_destroy(r->o);
        r->o = NULL;
    }
    int found = pipeline_copy_out(r->p, r->m, r->o, r->held);
    pt_pipeline_run(r->p, zr_release, NULL);
    REQUIRE(found > 0, "copy out: %s", pt_last_error());
    return 0;
}

/* Every parameter and moment both hold, and every loss, bit for bit. */
static inline int zr_same(const zr_run *a, const zr_run *b, const char *what)
{
    int which, i = pipeline_first_difference(a->m, a->o, b->m, b->o, a->held, &which);
    REQUIRE(i < 0, "%s: %s of %s differs", what, which < 0 ? "the value" : "a moment",
            pt_model_param(a->m, i)->name);
    for (int s = 0; s < ZR_STEPS; s++)
        for (int k = 0; k < ZR_M; k++)
            REQUIRE(!memcmp(&a->losses[s][k], &b->losses[s][k], sizeof(float)),
                    "%s: step %d micro-batch %d: loss %.9g against %.9g", what, s, k,
                    a->losses[s][k], b->losses[s][k]);
    return 0;
}

/* Largest |x - y| over a tensor, relative to the tensor's largest |y|. */
static inline double zr_relative(const float *x, const float *y, size_t n)
{
    double most = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)y[i];
        most = fabs(d) > most ? fabs(d) : most;
        scale = fabs((double)y[i]) > scale ? fabs((double)y[i]) : scale;
    }
    return scale > 0 ? most / scale : most;
}

/* zero 2 against zero 0: the replicas' sums fold the micro-batches in
 * another order, so every loss within ZR_LOSS_TOL and every parameter and
 * moment within ZR_TENSOR_TOL (relative to each tensor's largest value)
 * instead of bit for bit; the largest differences into worst[0] (losses)
 * and worst[1] (tensors). */
static inline int zr_close(const zr_run *a, const zr_run *b, const char *what, double worst[2])
{
    worst[0] = worst[1] = 0;
    for (int i = 0; i < pt_model_n_params(a->m); i++) {
        const pt_param *p = pt_model_param(a->m, i), *q = pt_model_param(b->m, i);
        if (!a->held[i])
            continue;
        double d = zr_relative(p->data, q->data, p->numel);
        for (int k = 0; a->o && b->o && k < 2; k++) {
            const float *x = pt_optimizer_state(a->o, a->m, i, k);
            const float *y = pt_optimizer_state(b->o, b->m, i, k);
            double e = x && y ? zr_relative(x, y, p->numel) : 1.0;
            d = e > d ? e : d;
        }
        worst[1] = d > worst[1] ? d : worst[1];
        REQUIRE(d <= ZR_TENSOR_TOL,
                "%s: %s (or a moment of it) differs by %.3g of its largest value", what, p->name,
                d);
    }
    for (int s = 0; s < ZR_STEPS; s++)
        for (int k = 0; k < ZR_M; k++) {
            double d = zr_relative(&a->losses[s][k], &b->losses[s][k], 1);
            worst[0] = d > worst[0] ? d : worst[0];
            REQUIRE(d <= ZR_LOSS_TOL, "%s: step %d micro-batch %d: loss %.9g against %.9g", what, s,
                    k, a->losses[s][k], b->losses[s][k]);
        }
    return 0;
}

#endif
