/* trace.c: what the workers' action timestamps tell after a step.
 *
 * Every worker records each action's start and end (and, for a fused BW,
 * where its B ends) in seconds since the step began, on one clock. From them:
 *   - a Chrome/Perfetto trace-event JSON file, one track (tid) per worker,
 *     and with replicas one more below it with each chunk's gradient sum
 *     over the replicas ("reduce<c>", replica_reduce.c's start and end);
 *   - the measured bubble per worker: idle time over the step's span (first
 *     action start to last action end over all workers);
 *   - the prediction for the same step: the schedule simulator (src/sched/)
 *     played with each chunk's measured mean F, B and W times.
 * Called by the trainer and the bench after a step; reads the pipeline only
 * between steps, when the workers are idle. Under MPI a rank knows only its
 * own worker's actions: the others' tracks are empty. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/pipeline_internal.h"
#include "tensor/error.h"
#include "tensor/output_file.h"

static const char *kind_name(pt_action_kind k)
{
    switch (k) {
    case PT_ACT_F: return "F";
    case PT_ACT_B: return "B";
    case PT_ACT_W: return "W";
    case PT_ACT_BW: return "BW";
    }
    return "?";
}

/* The replicas' gradient sum of each of worker r's chunks, from the moment
 * its last backward piece ended to the moment the sum was in place here. It
 * overlaps the worker's actions, and slices on one thread's track must nest,
 * so it gets a track of its own sorted right below the worker's. */
static size_t write_reduces(const pt_pipeline *p, int r, char *buf, size_t cap)
{
    const pt_replica_reduce *red = &p->workers[r].reduce;
    size_t n = 0;
    int tid = p->P + r;
    for (int c = 0; red->used && c < red->n_chunks; c++) {
        const pt_reduce_chunk *ch = &red->chunks[c];
        if (!ch->own || ch->t0 < 0 || ch->t1 < 0)
            continue;
        if (n == 0)
            n += (size_t)snprintf(buf + n, cap - n,
                                  ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, "
                                  "\"tid\": %d, \"args\": {\"name\": \"worker %d reduce\"}}"
                                  ",\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", "
                                  "\"pid\": 0, \"tid\": %d, \"args\": {\"sort_index\": %d}}",
                                  tid, r, tid, 2 * r + 1);
        n += (size_t)snprintf(buf + n, cap - n,
                              ",\n{\"name\": \"reduce%d\", \"cat\": \"reduce\", \"ph\": \"X\", "
                              "\"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                              "\"args\": {\"chunk\": %d, \"replicas\": %d}}",
                              c, tid, ch->t0 * 1e6, (ch->t1 - ch->t0) * 1e6, c, ch->n);
    }
    return n;
}

/* Worker r's counter track: activation bytes taken from its store and
 * micro-batches in flight (activation records held), at every change. */
static size_t write_counters(const pt_pipeline *p, int r, char *buf, size_t cap)
{
    const pt_activation_store *st = &p->workers[r].store;
    size_t n = 0;
    for (int i = 0; i < st->n_samples; i++) {
        const pt_store_sample *x = &st->samples[i];
        n += (size_t)snprintf(buf + n, cap - n,
                              ",\n{\"name\": \"worker %d activations\", \"ph\": \"C\", "
                              "\"pid\": 0, \"ts\": %.3f, \"args\": {\"bytes\": %zu, "
                              "\"micro-batches\": %d}}",
                              r, (x->t - p->step_t0) * 1e6, x->bytes, x->records);
    }
    return n;
}

