/* pipeline.c: pt_pipeline, training one model on P workers that are threads
 * of this process or MPI ranks (pipetrain.h, "Pipelines"). Called by the
 * trainer (src/train/), `pipetrain generate`, the benchmarks and the tests.
 *
 * Creating a pipeline builds or loads the schedule, cuts the model's
 * description into chunks (a given balance, or the profiler and partitioner
 * of src/plan/), and builds each worker of this process its stage: a model
 * holding only its chunks' blocks, the optimizer moments of those, its
 * activation pool. On threads it creates the threads transport's world and
 * starts one persistent thread per worker; under MPI this process runs its
 * one worker in the calling thread. Each call then hands every local worker
 * a job and waits for all of them:
 *   TRAIN  walk the action list (executor.c), then finish the step: the
 *          replicas' and tied gradient sums, the global norm's shares and
 *          the losses exchanged (collectives.c), the optimizer step on the
 *          worker's own chunks;
 *   EVAL   the action list's forwards only, then the losses exchanged;
 *   PROBS  one micro-batch forward across the chunks;
 *   RUN    a caller's function on every worker (checkpoint shards).
 * The same code runs on both transports: only which workers are local and
 * how their endpoints move bytes differ. A failing worker records the first
 * error, aborts the world so the others wake, and the call returns that
 * error; the next call builds a new world (threads; an MPI world that failed
 * stays failed: a rank may be dead). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/memory.h"
#include "plan/partition.h"
#include "runtime/pipeline_internal.h"
#include "tensor/gemm.h"
#include "tensor/error.h"

pt_pipeline_config pt_pipeline_config_default(void)
{
    return (pt_pipeline_config){.stages = 1,
                                .microbatches = 1,
                                .micro_batch_size = 1,
                                .schedule = "1f1b",
                                .record_trace = 1,
                                .lend_idle = 1,
                                .replicas = 1,
                                .transport = PT_PIPELINE_AUTO};
}

/* ---- workers ---- */

static void record_error(pt_worker *w, int rc)
{
    pt_pipeline *p = w->p;
    pthread_mutex_lock(&p->mu);
    if (p->err_rc == PT_OK) {
        p->err_rc = rc;
        snprintf(p->err_msg, sizeof p->err_msg, "%s", pt_last_error());
    }
    pthread_mutex_unlock(&p->mu);
}

/* A step: the worker's list of the training program; every micro-batch's
 * loss reaches every worker with the norm, or after the list when the
 * program takes none. */
static int train(pt_worker *w)
{
    pt_model_params_changed(w->stage); /* a load or a caller may have written them */
    w->losses_shared = false;
    int rc = pt_executor_run(w, w->p->train_program, w->p->job_batch);
    return rc == PT_OK && !w->losses_shared ? pt_coll_share(w, false, true) : rc;
}

static int evaluate(pt_worker *w)
{
    pt_model_params_changed(w->stage);
    int rc = pt_executor_run(w, w->p->eval_program, w->p->job_batch);
    return rc == PT_OK ? pt_coll_share(w, false, true) : rc;
}

/* The eval program, each micro-batch's last output kept (run_forward), then
 * sent to every process */
static int predict(pt_worker *w)
{
    pt_pipeline *p = w->p;
    int last = pt_model_n_blocks(p->desc) - 1;
    size_t n = (size_t)p->M * p->mbs * pt_model_block_output_floats(p->desc, last);
    int rc = evaluate(w);
    return rc == PT_OK ? pt_coll_share_probs(w, p->job_outputs, n) : rc;
}

static int probs(pt_worker *w)
{
    pt_pipeline *p = w->p;
    pt_model_params_changed(w->stage);
    int rc = pt_executor_probs(w, p->job_batch, p->job_probs);
    return rc == PT_OK ? pt_coll_share_probs(w, p->job_probs, w->probs_floats) : rc;
}

static int do_job(pt_worker *w, int job)
{
    pt_pipeline *p = w->p;
    switch (job) {
    case PT_JOB_TRAIN: return train(w);
    case PT_JOB_EVAL: return evaluate(w);
    case PT_JOB_PREDICT: return predict(w);
    case PT_JOB_PROBS: return probs(w);
    case PT_JOB_RUN: return p->job_fn(p, w->global, p->job_user);
    }
    return PT_OK;
}

/* Does the job exchange with other workers? A RUN job's function works on
 * its worker's own stage alone (a checkpoint shard), so its failure is
 * returned and leaves the world as it is; any other job's failure ends the
 * world, so the workers waiting on the failed one wake. */
static bool exchanges(int job) { return job != PT_JOB_RUN; }

static void *worker_main(void *arg)
{
    pt_worker *w = arg;
    pt_pipeline *p = w->p;
    long seen = 0;
    pt_gemm_set_lending(p->lending);
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->job_gen == seen)
            pthread_cond_wait(&p->start_cv, &p->mu);
        seen = p->job_gen;
        int job = p->job;
        pthread_mutex_unlock(&p->mu);
        if (job == PT_JOB_EXIT)
            return NULL;
        int rc = do_job(w, job);
        if (rc != PT_OK) {
            record_error(w, rc);
            if (exchanges(job))
                pt_transport_abort(w->t, pt_last_error());
            if (job == PT_JOB_TRAIN || job == PT_JOB_EVAL || job == PT_JOB_PREDICT)
                pt_executor_reset(w);
        }
        pthread_mutex_lock(&p->mu);
        if (++p->n_done == p->n_ranks)
            pthread_cond_signal(&p->done_cv);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Most messages a program sends from one worker to one peer in a step. */
static int most_sends_per_link(const pt_program *prog, int P)
{
    int most = 0;
    int *count = calloc((size_t)P, sizeof *count);
    for (int w = 0; count && prog && w < P; w++) {
        memset(count, 0, sizeof *count * (size_t)P);
        for (int i = 0; i < prog->n_actions[w]; i++) {
            const pt_prog_action *a = &prog->actions[w][i];
            if (pt_prog_is_send(a->kind) && ++count[a->peer] > most)
                most = count[a->peer];
        }
    }
    free(count);
    return most;
}

