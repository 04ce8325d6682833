/* program_validate.c: proves a program (program.h) complete and
 * deadlock-free before anyone runs it: pt_program_simulate() plays only
 * programs this accepts, pt_program_lower() output is held to it by the
 * tests, and the executor will refuse a program it rejects.
 *
 * Checks, in order, stopping at the first fault, each named by worker,
 * action (its text token), position (from 1) and what it waits for:
 *   1. the compute actions, as pt_schedule_validate() checks a schedule
 *      (placement, every F and backward once, order on one worker, weight
 *      versions; pt_sched_check_compute());
 *   2. every other action: its chunk, micro-batch and peer in range, and its
 *      kind allowed in this kind of program (deps.c: no NORM in an
 *      asynchronous program, nothing but forwards and their activations in
 *      a forward-only one);
 *   3. transfers: each send after the piece whose output it sends, each
 *      receive before the piece that needs it, the peer the one that holds
 *      the other chunk (never this worker: local hand-offs have none), at
 *      most one of each, every send paired with its receive and every input
 *      from another worker received;
 *   4. on each worker, every collective and STEP after what deps.c says it
 *      waits for (REDUCE after the chunk's last backward piece, TIED after
 *      its chunks' REDUCE, NORM after all but STEP, STEP after NORM; async:
 *      REDUCE and STEP after the update's backward, a STEP for every update;
 *      a NORM is followed by its STEP);
 *   5. collectives: every member of a collective's group reaches it (the
 *      j-th REDUCE of a chunk on one replica meets the j-th on every other),
 *      and any two workers reach the collectives they share in one order;
 *   6. deadlock: the program is played with blocking receives (a receive
 *      waits until its send is posted; sends never block) and blocking
 *      collectives (a member waits until every member is there). If every
 *      unfinished worker waits, the wait-for cycle is reported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/deps.h"
#include "sched/program.h"
#include "tensor/error.h"

typedef struct {
    int w, i; /* worker and index; w = -1 when absent */
} place;

typedef struct {
    const pt_program *p;
    bool async;
    int C, M;
    place *f_at, *b_at;             /* [c*M+m]: F(c, m); B or BW(c, m) */
    place *send_at[2], *recv_at[2]; /* [c*M+m] by direction (0 activation, 1 gradient), c as
                                       the token names it */
    int **occ; /* [w][i]: for a collective, how many like it come before it on w */
} checker;

static const char *tok(const pt_prog_action *a, char *buf)
{
    return pt_prog_action_str(a, buf, 48);
}

static const pt_prog_action *at(const checker *k, place x) { return &k->p->actions[x.w][x.i]; }

/* ---- 1. compute ---- */

static int check_compute(const pt_program *p)
{
    pt_schedule *s;
    int rc = pt_sched_alloc(p->shape->n_workers, p->shape->n_chunks, p->shape->n_micro,
                            p->shape->replicas, &s);
    if (rc != PT_OK)
        return rc;
    pt_sched_copy_placement(s, p->shape);
    int **position = calloc((size_t)p->shape->n_workers, sizeof *position);
    if (!position)
        rc = pt_fail(PT_ENOMEM, "out of memory validating a program");
    for (int w = 0; w < p->shape->n_workers && rc == PT_OK; w++) {
        position[w] = malloc((size_t)(p->n_actions[w] + 1) * sizeof(int));
        if (!position[w])
            rc = pt_fail(PT_ENOMEM, "out of memory validating a program");
        for (int i = 0; i < p->n_actions[w] && rc == PT_OK; i++) {
            const pt_prog_action *a = &p->actions[w][i];
            if (!pt_prog_is_compute(a->kind))
                continue;
            position[w][s->n_actions[w]] = i + 1;
            rc = pt_sched_push_async(s, w, (pt_action_kind)a->kind, a->chunk, a->mb, a->version,
                                     a->update);
        }
    }
    if (rc == PT_OK)
        rc = pt_sched_check_compute(s, (const int *const *)position, p->forward_only);
    for (int w = 0; position && w < p->shape->n_workers; w++)
        free(position[w]);
    free(position);
    pt_schedule_destroy(s);
    return rc;
}

/* ---- 2. fields ---- */

static bool in(int x, int n) { return x >= 0 && x < n; }

