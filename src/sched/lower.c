/* lower.c: the lowering pass: turns a schedule (compute actions only) into
 * a program (program.h), every worker's complete list of actions for one
 * step, so that the executor needs no knowledge of schedule families. Called
 * through pt_program_lower() by `pipetrain schedule --program`, the tests,
 * and (later) the pipeline before it runs a step.
 *
 * For each worker, walking its compute actions in order:
 *   - before an action, a receive for each input deps.c says it needs from
 *     a chunk held by another worker (RECV_ACT for an F's activation,
 *     RECV_GRAD for a backward's gradient);
 *   - the action itself, with its weight version and update mark;
 *   - after it, the send of its output when the consuming chunk is held by
 *     another worker (SEND_ACT, SEND_GRAD); local hand-offs get neither;
 *     with split_sent_backward, a fused BW whose gradient leaves the worker
 *     becomes B, SEND_GRAD, W, so the gradient goes out before the weight
 *     gradient is computed (what a runtime wants; the arithmetic is BW's);
 *     synchronous programs only: an asynchronous backward and its update
 *     stay one BW, as the schedule validator requires;
 *   - synchronous with replicas: REDUCE(chunk) right after the chunk's last
 *     backward piece (its last W or BW), so the sum overlaps what follows;
 *     at zero 2 instead, after every W or BW (and its send), a SCATTER per
 *     piece of its weight pass;
 *   - asynchronous: after each backward carrying an update, REDUCE(chunk)
 *     (replicas > 1) and STEP(chunk).
 * Then, at the end of the list: synchronous, REDUCE of any chunk the worker
 * holds but ran no backward of (a replica with no micro-batch), a TIED per
 * tied pair the worker holds a chunk of (in the options' order; a pair may
 * be one chunk holding both copies, summed on its own worker), under
 * sequence parallelism a SEQUENCE_SUM (the LayerNorms' gradients, each
 * slice's covering its positions, summed over the tensor group), NORM and
 * STEP, then with sharded optimizer state (zero, replicas) a GATHER per chunk
 * the worker holds; asynchronous, a TIED (mean of values) per tied pair. A forward-only
 * program keeps the forwards and their activations' transfers alone.
 */
#include <stdio.h>
#include <stdlib.h>

#include "sched/deps.h"
#include "sched/program.h"
#include "tensor/error.h"

pt_lower_options pt_lower_options_default(void)
{
    return (pt_lower_options){.forward_only = 0,
                              .step = 1,
                              .tied = NULL,
                              .n_tied = 0,
                              .split_sent_backward = 0,
                              .zero = 0,
                              .weight_pieces = NULL,
                              .tensor_pieces = NULL,
                              .sequence_sum = 0};
}

static pt_prog_action transfer(pt_prog_kind kind, const pt_action *a, int peer)
{
    return (pt_prog_action){
        .kind = kind, .chunk = a->chunk, .mb = a->mb, .peer = peer, .version = -1};
}

static pt_prog_action collective(pt_prog_kind kind, int chunk, int peer, bool mean)
{
    return (pt_prog_action){
        .kind = kind, .chunk = chunk, .mb = -1, .peer = peer, .version = -1, .mean = mean};
}

/* The tensor group's sums between the pieces of compute action a. */
static int push_tensor_sums(pt_program *p, int w, const pt_action *a, int pieces)
{
    int rc = PT_OK;
    for (int k = 0; k + 1 < pieces && rc == PT_OK; k++)
        rc = pt_prog_push(p, w,
                          (pt_prog_action){.kind = PT_PROG_TENSOR_SUM,
                                           .chunk = a->chunk,
                                           .mb = a->mb,
                                           .peer = k,
                                           .version = -1,
                                           .backward = a->kind != PT_ACT_F});
    return rc;
}

static int check_tied(const pt_schedule *s, const pt_lower_options *o)
{
    if (o->n_tied < 0 || (o->n_tied > 0 && !o->tied))
        return pt_fail(PT_EINVAL, "tied pairs: %d given without a list", o->n_tied);
    for (int i = 0; i < o->n_tied; i++) {
        int a = o->tied[2 * i], b = o->tied[2 * i + 1];
        if (a < 0 || b < 0 || a >= s->n_chunks || b >= s->n_chunks)
            return pt_fail(PT_EINVAL, "tied pair %d-%d: needs chunks of the schedule's %d", a, b,
                           s->n_chunks);
    }
    return PT_OK;
}

