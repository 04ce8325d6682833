/* pipeline_internal.h: the inside of pt_pipeline, shared by the files of the
 * pipeline in src/runtime/:
 *
 *   pipeline.c          create/destroy, the workers and their stages, the
 *                       worker threads and their jobs, train_step / eval /
 *                       forward_probs
 *   collectives.c       what crosses workers besides the executor's sends:
 *                       the MPI endpoint, replicated schedules, the replicas'
 *                       and tied gradient sums, the norm's shares and the
 *                       losses, probabilities to every process
 *   executor.c          one worker running its lowered program (the heart)
 *   replica_reduce.c    each chunk's gradient summed over its replicas,
 *                       started while the list still runs
 *   activation_store.c  per-worker pools of activation records and boundary
 *                       buffers, with the live-byte count behind the peak
 *   weight_stash.c      PipeDream's weight versions per chunk
 *   trace.c             the action trace, Chrome JSON, the bubble report
 *   memory_report.c     each worker's bytes by kind, measured and predicted
 *
 * Every worker owns a stage: a model holding only its chunks' blocks
 * (parameters, gradients), its optimizer's moments, weight stashes, its
 * activation pool and communication buffers. Workers share no model memory,
 * on threads as under MPI: everything they exchange goes through their
 * transport endpoint. On threads every worker runs in this process on its own
 * thread; under MPI this process runs one worker (workers[rank]) in the
 * calling thread and the other entries of workers[] stay empty (local
 * false). Everything per micro-batch lives in the worker that holds the
 * chunk. */
#ifndef PT_RUNTIME_PIPELINE_INTERNAL_H
#define PT_RUNTIME_PIPELINE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "comm/transport.h"
#include "model/model.h"
#include "plan/memory.h" /* PT_RECEIVES_AHEAD */
#include "runtime/optimizer.h"
#include "sched/program.h"
#include "sched/schedule.h"

typedef struct pt_pipeline pt_pipeline;

/* ---- activation_store.c ---- */

/* Free list of boundary buffers of one size (activations: float or bf16). */
typedef struct {
    size_t bytes;
    void **free;
    int n_free, n_alloc, cap;
} pt_buffer_pool;

/* Free list of activation records of one chunk. */
typedef struct {
    int first, last;
    pt_activations **free;
    int n_free, n_alloc, cap;
    size_t bytes; /* of one record */
} pt_acts_pool;

/* Free list of the backward parts of one chunk's records (model.h). */
typedef struct {
    pt_grad_record **free;
    int n_free, n_alloc, cap;
    size_t bytes; /* of one */
} pt_grads_pool;

/* zero 2: one round of a piece's scatter in flight (zero.c). */
typedef struct {
    bool on;
    int chunk, set, n; /* its buffer set, its requests there */
    size_t from, to;   /* the piece's gradient floats */
    float *mine;       /* where this worker folds its bucket (NULL: none) */
    size_t mine_n;
    size_t held; /* bytes of the piece outside the owned shard */
} pt_scatter_flight;

/* One point of the store's counters over a step (the trace's counter
 * tracks): when, the bytes taken and the activation records taken (the
 * micro-batches in flight on the worker). */
typedef struct {
    double t;
    size_t bytes;
    int records;
} pt_store_sample;

typedef struct {
    pt_model *m;
    int batch;
    int n_chunks;
    pt_acts_pool *acts;       /* [n_chunks] */
    pt_grads_pool *grads;     /* [n_chunks] */
    pt_buffer_pool *boundary; /* [n_chunks]: [c] holds chunk c's input (c >= 1) */
    pt_buffer_pool *outputs;  /* [n_chunks]: the last output kept apart (bytes 0: none) */
    size_t live_bytes, peak_bytes;
    int live_records;
    pt_store_sample *samples; /* the last step's counters; NULL: not kept */
    int n_samples, cap_samples;
} pt_activation_store;

int pt_store_init(pt_activation_store *s, pt_model *m, int n_chunks, const int *chunk_first,
                  const int *chunk_last, int batch);
void pt_store_free(pt_activation_store *s);
/* Allocates `records` activation records, `grad_records` backward parts
 * and `outputs` outputs kept apart for every chunk in `own` (a flag per
 * chunk) up front, and `buffers` boundary buffers per own chunk. */
int pt_store_reserve(pt_activation_store *s, const bool *own, const int *records,
                     const int *grad_records, const int *outputs, int buffers);
