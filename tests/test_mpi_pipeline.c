/* test_mpi_pipeline: the pipeline over MPI ranks takes the same steps as the
 * pipeline on threads.
 *
 * mpi-ranks: 2 4
 *
 * Every rank runs, in this process, the threads pipeline (transport
 * PT_PIPELINE_THREADS) and then the MPI pipeline with the same config and
 * seed, 3 steps each with clipping on, and compares the parameters and
 * moments this rank's stage holds (read back from its worker; the threads
 * pipeline's from whichever of its workers holds them) and every
 * micro-batch's loss, bit for bit (memcmp):
 *   - replicas 1 (P = ranks): gpipe, 1f1b, interleaved (v = 2), loopedbfs
 *     (v = 2), zbh1, zbv and pipedream, under AdamW;
 *   - replicas 2 (P = ranks / 2): the same synchronous schedules and 1f1b-rr
 *     against the threads pipeline with the same replicas, under SGD;
 *   - this rank's stage holds its own chunks' parameters and no other's;
 *   - eval and forward_probs give the threads pipeline's losses and
 *     probabilities on every rank;
 *   - refusals: replicas that do not divide the micro-batches, stages x
 *     replicas not the world size; pipedream with replicas (1F1B-RR) is
 *     accepted (tests/test_mpi_pipedream_rr.c checks what it computes). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "runtime/optimizer.h"
#include "tensor/rng.h"

#include "check.h"
#include "pipeline_params.h"

#define STEPS 3
#define MBS   2
#define LR    1e-2f

static int rank_, size_;

static pt_model_config gpt_config(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 6, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 32, c.seed = 11;
    return c; /* 8 blocks: embedding, 6 transformer blocks, head */
}

/* AdamW, or SGD where results are compared to a tolerance: AdamW divides
 * by the gradient's own size, so on a parameter whose gradient is rounding
 * noise (attention's key bias) it turns a last-bit difference into a whole
 * step. */
static pt_optim_config optim(pt_optim_kind kind)
{
    pt_optim_config o = pt_optim_config_default(kind);
    o.grad_clip = 0.5f; /* small enough to clip: the global norm must be right */
    return o;
}

typedef struct {
    int *tokens;
    pt_microbatch mb;
} batch_t;

static void make_batch(const pt_model_config *c, int M, int s, batch_t *b)
{
    pt_rng r;
    pt_rng_seed(&r, 1000 + (uint64_t)s);
    int rows = M * MBS * c->seq_len;
    b->tokens = malloc(sizeof(int) * (size_t)(rows + 1));
    for (int i = 0; i <= rows; i++)
        b->tokens[i] = (int)pt_rng_below(&r, (uint64_t)c->vocab);
    b->mb = (pt_microbatch){.batch = M * MBS, .tokens = b->tokens, .targets = b->tokens + 1};
}

typedef struct {
    const char *schedule;
    int P, D, M, v;
} case_t;

typedef struct {
    pt_model *m;     /* a whole model: what the workers of this process hold, copied out */
    pt_optimizer *o; /* its moments likewise */
    unsigned char held[1024];
    pt_pipeline *p;
    float losses[STEPS][16];
    float mean[STEPS];
} run_t;

static void end_run(run_t *r)
{
    pt_pipeline_destroy(r->p);
    pt_optimizer_destroy(r->o);
    pt_model_destroy(r->m);
    memset(r, 0, sizeof *r);
}

/* 0 ok, 1 failure, 2 the threads pipeline refuses the case. */
static int run(const case_t *k, pt_pipeline_transport tr, run_t *r)
{
    memset(r, 0, sizeof *r);
    pt_model_config mc = gpt_config();
    pt_optim_config oc = optim(k->D == 1 ? PT_OPTIM_ADAMW : PT_OPTIM_SGD);
    REQUIRE(pt_model_create(&mc, &r->m) == PT_OK && pt_optimizer_create(r->m, &oc, &r->o) == PT_OK,
            "create: %s", pt_last_error());
    int K = k->P * (k->v ? k->v : 1), n_blocks = pt_model_n_blocks(r->m), balance[16];
    if (!strcmp(k->schedule, "zbv"))
        K = 2 * k->P;
    for (int c = 0; c < K; c++)
        balance[c] = n_blocks / K + (c >= K - n_blocks % K);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = k->P;
    pc.replicas = k->D;
    pc.microbatches = k->M;
    pc.micro_batch_size = MBS;
    pc.schedule = k->schedule;
    pc.virtual_stages = k->v;
    pc.balance = balance;
    pc.n_balance = K;
    pc.blas_threads = 1;
    pc.transport = tr;
    int rc = pt_pipeline_create(&mc, &oc, &pc, &r->p);
    if (rc != PT_OK && tr == PT_PIPELINE_THREADS) {
        end_run(r);
        return 2;
    }
    REQUIRE(rc == PT_OK, "%s P=%d D=%d M=%d on mpi: %s", k->schedule, k->P, k->D, k->M,
            pt_last_error());
    REQUIRE(!strcmp(pt_pipeline_transport_name(r->p), tr == PT_PIPELINE_MPI ? "mpi" : "threads"),
            "transport %s", pt_pipeline_transport_name(r->p));
    for (int s = 0; s < STEPS; s++) {
        batch_t b;
        make_batch(&mc, k->M, s, &b);
        rc = pt_pipeline_train_step(r->p, &b.mb, s, LR, &r->mean[s]);
        free(b.tokens);
        REQUIRE(rc == PT_OK, "%s step %d: %s", k->schedule, s, pt_last_error());
        memcpy(r->losses[s], pt_pipeline_losses(r->p), sizeof(float) * (size_t)k->M);
    }
    REQUIRE(pipeline_copy_out(r->p, r->m, r->o, r->held) > 0, "copy out: %s", pt_last_error());
    return 0;
}

