/* memory_report.c: what each rank of a pipeline holds, measured beside
 * what the planner predicts (plan/memory.h), by kind, and each process's
 * peak resident memory. Measured is what the rank's stage, optimizer,
 * stashes, activation pool (and its blocks' one workspace) and reduction
 * buffers have allocated; predicted
 * is computed from the model's description, the schedule and the partition
 * alone. With tensor slices a rank is one slice of a schedule worker: the
 * description is a slice's (pipeline.c), so the prediction is the slice's
 * parameters, moments and activations, the same for every slice of a
 * worker. Under MPI every process fills in its own rank and one exact sum
 * tells every process about all of them. Called by the trainer at the end
 * of a run and by the tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/memory.h"
#include "runtime/pipeline_internal.h"
#include "tensor/error.h"

enum { KINDS = 6, FIELDS = 2 * KINDS + 1 };

static void measure(const pt_worker *w, pt_memory_use *u)
{
    memset(u, 0, sizeof *u);
    u->params = pt_model_held_bytes(w->stage);
    /* zero 2: the owned shards, and the most one weight piece held beside them */
    u->grads = w->scatter_req ? pt_zero_owned_grad_bytes(w) + w->scatter_peak
                              : w->stage->grad.used * sizeof(float);
    u->moments = pt_optimizer_bytes(w->opt);
    for (int c = 0; w->stash && c < w->p->n_chunks; c++) {
        const pt_weight_stash *st = &w->stash[c];
        u->stash += (size_t)(st->n_stash + (st->current != NULL)) * st->floats * sizeof(float);
    }
    u->activations = pt_store_allocated_bytes(&w->store) + w->stage->work_bytes;
    u->comm =
        (w->reduce.scratch_floats + 2 * (size_t)(w->p->D - 1) * w->scatter_floats) * sizeof(float);
}

static int predict(const pt_pipeline *p, int worker, pt_memory_use *u)
{
    pt_memory_plan mp = {.desc = p->desc,
                         .s = p->s,
                         .chunk_first = p->chunk_first,
                         .chunk_last = p->chunk_last,
                         .micro_batch_size = p->mbs,
                         .checkpoint_activations = p->checkpoint,
                         .zero = p->zero,
                         .bucket_floats = p->reduce_bucket_floats,
                         .moments = !p->has_optim                   ? 0
                                    : p->optim.kind == PT_OPTIM_SGD ? 1
                                                                    : 2};
    return pt_plan_worker_memory(&mp, worker, u);
}

static void to_counts(const pt_memory_use *u, uint64_t *v)
{
    const size_t f[KINDS] = {u->params, u->grads, u->moments, u->stash, u->activations, u->comm};
    for (int k = 0; k < KINDS; k++)
        v[k] = f[k];
}

static void from_counts(const uint64_t *v, pt_memory_use *u)
{
    *u = (pt_memory_use){v[0], v[1], v[2], v[3], v[4], v[5]};
}

int pt_pipeline_memory(pt_pipeline *p, pt_memory_use *measured, pt_memory_use *predicted,
                       size_t *peak_rss)
{
    uint64_t *v = calloc((size_t)p->n_ranks * FIELDS, sizeof(uint64_t));
    if (!v)
        return pt_fail(PT_ENOMEM, "cannot allocate the memory report");
    size_t rss = pt_process_peak_rss();
    for (int r = 0; r < p->n_ranks; r++) {
        const pt_worker *w = &p->workers[r];
        if (!w->local)
            continue;
        pt_memory_use u;
        measure(w, &u);
        to_counts(&u, v + (size_t)r * FIELDS);
        v[(size_t)r * FIELDS + 2 * KINDS] = rss;
    }
    int rc = pt_coll_sum_counts(p, v, (size_t)p->n_ranks * FIELDS);
    for (int r = 0; rc == PT_OK && r < p->n_ranks; r++) {
        if (measured)
            from_counts(v + (size_t)r * FIELDS, &measured[r]);
        if (peak_rss)
            peak_rss[r] = v[(size_t)r * FIELDS + 2 * KINDS];
        if (predicted)
            rc = predict(p, r / p->T, &predicted[r]);
    }
    free(v);
    return rc;
}

static double mib(size_t b) { return (double)b / (1024.0 * 1024.0); }

int pt_pipeline_memory_report(const pt_pipeline *p, const pt_memory_use *measured,
                              const pt_memory_use *predicted, const size_t *peak_rss, char *buf,
                              size_t n)
{
    if (!measured || !predicted || !peak_rss || !buf || n == 0)
        return pt_fail(PT_EINVAL, "the memory report needs the figures and a buffer");
    size_t at = (size_t)snprintf(buf, n, "%-7s %-9s %9s %9s %9s %9s %9s %9s %10s %10s %9s\n",
                                 "rank", "s/r/t", "params", "grads", "moments", "stash", "activ",
                                 "comm", "total", "predicted", "peak RSS");
    for (int r = 0; r < p->n_ranks && at < n; r++) {
        const pt_memory_use *u = &measured[r];
        int w = r / p->T; /* rank = (stage x D + replica) x T + slice */
        char where[40];
        snprintf(where, sizeof where, "%d/%d/%d", w / p->D, w % p->D, r % p->T);
        at += (size_t)snprintf(
            buf + at, n - at, "%-7d %-9s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %10.1f %10.1f %9.1f\n",
            r, where, mib(u->params), mib(u->grads), mib(u->moments), mib(u->stash),
            mib(u->activations), mib(u->comm), mib(pt_memory_total(u)),
            mib(pt_memory_total(&predicted[r])), mib(peak_rss[r]));
    }
    if (at < n)
        snprintf(buf + at, n - at,
                 "(MiB; s/r/t: stage, replica, tensor slice; total is what the rank "
                 "allocated, predicted the planner's figure; peak RSS is its process's%s)\n",
                 p->mpi ? "" : ", shared by every rank on threads");
    return PT_OK;
}
