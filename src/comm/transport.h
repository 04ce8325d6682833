/* transport.h: how workers move bytes to each other. The executor (one per
 * worker) calls it; two implementations sit behind it:
 *
 *   threads  every worker is a thread of one process; a "world" of N
 *            endpoints is created once, and endpoint r is used by worker r's
 *            thread only (transport_threads.c);
 *   MPI      every worker is an MPI rank launched by mpirun; each process
 *            holds one endpoint (transport_mpi.c, built when MPI is found).
 *
 * An endpoint is a pt_transport: a table of operations plus the calling
 * worker's rank. The executor uses only the pt_transport_* wrappers below and
 * never learns which implementation it talks to.
 *
 * Semantics (both implementations, MPI's where they agree):
 * - Point to point: isend/irecv never block; wait() blocks until the request
 *   is done. Messages are matched by (source, tag) and arrive in the order
 *   they were sent per (source, tag). A receive must name the exact size of
 *   the matching send. Tags are 0..PT_TAG_MAX. The send buffer must stay
 *   unchanged, and the receive buffer untouched, until wait() returns.
 * - Requests are caller-owned pt_request structs (no allocation per message):
 *   one request per operation in flight; wait() or a successful test() that
 *   says done ends it, and the struct may then be reused.
 * - allreduce_sum_f32 sums a float array in place over a group of ranks (a
 *   list that includes the caller; every member passes the same set, in any
 *   order). The sum is folded in ascending rank order,
 *       out[i] = ((x_g0[i] + x_g1[i]) + x_g2[i]) + ...   (g0 < g1 < ...),
 *   so it is deterministic, identical on every member, and bit-identical
 *   between the threads and MPI transports for the same inputs.
 * - reduce_scatter_f32 and all_gather_f32 share a buffer of
 *   blocks x n x part floats among the group's n members: member k (its
 *   place in ascending rank order) owns floats b n part + k part ..
 *   + part - 1 of every block b (pt_parts; sequence parallelism's
 *   positions of every sample). reduce_scatter leaves in member k's parts
 *   the group's sum, folded as allreduce folds it (the same bits), and
 *   the other parts as they were; all_gather copies every member's parts
 *   into every buffer. Each moves (n - 1) / n of the buffer per member,
 *   where an allreduce moves all of it.
 * - Collectives (allreduce, reduce-scatter, all-gather, barrier) are called by every member of the
 *   group, in the same order on every member, as with MPI.
 * - Failure: abort() marks this worker failed and wakes every worker blocked
 *   in the world: their waits (and every later call) return PT_ETRANSPORT
 *   with a message naming the failed rank. A wait that sees no progress for
 *   timeout_s seconds (0: no limit) fails the same way, naming the peer it
 *   waited for, and aborts the world so that the others stop too.
 * - One thread per endpoint: an endpoint's calls are not thread safe.
 * - Bytes in flight: an endpoint may be watched (pt_transport_watch): every
 *   isend then counts its bytes into the caller's pt_flight_log until the
 *   transport has handed them over, each implementation as it can tell.
 */
#ifndef PT_COMM_TRANSPORT_H
#define PT_COMM_TRANSPORT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "pipetrain.h"

/* The largest tag every transport accepts (MPI guarantees 32767). */
#define PT_TAG_MAX 32767

typedef struct pt_transport pt_transport;
typedef struct pt_request pt_request;

/* ---- bytes in flight ------------------------------------------------------ */

/* One point of an endpoint's bytes in flight: when (CLOCK_MONOTONIC seconds,
 * the executor's clock) and how many. */
typedef struct {
    double t;
    size_t bytes;
} pt_flight_sample;

/* The bytes an endpoint has sent that the transport has not yet handed over:
 * threads, until they are in the receiver's buffer (a message waiting in a
 * link's queue is in flight); MPI, until the send request completes. The
 * trace draws it as a counter. The caller owns the log and attaches it to
 * its endpoint (pt_transport_watch); the transport counts every isend into
 * it and keeps a sample at every change while `samples` has room. The
 * receiver's thread may hand bytes over (threads), hence the lock. */
typedef struct {
    pthread_mutex_t mu;
    size_t bytes;
    pt_flight_sample *samples;
    int n, cap;
} pt_flight_log;

