/* transport_mpi.c: the transport over MPI, one endpoint per process (rank of
 * MPI_COMM_WORLD). Built only when CMake finds MPI (PT_HAVE_MPI). The
 * executor gets it from pt_transport_mpi_create() when
 * pt_transport_launched_by_mpirun() says mpirun started the process.
 *
 * Three duplicates of MPI_COMM_WORLD keep traffic apart: `data` carries the
 * executor's messages under its own tags, `coll` the allreduce and barrier,
 * `ctrl` the abort notices. Every communicator returns errors instead of
 * killing the job (MPI_ERRORS_RETURN).
 *
 * Waiting never calls MPI_Wait: a dead peer would block it forever. wait()
 * polls MPI_Test (spinning, then yielding, then sleeping: see
 * poll_request) and checks two things between polls: an abort notice
 * from any rank (a receive on `ctrl` posted at start), and the deadline
 * (timeout_s, default 30 s or PIPETRAIN_TIMEOUT). At the deadline the rank
 * names the peer it waited for, tells every rank (so the others stop within
 * one poll instead of one timeout each), and returns PT_ETRANSPORT.
 *
 * allreduce does not use MPI_Allreduce, whose order of addition is the MPI
 * library's choice: the group's lowest rank receives every member's buffer
 * in ascending rank order, folds it into its own exactly as the threads
 * transport does, and sends the sum back; segments of SEGMENT floats bound
 * the scratch memory. The result is bit-identical to the threads transport's.
 * barrier() is the same exchange with no data. reduce_scatter and
 * all_gather exchange parts pairwise: each member sends every other member
 * that member's parts (an MPI vector type over the buffer: no copy) and
 * receives its own from each; a reduce-scatter then folds its parts in
 * rank order, as the allreduce's root folds them. A send's bytes count in the
 * endpoint's bytes in flight (transport.h) until a wait or test sees its
 * request complete: MPI tells the sender no more.
 *
 * Progress while the worker computes: MPI moves a large message only inside
 * MPI calls (Open MPI's TCP transport writes a rendezvous message's
 * fragments, and the receiver answers its request to send, only then), so a
 * send posted before a long compute action would otherwise wait for the
 * next call. A progress thread calls MPI_Iprobe while the endpoint has a
 * point-to-point request in flight: PROGRESS_US microseconds after a
 * request goes out, then at twice the previous interval up to
 * PROGRESS_MAX_US (a fixed 200 µs woke it so often, on a slow link where
 * some request is nearly always in flight, that it cost the compute sharing
 * its cores 15%); it sleeps on a condition variable while none is. MPI is
 * used at MPI_THREAD_SERIALIZED: every MPI call of the endpoint, from either
 * thread, is made holding `lock` (the worker's thread releases it while a
 * wait sleeps or yields). Where MPI gives less than SERIALIZED, or
 * PIPETRAIN_MPI_PROGRESS=0, there is no thread and transfers move inside
 * the worker's calls as before. docs/mpi.md measures the difference. */
#include <mpi.h>
#include <pthread.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/transport.h"
#include "tensor/error.h"

#define SEGMENT         (1 << 18) /* floats per allreduce message */
#define TAG_UP          1         /* coll: a member's contribution to the root */
#define TAG_DOWN        2         /* coll: the root's sum back to a member */
#define TAG_PART        3    /* coll: a member's parts for another (reduce-scatter, all-gather) */
#define TAG_ABORT       1    /* ctrl */
#define PROGRESS_US     200  /* the progress thread's period after a request goes out */
#define PROGRESS_MAX_US 3200 /* ... doubling while none does, up to this */

_Static_assert(sizeof(MPI_Request) <= sizeof(((pt_request *)0)->impl),
               "pt_request.impl cannot hold an MPI_Request");

typedef struct {
    int failed_rank;
    char reason[252];
} abort_notice;

