/* gen_zerobubble.c: the zero-bubble schedules of Qi et al., "Zero Bubble
 * Pipeline Parallelism" (ICLR 2024), which split each backward into B (the
 * input gradient, on the critical path) and W (the weight gradient, which
 * nobody waits for) and move the W passes into what would be bubbles:
 *
 *   zbh1  one chunk per worker. F and B run in 1f1b's order (P-1-r warm-up
 *         forwards on worker r, then F/B pairs, then the drain); each W
 *         trails its B by r backwards, so worker r ends with r W passes that
 *         fill the drain 1f1b leaves idle there. Bubble (P-1)(F+B-W) per
 *         worker, a third of 1f1b's when F = B = W. A micro-batch stays live
 *         until its W, so worker r holds at most (P-r) + r = P: 1f1b's peak
 *         (worker 0's), never more than min(P, M).
 *   zbv   two chunks per worker in a V: chunk c < P on worker c, chunk
 *         c >= P on worker 2P-1-c, so worker 0 holds the first and the last
 *         chunk. Its order comes from a greedy rule: a free worker runs a
 *         ready B (oldest micro-batch, then later chunk), else a ready F
 *         while it has fewer than 2P chunk activations live (1f1b's worker 0
 *         peak in half-stage chunks; later chunk first), else a pending W
 *         (oldest first), else waits.
 *   zbh2  ZB-H2: one chunk per worker, the same greedy rule with worker r
 *         allowed 2(P-r)-1 micro-batches between F and B (Qi et al.'s
 *         (2p-2i+1) M_B, worker i = r+1), the forwards that fill the
 *         warm-up bubble before the first B, and no cap until W. On unit
 *         costs the steady state is 1F-1B-1W and the drain is all W: a
 *         parallelogram, bubble (P-1)(F+B-2W) per worker.
 *
 * Built for times: the greedy rule is played in time, as the simulator
 * plays a schedule (a pass starts when its worker is free and its inputs
 * are there, an input from another worker `latency` after its pass ends, a
 * blocking send holds its sender), on the unit costs (F = B = W = 1, the
 * orders of the field's pictures) and on the config's costs (per chunk
 * allowed: a run's measured ones). Two yes/no choices are searched on a
 * grid, as Qi et al.'s ZB-V scheduler searches its own: whether a pending W
 * waits rather than delay a B or F whose input is known to arrive before it
 * would end, and whether a ready F goes before a ready B right after a B
 * (1F1B's alternation, which keeps chunks in step when B costs more than
 * F). Every play keeps the caps above; a play the caps stop is dropped.
 * The order the costs finish first is kept (a tie keeps the earlier play:
 * on unit costs the plain greedy). zbh1 also plays the greedy rule under
 * its own caps (1f1b's in flight, P live) and keeps its fixed order unless
 * a played one finishes first. For P = 4, M = 16, F = W = 1, B = 2 the V
 * built for the times takes 136 where the unit order took 189.
 *
 * The automatic schedules zb1p and zb2p, searched for measured times and a
 * memory limit, are in gen_zb_auto.c.
 *
 * Called by pt_schedule_create() in schedule.c.
 */
#include <math.h>
#include <stdlib.h>

#include "sched/schedule.h"
#include "tensor/error.h"

/* One play of the greedy rule: the times it plays with and its choices. */
typedef struct {
    const pt_schedule_costs *costs;
    bool w_waits;   /* a pending W waits rather than delay a B or F (under the cap)
                       whose input is known to arrive before the W would end */
    bool alternate; /* a ready F (under the cap) goes before a ready B right after a B */
} greedy_rule;