/* A record (with its output where that is kept apart) without its backward
 * part, which pt_store_attach_grads adds. */
int pt_store_take_acts(pt_activation_store *s, int chunk, pt_activations **out);
/* The end of a record's backward_input: its output, where that is kept
 * apart, goes back. */
void pt_store_release_output(pt_activation_store *s, int chunk, pt_activations *a);
/* The record goes back, and its backward part if one is attached. */
void pt_store_give_acts(pt_activation_store *s, int chunk, pt_activations *a);
/* A backward part attached to a (the backward about to run), unless one
 * already is. */
int pt_store_attach_grads(pt_activation_store *s, int chunk, pt_activations *a);
/* A buffer the size of chunk `boundary`'s input (1 <= boundary < n_chunks). */
int pt_store_take_buffer(pt_activation_store *s, int boundary, void **out);
void pt_store_give_buffer(pt_activation_store *s, int boundary, void *buf);
size_t pt_store_buffer_bytes(const pt_activation_store *s, int boundary);
/* Bytes of every record and buffer the store has allocated (taken or free). */
size_t pt_store_allocated_bytes(const pt_activation_store *s);
/* Keeps up to `cap` counter samples per step (allocated here, once);
 * pt_store_restart_samples() begins a step's. */
int pt_store_keep_samples(pt_activation_store *s, int cap);
void pt_store_restart_samples(pt_activation_store *s);

/* ---- weight_stash.c ---- */

/* One chunk's parameter span in the model's data arena and its stashed
 * versions (PipeDream weight stashing). */
typedef struct {
    pt_model *model; /* the stage: told when a swap changes its parameters */
    float *data;     /* start of the chunk's parameters in the arena */
    float *grad;     /* the same span of the gradient arena */
    size_t floats;   /* length of the span */
    int version;     /* updates applied to the chunk in this step */
    int n_stash;
    int *stash_version, *stash_refs;
    float **stash;  /* [n_stash] copies; refs 0 = free */
    float *current; /* where the current weights wait during a stashed backward */
} pt_weight_stash;

int pt_stash_init(pt_weight_stash *w, pt_model *m, int first, int last);
void pt_stash_free(pt_weight_stash *w);
/* A forward of version v starts: keep a copy of the weights it uses. */
int pt_stash_forward(pt_weight_stash *w, int version);
/* Before / after a backward piece of a forward that used version v; `done`
 * after its last piece (W or BW): the version's copy is released. */
int pt_stash_enter(pt_weight_stash *w, int version, bool *swapped);
void pt_stash_leave(pt_weight_stash *w, int version, bool swapped, bool done);

/* ---- pipeline.c: the reports' rows ---- */

/* The heading of the reports' first column and rank r's label in it: the
 * worker, or with tensor slices the rank with its worker and slice. */
const char *pt_rank_heading(const pt_pipeline *p);
void pt_rank_label(const pt_pipeline *p, int rank, char *buf, size_t n);

/* ---- trace.c ---- */

typedef struct {
    pt_action_kind kind;
    int chunk, mb;
    int piece;     /* 0: a compute action; k > 0: the tensor group's sum
                      before piece k of the pass (W: the replicas' SCATTER
                      after piece k - 1), with that piece */
    double t0, t1; /* seconds since the step began */
    double tb;     /* BW: where B ends and W begins */
    double ts;     /* piece > 0: where the sum ends and the piece begins */
} pt_trace_event;

/* A step's closing action (TIED, SEQUENCE_SUM, NORM, STEP, GATHER) and when
 * it ran, in seconds since the step began. */
typedef struct {
    pt_prog_action action;
    double t0, t1;
} pt_trace_closing;

/* ---- replica_reduce.c ---- */

/* Floats per bucket of the replicas' gradient sum (4 MiB): the default of
 * pt_pipeline.reduce_bucket_floats. */
#define PT_BUCKET_FLOATS ((size_t)1 << 20)

/* One bucket of a chunk's gradient span on its way between the replicas. */
typedef struct {
    float *grad; /* the bucket in this rank's gradient arena */
    size_t floats;
    int owner;        /* the group position that sums it: 0 (the root), or with
                         sharded state the position whose shard holds it */
    float *scratch;   /* owner: the other members' copies, one after another */
    pt_request *up;   /* owner: a receive per other member; member: its send */
    pt_request *down; /* root: a send of the sum per member; member: its receive */
    int state;
    bool posted;      /* owner: its receives are posted */
    int folded, sent; /* owner: group positions folded in (rank order); root: sums sent */
} pt_reduce_bucket;