typedef struct {
    pt_transport t;
    MPI_Comm data, coll, ctrl;
    int init_here; /* this transport called MPI_Init_thread */
    int aborted;
    int failed_rank;
    char reason[252];
    MPI_Request notice_req;
    abort_notice notice_in;
    abort_notice notice_out;
    int *group;
    float *scratch;
    /* the progress thread (see the top of the file) */
    pthread_mutex_t lock;     /* held around every MPI call of this endpoint */
    pthread_cond_t in_flight; /* signalled when a request goes out */
    pthread_t progress;
    int has_progress; /* the thread runs */
    int stop;         /* under lock: the thread ends */
    int pending;      /* under lock: point-to-point requests posted, not settled */
    long period_us;   /* under lock: the thread's next sleep */
} mpi_endpoint;

static void enter(mpi_endpoint *e) { pthread_mutex_lock(&e->lock); }
static void leave(mpi_endpoint *e) { pthread_mutex_unlock(&e->lock); }

/* Drives MPI's progress engine while the worker computes. */
static void *progress_main(void *arg)
{
    mpi_endpoint *e = arg;
    enter(e);
    while (!e->stop) {
        if (e->pending == 0 || e->aborted) {
            pthread_cond_wait(&e->in_flight, &e->lock);
            continue;
        }
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, e->data, &flag, MPI_STATUS_IGNORE);
        long us = e->period_us;
        e->period_us = us * 2 < PROGRESS_MAX_US ? us * 2 : PROGRESS_MAX_US;
        leave(e);
        struct timespec ts = {0, us * 1000L};
        nanosleep(&ts, NULL);
        enter(e);
    }
    leave(e);
    return NULL;
}

/* Starts the progress thread where MPI allows calls from two threads one at
 * a time and the environment does not say no. */
static void start_progress(mpi_endpoint *e)
{
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    const char *env = getenv("PIPETRAIN_MPI_PROGRESS");
    if (level < MPI_THREAD_SERIALIZED || (env && !strcmp(env, "0")))
        return;
    e->has_progress = pthread_create(&e->progress, NULL, progress_main, e) == 0;
}

static void stop_progress(mpi_endpoint *e)
{
    if (!e->has_progress)
        return;
    enter(e);
    e->stop = 1;
    pthread_cond_signal(&e->in_flight);
    leave(e);
    pthread_join(e->progress, NULL);
    e->has_progress = 0;
}

