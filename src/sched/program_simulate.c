/* program_simulate.c: plays a program (program.h) against the cost model
 * of the schedule simulator (simulate.c) and returns the same result: when
 * each action starts and ends, makespan, busy and idle time per worker, the
 * bubble fraction and peak live activations. Called through
 * pt_program_simulate() by `pipetrain schedule --program` and the tests,
 * which hold it to the schedule simulator: for a lowered schedule the two
 * give the same makespan and bubble (tests/test_program_simulate.c).
 *
 * Model: every worker runs its actions in order, one at a time, each as
 * soon as the worker is free and, by deps.c, what it waits for from other
 * workers is there:
 *   compute    costs f, b, w of its chunk (a BW b + w); its inputs are
 *              earlier on the worker or came through a receive before it;
 *   send       takes `send` of the worker's time (0: an isend that overlaps
 *              what follows); the data leaves when it ends, goes on the
 *              wire when the link (this direction between the two workers)
 *              is free, holds it for its bytes over the bandwidth, and
 *              arrives `latency` later;
 *   receive    ends when the data has arrived (at once if it is there),
 *              taking no worker time of its own: waiting is idle time;
 *   REDUCE, TIED, NORM   blocking collectives: start when the last member of
 *              the group reaches it, last `collective` on every member
 *              (counted busy);
 *   STEP       no time.
 * With zero collective cost a program adds nothing to its schedule's time:
 * a send ends when the piece producing it ends, and a receive where the
 * schedule simulator would have the input arrive.
 */
#include <stdlib.h>

#include "sched/deps.h"
#include "sched/program.h"
#include "tensor/error.h"

typedef struct {
    const pt_program *p;
    const pt_schedule_costs *costs;
    pt_schedule_sim *r;
    double *free_at;   /* [w] */
    double *sent;      /* [d * C * M + c * M + m]: when the send of direction d (0 activation,
                          1 gradient) of chunk c's piece for m arrives; -1 not yet sent */
    double *link_free; /* [from * P + to]: when the link is free for the next transfer */
    int *next, *live, *members;
} player;

static double *sent_at(player *g, const pt_prog_action *a, int chunk)
{
    bool grad = a->kind == PT_PROG_SEND_GRAD || a->kind == PT_PROG_RECV_GRAD;
    size_t CM = (size_t)g->p->shape->n_chunks * (size_t)g->p->shape->n_micro;
    return &g->sent[(size_t)grad * CM + (size_t)chunk * (size_t)g->p->shape->n_micro +
                    (size_t)a->mb];
}

static void record(player *g, int w, double start, double d)
{
    g->r->start[w][g->next[w]] = start;
    g->r->end[w][g->next[w]] = start + d;
    g->r->busy[w] += d;
    g->free_at[w] = start + d;
    g->next[w]++;
}

/* Runs a collective if every member is at it; false if one is not yet. */
static bool play_collective(player *g, int w, const pt_prog_action *a)
{
    const pt_program *p = g->p;
    int n = pt_prog_group(p, w, a, g->members);
    double start = 0;
    for (int m = 0; m < n; m++) {
        int v = g->members[m];
        /* the validator has proved every member reaches its collectives in
         * one order, so a member at one like a is at this one */
        if (g->next[v] >= p->n_actions[v] ||
            !pt_prog_same_collective(&p->actions[v][g->next[v]], a))
            return false;
        start = g->free_at[v] > start ? g->free_at[v] : start;
    }
    for (int m = 0; m < n; m++)
        record(g, g->members[m], start, g->costs->collective);
    return true;
}

