/* transport_threads.c: the threads transport, point to point. Every worker is
 * a thread of one process; pt_threads_world_create() makes N endpoints and
 * the executor hands endpoint r to worker r's thread.
 *
 * Each ordered pair of ranks (src -> dst) has its own link: a mutex, two
 * condition variables, a bounded queue of message slots, the receives dst has
 * posted and the sends that found the queue full. Nothing is shared between
 * links, so there is no global lock on the hot path.
 *
 *   isend: a posted receive with the tag?  copy straight into its buffer;
 *          else a free slot?                copy into the slot (send done);
 *          else                             park the send (done when a
 *                                           receive takes it or a slot frees).
 *   irecv: a queued slot with the tag?      copy out, free the slot;
 *          else a parked send with the tag? copy from the sender's buffer;
 *          else                             post the receive.
 *
 * A message's bytes count in its sender's bytes in flight (transport.h)
 * from isend until they are in the receiver's buffer, queued or parked in
 * between.
 *
 * Large copies run outside the link's lock: the request being copied into
 * or from is marked claimed, so a wait that an abort interrupts still lets
 * the copy finish before its caller may reuse the buffer. Matching keeps one
 * invariant: a link never holds both a queued slot and a posted receive of
 * the same tag, which makes delivery FIFO per (source, tag).
 *
 * wait() spins briefly (a hand-off between running threads costs well under
 * a microsecond), then blocks on the link's condition variable. Collectives
 * live in threads_collective.c. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/threads_world.h"
#include "tensor/error.h"

#define SPIN_NS 20000 /* how long wait() spins before it blocks */

static int link_init(pt_link *l, int src, int dst, pt_threads_world *w, int n_slots)
{
    memset(l, 0, sizeof *l);
    l->src = src;
    l->dst = dst;
    l->world = w;
    l->slots = calloc((size_t)n_slots, sizeof *l->slots);
    if (!l->slots)
        return PT_ENOMEM;
    for (int i = 0; i < n_slots; i++) {
        l->slots[i].next = l->free_slots;
        l->free_slots = &l->slots[i];
    }
    pthread_mutex_init(&l->mu, NULL);
    pt_threads_cond_init(&l->data_cv);
    pt_threads_cond_init(&l->space_cv);
    return PT_OK;
}

static void link_free(pt_link *l)
{
    if (!l->slots)
        return;
    for (int i = 0; i < l->world->queue_slots; i++)
        free(l->slots[i].data);
    free(l->slots);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->data_cv);
    pthread_cond_destroy(&l->space_cv);
}

void pt_threads_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

double pt_threads_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Blocks on cv until signalled or the deadline (0: none) passes; returns 1
 * when the deadline has passed. */
