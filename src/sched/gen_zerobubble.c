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
 *         chunk. Its order comes from a greedy rule played on unit costs
 *         (F = B = W = 1, no latency): a free worker runs a ready B (oldest
 *         micro-batch, then later chunk), else a ready F while it has fewer
 *         than 2P chunk activations live (1f1b's worker 0 peak in half-stage
 *         chunks; later chunk first, then oldest micro-batch), else a pending
 *         W (oldest first), else waits. The order is what is kept; the
 *         simulator may play it against any costs.
 *   zbh2  ZB-H2: one chunk per worker, the same greedy rule with worker r
 *         allowed 2(P-r)-1 micro-batches between F and B (Qi et al.'s
 *         (2p-2i+1) M_B, worker i = r+1), the forwards that fill the
 *         warm-up bubble before the first B, and no cap until W. On unit
 *         costs the steady state is 1F-1B-1W and the drain is all W: a
 *         parallelogram, bubble (P-1)(F+B-2W) per worker.
 *
 * The automatic schedules zb1p and zb2p, searched for measured times and a
 * memory limit, are in gen_zb_auto.c.
 *
 * Called by pt_schedule_create() in schedule.c.
 */
#include <stdlib.h>

#include "sched/schedule.h"
#include "tensor/error.h"

typedef struct {
    pt_schedule *s;
    int C, M;
    int *f_end, *b_end, *w_end;    /* [c*M+m]: step at which it finished; -1: not run */
    int *busy_until;               /* [worker] */
    int *in_flight, *cap;          /* [worker] forwards whose B has not run; its cap */
    int *live, *live_cap;          /* [worker] forwards whose W has not run; its cap */
    int *next_f, *next_b, *next_w; /* [chunk] the oldest micro-batch not yet run */
    int *held, *held_at; /* worker w's chunks, ascending: held[held_at[w]..held_at[w+1]) */
} greedy;

#define AT(g, arr, c, m) ((g)->arr[(c) * (g)->M + (m)])

static bool b_ready(const greedy *g, int c, int m, int t)
{
    if (AT(g, b_end, c, m) >= 0 || AT(g, f_end, c, m) < 0 || AT(g, f_end, c, m) > t)
        return false;
    return c == g->C - 1 || (AT(g, b_end, c + 1, m) >= 0 && AT(g, b_end, c + 1, m) <= t);
}

static bool f_ready(const greedy *g, int c, int m, int t)
{
    if (AT(g, f_end, c, m) >= 0)
        return false;
    return c == 0 || (AT(g, f_end, c - 1, m) >= 0 && AT(g, f_end, c - 1, m) <= t);
}

static bool w_ready(const greedy *g, int c, int m, int t)
{
    return AT(g, w_end, c, m) < 0 && AT(g, b_end, c, m) >= 0 && AT(g, b_end, c, m) <= t;
}

/* Picks worker w's action at step t; returns false if it must wait. Each
 * kind of pass runs in micro-batch order on a chunk (a later micro-batch's
 * pass can only be ready once the earlier one is), so only the oldest one
 * not yet run on each chunk is a candidate. */
static bool pick(const greedy *g, int w, int t, pt_action_kind *kind, int *chunk, int *mb)
{
    int best_c = -1, best_m = -1;
    const int *mine = g->held + g->held_at[w];
    int n = g->held_at[w + 1] - g->held_at[w];
    /* B: oldest micro-batch, then later chunk */
    for (int i = 0; i < n; i++) {
        int c = mine[i], m = g->next_b[c];
        if (m < g->M && b_ready(g, c, m, t) &&
            (best_m < 0 || m < best_m || (m == best_m && c > best_c)))
            best_c = c, best_m = m;
    }
    if (best_c >= 0) {
        *kind = PT_ACT_B;
        goto found;
    }
    /* F under the cap: later chunk, then oldest micro-batch */
    if (g->in_flight[w] < g->cap[w] && g->live[w] < g->live_cap[w])
        for (int i = n - 1; i >= 0 && best_c < 0; i--) {
            int c = mine[i], m = g->next_f[c];
            if (m < g->M && f_ready(g, c, m, t))
                best_c = c, best_m = m;
        }
    if (best_c >= 0) {
        *kind = PT_ACT_F;
        goto found;
    }
    /* W: oldest micro-batch, then later chunk */
    for (int i = 0; i < n; i++) {
        int c = mine[i], m = g->next_w[c];
        if (m < g->M && w_ready(g, c, m, t) &&
            (best_m < 0 || m < best_m || (m == best_m && c > best_c)))
            best_c = c, best_m = m;
    }
    if (best_c < 0)
        return false;
    *kind = PT_ACT_W;
found:
    *chunk = best_c;
    *mb = best_m;
    return true;
}