/* Asynchronous replicas sum their gradients before every update, so every
 * replica of a chunk must update it equally often. */
static int check_async_replicas(const pt_schedule *s)
{
    int C = s->n_chunks, R = s->replicas;
    int *updates = calloc((size_t)C * (size_t)R, sizeof(int));
    if (!updates)
        return pt_fail(PT_ENOMEM, "out of memory lowering a schedule");
    for (int m = 0; m < s->n_micro; m++)
        for (int c = 0; c < C; c++)
            updates[c * R + s->route[m * C + c]]++;
    int rc = PT_OK;
    for (int c = 0; c < C && rc == PT_OK; c++)
        for (int k = 1; k < R && rc == PT_OK; k++)
            if (updates[c * R + k] != updates[c * R])
                rc = pt_fail(PT_EINVAL,
                             "%s: replica %d of chunk %d updates it %d times, replica 0 "
                             "%d times: asynchronous replicas sum their gradients before "
                             "every update, so they must pair up (micro-batches a "
                             "multiple of the replicas)",
                             s->name, k, c, updates[c * R + k], updates[c * R]);
    free(updates);
    return rc;
}

static int lower_worker(const pt_schedule *s, const pt_lower_options *o, bool async, int w,
                        int *last, pt_program *p)
{
    int C = s->n_chunks, R = s->replicas, rc = PT_OK;
    bool fwd = o->forward_only;
    for (int c = 0; c < C; c++)
        last[c] = -1;
    for (int i = 0; i < s->n_actions[w]; i++)
        if (s->actions[w][i].kind == PT_ACT_W || s->actions[w][i].kind == PT_ACT_BW)
            last[s->actions[w][i].chunk] = i;
    for (int i = 0; i < s->n_actions[w] && rc == PT_OK; i++) {
        const pt_action *a = &s->actions[w][i];
        if (fwd && a->kind != PT_ACT_F)
            continue;
        pt_need need[PT_NEEDS_MAX], to;
        int n = pt_sched_needs(C, a, need);
        for (int k = 0; k < n && rc == PT_OK; k++) {
            int from = pt_sched_worker_of(s, need[k].chunk, need[k].mb);
            if (need[k].relation != PT_NEED_OWN && from != w)
                rc = pt_prog_push(
                    p, w,
                    transfer(need[k].kind == PT_ACT_F ? PT_PROG_RECV_ACT : PT_PROG_RECV_GRAD, a,
                             from));
        }
        pt_prog_action x = {.kind = (pt_prog_kind)a->kind,
                            .chunk = a->chunk,
                            .mb = a->mb,
                            .peer = -1,
                            .version = fwd ? -1 : a->version,
                            .update = !fwd && a->update};
        int dest = pt_sched_feeds(C, a, &to) ? pt_sched_worker_of(s, to.chunk, to.mb) : w;
        pt_prog_action send =
            transfer(a->kind == PT_ACT_F ? PT_PROG_SEND_ACT : PT_PROG_SEND_GRAD, a, dest);
        int pieces = !o->tensor_pieces || a->kind == PT_ACT_W ? 1
                     : a->kind == PT_ACT_F                    ? o->tensor_pieces[a->chunk]
                                                              : o->tensor_pieces[C + a->chunk];
        if (a->kind == PT_ACT_BW && ((dest != w && o->split_sent_backward) || pieces > 1) &&
            !async) {
            /* B, its gradient on its way, then W: the same arithmetic */
            pt_prog_action b = x, wt = x;
            b.kind = PT_PROG_B, b.update = false;
            wt.kind = PT_PROG_W;
            if (rc == PT_OK)
                rc = pt_prog_push(p, w, b);
            if (rc == PT_OK)
                rc = push_tensor_sums(p, w, a, pieces);
            if (rc == PT_OK && dest != w)
                rc = pt_prog_push(p, w, send);
            if (rc == PT_OK)
                rc = pt_prog_push(p, w, wt);
        } else {
            if (rc == PT_OK)
                rc = pt_prog_push(p, w, x);
            if (rc == PT_OK)
                rc = push_tensor_sums(p, w, a, pieces);
            if (rc == PT_OK && dest != w)
                rc = pt_prog_push(p, w, send);
        }
        bool scatter = !fwd && !async && R > 1 && o->zero == 2 && o->weight_pieces &&
                       (a->kind == PT_ACT_W || a->kind == PT_ACT_BW);
        for (int k = 0; scatter && k < o->weight_pieces[a->chunk] && rc == PT_OK; k++)
            rc = pt_prog_push(p, w,
                              (pt_prog_action){.kind = PT_PROG_SCATTER,
                                               .chunk = a->chunk,
                                               .mb = a->mb,
                                               .peer = k,
                                               .version = -1});
        bool reduce = async ? a->update : i == last[a->chunk] && !scatter;
        if (rc == PT_OK && !fwd && R > 1 && reduce)
            rc = pt_prog_push(p, w, collective(PT_PROG_REDUCE, a->chunk, -1, false));
        if (rc == PT_OK && async && a->update)
            rc = pt_prog_push(p, w, collective(PT_PROG_STEP, a->chunk, -1, false));
    }
    if (fwd)
        return rc;
    for (int c = 0; c < C && rc == PT_OK && !async && R > 1; c++)
        if (last[c] < 0 && pt_sched_holds(s, w, c, NULL))
            rc = pt_prog_push(p, w, collective(PT_PROG_REDUCE, c, -1, false));
    for (int t = 0; t < o->n_tied && rc == PT_OK; t++) {
        int a = o->tied[2 * t], b = o->tied[2 * t + 1];
        if (pt_sched_holds(s, w, a, NULL) || pt_sched_holds(s, w, b, NULL))
            rc = pt_prog_push(p, w, collective(PT_PROG_TIED, a, b, async));
    }
    if (rc == PT_OK && !async && o->step && o->sequence_sum)
        rc = pt_prog_push(p, w, collective(PT_PROG_SEQUENCE_SUM, -1, -1, false));
    if (rc == PT_OK && !async && o->step)
        rc = pt_prog_push(p, w, collective(PT_PROG_NORM, -1, -1, false));
    if (rc == PT_OK && !async && o->step)
        rc = pt_prog_push(p, w, collective(PT_PROG_STEP, -1, -1, false));
    for (int c = 0; c < C && rc == PT_OK && !async && o->step && o->zero && R > 1; c++)
        if (pt_sched_holds(s, w, c, NULL))
            rc = pt_prog_push(p, w, collective(PT_PROG_GATHER, c, -1, false));
    return rc;
}