/* A worker's endpoints in a world of n_ranks: itself, or with tensor
 * slices the view of its slice (transport_slice.c) over it. */
static int connect_worker(pt_pipeline *p, pt_worker *w, pt_transport *world)
{
    if (w->t != w->tensor_t)
        pt_transport_destroy(w->t);
    w->t = w->tensor_t = world;
    return p->T > 1 ? pt_transport_slice_create(world, p->T, &w->t) : PT_OK;
}

static int new_world(pt_pipeline *p)
{
    if (p->world)
        pt_threads_world_destroy(p->world);
    p->world = NULL;
    /* every message of a step fits a link's queue, so a send completes as
     * it is made and a worker's buffers do not wait on a slower peer: its
     * memory is what the planner counts, whatever the timing */
    pt_threads_options o = pt_threads_options_default();
    int most = most_sends_per_link(p->train_program, p->P);
    int eval = most_sends_per_link(p->eval_program, p->P);
    o.queue_slots = most > eval ? most : eval;
    if (o.queue_slots < 8)
        o.queue_slots = 8;
    int rc = pt_threads_world_create(p->n_ranks, &o, &p->world);
    static const pt_idle_work lend = {pt_gemm_wait_begin, pt_gemm_help, pt_gemm_wait_end};
    for (int r = 0; rc == PT_OK && r < p->n_ranks; r++) {
        pt_transport *t = pt_threads_world_endpoint(p->world, r);
        t->idle = p->lending ? &lend : NULL;
        rc = connect_worker(p, &p->workers[r], t);
    }
    if (rc != PT_OK)
        return rc;
    p->world_aborted = false;
    return PT_OK;
}

/* MPI: a failure on this rank ends the world, so every rank stops. */
int pt_ranks_abort(pt_pipeline *p, int rc)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pt_last_error());
    if (!p->world_aborted)
        snprintf(p->world_abort_msg, sizeof p->world_abort_msg, "%s", msg);
    p->world_aborted = true;
    pt_transport_abort(p->mpi_t, msg);
    return pt_fail(rc, "%s", msg);
}

static int run_local_job(pt_pipeline *p, int job)
{
    if (p->world_aborted)
        return pt_fail(PT_ETRANSPORT, "the pipeline's MPI world failed in an earlier call: %s",
                       p->world_abort_msg);
    pt_worker *w = &p->workers[p->rank];
    int rc = do_job(w, job);
    if (rc == PT_OK || !exchanges(job))
        return rc;
    rc = pt_ranks_abort(p, rc);
    if (job == PT_JOB_TRAIN || job == PT_JOB_EVAL || job == PT_JOB_PREDICT) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", pt_last_error());
        pt_executor_reset(w);
        pt_fail(rc, "%s", msg);
    }
    return rc;
}

/* Tensor slices: GPT's blocks declare their split (the model refuses
 * sizes T does not divide); the sums between pieces assume every slice
 * runs each pass once, in step. */
static int check_tensor(const pt_model_config *model, const pt_pipeline_config *cfg, int T)
{
    if (T < 1)
        return pt_fail(PT_EINVAL, "--tensor must be at least 1 (got %d)", T);
    if (T == 1)
        return PT_OK;
    if (model->kind == PT_MODEL_MLP)
        return pt_fail(PT_EINVAL,
                       "--tensor %d: an mlp's linear layers do not declare how they split; "
                       "write it as a spec with column_linear and row_linear (docs/layouts.md)",
                       T);
    if (cfg->schedule && (!strcmp(cfg->schedule, "pipedream") || !strcmp(cfg->schedule, "1f1b-rr")))
        return pt_fail(PT_EINVAL,
                       "--tensor %d: schedule %s is asynchronous; tensor slices "
                       "run synchronous schedules",
                       T, cfg->schedule);
    return PT_OK;
}

/* Runs a job on every worker and waits for all of them. */
static int run_job(pt_pipeline *p, int job)
{
    if (p->mpi)
        return run_local_job(p, job);
    if (p->world_aborted) {
        int rc = new_world(p);
        if (rc != PT_OK)
            return rc;
    }
    pthread_mutex_lock(&p->mu);
    p->job = job;
    p->n_done = 0;
    p->err_rc = PT_OK;
    p->err_msg[0] = '\0';
    p->job_gen++;
    pthread_cond_broadcast(&p->start_cv);
    while (p->n_done < p->n_ranks)
        pthread_cond_wait(&p->done_cv, &p->mu);
    int rc = p->err_rc;
    pthread_mutex_unlock(&p->mu);
    if (rc != PT_OK) {
        p->world_aborted = exchanges(job);
        return pt_fail(rc, "%s", p->err_msg);
    }
    return PT_OK;
}

/* ---- create ---- */

/* The schedule for `micro` micro-batches on `stages` workers (one replica),
 * ordered for `costs` (NULL: unit costs) where the generator takes them. */
static int base_schedule(const pt_pipeline_config *cfg, int micro, int replicas,
                         const pt_schedule_costs *costs, pt_schedule **out)
{
    int rc;
    if (cfg->schedule_file && cfg->schedule_file[0]) {
        rc = cfg->defer_w ? pt_fail(PT_EINVAL, "deferring weight passes applies to a generated "
                                               "schedule, not to a schedule file (write the "
                                               "order into the file instead)")
                          : pt_schedule_load(cfg->schedule_file, out);
    } else {
        pt_schedule_config sc = pt_schedule_config_default();
        sc.name = cfg->schedule ? cfg->schedule : "1f1b";
        sc.stages = cfg->stages;
        sc.microbatches = micro;
        sc.virtual_stages = cfg->virtual_stages;
        sc.replicas = replicas;
        sc.costs = costs;
        sc.defer_w = cfg->defer_w;
        rc = pt_schedule_create(&sc, out);
    }
    return rc == PT_OK ? pt_schedule_validate(*out) : rc;
}

/* D replicas of every stage (D = 1: one copy of each chunk), either
 * from the generator's own round-robin routing (1f1b-rr; pipedream, whose
 * replicas must update in step, which pt_ranks_replicate's renaming of a
 * synchronous list cannot express) or by replicating a synchronous schedule
 * built for M/D micro-batches. */
