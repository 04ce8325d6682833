/* test_mpi_replicas_overlap: with data-parallel replicas, each chunk's
 * gradient sum over the replicas starts while the action list still runs,
 * and the step is bit for bit the one the blocking sum after the list takes.
 *
 * mpi-ranks: 4
 *
 * 2 stages x 2 replicas, 8 micro-batches, 3 AdamW steps with clipping, for
 * gpipe, 1f1b, interleaved (v = 2), zbh1, zbv and 1f1b-rr, each twice on
 * every rank: with the overlapped sum (the default) and with reduce_overlap
 * off (blocking all-reduce calls after the list, as before the overlap).
 *   - parameters, both moments and every loss are bit-identical (memcmp),
 *     with buckets of 4 MiB and with buckets of 1000 floats (a chunk's span
 *     is then many buckets and a short last one);
 *   - interleaved: on every rank the first chunk's sum starts before the
 *     worker's last action begins (the other chunk's backward is still to
 *     run), every own chunk's sum has a start and an end, and the Chrome
 *     trace holds one "reduce" slice per own chunk on the worker's reduce
 *     track, and a transport counter whose bytes in flight rose and are
 *     back to 0 at the end of the step;
 * then prints the step time with and without overlap for interleaved on a
 * larger model (information only: ranks share this machine's cores). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipetrain.h"
#include "runtime/pipeline_internal.h"
#include "tensor/rng.h"

#include "check.h"
#include "pipeline_params.h"

#define STEPS 3
#define MBS   2
#define M     8
#define LR    1e-2f

static int rank_ = -1;

static pt_model_config gpt_config(int embd)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 6, c.n_head = 2, c.n_embd = embd, c.seq_len = 8, c.vocab = 32, c.seed = 5;
    return c; /* 8 blocks */
}

static void make_batch(const pt_model_config *c, int s, int *tokens, pt_microbatch *mb)
{
    pt_rng r;
    pt_rng_seed(&r, 300 + (uint64_t)s);
    int rows = M * MBS * c->seq_len;
    for (int i = 0; i <= rows; i++)
        tokens[i] = (int)pt_rng_below(&r, (uint64_t)c->vocab);
    *mb = (pt_microbatch){.batch = M * MBS, .tokens = tokens, .targets = tokens + 1};
}

typedef struct {
    pt_model *m;
    pt_optimizer *o;
    pt_pipeline *p;
    float losses[STEPS][M];
    double step_s[STEPS];
    unsigned char held[1024];
} run_t;

static void end_run(run_t *r)
{
    pt_pipeline_destroy(r->p);
    pt_optimizer_destroy(r->o);
    pt_model_destroy(r->m);
    memset(r, 0, sizeof *r);
}

/* A 2 x 2 pipeline; bucket 0 keeps the default. Returns PT_* of create. */
static int start(const char *schedule, int embd, bool overlap, size_t bucket, run_t *r)
{
    memset(r, 0, sizeof *r);
    pt_model_config mc = gpt_config(embd);
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    oc.grad_clip = 0.5f;
    int rc = pt_model_create(&mc, &r->m);
    if (rc == PT_OK)
        rc = pt_optimizer_create(r->m, &oc, &r->o);
    if (rc != PT_OK)
        return rc;
    int v = !strcmp(schedule, "interleaved") ? 2 : 0;
    int K = !strcmp(schedule, "zbv") || v ? 4 : 2, balance[4];
    for (int c = 0; c < K; c++)
        balance[c] = 8 / K;
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = 2, pc.replicas = 2, pc.microbatches = M, pc.micro_batch_size = MBS;
    pc.schedule = schedule, pc.virtual_stages = v;
    pc.balance = balance, pc.n_balance = K;
    pc.blas_threads = 1, pc.transport = PT_PIPELINE_MPI;
    if ((rc = pt_pipeline_create(&mc, &oc, &pc, &r->p)) != PT_OK)
        return rc;
    rank_ = pt_pipeline_rank(r->p);
    check_rank = rank_;
    r->p->reduce_overlap = overlap;
    if (bucket) {
        pt_worker *w = &r->p->workers[rank_];
        r->p->reduce_bucket_floats = bucket;
        pt_reduce_free(&w->reduce);
        rc = pt_reduce_init(&w->reduce, w);
    }
    return rc;
}

static int train(run_t *r, int embd)
{
    pt_model_config mc = gpt_config(embd);
    int *tokens = malloc(sizeof(int) * (size_t)(M * MBS * mc.seq_len + 1));
    for (int s = 0; s < STEPS; s++) {
        pt_microbatch mb;
        make_batch(&mc, s, tokens, &mb);
        double t0 = pt_pipeline_now();
        int rc = pt_pipeline_train_step(r->p, &mb, s, LR, NULL);
        r->step_s[s] = pt_pipeline_now() - t0;
        if (rc != PT_OK) {
            free(tokens);
            REQUIRE(0, "step %d: %s", s, pt_last_error());
        }
        memcpy(r->losses[s], pt_pipeline_losses(r->p), sizeof(float) * M);
    }
    free(tokens);
    REQUIRE(pipeline_copy_out(r->p, r->m, r->o, r->held) > 0, "copy out: %s", pt_last_error());
    return 0;
}

/* Every parameter and moment this rank holds, and every loss, bit for bit. */
static int same(const run_t *a, const run_t *b, const char *what)
{
    int which, i = pipeline_first_difference(a->m, a->o, b->m, b->o, a->held, &which);
    REQUIRE(i < 0, "%s: %s of %s differs", what, which < 0 ? "the value" : "moment",
            pt_model_param(a->m, i)->name);
    REQUIRE(!memcmp(a->losses, b->losses, sizeof a->losses), "%s: losses differ", what);
    return 0;
}

