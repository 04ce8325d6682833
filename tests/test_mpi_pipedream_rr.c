/* test_mpi_pipedream_rr: PipeDream's 1F1B-RR over MPI: `pipedream` with 2
 * stages x 2 replicas, micro-batch m on replica m % 2 of every stage, the
 * replicas' gradients summed before every update.
 *
 * mpi-ranks: 4
 *
 * gpt 4 layers, 2 heads, embd 16, seq 8, vocab 32; balance 3,3; M = 8
 * micro-batches of MBS = 2 per step, grad clip 0.5 (small enough to clip).
 *   (a) after every step the two replicas of each stage hold bit-identical
 *       parameters and optimizer moments (exchanged between the pair, memcmp),
 *       with AdamW and with SGD;
 *   (b) against the threads pipedream with 2 stages, M/2 = 4 micro-batches of
 *       2*MBS = 4 samples, run in this process on the same batches: round j
 *       of the replicated run (micro-batches 2j and 2j+1, the rows of the
 *       threads run's micro-batch j) uses the same weight version and makes
 *       the same update (the mean gradient of the round, clipped by its own
 *       norm), so after every step this rank's parameters agree with the
 *       threads run's to 1e-4 relative (SGD; the sums of rows are rounded in
 *       another order, and AdamW would magnify the rounding on parameters
 *       whose gradient is noise), and the mean of micro-batches 2j and 2j+1's
 *       losses agrees with the threads loss of micro-batch j to 1e-5;
 *   (c) trained on the fortunes corpus (byte level, vocab 256), the training
 *       and validation losses fall (skipped with a message where the corpus
 *       is not installed). */
#include <math.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/text_data.h"
#include "pipetrain.h"
#include "runtime/optimizer.h"
#include "tensor/rng.h"

#include "check.h"
#include "pipeline_params.h"

#define P      2
#define D      2
#define M      8
#define MBS    2
#define STEPS  4
#define CORPUS "/usr/share/games/fortunes"

static int rank_;

static pt_model_config gpt_config(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 4, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 32, c.seed = 5;
    return c; /* 6 blocks: embedding, 4 transformer blocks, head */
}

typedef struct {
    pt_model *m;
    pt_optimizer *o;
    pt_pipeline *p;
} run_t;

static void end_run(run_t *r)
{
    pt_pipeline_destroy(r->p);
    pt_optimizer_destroy(r->o);
    pt_model_destroy(r->m);
    memset(r, 0, sizeof *r);
}

/* A pipedream pipeline of P stages: D replicas over MPI, or one copy on
 * threads with micro-batches D times larger. */
static int start(const pt_model_config *mc, pt_optim_kind kind, float lr, bool mpi, run_t *r)
{
    memset(r, 0, sizeof *r);
    pt_optim_config oc = pt_optim_config_default(kind);
    oc.lr = lr;
    oc.grad_clip = 0.5f;
    REQUIRE(pt_model_create(mc, &r->m) == PT_OK && pt_optimizer_create(r->m, &oc, &r->o) == PT_OK,
            "create: %s", pt_last_error());
    int balance[P] = {3, 3};
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = P;
    pc.replicas = mpi ? D : 1;
    pc.microbatches = mpi ? M : M / D;
    pc.micro_batch_size = mpi ? MBS : MBS * D;
    pc.schedule = "pipedream";
    pc.balance = balance;
    pc.n_balance = P;
    pc.blas_threads = 1;
    pc.transport = mpi ? PT_PIPELINE_MPI : PT_PIPELINE_THREADS;
    REQUIRE(pt_pipeline_create(mc, &oc, &pc, &r->p) == PT_OK, "pipedream on %s: %s",
            mpi ? "mpi" : "threads", pt_last_error());
    return 0;
}

/* Is block b in a chunk of this rank's stage? */
static bool own_block(const pt_pipeline *p, int b)
{
    for (int c = 0; c < pt_pipeline_chunks(p); c++) {
        int first, last;
        pt_pipeline_chunk_blocks(p, c, &first, &last);
        if (b >= first && b <= last)
            return pt_pipeline_chunk_worker(p, c) / D == pt_pipeline_rank(p) / D;
    }
    return false;
}

/* (a) This rank's parameters and moments, exchanged with the other replica
 * of its stage (rank ^ 1) and compared bit for bit. */