int pt_pipeline_write_trace(const pt_pipeline *p, const char *path)
{
    size_t cap = 256;
    for (int r = 0; r < p->P; r++)
        cap += 200 * (size_t)(p->workers[r].n_events + p->n_chunks + 4) +
               160 * (size_t)p->workers[r].store.n_samples;
    char *buf = malloc(cap);
    if (!buf)
        return pt_fail(PT_ENOMEM, "cannot allocate the trace");
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    bool first = true;
    for (int r = 0; r < p->P; r++) {
        n += (size_t)snprintf(buf + n, cap - n,
                              "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": "
                              "%d, \"args\": {\"name\": \"worker %d\"}},\n"
                              "{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 0, "
                              "\"tid\": %d, \"args\": {\"sort_index\": %d}}",
                              first ? "" : ",\n", r, r, r, 2 * r);
        first = false;
        const pt_worker *w = &p->workers[r];
        for (int i = 0; i < w->n_events; i++) {
            const pt_trace_event *e = &w->events[i];
            n += (size_t)snprintf(buf + n, cap - n,
                                  ",\n{\"name\": \"%s%d.%d\", \"cat\": \"%s\", \"ph\": \"X\", "
                                  "\"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                                  "\"args\": {\"chunk\": %d, \"mb\": %d}}",
                                  kind_name(e->kind), e->chunk, e->mb, kind_name(e->kind), r,
                                  e->t0 * 1e6, (e->t1 - e->t0) * 1e6, e->chunk, e->mb);
        }
        n += write_reduces(p, r, buf + n, cap - n);
        n += write_counters(p, r, buf + n, cap - n);
    }
    n += (size_t)snprintf(buf + n, cap - n, "\n]}\n");
    FILE *f = pt_open_output(path, "w");
    if (!f) {
        free(buf);
        return PT_EIO;
    }
    int ok = fwrite(buf, 1, n, f) == n;
    ok &= fclose(f) == 0;
    free(buf);
    return ok ? PT_OK : pt_fail(PT_EIO, "cannot write the trace to %s", path);
}

int pt_pipeline_bubbles(const pt_pipeline *p, double *measured, double *predicted)
{
    double t0 = 1e300, t1 = -1e300;
    for (int r = 0; r < p->P; r++) {
        const pt_worker *w = &p->workers[r];
        if (w->n_events == 0)
            continue;
        t0 = w->events[0].t0 < t0 ? w->events[0].t0 : t0;
        t1 = w->events[w->n_events - 1].t1 > t1 ? w->events[w->n_events - 1].t1 : t1;
    }
    if (t1 <= t0)
        return pt_fail(PT_EINVAL, "no step has been recorded yet");
    for (int r = 0; measured && r < p->P; r++) {
        const pt_worker *w = &p->workers[r];
        double busy = 0;
        for (int i = 0; i < w->n_events; i++)
            busy += w->events[i].t1 - w->events[i].t0;
        measured[r] = 1.0 - busy / (t1 - t0);
    }
    if (!predicted)
        return PT_OK;
    int K = p->n_chunks;
    double *cost = calloc((size_t)K * 3, sizeof(double));
    if (!cost)
        return pt_fail(PT_ENOMEM, "cannot allocate chunk costs");
    for (int c = 0; c < K; c++) {
        const pt_worker *w = &p->workers[pt_sched_worker_of(p->s, c, 0)];
        for (int k = 0; w->chunk_count && k < 3; k++) /* MPI: other ranks' workers are empty */
            cost[k * K + c] = w->chunk_count[c * 3 + k]
                                  ? w->chunk_time[c * 3 + k] / w->chunk_count[c * 3 + k]
                                  : 0.0;
    }
    pt_schedule_costs sc = pt_schedule_costs_default();
    sc.n_chunk_costs = K;
    sc.chunk_f = cost, sc.chunk_b = cost + K, sc.chunk_w = cost + 2 * K;
    pt_schedule_sim *sim;
    int rc = pt_schedule_simulate(p->s, &sc, &sim);
    if (rc == PT_OK) {
        for (int r = 0; r < p->P; r++)
            predicted[r] = sim->makespan > 0 ? sim->idle[r] / sim->makespan : 0.0;
        pt_schedule_sim_destroy(sim);
    }
    free(cost);
    return rc;
}

int pt_pipeline_bubble_report(const pt_pipeline *p, char *buf, size_t n)
{
    double *meas = calloc((size_t)p->P * 2, sizeof(double));
    if (!meas)
        return pt_fail(PT_ENOMEM, "cannot allocate the bubble report");
    double *pred = meas + p->P;
    int rc = pt_pipeline_bubbles(p, meas, pred);
    size_t at = 0;
    if (rc == PT_OK && n > 0) {
        buf[0] = '\0';
        at += (size_t)snprintf(buf, n, "%-8s %10s %10s\n", "worker", "bubble", "predicted");
        for (int r = 0; r < p->P && at < n; r++) {
            if (!p->workers[r].local) { /* another process's worker: not seen here */
                at += (size_t)snprintf(buf + at, n - at, "%-8d %10s %10s\n", r, "-", "-");
                continue;
            }
            at += (size_t)snprintf(buf + at, n - at, "%-8d %9.1f%% %9.1f%%\n", r, 100.0 * meas[r],
                                   100.0 * pred[r]);
        }
    }
    free(meas);
    return rc;
}
