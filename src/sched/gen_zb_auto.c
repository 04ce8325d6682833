/* gen_zb_auto.c: the automatic zero-bubble scheduler of Qi et al., "Zero
 * Bubble Pipeline Parallelism" (ICLR 2024), section 3.1: given the stages P,
 * the micro-batches M, the time of one F, B and W on each stage, the time of
 * one transfer between neighbouring stages and an activation memory limit,
 * it orders every stage's F, B and W passes so that the longest stage is
 * short. With the limit at P micro-batches it is ZB-1p (1f1b's memory), at
 * 2P ZB-2p (the least memory that empirically reaches zero bubble).
 *
 * The search plays the passes forward in time, one micro-batch's round at a
 * time, and keeps for every stage when it is free, what it holds and how much
 * it has idled:
 *   warm-up   F0 on every stage; then every stage, last to first, takes as
 *             many more forwards as fit before the first B reaches it (and
 *             in the memory limit), each stage at least one fewer than the
 *             one before it; then B0 from the last stage to the first;
 *   rounds    for micro-batch i: a stage takes one more F (unless its
 *             forwards ran out, or, with `prioritize_b`, it is two ahead of
 *             the next stage and the F would only delay the B that stage
 *             waits for); then B_i from the last stage to the first. Before
 *             each F or B a stage runs pending W passes: as many as memory
 *             needs, as many as fit in the wait for the pass's input, and
 *             one more into a shorter wait when that wait would otherwise
 *             become the largest idle of all stages (or always, with
 *             `fill_small_gaps`);
 *   drain     every stage runs its remaining W passes.
 * Three yes/no choices (a bubble before the first B allowed, prioritize_b,
 * fill_small_gaps) are searched on a grid; the order with the shortest
 * longest stage wins. The stage's span runs from its first F's start to its
 * last pass's end (the paper's cost); the simulator, given the same costs
 * with `latency` the transfer time, plays the order to the same span
 * (tests/test_zb_auto.c).
 *
 * Memory counts in one F's activations (M_B): F adds 1, B gives back 1 - w
 * and keeps w (what the W pass still needs, M_W / M_B), W gives back w.
 *
 * The times are inputs: the planner passes modelled ones, a run may pass
 * measured ones. Called by pt_schedule_create() (names zb1p, zb2p).
 */
#include <float.h>
#include <stdlib.h>

#include "sched/schedule.h"
#include "tensor/error.h"

typedef struct {
    const pt_zb_problem *pb;
    int P, M;
    bool allow_gap_before_b, prioritize_b, fill_small_gaps;
    int *nf, *nb, *nw;            /* [stage] passes placed */
    double *free_at, *mem, *idle; /* [stage] */
    double *first;                /* [stage] start of its first F */
    double *f_end, *b_end;        /* [stage * M + mb] */
    pt_schedule *s;               /* the order, or NULL while only timing */
} zb_play;

#define END(g, arr, j, m) ((g)->arr[(size_t)(j) * (size_t)(g)->M + (size_t)(m)])

static double cost_of(const zb_play *g, pt_action_kind k, int j)
{
    const pt_zb_problem *pb = g->pb;
    return k == PT_ACT_F ? pb->f[j] : k == PT_ACT_B ? pb->b[j] : pb->w[j];
}

static double mem_of(const zb_play *g, pt_action_kind k)
{
    return k == PT_ACT_F ? 1.0 : k == PT_ACT_B ? g->pb->mem_w - 1.0 : -g->pb->mem_w;
}

/* When the input of the next pass of kind k on stage j is there (0 when it
 * comes from the stage itself). */
static double input_at(const zb_play *g, pt_action_kind k, int j)
{
    if (k == PT_ACT_F && j > 0)
        return END(g, f_end, j - 1, g->nf[j]) + g->pb->comm;
    if (k == PT_ACT_B && j < g->P - 1)
        return END(g, b_end, j + 1, g->nb[j]) + g->pb->comm;
    return 0;
}

