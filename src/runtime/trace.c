/* trace.c: what the workers' action timestamps tell after a step.
 *
 * Every worker records each action's start and end (and, for a fused BW,
 * where its B ends) in seconds since the step began, on one clock. From them:
 *   - a Chrome/Perfetto trace-event JSON file of one or more steps on one
 *     time axis (pt_trace): a track of the steps, one track (tid) per rank
 *     (a worker, or with tensor slices each slice of one) with its actions
 *     and its tensor group's sums ("AF0.3/1": the sum before piece 1 of
 *     F0.3, the piece after it as F0.3) and then the actions that close the
 *     step ("T0-3", "L", "N", "S", "G0", category "step end"); with
 *     replicas one more track below it with each chunk's gradient sum over
 *     the replicas ("reduce<c>", replica_reduce.c's start and end); and per
 *     worker two counters: the activation store's bytes and micro-batches
 *     in flight (activation_store.c), and the bytes its transport endpoint
 *     has sent and not yet handed over (transport.h);
 *   - the measured bubble per rank: idle time over the step's span (first
 *     action start to last action end over all ranks); a tensor sum counts
 *     as busy, as the simulator counts it in the pass;
 *   - the prediction for the same step: the program the workers ran (its
 *     sends where the executor makes them, a fused backward's input
 *     gradient leaving before its weight pass) played by the program
 *     simulator (sched/program_simulate.c) with each chunk's measured mean
 *     F, B and W times.
 * Called by the trainer and the bench after a step; reads the pipeline only
 * between steps, when the workers are idle. Under MPI a rank knows only its
 * own worker's actions: the others' tracks are empty. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/pipeline_internal.h"
#include "sched/textbuf.h"
#include "tensor/error.h"
#include "tensor/output_file.h"

struct pt_trace {
    int P;            /* ranks, fixed by the first step */
    int T;            /* tensor slices of a worker: rank r is slice r % T of r / T */
    bool *reduces;    /* [P]: rank r's reduce track has slices */
    double origin;    /* the first step's start: time 0 of the trace */
    int n_steps;      /* steps added */
    pt_textbuf event; /* every event so far, each after ",\n" */
};

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

int pt_trace_create(pt_trace **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? PT_OK : pt_fail(PT_ENOMEM, "cannot allocate a trace");
}

void pt_trace_destroy(pt_trace *t)
{
    if (!t)
        return;
    free(t->reduces);
    pt_textbuf_free(&t->event);
    free(t);
}

/* The replicas' gradient sum of each of worker r's chunks, from the moment
 * its last backward piece ended to the moment the sum was in place here. It
 * overlaps the worker's actions, and slices on one thread's track must nest,
 * so it gets a track of its own sorted right below the worker's. */
static void add_reduces(pt_trace *t, const pt_pipeline *p, int r, double at, long step)
{
    const pt_replica_reduce *red = &p->workers[r].reduce;
    for (int c = 0; red->used && c < red->n_chunks; c++) {
        const pt_reduce_chunk *ch = &red->chunks[c];
        if (!ch->own || ch->t0 < 0 || ch->t1 < 0)
            continue;
        t->reduces[r] = true;
        pt_textbuf_printf(&t->event,
                          ",\n{\"name\": \"reduce%d\", \"cat\": \"reduce\", \"ph\": \"X\", "
                          "\"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                          "\"args\": {\"chunk\": %d, \"replicas\": %d, \"step\": %ld}}",
                          c, p->n_ranks + r, at + ch->t0 * 1e6, (ch->t1 - ch->t0) * 1e6, c, ch->n,
                          step);
    }
}

/* Rank r's closing actions (TIED, SEQUENCE_SUM, NORM, STEP, GATHER) on its
 * track after its compute, named as the program's text names them. */
static void add_closing(pt_trace *t, const pt_worker *w, int r, double at, long step)
{
    char name[48];
    for (int i = 0; i < w->n_closing; i++) {
        const pt_trace_closing *c = &w->closing[i];
        pt_prog_action_str(&c->action, name, sizeof name);
        pt_textbuf_printf(&t->event,
                          ",\n{\"name\": \"%s\", \"cat\": \"step end\", \"ph\": \"X\", "
                          "\"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                          "\"args\": {\"step\": %ld}}",
                          name, r, at + c->t0 * 1e6, (c->t1 - c->t0) * 1e6, step);
    }
}

/* Worker r's counters, at every change over the step: activation bytes
 * taken from its store and micro-batches in flight (activation records
 * held); the bytes its endpoint has sent and not yet handed over. */