static int check_fields(const checker *k)
{
    const pt_program *p = k->p;
    char x[48];
    for (int w = 0; w < p->shape->n_workers; w++)
        for (int i = 0; i < p->n_actions[w]; i++) {
            const pt_prog_action *a = &p->actions[w][i];
            if (!in((int)a->kind, PT_PROG_N_KINDS))
                return pt_fail(PT_EINVAL, "worker %d, position %d: unknown action kind %d", w,
                               i + 1, (int)a->kind);
            bool ok = true;
            switch (a->kind) {
            case PT_PROG_SEND_ACT:
            case PT_PROG_RECV_ACT:
            case PT_PROG_SEND_GRAD:
            case PT_PROG_RECV_GRAD:
                ok = in(a->chunk, k->C) && in(a->mb, k->M) && in(a->peer, p->shape->n_workers);
                break;
            case PT_PROG_REDUCE:
            case PT_PROG_GATHER: ok = in(a->chunk, k->C); break;
            case PT_PROG_TIED: ok = in(a->chunk, k->C) && in(a->peer, k->C); break;
            case PT_PROG_SCATTER: ok = in(a->chunk, k->C) && in(a->mb, k->M) && a->peer >= 0; break;
            case PT_PROG_STEP: ok = a->chunk == -1 || in(a->chunk, k->C); break;
            default: break;
            }
            if (!ok)
                return pt_fail(PT_EINVAL,
                               "worker %d: %s (position %d) names a chunk, micro-batch or "
                               "worker out of range (%d chunks, %d micro-batches, %d workers)",
                               w, tok(a, x), i + 1, k->C, k->M, p->shape->n_workers);
            if (pt_prog_waits(a->kind, p->forward_only, k->async) & PT_WAIT_NEVER)
                return pt_fail(PT_EINVAL, "worker %d: %s (position %d) has no place in %s program",
                               w, tok(a, x), i + 1,
                               p->forward_only ? "a forward-only"
                               : k->async      ? "an asynchronous"
                                               : "a synchronous");
            if (a->kind == PT_PROG_TIED && a->mean != k->async)
                return pt_fail(PT_EINVAL, "worker %d: %s (position %d): %s", w, tok(a, x), i + 1,
                               k->async ? "an asynchronous program averages the tied "
                                          "copies' values (TM)"
                                        : "a synchronous program sums the tied gradients (T)");
            if (a->kind == PT_PROG_STEP && (a->chunk >= 0) != k->async)
                return pt_fail(PT_EINVAL, "worker %d: %s (position %d): %s", w, tok(a, x), i + 1,
                               k->async ? "an asynchronous program steps the chunk of each "
                                          "update (S CHUNK)"
                                        : "a synchronous program steps all its chunks at once (S)");
        }
    return PT_OK;
}

/* A TENSOR_SUM follows its compute piece at once: the compute action of
 * (chunk, mb) for the first sum, the sum of the piece before for the
 * others. The tensor group runs this one list, so its members meet every
 * sum in the same order and none waits on another worker of the program. */
static int check_tensor_sums(const checker *k)
{
    const pt_program *p = k->p;
    char x[48], y[48];
    for (int w = 0; w < p->shape->n_workers; w++)
        for (int i = 0; i < p->n_actions[w]; i++) {
            const pt_prog_action *a = &p->actions[w][i];
            if (a->kind != PT_PROG_TENSOR_SUM)
                continue;
            const pt_prog_action *b = i > 0 ? &p->actions[w][i - 1] : NULL;
            bool ok = a->peer >= 0 && in(a->chunk, k->C) && in(a->mb, k->M) && b &&
                      b->chunk == a->chunk && b->mb == a->mb;
            if (ok && a->peer == 0)
                ok = a->backward ? b->kind == PT_PROG_B || b->kind == PT_PROG_BW
                                 : b->kind == PT_PROG_F;
            else if (ok)
                ok = b->kind == PT_PROG_TENSOR_SUM && b->backward == a->backward &&
                     b->peer == a->peer - 1;
            if (!ok)
                return pt_fail(PT_EINVAL,
                               "worker %d: %s (position %d) follows %s, not its compute action "
                               "or the sum of the piece before",
                               w, tok(a, x), i + 1, b ? tok(b, y) : "nothing");
        }
    return PT_OK;
}

/* A SCATTER follows its weight pass: the first, the W or BW of (chunk,
 * mb) with at most the backward's sends between; the others, the SCATTER
 * of the piece before, at once. */
static int check_scatters(const checker *k)
{
    const pt_program *p = k->p;
    char x[48], y[48];
    for (int w = 0; w < p->shape->n_workers; w++)
        for (int i = 0; i < p->n_actions[w]; i++) {
            const pt_prog_action *a = &p->actions[w][i];
            if (a->kind != PT_PROG_SCATTER)
                continue;
            int j = i - 1;
            while (a->peer == 0 && j >= 0 && pt_prog_is_send(p->actions[w][j].kind))
                j--;
            const pt_prog_action *b = j >= 0 ? &p->actions[w][j] : NULL;
            bool ok = b && b->chunk == a->chunk && b->mb == a->mb;
            if (ok && a->peer == 0)
                ok = b->kind == PT_PROG_W || b->kind == PT_PROG_BW;
            else if (ok)
                ok = j == i - 1 && b->kind == PT_PROG_SCATTER && b->peer == a->peer - 1;
            if (!ok)
                return pt_fail(PT_EINVAL,
                               "worker %d: %s (position %d) follows %s, not its weight pass "
                               "or the SCATTER of the piece before",
                               w, tok(a, x), i + 1, b ? tok(b, y) : "nothing");
        }
    return PT_OK;
}