/* A point-to-point request went out (under lock): the thread has work. */
static void note_posted(mpi_endpoint *e)
{
    e->period_us = PROGRESS_US;
    if (e->pending++ == 0)
        pthread_cond_signal(&e->in_flight);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail_aborted(mpi_endpoint *e)
{
    if (e->failed_rank == e->t.rank)
        return pt_fail(PT_ETRANSPORT, "rank %d: transport aborted: %s", e->t.rank, e->reason);
    return pt_fail(PT_ETRANSPORT, "rank %d failed: %s (seen by rank %d)", e->failed_rank, e->reason,
                   e->t.rank);
}

/* The world ended while this rank waited `waited` s for `peer`. When the
 * notice blames this rank (a peer waited for it in vain) and it had itself
 * waited most of the deadline, the rank that stopped answering is more
 * likely `peer`, further down the chain: say so. */
static int fail_while_waiting(mpi_endpoint *e, int peer, const char *what, int tag, double waited)
{
    if (e->failed_rank != e->t.rank || peer == e->t.rank || !(e->t.timeout_s > 0.0) ||
        waited < 0.5 * e->t.timeout_s)
        return fail_aborted(e);
    return pt_fail(PT_ETRANSPORT,
                   "rank %d: transport aborted: %s; rank %d itself had waited %.3g s for rank %d "
                   "(%s, tag %d): rank %d stopped answering",
                   e->t.rank, e->reason, e->t.rank, waited, peer, what, tag, peer);
}

/* Marks this endpoint aborted and tells every other rank (the failed one
 * too: it may only be slow). Sends to a dead rank may never complete, so
 * they are given a moment and then let go. */
static void abort_world(mpi_endpoint *e, int failed_rank, const char *reason)
{
    if (e->aborted)
        return;
    e->aborted = 1;
    e->failed_rank = failed_rank;
    snprintf(e->reason, sizeof e->reason, "%s", reason ? reason : "aborted");
    e->notice_out.failed_rank = failed_rank;
    memcpy(e->notice_out.reason, e->reason, sizeof e->reason);
    int n = e->t.size;
    MPI_Request *reqs = calloc((size_t)n, sizeof *reqs);
    /* real statuses, not MPI_STATUSES_IGNORE: with MPICH's headers GCC
     * takes that constant for a buffer of size 0 */
    MPI_Status *statuses = calloc((size_t)n, sizeof *statuses);
    if (!reqs || !statuses) {
        free(reqs);
        free(statuses);
        return;
    }
    for (int r = 0; r < n; r++) {
        reqs[r] = MPI_REQUEST_NULL;
        if (r != e->t.rank)
            MPI_Isend(&e->notice_out, (int)sizeof e->notice_out, MPI_BYTE, r, TAG_ABORT, e->ctrl,
                      &reqs[r]);
    }
    double until = now() + 1.0;
    int all = 0;
    while (!all && now() < until) {
        if (MPI_Testall(n, reqs, &all, statuses) != MPI_SUCCESS)
            break;
    }
    for (int r = 0; r < n; r++)
        if (reqs[r] != MPI_REQUEST_NULL)
            MPI_Request_free(&reqs[r]);
    free(reqs);
    free(statuses);
}

/* Has another rank sent an abort notice? */
static int notice_arrived(mpi_endpoint *e)
{
    if (e->aborted)
        return 1;
    int flag = 0;
    if (MPI_Test(&e->notice_req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag)
        return 0;
    e->aborted = 1;
    e->failed_rank = e->notice_in.failed_rank;
    e->notice_in.reason[sizeof e->notice_in.reason - 1] = '\0';
    snprintf(e->reason, sizeof e->reason, "%s", e->notice_in.reason);
    return 1;
}

static int mpi_error(mpi_endpoint *e, int code, int peer, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, text, &len);
    char why[512];
    snprintf(why, sizeof why, "rank %d: %s with rank %d failed: %.160s", e->t.rank, what, peer,
             text);
    abort_world(e, peer, why);
    return pt_fail(PT_ETRANSPORT, "rank %d failed: %s", peer, why);
}

/* Polls one MPI request to completion, an abort notice, or the deadline.
 * `what` and `peer` name the operation in messages. MPI moves large messages
 * only while someone calls into it, so the loop keeps polling: flat out for
 * SPIN_S, then yielding the core between polls (which costs nothing when the
 * rank has its core to itself and lets another rank run when ranks share
 * cores), and only after YIELD_S sleeping a little longer each round (up to
 * 100 us): a long wait (a peer computing) should not burn a core. */
#define SPIN_S  100e-6
#define YIELD_S 10e-3
static int poll_request(mpi_endpoint *e, MPI_Request *r, MPI_Status *st, int peer, const char *what,
                        int tag)
{
    double start = now();
    double deadline = e->t.timeout_s > 0.0 ? start + e->t.timeout_s : 0.0;
    long sleep_ns = 0;
    double waited = 0.0;
    for (int round = 0;; round++) {
        if (e->aborted)
            return fail_while_waiting(e, peer, what, tag, now() - start);
        int flag = 0;
        int rc = MPI_Test(r, &flag, st);
        if (rc != MPI_SUCCESS) {
            int cls = 0;
            MPI_Error_class(rc, &cls);
            if (cls == MPI_ERR_TRUNCATE)
                return pt_fail(PT_EINVAL,
                               "rank %d: message from rank %d (tag %d) is larger than the receive",
                               e->t.rank, peer, tag);
            return mpi_error(e, rc, peer, what);
        }
        if (flag)
            return PT_OK;
        if (waited > SPIN_S && waited <= YIELD_S) {
            leave(e);
            sched_yield();
            enter(e);
        }
        if ((round & 63) != 0)
            continue; /* look at the clock and for notices every 64 polls */
        if (notice_arrived(e))
            return fail_while_waiting(e, peer, what, tag, now() - start);
        double t = now();
        waited = t - start;
        if (deadline > 0.0 && t >= deadline) {
            char why[252];
            snprintf(why, sizeof why, "rank %d waited %.3g s for rank %d (%s, tag %d)", e->t.rank,
                     e->t.timeout_s, peer, what, tag);
            abort_world(e, peer, why);
            return pt_fail(PT_ETRANSPORT, "rank %d stopped answering: %s", peer, why);
        }
        if (waited > YIELD_S) {
            sleep_ns = sleep_ns < 1000 ? 1000 : (sleep_ns * 2 > 100000 ? 100000 : sleep_ns * 2);
            struct timespec ts = {0, sleep_ns};
            leave(e);
            nanosleep(&ts, NULL);
            enter(e);
        }
    }
}

static int check_p2p(mpi_endpoint *e, int peer, int tag, const void *buf, size_t bytes,
                     pt_request *req, const char *what)
{
    if (!req)
        return pt_fail(PT_EINVAL, "%s: no request", what);
    if (peer < 0 || peer >= e->t.size)
        return pt_fail(PT_EINVAL, "%s: peer %d is not a rank (0..%d)", what, peer, e->t.size - 1);
    if (tag < 0 || tag > PT_TAG_MAX)
        return pt_fail(PT_EINVAL, "%s: tag %d is outside 0..%d", what, tag, PT_TAG_MAX);
    if (!buf && bytes)
        return pt_fail(PT_EINVAL, "%s: no buffer for %zu bytes", what, bytes);
    if (bytes > (size_t)0x7fffffff)
        return pt_fail(PT_EINVAL, "%s: %zu bytes; MPI messages hold at most 2 GiB", what, bytes);
    if (e->aborted || notice_arrived(e))
        return fail_aborted(e);
    return PT_OK;
}

static void request_init(pt_request *req, int kind, int peer, int tag, void *buf, size_t bytes)
{
    memset(req, 0, sizeof *req);
    req->kind = kind;
    req->peer = peer;
    req->tag = tag;
    req->buf = buf;
    req->bytes = bytes;
}

static int mpi_isend_locked(pt_transport *t, int peer, int tag, const void *buf, size_t bytes,
                            pt_request *req)
{
    mpi_endpoint *e = t->impl;
    int rc = check_p2p(e, peer, tag, buf, bytes, req, "isend");
    if (rc)
        return rc;
    request_init(req, PT_REQ_SEND, peer, tag, (void *)buf, bytes);
    rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, e->data, (MPI_Request *)req->impl);
    if (rc != MPI_SUCCESS) {
        req->kind = 0;
        return mpi_error(e, rc, peer, "isend");
    }
    req->flight = t->watch;
    pt_flight_sent(req->flight, bytes);
    note_posted(e);
    return PT_OK;
}