int pt_program_lower(const pt_schedule *s, const pt_lower_options *opt, pt_program **out)
{
    *out = NULL;
    pt_lower_options dflt = pt_lower_options_default();
    const pt_lower_options *o = opt ? opt : &dflt;
    int rc = pt_schedule_validate(s);
    if (rc != PT_OK)
        return rc;
    bool async = pt_sched_is_async(s) && !o->forward_only;
    rc = check_tied(s, o);
    if (rc == PT_OK && async && s->replicas > 1)
        rc = check_async_replicas(s);
    if (rc == PT_OK && o->zero && (o->zero < 0 || o->zero > 2))
        rc = pt_fail(PT_EINVAL, "zero %d: sharded optimizer state is stage 1 or 2 (0: off)",
                     o->zero);
    if (rc == PT_OK && o->zero && async)
        rc = pt_fail(PT_EINVAL,
                     "%s is asynchronous: sharded optimizer state needs one synchronous step "
                     "(each replica updates its shard, then they gather)",
                     s->name[0] ? s->name : "custom");
    if (rc != PT_OK)
        return rc;
    pt_program *p;
    rc = pt_prog_alloc(s->n_workers, s->n_chunks, s->n_micro, s->replicas, &p);
    if (rc != PT_OK)
        return rc;
    pt_sched_set_name(p->shape, s->name[0] ? s->name : "custom");
    p->forward_only = o->forward_only != 0;
    pt_sched_copy_placement(p->shape, s);
    int *last = malloc((size_t)s->n_chunks * sizeof(int));
    if (!last)
        rc = pt_fail(PT_ENOMEM, "out of memory lowering a schedule");
    for (int w = 0; w < s->n_workers && rc == PT_OK; w++)
        rc = lower_worker(s, o, async, w, last, p);
    free(last);
    /* a schedule can pass its validator and still lower into a program that
     * cannot run (replicas placed across stages so that a worker's replica
     * sum waits on itself): what is handed on is proved to run */
    if (rc == PT_OK && (rc = pt_program_validate(p)) != PT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", pt_last_error());
        rc = pt_fail(rc, "schedule %s lowers into a program that cannot run: %s",
                     s->name[0] ? s->name : "custom", msg);
    }
    if (rc != PT_OK) {
        pt_program_destroy(p);
        return rc;
    }
    *out = p;
    return PT_OK;
}
