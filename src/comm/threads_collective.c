/* threads_collective.c: allreduce, reduce-scatter, all-gather and barrier
 * of the threads transport.
 * Called through the transport's table by the executor (gradient all-reduce
 * across a stage's replicas, barriers between steps).
 *
 * The members of a group meet at the collective slot of their lowest rank
 * and publish their buffers' addresses. After a first barrier, member m owns
 * slice m of the element range: it sums that slice over every member's
 * buffer in ascending rank order and writes the sum back into every buffer;
 * no two members touch the same element, so nothing is copied to a scratch
 * area. A second barrier ends the call. The fold order is the one
 * transport_mpi.c uses, hence bit-identical results across transports.
 * A reduce-scatter is the same fold of member m's own parts (pt_parts),
 * written to its own buffer only; an all-gather copies member m's parts
 * into every other buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/threads_world.h"
#include "tensor/error.h"

#define SLICE_ALIGN 16   /* floats: slices start on cache-line boundaries */
#define BLOCK       1024 /* floats summed at a time on the stack */

int pt_threads_collectives_init(pt_threads_world *w)
{
    w->colls = calloc((size_t)w->n, sizeof *w->colls);
    if (!w->colls)
        return PT_ENOMEM;
    for (int r = 0; r < w->n; r++) {
        pt_coll_slot *c = &w->colls[r];
        c->members = malloc(sizeof(int) * (size_t)w->n);
        c->bufs = calloc((size_t)w->n, sizeof *c->bufs);
        c->arrived_at = calloc((size_t)w->n, 1);
        if (!c->members || !c->bufs || !c->arrived_at)
            return PT_ENOMEM;
        pthread_mutex_init(&c->mu, NULL);
        pt_threads_cond_init(&c->cv);
    }
    return PT_OK;
}

void pt_threads_collectives_free(pt_threads_world *w)
{
    if (!w->colls)
        return;
    for (int r = 0; r < w->n; r++) {
        pt_coll_slot *c = &w->colls[r];
        if (c->members && c->bufs && c->arrived_at) {
            pthread_mutex_destroy(&c->mu);
            pthread_cond_destroy(&c->cv);
        }
        free(c->members);
        free(c->bufs);
        free(c->arrived_at);
    }
    free(w->colls);
    w->colls = NULL;
}

void pt_threads_collectives_wake(pt_threads_world *w)
{
    if (!w->colls)
        return;
    for (int r = 0; r < w->n; r++) {
        pthread_mutex_lock(&w->colls[r].mu);
        pthread_cond_broadcast(&w->colls[r].cv);
        pthread_mutex_unlock(&w->colls[r].mu);
    }
}

/* A deadline passed in a collective: blame `blamed` if >= 0, else the first
 * member that has not arrived at the current barrier. */
static int collective_timeout(pt_transport *t, pt_coll_slot *c, int blamed)
{
    for (int i = 0; blamed < 0 && i < c->n; i++)
        if (!c->arrived_at[i]) {
            blamed = c->members[i];
            break;
        }
    pthread_mutex_unlock(&c->mu);
    char why[160];
    snprintf(why, sizeof why, "rank %d waited %.3g s in a collective for rank %d", t->rank,
             t->timeout_s, blamed);
    pt_threads_world_abort(pt_threads_endpoint_world(t), blamed, why);
    return pt_fail(PT_ETRANSPORT, "rank %d stopped answering: %s", blamed, why);
}

/* Where the endpoint has idle work (transport.h) and the deadline has not
 * passed: a piece of it done with c->mu let go meanwhile (or a short spin
 * where there was none), and 1, so the caller looks again before it
 * sleeps; 0: nothing done. */
static int work_once(pt_transport *t, pt_coll_slot *c, double deadline)
{
    if (!t->idle || (deadline > 0.0 && pt_threads_now() >= deadline))
        return 0;
    pthread_mutex_unlock(&c->mu);
    t->idle->begin();
    pt_threads_idle_piece(t->idle);
    t->idle->end();
    pthread_mutex_lock(&c->mu);
    return 1;
}

/* Every member of the slot's group arrives before any leaves. Holds c->mu;
 * on failure returns with it released. */
static int meet(pt_transport *t, pt_coll_slot *c, int pos, double deadline)
{
    pt_threads_world *w = pt_threads_endpoint_world(t);
    unsigned gen = c->gen;
    c->arrived_at[pos] = 1;
    if (++c->arrived == c->n) {
        c->arrived = 0;
        memset(c->arrived_at, 0, (size_t)c->n);
        c->gen++;
        pthread_cond_broadcast(&c->cv);
        return PT_OK;
    }
    while (c->gen == gen) {
        if (pt_threads_aborted(w)) {
            pthread_mutex_unlock(&c->mu);
            return pt_threads_fail_aborted(w, t->rank);
        }
        if (work_once(t, c, deadline))
            continue;
        if (pt_threads_cond_wait(&c->cv, &c->mu, deadline))
            return collective_timeout(t, c, -1);
    }
    return PT_OK;
}

/* Sums [lo, hi) over the members' buffers, in member (= rank) order, and
 * writes it back to every buffer, or (only >= 0) to that member's alone. */