static int mpi_irecv_locked(pt_transport *t, int peer, int tag, void *buf, size_t bytes,
                            pt_request *req)
{
    mpi_endpoint *e = t->impl;
    int rc = check_p2p(e, peer, tag, buf, bytes, req, "irecv");
    if (rc)
        return rc;
    request_init(req, PT_REQ_RECV, peer, tag, buf, bytes);
    rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, e->data, (MPI_Request *)req->impl);
    if (rc != MPI_SUCCESS) {
        req->kind = 0;
        return mpi_error(e, rc, peer, "irecv");
    }
    note_posted(e);
    return PT_OK;
}

/* A request is over (done or failed): a send's bytes are no longer in
 * flight, and the struct may be reused. */
static void settle(mpi_endpoint *e, pt_request *req)
{
    if (req->kind != 0)
        e->pending--;
    if (req->kind == PT_REQ_SEND)
        pt_flight_handed(req->flight, req->bytes);
    req->flight = NULL;
    req->kind = 0;
}

/* A finished receive must have had exactly the size it named. */
static int check_size(mpi_endpoint *e, pt_request *req, MPI_Status *st)
{
    if (req->kind != PT_REQ_RECV)
        return PT_OK;
    int got = 0;
    MPI_Get_count(st, MPI_BYTE, &got);
    req->received = (size_t)got;
    if ((size_t)got != req->bytes)
        return pt_fail(PT_EINVAL,
                       "rank %d: message from rank %d (tag %d) has %d bytes; the receive "
                       "expects %zu",
                       e->t.rank, req->peer, req->tag, got, req->bytes);
    return PT_OK;
}