typedef struct {
    pt_schedule *s;
    greedy_rule rule;
    int C, M;
    double *f_end, *b_end;         /* [c*M+m]: when it ends, known once it starts; -1 before */
    double *busy_until;            /* [worker] */
    int *in_flight, *cap;          /* [worker] forwards whose B has not run; its cap */
    int *live, *live_cap;          /* [worker] forwards whose W has not run; its cap */
    int *next_f, *next_b, *next_w; /* [chunk] the oldest micro-batch not yet started */
    int *held, *held_at; /* worker w's chunks, ascending: held[held_at[w]..held_at[w+1]) */
    bool *after_b;       /* [worker] its last pass was a B */
} greedy;

#define AT(g, arr, c, m) ((g)->arr[(c) * (g)->M + (m)])

/* When the output of chunk `from`'s pass ending at `end` is there for worker
 * w: at once on its own worker, `latency` later on another; never before it
 * has started. */
static double arrives(const greedy *g, double end, int from, int w)
{
    if (end < 0)
        return INFINITY;
    return g->s->chunk_worker[from] == w ? end : end + g->rule.costs->latency;
}

/* When the inputs of chunk c's next pass of kind k are on its worker w
 * (INFINITY while one is not started, or no pass of that kind is left). */
static double ready_at(const greedy *g, pt_action_kind k, int c, int w)
{
    int m = k == PT_ACT_F ? g->next_f[c] : k == PT_ACT_B ? g->next_b[c] : g->next_w[c];
    if (m >= g->M)
        return INFINITY;
    if (k == PT_ACT_F)
        return c == 0 ? 0 : arrives(g, AT(g, f_end, c - 1, m), c - 1, w);
    if (k == PT_ACT_W)
        return m < g->next_b[c] ? AT(g, b_end, c, m) : INFINITY;
    double own = m < g->next_f[c] ? AT(g, f_end, c, m) : INFINITY;
    if (c == g->C - 1)
        return own;
    double down = arrives(g, AT(g, b_end, c + 1, m), c + 1, w);
    return down > own ? down : own;
}

static bool may_forward(const greedy *g, int w)
{
    return g->in_flight[w] < g->cap[w] && g->live[w] < g->live_cap[w];
}

/* The time of worker w's pass a, with what a blocking send holds it for. */
static double duration(const greedy *g, int w, const pt_action *a)
{
    double d = pt_sched_duration(g->rule.costs, a);
    int to = pt_sched_send_to(g->s, a);
    return to >= 0 && to != w ? d + g->rule.costs->send : d;
}

/* Picks worker w's action at time t; returns false if it must wait. Each
 * kind of pass runs in micro-batch order on a chunk, so only the oldest one
 * not yet started on each chunk is a candidate. */
static bool pick(const greedy *g, int w, double t, pt_action *a)
{
    int best_c = -1, best_m = -1;
    const int *mine = g->held + g->held_at[w];
    int n = g->held_at[w + 1] - g->held_at[w];
    double soon = INFINITY; /* the earliest known input of a B or F still on its way */
    /* B: oldest micro-batch, then later chunk */
    for (int i = 0; i < n; i++) {
        int c = mine[i], m = g->next_b[c];
        double at = ready_at(g, PT_ACT_B, c, w);
        if (at > t)
            soon = at < soon ? at : soon;
        else if (best_m < 0 || m < best_m || (m == best_m && c > best_c))
            best_c = c, best_m = m;
    }
    a->kind = PT_ACT_B;
    if (best_c >= 0 && !(g->rule.alternate && g->after_b[w]))
        goto found;
    /* F under the cap: later chunk, then oldest micro-batch */
    int f_c = -1;
    for (int i = n - 1; i >= 0 && may_forward(g, w); i--) {
        int c = mine[i];
        double at = ready_at(g, PT_ACT_F, c, w);
        if (at > t)
            soon = at < soon ? at : soon;
        else if (f_c < 0)
            f_c = c;
    }
    if (f_c >= 0) {
        a->kind = PT_ACT_F, best_c = f_c, best_m = g->next_f[f_c];
        goto found;
    }
    if (best_c >= 0)
        goto found; /* the B an F would have gone before */
    /* W: oldest micro-batch, then later chunk */
    for (int i = 0; i < n; i++) {
        int c = mine[i], m = g->next_w[c];
        if (ready_at(g, PT_ACT_W, c, w) <= t &&
            (best_m < 0 || m < best_m || (m == best_m && c > best_c)))
            best_c = c, best_m = m;
    }
    if (best_c < 0)
        return false;
    a->kind = PT_ACT_W, a->chunk = best_c, a->mb = best_m;
    if (g->rule.w_waits && t + duration(g, w, a) > soon)
        return false;
found:
    a->chunk = best_c;
    a->mb = best_m;
    return true;
}