int pt_threads_cond_wait(pthread_cond_t *cv, pthread_mutex_t *mu, double deadline)
{
    if (deadline <= 0.0) {
        pthread_cond_wait(cv, mu);
        return 0;
    }
    struct timespec ts;
    double whole = (double)(long long)deadline;
    ts.tv_sec = (time_t)whole;
    ts.tv_nsec = (long)((deadline - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L)
        ts.tv_nsec = 999999999L;
    return pthread_cond_timedwait(cv, mu, &ts) == ETIMEDOUT && pt_threads_now() >= deadline;
}

/* ---- aborting ------------------------------------------------------------ */

void pt_threads_world_abort(pt_threads_world *w, int failed_rank, const char *reason)
{
    pthread_mutex_lock(&w->abort_mu);
    if (!atomic_load_explicit(&w->aborted, memory_order_relaxed)) {
        w->failed_rank = failed_rank;
        snprintf(w->reason, sizeof w->reason, "%s", reason ? reason : "aborted");
        atomic_store_explicit(&w->aborted, 1, memory_order_release);
    }
    pthread_mutex_unlock(&w->abort_mu);
    /* Taking each mutex before broadcasting means a thread that checked the
     * flag just before it was set is already inside its wait: no lost wake. */
    for (int i = 0; i < w->n * w->n; i++) {
        pt_link *l = &w->links[i];
        pthread_mutex_lock(&l->mu);
        pthread_cond_broadcast(&l->data_cv);
        pthread_cond_broadcast(&l->space_cv);
        pthread_mutex_unlock(&l->mu);
    }
    pt_threads_collectives_wake(w);
}

int pt_threads_aborted(pt_threads_world *w)
{
    return atomic_load_explicit(&w->aborted, memory_order_acquire);
}

int pt_threads_fail_aborted(pt_threads_world *w, int me)
{
    if (w->failed_rank == me)
        return pt_fail(PT_ETRANSPORT, "rank %d: transport aborted: %s", me, w->reason);
    return pt_fail(PT_ETRANSPORT, "rank %d failed: %s (seen by rank %d)", w->failed_rank, w->reason,
                   me);
}

/* ---- request lists --------------------------------------------------------- */

static void list_push(pt_request **head, pt_request **tail, pt_request *r)
{
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

/* Removes and returns the oldest request of the list with this tag. */
static pt_request *list_take(pt_request **head, pt_request **tail, int tag)
{
    pt_request *prev = NULL;
    for (pt_request *r = *head; r; prev = r, r = r->next) {
        if (r->tag != tag)
            continue;
        if (prev)
            prev->next = r->next;
        else
            *head = r->next;
        if (*tail == r)
            *tail = prev;
        r->next = NULL;
        return r;
    }
    return NULL;
}

static pt_slot *queue_take(pt_link *l, int tag)
{
    pt_slot *prev = NULL;
    for (pt_slot *s = l->queue_head; s; prev = s, s = s->next) {
        if (s->tag != tag)
            continue;
        if (prev)
            prev->next = s->next;
        else
            l->queue_head = s->next;
        if (l->queue_tail == s)
            l->queue_tail = prev;
        s->next = NULL;
        return s;
    }
    return NULL;
}

static void queue_push(pt_link *l, pt_slot *s)
{
    s->next = NULL;
    if (l->queue_tail)
        l->queue_tail->next = s;
    else
        l->queue_head = s;
    l->queue_tail = s;
}

/* Marks a request done with a status; the caller holds l->mu. */
static void complete(pt_request *r, int status)
{
    r->status = status;
    r->claimed = 0;
    atomic_store_explicit(&r->done, 1, memory_order_release);
}

/* Copies a message of `sent` bytes into a receive; the size must match. */
static int deliver(pt_request *recv, const void *src, size_t sent)
{
    recv->received = sent;
    memcpy(recv->buf, src, sent < recv->bytes ? sent : recv->bytes);
    return sent == recv->bytes ? PT_OK : PT_EINVAL;
}

/* A slot came free: parked sends move into free slots, oldest first (they
 * are younger than every queued slot, so order is kept). Holds l->mu. */
static void refill(pt_link *l)
{
    int woke = 0;
    while (l->send_head && l->free_slots) {
        pt_request *snd = l->send_head;
        pt_slot *s = l->free_slots;
        if (s->cap < snd->bytes) {
            void *grown = realloc(s->data, snd->bytes);
            if (!grown)
                break; /* the send stays parked; a receive can still take it */
            s->data = grown;
            s->cap = snd->bytes;
        }
        l->free_slots = s->next;
        l->send_head = snd->next;
        if (!l->send_head)
            l->send_tail = NULL;
        memcpy(s->data, snd->buf, snd->bytes);
        s->tag = snd->tag;
        s->bytes = snd->bytes;
        s->flight = snd->flight;
        queue_push(l, s);
        complete(snd, PT_OK);
        woke = 1;
    }
    if (woke)
        pthread_cond_signal(&l->space_cv);
}

/* ---- the operations -------------------------------------------------------- */

static int check_args(pt_transport *t, int peer, int tag, const void *buf, size_t bytes,
                      pt_request *req, const char *what)
{
    if (!req)
        return pt_fail(PT_EINVAL, "%s: no request", what);
    if (peer < 0 || peer >= t->size)
        return pt_fail(PT_EINVAL, "%s: peer %d is not a rank (0..%d)", what, peer, t->size - 1);
    if (tag < 0 || tag > PT_TAG_MAX)
        return pt_fail(PT_EINVAL, "%s: tag %d is outside 0..%d", what, tag, PT_TAG_MAX);
    if (!buf && bytes)
        return pt_fail(PT_EINVAL, "%s: no buffer for %zu bytes", what, bytes);
    return PT_OK;
}

static void request_init(pt_request *req, int kind, int peer, int tag, void *buf, size_t bytes,
                         pt_link *l)
{
    req->kind = kind;
    req->peer = peer;
    req->tag = tag;
    req->status = PT_OK;
    atomic_store_explicit(&req->done, 0, memory_order_relaxed);
    req->claimed = 0;
    req->bytes = bytes;
    req->received = 0;
    req->buf = buf;
    req->flight = NULL;
    req->link = l;
    req->next = NULL;
}

static int threads_isend(pt_transport *t, int peer, int tag, const void *buf, size_t bytes,
                         pt_request *req)
{
    int rc = check_args(t, peer, tag, buf, bytes, req, "isend");
    if (rc)
        return rc;
    pt_threads_world *w = pt_threads_endpoint_world(t);
    pt_link *l = pt_threads_link(w, t->rank, peer);
    request_init(req, PT_REQ_SEND, peer, tag, (void *)buf, bytes, l);

    pthread_mutex_lock(&l->mu);
    if (pt_threads_aborted(w)) {
        pthread_mutex_unlock(&l->mu);
        return pt_threads_fail_aborted(w, t->rank);
    }
    req->flight = t->watch;
    pt_flight_sent(req->flight, bytes);
    pt_request *recv = list_take(&l->recv_head, &l->recv_tail, tag);
    if (recv) {
        recv->claimed = 1;
        pthread_mutex_unlock(&l->mu);
        int st = deliver(recv, buf, bytes);
        pt_flight_handed(req->flight, bytes);
        pthread_mutex_lock(&l->mu);
        complete(recv, st);
        complete(req, PT_OK);
        pthread_cond_signal(&l->data_cv);
        pthread_mutex_unlock(&l->mu);
        return PT_OK;
    }
    if (l->send_head || !l->free_slots) {
        list_push(&l->send_head, &l->send_tail, req);
        pthread_mutex_unlock(&l->mu);
        return PT_OK;
    }
    pt_slot *s = l->free_slots;
    l->free_slots = s->next;
    pthread_mutex_unlock(&l->mu);

    /* Only this thread appends to this link's queue, so copying outside the
     * lock cannot reorder this message against a later one. */
    if (s->cap < bytes) {
        void *grown = realloc(s->data, bytes);
        if (!grown) {
            pthread_mutex_lock(&l->mu);
            s->next = l->free_slots;
            l->free_slots = s;
            pthread_mutex_unlock(&l->mu);
            pt_flight_handed(req->flight, bytes);
            return pt_fail(PT_ENOMEM, "isend: no memory to buffer %zu bytes for rank %d", bytes,
                           peer);
        }
        s->data = grown;
        s->cap = bytes;
    }
    if (bytes)
        memcpy(s->data, buf, bytes);
    s->tag = tag;
    s->bytes = bytes;
    s->flight = req->flight;

    pthread_mutex_lock(&l->mu);
    /* A receive posted while we copied found nothing queued: it is waiting. */
    recv = pt_threads_aborted(w) ? NULL : list_take(&l->recv_head, &l->recv_tail, tag);
    if (recv) {
        complete(recv, deliver(recv, s->data, bytes));
        pt_flight_handed(s->flight, bytes);
        s->next = l->free_slots;
        l->free_slots = s;
        pthread_cond_signal(&l->data_cv);
    } else {
        queue_push(l, s);
    }
    complete(req, PT_OK);
    pthread_mutex_unlock(&l->mu);
    return PT_OK;
}

static int threads_irecv(pt_transport *t, int peer, int tag, void *buf, size_t bytes,
                         pt_request *req)
{
    int rc = check_args(t, peer, tag, buf, bytes, req, "irecv");
    if (rc)
        return rc;
    pt_threads_world *w = pt_threads_endpoint_world(t);
    pt_link *l = pt_threads_link(w, peer, t->rank);
    request_init(req, PT_REQ_RECV, peer, tag, buf, bytes, l);

    pthread_mutex_lock(&l->mu);
    if (pt_threads_aborted(w)) {
        pthread_mutex_unlock(&l->mu);
        return pt_threads_fail_aborted(w, t->rank);
    }
    pt_slot *s = queue_take(l, tag);
    if (s) {
        pthread_mutex_unlock(&l->mu);
        int st = deliver(req, s->data, s->bytes);
        pt_flight_handed(s->flight, s->bytes);
        pthread_mutex_lock(&l->mu);
        s->next = l->free_slots;
        l->free_slots = s;
        if (!pt_threads_aborted(w))
            refill(l);
        complete(req, st);
        pthread_mutex_unlock(&l->mu);
        return PT_OK;
    }
    pt_request *snd = list_take(&l->send_head, &l->send_tail, tag);
    if (snd) {
        snd->claimed = 1;
        pthread_mutex_unlock(&l->mu);
        int st = deliver(req, snd->buf, snd->bytes);
        pt_flight_handed(snd->flight, snd->bytes);
        pthread_mutex_lock(&l->mu);
        complete(snd, PT_OK);
        complete(req, st);
        pthread_cond_signal(&l->space_cv);
        pthread_mutex_unlock(&l->mu);
        return PT_OK;
    }
    list_push(&l->recv_head, &l->recv_tail, req);
    pthread_mutex_unlock(&l->mu);
    return PT_OK;
}

/* The status of a finished request, with its message set on this thread. */
static int finish(pt_transport *t, pt_request *req)
{
    int st = req->status;
    req->kind = 0;
    if (st == PT_EINVAL)
        return pt_fail(PT_EINVAL,
                       "rank %d: message from rank %d (tag %d) has %zu bytes; the receive "
                       "expects %zu",
                       t->rank, req->peer, req->tag, req->received, req->bytes);
    return st;
}

static int threads_test(pt_transport *t, pt_request *req, int *done)
{
    *done = 0;
    if (!req || req->kind == 0) {
        *done = 1;
        return PT_OK;
    }
    if (atomic_load_explicit(&req->done, memory_order_acquire)) {
        *done = 1;
        return finish(t, req);
    }
    pt_threads_world *w = pt_threads_endpoint_world(t);
    if (pt_threads_aborted(w)) {
        pt_link *l = req->link;
        pthread_mutex_lock(&l->mu);
        int claimed = req->claimed;
        pthread_mutex_unlock(&l->mu);
        if (!claimed) {
            *done = 1;
            req->kind = 0;
            return pt_threads_fail_aborted(w, t->rank);
        }
    }
    return PT_OK;
}

/* Until the request is done, the endpoint's idle work (pt_transport's
 * `idle`), spinning between pieces: 1 when it is done, 0 when the world
 * was aborted or the wait's deadline passed (the blocking wait below then
 * says so) */
static int wait_working(pt_transport *t, pt_request *req, pt_threads_world *w, double deadline)
{
    t->idle->begin();
    int done = 0;
    for (int round = 0; !done; round++) {
        if ((done = atomic_load_explicit(&req->done, memory_order_acquire)))
            break;
        pt_threads_idle_piece(t->idle);
        if ((round & 255) == 255 &&
            (pt_threads_aborted(w) || (deadline > 0.0 && pt_threads_now() >= deadline)))
            break;
    }
    t->idle->end();
    return done;
}

static int threads_wait(pt_transport *t, pt_request *req)
{
    if (!req || req->kind == 0)
        return PT_OK;
    pt_threads_world *w = pt_threads_endpoint_world(t);
    double start = pt_threads_now();
    if (t->idle && wait_working(t, req, w, t->timeout_s > 0.0 ? start + t->timeout_s : 0.0))
        return finish(t, req);
    while (pt_threads_now() - start < SPIN_NS * 1e-9) {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(&req->done, memory_order_acquire))
                return finish(t, req);
            __builtin_ia32_pause();
        }
        if (pt_threads_aborted(w))
            break;
    }
    pt_link *l = req->link;
    pthread_cond_t *cv = req->kind == PT_REQ_RECV ? &l->data_cv : &l->space_cv;
    double deadline = t->timeout_s > 0.0 ? start + t->timeout_s : 0.0;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (atomic_load_explicit(&req->done, memory_order_acquire)) {
            pthread_mutex_unlock(&l->mu);
            return finish(t, req);
        }
        if (!req->claimed) {
            if (pt_threads_aborted(w)) {
                pthread_mutex_unlock(&l->mu);
                req->kind = 0;
                return pt_threads_fail_aborted(w, t->rank);
            }
            if (deadline > 0.0 && pt_threads_now() >= deadline) {
                pthread_mutex_unlock(&l->mu);
                char why[160];
                snprintf(why, sizeof why, "rank %d waited %.3g s for rank %d (%s, tag %d)", t->rank,
                         t->timeout_s, req->peer, req->kind == PT_REQ_RECV ? "receive" : "send",
                         req->tag);
                pt_threads_world_abort(w, req->peer, why);
                req->kind = 0;
                return pt_fail(PT_ETRANSPORT, "rank %d stopped answering: %s", req->peer, why);
            }
        }
        pt_threads_cond_wait(cv, &l->mu, req->claimed ? 0.0 : deadline);
    }
}