static int mpi_wait_locked(pt_transport *t, pt_request *req)
{
    if (!req || req->kind == 0)
        return PT_OK;
    mpi_endpoint *e = t->impl;
    MPI_Status st;
    int rc = poll_request(e, (MPI_Request *)req->impl, &st, req->peer,
                          req->kind == PT_REQ_RECV ? "receive" : "send", req->tag);
    if (rc == PT_OK)
        rc = check_size(e, req, &st);
    settle(e, req);
    return rc;
}

static int mpi_test_locked(pt_transport *t, pt_request *req, int *done)
{
    *done = 1;
    if (!req || req->kind == 0)
        return PT_OK;
    mpi_endpoint *e = t->impl;
    if (notice_arrived(e)) {
        settle(e, req);
        return fail_aborted(e);
    }
    MPI_Status st;
    int flag = 0;
    int rc = MPI_Test((MPI_Request *)req->impl, &flag, &st);
    if (rc != MPI_SUCCESS) {
        settle(e, req);
        return mpi_error(e, rc, req->peer, "test");
    }
    if (!flag) {
        *done = 0;
        return PT_OK;
    }
    rc = check_size(e, req, &st);
    settle(e, req);
    return rc;
}

/* One blocking exchange on `coll`, with the deadline and abort checks. */
static int coll_send(mpi_endpoint *e, const float *buf, int count, int peer, int tag)
{
    MPI_Request r;
    int rc = MPI_Isend(buf, count, MPI_FLOAT, peer, tag, e->coll, &r);
    if (rc != MPI_SUCCESS)
        return mpi_error(e, rc, peer, "allreduce send");
    return poll_request(e, &r, MPI_STATUS_IGNORE, peer, "allreduce send", tag);
}

static int coll_recv(mpi_endpoint *e, float *buf, int count, int peer, int tag)
{
    MPI_Request r;
    int rc = MPI_Irecv(buf, count, MPI_FLOAT, peer, tag, e->coll, &r);
    if (rc != MPI_SUCCESS)
        return mpi_error(e, rc, peer, "allreduce receive");
    return poll_request(e, &r, MPI_STATUS_IGNORE, peer, "allreduce receive", tag);
}

/* Gather to the lowest rank, fold in rank order, send back; per segment.
 * count == 0 still exchanges one empty message each way: a barrier. */
static int gather_sum_scatter(mpi_endpoint *e, const int *sorted, int n, int pos, float *buf,
                              size_t count)
{
    int root = sorted[0];
    if (pos == 0 && count > 0 && !e->scratch) {
        e->scratch = malloc(sizeof(float) * SEGMENT);
        if (!e->scratch)
            return pt_fail(PT_ENOMEM, "allreduce: no memory for a %d-float segment", SEGMENT);
    }
    size_t off = 0;
    do {
        int len = (int)(count - off < SEGMENT ? count - off : SEGMENT);
        float *seg = buf ? buf + off : NULL;
        if (pos == 0) {
            for (int j = 1; j < n; j++) {
                int rc = coll_recv(e, e->scratch, len, sorted[j], TAG_UP);
                if (rc)
                    return rc;
                pt_transport_add_f32(seg, e->scratch, (size_t)len);
            }
            MPI_Request stack[16];
            MPI_Request *reqs = n - 1 <= 16 ? stack : malloc(sizeof *reqs * (size_t)(n - 1));
            if (!reqs)
                return pt_fail(PT_ENOMEM, "allreduce: no memory");
            int rc = PT_OK;
            for (int j = 1; j < n; j++) {
                reqs[j - 1] = MPI_REQUEST_NULL;
                int mrc =
                    MPI_Isend(seg, len, MPI_FLOAT, sorted[j], TAG_DOWN, e->coll, &reqs[j - 1]);
                if (mrc != MPI_SUCCESS && rc == PT_OK)
                    rc = mpi_error(e, mrc, sorted[j], "allreduce send");
            }
            for (int j = 1; rc == PT_OK && j < n; j++)
                rc = poll_request(e, &reqs[j - 1], MPI_STATUS_IGNORE, sorted[j], "allreduce send",
                                  TAG_DOWN);
            if (reqs != stack)
                free(reqs);
            if (rc)
                return rc;
        } else {
            int rc = coll_send(e, seg, len, root, TAG_UP);
            if (rc == PT_OK)
                rc = coll_recv(e, seg, len, root, TAG_DOWN);
            if (rc)
                return rc;
        }
        off += (size_t)len;
    } while (off < count);
    return PT_OK;
}