static void reduce_slice(float *const *bufs, int n, size_t lo, size_t hi, int only)
{
    float acc[BLOCK];
    for (size_t b = lo; b < hi; b += BLOCK) {
        size_t len = hi - b < BLOCK ? hi - b : BLOCK;
        memcpy(acc, bufs[0] + b, len * sizeof(float));
        for (int j = 1; j < n; j++)
            pt_transport_add_f32(acc, bufs[j] + b, len);
        for (int j = 0; j < n; j++)
            if (only < 0 || j == only)
                memcpy(bufs[j] + b, acc, len * sizeof(float));
    }
}

enum { SUM, SCATTER, GATHER };

/* Member pos's share of the work, between the two barriers. */
static void work(float *const *bufs, int n, int pos, size_t count, int op, pt_parts parts)
{
    if (op == SUM) {
        size_t share = (count + (size_t)n - 1) / (size_t)n;
        share = (share + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
        size_t lo = share * (size_t)pos;
        size_t hi = lo + share < count ? lo + share : count;
        if (lo < hi)
            reduce_slice(bufs, n, lo, hi, -1);
        return;
    }
    for (size_t b = 0; b < parts.blocks; b++) {
        size_t lo = (b * (size_t)n + (size_t)pos) * parts.part;
        if (op == SCATTER)
            reduce_slice(bufs, n, lo, lo + parts.part, pos);
        else
            for (int j = 0; j < n; j++)
                if (j != pos)
                    memcpy(bufs[j] + lo, bufs[pos] + lo, parts.part * sizeof(float));
    }
}

/* The members are e->group[0..n_group-1], ascending; the caller is at pos. */
static int collective(pt_transport *t, int n_group, int pos, float *buf, size_t count, int op,
                      pt_parts parts)
{
    pt_threads_endpoint *e = t->impl;
    pt_threads_world *w = e->world;
    int rc;
    if (pt_threads_aborted(w))
        return pt_threads_fail_aborted(w, t->rank);
    if (n_group == 1)
        return PT_OK;

    pt_coll_slot *c = &w->colls[e->group[0]];
    double deadline = t->timeout_s > 0.0 ? pt_threads_now() + t->timeout_s : 0.0;
    size_t group_bytes = sizeof(int) * (size_t)n_group;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (pos == 0 ? c->users == 0
                     : (c->users > 0 && c->epoch != e->joined[e->group[0]] && c->n == n_group &&
                        memcmp(c->members, e->group, group_bytes) == 0))
            break;
        if (pt_threads_aborted(w)) {
            pthread_mutex_unlock(&c->mu);
            return pt_threads_fail_aborted(w, t->rank);
        }
        if (work_once(t, c, deadline))
            continue;
        if (pt_threads_cond_wait(&c->cv, &c->mu, deadline))
            /* a member waits for the leader to open; the leader for the
             * previous group to leave */
            return collective_timeout(t, c, pos ? e->group[0] : c->members[c->n - 1]);
    }
    if (pos == 0) {
        c->epoch++;
        c->n = n_group;
        memcpy(c->members, e->group, group_bytes);
        pthread_cond_broadcast(&c->cv);
    }
    e->joined[e->group[0]] = c->epoch;
    c->users++;
    c->bufs[pos] = buf;
    rc = meet(t, c, pos, deadline);
    if (rc)
        return rc;
    pthread_mutex_unlock(&c->mu);

    work(c->bufs, n_group, pos, count, op, parts);

    pthread_mutex_lock(&c->mu);
    rc = meet(t, c, pos, deadline);
    if (rc)
        return rc;
    if (--c->users == 0)
        pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return PT_OK;
}

static int start(pt_transport *t, const int *group, int n_group, float *buf, size_t count, int op,
                 pt_parts parts)
{
    pt_threads_endpoint *e = t->impl;
    int pos;
    int rc = pt_transport_sort_group(t, group, n_group, e->group, &pos);
    if (rc)
        return rc;
    if (count && !buf)
        return pt_fail(PT_EINVAL, "a collective with no buffer for %zu floats", count);
    return collective(t, n_group, pos, buf, count, op, parts);
}

int pt_threads_allreduce_sum_f32(pt_transport *t, const int *group, int n_group, float *buf,
                                 size_t count)
{
    return start(t, group, n_group, buf, count, SUM, (pt_parts){0, 0});
}

int pt_threads_reduce_scatter_f32(pt_transport *t, const int *group, int n_group, float *buf,
                                  pt_parts parts)
{
    return start(t, group, n_group, buf, parts.blocks * (size_t)n_group * parts.part, SCATTER,
                 parts);
}

int pt_threads_all_gather_f32(pt_transport *t, const int *group, int n_group, float *buf,
                              pt_parts parts)
{
    return start(t, group, n_group, buf, parts.blocks * (size_t)n_group * parts.part, GATHER,
                 parts);
}

int pt_threads_barrier(pt_transport *t)
{
    pt_threads_endpoint *e = t->impl;
    for (int r = 0; r < t->size; r++)
        e->group[r] = r;
    return collective(t, t->size, t->rank, NULL, 0, SUM, (pt_parts){0, 0});
}
