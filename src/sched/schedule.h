/* schedule.h: the in-memory form of a pipeline schedule, shared by the
 * generators, the text format, the validator, the simulator and the
 * renderers in src/sched/, and read by the executor (src/runtime/), which
 * walks one worker's action list per thread or rank.
 *
 * The model's blocks are cut into n_chunks consecutive pieces, the chunks
 * (virtual stages), numbered in model order: chunk 0 takes the micro-batch,
 * chunk n_chunks-1 computes the loss. Each chunk is placed on `replicas`
 * workers (1 except for 1f1b-rr and pipedream with replicas, where every
 * stage has data-parallel copies);
 * every micro-batch is routed to one replica of every chunk, and its forward
 * and backward of that chunk run there.
 *
 * Each worker has an ordered array of actions:
 *   F  (chunk, mb)  forward: needs F(chunk-1, mb)'s output, sends to chunk+1
 *   B  (chunk, mb)  gradient w.r.t. the chunk's input: needs F(chunk, mb) and
 *                   B(chunk+1, mb)'s gradient, sends to chunk-1
 *   W  (chunk, mb)  gradient w.r.t. the chunk's weights: needs B(chunk, mb);
 *                   nobody waits for it
 *   BW (chunk, mb)  B then W, fused
 * (deps.c states these needs once, for everyone.) Sends and receives are not
 * stored: pt_sched_send_to()/pt_sched_recv_from() derive them from the
 * placement, and the lowering pass (lower.c) writes them out, with the
 * step's collectives, as a program (program.h). The executor posts each
 * receive before the action that needs it and each send right after the
 * action that produces it.
 *
 * Asynchronous schedules (pipedream) carry two more facts per action:
 * `version`, the weight version a forward uses (counted in weight updates the
 * worker has applied to that chunk before it) and that its backward repeats,
 * so the executor stashes one weight copy per in-flight micro-batch; and
 * `update`, set on every backward after which the worker applies the
 * optimizer step to that chunk at once (no flush, no gradient accumulation).
 * With replicas (PipeDream's 1F1B-RR) every replica of a stage applies its
 * j-th update after its j-th backward, and the runtime makes those updates
 * one: the replicas' gradients are summed before each of them.
 * Synchronous schedules have version -1 and update 0 everywhere: the executor
 * accumulates gradients over all micro-batches, all-reduces across replicas
 * (1f1b-rr) and steps once after the whole action list.
 */
#ifndef PT_SCHED_SCHEDULE_H
#define PT_SCHED_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>

#include "pipetrain.h"

typedef enum {
    PT_ACT_F = 0, /* forward */
    PT_ACT_B = 1, /* backward w.r.t. the input only */
    PT_ACT_W = 2, /* backward w.r.t. the weights only */
    PT_ACT_BW = 3 /* fused backward: B then W */
} pt_action_kind;

typedef struct {
    pt_action_kind kind;
    int chunk;   /* 0..n_chunks-1, model order */
    int mb;      /* micro-batch, 0..n_micro-1 */
    int version; /* async: weight version used by this F and its backward; else -1 */
    bool update; /* async: apply the weight update of `chunk` after this backward */
} pt_action;

struct pt_schedule {
    char name[32];     /* the generator's name, or what a text file says */
    int n_workers;     /* stages x replicas */
    int n_chunks;      /* virtual stages in total */
    int n_micro;       /* micro-batches */
    int replicas;      /* copies of every chunk, >= 1 */
    int *chunk_worker; /* [n_chunks * replicas]: worker of (chunk c, replica k) at c*replicas+k */
    int *route; /* [n_micro * n_chunks]: replica of chunk c that runs micro-batch m, at m*n_chunks+c
                 */
    int *n_actions;      /* [n_workers] */
    int *cap_actions;    /* [n_workers] allocated length of actions[w] */
    pt_action **actions; /* [n_workers][n_actions[w]] in execution order */
};

/* ---- building (generators, parser) ---- */

/* An empty schedule: placement chunk c on worker c % n_workers (replica 0),
 * every route 0, no actions. n_workers must be a multiple of replicas. */
int pt_sched_alloc(int n_workers, int n_chunks, int n_micro, int replicas, pt_schedule **out);
/* Appends an action to worker w's list. */
int pt_sched_push(pt_schedule *s, int w, pt_action_kind kind, int chunk, int mb);
/* The same with the async fields. */
int pt_sched_push_async(pt_schedule *s, int w, pt_action_kind kind, int chunk, int mb, int version,
                        bool update);
void pt_sched_set_name(pt_schedule *s, const char *name);
/* Copies src's chunk_worker and route into dst, of the same sizes. */
void pt_sched_copy_placement(pt_schedule *dst, const pt_schedule *src);
/* Makes room for one more of n items of `size` bytes in *items (capacity
 * *cap), doubling it when full. */
int pt_sched_grow(void **items, int *cap, int n, size_t size);

/* ---- queries (everyone) ---- */

/* Pipeline depth in workers: n_workers / replicas. */
int pt_sched_stages(const pt_schedule *s);
/* Chunks per worker when every worker holds the same number, else 0. */
int pt_sched_virtual(const pt_schedule *s);
/* The worker that runs chunk's F, B and W for micro-batch mb. */
int pt_sched_worker_of(const pt_schedule *s, int chunk, int mb);
/* True if worker w holds chunk (as any of its replicas); *replica (unless
 * NULL) gets which. */
