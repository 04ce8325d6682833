/* validate.c: proves a schedule complete and deadlock-free before anyone
 * runs it: the executor refuses a schedule this rejects, the simulator plays
 * only schedules this accepts, and `pipetrain schedule --from` reports what
 * it says about a hand-written file.
 *
 * Checks, in order, stopping at the first fault, each named by worker,
 * action and what it waits for:
 *   1. the placement: every chunk's replicas and every route in range;
 *   2. every action: kind, chunk, micro-batch in range, on the worker that
 *      holds its chunk for that micro-batch;
 *   3. completeness: every (chunk, micro-batch) has exactly one F and either
 *      one BW or one B and one W (missing and repeated actions);
 *   4. order on one worker: an F before the upstream F it needs, a B before
 *      its own F or the downstream B, a W before its B;
 *   5. async schedules: each F's weight version is the count of updates its
 *      worker applied to the chunk before it, and its backward repeats it;
 *   6. deadlock: the schedule is played with blocking receives (a receive
 *      waits until the sender has run the action that produces the data;
 *      sends are posted and never block). If every unfinished worker waits,
 *      the wait-for cycle is reported.
 * What each action waits for comes from the table in deps.c. Checks 1 to 5
 * also serve the program validator (program_validate.c) through
 * pt_sched_check_compute(), on the compute actions of a program, naming
 * their positions in the program.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/deps.h"
#include "sched/schedule.h"
#include "tensor/error.h"

/* Where each (chunk, micro-batch)'s pieces sit: worker and position. */
typedef struct {
    int f_w, f_i, b_w, b_i, w_w, w_i; /* -1 when absent; B holds B or BW */
    int n_f, n_b, n_w, n_bw;
} slot;

/* The schedule under check, and the position to name for each action. */
typedef struct {
    const pt_schedule *s;
    const int *const *position; /* [w][i], from 1; NULL: i + 1 */
    bool forward_only;          /* forwards only: no backward is missing */
} view;

static const char *act(const pt_action *a, char *buf) { return pt_sched_action_str(a, buf, 48); }

static int pos(const view *v, int w, int i) { return v->position ? v->position[w][i] : i + 1; }

static int check_placement(const pt_schedule *s)
{
    for (int c = 0; c < s->n_chunks; c++)
        for (int k = 0; k < s->replicas; k++) {
            int w = s->chunk_worker[c * s->replicas + k];
            if (w < 0 || w >= s->n_workers)
                return pt_fail(PT_EINVAL,
                               "chunk %d replica %d is placed on worker %d, "
                               "which does not exist (0..%d)",
                               c, k, w, s->n_workers - 1);
        }
    for (int m = 0; m < s->n_micro; m++)
        for (int c = 0; c < s->n_chunks; c++) {
            int k = s->route[m * s->n_chunks + c];
            if (k < 0 || k >= s->replicas)
                return pt_fail(PT_EINVAL,
                               "micro-batch %d is routed to replica %d of chunk %d, "
                               "which has %d",
                               m, k, c, s->replicas);
        }
    return PT_OK;
}

