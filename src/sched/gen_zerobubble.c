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
#include <stdint.h>
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

/* A time at which worker `worker` may be able to start something: its
 * pass ends, or an input of one of its chunks arrives. */
typedef struct {
    double t;
    int worker;
} wake;

typedef struct {
    pt_schedule *s;
    greedy_rule rule;
    int C, M;
    wake *wakes; /* a binary min-heap by time: the play's coming events */
    size_t n_wakes, wakes_cap;
    uint64_t *dirty;       /* bit w: something of worker w's changed since it last found nothing */
    double *f_end, *b_end; /* [c*M+m]: when it ends, known once it starts; -1 before */
    double *busy_until;    /* [worker] */
    int *in_flight, *cap;  /* [worker] forwards whose B has not run; its cap */
    int *live, *live_cap;  /* [worker] forwards whose W has not run; its cap */
    int *next_f, *next_b, *next_w; /* [chunk] the oldest micro-batch not yet started */
    int *held, *held_at; /* worker w's chunks, ascending: held[held_at[w]..held_at[w+1]) */
    bool *after_b;       /* [worker] its last pass was a B */
    /* this play met a choice that w_waits (a W held back for an input on its
     * way) or alternate (an F before a ready B after a B) decides: with the
     * choice turned the other way the play would differ */
    bool met_wait, met_alternation;
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

/* Whether one of worker w's chunks has an F ready at t under the cap. */
static bool forward_ready(const greedy *g, int w, double t)
{
    for (int i = g->held_at[w]; i < g->held_at[w + 1] && may_forward(g, w); i++)
        if (ready_at(g, PT_ACT_F, g->held[i], w) <= t)
            return true;
    return false;
}

/* Picks worker w's action at time t; returns false if it must wait. Each
 * kind of pass runs in micro-batch order on a chunk, so only the oldest one
 * not yet started on each chunk is a candidate. */
static bool pick(greedy *g, int w, double t, pt_action *a)
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
    if (best_c >= 0 && !(g->rule.alternate && g->after_b[w])) {
        if (g->after_b[w] && !g->met_alternation && forward_ready(g, w, t))
            g->met_alternation = true;
        goto found;
    }
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
        g->met_alternation |= best_c >= 0; /* alternating: this F goes before the B */
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
    if (t + duration(g, w, a) > soon) {
        g->met_wait = true;
        if (g->rule.w_waits)
            return false;
    }
found:
    a->chunk = best_c;
    a->mb = best_m;
    return true;
}

/* ---- the play's events ----
 * A worker's choice changes only when its pass ends or an input of its
 * chunks arrives: every such time is queued for it when the pass that makes
 * it starts, and at each time only the workers with an event are asked
 * again. Asking the others gives nothing: what they wait for has not come,
 * and a W that waits for an input on its way keeps waiting until it comes.
 * So the play is the one that asks every free worker at every event, in
 * the same order, at the cost of a heap instead of a scan of every chunk
 * and worker per event (P = 128 at M = 1024 took seconds). */

static int push_wake(greedy *g, double t, int worker)
{
    if (g->n_wakes == g->wakes_cap) {
        size_t cap = g->wakes_cap ? 2 * g->wakes_cap : 1024;
        wake *grown = realloc(g->wakes, cap * sizeof *grown);
        if (!grown)
            return pt_fail(PT_ENOMEM, "out of memory generating a schedule");
        g->wakes = grown, g->wakes_cap = cap;
    }
    size_t i = g->n_wakes++;
    for (; i > 0 && g->wakes[(i - 1) / 2].t > t; i = (i - 1) / 2)
        g->wakes[i] = g->wakes[(i - 1) / 2];
    g->wakes[i] = (wake){t, worker};
    return PT_OK;
}

static wake pop_wake(greedy *g)
{
    wake top = g->wakes[0], last = g->wakes[--g->n_wakes];
    size_t i = 0, n = g->n_wakes;
    for (size_t k; (k = 2 * i + 1) < n; i = k) {
        if (k + 1 < n && g->wakes[k + 1].t < g->wakes[k].t)
            k++;
        if (g->wakes[k].t >= last.t)
            break;
        g->wakes[i] = g->wakes[k];
    }
    if (n > 0)
        g->wakes[i] = last;
    return top;
}

