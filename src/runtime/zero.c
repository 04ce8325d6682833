/* zero.c: sharded optimizer state across a stage's data-parallel replicas
 * (--zero 1|2, the stages 1 and 2 of ZeRO).
 *
 * Each chunk's parameter span (its blocks' tensors as the stage arena lays
 * them out) is cut into D contiguous shards on element boundaries, shard k
 * = [floats k / D, floats (k+1) / D), the same on every replica; the
 * replica at position k of the chunk's group (ascending ranks) owns shard
 * k: the moments of its floats (pt_optimizer_create_sharded), the sum of
 * their gradients over the replicas (replica_reduce.c scatters the sums
 * instead of sending them back) and their update (STEP walks the owned
 * range only). GATHER then brings every updated shard to every replica.
 *
 * The step stays bit-identical to the unsharded one: each sum is folded in
 * rank order by whoever owns it; the norm's shares are taken per shard and
 * folded in shard order by every worker, sharded or not (collectives.c);
 * AdamW and SGD are elementwise. A tied pair (wte, lm_head) lies in two
 * chunks whose shards need not line up, so TIED sums each run of elements
 * between the owners of its two copies (pairwise, every worker walking the
 * runs in one order), which are the same two values zero 0 adds.
 *
 * Checkpoints keep one logical layout: before a save, replica 0 gathers
 * its stage's moments from the other replicas (a whole optimizer for the
 * time of the save); a load reads whole moments and keeps the owned
 * shards. Called by pipeline.c (the optimizer), executor.c (GATHER, TIED),
 * replica_reduce.c and collectives.c (groups, shards) and the trainer's
 * checkpoints through pipeline.c. */
#include <stdlib.h>
#include <string.h>

#include "runtime/pipeline_internal.h"
#include "tensor/arena.h"
#include "tensor/error.h"

/* The tags of the parameters' gather: chunk c's take the replica sum's
 * "down" tag, which scattered sums never use; the moments' gather for a
 * checkpoint takes a control tag of its own. */
enum { TAG_MOMENTS = PT_TAG_FIRST_CONTROL + 2 };

static int tag_gather(const pt_pipeline *p, int c) { return 2 * p->n_chunks * p->M + 2 * c + 1; }

int pt_zero_member(const pt_pipeline *p, int c, int pos)
{
    int D = p->s->replicas, below = 0;
    for (int k = 0; k < D; k++) {
        int g = p->s->chunk_worker[c * D + k];
        below = 0;
        for (int j = 0; j < D; j++)
            below += p->s->chunk_worker[c * D + j] < g;
        if (below == pos)
            return g;
    }
    return -1;
}

int pt_zero_position(const pt_pipeline *p, int worker, int c)
{
    int D = p->s->replicas, pos = -1;
    for (int k = 0; k < D; k++)
        if (p->s->chunk_worker[c * D + k] == worker)
            pos = 0;
    for (int k = 0; pos >= 0 && k < D; k++)
        pos += p->s->chunk_worker[c * D + k] < worker;
    return pos;
}

/* Where parameter i (of the description) starts in its chunk's span, and
 * the span's length: the stage arena's layout (pt_arena_take in parameter
 * order), which every stage holding the chunk shares. */
static size_t chunk_layout(const pt_pipeline *p, int c, int i, size_t *floats)
{
    const pt_model *m = p->desc;
    size_t at = 0, where = 0;
    *floats = 0;
    for (int j = 0; j < pt_model_n_params(m); j++) {
        const pt_param *q = pt_model_param(m, j);
        if (q->block < p->chunk_first[c] || q->block > p->chunk_last[c])
            continue;
        if (j == i)
            where = at;
        *floats = at + q->numel;
        at += pt_arena_round(q->numel);
    }
    return where;
}

void pt_zero_shard(const pt_pipeline *p, int c, int pos, size_t *lo, size_t *hi)
{
    size_t floats, D = (size_t)p->s->replicas;
    chunk_layout(p, c, -1, &floats);
    *lo = (size_t)pos < D ? floats * (size_t)pos / D : floats;
    *hi = (size_t)pos < D ? floats * (size_t)(pos + 1) / D : floats;
}

/* The shard of chunk c holding float x of its span. */
static int shard_of(const pt_pipeline *p, int c, size_t x, size_t *end)
{
    size_t lo, hi;
    for (int k = 0; k < p->s->replicas; k++) {
        pt_zero_shard(p, c, k, &lo, &hi);
        if (x < hi) {
            *end = hi;
            return k;
        }
    }
    *end = x + 1;
    return 0;
}

