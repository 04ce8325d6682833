/* deps.c: the one table of dependency rules (see deps.h): which compute
 * pieces each compute action needs, and what each kind of program action
 * waits for. The schedule's send/receive queries, the validators, the
 * simulators and the lowering pass all read these tables; a rule changes
 * here or nowhere.
 */
#include "sched/deps.h"

/* Compute: a consumer of a kind in `consumers` needs the `producer` piece of
 * chunk + dchunk, same micro-batch. A row whose dchunk is not 0 crosses a
 * chunk boundary: its data travels between workers unless both chunks sit
 * on one. */
static const struct {
    unsigned consumers;      /* bit per pt_action_kind */
    pt_action_kind producer; /* F, or B for B or BW */
    int dchunk;
    pt_need_relation relation;
} compute_rules[] = {
    {1u << PT_ACT_F, PT_ACT_F, -1, PT_NEED_UPSTREAM},
    {1u << PT_ACT_B | 1u << PT_ACT_BW, PT_ACT_F, 0, PT_NEED_OWN},
    {1u << PT_ACT_B | 1u << PT_ACT_BW, PT_ACT_B, +1, PT_NEED_DOWNSTREAM},
    {1u << PT_ACT_W, PT_ACT_B, 0, PT_NEED_OWN},
};

#define N_COMPUTE_RULES (int)(sizeof compute_rules / sizeof compute_rules[0])

int pt_sched_needs(int n_chunks, const pt_action *a, pt_need need[PT_NEEDS_MAX])
{
    int n = 0;
    for (int i = 0; i < N_COMPUTE_RULES && n < PT_NEEDS_MAX; i++) {
        int c = a->chunk + compute_rules[i].dchunk;
        if (!(compute_rules[i].consumers & 1u << a->kind) || c < 0 || c >= n_chunks)
            continue;
        need[n++] = (pt_need){compute_rules[i].producer, c, a->mb, compute_rules[i].relation};
    }
    return n;
}

bool pt_sched_feeds(int n_chunks, const pt_action *a, pt_need *consumer)
{
    for (int i = 0; i < N_COMPUTE_RULES; i++) {
        int c = a->chunk - compute_rules[i].dchunk;
        if (compute_rules[i].relation == PT_NEED_OWN ||
            !pt_need_met_by(compute_rules[i].producer, a->kind) || c < 0 || c >= n_chunks)
            continue;
        unsigned k = compute_rules[i].consumers;
        pt_action_kind first = (k & 1u << PT_ACT_F) ? PT_ACT_F : PT_ACT_B;
        *consumer = (pt_need){first, c, a->mb, compute_rules[i].relation};
        return true;
    }
    return false;
}

int pt_prog_transfer_chunk(int n_chunks, const pt_prog_action *a)
{
    bool grad = a->kind == PT_PROG_SEND_GRAD || a->kind == PT_PROG_RECV_GRAD;
    pt_action piece = {.kind = grad ? PT_ACT_B : PT_ACT_F, .chunk = a->chunk, .mb = a->mb};
    pt_need need[PT_NEEDS_MAX];
    if (pt_prog_is_send(a->kind))
        return pt_sched_feeds(n_chunks, &piece, need) ? need[0].chunk : -1;
    int n = pt_sched_needs(n_chunks, &piece, need);
    for (int j = 0; j < n; j++)
        if (need[j].relation != PT_NEED_OWN)
            return need[j].chunk;
    return -1;
}

/* Program actions, in pt_prog_kind order. */
enum { GROUP = PT_WAIT_GROUP, NEVER = PT_WAIT_NEVER };