/* ---- 3. transfers ---- */

static int dir_of(pt_prog_kind kind)
{
    return kind == PT_PROG_SEND_GRAD || kind == PT_PROG_RECV_GRAD;
}

/* The compute piece a transfer belongs to: F(c, m), or B or BW(c, m). */
static place piece_of(const checker *k, const pt_prog_action *a)
{
    size_t x = (size_t)a->chunk * (size_t)k->M + (size_t)a->mb;
    return dir_of(a->kind) ? k->b_at[x] : k->f_at[x];
}

/* The worker at the other end of transfer a and the chunk it holds there
 * (deps.c), or -1 when the piece's data crosses no chunk boundary. */
static int other_end(const checker *k, const pt_prog_action *a, int *chunk)
{
    *chunk = pt_prog_transfer_chunk(k->C, a);
    return *chunk < 0 ? -1 : pt_sched_worker_of(k->p->shape, *chunk, a->mb);
}

/* The transfer that pairs with a, as it should read on the other worker. */
static pt_prog_action partner(const pt_prog_action *a, int w, int chunk)
{
    static const pt_prog_kind twin[] = {[PT_PROG_SEND_ACT] = PT_PROG_RECV_ACT,
                                        [PT_PROG_RECV_ACT] = PT_PROG_SEND_ACT,
                                        [PT_PROG_SEND_GRAD] = PT_PROG_RECV_GRAD,
                                        [PT_PROG_RECV_GRAD] = PT_PROG_SEND_GRAD};
    return (pt_prog_action){
        .kind = twin[a->kind], .chunk = chunk, .mb = a->mb, .peer = w, .version = -1};
}

static int check_transfer(const checker *k, int w, int i)
{
    const pt_prog_action *a = &k->p->actions[w][i];
    char x[48], y[48];
    bool send = pt_prog_is_send(a->kind);
    size_t key = (size_t)a->chunk * (size_t)k->M + (size_t)a->mb;
    place *seen = &(send ? k->send_at : k->recv_at)[dir_of(a->kind)][key];
    if (seen->w >= 0)
        return pt_fail(PT_EINVAL, "worker %d: %s (position %d) repeats %s (worker %d, position %d)",
                       w, tok(a, x), i + 1, tok(at(k, *seen), y), seen->w, seen->i + 1);
    *seen = (place){w, i};
    place piece = piece_of(k, a);
    if (piece.w != w)
        return pt_fail(PT_EINVAL,
                       "worker %d: %s (position %d) belongs with %s, which runs on worker %d", w,
                       tok(a, x), i + 1, tok(at(k, piece), y), piece.w);
    if (send && piece.i > i)
        return pt_fail(PT_EINVAL,
                       "worker %d: %s (position %d) comes before %s (position %d), whose "
                       "output it sends",
                       w, tok(a, x), i + 1, tok(at(k, piece), y), piece.i + 1);
    if (!send && piece.i < i)
        return pt_fail(PT_EINVAL,
                       "worker %d: %s (position %d) comes after %s (position %d), which "
                       "needs it",
                       w, tok(a, x), i + 1, tok(at(k, piece), y), piece.i + 1);
    int chunk, other = other_end(k, a, &chunk);
    if (other < 0)
        return pt_fail(PT_EINVAL, "worker %d: %s (position %d): %s %s no other chunk", w, tok(a, x),
                       i + 1, tok(at(k, piece), y),
                       send ? "sends its output to" : "needs nothing from");
    if (other == w)
        return pt_fail(PT_EINVAL,
                       "worker %d: %s (position %d): chunk %d for micro-batch %d is on this "
                       "worker too, a local hand-off with no transfer",
                       w, tok(a, x), i + 1, chunk, a->mb);
    if (other != a->peer)
        return pt_fail(PT_EINVAL,
                       "worker %d: %s (position %d) names worker %d, but chunk %d for "
                       "micro-batch %d is on worker %d",
                       w, tok(a, x), i + 1, a->peer, chunk, a->mb, other);
    return PT_OK;
}

/* Every send meets its receive and every receive its send. */
static int check_pairs(const checker *k)
{
    char x[48], y[48];
    for (int d = 0; d < 2; d++)
        for (int side = 0; side < 2; side++) {
            place *mine = side ? k->recv_at[d] : k->send_at[d];
            place *theirs = side ? k->send_at[d] : k->recv_at[d];
            for (int j = 0; j < k->C * k->M; j++) {
                if (mine[j].w < 0)
                    continue;
                const pt_prog_action *a = at(k, mine[j]);
                int chunk, other = other_end(k, a, &chunk);
                if (theirs[chunk * k->M + a->mb].w >= 0)
                    continue;
                pt_prog_action want = partner(a, mine[j].w, chunk);
                return pt_fail(PT_EINVAL,
                               "worker %d: %s (position %d) has no matching %s on worker %d",
                               mine[j].w, tok(a, x), mine[j].i + 1, tok(&want, y), other);
            }
        }
    return PT_OK;
}