static double max_idle(const zb_play *g)
{
    double most = 0;
    for (int j = 0; j < g->P; j++)
        most = g->idle[j] > most ? g->idle[j] : most;
    return most;
}

/* Places stage j's next pass of kind k. */
static int put(zb_play *g, int j, pt_action_kind k)
{
    int mb = k == PT_ACT_F ? g->nf[j] : k == PT_ACT_B ? g->nb[j] : g->nw[j];
    double start = g->free_at[j], in = input_at(g, k, j);
    start = in > start ? in : start;
    if (g->nf[j] > 0)
        g->idle[j] += start - g->free_at[j];
    else
        g->first[j] = start;
    double end = start + cost_of(g, k, j);
    g->free_at[j] = end;
    g->mem[j] += mem_of(g, k);
    if (k == PT_ACT_F)
        END(g, f_end, j, g->nf[j]++) = end;
    else if (k == PT_ACT_B)
        END(g, b_end, j, g->nb[j]++) = end;
    else
        g->nw[j]++;
    return g->s ? pt_sched_push(g->s, j, k, j, mb) : PT_OK;
}

/* Runs W passes on stage j until a pass of kind k fits the memory limit, then
 * into the wait for its input. PT_EINVAL when the limit cannot be met. */
static int fill_before(zb_play *g, int j, pt_action_kind k)
{
    int rc = PT_OK;
    while (rc == PT_OK && g->mem[j] + mem_of(g, k) > g->pb->mem_limit + 1e-9) {
        if (g->nw[j] >= g->nb[j])
            return pt_fail(PT_EINVAL,
                           "zero-bubble: stage %d cannot hold one more micro-batch in a limit of "
                           "%g micro-batches' activations",
                           j, g->pb->mem_limit);
        rc = put(g, j, PT_ACT_W);
    }
    double in = input_at(g, k, j);
    while (rc == PT_OK && g->nw[j] < g->nb[j] && g->free_at[j] + cost_of(g, PT_ACT_W, j) <= in)
        rc = put(g, j, PT_ACT_W);
    if (rc == PT_OK && g->nw[j] < g->nb[j] && g->free_at[j] < in &&
        (g->fill_small_gaps || in - g->free_at[j] > max_idle(g) - g->idle[j]))
        rc = put(g, j, PT_ACT_W);
    return rc;
}

/* How many forwards stage j adds in the warm-up before B0 reaches it at
 * b_arrives, starting from its state now. */
static int warmup_forwards(const zb_play *g, int j, double b_arrives)
{
    int n = 0;
    double t = g->free_at[j], mem = g->mem[j];
    while (g->nf[j] + n < g->M && mem + 1.0 <= g->pb->mem_limit + 1e-9) {
        double f = cost_of(g, PT_ACT_F, j);
        if (g->allow_gap_before_b ? t + f > b_arrives : t >= b_arrives)
            break;
        t += f, mem += 1.0, n++;
    }
    return n;
}

static int warmup(zb_play *g, int *extra)
{
    int P = g->P, rc = PT_OK;
    for (int j = 0; j < P && rc == PT_OK; j++)
        rc = put(g, j, PT_ACT_F);
    /* B0 leaves the last stage when its F0 is done; walk it back */
    double b_done = END(g, f_end, P - 1, 0) + cost_of(g, PT_ACT_B, P - 1);
    extra[P - 1] = 0;
    for (int j = P - 2; j >= 0; j--) {
        double arrives = b_done + g->pb->comm;
        extra[j] = warmup_forwards(g, j, arrives);
        double busy_until = g->free_at[j] + extra[j] * cost_of(g, PT_ACT_F, j);
        b_done = (busy_until > arrives ? busy_until : arrives) + cost_of(g, PT_ACT_B, j);
    }
    /* each stage at least one forward ahead of the next */
    for (int j = 1; j < P; j++)
        while (extra[j] > 0 && extra[j] >= extra[j - 1] && g->nf[j] + extra[j] < g->M)
            extra[j]--;
    for (int j = 0; j < P && rc == PT_OK; j++)
        for (int k = 0; k < extra[j] && rc == PT_OK; k++)
            rc = put(g, j, PT_ACT_F);
    for (int j = P - 1; j >= 0 && rc == PT_OK; j--)
        rc = put(g, j, PT_ACT_B);
    return rc;
}