static void check_replicas_equal(run_t *r, const char *what, int step)
{
    pipeline_copy_out(r->p, r->m, r->o, NULL);
    size_t n = 0;
    for (int i = 0; i < pt_model_n_params(r->m); i++) {
        const pt_param *q = pt_model_param(r->m, i);
        n += own_block(r->p, q->block) ? 3 * q->numel : 0;
    }
    float *mine = malloc(n * sizeof(float)), *theirs = malloc(n * sizeof(float));
    size_t at = 0;
    for (int i = 0; i < pt_model_n_params(r->m); i++) {
        const pt_param *q = pt_model_param(r->m, i);
        if (!own_block(r->p, q->block))
            continue;
        for (int which = 0; which < 3; which++) {
            const float *x = which ? pt_optimizer_state(r->o, r->m, i, which - 1) : q->data;
            if (x)
                memcpy(mine + at, x, q->numel * sizeof(float));
            else
                memset(mine + at, 0, q->numel * sizeof(float));
            at += q->numel;
        }
    }
    int peer = rank_ ^ 1;
    MPI_Sendrecv(mine, (int)n, MPI_FLOAT, peer, 7, theirs, (int)n, MPI_FLOAT, peer, 7,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(n > 0 && !memcmp(mine, theirs, n * sizeof(float)),
          "rank %d, %s step %d: replicas of the stage differ (%zu floats compared)", rank_, what,
          step, n);
    free(mine);
    free(theirs);
}

/* (b) Largest relative difference of this rank's parameters from the
 * threads run's (floor 1e-3 on the magnitude). */
static double differs(const run_t *a, const run_t *ref, const char **where)
{
    double worst = 0;
    for (int i = 0; i < pt_model_n_params(a->m); i++) {
        const pt_param *x = pt_model_param(a->m, i), *y = pt_model_param(ref->m, i);
        if (!own_block(a->p, x->block))
            continue;
        for (size_t j = 0; j < x->numel; j++) {
            double d = fabs((double)x->data[j] - y->data[j]) /
                       fmax(fmax(fabs((double)x->data[j]), fabs((double)y->data[j])), 1e-3);
            if (!(d <= worst)) {
                worst = isnan(d) ? INFINITY : d;
                *where = x->name;
            }
        }
    }
    return worst;
}

static void random_batch(const pt_model_config *c, int step, int *tokens, pt_microbatch *b)
{
    pt_rng r;
    pt_rng_seed(&r, 500 + (uint64_t)step);
    int rows = M * MBS * c->seq_len;
    for (int i = 0; i <= rows; i++)
        tokens[i] = (int)pt_rng_below(&r, (uint64_t)c->vocab);
    *b = (pt_microbatch){.batch = M * MBS, .tokens = tokens, .targets = tokens + 1};
}

/* (a) and (b) with one optimizer. */
static int check_against_threads(pt_optim_kind kind, bool compare)
{
    const char *what = kind == PT_OPTIM_SGD ? "sgd" : "adamw";
    pt_model_config mc = gpt_config();
    run_t mp, th;
    float lr = kind == PT_OPTIM_SGD ? 0.1f : 1e-2f;
    if (start(&mc, kind, lr, true, &mp) || start(&mc, kind, lr, false, &th))
        return 1;
    int *tokens = malloc(sizeof(int) * (size_t)(M * MBS * mc.seq_len + 1));
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        pt_microbatch b;
        random_batch(&mc, s, tokens, &b);
        float mean_mp, mean_th;
        REQUIRE(pt_pipeline_train_step(mp.p, &b, s, lr, &mean_mp) == PT_OK, "mpi step %d: %s", s,
                pt_last_error());
        REQUIRE(pt_pipeline_train_step(th.p, &b, s, lr, &mean_th) == PT_OK, "threads step %d: %s",
                s, pt_last_error());
        check_replicas_equal(&mp, what, s);
        if (!compare)
            continue;
        const float *lm = pt_pipeline_losses(mp.p), *lt = pt_pipeline_losses(th.p);
        for (int j = 0; j < M / D; j++) {
            float round = 0.5f * (lm[D * j] + lm[D * j + 1]);
            CHECK(fabsf(round - lt[j]) <= 1e-5f * lt[j],
                  "step %d round %d: replicas' losses %.9g and %.9g, threads %.9g", s, j, lm[D * j],
                  lm[D * j + 1], lt[j]);
        }
        CHECK(fabsf(mean_mp - mean_th) <= 1e-5f * mean_th, "step %d: mean loss %.9g, threads %.9g",
              s, mean_mp, mean_th);
        const char *where = "";
        pipeline_copy_out(th.p, th.m, th.o, NULL);
        double d = differs(&mp, &th, &where);
        CHECK(d < 1e-4, "rank %d step %d: parameters differ from threads by %.3g at %s", rank_, s,
              d, where);
        worst = fmax(worst, d);
    }
    if (rank_ == 0)
        printf("ok %s: replicas bit-identical after each of %d steps%s (rank 0: %.2g)\n", what,
               STEPS, compare ? "; threads pipedream with 2x micro-batches within 1e-4" : "",
               worst);
    free(tokens);
    end_run(&mp);
    end_run(&th);
    return 0;
}