static int make_schedule(pt_pipeline *p, const pt_pipeline_config *cfg,
                         const pt_schedule_costs *costs)
{
    int rc, D = p->D;
    bool generated = !(cfg->schedule_file && cfg->schedule_file[0]) && cfg->schedule;
    bool rr = generated && !strcmp(cfg->schedule, "1f1b-rr");
    bool pipedream_rr = generated && D > 1 && !strcmp(cfg->schedule, "pipedream");
    if (p->M % D != 0)
        return pt_fail(PT_EINVAL,
                       "%d micro-batches cannot be shared by %d replicas: the "
                       "micro-batch count must be a multiple of the replicas",
                       p->M, D);
    if (rr || pipedream_rr) {
        rc = base_schedule(cfg, p->M, D, costs, &p->s);
    } else {
        pt_schedule *base = NULL;
        rc = base_schedule(cfg, p->M / D, 0, costs, &base);
        if (rc == PT_OK && D > 1 && pt_sched_is_async(base))
            rc = pt_fail(PT_EINVAL,
                         "schedule %s is asynchronous; replicas of its list would "
                         "drift apart: use the pipedream generator (1F1B-RR) or 1f1b-rr "
                         "for data-parallel replicas",
                         pt_schedule_name(base));
        if (rc == PT_OK && D > 1 && base->replicas != 1)
            rc = pt_fail(PT_EINVAL, "schedule %s already has %d replicas per stage",
                         pt_schedule_name(base), base->replicas);
        if (rc == PT_OK && D > 1) {
            rc = pt_ranks_replicate(base, D, p->M, &p->s);
            if (rc == PT_OK)
                rc = pt_schedule_validate(p->s);
            pt_schedule_destroy(base);
        } else {
            p->s = base;
        }
    }
    if (rc != PT_OK)
        return rc;
    const char *name = pt_schedule_name(p->s);
    if (p->s->replicas != D)
        return pt_fail(PT_EINVAL,
                       "schedule %s has %d replicas per stage, but %d were asked for "
                       "(--replicas)",
                       name, p->s->replicas, D);
    if (p->s->n_workers != cfg->stages * D)
        return pt_fail(PT_EINVAL,
                       "schedule %s is for %d workers, but %d stages x %d replicas "
                       "were asked for",
                       name, p->s->n_workers, cfg->stages, D);
    if (p->s->n_micro != cfg->microbatches)
        return pt_fail(PT_EINVAL, "schedule %s has %d micro-batches, but %d were asked for", name,
                       p->s->n_micro, cfg->microbatches);
    return PT_OK;
}

int pt_pipeline_chunk_of_block(const pt_pipeline *p, int b)
{
    for (int c = 0; c < p->n_chunks; c++)
        if (b >= p->chunk_first[c] && b <= p->chunk_last[c])
            return c;
    return -1;
}

/* The training and evaluation programs every worker runs: the schedule
 * lowered with the model's tied pairs (chunks whose blocks share a
 * parameter). */
static int make_programs(pt_pipeline *p)
{
    int n = pt_model_n_params(p->desc), n_tied = 0, rc;
    int *tied = calloc((size_t)(2 * n + 2), sizeof(int));
    if (!tied)
        return pt_fail(PT_ENOMEM, "cannot allocate the tied pairs");
    for (int i = 0; i < n; i++) {
        const pt_param *q = pt_model_param(p->desc, i);
        if (!q->tied_to)
            continue;
        int a = pt_pipeline_chunk_of_block(p, pt_model_find_param(p->desc, q->tied_to)->block);
        int b = pt_pipeline_chunk_of_block(p, q->block), seen = 0;
        for (int t = 0; t < n_tied; t++)
            seen |= tied[2 * t] == a && tied[2 * t + 1] == b;
        if (!seen)
            tied[2 * n_tied] = a, tied[2 * n_tied + 1] = b, n_tied++;
    }
    int K = p->n_chunks, *pieces = calloc(3 * (size_t)K, sizeof(int));
    if (!pieces) {
        free(tied);
        return pt_fail(PT_ENOMEM, "cannot allocate the chunks' pieces");
    }
    for (int c = 0; c < K; c++)
        for (int back = 0; back < 2; back++)
            pieces[back * K + c] =
                pt_model_tensor_pieces(p->desc, p->chunk_first[c], p->chunk_last[c], back);
    for (int c = 0; p->checkpoint && c < K; c++) /* a backward re-runs the forward's pieces first */
        pieces[K + c] += pieces[c] - 1;
    for (int c = 0; c < K; c++)
        pieces[2 * K + c] = pt_model_weight_pieces(p->desc, p->chunk_first[c], p->chunk_last[c]);
    pt_lower_options o = pt_lower_options_default();
    o.tied = tied, o.n_tied = n_tied, o.split_sent_backward = 1;
    o.tensor_pieces = p->T > 1 ? pieces : NULL;
    o.step = p->has_optim;
    o.zero = p->zero;
    o.weight_pieces = p->zero == 2 && p->has_optim ? pieces + 2 * K : NULL;
    o.sequence_sum = p->T > 1 && p->cfg.sequence_parallel;
    rc = pt_program_lower(p->s, &o, &p->train_program);
    o.forward_only = 1;
    if (rc == PT_OK)
        rc = pt_program_lower(p->s, &o, &p->eval_program);
    free(tied);
    free(pieces);
    return rc;
}

/* Each chunk's F, B and W time, the sums of its blocks' profiled times, into
 * p->chunk_cost (rank 0's on every rank: the schedule must be the same). */
static int measure_chunk_costs(pt_pipeline *p, const pt_block_profile *prof)
{
    int K = p->n_chunks;
    p->chunk_cost = calloc(3 * (size_t)K, sizeof(double));
    if (!p->chunk_cost)
        return pt_fail(PT_ENOMEM, "cannot allocate the chunks' costs");
    for (int c = 0; c < K; c++)
        for (int b = p->chunk_first[c]; b <= p->chunk_last[c]; b++) {
            p->chunk_cost[c] += prof[b].f;
            p->chunk_cost[K + c] += prof[b].b;
            p->chunk_cost[2 * K + c] += prof[b].w;
        }
    return p->mpi ? pt_ranks_agree_times(p, p->chunk_cost, 3 * K) : PT_OK;
}