typedef struct {
    bool own;   /* this rank holds a replica of the chunk */
    int *group; /* the chunk's replicas, ascending: group[0] is the root */
    int n, pos; /* group size, this rank's place in it */
    int first_bucket, n_buckets;
    bool started; /* the chunk's gradient is final and on its way */
    int buckets_done;
    double t0, t1; /* start and end, seconds since the step began (-1: not) */
} pt_reduce_chunk;

typedef struct {
    bool used;    /* synchronous, replicas > 1 */
    bool running; /* this step's reduction has begun and not been finished */
    bool scatter; /* sharded state: each bucket's sum stays with its shard's owner */
    bool window;  /* sharded: one owned bucket's receives posted at a time, into one
                     bucket's scratch per other member */
    bool window_busy;
    pt_pipeline *p;
    pt_transport *t;
    int n_chunks, tag_base, n_buckets, pending;
    pt_reduce_chunk *chunks; /* [n_chunks] */
    int *groups;
    pt_reduce_bucket *buckets;
    pt_request *reqs;
    float *scratch;
    size_t scratch_floats;
} pt_replica_reduce;

/* ---- the pipeline ---- */

enum {
    PT_JOB_NONE,
    PT_JOB_TRAIN,
    PT_JOB_EVAL,
    PT_JOB_PREDICT,
    PT_JOB_PROBS,
    PT_JOB_RUN,
    PT_JOB_EXIT
};

/* What one worker keeps for (chunk, micro-batch) between its actions. */
typedef struct {
    pt_activations *acts;
    bool drop_after_send; /* the record goes back once its output is sent */
    void *din;            /* B's input gradient, until SEND_GRAD sends it */
    void *in;             /* input of the chunk (chunks > 0), until the last backward piece */
    void *gin;            /* gradient of the chunk's output, until B has read it */
    pt_request in_req, gin_req;
    bool in_posted, gin_posted; /* a receive is in flight */
    bool in_ready, gin_ready;   /* the buffer holds its data */
    int version;
} pt_slot;

typedef struct {
    pt_request req;
    void *buf; /* returned to the store when the send is done (NULL: none) */
    int boundary;
    bool active;
} pt_pending_send;

typedef struct {
    pt_pipeline *p;
    int rank;
    pthread_t thread;
    bool started;
    pt_transport *t;
    pt_activation_store store;
    pt_flight_log flight; /* the bytes its endpoint has sent and not handed over */
    pt_slot *slots;       /* [n_chunks * n_micro] */
    pt_pending_send *sends;
    int n_sends;
    int *stream_ahead; /* [2 * n_chunks]: the executor's count per receive stream */
    int n_streams;     /* the streams its current list receives on */
    /* per-step record */
    pt_trace_event *events;
    int n_events;
    pt_trace_closing *closing; /* the step's closing actions, as they ran */
    int n_closing;
    double *chunk_time; /* [n_chunks * 3]: F, B, W seconds summed this step */
    int *chunk_count;   /* [n_chunks * 3] */
    /* probs job: records of another batch size */
    pt_activation_store probe;
    int probe_batch;
    size_t probs_floats; /* what the last probs job wrote (last chunk's owner) */
    pt_replica_reduce reduce;
    /* tensor parallelism: this is slice tensor_rank of schedule worker
     * `rank`, world rank `global`; t is a view (transport_slice.c) and
     * tensor_t the world endpoint the group's sums use */
    int tensor_rank, global;
    pt_transport *tensor_t;
    int *tensor_group;          /* [T]: the world ranks of the worker's slices */
    double tensor_sum_time;     /* seconds in the group's sums, this step */
    size_t tensor_sum_bytes;    /* bytes summed, this step */
    int tensor_sums[3];         /* per pt_group_op: how many, this step */
    pt_group_how tensor_how[3]; /* per pt_group_op: the last one's buffer (part: its floats
                                   for PT_GROUP_SUM) */
    /* the stage: what this worker owns */
    bool local;             /* runs in this process */
    pt_model *stage;        /* the blocks of its chunks */
    pt_optimizer *opt;      /* their moments; NULL: forward passes only */
    pt_optimizer *full_opt; /* sharded state, replica 0 while a checkpoint is written:
                               the stage's whole moments, gathered */
    pt_weight_stash *stash; /* [n_chunks], async: own chunks only */
    long *chunk_updates;    /* [n_chunks], async: updates applied so far */
    /* zero 2 (zero.c): two sets (a piece's exchange may still be in flight
     * while the next piece runs) of the other replicas' copies of one bucket
     * of a piece's owned gradient, and of requests; that piece; the most
     * bytes of gradient outside the owned shards held at once (the memory
     * report's transient part) */
    float *scatter_scratch;
    size_t scatter_floats; /* of one copy */
    pt_request *scatter_req;
    pt_scatter_flight scatter_flight;
    size_t scatter_peak;
    double *shares;     /* [n_chunks]: squared gradient norm per chunk */
    double *parts;      /* [n_chunks x D]: each replica shard's part of it */
    float *losses;      /* [n_micro]: every micro-batch's loss, after the step */
    double norm;        /* this step's global gradient norm (NORM) */
    float clip;         /* its clip factor */
    bool skip;          /* the norm is not finite: STEP changes nothing */
    bool prepare;       /* the stage's panels to pack again at its first wait */
    bool zero_grads;    /* its gradients to zero there, or before what reads them */
    bool losses_shared; /* this step's losses went out with the norm */
} pt_worker;

