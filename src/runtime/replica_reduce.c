/* replica_reduce.c: the sum of each chunk's gradients over the stage's
 * data-parallel replicas, started while the action list still runs.
 *
 * A chunk's gradient is final on a replica once the worker has run the
 * chunk's last backward piece (its last W or BW) of the step, where the
 * lowered program places the chunk's REDUCE action. The executor starts the
 * sum there (pt_reduce_start) and from then on the chunk's gradient span
 * travels in buckets (PT_BUCKET_FLOATS, 4 MiB) while the worker computes the
 * rest of its list, moved along between actions (pt_reduce_progress):
 *
 *   root     (the group's lowest rank) posts, when the step begins, one
 *            receive per bucket and other member into scratch memory; between
 *            actions it folds every bucket whose copies have arrived into its
 *            own gradient, in ascending rank order (x_root + x_g1) + x_g2 ...,
 *            with the transport's own addition, and sends the sum back;
 *   members  send each bucket to the root as soon as the chunk is final, and
 *            once a bucket's send is done, post the receive of its sum into
 *            the same gradient memory.
 * pt_reduce_finish, called by the first action that needs the sums (the
 * tied copies' sum or the norm, collectives.c), waits for what is left. The
 * folding is the one the transport's blocking allreduce does, element for
 * element, so the result is bit-identical to it (and to the threads
 * transport); only when it happens changes.
 *
 * The root folds "opportunistically": between two actions it tests the
 * receives in rank order and folds what has arrived, so the sums go back
 * while the list still runs and the members do not wait for the root's last
 * action. Folding costs the root what it would cost at the end anyway; a
 * bucket whose copies arrive during the last action is folded in finish.
 * Transfers themselves progress whenever the rank is inside the transport
 * (the executor's waits and tests), so they overlap compute either way.
 *
 * Sharded optimizer state (zero, zero.c) makes it a reduce-scatter: the
 * span is cut into one shard per replica and each shard's buckets go to
 * their owner alone, who folds them in the same rank order (a non-root
 * owner folds into position 0's copy, then takes the result) and keeps the
 * sum; nothing comes back, and the owner's fold is element for element the
 * root's, so the owned sums are bit-identical to zero 0's.
 * Memory: the root holds (replicas - 1) scratch copies of its own chunks'
 * gradient spans, allocated once; members need nothing extra. Sharded
 * (zero 1, 2): each owner (replicas - 1) copies of one bucket, its receives
 * posted for one bucket at a time.
 * Tags: chunk c's buckets go up under base + 2c and come back under
 * base + 2c + 1, where base = 2 x chunks x micro-batches is the first tag
 * above the executor's (pipeline.c checks that they stay below the control
 * tags); buckets of one chunk share a tag and match in order, which the
 * transport keeps per (source, tag).
 * Used by executor.c (begin, after each action), collectives.c (finish)
 * and trace.c (each chunk's start and end, for the trace). */
#include <stdlib.h>
#include <string.h>

#include "runtime/pipeline_internal.h"
#include "tensor/error.h"

enum { BUCKET_IDLE, BUCKET_UP, BUCKET_DOWN, BUCKET_DONE };

static int tag_up(const pt_replica_reduce *r, int c) { return r->tag_base + 2 * c; }
static int tag_down(const pt_replica_reduce *r, int c) { return r->tag_base + 2 * c + 1; }

static bool owns(const pt_reduce_chunk *ch, const pt_reduce_bucket *bk)
{
    return ch->pos == bk->owner;
}

/* The scratch slot of group position i on the bucket's owner. */
static float *slot(const pt_reduce_bucket *bk, int i)
{
    return bk->scratch + (size_t)(i < bk->owner ? i : i - 1) * bk->floats;
}

/* Part s of chunk c's span that one owner sums: its shard when the sums are
 * scattered, else the whole span (s = 0) for the root. */
static void part(const pt_replica_reduce *r, const pt_worker *w, int c, int s, size_t *lo,
                 size_t *hi)
{
    size_t off;
    if (r->scatter) {
        pt_zero_shard(w->p, c, s, lo, hi);
    } else {
        *lo = 0;
        pt_worker_chunk_span(w, c, &off, hi);
    }
}

/* The group of chunk c in ascending rank order (the order of the fold),
 * this rank's place in it, and its buckets: one run per shard (the whole
 * span when the sums are not scattered). Returns the scratch floats its
 * owned buckets need. */