static int make_partition(pt_pipeline *p, const pt_pipeline_config *cfg, bool want_costs)
{
    int n_blocks = pt_model_n_blocks(p->desc), K = p->n_chunks, rc = PT_OK;
    int *balance = calloc((size_t)K, sizeof(int));
    pt_block_profile *prof = NULL;
    p->chunk_first = calloc((size_t)K, sizeof(int));
    p->chunk_last = calloc((size_t)K, sizeof(int));
    if (!balance || !p->chunk_first || !p->chunk_last) {
        free(balance);
        return pt_fail(PT_ENOMEM, "cannot allocate the partition");
    }
    if (cfg->balance && cfg->n_balance != K)
        rc = pt_partition_check_balance(cfg->balance, cfg->n_balance, K, n_blocks);
    else if (cfg->balance) /* counts the user's layers */
        rc = pt_model_balance_blocks(p->desc, cfg->balance, K, balance);
    else if (K > n_blocks)
        rc = pt_fail(PT_EINVAL,
                     "%d chunks (stages x virtual stages) need at least %d blocks, "
                     "but the model has %d",
                     K, K, n_blocks);
    if (rc == PT_OK && !cfg->balance) {
        prof = calloc((size_t)n_blocks, sizeof *prof);
        rc = prof ? pt_profile_blocks(pt_model_get_config(p->desc), p->mbs, 3, prof)
                  : pt_fail(PT_ENOMEM, "cannot allocate the profile");
    }
    if (rc == PT_OK && !cfg->balance) {
        int stages = p->P / p->D, micro = p->M / p->D;
        int inflight = micro < stages ? micro : stages;
        rc = pt_partition_solve(prof, n_blocks, K, cfg->max_stage_memory, inflight, balance, NULL);
        /* timings differ between ranks: rank 0's partition is everyone's */
        if (rc == PT_OK && p->mpi)
            rc = pt_ranks_agree_balance(p, balance, K);
    }
    for (int c = 0, b = 0; rc == PT_OK && c < K; c++) {
        p->chunk_first[c] = b;
        b += balance[c];
        p->chunk_last[c] = b - 1;
    }
    if (rc == PT_OK && want_costs && prof)
        rc = measure_chunk_costs(p, prof);
    free(prof);
    free(balance);
    return rc;
}

/* The zero-bubble schedules ordered again for the chunks' profiled times
 * (the first order, for unit costs, gave the chunk count the partition
 * needed; the placement is the same). Only the partitioner profiles: under
 * a given balance the order stays the unit-cost one, the same on every run. */
static int order_for_costs(pt_pipeline *p, const pt_pipeline_config *cfg)
{
    int K = p->n_chunks;
    pt_schedule_costs c = pt_schedule_costs_default();
    c.n_chunk_costs = K;
    c.chunk_f = p->chunk_cost, c.chunk_b = p->chunk_cost + K, c.chunk_w = p->chunk_cost + 2 * K;
    pt_schedule *unit = p->s;
    p->s = NULL;
    int rc = make_schedule(p, cfg, &c);
    if (rc == PT_OK && p->s->n_chunks != K)
        rc = pt_fail(PT_EINVAL, "schedule %s changed its chunks when ordered for times",
                     pt_schedule_name(p->s));
    if (rc == PT_OK) {
        pt_schedule_destroy(unit);
    } else {
        pt_schedule_destroy(p->s);
        p->s = unit;
    }
    return rc;
}

/* Worker r's stage: the blocks of its chunks, their moments, the stashes. */
unsigned char *pt_worker_hold(const pt_worker *w)
{
    const pt_pipeline *p = w->p;
    unsigned char *hold = calloc((size_t)pt_model_n_blocks(p->desc), 1);
    if (!hold) {
        pt_fail(PT_ENOMEM, "cannot allocate worker %d's block list", w->rank);
        return NULL;
    }
    for (int c = 0; c < p->n_chunks; c++)
        if (pt_sched_holds(p->s, w->rank, c, NULL))
            memset(hold + p->chunk_first[c], 1, (size_t)(p->chunk_last[c] - p->chunk_first[c] + 1));
    return hold;
}

static int make_stage(pt_pipeline *p, pt_worker *w)
{
    unsigned char *hold = pt_worker_hold(w);
    if (!hold)
        return PT_ENOMEM;
    int rc = pt_model_create_slice(pt_model_get_config(p->desc), hold, 0, p->T, w->tensor_rank,
                                   p->cfg.sequence_parallel, &w->stage);
    free(hold);
    if (rc == PT_OK)
        rc = pt_model_keep_panels(w->stage);
    if (rc == PT_OK && p->has_optim)
        rc =
            p->zero ? pt_zero_make_optimizer(w) : pt_optimizer_create(w->stage, &p->optim, &w->opt);
    for (int c = 0; rc == PT_OK && p->async && c < p->n_chunks; c++)
        if (pt_sched_holds(p->s, w->rank, c, NULL))
            rc = pt_stash_init(&w->stash[c], w->stage, p->chunk_first[c], p->chunk_last[c]);
    return rc;
}

