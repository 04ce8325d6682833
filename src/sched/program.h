/* program.h: the in-memory form of a lowered program: for each worker the
 * complete ordered list of actions it runs in one training (or evaluation)
 * step, so that an executor can be a plain dispatch over action kinds.
 * lower.c builds one from a schedule (schedule.h), text.c reads and writes
 * its text form, program_validate.c proves it complete and deadlock-free,
 * program_simulate.c plays it against a cost model, and `pipetrain schedule
 * --program` prints it. Like a schedule it holds no tensors.
 *
 * Action kinds (the text token in brackets; docs/schedules.md):
 *   F B W BW   [F0.3 BW0.3@1!]  compute, as in a schedule, with the
 *              asynchronous weight version and update mark carried over
 *   SEND_ACT   [SF0.3>1]  F(chunk, mb)'s activation to worker peer, which
 *              holds chunk+1 for mb; right after the F
 *   RECV_ACT   [RF1.3<0]  the activation F(chunk, mb) needs, from peer;
 *              right before the F (the executor may post it earlier)
 *   SEND_GRAD  [SB1.3>0]  B or BW(chunk, mb)'s input gradient to peer, which
 *              holds chunk-1 for mb; right after the backward
 *   RECV_GRAD  [RB0.3<1]  the gradient B or BW(chunk, mb) needs, from peer
 *   REDUCE     [R2]       chunk's gradient summed over its data-parallel
 *              replicas (replicas > 1): synchronous, right after the chunk's
 *              last backward piece on the worker (and its send), so it
 *              overlaps what follows; asynchronous (PipeDream's 1F1B-RR),
 *              before every update of the chunk
 *   TIED       [T0-3]     a tied parameter's gradient summed between the
 *              workers holding chunk and chunk2 (in each replica), after
 *              their backward work and before NORM; [TM0-3] (mean) in an
 *              asynchronous program: the two copies' values averaged, last
 *   SCATTER    [X0.3/1]   zero 2: the weight pass of W or BW(chunk, mb) runs in
 *              pieces (one per block with parameters, the last block
 *              first); this is piece `peer`'s gradient reduce-scattered over
 *              the chunk's replicas (each owner adds the others' share of
 *              its shard, every replica clears the rest), then the next
 *              piece. Right after the compute action (past its send) or the
 *              SCATTER before; the j-th of a chunk and piece on each replica
 *              meet (replicas run the same number of backwards); the last
 *              backward's last SCATTER leaves the chunk summed, as REDUCE
 *              does; synchronous programs only
 *   SEQUENCE_SUM [L]      sequence parallelism: the LayerNorms' gradients
 *              (each slice's covers its positions) summed over the tensor
 *              group, after TIED and before NORM; synchronous only
 *   NORM       [N]        the global gradient norm over every worker (for
 *              clipping and the NaN/Inf check), synchronous only
 *   STEP       [S] [S2]   the optimizer step: synchronous, one S of all the
 *              worker's chunks after NORM, last; asynchronous, S CHUNK right
 *              after each backward that carries an update (and its REDUCE)
 *   GATHER     [G2]       sharded optimizer state (--zero): chunk's
 *              parameters, each replica's updated shard, brought to every
 *              replica of the chunk; after the synchronous S, one per chunk
 *              the worker holds, in chunk order. In a program with GATHERs
 *              a REDUCE leaves each replica the sum of its own shard only.
 *   TENSOR_SUM [AF0.3/1] [AB0.3/0]  tensor parallelism (--tensor T > 1):
 *              the compute action F (AF) or B (AB) of (chunk, mb) runs in
 *              pieces; this is the tensor group's sum (under sequence
 *              parallelism a reduce-scatter or all-gather, as the block
 *              says) after piece `peer`,
 *              then the next piece. Every slice of a stage runs the same
 *              list, so the group (the T slices of this worker) meets each
 *              sum in the same order. Right after its compute action or the
 *              sum before it; synchronous programs only
 * Local hand-offs (neighbouring chunks on one worker) have no send or
 * receive. What each kind waits for is stated once, in deps.c.
 */
#ifndef PT_SCHED_PROGRAM_H
#define PT_SCHED_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>

#include "pipetrain.h"
#include "sched/schedule.h"