/* Every input from another worker is received before the piece needing it. */
static int check_inputs_received(const checker *k, int w, int i)
{
    const pt_prog_action *a = &k->p->actions[w][i];
    pt_action c = pt_prog_compute(a);
    pt_need need[PT_NEEDS_MAX];
    char x[48], y[48];
    int n = pt_sched_needs(k->C, &c, need);
    for (int j = 0; j < n; j++) {
        int from = pt_sched_worker_of(k->p->shape, need[j].chunk, need[j].mb);
        int d = need[j].kind != PT_ACT_F;
        if (need[j].relation == PT_NEED_OWN || from == w ||
            k->recv_at[d][(size_t)a->chunk * (size_t)k->M + (size_t)a->mb].w >= 0)
            continue;
        pt_prog_action want = {.kind = d ? PT_PROG_RECV_GRAD : PT_PROG_RECV_ACT,
                               .chunk = a->chunk,
                               .mb = a->mb,
                               .peer = from};
        return pt_fail(PT_EINVAL,
                       "worker %d: %s (position %d) needs the %s of %s%d.%d from worker %d, "
                       "but no %s comes before it",
                       w, tok(a, x), i + 1, d ? "gradient" : "activation", d ? "B" : "F",
                       need[j].chunk, need[j].mb, from, tok(&want, y));
    }
    return PT_OK;
}

static int check_transfers(const checker *k)
{
    const pt_program *p = k->p;
    int rc = PT_OK;
    for (int w = 0; w < p->shape->n_workers && rc == PT_OK; w++)
        for (int i = 0; i < p->n_actions[w] && rc == PT_OK; i++)
            if (pt_prog_is_send(p->actions[w][i].kind) || pt_prog_is_recv(p->actions[w][i].kind))
                rc = check_transfer(k, w, i);
    if (rc == PT_OK)
        rc = check_pairs(k);
    for (int w = 0; w < p->shape->n_workers && rc == PT_OK; w++)
        for (int i = 0; i < p->n_actions[w] && rc == PT_OK; i++)
            if (pt_prog_is_compute(p->actions[w][i].kind))
                rc = check_inputs_received(k, w, i);
    return rc;
}

/* ---- 4. order of the collectives and steps on one worker ---- */

typedef struct {
    int *grads_left; /* [c]: backward pieces (W, BW) of c still to come */
    int *reduced;    /* [c] sync: 1 + index of the REDUCE that summed c; 0: none yet */
    int *pending;    /* [c] async: 0 no update waits, 1 its backward ran, 2 and is summed */
    int *pending_at; /* [c]: index of that backward */
    int rest_at[PT_PROG_N_KINDS]; /* 1 + index of the kind's action that closes the step */
    int closed;                   /* index of the first action that closes the step, -1 */
    bool norm;
    bool stepped; /* sync: the worker's STEP has run */
} worker_state;

/* True if action a, run on worker w, concerns chunk c's gradient. */
static bool concerns(const pt_program *p, int w, const pt_prog_action *a, int c)
{
    switch (a->kind) {
    case PT_PROG_REDUCE:
    case PT_PROG_GATHER: return c == a->chunk;
    case PT_PROG_TIED:
        return (c == a->chunk || c == a->peer) && pt_sched_holds(p->shape, w, c, NULL);
    case PT_PROG_STEP: return a->chunk >= 0 ? c == a->chunk : pt_sched_holds(p->shape, w, c, NULL);
    case PT_PROG_NORM:
    case PT_PROG_SEQUENCE_SUM: return pt_sched_holds(p->shape, w, c, NULL);
    default: return false;
    }
}

static int next_backward(const pt_program *p, int w, int from, int c)
{
    for (int i = from; i < p->n_actions[w]; i++) {
        const pt_prog_action *a = &p->actions[w][i];
        if (a->chunk == c && (a->kind == PT_PROG_W || a->kind == PT_PROG_BW))
            return i;
    }
    return -1;
}

/* Which chunks a REDUCE, TIED or async STEP on w may name. */
static int check_holds(const checker *k, int w, int i)
{
    const pt_program *p = k->p;
    const pt_prog_action *a = &p->actions[w][i];
    char x[48];
    if (a->kind == PT_PROG_TIED && !pt_sched_holds(p->shape, w, a->chunk, NULL) &&
        !pt_sched_holds(p->shape, w, a->peer, NULL))
        return pt_fail(PT_EINVAL, "worker %d: %s (position %d): worker %d holds neither chunk", w,
                       tok(a, x), i + 1, w);
    bool replicated =
        a->kind == PT_PROG_REDUCE || a->kind == PT_PROG_GATHER || a->kind == PT_PROG_SCATTER;
    if ((replicated || (a->kind == PT_PROG_STEP && a->chunk >= 0)) &&
        !pt_sched_holds(p->shape, w, a->chunk, NULL))
        return pt_fail(PT_EINVAL, "worker %d: %s (position %d): worker %d does not hold chunk %d",
                       w, tok(a, x), i + 1, w, a->chunk);
    if (replicated && p->shape->replicas == 1)
        return pt_fail(PT_EINVAL,
                       "worker %d: %s (position %d): chunk %d has one replica, nothing to %s", w,
                       tok(a, x), i + 1, a->chunk, a->kind == PT_PROG_GATHER ? "gather" : "sum");
    return PT_OK;
}