static int make_worker(pt_pipeline *p, int global)
{
    pt_worker *w = &p->workers[global];
    int r = global / p->T; /* the schedule's worker */
    w->p = p;
    w->rank = r;
    w->global = global;
    w->tensor_rank = global % p->T;
    w->local = true;
    w->tensor_group = calloc((size_t)p->T, sizeof(int));
    for (int t = 0; w->tensor_group && t < p->T; t++)
        w->tensor_group[t] = r * p->T + t;
    size_t slots = (size_t)p->n_chunks * (size_t)p->M;
    w->slots = calloc(slots, sizeof *w->slots);
    w->sends = calloc(slots * 2 + 4, sizeof *w->sends);
    w->stream_ahead = calloc((size_t)p->n_chunks * 2, sizeof(int));
    w->events = calloc((size_t)p->train_program->n_actions[r] + 1, sizeof *w->events);
    w->closing = calloc((size_t)p->train_program->n_actions[r] + 1, sizeof *w->closing);
    w->chunk_time = calloc((size_t)p->n_chunks * 3, sizeof(double));
    w->chunk_count = calloc((size_t)p->n_chunks * 3, sizeof(int));
    w->stash = calloc((size_t)p->n_chunks, sizeof *w->stash);
    w->chunk_updates = calloc((size_t)p->n_chunks, sizeof(long));
    w->shares = calloc((size_t)p->n_chunks, sizeof(double));
    w->parts = calloc((size_t)p->n_chunks * (size_t)p->D, sizeof(double));
    w->losses = calloc((size_t)p->M, sizeof(float));
    int *records = calloc((size_t)p->n_chunks, sizeof(int));
    int *grad_records = calloc((size_t)p->n_chunks, sizeof(int));
    int *outputs = calloc((size_t)p->n_chunks, sizeof(int));
    bool *own = calloc((size_t)p->n_chunks, sizeof(bool));
    int rc = w->tensor_group && w->slots && w->sends && w->stream_ahead && w->events &&
                     w->closing && w->chunk_time && w->chunk_count && w->stash &&
                     w->chunk_updates && w->shares && w->parts && w->losses && records &&
                     grad_records && outputs && own
                 ? PT_OK
                 : pt_fail(PT_ENOMEM, "cannot allocate worker %d", r);
    if (rc == PT_OK)
        rc = make_stage(p, w);
    if (rc == PT_OK)
        rc = pt_store_init(&w->store, w->stage, p->n_chunks, p->chunk_first, p->chunk_last, p->mbs);
    if (rc == PT_OK) {
        /* the planner's walk of the list: the prediction is what is reserved */
        pt_plan_worker_records(p->s, r, p->checkpoint, records);
        pt_plan_worker_grad_records(p->s, r, grad_records);
        pt_plan_worker_outputs(p->s, r, p->checkpoint, outputs);
        for (int c = 0; c < p->n_chunks; c++)
            own[c] = pt_sched_holds(p->s, r, c, NULL);
        int buffers = pt_plan_worker_buffers(p->s, r);
        rc = buffers < 0
                 ? pt_fail(PT_ENOMEM, "cannot allocate worker %d", r)
                 : pt_store_reserve(&w->store, own, records, grad_records, outputs, buffers);
    }
    if (rc == PT_OK) /* every action takes or gives at most a few things */
        rc = pt_store_keep_samples(&w->store, 6 * p->train_program->n_actions[r] + 16);
    if (rc == PT_OK)
        rc = pt_reduce_init(&w->reduce, w);
    if (rc == PT_OK && p->zero == 2 && p->has_optim)
        rc = pt_zero_scatter_init(w);
    if (rc == PT_OK) /* bf16: each replica keeps the float master of its shards */
        rc = pt_zero_shard_master(w);
    if (rc == PT_OK) /* a sample when a send goes out and one when it is over */
        rc = pt_flight_init(&w->flight,
                            2 * (p->train_program->n_actions[r] + w->reduce.n_buckets * p->D) + 16);
    free(records);
    free(grad_records);
    free(outputs);
    free(own);
    return rc;
}

static void free_worker(pt_pipeline *p, pt_worker *w)
{
    if (w->t != w->tensor_t) /* a slice's view; the world's endpoint stays */
        pt_transport_destroy(w->t);
    w->t = w->tensor_t;
    if (w->t) /* an MPI endpoint outlives the pipeline */
        pt_transport_watch(w->t, NULL);
    free(w->tensor_group);
    pt_flight_free(&w->flight);
    pt_store_free(&w->store);
    pt_store_free(&w->probe);
    pt_reduce_free(&w->reduce);
    pt_zero_scatter_free(w);
    for (int c = 0; w->stash && c < p->n_chunks; c++)
        pt_stash_free(&w->stash[c]);
    pt_optimizer_destroy(w->opt);
    pt_zero_release_moments(w);
    pt_model_destroy(w->stage);
    free(w->stash);
    free(w->chunk_updates);
    free(w->shares);
    free(w->parts);
    free(w->losses);
    free(w->slots);
    free(w->stream_ahead);
    free(w->closing);
    free(w->sends);
    free(w->events);
    free(w->chunk_time);
    free(w->chunk_count);
}

/* BLAS threads per worker: the cores of this machine shared by the workers
 * on it (threads: all P; MPI: the ranks on this node). */
static int blas_threads(const pt_pipeline *p, const pt_pipeline_config *cfg)
{
    if (cfg->blas_threads)
        return cfg->blas_threads;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long sharing = p->n_ranks;
    if (p->mpi) {
        const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        if (!local)
            local = getenv("MPI_LOCALNRANKS");
        if (local && atol(local) > 0)
            sharing = atol(local);
    }
    return (int)(cores / sharing > 1 ? cores / sharing : 1);
}

/* Threads for building the stages: on threads they are built here one
 * after another before any worker runs, so each stage's draws (model.c)
 * take every worker's threads, up to the machine's cores; under MPI each
 * rank builds its own at once, on its own. */
static int building_threads(const pt_pipeline *p, const pt_pipeline_config *cfg)
{
    long each = blas_threads(p, cfg), cores = sysconf(_SC_NPROCESSORS_ONLN);
    long all = p->mpi ? each : each * p->n_ranks;
    all = cores > 0 && all > cores ? cores : all;
    return (int)(all > each ? all : each);
}

static int start_threads(pt_pipeline *p)
{
    for (int r = 0; r < p->n_ranks; r++) {
        if (pthread_create(&p->workers[r].thread, NULL, worker_main, &p->workers[r]) != 0)
            return pt_fail(PT_ENOMEM, "cannot start worker thread %d", r);
        p->workers[r].started = true;
        int rc = pt_bind_worker(p, r); /* before its first job: it waits for one */
        if (rc != PT_OK)
            return rc;
    }
    return PT_OK;
}