static int check_actions(const view *v, slot *slots)
{
    const pt_schedule *s = v->s;
    char x[48], y[48];
    for (int w = 0; w < s->n_workers; w++)
        for (int i = 0; i < s->n_actions[w]; i++) {
            const pt_action *a = &s->actions[w][i];
            if ((unsigned)a->kind > PT_ACT_BW)
                return pt_fail(PT_EINVAL, "worker %d, position %d: unknown action kind %d", w,
                               pos(v, w, i), (int)a->kind);
            if (a->chunk < 0 || a->chunk >= s->n_chunks || a->mb < 0 || a->mb >= s->n_micro)
                return pt_fail(PT_EINVAL,
                               "worker %d: %s (position %d) names chunk %d of %d or "
                               "micro-batch %d of %d, out of range",
                               w, act(a, x), pos(v, w, i), a->chunk, s->n_chunks, a->mb,
                               s->n_micro);
            int owner = pt_sched_worker_of(s, a->chunk, a->mb);
            if (owner != w)
                return pt_fail(PT_EINVAL,
                               "worker %d: %s (position %d) belongs on worker %d, "
                               "which holds chunk %d for micro-batch %d",
                               w, act(a, x), pos(v, w, i), owner, a->chunk, a->mb);
            if (v->forward_only && a->kind != PT_ACT_F)
                return pt_fail(PT_EINVAL,
                               "worker %d: %s (position %d): a forward-only program runs "
                               "no backward",
                               w, act(a, x), pos(v, w, i));
            slot *sl = &slots[a->chunk * s->n_micro + a->mb];
            int *n, *pw, *pi;
            switch (a->kind) {
            case PT_ACT_F: n = &sl->n_f, pw = &sl->f_w, pi = &sl->f_i; break;
            case PT_ACT_W: n = &sl->n_w, pw = &sl->w_w, pi = &sl->w_i; break;
            case PT_ACT_B: n = &sl->n_b, pw = &sl->b_w, pi = &sl->b_i; break;
            default: n = &sl->n_bw, pw = &sl->b_w, pi = &sl->b_i; break;
            }
            if (*n > 0)
                return pt_fail(PT_EINVAL,
                               "worker %d: %s (position %d) is repeated: it already "
                               "ran at position %d",
                               w, act(a, x), pos(v, w, i), pos(v, w, *pi));
            if ((a->kind == PT_ACT_BW && sl->n_b + sl->n_w > 0) ||
                ((a->kind == PT_ACT_B || a->kind == PT_ACT_W) && sl->n_bw > 0)) {
                const pt_action *o = sl->n_bw  ? &s->actions[sl->b_w][sl->b_i]
                                     : sl->n_b ? &s->actions[sl->b_w][sl->b_i]
                                               : &s->actions[sl->w_w][sl->w_i];
                return pt_fail(PT_EINVAL,
                               "worker %d: %s (position %d) repeats the backward "
                               "of chunk %d, micro-batch %d, already in %s",
                               w, act(a, x), pos(v, w, i), a->chunk, a->mb, act(o, y));
            }
            (*n)++;
            *pw = w;
            *pi = i;
        }
    for (int c = 0; c < s->n_chunks; c++)
        for (int m = 0; m < s->n_micro; m++) {
            const slot *sl = &slots[c * s->n_micro + m];
            int owner = pt_sched_worker_of(s, c, m);
            if (!sl->n_f)
                return pt_fail(PT_EINVAL,
                               "worker %d: F%d.%d is missing (chunk %d never runs "
                               "forward for micro-batch %d)",
                               owner, c, m, c, m);
            if (v->forward_only)
                continue;
            if (!sl->n_bw && !sl->n_b && !sl->n_w)
                return pt_fail(PT_EINVAL,
                               "worker %d: BW%d.%d (or B%d.%d and W%d.%d) is missing "
                               "(chunk %d never runs backward for micro-batch %d)",
                               owner, c, m, c, m, c, m, c, m);
            if (!sl->n_bw && !sl->n_b)
                return pt_fail(PT_EINVAL,
                               "worker %d: B%d.%d is missing (W%d.%d has no B to "
                               "follow)",
                               owner, c, m, c, m);
            if (sl->n_b && !sl->n_w)
                return pt_fail(PT_EINVAL,
                               "worker %d: W%d.%d is missing (B%d.%d is never "
                               "followed by its weight gradient)",
                               owner, c, m, c, m);
        }
    return PT_OK;
}

/* Where the piece that need waits for sits: its worker and index. */
static void piece_at(const pt_schedule *s, const slot *slots, const pt_need *need, int *w, int *i)
{
    const slot *sl = &slots[need->chunk * s->n_micro + need->mb];
    *w = need->kind == PT_ACT_F ? sl->f_w : sl->b_w;
    *i = need->kind == PT_ACT_F ? sl->f_i : sl->b_i;
}