/* Whether chunk c is as action a (waiting for `waits`) needs it. */
static int check_chunk_state(const checker *k, int w, int i, unsigned waits, const worker_state *st,
                             int c)
{
    const pt_program *p = k->p;
    const pt_prog_action *a = &p->actions[w][i];
    char x[48], y[48];
    int j = next_backward(p, w, i + 1, c);
    if (waits & PT_WAIT_GRADS && j >= 0)
        return pt_fail(PT_EINVAL,
                       "worker %d: %s (position %d) comes before %s (position %d), a backward "
                       "piece of chunk %d it waits for",
                       w, tok(a, x), i + 1, tok(&p->actions[w][j], y), j + 1, c);
    bool summed = k->async ? st->pending[c] != 1 : st->reduced[c] > 0;
    if (waits & PT_WAIT_REDUCED && p->shape->replicas > 1 && !summed)
        return pt_fail(PT_EINVAL,
                       "worker %d: %s (position %d) comes before R%d, the sum of chunk %d over "
                       "its replicas it waits for",
                       w, tok(a, x), i + 1, c, c);
    if (waits & PT_WAIT_UPDATE && !st->pending[c])
        return pt_fail(PT_EINVAL,
                       "worker %d: %s (position %d) follows no update of chunk %d: it waits "
                       "for a backward of chunk %d marked '!' whose update is not yet applied",
                       w, tok(a, x), i + 1, c, c);
    if (waits & PT_WAIT_STEPPED && st->pending[c])
        return pt_fail(PT_EINVAL,
                       "worker %d: %s (position %d) comes before S%d, the update after %s "
                       "(position %d) it waits for",
                       w, tok(a, x), i + 1, c, tok(&p->actions[w][st->pending_at[c]], y),
                       st->pending_at[c] + 1);
    return PT_OK;
}

/* The worker's state after action i. */
static int advance(const checker *k, int w, int i, worker_state *st)
{
    const pt_program *p = k->p;
    const pt_prog_action *a = &p->actions[w][i];
    char x[48];
    int c = a->chunk;
    switch (a->kind) {
    case PT_PROG_BW:
        if (k->async && st->pending[c])
            return pt_fail(PT_EINVAL,
                           "worker %d: %s (position %d) comes before S%d, the update after %s "
                           "(position %d)",
                           w, tok(a, x), i + 1, c,
                           tok(&p->actions[w][st->pending_at[c]], (char[48]){0}),
                           st->pending_at[c] + 1);
        if (k->async && a->update)
            st->pending[c] = 1, st->pending_at[c] = i;
        break;
    case PT_PROG_REDUCE:
        if ((k->async && st->pending[c] == 2) || (!k->async && st->reduced[c]))
            return pt_fail(PT_EINVAL, "worker %d: %s (position %d) repeats the sum of chunk %d", w,
                           tok(a, x), i + 1, c);
        if (k->async)
            st->pending[c] = 2;
        else
            st->reduced[c] = i + 1;
        break;
    case PT_PROG_SCATTER: /* the chunk's last backward's pieces leave it summed */
        if (!k->async && next_backward(p, w, i + 1, c) < 0)
            st->reduced[c] = i + 1;
        break;
    case PT_PROG_TIED:
        for (int j = 0; j < i; j++) {
            const pt_prog_action *b = &p->actions[w][j];
            if (b->kind == PT_PROG_TIED && b->chunk == a->chunk && b->peer == a->peer)
                return pt_fail(PT_EINVAL, "worker %d: %s (position %d) repeats position %d", w,
                               tok(a, x), i + 1, j + 1);
        }
        break;
    case PT_PROG_NORM: st->norm = true; break;
    case PT_PROG_STEP:
        if (c >= 0)
            st->pending[c] = 0;
        else
            st->stepped = true;
        break;
    default: break;
    }
    return PT_OK;
}

/* The position of an earlier action on w of the same kind and chunk as
 * action i, or -1. */
static int earlier_same(const pt_program *p, int w, int i)
{
    const pt_prog_action *a = &p->actions[w][i];
    for (int j = 0; j < i; j++)
        if (p->actions[w][j].kind == a->kind && p->actions[w][j].chunk == a->chunk)
            return j;
    return -1;
}