/* Runs worker w's next action if it can; false if it waits. */
static bool play_one(player *g, int w)
{
    const pt_prog_action *a = &g->p->actions[w][g->next[w]];
    double ready = g->free_at[w];
    if (pt_prog_is_collective(a->kind))
        return play_collective(g, w, a);
    if (pt_prog_is_recv(a->kind)) {
        double t = *sent_at(g, a, pt_prog_transfer_chunk(g->p->shape->n_chunks, a));
        if (t < 0)
            return false;
        record(g, w, t > ready ? t : ready, 0);
        return true;
    }
    double d = 0;
    if (pt_prog_is_send(a->kind)) {
        d = g->costs->send;
        int boundary = a->kind == PT_PROG_SEND_ACT ? a->chunk + 1 : a->chunk;
        size_t link = (size_t)w * (size_t)g->p->shape->n_workers + (size_t)a->peer;
        *sent_at(g, a, a->chunk) =
            pt_sched_link_arrival(g->costs, boundary, ready + d, &g->link_free[link]);
    }
    if (a->kind == PT_PROG_TENSOR_SUM && g->costs->bandwidth > 0)
        d = g->costs->collective + g->costs->tensor_sum_bytes / g->costs->bandwidth;
    else if (a->kind == PT_PROG_TENSOR_SUM || a->kind == PT_PROG_SEQUENCE_SUM)
        d = g->costs->collective;
    if (pt_prog_is_compute(a->kind)) {
        pt_action c = pt_prog_compute(a);
        d = pt_sched_duration(g->costs, &c);
        if (a->kind == PT_PROG_F && ++g->live[w] > g->r->peak_activations[w])
            g->r->peak_activations[w] = g->live[w];
        if (a->kind == PT_PROG_W || a->kind == PT_PROG_BW)
            g->live[w]--;
    }
    record(g, w, ready, d);
    return true;
}

int pt_program_simulate(const pt_program *p, const pt_schedule_costs *costs, pt_schedule_sim **out)
{
    *out = NULL;
    pt_schedule_costs dflt = pt_schedule_costs_default();
    if (!costs)
        costs = &dflt;
    int rc = pt_program_validate(p);
    if (rc == PT_OK)
        rc = pt_sched_check_costs(p->shape->n_chunks, costs);
    if (rc != PT_OK)
        return rc;
    int P = p->shape->n_workers;
    size_t n_sent = 2 * (size_t)p->shape->n_chunks * (size_t)p->shape->n_micro;
    player g = {.p = p, .costs = costs, .r = pt_sched_sim_alloc(P, p->n_actions)};
    g.free_at = calloc((size_t)P, sizeof(double));
    g.sent = malloc(n_sent * sizeof(double));
    g.next = calloc((size_t)P, sizeof(int));
    g.live = calloc((size_t)P, sizeof(int));
    g.members = calloc((size_t)P, sizeof(int));
    g.link_free = calloc((size_t)P * (size_t)P, sizeof(double));
    if (!g.r || !g.free_at || !g.sent || !g.next || !g.live || !g.members || !g.link_free) {
        rc = pt_fail(PT_ENOMEM, "out of memory simulating a program");
        goto done;
    }
    for (size_t i = 0; i < n_sent; i++)
        g.sent[i] = -1;
    /* the validator has proved the play ends; any order of evaluation gives
     * the same times, so sweep until every worker is done */
    for (bool progress = true; progress;) {
        progress = false;
        for (int w = 0; w < P; w++)
            while (g.next[w] < p->n_actions[w] && play_one(&g, w))
                progress = true;
    }
    for (int w = 0; w < P && rc == PT_OK; w++)
        if (g.next[w] < p->n_actions[w])
            rc = pt_fail(PT_EDEADLOCK, "simulation stalled on worker %d", w);
    if (rc == PT_OK)
        pt_sched_sim_finish(g.r, g.free_at);
done:
    free(g.free_at);
    free(g.sent);
    free(g.next);
    free(g.live);
    free(g.members);
    free(g.link_free);
    if (rc == PT_OK)
        *out = g.r;
    else
        pt_schedule_sim_destroy(g.r);
    return rc;
}

int pt_schedule_simulate_run(const pt_schedule *s, const pt_schedule_costs *costs,
                             pt_schedule_sim **out)
{
    *out = NULL;
    pt_lower_options o = pt_lower_options_default();
    o.split_sent_backward = 1;
    pt_program *prog = NULL;
    if (pt_program_lower(s, &o, &prog) != PT_OK)
        return pt_schedule_simulate(s, costs, out);
    int rc = pt_program_simulate(prog, costs, out);
    pt_program_destroy(prog);
    return rc;
}