static int check_local_order(const view *v, const slot *slots)
{
    const pt_schedule *s = v->s;
    char x[48], y[48];
    for (int w = 0; w < s->n_workers; w++)
        for (int i = 0; i < s->n_actions[w]; i++) {
            const pt_action *a = &s->actions[w][i];
            pt_need need[PT_NEEDS_MAX];
            int n = pt_sched_needs(s->n_chunks, a, need);
            for (int k = 0; k < n; k++) {
                int nw, ni;
                piece_at(s, slots, &need[k], &nw, &ni);
                if (nw != w || ni < i)
                    continue;
                act(&s->actions[nw][ni], y);
                if (need[k].relation == PT_NEED_UPSTREAM)
                    return pt_fail(PT_EINVAL,
                                   "worker %d: %s (position %d) comes before the "
                                   "upstream %s it needs (position %d)",
                                   w, act(a, x), pos(v, w, i), y, pos(v, w, ni));
                if (need[k].relation == PT_NEED_DOWNSTREAM)
                    return pt_fail(PT_EINVAL,
                                   "worker %d: %s (position %d) comes before the "
                                   "downstream %s (position %d) it needs",
                                   w, act(a, x), pos(v, w, i), y, pos(v, w, ni));
                return pt_fail(PT_EINVAL,
                               "worker %d: %s (position %d) comes before its %s%s (position %d)", w,
                               act(a, x), pos(v, w, i), need[k].kind == PT_ACT_F ? "own " : "", y,
                               pos(v, w, ni));
            }
        }
    return PT_OK;
}

static int check_versions(const view *v, const slot *slots)
{
    const pt_schedule *s = v->s;
    char x[48];
    int *updates = calloc((size_t)s->n_chunks, sizeof(int));
    if (!updates)
        return pt_fail(PT_ENOMEM, "out of memory validating a schedule");
    int rc = PT_OK;
    for (int w = 0; w < s->n_workers && rc == PT_OK; w++) {
        memset(updates, 0, (size_t)s->n_chunks * sizeof(int));
        for (int i = 0; i < s->n_actions[w] && rc == PT_OK; i++) {
            const pt_action *a = &s->actions[w][i];
            const slot *sl = &slots[a->chunk * s->n_micro + a->mb];
            int want =
                a->kind == PT_ACT_F ? updates[a->chunk] : s->actions[sl->f_w][sl->f_i].version;
            if (a->kind != PT_ACT_W && a->version != want)
                rc = pt_fail(PT_EINVAL,
                             "worker %d: %s (position %d) should use weight version "
                             "%d (%s)",
                             w, act(a, x), pos(v, w, i), want,
                             a->kind == PT_ACT_F ? "the updates applied before it"
                                                 : "the version its forward used");
            else if (a->kind == PT_ACT_W && (a->version >= 0 || a->update))
                rc = pt_fail(PT_EINVAL,
                             "worker %d: %s (position %d): an asynchronous schedule "
                             "has no split W",
                             w, act(a, x), pos(v, w, i));
            else if (a->kind == PT_ACT_F && a->update)
                rc = pt_fail(PT_EINVAL,
                             "worker %d: %s (position %d): a forward cannot update "
                             "weights",
                             w, act(a, x), pos(v, w, i));
            else if (a->kind != PT_ACT_F && !a->update)
                rc = pt_fail(PT_EINVAL,
                             "worker %d: %s (position %d): every backward of an "
                             "asynchronous schedule updates the weights (add '!')",
                             w, act(a, x), pos(v, w, i));
            if (a->kind != PT_ACT_F && a->update)
                updates[a->chunk]++;
        }
    }
    free(updates);
    return rc;
}