int pt_pipeline_create(const pt_model_config *model, const pt_optim_config *optim,
                       const pt_pipeline_config *cfg, pt_pipeline **out)
{
    *out = NULL;
    if (!model || !cfg)
        return pt_fail(PT_EINVAL, "a pipeline needs a model config and a pipeline config");
    if (cfg->stages < 1 || cfg->microbatches < 1 || cfg->micro_batch_size < 1)
        return pt_fail(PT_EINVAL,
                       "stages (%d), micro-batches (%d) and the micro-batch size "
                       "(%d) must be at least 1",
                       cfg->stages, cfg->microbatches, cfg->micro_batch_size);
    if (cfg->blas_threads < 0)
        return pt_fail(PT_EINVAL, "BLAS threads must not be negative (got %d)", cfg->blas_threads);
    if (cfg->replicas < 0)
        return pt_fail(PT_EINVAL, "replicas must be at least 1 (got %d)", cfg->replicas);
    if (cfg->zero < 0 || cfg->zero > 2)
        return pt_fail(PT_EINVAL,
                       "zero %d: sharded optimizer state is 1 (moments) or 2 (moments and "
                       "gradient sums), 0 off",
                       cfg->zero);
    if (cfg->zero && cfg->replicas < 2)
        return pt_fail(PT_EINVAL,
                       "zero %d shards the optimizer state across a stage's replicas, but "
                       "there is %d replica: give replicas of 2 or more (--replicas)",
                       cfg->zero, cfg->replicas < 1 ? 1 : cfg->replicas);
    if (cfg->transport < PT_PIPELINE_AUTO || cfg->transport > PT_PIPELINE_MPI)
        return pt_fail(PT_EINVAL, "unknown pipeline transport %d", (int)cfg->transport);
    pt_transport *mpi_t;
    int rc = pt_ranks_endpoint(cfg->transport, &mpi_t);
    if (rc != PT_OK)
        return rc;
    int D = cfg->replicas ? cfg->replicas : 1, T = cfg->tensor ? cfg->tensor : 1;
    if ((rc = check_tensor(model, cfg, T)) != PT_OK)
        return rc;
    if (mpi_t && (long)cfg->stages * T * D != pt_transport_size(mpi_t))
        return pt_fail(PT_EINVAL,
                       "%d stages x %d tensor slices x %d replicas need %ld MPI ranks, but "
                       "mpirun started %d",
                       cfg->stages, T, D, (long)cfg->stages * T * D, pt_transport_size(mpi_t));
    pt_pipeline *p = calloc(1, sizeof *p);
    if (!p)
        return pt_fail(PT_ENOMEM, "cannot allocate a pipeline");
    p->mpi = mpi_t != NULL;
    p->mpi_t = mpi_t;
    p->rank = mpi_t ? pt_transport_rank(mpi_t) : 0;
    p->D = D;
    p->zero = cfg->zero;
    p->T = T;
    p->reduce_overlap = true;
    p->reduce_bucket_floats = PT_BUCKET_FLOATS;
    p->has_optim = optim != NULL;
    if (optim)
        p->optim = *optim;
    p->cfg = *cfg;
    p->cfg.balance = NULL; /* not kept: the caller's array */
    p->cfg.schedule_file = NULL;
    p->cfg.schedule = NULL;
    p->P = cfg->stages * D;
    p->n_ranks = p->P * T;
    p->M = cfg->microbatches;
    p->mbs = cfg->micro_batch_size;
    p->checkpoint = cfg->checkpoint_activations != 0;
    if (cfg->bind_cores && (rc = pt_bind_plan(p, blas_threads(p, cfg))) != PT_OK) {
        free(p);
        return rc;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);

    rc = pt_model_create_slice(model, NULL, 1, T, 0, cfg->sequence_parallel,
                               &p->desc); /* slice 0's shapes */
    if (rc == PT_OK && optim) { /* the settings, checked on the description (no tensors) */
        pt_optimizer *probe = NULL;
        rc = pt_optimizer_create(p->desc, optim, &probe);
        pt_optimizer_destroy(probe);
    }
    if (rc == PT_OK)
        rc = make_schedule(p, cfg, NULL);
    bool want_costs = rc == PT_OK && !(cfg->schedule_file && cfg->schedule_file[0]) &&
                      cfg->schedule && pt_schedule_takes_costs(cfg->schedule);
    if (rc == PT_OK) {
        snprintf(p->schedule_name, sizeof p->schedule_name, "%s", pt_schedule_name(p->s));
        p->n_chunks = p->s->n_chunks;
        p->async = pt_sched_is_async(p->s);
        /* the executor's tags, then two per chunk for the replicas' sum */
        if ((long)p->n_chunks * (p->M + 1) * 2 > (long)PT_TAG_FIRST_CONTROL)
            rc = pt_fail(PT_EINVAL,
                         "%d chunks x %d micro-batches are more than the transport's "
                         "tags can name",
                         p->n_chunks, p->M);
    }
    if (rc == PT_OK) {
        p->all_workers = calloc((size_t)p->n_ranks, sizeof(int));
        p->workers = calloc((size_t)p->n_ranks, sizeof *p->workers);
        if (!p->all_workers || !p->workers)
            rc = pt_fail(PT_ENOMEM, "cannot allocate the pipeline's workers");
        for (int r = 0; rc == PT_OK && r < p->n_ranks; r++)
            p->all_workers[r] = r;
    }
    if (rc == PT_OK)
        rc = make_partition(p, cfg, want_costs);
    if (rc == PT_OK && p->chunk_cost)
        rc = order_for_costs(p, cfg);
    if (rc == PT_OK)
        rc = make_programs(p);
    p->loss_scale = 1.0f / (float)(p->async ? p->D : p->M); /* a micro-batch's share of an update */
    bool building = rc == PT_OK;
    if (building)
        rc = pt_blas_set_threads(building_threads(p, cfg));
    for (int r = 0; rc == PT_OK && r < p->n_ranks; r++)
        if (!p->mpi || r == p->rank)
            rc = make_worker(p, r);
    if (building) { /* what each worker runs on */
        int r2 = pt_blas_set_threads(blas_threads(p, cfg));
        rc = rc == PT_OK ? r2 : rc;
    }
    if (p->mpi) {
        if (rc == PT_OK)
            rc = connect_worker(p, &p->workers[p->rank], p->mpi_t);
    } else {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        p->lending =
            cfg->lend_idle && blas_threads(p, cfg) == 1 && p->n_ranks > 1 && p->n_ranks <= cores;
        if (rc == PT_OK)
            rc = new_world(p);
        if (rc == PT_OK)
            rc = start_threads(p);
    }
    if (rc != PT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", pt_last_error());
        pt_pipeline_destroy(p);
        return pt_fail(rc, "%s", msg);
    }
    *out = p;
    return PT_OK;
}