static size_t size_chunk(pt_replica_reduce *r, pt_worker *w, int c, size_t bucket)
{
    pt_pipeline *p = w->p;
    pt_reduce_chunk *ch = &r->chunks[c];
    int D = p->s->replicas;
    ch->n = D;
    ch->group = r->groups + (size_t)c * (size_t)D;
    for (int k = 0; k < D; k++)
        ch->group[k] = pt_zero_member(p, c, k);
    ch->pos = pt_zero_position(p, w->rank, c);
    ch->first_bucket = r->n_buckets;
    ch->n_buckets = 0;
    size_t scratch = 0;
    for (int s = 0; s < (r->scatter ? D : 1); s++) {
        size_t lo, hi;
        part(r, w, c, s, &lo, &hi);
        int nb = (int)((hi - lo + bucket - 1) / bucket);
        ch->n_buckets += nb;
        if (s == ch->pos || (!r->scatter && ch->pos == 0))
            scratch += (size_t)(D - 1) * (r->window && bucket < hi - lo ? bucket : hi - lo);
    }
    r->n_buckets += ch->n_buckets;
    return scratch;
}

int pt_reduce_init(pt_replica_reduce *r, pt_worker *w)
{
    memset(r, 0, sizeof *r);
    pt_pipeline *p = w->p;
    int D = p->s->replicas, K = p->n_chunks, rank = w->rank;
    size_t bucket = p->reduce_bucket_floats ? p->reduce_bucket_floats : PT_BUCKET_FLOATS;
    if (p->async || D < 2 || p->zero == 2)
        return PT_OK; /* nothing to sum (zero 2: SCATTERs sum, zero.c): r->used stays false */
    r->p = p;
    r->n_chunks = K;
    r->tag_base = 2 * K * p->M;
    r->scatter = p->zero > 0;
    r->window = p->zero > 0; /* each owner's receives: one bucket at a time */
    r->chunks = calloc((size_t)K, sizeof *r->chunks);
    r->groups = calloc((size_t)K * (size_t)D, sizeof(int));
    if (!r->chunks || !r->groups)
        return pt_fail(PT_ENOMEM, "cannot allocate the replica reduction");
    size_t scratch = 0;
    for (int c = 0; c < K; c++) {
        pt_reduce_chunk *ch = &r->chunks[c];
        ch->own = pt_sched_holds(p->s, rank, c, NULL);
        if (!ch->own)
            continue;
        size_t need = size_chunk(r, w, c, bucket);
        /* one window serves every owned bucket in turn */
        scratch = r->window ? (need > scratch ? need : scratch) : scratch + need;
    }
    r->buckets = calloc((size_t)r->n_buckets + 1, sizeof *r->buckets);
    r->reqs = calloc((size_t)r->n_buckets * 2 * (size_t)(D - 1) + 1, sizeof *r->reqs);
    r->scratch = scratch ? malloc(scratch * sizeof(float)) : NULL;
    r->scratch_floats = scratch;
    if (!r->buckets || !r->reqs || (scratch && !r->scratch))
        return pt_fail(PT_ENOMEM, "cannot allocate the replica reduction (%zu scratch floats)",
                       scratch);
    /* buckets: their spans, owners and requests, the owners' scratch */
    pt_request *req = r->reqs;
    float *sc = r->scratch;
    for (int c = 0; c < K; c++) {
        pt_reduce_chunk *ch = &r->chunks[c];
        if (!ch->own)
            continue;
        size_t off, floats;
        pt_worker_chunk_span(w, c, &off, &floats);
        pt_reduce_bucket *bk = &r->buckets[ch->first_bucket];
        for (int s = 0; s < (r->scatter ? D : 1); s++) {
            size_t lo, hi;
            part(r, w, c, s, &lo, &hi);
            for (size_t at = lo; at < hi; at += bucket, bk++) {
                bk->grad = w->stage->grad.base + off + at;
                bk->floats = hi - at < bucket ? hi - at : bucket;
                bk->owner = s;
                bk->up = req;
                bk->down = req + (D - 1);
                req += 2 * (D - 1);
                if (owns(ch, bk)) {
                    bk->scratch = r->window ? r->scratch : sc;
                    sc += r->window ? 0 : (size_t)(D - 1) * bk->floats;
                }
            }
        }
    }
    r->used = true;
    return PT_OK;
}

void pt_reduce_free(pt_replica_reduce *r)
{
    free(r->chunks);
    free(r->groups);
    free(r->buckets);
    free(r->reqs);
    free(r->scratch);
    memset(r, 0, sizeof *r);
}

static double since_step(const pt_replica_reduce *r) { return pt_pipeline_now() - r->p->step_t0; }