static void add_counters(pt_trace *t, const pt_pipeline *p, int r)
{
    const pt_worker *w = &p->workers[r];
    for (int i = 0; i < w->store.n_samples; i++) {
        const pt_store_sample *x = &w->store.samples[i];
        pt_textbuf_printf(&t->event,
                          ",\n{\"name\": \"worker %d activations\", \"ph\": \"C\", \"pid\": 0, "
                          "\"ts\": %.3f, \"args\": {\"bytes\": %zu, \"micro-batches\": %d}}",
                          r, (x->t - t->origin) * 1e6, x->bytes, x->records);
    }
    for (int i = 0; i < w->flight.n; i++) {
        const pt_flight_sample *x = &w->flight.samples[i];
        pt_textbuf_printf(&t->event,
                          ",\n{\"name\": \"worker %d transport\", \"ph\": \"C\", \"pid\": 0, "
                          "\"ts\": %.3f, \"args\": {\"bytes in flight\": %zu}}",
                          r, (x->t - t->origin) * 1e6, x->bytes);
    }
}

static void add_slice(pt_trace *t, const char *name, const char *cat, const pt_trace_event *e,
                      int r, double at, double t0, double t1, long step)
{
    pt_textbuf_printf(&t->event,
                      ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 0, "
                      "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"chunk\": %d, "
                      "\"mb\": %d, \"piece\": %d, \"step\": %ld}}",
                      name, cat, r, at + t0 * 1e6, (t1 - t0) * 1e6, e->chunk, e->mb, e->piece,
                      step);
}

/* A compute action as one slice; a tensor sum as the sum's slice
 * (AF or AB, as the program's text names it) and the piece after it; a
 * weight pass's SCATTER (zero 2: X) likewise. */
static void add_event(pt_trace *t, const pt_trace_event *e, int r, double at, long step)
{
    char name[48];
    snprintf(name, sizeof name, "%s%d.%d", kind_name(e->kind), e->chunk, e->mb);
    if (e->piece == 0) {
        add_slice(t, name, kind_name(e->kind), e, r, at, e->t0, e->t1, step);
        return;
    }
    char sum[64];
    bool scatter = e->kind == PT_ACT_W;
    snprintf(sum, sizeof sum, "%s%s/%d", scatter ? "X" : "A", scatter ? name + 1 : name,
             e->piece - 1);
    add_slice(t, sum, scatter ? "gradient scatter" : "tensor sum", e, r, at, e->t0, e->ts, step);
    add_slice(t, name, kind_name(e->kind), e, r, at, e->ts, e->t1, step);
}

int pt_trace_add_step(pt_trace *t, const pt_pipeline *p, long step)
{
    int n = p->n_ranks;
    if (t->n_steps == 0) {
        t->P = n, t->T = p->T;
        t->origin = p->step_t0;
        if (!(t->reduces = calloc((size_t)n, sizeof *t->reduces)))
            return pt_fail(PT_ENOMEM, "cannot allocate the trace");
    } else if (t->P != n) {
        return pt_fail(PT_EINVAL, "a trace of %d ranks cannot take a step of %d", t->P, n);
    }
    double at = (p->step_t0 - t->origin) * 1e6; /* the step's start on the trace's axis */
    double first = 1e300, last = -1e300;
    for (int r = 0; r < n; r++) {
        const pt_worker *w = &p->workers[r];
        for (int i = 0; i < w->n_events; i++) {
            const pt_trace_event *e = &w->events[i];
            first = e->t0 < first ? e->t0 : first;
            last = e->t1 > last ? e->t1 : last;
            add_event(t, e, r, at, step);
        }
        add_reduces(t, p, r, at, step);
        add_closing(t, w, r, at, step);
        add_counters(t, p, r);
    }
    if (last >= first)
        pt_textbuf_printf(&t->event,
                          ",\n{\"name\": \"step %ld%s\", \"cat\": \"step\", \"ph\": \"X\", "
                          "\"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                          "\"args\": {\"step\": %ld}}",
                          step, p->last_skipped ? " (skipped)" : "", 2 * n, at + first * 1e6,
                          (last - first) * 1e6, step);
    t->n_steps++;
    return t->event.failed ? pt_fail(PT_ENOMEM, "cannot allocate the trace") : PT_OK;
}

/* A track's name and its place: the steps on top, then each worker with its
 * reduce track right below it. */
static void name_track(pt_textbuf *b, int tid, const char *name, int sort)
{
    pt_textbuf_printf(b,
                      ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, "
                      "\"args\": {\"name\": \"%s\"}},\n"
                      "{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 0, "
                      "\"tid\": %d, \"args\": {\"sort_index\": %d}}",
                      tid, name, tid, sort);
}