/* Room for cap samples (allocated once). */
int pt_flight_init(pt_flight_log *f, int cap);
void pt_flight_free(pt_flight_log *f);
/* Begins a new list of samples with the count as it stands. */
void pt_flight_restart(pt_flight_log *f);
/* The implementations: bytes sent, and bytes handed over (f NULL: none). */
void pt_flight_sent(pt_flight_log *f, size_t bytes);
void pt_flight_handed(pt_flight_log *f, size_t bytes);

/* One point-to-point operation in flight. The caller owns the memory; every
 * field belongs to the transport. */
struct pt_request {
    int kind; /* 0 idle, PT_REQ_SEND, PT_REQ_RECV */
    int peer;
    int tag;
    int status;      /* result once done */
    atomic_int done; /* set (release) by whichever side completes it */
    int claimed;     /* threads: the peer is copying this request's buffer */
    size_t bytes;
    size_t received; /* receives: the size the matching send had */
    void *buf;
    pt_flight_log *flight;               /* sends: where its bytes count until handed over */
    void *link;                          /* threads: the link it waits on */
    pt_request *next;                    /* threads: intrusive list of posted operations */
    _Alignas(16) unsigned char impl[32]; /* MPI: the MPI_Request */
};

enum { PT_REQ_SEND = 1, PT_REQ_RECV = 2 };

/* A buffer shared among n members: blocks runs of n parts of `part`
 * floats, member k's part k of each run. */
typedef struct {
    size_t blocks, part;
} pt_parts;

typedef struct {
    const char *name; /* "threads" or "mpi" */
    int (*isend)(pt_transport *t, int peer, int tag, const void *buf, size_t bytes,
                 pt_request *req);
    int (*irecv)(pt_transport *t, int peer, int tag, void *buf, size_t bytes, pt_request *req);
    int (*wait)(pt_transport *t, pt_request *req);
    /* *done = 1 when the request has finished (its status is returned). */
    int (*test)(pt_transport *t, pt_request *req, int *done);
    int (*allreduce_sum_f32)(pt_transport *t, const int *group, int n_group, float *buf,
                             size_t count);
    int (*reduce_scatter_f32)(pt_transport *t, const int *group, int n_group, float *buf,
                              pt_parts parts);
    int (*all_gather_f32)(pt_transport *t, const int *group, int n_group, float *buf,
                          pt_parts parts);
    int (*barrier)(pt_transport *t);
    void (*abort)(pt_transport *t, const char *reason);
    void (*destroy)(pt_transport *t);
} pt_transport_ops;

/* Work a blocking wait may do while it waits, one piece at a time: the
 * threads transport's wait() runs it instead of sleeping (a pipeline on
 * threads lends its workers' products this way: gemm.h). */
typedef struct {
    void (*begin)(void); /* a wait starts taking work */
    int (*run)(void);    /* one piece, where there is one: 1 when it ran one */
    void (*end)(void);
} pt_idle_work;

struct pt_transport {
    const pt_transport_ops *ops;
    int rank;
    int size;
    double timeout_s;         /* a wait with no progress this long fails; 0: never */
    pt_flight_log *watch;     /* counts the bytes this endpoint sends (NULL: none) */
    const pt_idle_work *idle; /* what a wait does meanwhile (threads only; NULL: none) */
    void *impl;
};

/* ---- what the executor calls ------------------------------------------- */

static inline int pt_transport_rank(const pt_transport *t) { return t->rank; }
static inline int pt_transport_size(const pt_transport *t) { return t->size; }
static inline const char *pt_transport_name(const pt_transport *t) { return t->ops->name; }