/* The piece action a waits for, or NULL when ready. */
static const pt_action *waits_for(const pt_schedule *s, const slot *slots, const char *done_f,
                                  const char *done_b, const pt_action *a)
{
    pt_need need[PT_NEEDS_MAX];
    int n = pt_sched_needs(s->n_chunks, a, need);
    for (int k = 0; k < n; k++) {
        size_t at = (size_t)need[k].chunk * (size_t)s->n_micro + (size_t)need[k].mb;
        if ((need[k].kind == PT_ACT_F ? done_f : done_b)[at])
            continue;
        int w, i;
        piece_at(s, slots, &need[k], &w, &i);
        return &s->actions[w][i];
    }
    return NULL;
}
static int check_deadlock(const pt_schedule *s, const slot *slots)
{
    size_t n = (size_t)s->n_chunks * (size_t)s->n_micro;
    int P = s->n_workers;
    char *done_f = calloc(n, 1), *done_b = calloc(n, 1);
    int *next = calloc((size_t)P, sizeof(int));
    int rc = PT_OK;
    if (!done_f || !done_b || !next) {
        rc = pt_fail(PT_ENOMEM, "out of memory validating a schedule");
        goto done;
    }
    for (bool progress = true; progress;) {
        progress = false;
        for (int w = 0; w < P; w++)
            while (next[w] < s->n_actions[w]) {
                const pt_action *a = &s->actions[w][next[w]];
                if (waits_for(s, slots, done_f, done_b, a))
                    break;
                size_t k = (size_t)a->chunk * (size_t)s->n_micro + (size_t)a->mb;
                if (a->kind == PT_ACT_F)
                    done_f[k] = 1;
                else if (a->kind != PT_ACT_W)
                    done_b[k] = 1;
                next[w]++;
                progress = true;
            }
    }
    int stuck = -1;
    for (int w = 0; w < P && stuck < 0; w++)
        if (next[w] < s->n_actions[w])
            stuck = w;
    if (stuck < 0)
        goto done;
    /* Follow who waits for whom from the first stuck worker until a worker
     * repeats: that loop is the cycle. */
    const int *seen = next; /* where each worker is stuck */
    char *on_path = calloc((size_t)P, 1);
    int *path = calloc((size_t)(P + 1), sizeof(int));
    if (!on_path || !path) {
        free(on_path);
        free(path);
        rc = pt_fail(PT_ENOMEM, "out of memory validating a schedule");
        goto done;
    }
    int len = 0, w = stuck;
    while (!on_path[w]) {
        on_path[w] = 1;
        path[len++] = w;
        const pt_action *need = waits_for(s, slots, done_f, done_b, &s->actions[w][seen[w]]);
        w = pt_sched_worker_of(s, need->chunk, need->mb);
    }
    int start = 0;
    while (path[start] != w)
        start++;
    char msg[900];
    int off = snprintf(msg, sizeof msg, "deadlock:");
    for (int i = start; i < len && off < (int)sizeof msg; i++) {
        int v = path[i];
        const pt_action *a = &s->actions[v][seen[v]];
        const pt_action *need = waits_for(s, slots, done_f, done_b, a);
        char x[48], y[48];
        off += snprintf(msg + off, sizeof msg - (size_t)off,
                        "%s worker %d waits at %s (position %d) for %s from worker %d",
                        i == start ? "" : ";", v, act(a, x), seen[v] + 1, act(need, y),
                        pt_sched_worker_of(s, need->chunk, need->mb));
    }
    rc = pt_fail(PT_EDEADLOCK, "%s", msg);
    free(on_path);
    free(path);
done:
    free(done_f);
    free(done_b);
    free(next);
    return rc;
}

/* Header sanity; slots allocated for checks 2 onwards. */
static int begin(const pt_schedule *s, slot **slots)
{
    *slots = NULL;
    if (!s)
        return pt_fail(PT_EINVAL, "no schedule");
    if (s->n_workers < 1 || s->n_chunks < 1 || s->n_micro < 1 || s->replicas < 1)
        return pt_fail(PT_EINVAL, "schedule of %d workers, %d chunks, %d micro-batches",
                       s->n_workers, s->n_chunks, s->n_micro);
    int rc = check_placement(s);
    if (rc != PT_OK)
        return rc;
    size_t n = (size_t)s->n_chunks * (size_t)s->n_micro;
    *slots = malloc(n * sizeof **slots);
    if (!*slots)
        return pt_fail(PT_ENOMEM, "out of memory validating a schedule");
    for (size_t i = 0; i < n; i++)
        (*slots)[i] = (slot){-1, -1, -1, -1, -1, -1, 0, 0, 0, 0};
    return PT_OK;
}

/* Checks 2 to 5 on a placement already checked. */
static int check_compute(const view *v, slot *slots)
{
    int rc = check_actions(v, slots);
    if (rc == PT_OK)
        rc = check_local_order(v, slots);
    if (rc == PT_OK && pt_sched_is_async(v->s))
        rc = check_versions(v, slots);
    return rc;
}

int pt_sched_check_compute(const pt_schedule *s, const int *const *position, bool forward_only)
{
    slot *slots;
    int rc = begin(s, &slots);
    if (rc == PT_OK)
        rc = check_compute(&(view){s, position, forward_only}, slots);
    free(slots);
    return rc;
}

int pt_schedule_validate(const pt_schedule *s)
{
    slot *slots;
    int rc = begin(s, &slots);
    if (rc == PT_OK)
        rc = check_compute(&(view){s, NULL, false}, slots);
    if (rc == PT_OK)
        rc = check_deadlock(s, slots);
    free(slots);
    return rc;
}