struct pt_pipeline {
    pt_model *desc; /* the model's description: every block, no tensors */
    pt_optim_config optim;
    bool has_optim; /* false: forward passes only */
    pt_pipeline_config cfg;
    char schedule_name[32];
    pt_schedule *s;
    pt_program *train_program, *eval_program; /* the lowered programs every worker runs */
    float loss_scale;                         /* of each micro-batch's loss: 1/M, or 1/D for
                                                 per-micro-batch updates (asynchronous) */
    bool last_skipped;                        /* the last step's gradient was not finite */
    int P, n_chunks, M, mbs;
    bool async, checkpoint;
    int *chunk_first, *chunk_last; /* [n_chunks] */
    double *chunk_cost; /* [3 x n_chunks]: each chunk's profiled F, then B, then W seconds,
                           the zero-bubble order's times; NULL for other schedules */
    pt_threads_world *world;
    bool world_aborted;
    char world_abort_msg[512]; /* MPI: why the world was aborted, for later calls */
    /* MPI: one worker per rank; n_workers = P = stages x replicas */
    bool mpi;
    bool lending;        /* threads: a waiting worker runs parts of the others' (gemm.h) */
    pt_transport *mpi_t; /* the process's endpoint (collectives.c owns it) */
    int rank;            /* this process's first worker; 0 on threads */
    int *all_workers;    /* [P]: 0..P-1, the group of every worker */
    int D;               /* replicas of every stage */
    int T;               /* tensor slices of every stage; workers[] holds
                            n_ranks = P x T, slice t of worker w at w T + t */
    int n_ranks;

    int *bind_cpus; /* threads, bind_cores: worker r's are [r bind_each, (r + 1) bind_each) */
    int bind_each;  /* CPUs per worker: its BLAS threads */

    int zero;                    /* sharded optimizer state: 0 off, 1 moments (and the
                                    gradient sums) sharded, 2 also the gradients: each
                                    piece of a weight pass reduce-scattered at once
                                    (zero.c) */
    bool reduce_overlap;         /* replicas: each REDUCE starts a sum that moves along
                                  * between actions (default); false: each REDUCE is a
                                  * blocking all-reduce (the reference the tests use) */
    size_t reduce_bucket_floats; /* PT_BUCKET_FLOATS; tests make it small */
    pt_worker *workers;
    double step_t0; /* when the last step's actions began */
    /* the job being run */
    pthread_mutex_t mu;
    pthread_cond_t start_cv, done_cv;
    int job;
    long job_gen;
    int n_done;
    const pt_microbatch *job_batch;
    long job_step;
    float job_lr;
    float *job_probs;
    float *job_outputs; /* predict: every micro-batch's last output, in batch order */
    int (*job_fn)(pt_pipeline *p, int worker, void *user);
    void *job_user;
    int err_rc;
    char err_msg[512];
};

/* collectives.c */
/* Tags: the executor's (chunk, mb, dir) take 0 .. 2KM-1 (K chunks, M
 * micro-batches), the replicas' gradient sum 2KM .. 2KM+2K-1; both stay
 * below PT_TAG_FIRST_CONTROL, where collectives.c's own begin. */