void pt_pipeline_destroy(pt_pipeline *p)
{
    if (!p)
        return;
    bool any = false;
    for (int r = 0; p->workers && r < p->n_ranks; r++)
        any |= p->workers[r].started;
    if (any) {
        pthread_mutex_lock(&p->mu);
        p->job = PT_JOB_EXIT;
        p->job_gen++;
        pthread_cond_broadcast(&p->start_cv);
        pthread_mutex_unlock(&p->mu);
        for (int r = 0; r < p->n_ranks; r++)
            if (p->workers[r].started)
                pthread_join(p->workers[r].thread, NULL);
    }
    for (int r = 0; p->workers && r < p->n_ranks; r++)
        free_worker(p, &p->workers[r]);
    if (p->world)
        pt_threads_world_destroy(p->world);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start_cv);
    pthread_cond_destroy(&p->done_cv);
    pt_program_destroy(p->train_program);
    pt_program_destroy(p->eval_program);
    pt_schedule_destroy(p->s);
    pt_model_destroy(p->desc);
    free(p->workers);
    free(p->all_workers);
    free(p->bind_cpus);
    free(p->chunk_first);
    free(p->chunk_last);
    free(p->chunk_cost);
    free(p);
}

/* ---- steps ---- */

static int check_batch(const pt_pipeline *p, const pt_microbatch *batch, bool targets)
{
    pt_model_io io = pt_model_get_io(p->desc);
    if (!batch)
        return pt_fail(PT_EINVAL, "no batch");
    if (batch->batch != p->M * p->mbs)
        return pt_fail(PT_EINVAL, "a batch of %d samples is not %d micro-batches of %d",
                       batch->batch, p->M, p->mbs);
    if (io.tokens ? !batch->tokens : !batch->inputs)
        return pt_fail(PT_EINVAL, "the batch has no %s", io.tokens ? "tokens" : "inputs");
    if (targets && (io.values ? !batch->target_values : !batch->targets))
        return pt_fail(PT_EINVAL, "training needs %s", io.values ? "target values" : "targets");
    return PT_OK;
}

static float mean_of(const float *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return n ? (float)(s / n) : 0.0f;
}

/* The worker of this process that speaks for it: its lowest. */
static const pt_worker *lead(const pt_pipeline *p) { return &p->workers[p->rank]; }

int pt_pipeline_train_step(pt_pipeline *p, const pt_microbatch *batch, long step, float lr,
                           float *mean_loss)
{
    if (!p->has_optim)
        return pt_fail(PT_EINVAL, "this pipeline was created without an optimizer: it runs "
                                  "forward passes only");
    int rc = check_batch(p, batch, true);
    if (rc != PT_OK)
        return rc;
    p->job_batch = batch;
    p->job_step = step;
    p->job_lr = lr;
    p->step_t0 = pt_pipeline_now();
    if ((rc = run_job(p, PT_JOB_TRAIN)) != PT_OK)
        return rc;
    p->last_skipped = lead(p)->skip; /* the same on every worker: one global norm */
    if (mean_loss)
        *mean_loss = mean_of(lead(p)->losses, p->M);
    return PT_OK;
}

int pt_pipeline_last_step_skipped(const pt_pipeline *p, double *norm, int *stage)
{
    const pt_worker *w = lead(p);
    if (norm)
        *norm = w->norm;
    if (stage) {
        /* the backward runs from the last chunk to the first: the last chunk
         * whose gradient is not finite is where it went wrong first */
        *stage = -1;
        for (int c = p->n_chunks - 1; p->last_skipped && c >= 0 && *stage < 0; c--)
            if (!isfinite(w->shares[c]))
                *stage = pt_sched_worker_of(p->s, c, 0) / p->D;
    }
    return p->last_skipped;
}

int pt_pipeline_eval(pt_pipeline *p, const pt_microbatch *batch, float *mean_loss)
{
    int rc = check_batch(p, batch, false);
    if (rc != PT_OK)
        return rc;
    p->job_batch = batch;
    p->step_t0 = pt_pipeline_now();
    if ((rc = run_job(p, PT_JOB_EVAL)) != PT_OK)
        return rc;
    if (mean_loss)
        *mean_loss = mean_of(lead(p)->losses, p->M);
    return PT_OK;
}

int pt_pipeline_predict(pt_pipeline *p, const pt_microbatch *batch, float *outputs,
                        float *mean_loss)
{
    int rc = check_batch(p, batch, false);
    if (rc == PT_OK && !outputs)
        rc = pt_fail(PT_EINVAL, "predict needs an output buffer");
    if (rc != PT_OK)
        return rc;
    p->job_batch = batch;
    p->job_outputs = outputs;
    p->step_t0 = pt_pipeline_now();
    rc = run_job(p, PT_JOB_PREDICT);
    p->job_outputs = NULL;
    if (rc == PT_OK && mean_loss)
        *mean_loss = mean_of(lead(p)->losses, p->M);
    return rc;
}

int pt_pipeline_forward_probs(pt_pipeline *p, const pt_microbatch *mb, float *probs)
{
    if (!mb || mb->batch < 1 || !probs)
        return pt_fail(PT_EINVAL, "forward_probs needs a micro-batch of at least one sample "
                                  "and an output buffer");
    p->job_batch = mb;
    p->job_probs = probs;
    return run_job(p, PT_JOB_PROBS);
}

int pt_pipeline_run(pt_pipeline *p, int (*fn)(pt_pipeline *p, int worker, void *user), void *user)
{
    p->job_fn = fn;
    p->job_user = user;
    return run_job(p, PT_JOB_RUN);
}

/* ---- accessors ---- */