typedef enum {
    PT_PROG_F = PT_ACT_F,
    PT_PROG_B = PT_ACT_B,
    PT_PROG_W = PT_ACT_W,
    PT_PROG_BW = PT_ACT_BW,
    PT_PROG_SEND_ACT,
    PT_PROG_RECV_ACT,
    PT_PROG_SEND_GRAD,
    PT_PROG_RECV_GRAD,
    PT_PROG_REDUCE,
    PT_PROG_TIED,
    PT_PROG_NORM,
    PT_PROG_STEP,
    PT_PROG_GATHER,
    PT_PROG_TENSOR_SUM,
    PT_PROG_SEQUENCE_SUM,
    PT_PROG_SCATTER,
    PT_PROG_N_KINDS
} pt_prog_kind;

typedef struct {
    pt_prog_kind kind;
    int chunk;     /* compute, send, receive: the chunk of the compute action on this worker
                      it belongs to; REDUCE, GATHER, async STEP: the chunk; TIED: the pair's
                      first chunk; NORM, sync STEP: -1 */
    int mb;        /* compute, send, receive: the micro-batch; else -1 */
    int peer;      /* send, receive: the other worker; TIED: the pair's second chunk;
                      TENSOR_SUM, SCATTER: the piece it follows; else -1 */
    int version;   /* async compute: the weight version (schedule.h); else -1 */
    bool update;   /* async backward: its chunk's update (a STEP) follows */
    bool mean;     /* TIED: average the copies' values instead of summing gradients */
    bool backward; /* TENSOR_SUM: of the backward's pieces (else the forward's) */
} pt_prog_action;

struct pt_program {
    pt_schedule *shape;       /* name, sizes and placement (chunk_worker, route) as a schedule
                                 with no actions, so the schedule's queries answer for the
                                 program: pt_sched_worker_of(), pt_sched_holds(), ... */
    bool forward_only;        /* evaluation: forwards and their activations only */
    int *n_actions;           /* [shape->n_workers] */
    int *cap_actions;         /* [shape->n_workers] */
    pt_prog_action **actions; /* [w][n_actions[w]] in execution order */
};

static inline bool pt_prog_is_compute(pt_prog_kind k) { return k <= PT_PROG_BW; }
static inline bool pt_prog_is_send(pt_prog_kind k)
{
    return k == PT_PROG_SEND_ACT || k == PT_PROG_SEND_GRAD;
}
static inline bool pt_prog_is_recv(pt_prog_kind k)
{
    return k == PT_PROG_RECV_ACT || k == PT_PROG_RECV_GRAD;
}
static inline bool pt_prog_is_collective(pt_prog_kind k)
{
    return k == PT_PROG_REDUCE || k == PT_PROG_TIED || k == PT_PROG_NORM || k == PT_PROG_GATHER ||
           k == PT_PROG_SCATTER;
}

/* An empty program of that shape: placement as pt_sched_alloc()'s. */
int pt_prog_alloc(int n_workers, int n_chunks, int n_micro, int replicas, pt_program **out);
/* Appends an action to worker w's list. */
int pt_prog_push(pt_program *p, int w, pt_prog_action a);

/* True if some compute action carries a weight version or an update. */
bool pt_prog_is_async(const pt_program *p);
/* The compute part of an action. */
static inline pt_action pt_prog_compute(const pt_prog_action *a)
{
    return (pt_action){.kind = (pt_action_kind)a->kind,
                       .chunk = a->chunk,
                       .mb = a->mb,
                       .version = a->version,
                       .update = a->update};
}
/* The workers of collective a, run on worker w, into members[] (room for
 * n_workers), in ascending order; returns how many. */
int pt_prog_group(const pt_program *p, int w, const pt_prog_action *a, int *members);
/* True if x and y are the same collective (kind, chunks, mean): the j-th
 * such on one member meets the j-th on every other. */
bool pt_prog_same_collective(const pt_prog_action *x, const pt_prog_action *y);
/* Writes a's text token ("SF0.3>1", "R2", "N", ...) into buf; returns buf. */
const char *pt_prog_action_str(const pt_prog_action *a, char *buf, size_t n);
/* Deep equality, for the round-trip tests. */
bool pt_prog_equal(const pt_program *a, const pt_program *b);

#endif