bool pt_sched_holds(const pt_schedule *s, int w, int chunk, int *replica);
static inline bool pt_sched_is_first_chunk(const pt_schedule *s, int chunk)
{
    (void)s;
    return chunk == 0;
}
static inline bool pt_sched_is_last_chunk(const pt_schedule *s, int chunk)
{
    return chunk == s->n_chunks - 1;
}
/* The worker that a's result goes to: F -> holder of (chunk+1, mb), B/BW ->
 * holder of (chunk-1, mb). -1 when nothing is sent (last chunk's F, first
 * chunk's backward, any W). May equal the action's own worker when
 * neighbouring chunks share it: a local hand-off, no transfer. */
int pt_sched_send_to(const pt_schedule *s, const pt_action *a);
/* The worker a's input comes from: F <- holder of (chunk-1, mb), B/BW <-
 * holder of (chunk+1, mb). -1 when nothing is received (first chunk's F: the
 * data; last chunk's backward: the loss; any W). */
int pt_sched_recv_from(const pt_schedule *s, const pt_action *a);
/* True if the schedule is asynchronous (its backwards carry weight updates). */
bool pt_sched_is_async(const pt_schedule *s);
/* Writes "F3.12", "BW0.5@2!" (async) into buf; returns buf. */
const char *pt_sched_action_str(const pt_action *a, char *buf, size_t n);
/* Deep equality, for the round-trip tests. */
bool pt_sched_equal(const pt_schedule *a, const pt_schedule *b);

/* validate.c: pt_schedule_validate()'s checks but the deadlock play (the
 * placement, every compute action once, order on one worker, weight
 * versions), naming position[w][i] (from 1; NULL: i + 1) for worker w's
 * action i. forward_only: forwards only, no backward missing. The program
 * validator runs it on a program's compute actions. */
int pt_sched_check_compute(const pt_schedule *s, const int *const *position, bool forward_only);

/* simulate.c, shared with the program simulator (program_simulate.c) */
int pt_sched_check_costs(int n_chunks, const pt_schedule_costs *c);
/* A transfer across `boundary` (between chunks boundary-1 and boundary)
 * that leaves its sender at `leaves` on a link free from *link_free: goes
 * on the wire when the link is free, holds it for its bytes over the
 * bandwidth (*link_free moves on), and returns when it arrives. */
double pt_sched_link_arrival(const pt_schedule_costs *c, int boundary, double leaves,
                             double *link_free);
/* Time of a compute action: f, b, w of its chunk; a BW costs b + w. */
double pt_sched_duration(const pt_schedule_costs *c, const pt_action *a);
/* A result with start/end room for n_actions[w] actions per worker. */
pt_schedule_sim *pt_sched_sim_alloc(int workers, const int *n_actions);
/* pt_schedule_simulate() without checking the costs or validating the
 * schedule first, for a generator's candidates (each action once, on its
 * worker, by construction): the play still stops with PT_EDEADLOCK where
 * an action waits for one that never runs. */
int pt_sched_play(const pt_schedule *s, const pt_schedule_costs *costs, pt_schedule_sim **out);
/* Makespan, idle and bubble from busy[] and when each worker is done. */
void pt_sched_sim_finish(pt_schedule_sim *r, const double *free_at);

/* defer_weight.c: each fused backward followed by a forward that waits for
 * nothing from another worker becomes B, that forward, W (*s replaced;
 * PT_EINVAL for an asynchronous schedule) */
int pt_sched_defer_weight(pt_schedule **s);

/* ---- generators (one file per family) ---- */

/* gen_flush.c */
int pt_sched_gen_gpipe(int stages, int micro, pt_schedule **out);
int pt_sched_gen_1f1b(int stages, int micro, pt_schedule **out);
int pt_sched_gen_1f1b_rr(int stages, int micro, int replicas, pt_schedule **out);
int pt_sched_gen_pipedream(int stages, int micro, int replicas, pt_schedule **out);
/* gen_interleaved.c */
int pt_sched_gen_interleaved(int stages, int micro, int v, pt_schedule **out);
int pt_sched_gen_loopedbfs(int stages, int micro, int v, pt_schedule **out);
/* True for the generators that order for pt_schedule_config.costs (zbh1,
 * zbh2, zbv, zb1p, zb2p): a run measures the times for them. */
bool pt_schedule_takes_costs(const char *name);
/* gen_zerobubble.c: each plays its greedy rule in time on the unit costs
 * and on `costs` (NULL: unit; per-chunk allowed, checked by the caller) and
 * keeps the order that `costs` finish first. */
int pt_sched_gen_zbh1(int stages, int micro, const pt_schedule_costs *costs, pt_schedule **out);
int pt_sched_gen_zbh2(int stages, int micro, const pt_schedule_costs *costs, pt_schedule **out);
int pt_sched_gen_zbv(int stages, int micro, const pt_schedule_costs *costs, pt_schedule **out);
/* gen_zb_auto.c: the zero-bubble paper's automatic scheduler */
typedef struct {
    int stages, micro;
    const double *f, *b, *w; /* [stages]: one F, B, W on each stage */
    double comm;             /* one transfer between neighbouring stages */
    double mem_limit;        /* activations a stage may hold, in one F's (M_B) */
    double mem_w;            /* what a micro-batch keeps from its B to its W, in M_B */
} pt_zb_problem;
/* The order with the shortest longest stage found; *span (may be NULL)
 * receives that stage's time from its first F to its last pass. PT_EINVAL
 * when the memory limit cannot hold the passes in flight. */
int pt_sched_gen_zb_auto(const pt_zb_problem *pb, pt_schedule **out, double *span);

#endif