const float *pt_pipeline_losses(const pt_pipeline *p) { return lead(p)->losses; }
int pt_pipeline_workers(const pt_pipeline *p) { return p->P; }
int pt_pipeline_ranks(const pt_pipeline *p) { return p->n_ranks; }

const char *pt_rank_heading(const pt_pipeline *p) { return p->T > 1 ? "rank w/t" : "worker"; }

void pt_rank_label(const pt_pipeline *p, int rank, char *buf, size_t n)
{
    if (p->T > 1)
        snprintf(buf, n, "%d %d/%d", rank, rank / p->T, rank % p->T);
    else
        snprintf(buf, n, "%d", rank);
}
int pt_pipeline_chunks(const pt_pipeline *p) { return p->n_chunks; }
int pt_pipeline_stages(const pt_pipeline *p) { return p->P / p->D; }
int pt_pipeline_replicas(const pt_pipeline *p) { return p->D; }
int pt_pipeline_zero(const pt_pipeline *p) { return p->zero; }
const char *pt_pipeline_schedule_name(const pt_pipeline *p) { return p->schedule_name; }
const pt_schedule *pt_pipeline_schedule(const pt_pipeline *p) { return p->s; }
const char *pt_pipeline_transport_name(const pt_pipeline *p) { return p->mpi ? "mpi" : "threads"; }
int pt_pipeline_rank(const pt_pipeline *p) { return p->rank; }
int pt_pipeline_is_main(const pt_pipeline *p) { return p->rank == 0; }
const pt_model_config *pt_pipeline_model_config(const pt_pipeline *p)
{
    return pt_model_get_config(p->desc);
}
const pt_model *pt_pipeline_description(const pt_pipeline *p) { return p->desc; }

int pt_pipeline_chunk_blocks(const pt_pipeline *p, int c, int *first, int *last)
{
    if (c < 0 || c >= p->n_chunks)
        return pt_fail(PT_EINVAL, "chunk %d is not one of the pipeline's %d", c, p->n_chunks);
    *first = p->chunk_first[c];
    *last = p->chunk_last[c];
    return PT_OK;
}

int pt_pipeline_chunk_worker(const pt_pipeline *p, int c)
{
    return c >= 0 && c < p->n_chunks ? pt_sched_worker_of(p->s, c, 0) : -1;
}

size_t pt_pipeline_peak_activation_bytes(const pt_pipeline *p, int worker)
{
    return worker >= 0 && worker < p->n_ranks ? p->workers[worker].store.peak_bytes : 0;
}

pt_worker *pt_local_worker(const pt_pipeline *p, int rank)
{
    return rank >= 0 && rank < p->n_ranks && p->workers[rank].local ? &p->workers[rank] : NULL;
}

static const pt_worker *local_worker(const pt_pipeline *p, int worker)
{
    return pt_local_worker(p, worker);
}

pt_model *pt_pipeline_stage(pt_pipeline *p, int worker)
{
    const pt_worker *w = local_worker(p, worker);
    return w ? w->stage : NULL;
}

pt_optimizer *pt_pipeline_stage_optimizer(pt_pipeline *p, int worker)
{
    const pt_worker *w = local_worker(p, worker);
    return !w ? NULL : w->full_opt ? w->full_opt : w->opt; /* sharded: gathered for a save */
}

int pt_pipeline_gather_moments(pt_pipeline *p, int worker)
{
    pt_worker *w = pt_local_worker(p, worker);
    return w ? pt_zero_gather_moments(w) : PT_OK;
}

int pt_pipeline_gather_master(pt_pipeline *p, int worker)
{
    pt_worker *w = pt_local_worker(p, worker);
    return w ? pt_zero_gather_master(w) : PT_OK;
}

int pt_pipeline_params_loaded(pt_pipeline *p, int worker)
{
    pt_worker *w = pt_local_worker(p, worker);
    return w ? pt_zero_shard_master(w) : PT_OK;
}

void pt_pipeline_release_moments(pt_pipeline *p, int worker)
{
    pt_worker *w = pt_local_worker(p, worker);
    if (w)
        pt_zero_release_moments(w);
}

void pt_pipeline_take_moments(pt_pipeline *p, int worker, pt_optimizer *full)
{
    pt_worker *w = pt_local_worker(p, worker);
    if (w && w->opt)
        pt_zero_take_moments(w, full);
}

int pt_pipeline_worker_stage(const pt_pipeline *p, int rank, int *replica)
{
    if (rank < 0 || rank >= p->n_ranks)
        return -1;
    int D = p->s->replicas, worker = rank / p->T;
    for (int c = 0; c < p->n_chunks; c++)
        for (int k = 0; k < D; k++)
            if (p->s->chunk_worker[c * D + k] == worker) {
                if (replica)
                    *replica = k;
                return p->s->chunk_worker[c * D] / D;
            }
    return -1;
}

int pt_pipeline_read_param(const pt_pipeline *p, const char *name, int which, float *dst)
{
    for (int r = 0; r < p->n_ranks; r++) {
        const pt_worker *w = local_worker(p, r);
        const pt_param *q = w ? pt_model_find_param(w->stage, name) : NULL;
        if (!q || !q->data)
            continue;
        if (which < 0 && w->stage->n_master &&
            pt_model_master_shards(w->stage, (int)(q - pt_model_param(w->stage, 0))))
            return pt_fail(PT_EINVAL,
                           "parameter %s: its float master is sharded across the stage's "
                           "replicas (bf16 with --zero); a checkpoint saved from the run holds "
                           "it whole",
                           name);
        const float *src = q->data;
        if (which >= 0) {
            int i = (int)(q - pt_model_param(w->stage, 0));
            pt_optimizer *o = w->full_opt ? w->full_opt : w->opt; /* sharded: gathered */
            src = o ? pt_optimizer_state(o, w->stage, i, which) : NULL;
            if (!src)
                return pt_fail(PT_EINVAL, "parameter %s has no optimizer moment %d", name, which);
        }
        memcpy(dst, src, q->numel * sizeof(float));
        return PT_OK;
    }
    return pt_fail(PT_EINVAL, "no worker of this process holds parameter %s", name);
}