/* (c) Training and validation losses fall on real text. */
static int check_loss_falls(void)
{
    struct stat st;
    if (stat(CORPUS, &st) != 0) {
        if (rank_ == 0)
            printf("skip (c): the fortunes corpus (%s) is not installed\n", CORPUS);
        return 0;
    }
    const char *paths[] = {CORPUS};
    pt_token_data data;
    REQUIRE(pt_text_data_load(paths, 1, 0.1, &data) == PT_OK, "load: %s", pt_last_error());
    pt_model_config mc = gpt_config();
    mc.vocab = 256, mc.seq_len = 16;
    run_t r;
    float lr = 1e-2f;
    if (start(&mc, PT_OPTIM_ADAMW, lr, true, &r))
        return 1;
    int n = M * MBS * mc.seq_len, steps = 40;
    int *in = malloc(sizeof(int) * (size_t)n), *tg = malloc(sizeof(int) * (size_t)n);
    int *vin = malloc(sizeof(int) * (size_t)n), *vtg = malloc(sizeof(int) * (size_t)n);
    pt_batch_sampler s;
    REQUIRE(pt_batch_sampler_init(&s, data.train, data.n_train, M * MBS, mc.seq_len, 1) == PT_OK,
            "sampler: %s", pt_last_error());
    REQUIRE(pt_eval_batch(data.val, data.n_val, M * MBS, mc.seq_len, 0, vin, vtg) == PT_OK,
            "validation batch: %s", pt_last_error());
    pt_microbatch val = {.batch = M * MBS, .tokens = vin, .targets = vtg};
    float val0, val1, first = 0, last = 0, loss;
    REQUIRE(pt_pipeline_eval(r.p, &val, &val0) == PT_OK, "eval: %s", pt_last_error());
    for (int step = 0; step < steps; step++) {
        pt_batch_next(&s, in, tg);
        pt_microbatch b = {.batch = M * MBS, .tokens = in, .targets = tg};
        REQUIRE(pt_pipeline_train_step(r.p, &b, step, lr, &loss) == PT_OK, "step %d: %s", step,
                pt_last_error());
        REQUIRE(isfinite(loss), "step %d: loss %f", step, loss);
        first += step < 3 ? loss / 3 : 0;
        last += step >= steps - 5 ? loss / 5 : 0;
    }
    check_replicas_equal(&r, "fortunes", steps - 1);
    REQUIRE(pt_pipeline_eval(r.p, &val, &val1) == PT_OK, "eval: %s", pt_last_error());
    if (rank_ == 0)
        printf("fortunes: train loss %.3f -> %.3f, validation %.3f -> %.3f (ln 256 = %.3f)\n",
               first, last, val0, val1, log(256.0));
    CHECK(last < first - 1.0, "the training loss fell too little: %.3f -> %.3f", first, last);
    CHECK(val1 < val0 - 0.8, "the validation loss fell too little: %.3f -> %.3f", val0, val1);
    end_run(&r);
    pt_token_data_free(&data);
    free(in), free(tg), free(vin), free(vtg);
    return 0;
}

int main(void)
{
    pt_model_config mc = gpt_config();
    run_t r = {0};
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_SGD);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.transport = PT_PIPELINE_MPI;
    pc.stages = P, pc.replicas = D, pc.microbatches = M, pc.micro_batch_size = MBS;
    pc.schedule = "pipedream";
    int rc = pt_pipeline_create(&mc, &oc, &pc, &r.p);
    if (rc == PT_EUNSUPPORTED) {
        printf("skip: %s\n", pt_last_error());
        return 77;
    }
    if (rc != PT_OK) {
        printf("FAIL: pipedream with %d stages x %d replicas: %s\n", P, D, pt_last_error());
        return 1;
    }
    rank_ = pt_pipeline_rank(r.p);
    check_rank = rank_;
    end_run(&r);

    int fail = check_against_threads(PT_OPTIM_SGD, true);
    fail |= check_against_threads(PT_OPTIM_ADAMW, false);
    fail |= check_loss_falls();
    fail |= failures != 0;
    int any = 0;
    MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any && rank_ == 0)
        printf("all ok\n");
    return any;
}