/* The first time after t at which a worker frees up or an input arrives. */
static double next_event(const greedy *g, double t)
{
    double next = INFINITY;
    for (int w = 0; w < g->s->n_workers; w++)
        if (g->busy_until[w] > t && g->busy_until[w] < next)
            next = g->busy_until[w];
    for (int c = 0; c < g->C; c++) {
        int w = g->s->chunk_worker[c];
        for (int k = PT_ACT_F; k <= PT_ACT_W; k++) {
            double at = ready_at(g, (pt_action_kind)k, c, w);
            if (at > t && at < next)
                next = at;
        }
    }
    return next;
}

/* Starts a on worker w at t. */
static int start(greedy *g, int w, double t, const pt_action *a)
{
    int c = a->chunk, m = a->mb;
    double end = t + duration(g, w, a);
    g->busy_until[w] = end;
    g->after_b[w] = a->kind == PT_ACT_B;
    if (a->kind == PT_ACT_F) {
        AT(g, f_end, c, m) = end;
        g->next_f[c]++;
        g->in_flight[w]++;
        g->live[w]++;
    } else if (a->kind == PT_ACT_B) {
        AT(g, b_end, c, m) = end;
        g->next_b[c]++;
        g->in_flight[w]--;
    } else {
        g->next_w[c]++;
        g->live[w]--;
    }
    return pt_sched_push(g->s, w, a->kind, c, m);
}

/* Plays the rule in time on the placed, empty schedule g->s: whenever a
 * worker is free it starts what the rule picks among the passes whose inputs
 * are there. */
static int play(greedy *g)
{
    int P = g->s->n_workers, rc = PT_OK;
    for (int c = 0; c < g->C; c++)
        g->next_f[c] = g->next_b[c] = g->next_w[c] = 0;
    for (int w = 0; w < P; w++)
        g->busy_until[w] = 0, g->in_flight[w] = g->live[w] = 0, g->after_b[w] = false;
    long left = 3L * g->C * g->M;
    for (double t = 0; left > 0 && rc == PT_OK; t = next_event(g, t)) {
        if (t == INFINITY)
            return pt_fail(PT_EDEADLOCK, "zero-bubble generator made no progress");
        /* a pass of zero time frees its worker at once: sweep until none starts */
        for (bool started = true; started && rc == PT_OK;) {
            started = false;
            for (int w = 0; w < P && rc == PT_OK; w++) {
                pt_action a = {.version = -1};
                if (g->busy_until[w] <= t && pick(g, w, t, &a)) {
                    rc = start(g, w, t, &a);
                    started = true, left--;
                }
            }
        }
    }
    return rc;
}

/* The chunks by worker, each list ascending. */
static void hold_chunks(greedy *g)
{
    const pt_schedule *s = g->s;
    int C = g->C, P = s->n_workers;
    for (int c = 0; c < C; c++)
        g->held_at[s->chunk_worker[c] + 1]++;
    for (int w = 0; w < P; w++)
        g->held_at[w + 1] += g->held_at[w];
    for (int c = C - 1; c >= 0; c--) /* fill each list from its end */
        g->held[--g->held_at[s->chunk_worker[c] + 1]] = c;
    for (int w = 0; w < P; w++) /* the fill moved w's end, held_at[w+1], to its start */
        g->held_at[w] = g->held_at[w + 1];
    g->held_at[P] = C;
}