static int check_waits(const checker *k, int w, int i, worker_state *st)
{
    const pt_program *p = k->p;
    const pt_prog_action *a = &p->actions[w][i];
    unsigned waits = pt_prog_waits(a->kind, p->forward_only, k->async);
    char x[48];
    if (st->closed >= 0 && !(waits & PT_WAIT_REST))
        return pt_fail(PT_EINVAL,
                       "worker %d: %s (position %d) comes after %s (position %d), which waits "
                       "for every other action of the step",
                       w, tok(a, x), i + 1, tok(&p->actions[w][st->closed], (char[48]){0}),
                       st->closed + 1);
    if (waits & PT_WAIT_REST) {
        int before = earlier_same(p, w, i);
        if (before >= 0)
            return pt_fail(PT_EINVAL, "worker %d: %s (position %d) repeats position %d", w,
                           tok(a, x), i + 1, before + 1);
        if (!st->rest_at[a->kind])
            st->rest_at[a->kind] = i + 1;
        st->closed = st->closed < 0 ? i : st->closed;
    }
    int rc = check_holds(k, w, i);
    for (int c = 0; c < k->C && rc == PT_OK; c++)
        if (concerns(p, w, a, c))
            rc = check_chunk_state(k, w, i, waits, st, c);
    if (rc == PT_OK && waits & PT_WAIT_STEP && !st->stepped)
        rc = pt_fail(PT_EINVAL,
                     "worker %d: %s (position %d) comes before S, the step whose parameters it "
                     "gathers",
                     w, tok(a, x), i + 1);
    if (rc == PT_OK && waits & PT_WAIT_NORM && !st->norm)
        rc = pt_fail(PT_EINVAL,
                     "worker %d: %s (position %d) comes before N, the global norm it waits for", w,
                     tok(a, x), i + 1);
    return rc == PT_OK ? advance(k, w, i, st) : rc;
}

static int check_local_order(const checker *k)
{
    const pt_program *p = k->p;
    size_t C = (size_t)k->C;
    worker_state st;
    int *mem = calloc(4 * C, sizeof(int));
    if (!mem)
        return pt_fail(PT_ENOMEM, "out of memory validating a program");
    int rc = PT_OK;
    for (int w = 0; w < p->shape->n_workers && rc == PT_OK; w++) {
        memset(mem, 0, 4 * C * sizeof(int));
        st = (worker_state){mem, mem + C, mem + 2 * C, mem + 3 * C, {0}, -1, false, false};
        for (int i = 0; i < p->n_actions[w]; i++)
            if (p->actions[w][i].kind == PT_PROG_W || p->actions[w][i].kind == PT_PROG_BW)
                st.grads_left[p->actions[w][i].chunk]++;
        for (int i = 0; i < p->n_actions[w] && rc == PT_OK; i++)
            rc = check_waits(k, w, i, &st);
        if (rc == PT_OK && st.norm && !st.rest_at[PT_PROG_STEP])
            rc = pt_fail(PT_EINVAL,
                         "worker %d: N (position %d) is not followed by S, the step it is "
                         "taken for",
                         w, st.rest_at[PT_PROG_NORM]);
        for (int c = 0; c < k->C && rc == PT_OK; c++)
            if (st.pending[c]) {
                char x[48];
                rc = pt_fail(PT_EINVAL,
                             "worker %d: %s (position %d) updates chunk %d, but no S%d "
                             "follows it",
                             w, tok(&p->actions[w][st.pending_at[c]], x), st.pending_at[c] + 1, c,
                             c);
            }
    }
    free(mem);
    return rc;
}

/* ---- 5. collectives: every member, one order ---- */

/* The index on worker v of the collective like a that is the j-th of its
 * kind there, or -1. */
static int find_like(const checker *k, int v, const pt_prog_action *a, int j)
{
    for (int i = 0; i < k->p->n_actions[v]; i++)
        if (pt_prog_is_collective(k->p->actions[v][i].kind) &&
            pt_prog_same_collective(&k->p->actions[v][i], a) && k->occ[v][i] == j)
            return i;
    return -1;
}

static bool in_group(const checker *k, int w, int i, int v, int *members)
{
    int n = pt_prog_group(k->p, w, &k->p->actions[w][i], members);
    for (int j = 0; j < n; j++)
        if (members[j] == v)
            return true;
    return false;
}

static int count_occurrences(const checker *k)
{
    const pt_program *p = k->p;
    for (int w = 0; w < p->shape->n_workers; w++)
        for (int i = 0; i < p->n_actions[w]; i++) {
            const pt_prog_action *a = &p->actions[w][i];
            k->occ[w][i] = 0;
            if (!pt_prog_is_collective(a->kind))
                continue;
            for (int j = 0; j < i; j++)
                k->occ[w][i] += pt_prog_is_collective(p->actions[w][j].kind) &&
                                pt_prog_same_collective(&p->actions[w][j], a);
        }
    return PT_OK;
}