/* Largest relative difference over the params (and moments) that a holds;
 * a bit difference counts even where the values compare equal (-0, 0). */
static double compare(const run_t *a, const run_t *ref, const char **where)
{
    double worst = 0;
    const pt_model *m = a->m;
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *p = pt_model_param(m, i), *q = pt_model_param(ref->m, i);
        if (!a->held[i])
            continue;
        for (int which = 0; which < 3; which++) {
            const float *x = which == 0 ? p->data : pt_optimizer_state(a->o, a->m, i, which - 1);
            const float *y =
                which == 0 ? q->data : pt_optimizer_state(ref->o, ref->m, i, which - 1);
            for (size_t j = 0; x && y && j < p->numel; j++) {
                double d = fabs((double)x[j] - y[j]) /
                           fmax(fmax(fabs((double)x[j]), fabs((double)y[j])), 1e-3);
                if (memcmp(&x[j], &y[j], sizeof(float)) && d == 0)
                    d = 1e-30;
                if (d > worst || isnan(d)) {
                    worst = isnan(d) ? INFINITY : d;
                    *where = p->name;
                }
            }
        }
    }
    return worst;
}

/* This rank's stage holds its chunks' blocks and nothing else. */
static int check_ownership(const run_t *r)
{
    const pt_model *stage = pt_pipeline_stage(r->p, rank_);
    REQUIRE(stage, "this rank's worker has no stage here");
    for (int c = 0; c < pt_pipeline_chunks(r->p); c++) {
        int first, last, replica;
        pt_pipeline_chunk_blocks(r->p, c, &first, &last);
        int mine = pt_pipeline_chunk_worker(r->p, c) ==
                   pt_pipeline_worker_stage(r->p, rank_, &replica) * pt_pipeline_replicas(r->p);
        for (int b = first; b <= last; b++)
            REQUIRE(pt_model_holds_block(stage, b) == mine, "chunk %d block %d: held %d, own %d", c,
                    b, pt_model_holds_block(stage, b), mine);
    }
    return 0;
}
static int check_case(const case_t *k)
{
    run_t th, mp;
    int rc = run(k, PT_PIPELINE_THREADS, &th);
    if (rc == 2) {
        if (rank_ == 0)
            printf("skip %s P=%d D=%d M=%d (the schedule refuses it)\n", k->schedule, k->P, k->D,
                   k->M);
        return 0;
    }
    if (rc)
        return 1;
    if ((rc = run(k, PT_PIPELINE_MPI, &mp)) != 0) {
        end_run(&th);
        return 1;
    }
    const char *where = "";
    double d = compare(&mp, &th, &where);
    REQUIRE(d == 0, "%s P=%d D=%d M=%d: this rank's parameters differ from threads by %.3g at %s",
            k->schedule, k->P, k->D, k->M, d, where);
    for (int s = 0; s < STEPS; s++) {
        for (int m = 0; m < k->M; m++)
            REQUIRE(!memcmp(&mp.losses[s][m], &th.losses[s][m], sizeof(float)),
                    "%s step %d micro-batch %d: loss %.9g, threads %.9g", k->schedule, s, m,
                    mp.losses[s][m], th.losses[s][m]);
        REQUIRE(mp.mean[s] == th.mean[s], "%s step %d: mean loss %.9g, threads %.9g", k->schedule,
                s, mp.mean[s], th.mean[s]);
    }
    if (check_ownership(&mp))
        return 1;
    if (rank_ == 0) {
        printf("ok %-12s P=%d D=%d M=%d: bit-identical\n", k->schedule, k->P, k->D, k->M);
        fflush(stdout);
    }
    end_run(&mp);
    end_run(&th);
    return 0;
}