int pt_trace_write(const pt_trace *t, const char *path)
{
    if (t->n_steps == 0)
        return pt_fail(PT_EINVAL, "no step has been traced, so %s was not written", path);
    pt_textbuf b = {0};
    pt_textbuf_puts(&b, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n"
                        "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, "
                        "\"args\": {\"name\": \"pipetrain\"}}");
    name_track(&b, 2 * t->P, "steps", -1);
    char name[48];
    for (int r = 0; r < t->P; r++) {
        if (t->T > 1)
            snprintf(name, sizeof name, "worker %d slice %d", r / t->T, r % t->T);
        else
            snprintf(name, sizeof name, "worker %d", r);
        name_track(&b, r, name, 2 * r);
        strcat(name, " reduce");
        if (t->reduces[r])
            name_track(&b, t->P + r, name, 2 * r + 1);
    }
    pt_textbuf_puts(&b, t->event.data ? t->event.data : "");
    pt_textbuf_puts(&b, "\n]}\n");
    char *text;
    int rc = pt_textbuf_finish(&b, &text);
    if (rc != PT_OK)
        return rc;
    FILE *f = pt_open_output(path, "w");
    if (!f) {
        free(text);
        return PT_EIO;
    }
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n;
    ok &= fclose(f) == 0;
    free(text);
    return ok ? PT_OK : pt_fail(PT_EIO, "cannot write the trace to %s", path);
}

int pt_pipeline_write_trace(const pt_pipeline *p, const char *path)
{
    pt_trace *t;
    int rc = pt_trace_create(&t);
    if (rc == PT_OK)
        rc = pt_trace_add_step(t, p, p->job_step + 1);
    if (rc == PT_OK)
        rc = pt_trace_write(t, path);
    pt_trace_destroy(t);
    return rc;
}

int pt_pipeline_bubbles(const pt_pipeline *p, double *measured, double *predicted)
{
    int n = p->n_ranks;
    double t0 = 1e300, t1 = -1e300;
    for (int r = 0; r < n; r++) {
        const pt_worker *w = &p->workers[r];
        if (w->n_events == 0)
            continue;
        t0 = w->events[0].t0 < t0 ? w->events[0].t0 : t0;
        t1 = w->events[w->n_events - 1].t1 > t1 ? w->events[w->n_events - 1].t1 : t1;
    }
    if (t1 <= t0)
        return pt_fail(PT_EINVAL, "no step has been recorded yet");
    for (int r = 0; measured && r < n; r++) {
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
    for (int c = 0; c < K; c++) { /* slice 0 of the worker of the chunk's first replica */
        const pt_worker *w = &p->workers[pt_sched_worker_of(p->s, c, 0) * p->T];
        for (int k = 0; w->chunk_count && k < 3; k++) /* MPI: other ranks' workers are empty */
            cost[k * K + c] = w->chunk_count[c * 3 + k]
                                  ? w->chunk_time[c * 3 + k] / w->chunk_count[c * 3 + k]
                                  : 0.0;
    }
    pt_schedule_costs sc = pt_schedule_costs_default();
    sc.n_chunk_costs = K;
    sc.chunk_f = cost, sc.chunk_b = cost + K, sc.chunk_w = cost + 2 * K;
    pt_schedule_sim *sim;
    int rc = pt_program_simulate(p->train_program, &sc, &sim);
    if (rc == PT_OK) {
        for (int r = 0; r < n; r++) /* the slices of a worker share its prediction */
            predicted[r] = sim->makespan > 0 ? sim->idle[r / p->T] / sim->makespan : 0.0;
        pt_schedule_sim_destroy(sim);
    }
    free(cost);
    return rc;
}

int pt_pipeline_bubble_report(const pt_pipeline *p, char *buf, size_t n)
{
    int n_ranks = p->n_ranks;
    double *meas = calloc((size_t)n_ranks * 2, sizeof(double));
    if (!meas)
        return pt_fail(PT_ENOMEM, "cannot allocate the bubble report");
    double *pred = meas + n_ranks;
    int rc = pt_pipeline_bubbles(p, meas, pred);
    size_t at = 0;
    if (rc == PT_OK && n > 0) {
        buf[0] = '\0';
        char label[32];
        at += (size_t)snprintf(buf, n, "%-10s %10s %10s\n", pt_rank_heading(p), "bubble",
                               "predicted");
        for (int r = 0; r < n_ranks && at < n; r++) {
            pt_rank_label(p, r, label, sizeof label);
            if (!p->workers[r].local) { /* another process's worker: not seen here */
                at += (size_t)snprintf(buf + at, n - at, "%-10s %10s %10s\n", label, "-", "-");
                continue;
            }
            at += (size_t)snprintf(buf + at, n - at, "%-10s %9.1f%% %9.1f%%\n", label,
                                   100.0 * meas[r], 100.0 * pred[r]);
        }
    }
    free(meas);
    return rc;
}