static int mpi_allreduce_sum_f32_locked(pt_transport *t, const int *group, int n_group, float *buf,
                                        size_t count)
{
    mpi_endpoint *e = t->impl;
    int pos;
    int rc = pt_transport_sort_group(t, group, n_group, e->group, &pos);
    if (rc)
        return rc;
    if (count && !buf)
        return pt_fail(PT_EINVAL, "allreduce: no buffer for %zu floats", count);
    if (notice_arrived(e))
        return fail_aborted(e);
    if (n_group == 1)
        return PT_OK;
    return gather_sum_scatter(e, e->group, n_group, pos, buf, count);
}

/* Member `pos`'s exchange of parts with every other member of the sorted
 * group: all-gather (scratch NULL) sends its parts to each and receives
 * each one's into place; reduce-scatter sends each member that member's
 * parts and receives its own parts of every other member into scratch
 * ((n - 1) runs of blocks x part floats, in rank order, without its own). */
static int exchange_parts(mpi_endpoint *e, const int *sorted, int n, int pos, float *buf,
                          pt_parts parts, float *scratch)
{
    if (parts.blocks > INT_MAX || parts.part > INT_MAX / (size_t)n ||
        parts.blocks * parts.part > INT_MAX)
        return pt_fail(PT_EINVAL, "a collective of %zu parts of %zu floats is too large for MPI",
                       parts.blocks, parts.part);
    MPI_Datatype type;
    MPI_Type_vector((int)parts.blocks, (int)parts.part, (int)(parts.part * (size_t)n), MPI_FLOAT,
                    &type);
    MPI_Type_commit(&type);
    MPI_Request *reqs = malloc(sizeof *reqs * 2 * (size_t)n);
    int rc = reqs ? PT_OK : pt_fail(PT_ENOMEM, "a collective: no memory");
    int own = (int)(parts.blocks * parts.part);
    for (int j = 0, slot = 0; rc == PT_OK && j < n; j++) {
        reqs[2 * j] = reqs[2 * j + 1] = MPI_REQUEST_NULL;
        if (j == pos)
            continue;
        int mrc = scratch ? MPI_Irecv(scratch + (size_t)slot++ * own, own, MPI_FLOAT, sorted[j],
                                      TAG_PART, e->coll, &reqs[2 * j])
                          : MPI_Irecv(buf + (size_t)j * parts.part, 1, type, sorted[j], TAG_PART,
                                      e->coll, &reqs[2 * j]);
        if (mrc == MPI_SUCCESS)
            mrc = MPI_Isend(buf + (size_t)(scratch ? j : pos) * parts.part, 1, type, sorted[j],
                            TAG_PART, e->coll, &reqs[2 * j + 1]);
        if (mrc != MPI_SUCCESS)
            rc = mpi_error(e, mrc, sorted[j], "collective exchange");
    }
    for (int j = 0; rc == PT_OK && j < n; j++)
        for (int k = 0; rc == PT_OK && j != pos && k < 2; k++)
            rc = poll_request(e, &reqs[2 * j + k], MPI_STATUS_IGNORE, sorted[j],
                              k ? "collective send" : "collective receive", TAG_PART);
    free(reqs);
    MPI_Type_free(&type);
    return rc;
}

