/* simulate.c: plays a schedule against a cost model and says how long it
 * takes, how much each worker idles, and how many activations each holds at
 * its peak. The planner compares schedules with it, `pipetrain schedule`
 * prints and draws what it returns, and the tests hold it to the closed forms
 * of the field (tests/test_sched_bubble.c).
 *
 * Model: every worker runs its actions in order, one at a time, each as soon
 * as the worker is free and its inputs are there, as deps.c states them:
 * F(c, m) needs F(c-1, m); B or BW(c, m) needs F(c, m) and B(c+1, m);
 * W(c, m) needs B(c, m). An input
 * produced on another worker arrives `latency` after the producing action
 * ends; on the same worker at once. A link with a bandwidth adds each
 * transfer's wire time, the transfers on one link (one direction between two
 * workers) one after another in the order they are sent.
 * F, B and W of chunk c cost f, b, w (or
 * the per-chunk arrays); a fused BW costs b + w. An action whose output goes
 * to another worker also holds its worker for `send` more (a runtime whose
 * sends block, as Megatron-LM's 1F1B does); the output leaves after that.
 *
 * A micro-batch's activations on a chunk are live from the end of its F to
 * the end of the last backward piece that reads them (its W, or its BW);
 * the peak is counted in (chunk, micro-batch) pairs.
 */
#include <math.h>
#include <stdlib.h>

#include "sched/deps.h"
#include "sched/schedule.h"
#include "tensor/error.h"

pt_schedule_costs pt_schedule_costs_default(void)
{
    return (pt_schedule_costs){.f = 1.0, .b = 1.0, .w = 1.0, .latency = 0.0, .collective = 0.0};
}

static bool bad_cost(double x) { return !isfinite(x) || x < 0; }

int pt_sched_check_costs(int n_chunks, const pt_schedule_costs *c)
{
    if (bad_cost(c->f) || bad_cost(c->b) || bad_cost(c->w) || bad_cost(c->latency) ||
        bad_cost(c->send) || bad_cost(c->collective) || bad_cost(c->bandwidth) ||
        bad_cost(c->transfer_bytes))
        return pt_fail(PT_EINVAL,
                       "costs must be finite and >= 0 (F %g, B %g, W %g, latency %g, send %g, "
                       "collective %g, bandwidth %g, transfer bytes %g)",
                       c->f, c->b, c->w, c->latency, c->send, c->collective, c->bandwidth,
                       c->transfer_bytes);
    if (c->boundary_bytes && c->n_chunk_costs != n_chunks)
        return pt_fail(PT_EINVAL, "bytes per boundary need per-chunk costs (%d chunks)", n_chunks);
    if (c->n_chunk_costs == 0)
        return PT_OK;
    if (c->n_chunk_costs != n_chunks || !c->chunk_f || !c->chunk_b || !c->chunk_w)
        return pt_fail(PT_EINVAL, "per-chunk costs: %d given, the schedule has %d chunks",
                       c->n_chunk_costs, n_chunks);
    for (int i = 0; i < n_chunks; i++)
        if (bad_cost(c->chunk_f[i]) || bad_cost(c->chunk_b[i]) || bad_cost(c->chunk_w[i]) ||
            (c->boundary_bytes && bad_cost(c->boundary_bytes[i])))
            return pt_fail(PT_EINVAL, "chunk %d: costs must be finite and >= 0", i);
    return PT_OK;
}

double pt_sched_link_arrival(const pt_schedule_costs *c, int boundary, double leaves,
                             double *link_free)
{
    double wire = 0;
    if (c->bandwidth > 0) {
        double bytes = c->boundary_bytes ? c->boundary_bytes[boundary] : c->transfer_bytes;
        wire = bytes / c->bandwidth;
    }
    double on = leaves > *link_free ? leaves : *link_free;
    *link_free = on + wire;
    return *link_free + c->latency;
}

double pt_sched_duration(const pt_schedule_costs *c, const pt_action *a)
{
    bool per = c->n_chunk_costs > 0;
    double f = per ? c->chunk_f[a->chunk] : c->f;
    double b = per ? c->chunk_b[a->chunk] : c->b;
    double w = per ? c->chunk_w[a->chunk] : c->w;
    switch (a->kind) {
    case PT_ACT_F: return f;
    case PT_ACT_B: return b;
    case PT_ACT_W: return w;
    default: return b + w;
    }
}

void pt_schedule_sim_destroy(pt_schedule_sim *sim)
{
    if (!sim)
        return;
    for (int w = 0; w < sim->workers; w++) {
        if (sim->start)
            free(sim->start[w]);
        if (sim->end)
            free(sim->end[w]);
    }
    free(sim->start);
    free(sim->end);
    free(sim->busy);
    free(sim->idle);
    free(sim->peak_activations);
    free(sim->n_actions);
    free(sim);
}

pt_schedule_sim *pt_sched_sim_alloc(int P, const int *n_actions)
{
    pt_schedule_sim *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->workers = P;
    r->busy = calloc((size_t)P, sizeof(double));
    r->idle = calloc((size_t)P, sizeof(double));
    r->peak_activations = calloc((size_t)P, sizeof(int));
    r->n_actions = calloc((size_t)P, sizeof(int));
    r->start = calloc((size_t)P, sizeof(double *));
    r->end = calloc((size_t)P, sizeof(double *));
    if (!r->busy || !r->idle || !r->peak_activations || !r->n_actions || !r->start || !r->end) {
        pt_schedule_sim_destroy(r);
        return NULL;
    }
    for (int w = 0; w < P; w++) {
        size_t n = (size_t)(n_actions[w] > 0 ? n_actions[w] : 1);
        r->n_actions[w] = n_actions[w];
        r->start[w] = calloc(n, sizeof(double));
        r->end[w] = calloc(n, sizeof(double));
        if (!r->start[w] || !r->end[w]) {
            pt_schedule_sim_destroy(r);
            return NULL;
        }
    }
    return r;
}