#define PT_TAG_FIRST_CONTROL (PT_TAG_MAX - 15)

/* bind_cores.c: the CPUs of every worker on threads (fails where they are
 * too few, or under MPI), and worker r bound to its own once started */
int pt_bind_plan(pt_pipeline *p, int each);
int pt_bind_worker(pt_pipeline *p, int r);

/* The process's MPI endpoint, created once and ended at exit; *out NULL and
 * PT_OK when this process should run on threads (auto, no mpirun or one rank). */
int pt_ranks_endpoint(pt_pipeline_transport want, pt_transport **out);
/* A synchronous schedule for stages x replicas workers from one for `stages`
 * workers and micro/replicas micro-batches: worker w's list, micro-batch j,
 * becomes worker w*D+k's list with micro-batch j*D+k. */
int pt_ranks_replicate(const pt_schedule *base, int replicas, int micro, pt_schedule **out);
/* MPI: rank 0's balance for every rank (profiled partitions may differ). */
int pt_ranks_agree_balance(pt_pipeline *p, int *balance, int n);
/* MPI: rank 0's n times (seconds) for every rank, so that all order the
 * schedule alike. */
int pt_ranks_agree_times(pt_pipeline *p, double *t, int n);
/* Chunk c's gradient summed in place over the chunk's replicas (w is one of
 * them), blocking; nothing to do with one replica. */
int pt_coll_sum_replicas(pt_worker *w, int c);
/* TIED: the tied copies of chunks ca and cb summed between their owners
 * (mean: their values averaged, pipedream). */
int pt_coll_tied(pt_worker *w, int ca, int cb, bool mean);
/* SEQUENCE_SUM: the gradients of the parameters each tensor slice saw only
 * its positions of (sequence parallelism's LayerNorms) summed over the
 * worker's slices. */
int pt_coll_sequence_sum(pt_worker *w);
/* NORM: the global gradient norm over every worker and replica into
 * w->norm, the clip factor into w->clip, w->skip when it is not finite;
 * the micro-batches' losses travel with it (w->losses_shared). */
int pt_coll_norm(pt_worker *w);
/* Every chunk's share of the squared gradient norm (w->shares) and every
 * micro-batch's loss (w->losses, when losses), from their owners to every
 * worker, exactly. */
int pt_coll_share(pt_worker *w, bool shares, bool losses);
/* probs of `floats` floats from the last chunk's owner to one worker of
 * every other process. */
int pt_coll_share_probs(pt_worker *w, float *probs, size_t floats);
/* MPI: n counts summed exactly over every process (each fills the entries
 * of its own workers, zeros elsewhere); threads: nothing to do. */
int pt_coll_sum_counts(pt_pipeline *p, uint64_t *v, size_t n);
/* MPI: records the error, aborts the world (every rank stops), returns rc. */
int pt_ranks_abort(pt_pipeline *p, int rc);
/* Rank r's worker when it runs in this process, else NULL. */
pt_worker *pt_local_worker(const pt_pipeline *p, int rank);
/* The blocks w's stage holds (calloc'ed, one flag per block of the model);
 * NULL (an error set) when it cannot be allocated. */
unsigned char *pt_worker_hold(const pt_worker *w);

/* pipeline.c: the chunk that holds block b (-1: none). */
int pt_pipeline_chunk_of_block(const pt_pipeline *p, int b);
/* Parameter span of chunk c in worker w's stage arena: offset and length in
 * floats (w holds the chunk). */
void pt_worker_chunk_span(const pt_worker *w, int c, size_t *off, size_t *floats);

/* zero.c: sharded optimizer state across a stage's replicas */
/* Worker `worker`'s position among chunk c's replicas in ascending rank
 * order (-1: it holds no replica of c); the worker at a position. */
int pt_zero_position(const pt_pipeline *p, int worker, int c);
int pt_zero_member(const pt_pipeline *p, int c, int pos);
/* Chunk c's shard `pos` of its D replicas: floats [lo, hi) of the chunk's
 * parameter span, counted from its start; the same on every replica, and
 * the same cut whether the state is sharded or not (the norm's parts). */
void pt_zero_shard(const pt_pipeline *p, int c, int pos, size_t *lo, size_t *hi);
/* The worker's own shard of chunk c in its stage arena (absolute floats). */
void pt_zero_own(const pt_worker *w, int c, size_t *lo, size_t *hi);
/* The worker's optimizer over its shards only. */
int pt_zero_make_optimizer(pt_worker *w);
/* zero 2: the scatter's buffers, and the stage's gradients (paged memory,
 * model.h) cleared to the owned shards. */