static int mpi_parts_locked(pt_transport *t, const int *group, int n_group, float *buf,
                            pt_parts parts, bool scatter)
{
    mpi_endpoint *e = t->impl;
    int pos;
    int rc = pt_transport_sort_group(t, group, n_group, e->group, &pos);
    if (rc)
        return rc;
    size_t own = parts.blocks * parts.part;
    if (own && !buf)
        return pt_fail(PT_EINVAL, "a collective with no buffer for %zu floats", own * n_group);
    if (notice_arrived(e))
        return fail_aborted(e);
    if (n_group == 1 || own == 0)
        return PT_OK;
    float *scratch = NULL, *acc = NULL;
    if (scatter && (!(scratch = malloc(sizeof(float) * own * (size_t)(n_group - 1))) ||
                    !(acc = malloc(sizeof(float) * parts.part)))) {
        free(scratch);
        return pt_fail(PT_ENOMEM, "reduce-scatter: no memory for %zu floats", own * n_group);
    }
    rc = exchange_parts(e, e->group, n_group, pos, buf, parts, scratch);
    for (size_t b = 0; rc == PT_OK && scatter && b < parts.blocks; b++) {
        float *mine = buf + (b * (size_t)n_group + (size_t)pos) * parts.part;
        for (int j = 0, slot = 0; j < n_group; j++) { /* in rank order, from rank 0's */
            const float *x = j == pos ? mine : scratch + (size_t)slot++ * own + b * parts.part;
            if (j == 0)
                memcpy(acc, x, sizeof(float) * parts.part);
            else
                pt_transport_add_f32(acc, x, parts.part);
        }
        memcpy(mine, acc, sizeof(float) * parts.part);
    }
    free(scratch);
    free(acc);
    return rc;
}

static int mpi_barrier_locked(pt_transport *t)
{
    mpi_endpoint *e = t->impl;
    if (notice_arrived(e))
        return fail_aborted(e);
    for (int r = 0; r < t->size; r++)
        e->group[r] = r;
    if (t->size == 1)
        return PT_OK;
    return gather_sum_scatter(e, e->group, t->size, t->rank, NULL, 0);
}

/* ---- the operations: each holds the endpoint's lock for its MPI calls ---- */

static int mpi_isend(pt_transport *t, int peer, int tag, const void *buf, size_t bytes,
                     pt_request *req)
{
    mpi_endpoint *e = t->impl;
    enter(e);
    int rc = mpi_isend_locked(t, peer, tag, buf, bytes, req);
    leave(e);
    return rc;
}

static int mpi_irecv(pt_transport *t, int peer, int tag, void *buf, size_t bytes, pt_request *req)
{
    mpi_endpoint *e = t->impl;
    enter(e);
    int rc = mpi_irecv_locked(t, peer, tag, buf, bytes, req);
    leave(e);
    return rc;
}

static int mpi_wait(pt_transport *t, pt_request *req)
{
    mpi_endpoint *e = t->impl;
    enter(e);
    int rc = mpi_wait_locked(t, req);
    leave(e);
    return rc;
}

static int mpi_test(pt_transport *t, pt_request *req, int *done)
{
    mpi_endpoint *e = t->impl;
    enter(e);
    int rc = mpi_test_locked(t, req, done);
    leave(e);
    return rc;
}

static int mpi_allreduce_sum_f32(pt_transport *t, const int *group, int n_group, float *buf,
                                 size_t count)
{
    mpi_endpoint *e = t->impl;
    enter(e);
    int rc = mpi_allreduce_sum_f32_locked(t, group, n_group, buf, count);
    leave(e);
    return rc;
}

static int mpi_reduce_scatter_f32(pt_transport *t, const int *group, int n_group, float *buf,
                                  pt_parts parts)
{
    mpi_endpoint *e = t->impl;
    enter(e);
    int rc = mpi_parts_locked(t, group, n_group, buf, parts, true);
    leave(e);
    return rc;
}