static inline int pt_transport_isend(pt_transport *t, int peer, int tag, const void *buf,
                                     size_t bytes, pt_request *req)
{
    return t->ops->isend(t, peer, tag, buf, bytes, req);
}
static inline int pt_transport_irecv(pt_transport *t, int peer, int tag, void *buf, size_t bytes,
                                     pt_request *req)
{
    return t->ops->irecv(t, peer, tag, buf, bytes, req);
}
static inline int pt_transport_wait(pt_transport *t, pt_request *req)
{
    return t->ops->wait(t, req);
}
static inline int pt_transport_test(pt_transport *t, pt_request *req, int *done)
{
    return t->ops->test(t, req, done);
}
static inline int pt_transport_allreduce_sum_f32(pt_transport *t, const int *group, int n_group,
                                                 float *buf, size_t count)
{
    return t->ops->allreduce_sum_f32(t, group, n_group, buf, count);
}
static inline int pt_transport_reduce_scatter_f32(pt_transport *t, const int *group, int n_group,
                                                  float *buf, pt_parts parts)
{
    return t->ops->reduce_scatter_f32(t, group, n_group, buf, parts);
}
static inline int pt_transport_all_gather_f32(pt_transport *t, const int *group, int n_group,
                                              float *buf, pt_parts parts)
{
    return t->ops->all_gather_f32(t, group, n_group, buf, parts);
}
static inline int pt_transport_barrier(pt_transport *t) { return t->ops->barrier(t); }
static inline void pt_transport_abort(pt_transport *t, const char *reason)
{
    t->ops->abort(t, reason);
}
/* From now on the bytes this endpoint sends count in f (NULL: nowhere).
 * Called by the endpoint's own thread, between operations. */
static inline void pt_transport_watch(pt_transport *t, pt_flight_log *f) { t->watch = f; }
/* Waits for every request of an array; returns the first failure. */
int pt_transport_wait_all(pt_transport *t, pt_request *reqs, int n);
/* Ends an endpoint. Threads: endpoints are freed by the world. MPI: finalizes
 * MPI if this transport initialised it (not after an abort: a dead peer
 * would make MPI_Finalize hang; the process should exit non-zero). */
static inline void pt_transport_destroy(pt_transport *t)
{
    if (t)
        t->ops->destroy(t);
}

/* ---- threads ------------------------------------------------------------ */

typedef struct pt_threads_world pt_threads_world;

typedef struct {
    int queue_slots;  /* messages a link buffers before isend waits (default 8) */
    double timeout_s; /* wait deadline; default PIPETRAIN_TIMEOUT or 0 (none) */
} pt_threads_options;

pt_threads_options pt_threads_options_default(void);
/* N endpoints, ranks 0..n-1; opt may be NULL (defaults). */
int pt_threads_world_create(int n, const pt_threads_options *opt, pt_threads_world **out);
/* Endpoint `rank`, to be used by that worker's thread only. */
pt_transport *pt_threads_world_endpoint(pt_threads_world *w, int rank);
/* After every worker thread has stopped using its endpoint. */
void pt_threads_world_destroy(pt_threads_world *w);

/* ---- MPI ---------------------------------------------------------------- */

typedef struct {
    double timeout_s; /* wait deadline; default PIPETRAIN_TIMEOUT or 30 s */
} pt_mpi_options;

pt_mpi_options pt_mpi_options_default(void);
/* 1 when this process was started by mpirun/mpiexec (Open MPI, MPICH, or a
 * PMIx launcher), whether or not this build has MPI. */
int pt_transport_launched_by_mpirun(void);
/* This process's endpoint of MPI_COMM_WORLD; initialises MPI if needed.
 * PT_EUNSUPPORTED in a build without MPI. */
int pt_transport_mpi_create(const pt_mpi_options *opt, pt_transport **out);

/* ---- tensor slices ------------------------------------------------------ */

/* Slice (base rank mod T)'s view of a world of workers x T ranks
 * (transport_slice.c): rank and size divided by T, peer w meaning world
 * rank w T + slice. Destroying the view leaves base alone. */
int pt_transport_slice_create(pt_transport *base, int T, pt_transport **out);

/* ---- shared by the implementations ------------------------------------- */

/* PIPETRAIN_TIMEOUT in seconds if set and valid, else fallback. */
double pt_transport_env_timeout(double fallback);
/* Checks a group (ranks in 0..size-1, distinct, caller included) and writes
 * it sorted ascending into sorted[n]; *me receives the caller's position. */
int pt_transport_sort_group(const pt_transport *t, const int *group, int n, int *sorted, int *me);
/* acc[i] += x[i]: the one addition every allreduce uses, so that both
 * transports fold bit-identically. */
void pt_transport_add_f32(float *acc, const float *x, size_t count);

#endif