static void threads_abort(pt_transport *t, const char *reason)
{
    pt_threads_world_abort(pt_threads_endpoint_world(t), t->rank, reason);
}

static void threads_destroy(pt_transport *t) { (void)t; /* endpoints belong to their world */ }

const pt_transport_ops pt_threads_ops = {
    .name = "threads",
    .isend = threads_isend,
    .irecv = threads_irecv,
    .wait = threads_wait,
    .test = threads_test,
    .allreduce_sum_f32 = pt_threads_allreduce_sum_f32,
    .reduce_scatter_f32 = pt_threads_reduce_scatter_f32,
    .all_gather_f32 = pt_threads_all_gather_f32,
    .barrier = pt_threads_barrier,
    .abort = threads_abort,
    .destroy = threads_destroy,
};

/* ---- the world --------------------------------------------------------------- */

pt_threads_options pt_threads_options_default(void)
{
    pt_threads_options o;
    o.queue_slots = 8;
    o.timeout_s = pt_transport_env_timeout(0.0);
    return o;
}

int pt_threads_world_create(int n, const pt_threads_options *opt, pt_threads_world **out)
{
    *out = NULL;
    pt_threads_options o = opt ? *opt : pt_threads_options_default();
    if (n < 1)
        return pt_fail(PT_EINVAL, "threads transport: %d workers; at least 1", n);
    if (o.queue_slots < 1)
        return pt_fail(PT_EINVAL, "threads transport: queue_slots %d; at least 1", o.queue_slots);
    if (!(o.timeout_s >= 0.0))
        return pt_fail(PT_EINVAL, "threads transport: negative timeout");
    pt_threads_world *w = calloc(1, sizeof *w);
    if (!w)
        return pt_fail(PT_ENOMEM, "threads transport: no memory");
    w->n = n;
    w->queue_slots = o.queue_slots;
    w->timeout_s = o.timeout_s;
    w->failed_rank = -1;
    pthread_mutex_init(&w->abort_mu, NULL);
    w->links = aligned_alloc(64, sizeof(pt_link) * (size_t)n * (size_t)n);
    w->endpoints = calloc((size_t)n, sizeof *w->endpoints);
    int rc = (w->links && w->endpoints) ? PT_OK : PT_ENOMEM;
    for (int i = 0; rc == PT_OK && i < n * n; i++) {
        rc = link_init(&w->links[i], i / n, i % n, w, o.queue_slots);
        w->n_links_ready = i + 1;
    }
    if (rc == PT_OK)
        rc = pt_threads_collectives_init(w);
    for (int r = 0; rc == PT_OK && r < n; r++) {
        pt_threads_endpoint *e = &w->endpoints[r];
        e->t.ops = &pt_threads_ops;
        e->t.rank = r;
        e->t.size = n;
        e->t.timeout_s = o.timeout_s;
        e->t.impl = e;
        e->world = w;
        e->group = malloc(sizeof(int) * (size_t)n);
        e->joined = calloc((size_t)n, sizeof *e->joined);
        if (!e->group || !e->joined)
            rc = PT_ENOMEM;
    }
    if (rc != PT_OK) {
        pt_threads_world_destroy(w);
        return pt_fail(rc, "threads transport: no memory for %d workers", n);
    }
    *out = w;
    return PT_OK;
}

pt_transport *pt_threads_world_endpoint(pt_threads_world *w, int rank)
{
    if (!w || rank < 0 || rank >= w->n)
        return NULL;
    return &w->endpoints[rank].t;
}

void pt_threads_world_destroy(pt_threads_world *w)
{
    if (!w)
        return;
    if (w->links)
        for (int i = 0; i < w->n_links_ready; i++)
            link_free(&w->links[i]);
    free(w->links);
    pt_threads_collectives_free(w);
    if (w->endpoints)
        for (int r = 0; r < w->n; r++) {
            free(w->endpoints[r].group);
            free(w->endpoints[r].joined);
        }
    free(w->endpoints);
    pthread_mutex_destroy(&w->abort_mu);
    free(w);
}