/* Whether stage j, two or more forwards ahead of stage j+1, should skip its
 * forward this round so the B stage j+1 waits for is not delayed. */
static bool skip_forward(const zb_play *g, int j)
{
    double needed =
        g->free_at[j + 1] + cost_of(g, PT_ACT_F, j + 1) + cost_of(g, PT_ACT_B, j + 1) + g->pb->comm;
    if (g->free_at[j] >= needed)
        return true;
    double w_time = 0, mem = g->mem[j] + 1.0;
    for (int k = g->nw[j]; mem > g->pb->mem_limit + 1e-9 && k < g->nb[j]; k++)
        w_time += cost_of(g, PT_ACT_W, j), mem -= g->pb->mem_w;
    if (g->free_at[j] + cost_of(g, PT_ACT_F, j) + w_time <= needed)
        return false;
    return needed - g->free_at[j] <= max_idle(g) - g->idle[j];
}

static int round_of(zb_play *g, int i, int *take)
{
    int P = g->P, rc = PT_OK;
    for (int j = 0; j < P; j++) {
        take[j] = g->nf[j] < g->M;
        if (take[j] && g->prioritize_b && j + 1 < P && g->nf[j] >= g->nf[j + 1] + 2 &&
            skip_forward(g, j))
            take[j] = 0;
    }
    for (int j = P - 2; j >= 0; j--)
        take[j] = take[j] < take[j + 1] ? take[j] : take[j + 1];
    for (int j = 0; j < P && rc == PT_OK; j++)
        if (take[j]) {
            rc = fill_before(g, j, PT_ACT_F);
            if (rc == PT_OK)
                rc = put(g, j, PT_ACT_F);
        }
    for (int j = P - 1; j >= 0 && rc == PT_OK; j--) {
        if (g->nb[j] != i || g->nf[j] <= i)
            return pt_fail(PT_EDEADLOCK, "zero-bubble: stage %d has no forward for B%d", j, i);
        rc = fill_before(g, j, PT_ACT_B);
        /* the first stage's B feeds nobody: once its forwards are done, the
         * pending W passes go first and free their memory */
        while (rc == PT_OK && j == 0 && g->nf[j] == g->M && g->nw[j] < g->nb[j])
            rc = put(g, j, PT_ACT_W);
        if (rc == PT_OK)
            rc = put(g, j, PT_ACT_B);
    }
    return rc;
}

/* One play with the three choices set; *span gets the longest stage. */
static int play(zb_play *g, double *span)
{
    int P = g->P, M = g->M;
    for (int j = 0; j < P; j++)
        g->nf[j] = g->nb[j] = g->nw[j] = 0, g->free_at[j] = g->mem[j] = g->idle[j] = 0;
    int *scratch = malloc((size_t)P * sizeof(int));
    if (!scratch)
        return pt_fail(PT_ENOMEM, "out of memory generating a schedule");
    int rc = warmup(g, scratch);
    for (int i = 1; i < M && rc == PT_OK; i++)
        rc = round_of(g, i, scratch);
    for (int j = 0; j < P && rc == PT_OK; j++)
        while (rc == PT_OK && g->nw[j] < M)
            rc = put(g, j, PT_ACT_W);
    free(scratch);
    *span = 0;
    for (int j = 0; j < P && rc == PT_OK; j++)
        if (g->free_at[j] - g->first[j] > *span)
            *span = g->free_at[j] - g->first[j];
    return rc;
}