static int play_greedy(pt_schedule *s, const int *cap, const int *live_cap)
{
    int C = s->n_chunks, M = s->n_micro, P = s->n_workers, rc = PT_OK;
    greedy g = {.s = s, .C = C, .M = M};
    size_t n = (size_t)C * (size_t)M;
    g.f_end = malloc(n * sizeof(int));
    g.b_end = malloc(n * sizeof(int));
    g.w_end = malloc(n * sizeof(int));
    g.busy_until = calloc((size_t)P, sizeof(int));
    g.in_flight = calloc((size_t)P, sizeof(int));
    g.live = calloc((size_t)P, sizeof(int));
    g.next_f = calloc(3 * (size_t)C, sizeof(int));
    g.next_b = g.next_f ? g.next_f + C : NULL;
    g.next_w = g.next_f ? g.next_f + 2 * C : NULL;
    g.held = malloc((size_t)C * sizeof(int));
    g.held_at = calloc((size_t)P + 1, sizeof(int));
    if (g.held && g.held_at) { /* the chunks by worker, each list ascending */
        for (int c = 0; c < C; c++)
            g.held_at[s->chunk_worker[c] + 1]++;
        for (int w = 0; w < P; w++)
            g.held_at[w + 1] += g.held_at[w];
        for (int c = C - 1; c >= 0; c--) /* fill each list from its end */
            g.held[--g.held_at[s->chunk_worker[c] + 1]] = c;
        for (int w = 0; w < P; w++) /* the fill moved w's end, held_at[w+1], to its start */
            g.held_at[w] = g.held_at[w + 1];
        g.held_at[P] = C;
    }
    g.cap = (int *)cap;
    g.live_cap = (int *)live_cap;
    if (!g.f_end || !g.b_end || !g.w_end || !g.busy_until || !g.in_flight || !g.live || !g.next_f ||
        !g.held || !g.held_at) {
        rc = pt_fail(PT_ENOMEM, "out of memory generating a schedule");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        g.f_end[i] = g.b_end[i] = g.w_end[i] = -1;
    long left = 3 * (long)n, limit = 4 * left + 4L * C + 16;
    for (int t = 0; left > 0; t++) {
        if (t > limit) {
            rc = pt_fail(PT_EDEADLOCK, "zero-bubble generator made no progress");
            goto done;
        }
        /* ends at t+1 are not visible to other workers at step t */
        for (int w = 0; w < P && rc == PT_OK; w++) {
            pt_action_kind kind;
            int c, m;
            if (g.busy_until[w] > t || !pick(&g, w, t, &kind, &c, &m))
                continue;
            rc = pt_sched_push(s, w, kind, c, m);
            g.busy_until[w] = t + 1;
            left--;
            if (kind == PT_ACT_F) {
                AT(&g, f_end, c, m) = t + 1;
                g.next_f[c]++;
                g.in_flight[w]++;
                g.live[w]++;
            } else if (kind == PT_ACT_B) {
                AT(&g, b_end, c, m) = t + 1;
                g.next_b[c]++;
                g.in_flight[w]--;
            } else {
                AT(&g, w_end, c, m) = t + 1;
                g.next_w[c]++;
                g.live[w]--;
            }
        }
        if (rc != PT_OK)
            goto done;
    }
done:
    free(g.f_end);
    free(g.b_end);
    free(g.w_end);
    free(g.busy_until);
    free(g.in_flight);
    free(g.live);
    free(g.next_f);
    free(g.held);
    free(g.held_at);
    return rc;
}

int pt_sched_gen_zbh1(int P, int M, pt_schedule **out)
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

/* Plays the greedy rule on the placed schedule *out under cap (2 x workers
 * entries: F-to-B in flight, then live until W), then frees cap; on failure
 * frees the schedule too. */
static int play_capped(pt_schedule **out, int *cap)
{
    int rc = cap ? play_greedy(*out, cap, cap + (*out)->n_workers)
                 : pt_fail(PT_ENOMEM, "out of memory generating a schedule");
    free(cap);
    if (rc != PT_OK) {
        pt_schedule_destroy(*out);
        *out = NULL;
    }
    return rc;
}

int pt_sched_gen_zbh2(int P, int M, pt_schedule **out)
{
    int rc = pt_sched_alloc(P, P, M, 1, out);
    if (rc != PT_OK)
        return rc;
    int *cap = malloc(2 * (size_t)P * sizeof(int));
    for (int r = 0; cap && r < P; r++) {
        cap[r] = 2 * (P - r) - 1;
        cap[P + r] = M; /* W pending costs M_W, less than M_B: no cap of its own */
    }
    return play_capped(out, cap);
}

int pt_sched_gen_zbv(int P, int M, pt_schedule **out)
{
    int rc = pt_sched_alloc(P, 2 * P, M, 1, out);
    if (rc != PT_OK)
        return rc;
    for (int c = 0; c < 2 * P; c++)
        (*out)->chunk_worker[c] = c < P ? c : 2 * P - 1 - c;
    int *cap = malloc(2 * (size_t)P * sizeof(int));
    for (int r = 0; cap && r < 2 * P; r++)
        cap[r] = 2 * P; /* F-to-B in flight, and live until W */
    return play_capped(out, cap);
}