void pt_zero_own(const pt_worker *w, int c, size_t *lo, size_t *hi)
{
    size_t off, floats;
    pt_worker_chunk_span(w, c, &off, &floats);
    pt_zero_shard(w->p, c, pt_zero_position(w->p, w->rank, c), lo, hi);
    *lo += off;
    *hi += off;
}

int pt_zero_make_optimizer(pt_worker *w)
{
    pt_pipeline *p = w->p;
    size_t *lo = calloc((size_t)p->n_chunks + 1, sizeof(size_t));
    size_t *hi = calloc((size_t)p->n_chunks + 1, sizeof(size_t));
    int n = 0, rc;
    if (!lo || !hi) {
        rc = pt_fail(PT_ENOMEM, "cannot allocate worker %d's shards", w->rank);
    } else {
        /* a stage's chunks lie in its arena in chunk order */
        for (int c = 0; c < p->n_chunks; c++)
            if (pt_sched_holds(p->s, w->rank, c, NULL))
                pt_zero_own(w, c, &lo[n], &hi[n]), n++;
        rc = pt_optimizer_create_sharded(w->stage, &p->optim, lo, hi, n, &w->opt);
    }
    free(lo);
    free(hi);
    return rc;
}

/* ---- GATHER ---- */

/* Moves floats [lo, hi) of buf, bucket by bucket: from position `from` of
 * chunk c's group to every other member (sending when this worker is
 * `from`, else receiving). */
static int broadcast_range(pt_worker *w, int c, int from, float *buf, size_t n, int tag)
{
    pt_pipeline *p = w->p;
    int D = p->s->replicas, me = pt_zero_position(p, w->rank, c), rc = PT_OK;
    size_t bucket = p->reduce_bucket_floats ? p->reduce_bucket_floats : PT_BUCKET_FLOATS;
    pt_request *req = calloc((size_t)D, sizeof *req);
    if (!req)
        return pt_fail(PT_ENOMEM, "cannot allocate the gather's requests");
    for (size_t at = 0; rc == PT_OK && at < n; at += bucket) {
        size_t len = n - at < bucket ? n - at : bucket, bytes = len * sizeof(float);
        int k = 0;
        if (me != from) {
            rc = pt_transport_irecv(w->t, pt_zero_member(p, c, from), tag, buf + at, bytes,
                                    &req[k++]);
        } else {
            for (int j = 0; rc == PT_OK && j < D; j++)
                if (j != me)
                    rc = pt_transport_isend(w->t, pt_zero_member(p, c, j), tag, buf + at, bytes,
                                            &req[k++]);
        }
        for (int i = 0; i < k; i++) {
            int r2 = pt_transport_wait(w->t, &req[i]);
            rc = rc == PT_OK ? r2 : rc;
        }
    }
    free(req);
    return rc;
}

int pt_zero_gather(pt_worker *w, int c)
{
    pt_pipeline *p = w->p;
    size_t off, floats;
    pt_worker_chunk_span(w, c, &off, &floats);
    int rc = PT_OK;
    /* shard by shard in position order: every member walks the same order */
    for (int k = 0; rc == PT_OK && k < p->s->replicas; k++) {
        size_t lo, hi;
        pt_zero_shard(p, c, k, &lo, &hi);
        rc = broadcast_range(w, c, k, w->stage->data.base + off + lo, hi - lo, tag_gather(p, c));
    }
    pt_model_params_changed(w->stage); /* bf16: the products' copy follows */
    return rc;
}

/* ---- TIED ---- */

/* Copy q (chunk cc) of source s (chunk cs): each run of elements whose two
 * shard owners stay the same is summed between those two workers. */