static int check_problem(const pt_zb_problem *pb)
{
    if (pb->stages < 1 || pb->micro < 1)
        return pt_fail(PT_EINVAL, "zero-bubble: stages and micro-batches must be at least 1");
    for (int j = 0; j < pb->stages; j++)
        if (!(pb->f[j] >= 0 && pb->b[j] >= 0 && pb->w[j] >= 0) || pb->f[j] + pb->b[j] > 1e300)
            return pt_fail(PT_EINVAL, "zero-bubble: stage %d's times must be finite and >= 0", j);
    if (!(pb->comm >= 0 && pb->comm < 1e300))
        return pt_fail(PT_EINVAL, "zero-bubble: the transfer time must be finite and >= 0");
    if (!(pb->mem_w >= 0 && pb->mem_w <= 1))
        return pt_fail(PT_EINVAL,
                       "zero-bubble: the memory a micro-batch keeps from B to W is a share of "
                       "its F's, in [0, 1] (got %g)",
                       pb->mem_w);
    if (!(pb->mem_limit >= 1 && pb->mem_limit < 1e9))
        return pt_fail(PT_EINVAL,
                       "zero-bubble: the memory limit must hold at least one micro-batch's "
                       "activations (got %g)",
                       pb->mem_limit);
    return PT_OK;
}

int pt_sched_gen_zb_auto(const pt_zb_problem *pb, pt_schedule **out, double *span)
{
    *out = NULL;
    int rc = check_problem(pb);
    if (rc != PT_OK)
        return rc;
    int P = pb->stages, M = pb->micro;
    size_t n = (size_t)P * (size_t)M;
    zb_play g = {.pb = pb, .P = P, .M = M};
    g.nf = calloc((size_t)P, sizeof(int));
    g.nb = calloc((size_t)P, sizeof(int));
    g.nw = calloc((size_t)P, sizeof(int));
    g.free_at = calloc((size_t)P, sizeof(double));
    g.mem = calloc((size_t)P, sizeof(double));
    g.idle = calloc((size_t)P, sizeof(double));
    g.first = calloc((size_t)P, sizeof(double));
    g.f_end = malloc(n * sizeof(double));
    g.b_end = malloc(n * sizeof(double));
    if (!g.nf || !g.nb || !g.nw || !g.free_at || !g.mem || !g.idle || !g.first || !g.f_end ||
        !g.b_end)
        rc = pt_fail(PT_ENOMEM, "out of memory generating a schedule");
    double best = DBL_MAX;
    int best_choice = -1, last_rc = PT_OK;
    for (int choice = 0; choice < 8 && rc == PT_OK; choice++) {
        g.allow_gap_before_b = choice & 1, g.prioritize_b = choice & 2,
        g.fill_small_gaps = choice & 4;
        double t;
        int r = play(&g, &t);
        if (r == PT_OK && t < best)
            best = t, best_choice = choice;
        if (r == PT_ENOMEM)
            rc = r;
        else if (r != PT_OK)
            last_rc = r;
    }
    if (rc == PT_OK && best_choice < 0)
        rc = last_rc; /* no choice fits: its message says why */
    if (rc == PT_OK)
        rc = pt_sched_alloc(P, P, M, 1, &g.s);
    if (rc == PT_OK) {
        g.allow_gap_before_b = best_choice & 1, g.prioritize_b = best_choice & 2,
        g.fill_small_gaps = best_choice & 4;
        rc = play(&g, &best);
    }
    free(g.nf);
    free(g.nb);
    free(g.nw);
    free(g.free_at);
    free(g.mem);
    free(g.idle);
    free(g.first);
    free(g.f_end);
    free(g.b_end);
    if (rc != PT_OK) {
        pt_schedule_destroy(g.s);
        return rc;
    }
    *out = g.s;
    if (span)
        *span = best;
    return PT_OK;
}