/* The owner takes the other members' copies of a bucket whenever they come. */
static int post_receives(pt_replica_reduce *r, int c, pt_reduce_bucket *bk)
{
    pt_reduce_chunk *ch = &r->chunks[c];
    for (int i = 0; i < ch->n; i++) {
        if (i == bk->owner)
            continue;
        int rc = pt_transport_irecv(r->t, ch->group[i], tag_up(r, c), slot(bk, i),
                                    bk->floats * sizeof(float), &bk->up[i < bk->owner ? i : i - 1]);
        if (rc != PT_OK)
            return rc;
    }
    bk->posted = true;
    r->window_busy = r->window;
    return PT_OK;
}

int pt_reduce_begin(pt_replica_reduce *r, pt_transport *t)
{
    r->running = false;
    if (!r->used || !r->p->reduce_overlap)
        return PT_OK;
    r->t = t;
    r->pending = 0;
    r->window_busy = false;
    for (int c = 0; c < r->n_chunks; c++) {
        pt_reduce_chunk *ch = &r->chunks[c];
        ch->started = false;
        ch->buckets_done = 0;
        ch->t0 = ch->t1 = -1.0;
        if (!ch->own)
            continue;
        for (int b = 0; b < ch->n_buckets; b++) {
            pt_reduce_bucket *bk = &r->buckets[ch->first_bucket + b];
            bk->state = BUCKET_IDLE;
            bk->folded = bk->sent = 0;
            bk->posted = false;
            int rc = owns(ch, bk) && !r->window_busy ? post_receives(r, c, bk) : PT_OK;
            if (rc != PT_OK)
                return rc;
        }
    }
    r->running = true;
    return PT_OK;
}

/* Chunk c's gradient is final here: members send their buckets to their
 * owners; owners may fold from now on. */
static int start_chunk(pt_replica_reduce *r, int c)
{
    pt_reduce_chunk *ch = &r->chunks[c];
    ch->started = true;
    ch->t0 = since_step(r);
    r->pending++;
    for (int b = 0; b < ch->n_buckets; b++) {
        pt_reduce_bucket *bk = &r->buckets[ch->first_bucket + b];
        bk->state = BUCKET_UP;
        if (owns(ch, bk))
            continue;
        int rc = pt_transport_isend(r->t, ch->group[bk->owner], tag_up(r, c), bk->grad,
                                    bk->floats * sizeof(float), &bk->up[0]);
        if (rc != PT_OK)
            return rc;
    }
    if (ch->n_buckets == 0) {
        ch->t1 = ch->t0;
        r->pending--;
    }
    return PT_OK;
}

static void bucket_done(pt_replica_reduce *r, pt_reduce_chunk *ch, pt_reduce_bucket *bk)
{
    bk->state = BUCKET_DONE;
    if (++ch->buckets_done == ch->n_buckets) {
        ch->t1 = since_step(r);
        r->pending--;
    }
}

/* The owner folds the copies in ascending rank order, (x_0 + x_1) + x_2 ...,
 * whichever position it holds itself: the blocking allreduce's order, so
 * the sum is bit-identical to it. Position 0 folds into its own gradient;
 * another owner folds into position 0's copy and takes the sum at the end. */
static int fold(pt_replica_reduce *r, pt_reduce_chunk *ch, pt_reduce_bucket *bk, bool block)
{
    float *acc = bk->owner == 0 ? bk->grad : slot(bk, 0);
    while (bk->folded < ch->n) {
        int i = bk->folded, done = 1, rc = PT_OK;
        if (i != bk->owner) {
            pt_request *q = &bk->up[i < bk->owner ? i : i - 1];
            rc = block ? pt_transport_wait(r->t, q) : pt_transport_test(r->t, q, &done);
        }
        if (rc != PT_OK || !done)
            return rc;
        if (i > 0)
            pt_transport_add_f32(acc, i == bk->owner ? bk->grad : slot(bk, i), bk->floats);
        bk->folded++;
    }
    if (acc != bk->grad)
        memcpy(bk->grad, acc, bk->floats * sizeof(float));
    return PT_OK;
}

/* Moves one owned bucket as far as it can go; `block` waits instead of
 * testing. Scattered sums stay here; the root's go back to every member. */