static void set_dirty(greedy *g, int w) { g->dirty[w / 64] |= (uint64_t)1 << (w % 64); }

/* The first worker from `from` on with its bit set, or -1. */
static int next_dirty(const greedy *g, int from)
{
    int P = g->s->n_workers;
    for (int i = from / 64; from < P && i <= (P - 1) / 64; i++) {
        uint64_t bits = g->dirty[i] & (i == from / 64 ? ~(uint64_t)0 << (from % 64) : ~(uint64_t)0);
        if (bits)
            return 64 * i + __builtin_ctzll(bits);
    }
    return -1;
}

/* Worker `w` is to be asked again at time `at` (now, if that is not after t). */
static int wake_at(greedy *g, double t, double at, int w)
{
    if (at <= t) {
        set_dirty(g, w);
        return PT_OK;
    }
    return push_wake(g, at, w);
}

/* Starts a on worker w at t, and queues when it ends for w and when its
 * output arrives for the worker that reads it. */
static int start(greedy *g, int w, double t, const pt_action *a)
{
    int c = a->chunk, m = a->mb, reader = -1;
    double end = t + duration(g, w, a);
    g->busy_until[w] = end;
    g->after_b[w] = a->kind == PT_ACT_B;
    if (a->kind == PT_ACT_F) {
        AT(g, f_end, c, m) = end;
        g->next_f[c]++;
        g->in_flight[w]++;
        g->live[w]++;
        reader = c + 1 < g->C ? c + 1 : -1;
    } else if (a->kind == PT_ACT_B) {
        AT(g, b_end, c, m) = end;
        g->next_b[c]++;
        g->in_flight[w]--;
        reader = c > 0 ? c - 1 : -1;
    } else {
        g->next_w[c]++;
        g->live[w]--;
    }
    int rc = wake_at(g, t, end, w);
    if (rc == PT_OK && reader >= 0) {
        int to = g->s->chunk_worker[reader];
        rc = wake_at(g, t, arrives(g, end, c, to), to);
    }
    return rc == PT_OK ? pt_sched_push(g->s, w, a->kind, c, m) : rc;
}

/* Plays the rule in time on the placed, empty schedule g->s: whenever a
 * worker is free it starts what the rule picks among the passes whose inputs
 * are there. */
