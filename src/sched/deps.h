/* deps.h: what every action waits for, stated once (deps.c holds the
 * tables). The schedule's placement queries (schedule.c), the schedule and
 * program validators (validate.c, program_validate.c), both simulators
 * (simulate.c, program_simulate.c) and the lowering pass (lower.c) read
 * these rules instead of keeping copies of their own; the executor will too.
 *
 * Two tables:
 *   compute   which compute pieces a compute action needs: F(c, m) the
 *             activation of F(c-1, m); B or BW(c, m) its own F(c, m) and the
 *             gradient of B(c+1, m); W(c, m) its own B(c, m).
 *             pt_sched_needs() reads it forwards (what a piece waits for),
 *             pt_sched_feeds() backwards (whom a piece's output goes to).
 *   program   for each kind of program action (program.h), its text token
 *             and the conditions it waits for, in a synchronous and in an
 *             asynchronous program: pt_prog_rule().
 */
#ifndef PT_SCHED_DEPS_H
#define PT_SCHED_DEPS_H

#include <stdbool.h>

#include "sched/program.h"
#include "sched/schedule.h"

typedef enum {
    PT_NEED_UPSTREAM,  /* the previous chunk's activation: F(c-1, m) */
    PT_NEED_OWN,       /* a piece of the same chunk and micro-batch: same worker */
    PT_NEED_DOWNSTREAM /* the next chunk's input gradient: B(c+1, m) */
} pt_need_relation;

typedef struct {
    pt_action_kind kind; /* PT_ACT_F, or PT_ACT_B standing for B or BW */
    int chunk, mb;
    pt_need_relation relation;
} pt_need;

#define PT_NEEDS_MAX 2

/* The compute pieces action a (kind, chunk, mb) waits for, in the order it
 * waits for them, in a model of n_chunks chunks; returns how many (0..2). */
int pt_sched_needs(int n_chunks, const pt_action *a, pt_need need[PT_NEEDS_MAX]);
/* The piece of another chunk that waits for a's output (F's activation, a B
 * or BW's input gradient): true and *consumer filled, or false when a's
 * output stays with its own chunk (the last chunk's F, the first chunk's
 * backward, any W). */
bool pt_sched_feeds(int n_chunks, const pt_action *a, pt_need *consumer);
/* True if a piece of kind `have` is what a need of kind `want` waits for
 * (a BW gives what a B gives). */
static inline bool pt_need_met_by(pt_action_kind want, pt_action_kind have)
{
    return want == have || (want == PT_ACT_B && have == PT_ACT_BW);
}

/* The chunk at the other end of transfer a (a send: the chunk consuming
 * the output of a's piece; a receive: the chunk producing its input), or -1
 * when the piece's data crosses no chunk boundary. A send of chunk c's piece
 * pairs with the receive of this chunk's piece, same direction and
 * micro-batch, and the other way round. */
int pt_prog_transfer_chunk(int n_chunks, const pt_prog_action *a);

/* What a program action waits for, as a set of these conditions. Compute,
 * send and receive conditions hold between one action and another; the rest
 * between an action and the worker's state of its chunks ("its chunks": a
 * REDUCE's or STEP's chunk, a TIED's two chunks where the worker holds them,
 * every chunk the worker holds for NORM). */
enum {
    PT_WAIT_INPUTS = 1 << 0,   /* compute: pt_sched_needs()'s pieces, earlier on this worker or
                                  received earlier from the worker that ran them */
    PT_WAIT_PRODUCER = 1 << 1, /* send: the compute piece whose output it sends, earlier here */
    PT_WAIT_SEND = 1 << 2,     /* receive: the peer has posted the matching send */
    PT_WAIT_GRADS = 1 << 3,    /* every backward piece of its chunks on this worker is done */
    PT_WAIT_REDUCED = 1 << 4,  /* its chunks' gradients are summed over their replicas
                                  (only when replicas > 1) */
    PT_WAIT_UPDATE = 1 << 5,   /* async: a backward of its chunk carrying an update ('!') is
                                  done and that update is not yet applied */
    PT_WAIT_STEPPED = 1 << 6,  /* async: every update of its chunks is applied */
    PT_WAIT_NORM = 1 << 7,     /* the global norm is taken */
    PT_WAIT_REST = 1 << 8,     /* it closes the step: only actions that also wait for
                                  the rest may follow it, and it comes once */
    PT_WAIT_GROUP = 1 << 9,    /* a blocking collective: every member of its group is at it */
    PT_WAIT_STEP = 1 << 10,    /* sync: the worker's STEP has run */
    PT_WAIT_NEVER = 1 << 11,   /* the kind has no place in this kind of program */
    PT_WAIT_PIECE = 1 << 12    /* TENSOR_SUM, SCATTER: right after its compute action or
                                  the sum of the piece before */
};

typedef struct {
    pt_prog_kind kind;
    const char *name;  /* SEND_ACT, REDUCE, ... */
    unsigned sync;     /* PT_WAIT_* in a synchronous training program */
    unsigned async;    /* ... in an asynchronous one (pipedream) */
    unsigned forward;  /* ... in a forward-only (evaluation) program */
    const char *waits; /* the same in words, for messages and docs */
} pt_prog_rule;

/* The row of kind k (k in range). */
const pt_prog_rule *pt_prog_rule_of(pt_prog_kind k);
/* The conditions an action of kind k waits for in a forward-only, an
 * asynchronous or (both false) a synchronous training program. */
unsigned pt_prog_waits(pt_prog_kind k, bool forward_only, bool async);

#endif