static int mpi_all_gather_f32(pt_transport *t, const int *group, int n_group, float *buf,
                              pt_parts parts)
{
    mpi_endpoint *e = t->impl;
    enter(e);
    int rc = mpi_parts_locked(t, group, n_group, buf, parts, false);
    leave(e);
    return rc;
}

static int mpi_barrier(pt_transport *t)
{
    mpi_endpoint *e = t->impl;
    enter(e);
    int rc = mpi_barrier_locked(t);
    leave(e);
    return rc;
}

static void mpi_abort(pt_transport *t, const char *reason)
{
    mpi_endpoint *e = t->impl;
    enter(e);
    notice_arrived(e);
    abort_world(e, t->rank, reason);
    leave(e);
}

static void free_endpoint(mpi_endpoint *e)
{
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->in_flight);
    free(e->group);
    free(e->scratch);
    free(e);
}

static void mpi_destroy(pt_transport *t)
{
    mpi_endpoint *e = t->impl;
    stop_progress(e);
    int flag = 0, finalized = 0;
    /* an endpoint that outlives MPI (the program finalized it first, and this
     * one ends at exit) can only free its memory */
    MPI_Finalized(&finalized);
    if (finalized) {
        free_endpoint(e);
        return;
    }
    MPI_Test(&e->notice_req, &flag, MPI_STATUS_IGNORE);
    if (!flag) {
        MPI_Cancel(&e->notice_req);
        MPI_Wait(&e->notice_req, MPI_STATUS_IGNORE); /* a cancelled receive ends locally */
    }
    /* After an abort a peer may be dead: freeing communicators or finalizing
     * could wait for it forever, so both are left to the process's exit. */
    if (!e->aborted) {
        MPI_Comm_free(&e->data);
        MPI_Comm_free(&e->coll);
        MPI_Comm_free(&e->ctrl);
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (e->init_here && !finalized)
            MPI_Finalize();
    }
    free_endpoint(e);
}

static const pt_transport_ops mpi_ops = {
    .name = "mpi",
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .wait = mpi_wait,
    .test = mpi_test,
    .allreduce_sum_f32 = mpi_allreduce_sum_f32,
    .reduce_scatter_f32 = mpi_reduce_scatter_f32,
    .all_gather_f32 = mpi_all_gather_f32,
    .barrier = mpi_barrier,
    .abort = mpi_abort,
    .destroy = mpi_destroy,
};

int pt_transport_mpi_create(const pt_mpi_options *opt, pt_transport **out)
{
    *out = NULL;
    pt_mpi_options o = opt ? *opt : pt_mpi_options_default();
    if (!(o.timeout_s >= 0.0))
        return pt_fail(PT_EINVAL, "MPI transport: negative timeout");
    mpi_endpoint *e = calloc(1, sizeof *e);
    if (!e)
        return pt_fail(PT_ENOMEM, "MPI transport: no memory");
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->in_flight, NULL);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
            free_endpoint(e);
            return pt_fail(PT_ETRANSPORT, "MPI transport: MPI_Init_thread failed");
        }
        e->init_here = 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &e->t.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &e->t.size);
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &e->data);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_dup(MPI_COMM_WORLD, &e->coll);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_dup(MPI_COMM_WORLD, &e->ctrl);
    if (rc != MPI_SUCCESS) {
        free_endpoint(e);
        return pt_fail(PT_ETRANSPORT, "MPI transport: MPI_Comm_dup failed");
    }
    e->group = malloc(sizeof(int) * (size_t)e->t.size);
    if (!e->group) {
        free_endpoint(e);
        return pt_fail(PT_ENOMEM, "MPI transport: no memory");
    }
    e->t.ops = &mpi_ops;
    e->t.timeout_s = o.timeout_s;
    e->t.impl = e;
    e->failed_rank = -1;
    MPI_Irecv(&e->notice_in, (int)sizeof e->notice_in, MPI_BYTE, MPI_ANY_SOURCE, TAG_ABORT, e->ctrl,
              &e->notice_req);
    start_progress(e);
    *out = &e->t;
    return PT_OK;
}