/* eval and forward_probs on the 1f1b pipeline with D replicas. */
static int check_eval_probs(int P, int D)
{
    case_t k = {"1f1b", P, D, 2 * D, 0};
    run_t th, mp;
    if (run(&k, PT_PIPELINE_THREADS, &th) || run(&k, PT_PIPELINE_MPI, &mp))
        return 1;
    pt_model_config mc = gpt_config();
    batch_t b;
    make_batch(&mc, k.M, 7, &b);
    float e1, e2;
    REQUIRE(pt_pipeline_eval(th.p, &b.mb, &e1) == PT_OK &&
                pt_pipeline_eval(mp.p, &b.mb, &e2) == PT_OK,
            "eval: %s", pt_last_error());
    REQUIRE(e1 == e2, "eval: mpi %.9g, threads %.9g", e2, e1);
    size_t n = (size_t)MBS * (size_t)mc.seq_len * (size_t)mc.vocab;
    float *p1 = calloc(n, sizeof(float)), *p2 = calloc(n, sizeof(float));
    pt_microbatch one = {.batch = MBS, .tokens = b.tokens, .targets = b.tokens + 1};
    REQUIRE(pt_pipeline_forward_probs(th.p, &one, p1) == PT_OK &&
                pt_pipeline_forward_probs(mp.p, &one, p2) == PT_OK,
            "forward_probs: %s", pt_last_error());
    for (size_t i = 0; i < n; i++)
        REQUIRE(p1[i] == p2[i], "forward_probs[%zu]: mpi %.9g, threads %.9g", i, p2[i], p1[i]);
    free(p1);
    free(p2);
    free(b.tokens);
    end_run(&mp);
    end_run(&th);
    if (rank_ == 0)
        printf("ok eval and forward_probs P=%d D=%d\n", P, D);
    return 0;
}

static int check_refusals(void)
{
    pt_model_config mc = gpt_config();
    pt_optim_config oc = optim(PT_OPTIM_ADAMW);
    pt_pipeline *p = NULL;
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.transport = PT_PIPELINE_MPI;
    pc.stages = size_ / 2, pc.replicas = 2, pc.microbatches = 3, pc.micro_batch_size = MBS;
    REQUIRE(pt_pipeline_create(&mc, &oc, &pc, &p) == PT_EINVAL &&
                strstr(pt_last_error(), "multiple"),
            "3 micro-batches over 2 replicas: %s", pt_last_error());
    pc.stages = size_, pc.microbatches = 4;
    REQUIRE(pt_pipeline_create(&mc, &oc, &pc, &p) == PT_EINVAL && strstr(pt_last_error(), "ranks"),
            "stages x replicas larger than the world: %s", pt_last_error());
    pc.stages = size_ / 2, pc.schedule = "pipedream";
    REQUIRE(pt_pipeline_create(&mc, &oc, &pc, &p) == PT_OK, "pipedream with replicas (1F1B-RR): %s",
            pt_last_error());
    pt_pipeline_destroy(p);
    return 0;
}

int main(void)
{
    pt_model_config mc = gpt_config();
    pt_optim_config oc = optim(PT_OPTIM_ADAMW);
    pt_pipeline *p;
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.transport = PT_PIPELINE_MPI;
    pc.stages = 1, pc.replicas = 1;
    /* one stage on a world of 2 or 4 is refused, naming the world's size */
    if (pt_pipeline_create(&mc, &oc, &pc, &p) == PT_EUNSUPPORTED) {
        printf("skip: %s\n", pt_last_error());
        return 77;
    }
    const char *err = pt_last_error();
    const char *at = strstr(err, "started ");
    size_ = at ? atoi(at + 8) : 0;
    if (size_ < 2) {
        printf("FAIL: expected a refusal naming the world size: %s\n", err);
        return 1;
    }
    pc.stages = size_;
    if (pt_pipeline_create(&mc, &oc, &pc, &p) != PT_OK) {
        printf("FAIL: %s\n", pt_last_error());
        return 1;
    }
    rank_ = pt_pipeline_rank(p);
    check_rank = rank_;
    pt_pipeline_destroy(p);

    const char *sync[] = {"gpipe", "1f1b", "interleaved", "loopedbfs", "zbh1", "zbv"};
    int fail = 0;
    for (int i = 0; i < 6; i++) {
        int v = !strcmp(sync[i], "interleaved") || !strcmp(sync[i], "loopedbfs") ? 2 : 0;
        case_t k = {sync[i], size_, 1, 4, v};
        fail |= check_case(&k);
    }
    case_t pd = {"pipedream", size_, 1, 4, 0};
    fail |= check_case(&pd);
    for (int i = 0; i < 6; i++) {
        int v = !strcmp(sync[i], "interleaved") || !strcmp(sync[i], "loopedbfs") ? 2 : 0;
        case_t k = {sync[i], size_ / 2, 2, 8, v};
        fail |= check_case(&k);
    }
    case_t rr = {"1f1b-rr", size_ / 2, 2, 8, 0};
    fail |= check_case(&rr);
    fail |= check_eval_probs(size_, 1);
    fail |= check_eval_probs(size_ / 2, 2);
    fail |= check_refusals();
    if (!fail && rank_ == 0)
        printf("all ok on %d ranks\n", size_);
    return fail;
}