/* Keeps in *best whichever of *best and *cand the costs finish first (*best
 * on a tie); frees the other. */
static int keep_shorter(pt_schedule **best, double *best_span, pt_schedule **cand,
                        const pt_schedule_costs *costs)
{
    pt_schedule_sim *sim = NULL;
    int rc = pt_schedule_simulate(*cand, costs, &sim);
    if (rc == PT_OK && (!*best || sim->makespan < *best_span * (1 - 1e-12))) {
        pt_schedule_destroy(*best);
        *best = *cand, *best_span = sim->makespan;
    } else {
        pt_schedule_destroy(*cand);
    }
    *cand = NULL;
    pt_schedule_sim_destroy(sim);
    return rc;
}

/* Plays the greedy rule on the placed, empty schedule *out under cap (2 x
 * workers entries: F-to-B in flight, then live until W) on the unit costs
 * and on `costs` (NULL: unit), with and without W waiting, and keeps in *out
 * the order that `costs` finish first, unless `fixed` (a schedule of the same
 * placement, or NULL) finishes no later: then *out is fixed. Frees cap and
 * fixed; on failure frees *out too. */
static int play_best(pt_schedule **out, int *cap, const pt_schedule_costs *costs,
                     pt_schedule *fixed)
{
    pt_schedule *placed = *out, *best = NULL;
    pt_schedule_costs unit = pt_schedule_costs_default();
    const pt_schedule_costs *given = costs ? costs : &unit;
    int C = placed->n_chunks, M = placed->n_micro, P = placed->n_workers, rc = PT_OK;
    double best_span = INFINITY;
    if (fixed)
        rc = keep_shorter(&best, &best_span, &fixed, given);
    greedy g = {.C = C, .M = M, .cap = cap, .live_cap = cap ? cap + P : NULL};
    size_t n = (size_t)C * (size_t)M;
    g.f_end = malloc(n * sizeof(double));
    g.b_end = malloc(n * sizeof(double));
    g.busy_until = calloc((size_t)P, sizeof(double));
    g.in_flight = calloc(2 * (size_t)P, sizeof(int));
    g.live = g.in_flight ? g.in_flight + P : NULL;
    g.next_f = calloc(3 * (size_t)C, sizeof(int));
    g.next_b = g.next_f ? g.next_f + C : NULL;
    g.next_w = g.next_f ? g.next_f + 2 * C : NULL;
    g.held = malloc((size_t)C * sizeof(int));
    g.held_at = calloc((size_t)P + 1, sizeof(int));
    g.after_b = calloc((size_t)P, sizeof(bool));
    if (!cap || !g.after_b || !g.f_end || !g.b_end || !g.busy_until || !g.in_flight || !g.next_f ||
        !g.held || !g.held_at)
        rc = pt_fail(PT_ENOMEM, "out of memory generating a schedule");
    g.s = placed;
    if (rc == PT_OK)
        hold_chunks(&g);
    /* the unit play first: on unit costs it is the order a tie keeps */
    for (int choice = 0; choice < 8 && rc == PT_OK; choice++) {
        g.rule.costs = choice & 4 ? given : &unit;
        g.rule.w_waits = choice & 1;
        g.rule.alternate = choice & 2;
        if ((choice & 4) && !costs)
            break; /* unit costs only: the plays so far were the unit ones */
        for (size_t i = 0; i < n; i++)
            g.f_end[i] = g.b_end[i] = -1;
        pt_schedule *cand = NULL;
        rc = pt_sched_alloc(P, C, M, 1, &cand);
        if (rc == PT_OK) {
            pt_sched_copy_placement(cand, placed);
            g.s = cand;
            rc = play(&g);
        }
        if (rc == PT_OK)
            rc = keep_shorter(&best, &best_span, &cand, given);
        else if (rc == PT_EDEADLOCK && best)
            rc = PT_OK; /* the caps stopped this play; an earlier one stands */
        pt_schedule_destroy(cand);
    }
    free(g.f_end);
    free(g.b_end);
    free(g.busy_until);
    free(g.in_flight);
    free(g.next_f);
    free(g.held);
    free(g.held_at);
    free(g.after_b);
    free(cap);
    pt_schedule_destroy(placed);
    if (rc != PT_OK) {
        pt_schedule_destroy(best);
        best = NULL;
    }
    *out = best;
    return rc;
}