/* The sums of this rank's chunks started inside the list and are in the trace. */
static int check_overlap(const run_t *r)
{
    const pt_worker *w = &r->p->workers[rank_];
    const pt_replica_reduce *red = &w->reduce;
    REQUIRE(red->used && w->n_events > 0, "no reduction or no actions recorded");
    const pt_trace_event *last = &w->events[w->n_events - 1];
    double first = 1e300;
    int own = 0;
    for (int c = 0; c < red->n_chunks; c++) {
        const pt_reduce_chunk *ch = &red->chunks[c];
        if (!ch->own)
            continue;
        own++;
        REQUIRE(ch->t0 >= 0 && ch->t1 >= ch->t0, "chunk %d: reduce from %g to %g", c, ch->t0,
                ch->t1);
        first = ch->t0 < first ? ch->t0 : first;
    }
    REQUIRE(own == 2, "interleaved v=2 on 2 stages: %d own chunks, expected 2", own);
    REQUIRE(first < last->t0,
            "the first chunk's sum started at %.6f s, not before the last action (%.6f s)", first,
            last->t0);
    char path[64];
    snprintf(path, sizeof path, "/tmp/pt_overlap_trace_%d_%d.json", (int)getpid(), rank_);
    REQUIRE(pt_pipeline_write_trace(r->p, path) == PT_OK, "trace: %s", pt_last_error());
    FILE *f = fopen(path, "r");
    REQUIRE(f, "cannot read %s back", path);
    static char text[1 << 18];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    unlink(path);
    text[n] = '\0';
    int slices = 0;
    for (const char *at = text; (at = strstr(at, "\"cat\": \"reduce\"")); at++)
        slices++;
    char track[64];
    snprintf(track, sizeof track, "\"worker %d reduce\"", rank_);
    REQUIRE(slices == own && strstr(text, track), "trace: %d reduce slices (expected %d), track %s",
            slices, own, strstr(text, track) ? "present" : "missing");
    /* the sends of the list and of the sums went through MPI and are over */
    const pt_flight_log *fl = &w->flight;
    size_t most = 0;
    for (int i = 0; i < fl->n; i++)
        most = fl->samples[i].bytes > most ? fl->samples[i].bytes : most;
    snprintf(track, sizeof track, "\"worker %d transport\"", rank_);
    REQUIRE(fl->n > 2 && most > 0 && fl->samples[fl->n - 1].bytes == 0 && strstr(text, track),
            "transport counter: %d samples, peak %zu, last %zu bytes in flight, track %s", fl->n,
            most, fl->n ? fl->samples[fl->n - 1].bytes : 0,
            strstr(text, track) ? "present" : "missing");
    if (rank_ == 0) {
        printf("interleaved rank 0: first chunk's sum %.2f..%.2f ms, last action ends %.2f ms\n",
               first * 1e3, red->chunks[2].t1 * 1e3, last->t1 * 1e3);
        fflush(stdout);
    }
    return 0;
}

static int check_schedule(const char *schedule, size_t bucket)
{
    run_t on, off;
    int rc = start(schedule, 16, false, bucket, &off);
    REQUIRE(rc == PT_OK, "%s without overlap: %s", schedule, pt_last_error());
    rc = start(schedule, 16, true, bucket, &on);
    REQUIRE(rc == PT_OK, "%s with overlap: %s", schedule, pt_last_error());
    if (train(&off, 16) || train(&on, 16))
        return 1;
    char what[96];
    snprintf(what, sizeof what, "%s, buckets of %zu floats", schedule,
             bucket ? bucket : PT_BUCKET_FLOATS);
    if (same(&on, &off, what))
        return 1;
    if (!strcmp(schedule, "interleaved") && check_overlap(&on))
        return 1;
    end_run(&on);
    end_run(&off);
    if (rank_ == 0) {
        printf("ok %-12s %s: overlapped sum bit-identical to the blocking one\n", schedule,
               what + strlen(schedule) + 2);
        fflush(stdout);
    }
    return 0;
}

static double median3(const double *x)
{
    double a = x[0], b = x[1], c = x[2];
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

/* Step time with and without overlap: information, not a check. */
static int report_times(void)
{
    run_t on, off;
    if (start("interleaved", 64, false, 0, &off) != PT_OK ||
        start("interleaved", 64, true, 0, &on) != PT_OK)
        REQUIRE(0, "timing runs: %s", pt_last_error());
    if (train(&off, 64) || train(&on, 64))
        return 1;
    if (rank_ == 0)
        printf("interleaved 2x2, embd 64: step %.2f ms blocking, %.2f ms overlapped "
               "(median of %d; 4 ranks share this machine's cores)\n",
               median3(off.step_s) * 1e3, median3(on.step_s) * 1e3, STEPS);
    end_run(&on);
    end_run(&off);
    return 0;
}

int main(void)
{
    run_t probe;
    int rc = start("1f1b", 16, true, 0, &probe);
    if (rc == PT_EUNSUPPORTED) {
        printf("skip: %s\n", pt_last_error());
        return 77;
    }
    if (rc != PT_OK) {
        printf("FAIL: 2 stages x 2 replicas over MPI: %s\n", pt_last_error());
        return 1;
    }
    end_run(&probe);
    const char *sync[] = {"gpipe", "1f1b", "interleaved", "zbh1", "zbv", "1f1b-rr"};
    int fail = 0;
    for (int i = 0; i < 6; i++) {
        fail |= check_schedule(sync[i], 0);
        fail |= check_schedule(sync[i], 1000);
    }
    fail |= report_times();
    if (!fail && rank_ == 0)
        printf("all ok\n");
    return fail;
}