static int check_members(const checker *k, int *members, int *theirs)
{
    const pt_program *p = k->p;
    char x[48];
    for (int w = 0; w < p->shape->n_workers; w++)
        for (int i = 0; i < p->n_actions[w]; i++) {
            const pt_prog_action *a = &p->actions[w][i];
            if (!pt_prog_is_collective(a->kind))
                continue;
            int n = pt_prog_group(p, w, a, members);
            for (int m = 0; m < n; m++) {
                int v = members[m];
                if (v == w)
                    continue;
                int j = find_like(k, v, a, k->occ[w][i]);
                if (j < 0)
                    return pt_fail(PT_EINVAL,
                                   "worker %d never reaches %s (number %d of its kind there), "
                                   "which worker %d reaches at position %d: both are members "
                                   "of its group",
                                   v, tok(a, x), k->occ[w][i] + 1, w, i + 1);
                int n2 = pt_prog_group(p, v, &p->actions[v][j], theirs);
                if (n2 != n || memcmp(members, theirs, (size_t)n * sizeof(int)))
                    return pt_fail(PT_EINVAL,
                                   "worker %d: %s (position %d) and worker %d's (position %d) "
                                   "gather different groups of workers",
                                   w, tok(a, x), i + 1, v, j + 1);
            }
        }
    return PT_OK;
}

static int check_order(const checker *k, int *members)
{
    const pt_program *p = k->p;
    char x[48], y[48];
    for (int w = 0; w < p->shape->n_workers; w++)
        for (int v = w + 1; v < p->shape->n_workers; v++) {
            int i = 0, j = 0;
            for (;;) {
                while (i < p->n_actions[w] && !(pt_prog_is_collective(p->actions[w][i].kind) &&
                                                in_group(k, w, i, v, members)))
                    i++;
                while (j < p->n_actions[v] && !(pt_prog_is_collective(p->actions[v][j].kind) &&
                                                in_group(k, v, j, w, members)))
                    j++;
                if (i == p->n_actions[w] || j == p->n_actions[v])
                    break;
                const pt_prog_action *a = &p->actions[w][i], *b = &p->actions[v][j];
                if (!pt_prog_same_collective(a, b) || k->occ[w][i] != k->occ[v][j])
                    return pt_fail(PT_EINVAL,
                                   "collectives out of order: worker %d reaches %s (position "
                                   "%d) where worker %d reaches %s (position %d); the members "
                                   "of collectives must reach them in the same order",
                                   w, tok(a, x), i + 1, v, tok(b, y), j + 1);
                i++, j++;
            }
        }
    return PT_OK;
}

/* ---- 6. deadlock ---- */

/* The worker that w, at action next[w], waits for, and the index of the
 * action there it waits for; -1 when w may go on. */
static int blocked_by(const checker *k, const int *next, int w, int *members, int *at_i)
{
    const pt_prog_action *a = &k->p->actions[w][next[w]];
    if (pt_prog_is_recv(a->kind)) {
        int chunk;
        other_end(k, a, &chunk);
        place s = k->send_at[dir_of(a->kind)][chunk * k->M + a->mb];
        *at_i = s.i;
        return next[s.w] > s.i ? -1 : s.w;
    }
    if (!pt_prog_is_collective(a->kind))
        return -1;
    int n = pt_prog_group(k->p, w, a, members);
    for (int m = 0; m < n; m++) {
        int j = find_like(k, members[m], a, k->occ[w][next[w]]);
        if (next[members[m]] != j) {
            *at_i = j;
            return members[m];
        }
    }
    return -1;
}

static int report_deadlock(const checker *k, const int *next, int stuck, int *members)
{
    const pt_program *p = k->p;
    int P = p->shape->n_workers;
    char *on_path = calloc((size_t)P, 1);
    int *path = calloc((size_t)P + 1, sizeof(int));
    if (!on_path || !path) {
        free(on_path);
        free(path);
        return pt_fail(PT_ENOMEM, "out of memory validating a program");
    }
    int len = 0, w = stuck, at_i;
    while (w >= 0 && !on_path[w] && next[w] < p->n_actions[w]) {
        on_path[w] = 1;
        path[len++] = w;
        w = blocked_by(k, next, w, members, &at_i);
    }
    int start = 0;
    while (start < len && path[start] != w)
        start++;
    if (start == len)
        start = 0;
    char msg[900], x[48], y[48];
    int off = snprintf(msg, sizeof msg, "deadlock:");
    for (int i = start; i < len && off < (int)sizeof msg; i++) {
        int v = path[i], u = blocked_by(k, next, v, members, &at_i);
        const pt_prog_action *a = &p->actions[v][next[v]];
        if (pt_prog_is_recv(a->kind))
            off += snprintf(msg + off, sizeof msg - (size_t)off,
                            "%s worker %d waits at %s (position %d) for %s (position %d) from "
                            "worker %d",
                            i == start ? "" : ";", v, tok(a, x), next[v] + 1,
                            tok(&p->actions[u][at_i], y), at_i + 1, u);
        else
            off += snprintf(msg + off, sizeof msg - (size_t)off,
                            "%s worker %d waits at %s (position %d) for worker %d to reach it",
                            i == start ? "" : ";", v, tok(a, x), next[v] + 1, u);
    }
    free(on_path);
    free(path);
    return pt_fail(PT_EDEADLOCK, "%s", msg);
}