static const pt_prog_rule prog_rules[PT_PROG_N_KINDS] = {
    {PT_PROG_F, "F", PT_WAIT_INPUTS, PT_WAIT_INPUTS, PT_WAIT_INPUTS,
     "the activation of F(chunk-1, mb): earlier on this worker, or received earlier"},
    {PT_PROG_B, "B", PT_WAIT_INPUTS, PT_WAIT_INPUTS, NEVER,
     "its own F(chunk, mb) and the gradient of B(chunk+1, mb), earlier or received earlier"},
    {PT_PROG_W, "W", PT_WAIT_INPUTS, NEVER, NEVER, "its own B(chunk, mb), earlier"},
    {PT_PROG_BW, "BW", PT_WAIT_INPUTS, PT_WAIT_INPUTS, NEVER, "as B"},
    {PT_PROG_SEND_ACT, "SEND_ACT", PT_WAIT_PRODUCER, PT_WAIT_PRODUCER, PT_WAIT_PRODUCER,
     "the F(chunk, mb) whose activation it sends, earlier on this worker"},
    {PT_PROG_RECV_ACT, "RECV_ACT", PT_WAIT_SEND, PT_WAIT_SEND, PT_WAIT_SEND,
     "the peer's SEND_ACT of F(chunk-1, mb)"},
    {PT_PROG_SEND_GRAD, "SEND_GRAD", PT_WAIT_PRODUCER, PT_WAIT_PRODUCER, NEVER,
     "the B or BW(chunk, mb) whose input gradient it sends, earlier on this worker"},
    {PT_PROG_RECV_GRAD, "RECV_GRAD", PT_WAIT_SEND, PT_WAIT_SEND, NEVER,
     "the peer's SEND_GRAD of B(chunk+1, mb)"},
    {PT_PROG_REDUCE, "REDUCE", PT_WAIT_GRADS | GROUP, PT_WAIT_UPDATE | GROUP, NEVER,
     "every backward piece of its chunk here (async: the update's backward); every "
     "replica of the chunk at its REDUCE"},
    {PT_PROG_TIED, "TIED", PT_WAIT_GRADS | PT_WAIT_REDUCED | GROUP,
     PT_WAIT_GRADS | PT_WAIT_STEPPED | GROUP, NEVER,
     "every backward piece of its chunks here and their REDUCE (async: every update "
     "applied); both holders at it"},
    {PT_PROG_NORM, "NORM", PT_WAIT_GRADS | PT_WAIT_REDUCED | PT_WAIT_REST | GROUP, NEVER, NEVER,
     "all of the worker's compute, sends, receives, REDUCE and TIED; every worker at it"},
    {PT_PROG_STEP, "STEP", PT_WAIT_NORM | PT_WAIT_REST, PT_WAIT_UPDATE | PT_WAIT_REDUCED, NEVER,
     "NORM (async: the update's backward and its REDUCE)"},
    {PT_PROG_GATHER, "GATHER", PT_WAIT_STEP | PT_WAIT_REST | GROUP, NEVER, NEVER,
     "the worker's STEP; every replica of the chunk at its GATHER"},
    {PT_PROG_TENSOR_SUM, "TENSOR_SUM", PT_WAIT_PIECE, NEVER, PT_WAIT_PIECE,
     "its compute action (chunk, mb) or the sum of the piece before, right before it"},
    {PT_PROG_SEQUENCE_SUM, "SEQUENCE_SUM", PT_WAIT_GRADS | PT_WAIT_REDUCED | PT_WAIT_REST, NEVER,
     NEVER,
     "every backward piece, REDUCE and TIED of the worker's chunks; the tensor group's "
     "slices run it together"},
    {PT_PROG_SCATTER, "SCATTER", PT_WAIT_PIECE | GROUP, NEVER, NEVER,
     "its W or BW(chunk, mb) (past the gradient's send) or the SCATTER of the piece "
     "before, right before it; every replica of the chunk at its SCATTER"},
};

const pt_prog_rule *pt_prog_rule_of(pt_prog_kind k) { return &prog_rules[k]; }

unsigned pt_prog_waits(pt_prog_kind k, bool forward_only, bool async)
{
    const pt_prog_rule *r = pt_prog_rule_of(k);
    return forward_only ? r->forward : async ? r->async : r->sync;
}
