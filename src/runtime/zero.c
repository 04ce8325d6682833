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
 * Zero 2 keeps only the owned shards of the gradients as well: the weight
 * pass of every backward runs in pieces (a block with parameters each), and
 * the SCATTER after each piece sends every other shard's part of what the
 * piece wrote to its owner, in buckets (each owner receives one bucket of
 * every other replica's at a time), adds the others' parts of its own shard
 * to it in position order, and clears the rest, whose pages go back (the
 * stage's gradient arena is paged memory, model.h). Each owner thus folds
 * micro-batch by micro-batch, its own part first: the same on threads and
 * MPI and from run to run at one partition, but not zero 0's order, so zero
 * 2's step equals zero 0's within rounding only. Which replica's part comes
 * first depends on where the shards cut the chunk's span, so another
 * partition (the automatic one follows measured times) rounds otherwise.
 *
 * Zero 1's step stays bit-identical to the unsharded one: each sum is folded in
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
 * checkpoints through pipeline.c; SCATTER by executor.c. */
#include <stdlib.h>
#include <string.h>

#include "runtime/pipeline_internal.h"
#include "tensor/arena.h"
#include "tensor/error.h"

/* The tags of the parameters' gather: chunk c's take the replica sum's
 * "down" tag, which scattered sums never use; the moments' gather for a
 * checkpoint takes a control tag of its own. */
enum { TAG_MOMENTS = PT_TAG_FIRST_CONTROL + 2, TAG_MASTER = PT_TAG_FIRST_CONTROL + 3 };

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

/* The worker's own shards, ascending in its stage arena (a stage's chunks
 * lie in it in chunk order): n ranges [lo[k], hi[k]) handed to `take`. */
static int with_own_ranges(pt_worker *w,
                           int (*take)(pt_worker *, const size_t *, const size_t *, int))
{
    pt_pipeline *p = w->p;
    size_t *lo = calloc((size_t)p->n_chunks + 1, sizeof(size_t));
    size_t *hi = calloc((size_t)p->n_chunks + 1, sizeof(size_t));
    int n = 0, rc;
    if (!lo || !hi) {
        rc = pt_fail(PT_ENOMEM, "cannot allocate worker %d's shards", w->rank);
    } else {
        for (int c = 0; c < p->n_chunks; c++)
            if (pt_sched_holds(p->s, w->rank, c, NULL))
                pt_zero_own(w, c, &lo[n], &hi[n]), n++;
        rc = take(w, lo, hi, n);
    }
    free(lo);
    free(hi);
    return rc;
}

static int make_optimizer(pt_worker *w, const size_t *lo, const size_t *hi, int n)
{
    return pt_optimizer_create_sharded(w->stage, &w->p->optim, lo, hi, n, &w->opt);
}

int pt_zero_make_optimizer(pt_worker *w) { return with_own_ranges(w, make_optimizer); }

/* ---- SCATTER (zero 2) ---- */

/* The tag of chunk c's scatters: the replica sum's "up" tag, which a
 * program with SCATTERs never uses for REDUCE. */
static int tag_scatter(const pt_pipeline *p, int c) { return 2 * p->n_chunks * p->M + 2 * c; }

static size_t bucket_of(const pt_pipeline *p)
{
    return p->reduce_bucket_floats ? p->reduce_bucket_floats : PT_BUCKET_FLOATS;
}

int pt_zero_scatter_init(pt_worker *w)
{
    pt_pipeline *p = w->p;
    int D = p->s->replicas, rc = PT_OK;
    size_t most = 0, lo, hi;
    for (int c = 0; c < p->n_chunks; c++)
        if (pt_sched_holds(p->s, w->rank, c, NULL)) {
            pt_zero_own(w, c, &lo, &hi);
            most = hi - lo > most ? hi - lo : most;
        }
    w->scatter_floats = most < bucket_of(p) ? most : bucket_of(p);
    w->scatter_scratch = pt_alloc_floats(2 * (size_t)(D - 1) * w->scatter_floats);
    w->scatter_req = calloc(4 * (size_t)D, sizeof *w->scatter_req);
    if (rc == PT_OK && (!w->scatter_scratch || !w->scatter_req))
        rc = pt_fail(PT_ENOMEM, "cannot allocate worker %d's gradient scatter", w->rank);
    if (rc == PT_OK)
        pt_zero_clear_grads(w);
    return rc;
}

void pt_zero_scatter_free(pt_worker *w)
{
    pt_free(w->scatter_scratch);
    free(w->scatter_req);
    w->scatter_scratch = NULL;
    w->scatter_req = NULL;
}

void pt_zero_clear_grads(pt_worker *w)
{
    pt_arena *g = &w->stage->grad;
    size_t at = 0, lo, hi;
    for (int c = 0; c < w->p->n_chunks; c++)
        if (pt_sched_holds(w->p->s, w->rank, c, NULL)) {
            pt_zero_own(w, c, &lo, &hi);
            pt_arena_clear(g, at, lo);
            memset(g->base + lo, 0, (hi - lo) * sizeof(float)); /* kept: written every step */
            at = hi;
        }
    pt_arena_clear(g, at, g->capacity);
}

void pt_zero_prepare_piece(pt_worker *w, size_t from, size_t to)
{
    pt_arena_populate(&w->stage->grad, from, to);
}

size_t pt_zero_owned_grad_bytes(const pt_worker *w)
{
    size_t bytes = 0, lo, hi;
    for (int c = 0; c < w->p->n_chunks; c++)
        if (pt_sched_holds(w->p->s, w->rank, c, NULL)) {
            pt_zero_own(w, c, &lo, &hi);
            bytes += (hi - lo) * sizeof(float);
        }
    return bytes;
}

/* [*lo, *hi) = [a, b) ∩ [c, d), empty as lo == hi. */
static void meet(size_t a, size_t b, size_t c, size_t d, size_t *lo, size_t *hi)
{
    *lo = a > c ? a : c;
    *hi = b < d ? b : d;
    if (*hi < *lo)
        *hi = *lo;
}

/* Buffer set `set`'s copies of the others' buckets, and its requests. */
static float *set_scratch(const pt_worker *w, int set)
{
    return w->scatter_scratch + (size_t)set * (size_t)(w->p->s->replicas - 1) * w->scatter_floats;
}

static pt_request *set_requests(const pt_worker *w, int set)
{
    return w->scatter_req + (size_t)set * 2 * (size_t)w->p->s->replicas;
}

/* Posts round `round` of a scatter into buffer set fl->set: bucket `round`
 * of every shard's part of [fl->from, fl->to) goes to its owner (the same
 * cut on every replica), this worker's own bucket comes in from the others;
 * *more when some shard has a bucket after this one. */
static int post_round(pt_worker *w, size_t round, pt_scatter_flight *fl, bool *more)
{
    pt_pipeline *p = w->p;
    int c = fl->chunk, D = p->s->replicas, me = pt_zero_position(p, w->rank, c), rc = PT_OK;
    size_t off, floats, bucket = w->scatter_floats, lo, hi;
    pt_worker_chunk_span(w, c, &off, &floats);
    float *g = w->stage->grad.base, *scratch = set_scratch(w, fl->set);
    pt_request *req = set_requests(w, fl->set);
    fl->n = 0, fl->mine = NULL, fl->mine_n = 0;
    *more = false;
    for (int k = 0; k < D && rc == PT_OK; k++) {
        pt_zero_shard(p, c, k, &lo, &hi);
        meet(fl->from, fl->to, off + lo, off + hi, &lo, &hi);
        size_t at = lo + round * bucket;
        if (at >= hi)
            continue;
        size_t len = hi - at < bucket ? hi - at : bucket;
        *more |= at + len < hi;
        if (k == me) {
            fl->mine = g + at, fl->mine_n = len;
            for (int j = 0, slot = 0; j < D && rc == PT_OK; j++)
                if (j != me)
                    rc = pt_transport_irecv(w->t, pt_zero_member(p, c, j), tag_scatter(p, c),
                                            scratch + (size_t)slot++ * bucket, len * sizeof(float),
                                            &req[fl->n++]);
        } else {
            rc = pt_transport_isend(w->t, pt_zero_member(p, c, k), tag_scatter(p, c), g + at,
                                    len * sizeof(float), &req[fl->n++]);
        }
    }
    return rc;
}

/* Waits for a posted round, then folds this worker's bucket: its copy,
 * then the others' in position order (x_me + x_a) + x_b ..., with the
 * transport's addition. */
static int finish_round(pt_worker *w, const pt_scatter_flight *fl)
{
    int D = w->p->s->replicas, rc = PT_OK;
    float *scratch = set_scratch(w, fl->set);
    pt_request *req = set_requests(w, fl->set);
    for (int i = 0; i < fl->n; i++) {
        int r2 = pt_transport_wait(w->t, &req[i]);
        rc = rc == PT_OK ? r2 : rc;
    }
    for (int slot = 0; rc == PT_OK && fl->mine && slot < D - 1; slot++)
        pt_transport_add_f32(fl->mine, scratch + (size_t)slot * w->scatter_floats, fl->mine_n);
    return rc;
}

/* What others own of a piece goes back: zero for the next piece. */
static void clear_piece(pt_worker *w, const pt_scatter_flight *fl)
{
    size_t lo, hi;
    pt_zero_own(w, fl->chunk, &lo, &hi);
    pt_arena_clear(&w->stage->grad, fl->from, fl->to < lo ? fl->to : lo);
    pt_arena_clear(&w->stage->grad, fl->from > hi ? fl->from : hi, fl->to);
}

int pt_zero_scatter_settle(pt_worker *w)
{
    pt_scatter_flight *fl = &w->scatter_flight;
    if (!fl->on)
        return PT_OK;
    fl->on = false;
    int rc = finish_round(w, fl);
    clear_piece(w, fl);
    return rc;
}

int pt_zero_scatter(pt_worker *w, int c, size_t from, size_t to, bool last)
{
    pt_scatter_flight *before = &w->scatter_flight;
    pt_scatter_flight fl = {
        .chunk = c, .set = before->on ? 1 - before->set : 0, .from = from, .to = to};
    size_t lo, hi, a, b;
    pt_zero_own(w, c, &lo, &hi);
    meet(from, to, lo, hi, &a, &b);
    fl.held = (to - from - (b - a)) * sizeof(float); /* beside the owned shards */
    size_t held = fl.held + (before->on ? before->held : 0);
    w->scatter_peak = held > w->scatter_peak ? held : w->scatter_peak;
    bool more = false;
    int rc = w->scatter_floats ? post_round(w, 0, &fl, &more) : PT_OK;
    int r2 = pt_zero_scatter_settle(w); /* the piece before, sent while this one ran */
    rc = rc == PT_OK ? r2 : rc;
    for (size_t round = 1; rc == PT_OK && more; round++)
        if ((rc = finish_round(w, &fl)) == PT_OK)
            rc = post_round(w, round, &fl, &more);
    if (rc == PT_OK && !last && w->scatter_floats) {
        fl.on = true; /* its last round travels while the next piece runs */
        *before = fl;
        return PT_OK;
    }
    if (rc == PT_OK && w->scatter_floats)
        rc = finish_round(w, &fl);
    if (rc == PT_OK)
        clear_piece(w, &fl);
    return rc;
}

/* ---- GATHER ---- */

/* Moves the n bytes at buf, bucket by bucket: from position `from` of
 * chunk c's group to every other member (sending when this worker is
 * `from`, else receiving). */
static int broadcast_range(pt_worker *w, int c, int from, void *buf, size_t n, int tag)
{
    pt_pipeline *p = w->p;
    int D = p->s->replicas, me = pt_zero_position(p, w->rank, c), rc = PT_OK;
    size_t bucket = bucket_of(p) * sizeof(float);
    pt_request *req = calloc((size_t)D, sizeof *req);
    if (!req)
        return pt_fail(PT_ENOMEM, "cannot allocate the gather's requests");
    for (size_t at = 0; rc == PT_OK && at < n; at += bucket) {
        size_t bytes = n - at < bucket ? n - at : bucket;
        char *x = (char *)buf + at;
        int k = 0;
        if (me != from) {
            rc = pt_transport_irecv(w->t, pt_zero_member(p, c, from), tag, x, bytes, &req[k++]);
        } else {
            for (int j = 0; rc == PT_OK && j < D; j++)
                if (j != me)
                    rc =
                        pt_transport_isend(w->t, pt_zero_member(p, c, j), tag, x, bytes, &req[k++]);
        }
        for (int i = 0; i < k; i++) {
            int r2 = pt_transport_wait(w->t, &req[i]);
            rc = rc == PT_OK ? r2 : rc;
        }
    }
    free(req);
    return rc;
}

/* Sharded master (bf16): floats [lo, hi) of the data arena from position
 * k of chunk c's group to the others as the blocks read them: the bf16
 * copy (half the bytes), and the tensors read as floats (vectors, embedding
 * tables: pt_model_master_shards) as floats. */
static int broadcast_low(pt_worker *w, int c, int k, size_t lo, size_t hi, int tag)
{
    pt_model *m = w->stage;
    int rc = broadcast_range(w, c, k, m->low + lo, (hi - lo) * sizeof(pt_bf16), tag);
    for (int i = 0; rc == PT_OK && i < m->n_params; i++) {
        const pt_param *q = &m->params[i];
        if (!q->data || pt_model_master_shards(m, i))
            continue;
        size_t a, b, at = (size_t)(q->data - m->data.base);
        meet(at, at + q->numel, lo, hi, &a, &b);
        if (b > a)
            rc = broadcast_range(w, c, k, m->data.base + a, (b - a) * sizeof(float), tag);
    }
    return rc;
}

int pt_zero_gather(pt_worker *w, int c)
{
    pt_pipeline *p = w->p;
    pt_model *m = w->stage;
    size_t off, floats;
    pt_worker_chunk_span(w, c, &off, &floats);
    int rc = PT_OK;
    if (m->n_master) /* the owner's copy from its updated shard */
        pt_model_refresh_low(m);
    /* shard by shard in position order: every member walks the same order */
    for (int k = 0; rc == PT_OK && k < p->s->replicas; k++) {
        size_t lo, hi;
        pt_zero_shard(p, c, k, &lo, &hi);
        rc = m->n_master ? broadcast_low(w, c, k, off + lo, off + hi, tag_gather(p, c))
                         : broadcast_range(w, c, k, m->data.base + off + lo,
                                           (hi - lo) * sizeof(float), tag_gather(p, c));
    }
    if (!m->n_master)
        pt_model_params_changed(m); /* bf16: the products' copy follows */
    return rc;
}

/* ---- the float master in bf16 runs ---- */

static int shard_master(pt_worker *w, const size_t *lo, const size_t *hi, int n)
{
    return pt_model_shard_master(w->stage, lo, hi, n);
}

int pt_zero_shard_master(pt_worker *w)
{
    pt_pipeline *p = w->p;
    if (!p->zero || p->s->replicas < 2 || !w->stage->low)
        return PT_OK;
    return with_own_ranges(w, shard_master);
}

/* Position 0 of each chunk's group receives the other shards' float master,
 * the others send theirs: the stage whole on the replica that writes it. */
static int gather_master(pt_worker *w)
{
    pt_pipeline *p = w->p;
    int rc = PT_OK;
    for (int c = 0; rc == PT_OK && c < p->n_chunks; c++) {
        int me = pt_zero_position(p, w->rank, c);
        size_t off, floats, lo, hi;
        pt_worker_chunk_span(w, c, &off, &floats);
        for (int k = 1; me >= 0 && rc == PT_OK && k < p->s->replicas; k++) {
            if (me != 0 && me != k)
                continue;
            pt_zero_shard(p, c, k, &lo, &hi);
            float *x = w->stage->data.base + off + lo;
            size_t bytes = (hi - lo) * sizeof(float);
            int other = pt_zero_member(p, c, me == 0 ? k : 0);
            pt_request req;
            rc = me == 0 ? pt_transport_irecv(w->t, other, TAG_MASTER, x, bytes, &req)
                         : pt_transport_isend(w->t, other, TAG_MASTER, x, bytes, &req);
            if (rc == PT_OK)
                rc = pt_transport_wait(w->t, &req);
        }
    }
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

int pt_zero_gather_master(pt_worker *w) { return w->stage->n_master ? gather_master(w) : PT_OK; }

int pt_zero_gather_moments(pt_worker *w)
{
    pt_pipeline *p = w->p;
    int rc = pt_zero_gather_master(w);
    if (rc != PT_OK || !p->zero || !w->opt)
        return rc;
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
    if (w->stage) /* whole again on position 0 after a save: give the rest back */
        pt_model_release_master(w->stage);
}

void pt_zero_take_moments(pt_worker *w, pt_optimizer *full)
{
    for (int r = 0; r < pt_optimizer_n_ranges(w->opt); r++) {
        size_t lo, hi;
        pt_optimizer_range(w->opt, r, &lo, &hi);
        pt_optimizer_copy_moments(w->opt, full, lo, hi);
    }
}