void pt_sched_sim_finish(pt_schedule_sim *r, const double *free_at)
{
    int P = r->workers;
    double idle = 0;
    for (int w = 0; w < P; w++)
        r->makespan = free_at[w] > r->makespan ? free_at[w] : r->makespan;
    for (int w = 0; w < P; w++) {
        r->idle[w] = r->makespan - r->busy[w];
        idle += r->idle[w];
        double at_work = r->n_actions[w] > 0 ? free_at[w] - r->start[w][0] : 0;
        r->span = at_work > r->span ? at_work : r->span;
    }
    r->bubble_fraction = r->makespan > 0 ? idle / ((double)P * r->makespan) : 0.0;
}

int pt_schedule_simulate(const pt_schedule *s, const pt_schedule_costs *costs,
                         pt_schedule_sim **out)
{
    *out = NULL;
    pt_schedule_costs dflt = pt_schedule_costs_default();
    if (!costs)
        costs = &dflt;
    int rc = pt_sched_check_costs(s->n_chunks, costs);
    if (rc == PT_OK)
        rc = pt_schedule_validate(s);
    return rc == PT_OK ? pt_sched_play(s, costs, out) : rc;
}

int pt_sched_play(const pt_schedule *s, const pt_schedule_costs *costs, pt_schedule_sim **out)
{
    *out = NULL;
    int rc = PT_OK, P = s->n_workers, M = s->n_micro;
    size_t n = (size_t)s->n_chunks * (size_t)M;
    pt_schedule_sim *r = pt_sched_sim_alloc(P, s->n_actions);
    /* [k]: when F (or the backward) of chunk/micro-batch k ended, and when
     * its output is there for the worker that reads it */
    double *f_end = malloc(n * sizeof(double)), *b_end = malloc(n * sizeof(double));
    double *f_arrive = malloc(n * sizeof(double)), *b_arrive = malloc(n * sizeof(double));
    double *free_at = calloc((size_t)P, sizeof(double));
    double *link_free = calloc((size_t)P * (size_t)P, sizeof(double)); /* [from * P + to] */
    int *next = calloc((size_t)P, sizeof(int)), *live = calloc((size_t)P, sizeof(int));
    if (!r || !f_end || !b_end || !f_arrive || !b_arrive || !free_at || !link_free || !next ||
        !live) {
        rc = pt_fail(PT_ENOMEM, "out of memory simulating a schedule");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        f_end[i] = b_end[i] = -1;

    /* On a validated schedule a topological order exists; any order of
     * evaluation gives the same times, so sweep until every worker is done
     * (an unvalidated one that stalls is reported below). */
    for (bool progress = true; progress;) {
        progress = false;
        for (int w = 0; w < P; w++)
            while (next[w] < s->n_actions[w]) {
                const pt_action *a = &s->actions[w][next[w]];
                size_t k = (size_t)a->chunk * (size_t)M + (size_t)a->mb;
                double ready = free_at[w];
                pt_need need[PT_NEEDS_MAX];
                int n_need = pt_sched_needs(s->n_chunks, a, need), j;
                for (j = 0; j < n_need; j++) {
                    size_t at = (size_t)need[j].chunk * (size_t)M + (size_t)need[j].mb;
                    double end = need[j].kind == PT_ACT_F ? f_end[at] : b_end[at];
                    if (end < 0)
                        break;
                    int from = pt_sched_worker_of(s, need[j].chunk, need[j].mb);
                    double t = from == w                  ? end
                               : need[j].kind == PT_ACT_F ? f_arrive[at]
                                                          : b_arrive[at];
                    ready = t > ready ? t : ready;
                }
                if (j < n_need)
                    break;
                double d = pt_sched_duration(costs, a);
                int to = pt_sched_send_to(s, a);
                if (to >= 0 && to != w)
                    d += costs->send;
                r->start[w][next[w]] = ready;
                r->end[w][next[w]] = ready + d;
                free_at[w] = ready + d;
                r->busy[w] += d;
                double arrive = ready + d;
                if (to >= 0 && to != w) /* F(c) feeds chunk c+1; B(c) feeds chunk c-1 */
                    arrive = pt_sched_link_arrival(
                        costs, a->kind == PT_ACT_F ? a->chunk + 1 : a->chunk, ready + d,
                        &link_free[(size_t)w * (size_t)P + (size_t)to]);
                if (a->kind == PT_ACT_F) {
                    f_arrive[k] = arrive;
                    f_end[k] = ready + d;
                    if (++live[w] > r->peak_activations[w])
                        r->peak_activations[w] = live[w];
                } else {
                    if (a->kind != PT_ACT_W) {
                        b_end[k] = ready + d;
                        b_arrive[k] = arrive;
                    }
                    if (a->kind != PT_ACT_B)
                        live[w]--;
                }
                next[w]++;
                progress = true;
            }
    }
    for (int w = 0; w < P; w++)
        if (next[w] < s->n_actions[w]) {
            rc = pt_fail(PT_EDEADLOCK, "simulation stalled on worker %d", w);
            goto done;
        }
    pt_sched_sim_finish(r, free_at);
done:
    free(f_end);
    free(b_end);
    free(f_arrive);
    free(b_arrive);
    free(link_free);
    free(free_at);
    free(next);
    free(live);
    if (rc == PT_OK)
        *out = r;
    else
        pt_schedule_sim_destroy(r);
    return rc;
}