static int play(greedy *g)
{
    int P = g->s->n_workers, rc = PT_OK;
    for (int c = 0; c < g->C; c++)
        g->next_f[c] = g->next_b[c] = g->next_w[c] = 0;
    for (int w = 0; w < P; w++) {
        g->busy_until[w] = 0, g->in_flight[w] = g->live[w] = 0, g->after_b[w] = false;
        set_dirty(g, w);
    }
    g->n_wakes = 0;
    g->met_wait = g->met_alternation = false;
    long left = 3L * g->C * g->M;
    for (double t = 0; left > 0 && rc == PT_OK;) {
        /* a pass of zero time frees its worker at once: sweep until none starts */
        for (bool started = true; started && rc == PT_OK;) {
            started = false;
            for (int w = next_dirty(g, 0); w >= 0 && rc == PT_OK; w = next_dirty(g, w + 1)) {
                pt_action a = {.version = -1};
                if (g->busy_until[w] <= t && pick(g, w, t, &a)) {
                    rc = start(g, w, t, &a);
                    started = true, left--;
                } else { /* nothing to start, or busy: its end is queued */
                    g->dirty[w / 64] &= ~((uint64_t)1 << (w % 64));
                }
            }
        }
        if (left == 0 || rc != PT_OK)
            break;
        if (g->n_wakes == 0)
            return pt_fail(PT_EDEADLOCK, "zero-bubble generator made no progress");
        t = g->wakes[0].t;
        while (g->n_wakes > 0 && g->wakes[0].t <= t)
            set_dirty(g, pop_wake(g).worker);
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

/* The orders played so far, by two 64-bit hashes of every worker's
 * actions: different plays often give the same order (about half did in
 * the planner's searches), and an order played before is not shorter than
 * the best kept since, so it is not simulated again. */
typedef struct {
    uint64_t h[9][2];
    int n;
} played_orders;

static bool played_before(played_orders *seen, const pt_schedule *s)
{
    uint64_t a = 1469598103934665603u, b = 0x9e3779b97f4a7c15u; /* FNV-1a and a multiply-mix */
    for (int w = 0; w < s->n_workers; w++)
        for (int i = 0; i < s->n_actions[w]; i++) {
            const pt_action *x = &s->actions[w][i];
            uint64_t v = ((uint64_t)(unsigned)w << 48) ^ ((uint64_t)x->kind << 40) ^
                         ((uint64_t)(unsigned)x->chunk << 20) ^ (uint64_t)(unsigned)x->mb;
            a = (a ^ v) * 1099511628211u;
            b = (b + v) * 0xbf58476d1ce4e5b9u, b ^= b >> 31;
        }
    for (int i = 0; i < seen->n; i++)
        if (seen->h[i][0] == a && seen->h[i][1] == b)
            return true;
    if (seen->n < 9)
        seen->h[seen->n][0] = a, seen->h[seen->n][1] = b, seen->n++;
    return false;
}

/* Keeps in *best whichever of *best and *cand the costs finish first (*best
 * on a tie); frees the other. */
static int keep_shorter(pt_schedule **best, double *best_span, pt_schedule **cand,
                        const pt_schedule_costs *costs, played_orders *seen)
{
    if (played_before(seen, *cand)) {
        pt_schedule_destroy(*cand);
        *cand = NULL;
        return PT_OK;
    }
    pt_schedule_sim *sim = NULL; /* played unvalidated: the kept order is validated at the end */
    int rc = pt_sched_play(*cand, costs, &sim);
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
    played_orders seen = {.n = 0};
    rc = pt_sched_check_costs(C, given);
    if (fixed && rc == PT_OK)
        rc = keep_shorter(&best, &best_span, &fixed, given, &seen);
    pt_schedule_destroy(fixed);
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
    g.dirty = calloc((size_t)P / 64 + 1, sizeof(uint64_t));
    if (!cap || !g.after_b || !g.dirty || !g.f_end || !g.b_end || !g.busy_until || !g.in_flight ||
        !g.next_f || !g.held || !g.held_at)
        rc = pt_fail(PT_ENOMEM, "out of memory generating a schedule");
    g.s = placed;
    if (rc == PT_OK)
        hold_chunks(&g);
    /* the unit play first: on unit costs it is the order a tie keeps. A
     * play that met no case its w_waits (alternate) choice decides is the
     * play with that choice turned: not played again. */
    bool met_wait[8] = {false}, met_alternation[8] = {false};
    for (int choice = 0; choice < 8 && rc == PT_OK; choice++) {
        g.rule.costs = choice & 4 ? given : &unit;
        g.rule.w_waits = choice & 1;
        g.rule.alternate = choice & 2;
        if ((choice & 4) && !costs)
            break; /* unit costs only: the plays so far were the unit ones */
        int same = (choice & 1) && !met_wait[choice ^ 1]          ? choice ^ 1
                   : (choice & 2) && !met_alternation[choice ^ 2] ? choice ^ 2
                                                                  : -1;
        if (same >= 0) {
            met_wait[choice] = met_wait[same], met_alternation[choice] = met_alternation[same];
            continue;
        }
        for (size_t i = 0; i < n; i++)
            g.f_end[i] = g.b_end[i] = -1;
        pt_schedule *cand = NULL;
        rc = pt_sched_alloc(P, C, M, 1, &cand);
        if (rc == PT_OK) {
            pt_sched_copy_placement(cand, placed);
            g.s = cand;
            rc = play(&g);
        }
        met_wait[choice] = g.met_wait, met_alternation[choice] = g.met_alternation;
        if (rc == PT_OK)
            rc = keep_shorter(&best, &best_span, &cand, given, &seen);
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
    free(g.dirty);
    free(g.wakes);
    free(cap);
    pt_schedule_destroy(placed);
    if (rc == PT_OK && best)
        rc = pt_schedule_validate(best); /* the candidates were played unvalidated */
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