static int tied_runs(pt_worker *w, int i, int s, int cs, int cc)
{
    pt_pipeline *p = w->p;
    pt_model *m = w->stage;
    const pt_param *q = pt_model_param(m, i), *src = pt_model_param(m, s);
    size_t n, rs = chunk_layout(p, cs, s, &n), rq = chunk_layout(p, cc, i, &n);
    size_t bucket = p->reduce_bucket_floats ? p->reduce_bucket_floats : PT_BUCKET_FLOATS;
    for (size_t e = 0; e < q->numel;) {
        size_t end_s, end_q;
        int a = pt_zero_member(p, cs, shard_of(p, cs, rs + e, &end_s));
        int b = pt_zero_member(p, cc, shard_of(p, cc, rq + e, &end_q));
        size_t run = end_s - rs < end_q - rq ? end_s - rs : end_q - rq;
        run = (run < q->numel ? run : q->numel) - e;
        run = run < bucket ? run : bucket;
        if (a == w->rank && b == w->rank) {
            for (size_t j = e; j < e + run; j++)
                src->grad[j] = q->grad[j] = src->grad[j] + q->grad[j];
        } else if (a == w->rank || b == w->rank) {
            int group[2] = {a < b ? a : b, a < b ? b : a};
            float *mine = a == w->rank ? src->grad + e : q->grad + e;
            int rc = pt_transport_allreduce_sum_f32(w->t, group, 2, mine, run);
            if (rc != PT_OK)
                return rc;
        }
        e += run;
    }
    return PT_OK;
}

int pt_zero_tied(pt_worker *w, int ca, int cb)
{
    pt_pipeline *p = w->p;
    const pt_model *d = p->desc;
    for (int i = 0; i < pt_model_n_params(d); i++) {
        const pt_param *cp = pt_model_param(d, i);
        if (!cp->tied_to)
            continue;
        int s = (int)(pt_model_find_param(d, cp->tied_to) - pt_model_param(d, 0));
        int cc = pt_pipeline_chunk_of_block(p, cp->block),
            cs = pt_pipeline_chunk_of_block(p, pt_model_param(d, s)->block);
        if (!((cs == ca && cc == cb) || (cs == cb && cc == ca)))
            continue;
        if (!pt_sched_holds(p->s, w->rank, cs, NULL) && !pt_sched_holds(p->s, w->rank, cc, NULL))
            continue;
        int rc = tied_runs(w, i, s, cs, cc);
        if (rc != PT_OK)
            return rc;
    }
    return PT_OK;
}

/* ---- checkpoints ---- */

/* Both moments of floats [lo, hi) from worker `from` to `to`. */
static int move_moments(pt_worker *w, pt_optimizer *o, int from, int to, size_t lo, size_t hi)
{
    int rc = PT_OK;
    for (int which = 0; rc == PT_OK && which < 2; which++) {
        float *x = pt_optimizer_moments(o, which, lo, hi - lo);
        if (!x || hi == lo)
            continue;
        pt_request req;
        size_t bytes = (hi - lo) * sizeof(float);
        rc = from == w->rank ? pt_transport_isend(w->t, to, TAG_MOMENTS, x, bytes, &req)
                             : pt_transport_irecv(w->t, from, TAG_MOMENTS, x, bytes, &req);
        if (rc == PT_OK)
            rc = pt_transport_wait(w->t, &req);
    }
    return rc;
}

int pt_zero_gather_moments(pt_worker *w)
{
    pt_pipeline *p = w->p;
    if (!p->zero || !w->opt)
        return PT_OK;
    int rc = PT_OK;
    bool writer = false;
    for (int c = 0; c < p->n_chunks; c++)
        writer |= pt_zero_position(p, w->rank, c) == 0;
    if (writer && (rc = pt_optimizer_create(w->stage, &p->optim, &w->full_opt)) != PT_OK)
        return rc;
    for (int c = 0; rc == PT_OK && c < p->n_chunks; c++) {
        int me = pt_zero_position(p, w->rank, c);
        if (me < 0)
            continue;
        size_t off, floats, lo, hi;
        pt_worker_chunk_span(w, c, &off, &floats);
        for (int k = 0; rc == PT_OK && k < p->s->replicas; k++) {
            pt_zero_shard(p, c, k, &lo, &hi);
            if (me == 0 && k == 0)
                pt_optimizer_copy_moments(w->full_opt, w->opt, off + lo, off + hi);
            else if (me == 0)
                rc = move_moments(w, w->full_opt, pt_zero_member(p, c, k), w->rank, off + lo,
                                  off + hi);
            else if (me == k)
                rc = move_moments(w, w->opt, w->rank, pt_zero_member(p, c, 0), off + lo, off + hi);
        }
    }
    return rc;
}

void pt_zero_release_moments(pt_worker *w)
{
    pt_optimizer_destroy(w->full_opt);
    w->full_opt = NULL;
}

void pt_zero_take_moments(pt_worker *w, pt_optimizer *full)
{
    for (int r = 0; r < pt_optimizer_n_ranges(w->opt); r++) {
        size_t lo, hi;
        pt_optimizer_range(w->opt, r, &lo, &hi);
        pt_optimizer_copy_moments(w->opt, full, lo, hi);
    }
}