static int advance_owner(pt_replica_reduce *r, int c, pt_reduce_bucket *bk, bool block)
{
    pt_reduce_chunk *ch = &r->chunks[c];
    int rc, done;
    if (!bk->posted) { /* the window is free once the buckets before are folded */
        if (r->window_busy)
            return PT_OK;
        if ((rc = post_receives(r, c, bk)) != PT_OK)
            return rc;
    }
    if (bk->state == BUCKET_UP) {
        if ((rc = fold(r, ch, bk, block)) != PT_OK || bk->folded < ch->n)
            return rc;
        if (r->scatter) {
            r->window_busy = false;
            bucket_done(r, ch, bk);
            return PT_OK;
        }
        for (int j = 1; j < ch->n; j++)
            if ((rc = pt_transport_isend(r->t, ch->group[j], tag_down(r, c), bk->grad,
                                         bk->floats * sizeof(float), &bk->down[j - 1])) != PT_OK)
                return rc;
        bk->state = BUCKET_DOWN;
    }
    while (bk->sent < ch->n - 1) {
        pt_request *q = &bk->down[bk->sent];
        done = 1;
        rc = block ? pt_transport_wait(r->t, q) : pt_transport_test(r->t, q, &done);
        if (rc != PT_OK)
            return rc;
        if (!done)
            return PT_OK;
        bk->sent++;
    }
    bucket_done(r, ch, bk);
    return PT_OK;
}

static int advance_member(pt_replica_reduce *r, int c, pt_reduce_bucket *bk, bool block)
{
    pt_reduce_chunk *ch = &r->chunks[c];
    int done = 1, rc;
    if (bk->state == BUCKET_UP) {
        rc = block ? pt_transport_wait(r->t, &bk->up[0])
                   : pt_transport_test(r->t, &bk->up[0], &done);
        if (rc != PT_OK || !done)
            return rc;
        if (r->scatter) { /* the owner keeps the sum */
            bucket_done(r, ch, bk);
            return PT_OK;
        }
        /* the send is done: the sum may now land in the same memory */
        rc = pt_transport_irecv(r->t, ch->group[0], tag_down(r, c), bk->grad,
                                bk->floats * sizeof(float), &bk->down[0]);
        if (rc != PT_OK)
            return rc;
        bk->state = BUCKET_DOWN;
    }
    rc = block ? pt_transport_wait(r->t, &bk->down[0])
               : pt_transport_test(r->t, &bk->down[0], &done);
    if (rc != PT_OK || !done)
        return rc;
    bucket_done(r, ch, bk);
    return PT_OK;
}

/* Every started chunk's buckets, in chunk and bucket order: a bucket moves
 * from UP (copies on their way to the root) to DOWN (sums on their way back)
 * only after the bucket before it. */
static int advance_all(pt_replica_reduce *r, bool block)
{
    for (int c = 0; r->pending > 0 && c < r->n_chunks; c++) {
        pt_reduce_chunk *ch = &r->chunks[c];
        if (!ch->own || !ch->started)
            continue;
        for (int b = 0; b < ch->n_buckets; b++) {
            pt_reduce_bucket *bk = &r->buckets[ch->first_bucket + b];
            if (bk->state == BUCKET_DONE)
                continue;
            int rc =
                owns(ch, bk) ? advance_owner(r, c, bk, block) : advance_member(r, c, bk, block);
            if (rc != PT_OK)
                return rc;
            /* a chunk's buckets share their tags, so the sums must leave the
             * root, and their receives be posted, in bucket order (scattered
             * sums do not come back; the window posts in order itself) */
            if (bk->state == BUCKET_UP && !r->scatter)
                break;
        }
    }
    return PT_OK;
}

int pt_reduce_start(pt_replica_reduce *r, int chunk)
{
    if (!r->running || chunk < 0 || chunk >= r->n_chunks)
        return PT_OK;
    pt_reduce_chunk *ch = &r->chunks[chunk];
    int rc = ch->own && !ch->started ? start_chunk(r, chunk) : PT_OK;
    return rc == PT_OK ? advance_all(r, false) : rc;
}

int pt_reduce_progress(pt_replica_reduce *r)
{
    return r->running && r->pending > 0 ? advance_all(r, false) : PT_OK;
}

int pt_reduce_finish(pt_replica_reduce *r)
{
    if (!r->running)
        return PT_OK;
    int rc = PT_OK;
    /* a chunk with no backward in this list (none today) starts now */
    for (int c = 0; rc == PT_OK && c < r->n_chunks; c++)
        if (r->chunks[c].own && !r->chunks[c].started)
            rc = start_chunk(r, c);
    if (rc == PT_OK)
        rc = advance_all(r, true);
    r->running = false;
    return rc;
}

bool pt_reduce_active(const pt_replica_reduce *r) { return r->running; }