/* ZB-H1's fixed order: 1f1b's F and B, each W trailing its B by r backwards. */
static int zbh1_fixed(int P, int M, pt_schedule **out)
{
    int rc = pt_sched_alloc(P, P, M, 1, out);
    for (int r = 0; rc == PT_OK && r < P; r++) {
        int warmup = P - 1 - r < M ? P - 1 - r : M;
        int f = 0, b = 0, w = 0;
        while (rc == PT_OK && f < warmup)
            rc = pt_sched_push(*out, r, PT_ACT_F, r, f++);
        while (rc == PT_OK && b < M) {
            if (f < M)
                rc = pt_sched_push(*out, r, PT_ACT_F, r, f++);
            if (rc == PT_OK)
                rc = pt_sched_push(*out, r, PT_ACT_B, r, b++);
            /* W lags r backwards behind: worker r's share of the drain */
            if (rc == PT_OK && b - w > r)
                rc = pt_sched_push(*out, r, PT_ACT_W, r, w++);
        }
        while (rc == PT_OK && w < M)
            rc = pt_sched_push(*out, r, PT_ACT_W, r, w++);
    }
    if (rc != PT_OK) {
        pt_schedule_destroy(*out);
        *out = NULL;
    }
    return rc;
}

int pt_sched_gen_zbh1(int P, int M, const pt_schedule_costs *costs, pt_schedule **out)
{
    pt_schedule *fixed = NULL;
    int rc = zbh1_fixed(P, M, &fixed);
    if (rc == PT_OK)
        rc = pt_sched_alloc(P, P, M, 1, out);
    if (rc != PT_OK) {
        pt_schedule_destroy(fixed);
        return rc;
    }
    int *cap = malloc(2 * (size_t)P * sizeof(int));
    for (int r = 0; cap && r < P; r++) {
        cap[r] = P - r < M ? P - r : M; /* 1f1b's in flight */
        cap[P + r] = P;                 /* and ZB-H1's live until W: 1f1b's peak */
    }
    return play_best(out, cap, costs, fixed);
}

int pt_sched_gen_zbh2(int P, int M, const pt_schedule_costs *costs, pt_schedule **out)
{
    int rc = pt_sched_alloc(P, P, M, 1, out);
    if (rc != PT_OK)
        return rc;
    int *cap = malloc(2 * (size_t)P * sizeof(int));
    for (int r = 0; cap && r < P; r++) {
        cap[r] = 2 * (P - r) - 1;
        cap[P + r] = M; /* W pending costs M_W, less than M_B: no cap of its own */
    }
    return play_best(out, cap, costs, NULL);
}

int pt_sched_gen_zbv(int P, int M, const pt_schedule_costs *costs, pt_schedule **out)
{
    int rc = pt_sched_alloc(P, 2 * P, M, 1, out);
    if (rc != PT_OK)
        return rc;
    for (int c = 0; c < 2 * P; c++)
        (*out)->chunk_worker[c] = c < P ? c : 2 * P - 1 - c;
    int *cap = malloc(2 * (size_t)P * sizeof(int));
    for (int r = 0; cap && r < 2 * P; r++)
        cap[r] = 2 * P; /* F-to-B in flight, and live until W */
    return play_best(out, cap, costs, NULL);
}