int pt_zero_scatter_init(pt_worker *w);
void pt_zero_scatter_free(pt_worker *w);
/* Before a step's backward work: the owned shards zeroed, the rest of the
 * gradients given back. */
void pt_zero_clear_grads(pt_worker *w);
/* Before a weight piece adds into floats [from, to) of the stage's
 * gradient arena: their given-back pages made present and writable, their
 * contents kept (a backward's input pass may have added to them already:
 * sequence parallelism's LayerNorms), so the piece's read-then-write of
 * each gradient faults a page in once (pt_arena_populate). */
void pt_zero_prepare_piece(pt_worker *w, size_t from, size_t to);
/* SCATTER: floats [from, to) of the stage's gradient arena (a piece of
 * chunk c's weight pass, this worker's micro-batch) reduce-scattered over
 * the chunk's replicas: each owner adds the others' part of its shard, in
 * position order, then every replica clears what it does not own. The
 * piece's last round of buckets travels while the next piece runs (unless
 * `last`, the pass's last piece): the next SCATTER finishes it. */
int pt_zero_scatter(pt_worker *w, int c, size_t from, size_t to, bool last);
/* The exchange still in flight, finished (a step that stops early). */
int pt_zero_scatter_settle(pt_worker *w);
/* Bytes of the owned shards of the stage's gradients (zero 2). */
size_t pt_zero_owned_grad_bytes(const pt_worker *w);
/* bf16 (zero, replicas): the worker's stage keeps the float master of its
 * own shards only (pt_model_shard_master), its stage being whole now. */
int pt_zero_shard_master(pt_worker *w);
/* For a save: each chunk's float master whole on position 0 (the others
 * send their shards); pt_zero_release_moments shards it again. */
int pt_zero_gather_master(pt_worker *w);
/* GATHER: chunk c's parameters, every shard from its owner to every
 * replica (a sharded master: the bf16 copy, and the vectors' floats). */
int pt_zero_gather(pt_worker *w, int c);
/* TIED under sharded state: every element of the tied pair's gradients
 * summed between the owners of its two copies' shards. */
int pt_zero_tied(pt_worker *w, int ca, int cb);
/* Checkpoints: replica 0 of each stage gathers the stage's moments into
 * w->full_opt (the others send theirs); release frees it. */
int pt_zero_gather_moments(pt_worker *w);
void pt_zero_release_moments(pt_worker *w);
/* Loads: the worker's shards of a whole optimizer of its stage. */
void pt_zero_take_moments(pt_worker *w, pt_optimizer *full);

/* replica_reduce.c */
/* Sizes the reduction of worker w's chunks (buckets of
 * p->reduce_bucket_floats); does nothing unless the pipeline has replicas
 * and is synchronous. Called again after pt_reduce_free when the bucket size
 * changes. */
int pt_reduce_init(pt_replica_reduce *r, pt_worker *w);
void pt_reduce_free(pt_replica_reduce *r);
/* Before a training list: the root posts its receives (when reduce_overlap). */
int pt_reduce_begin(pt_replica_reduce *r, pt_transport *t);
/* The program's REDUCE of `chunk`: its gradient is final here; its sum
 * starts and moves along without blocking. */
int pt_reduce_start(pt_replica_reduce *r, int chunk);
/* Between actions: moves every sum in flight along without blocking. */
int pt_reduce_progress(pt_replica_reduce *r);
/* Waits for every sum of the step; the gradients are then the replicas' sum. */
int pt_reduce_finish(pt_replica_reduce *r);
/* Has this step's reduction begun (and not yet been finished)? */
bool pt_reduce_active(const pt_replica_reduce *r);

/* executor.c */
/* Runs worker w's list of the program on a batch. */
int pt_executor_run(pt_worker *w, const pt_program *prog, const pt_microbatch *batch);
/* Waits for what is in flight and returns every record and buffer. */
int pt_executor_reset(pt_worker *w);
int pt_executor_probs(pt_worker *w, const pt_microbatch *mb, float *probs);
/* The samples of micro-batch k of a batch. */
pt_microbatch pt_pipeline_microbatch(const pt_pipeline *p, const pt_microbatch *batch, int k);
double pt_pipeline_now(void);

#endif