static int check_deadlock(const checker *k, int *members)
{
    const pt_program *p = k->p;
    int P = p->shape->n_workers, at_i;
    int *next = calloc((size_t)P, sizeof(int));
    if (!next)
        return pt_fail(PT_ENOMEM, "out of memory validating a program");
    for (bool progress = true; progress;) {
        progress = false;
        for (int w = 0; w < P; w++)
            while (next[w] < p->n_actions[w] && blocked_by(k, next, w, members, &at_i) < 0) {
                const pt_prog_action *a = &p->actions[w][next[w]];
                if (pt_prog_is_collective(a->kind)) {
                    /* every member is here: all pass together */
                    int n = pt_prog_group(p, w, a, members);
                    for (int m = 0; m < n; m++)
                        next[members[m]]++;
                } else {
                    next[w]++;
                }
                progress = true;
            }
    }
    int rc = PT_OK;
    for (int w = 0; w < P && rc == PT_OK; w++)
        if (next[w] < p->n_actions[w])
            rc = report_deadlock(k, next, w, members);
    free(next);
    return rc;
}

/* ---- the entry point ---- */

static void free_checker(checker *k)
{
    free(k->f_at);
    free(k->b_at);
    for (int d = 0; d < 2; d++) {
        free(k->send_at[d]);
        free(k->recv_at[d]);
    }
    for (int w = 0; k->occ && w < k->p->shape->n_workers; w++)
        free(k->occ[w]);
    free(k->occ);
}

static int init_checker(checker *k, const pt_program *p)
{
    size_t n = (size_t)p->shape->n_chunks * (size_t)p->shape->n_micro;
    *k = (checker){
        .p = p, .async = pt_prog_is_async(p), .C = p->shape->n_chunks, .M = p->shape->n_micro};
    k->f_at = malloc(n * sizeof(place));
    k->b_at = malloc(n * sizeof(place));
    bool ok = k->f_at && k->b_at;
    for (int d = 0; d < 2; d++) {
        k->send_at[d] = malloc(n * sizeof(place));
        k->recv_at[d] = malloc(n * sizeof(place));
        ok = ok && k->send_at[d] && k->recv_at[d];
    }
    k->occ = calloc((size_t)p->shape->n_workers, sizeof(int *));
    ok = ok && k->occ;
    for (int w = 0; ok && w < p->shape->n_workers; w++)
        ok = (k->occ[w] = malloc((size_t)(p->n_actions[w] + 1) * sizeof(int))) != NULL;
    if (!ok)
        return pt_fail(PT_ENOMEM, "out of memory validating a program");
    for (size_t j = 0; j < n; j++) {
        k->f_at[j] = k->b_at[j] = (place){-1, -1};
        for (int d = 0; d < 2; d++)
            k->send_at[d][j] = k->recv_at[d][j] = (place){-1, -1};
    }
    for (int w = 0; w < p->shape->n_workers; w++)
        for (int i = 0; i < p->n_actions[w]; i++) {
            const pt_prog_action *a = &p->actions[w][i];
            if (pt_prog_is_compute(a->kind) && a->kind != PT_PROG_W)
                (a->kind == PT_PROG_F
                     ? k->f_at
                     : k->b_at)[(size_t)a->chunk * (size_t)p->shape->n_micro + (size_t)a->mb] =
                    (place){w, i};
        }
    return count_occurrences(k);
}

int pt_program_validate(const pt_program *p)
{
    if (!p)
        return pt_fail(PT_EINVAL, "no program");
    int rc = check_compute(p);
    if (rc != PT_OK)
        return rc;
    checker k;
    int *members = malloc(2 * (size_t)p->shape->n_workers * sizeof(int));
    rc = init_checker(&k, p);
    if (rc == PT_OK && !members)
        rc = pt_fail(PT_ENOMEM, "out of memory validating a program");
    if (rc == PT_OK)
        rc = check_fields(&k);
    if (rc == PT_OK)
        rc = check_tensor_sums(&k);
    if (rc == PT_OK)
        rc = check_scatters(&k);
    if (rc == PT_OK)
        rc = check_transfers(&k);
    if (rc == PT_OK)
        rc = check_local_order(&k);
    if (rc == PT_OK)
        rc = check_members(&k, members, members + p->shape->n_workers);
    if (rc == PT_OK)
        rc = check_order(&k, members);
    if (rc == PT_OK)
        rc = check_deadlock(&k, members);
    free_checker(&k);
    free(members);
    return rc;
}
