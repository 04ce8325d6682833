/* collectives.c: what pipeline workers exchange besides the executor's
 * activations and gradients. Every worker owns its stage (its chunks'
 * parameters, gradients and moments) and nothing else, on threads as under
 * MPI, so every exchange below goes through the worker's transport endpoint
 * and runs the same way on both. Called by pipeline.c (create, the end of a
 * train step, eval, forward_probs) and executor.c (pipedream's updates).
 *
 *   endpoint    one MPI transport per process, created by the first pipeline
 *               that needs it and ended at the process's exit, so that
 *               several pipelines may come and go (MPI starts only once);
 *   replicate   D data-parallel copies of a synchronous schedule: replica k
 *               of stage s is worker s*D+k and runs stage s's list on
 *               micro-batches j*D+k;
 *   replicas    one chunk's gradient summed over its D replicas, blocking:
 *               after the list (reduce_overlap off) and, under pipedream
 *               (1F1B-RR), before every update, inside the list;
 *   tied        a tied pair's copies (wte, lm_head) summed between their
 *               owners (TIED), after the replicas' sums;
 *   sequence    under sequence parallelism, the gradients each slice holds
 *               only its positions' part of (the LayerNorms'), summed over
 *               the worker's slices (SEQUENCE_SUM, before NORM), so every
 *               slice holds the whole;
 *   norm        each chunk's share of the squared norm (double), in parts
 *               per replica shard (zero.c's cut, sharded or not), with
 *               tensor slices each part summed over the slices first (the
 *               split tensors' parts on every slice, the whole ones on
 *               slice 0), sent exactly to every worker, folded in shard and
 *               chunk order (NORM): the same norm with the state sharded or
 *               not;
 *   losses      each micro-batch's loss, sent exactly to every worker;
 *   probs       the last chunk's output to one worker of every process.
 *
 * Every sum goes through the transport's allreduce, which folds in
 * ascending rank order; values that must arrive exactly (doubles, losses)
 * travel as 16-bit pieces held in floats, summed with zeros from every other
 * worker, so the sum is the value. Every worker folds the norm's chunk shares
 * in chunk order, so every worker, on either transport, takes bit for bit
 * the step one worker alone would take. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/pipeline_internal.h"
#include "tensor/adamw.h"
#include "tensor/error.h"

enum { TAG_PROBS_SIZE = PT_TAG_FIRST_CONTROL, TAG_PROBS };

/* ---- the process's endpoint ---- */

static pt_transport *endpoint;

static void end_endpoint(void)
{
    pt_transport_destroy(endpoint);
    endpoint = NULL;
}

int pt_ranks_endpoint(pt_pipeline_transport want, pt_transport **out)
{
    *out = NULL;
    if (want == PT_PIPELINE_THREADS)
        return PT_OK;
    if (want == PT_PIPELINE_AUTO && !pt_transport_launched_by_mpirun())
        return PT_OK;
    if (!endpoint) {
        pt_transport *t;
        int rc = pt_transport_mpi_create(NULL, &t);
        if (rc != PT_OK) {
            if (want == PT_PIPELINE_AUTO && rc == PT_EUNSUPPORTED) {
                const char *n = getenv("OMPI_COMM_WORLD_SIZE");
                if (!n)
                    n = getenv("PMI_SIZE");
                if (!n || atoi(n) <= 1)
                    return PT_OK; /* one process: threads */
            }
            char why[512]; /* the message cannot be its own argument */
            snprintf(why, sizeof why, "%s", pt_last_error());
            return pt_fail(rc, "mpirun started this process, but %s", why);
        }
        endpoint = t;
        atexit(end_endpoint);
    }
    if (want == PT_PIPELINE_AUTO && pt_transport_size(endpoint) == 1)
        return PT_OK;
    *out = endpoint;
    return PT_OK;
}

/* ---- replicated schedules ---- */

int pt_ranks_replicate(const pt_schedule *base, int D, int micro, pt_schedule **out)
{
    int P = base->n_workers, K = base->n_chunks;
    pt_schedule *s;
    int rc = pt_sched_alloc(P * D, K, micro, D, &s);
    if (rc != PT_OK)
        return rc;
    pt_sched_set_name(s, base->name);
    for (int c = 0; c < K; c++)
        for (int k = 0; k < D; k++)
            s->chunk_worker[c * D + k] = base->chunk_worker[c] * D + k;
    for (int m = 0; m < micro; m++)
        for (int c = 0; c < K; c++)
            s->route[m * K + c] = m % D;
    for (int w = 0; rc == PT_OK && w < P; w++)
        for (int k = 0; k < D; k++)
            for (int i = 0; rc == PT_OK && i < base->n_actions[w]; i++) {
                const pt_action *a = &base->actions[w][i];
                rc = pt_sched_push(s, w * D + k, a->kind, a->chunk, a->mb * D + k);
            }
    if (rc != PT_OK) {
        pt_schedule_destroy(s);
        return rc;
    }
    *out = s;
    return PT_OK;
}

/* ---- exact values through a sum ---- */

/* A 64-bit pattern as four 16-bit pieces, each exact in a float. */
static void put_bits(float *dst, uint64_t v, int pieces)
{
    for (int i = 0; i < pieces; i++)
        dst[i] = (float)((v >> (16 * i)) & 0xffff);
}

static uint64_t get_bits(const float *src, int pieces)
{
    uint64_t v = 0;
    for (int i = 0; i < pieces; i++)
        v |= (uint64_t)src[i] << (16 * i);
    return v;
}

int pt_ranks_agree_balance(pt_pipeline *p, int *balance, int n)
{
    float *buf = calloc((size_t)n, sizeof(float));
    if (!buf)
        return pt_fail(PT_ENOMEM, "cannot allocate the balance");
    for (int c = 0; p->rank == 0 && c < n; c++)
        buf[c] = (float)balance[c]; /* block counts: exact in a float */
    int rc = pt_transport_allreduce_sum_f32(p->mpi_t, p->all_workers, p->n_ranks, buf, (size_t)n);
    for (int c = 0; rc == PT_OK && c < n; c++)
        balance[c] = (int)buf[c];
    free(buf);
    return rc;
}

int pt_ranks_agree_times(pt_pipeline *p, double *t, int n)
{
    float *buf = calloc((size_t)n, sizeof(float));
    if (!buf)
        return pt_fail(PT_ENOMEM, "cannot allocate the times");
    for (int i = 0; p->rank == 0 && i < n; i++)
        buf[i] = (float)t[i]; /* the others add 0: every rank gets the same floats */
    int rc = pt_transport_allreduce_sum_f32(p->mpi_t, p->all_workers, p->n_ranks, buf, (size_t)n);
    for (int i = 0; rc == PT_OK && i < n; i++)
        t[i] = buf[i];
    free(buf);
    return rc;
}

int pt_coll_share(pt_worker *w, bool shares, bool losses)
{
    pt_pipeline *p = w->p;
    int K = p->n_chunks, M = p->M, D = p->s->replicas, KD = K * D;
    size_t n = (size_t)(shares ? KD * 4 : 0) + (size_t)(losses ? M * 2 : 0);
    float *buf = calloc(n ? n : 1, sizeof(float));
    if (!buf)
        return pt_fail(PT_ENOMEM, "cannot allocate the shared values");
    float *lbuf = buf + (shares ? KD * 4 : 0);
    for (int i = 0; shares && i < KD; i++) {
        /* each shard's owner, or replica 0 for the whole stage */
        int c = i / D, owner = p->zero ? pt_zero_member(p, c, i % D) : p->s->chunk_worker[c * D];
        if (owner == w->rank) {
            uint64_t bits;
            memcpy(&bits, &w->parts[i], sizeof bits);
            put_bits(buf + i * 4, bits, 4);
        }
    }
    for (int m = 0; losses && m < M; m++)
        if (pt_sched_worker_of(p->s, K - 1, m) == w->rank) {
            uint32_t bits;
            memcpy(&bits, &w->losses[m], sizeof bits);
            put_bits(lbuf + m * 2, bits, 2);
        }
    int rc = pt_transport_allreduce_sum_f32(w->t, p->all_workers, p->P, buf, n);
    for (int i = 0; rc == PT_OK && shares && i < KD; i++) {
        uint64_t bits = get_bits(buf + i * 4, 4);
        memcpy(&w->parts[i], &bits, sizeof bits);
    }
    for (int m = 0; rc == PT_OK && losses && m < M; m++) {
        uint32_t bits = (uint32_t)get_bits(lbuf + m * 2, 2);
        memcpy(&w->losses[m], &bits, sizeof bits);
    }
    free(buf);
    return rc;
}

/* ---- gradients ---- */

void pt_worker_chunk_span(const pt_worker *w, int c, size_t *off, size_t *floats)
{
    const pt_model *m = w->stage;
    int a = pt_model_block_first_param(m, w->p->chunk_first[c]);
    int b = pt_model_block_first_param(m, w->p->chunk_last[c] + 1);
    *off = 0;
    *floats = 0;
    if (b > a) {
        const pt_param *p0 = &m->params[a], *p1 = &m->params[b - 1];
        *off = (size_t)(p0->data - m->data.base);
        *floats = (size_t)(p1->data + p1->numel - p0->data);
    }
}

/* Sums n floats over the group, one bucket per call. */
static int bucketed_sum(pt_worker *w, const int *group, int n_group, float *x, size_t n)
{
    size_t bucket = w->p->reduce_bucket_floats;
    for (size_t at = 0; at < n; at += bucket) {
        size_t len = n - at < bucket ? n - at : bucket;
        int rc = pt_transport_allreduce_sum_f32(w->t, group, n_group, x + at, len);
        if (rc != PT_OK)
            return rc;
    }
    return PT_OK;
}

/* The tied copies of chunks ca and cb (gradients, or with `mean` the values
 * halved, as pipedream wants) summed between their owners in this worker's
 * replica. A worker holding both does the same addition itself. */
int pt_coll_tied(pt_worker *w, int ca, int cb, bool mean)
{
    pt_pipeline *p = w->p;
    pt_model *m = w->stage;
    int D = p->s->replicas, k = w->rank % D;
    if (mean) /* the values themselves are averaged: bf16's copy follows */
        pt_model_params_changed(m);
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *cp = pt_model_param(m, i);
        if (!cp->tied_to)
            continue;
        const pt_param *src = pt_model_find_param(m, cp->tied_to);
        int cc = pt_pipeline_chunk_of_block(p, cp->block),
            cs = pt_pipeline_chunk_of_block(p, src->block);
        if (!((cs == ca && cc == cb) || (cs == cb && cc == ca)))
            continue;
        int group[2] = {p->s->chunk_worker[cs * D + k], p->s->chunk_worker[cc * D + k]};
        if (group[0] != w->rank && group[1] != w->rank)
            continue;
        bool grad = !mean;
        float *a = grad ? src->grad : src->data, *b = grad ? cp->grad : cp->data;
        if (group[0] == w->rank && group[1] == w->rank) {
            for (size_t j = 0; j < cp->numel; j++) {
                float s = a[j] + b[j];
                a[j] = b[j] = mean ? 0.5f * s : s;
            }
            continue;
        }
        float *mine = group[0] == w->rank ? a : b;
        int rc = bucketed_sum(w, group, 2, mine, cp->numel);
        if (rc != PT_OK)
            return rc;
        for (size_t j = 0; mean && j < cp->numel; j++)
            mine[j] = 0.5f * mine[j];
    }
    return PT_OK;
}

int pt_coll_sum_replicas(pt_worker *w, int c)
{
    pt_pipeline *p = w->p;
    int D = p->s->replicas;
    if (D < 2)
        return PT_OK;
    int *group = malloc(sizeof(int) * (size_t)D);
    if (!group)
        return pt_fail(PT_ENOMEM, "cannot allocate a replica group");
    size_t off, n;
    pt_worker_chunk_span(w, c, &off, &n);
    for (int k = 0; k < D; k++)
        group[k] = p->s->chunk_worker[c * D + k];
    int rc = bucketed_sum(w, group, D, w->stage->grad.base + off, n);
    free(group);
    return rc;
}

/* SEQUENCE_SUM (sequence parallelism): the positions' parts of the
 * LayerNorms' gradients summed over the worker's slices, all in one buffer
 * (every slice holds the same parameters in the same order). */
int pt_coll_sequence_sum(pt_worker *w)
{
    pt_model *m = w->stage;
    size_t n = 0;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].grad && pt_model_param_decl(m, i)->sequence_partial)
            n += m->params[i].numel;
    if (n == 0)
        return PT_OK;
    float *buf = malloc(n * sizeof(float)), *at = buf;
    if (!buf)
        return pt_fail(PT_ENOMEM, "cannot allocate the LayerNorms' gradient sum");
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].grad && pt_model_param_decl(m, i)->sequence_partial) {
            memcpy(at, m->params[i].grad, m->params[i].numel * sizeof(float));
            at += m->params[i].numel;
        }
    int rc = pt_transport_allreduce_sum_f32(w->tensor_t, w->tensor_group, w->p->T, buf, n);
    at = buf;
    for (int i = 0; rc == PT_OK && i < m->n_params; i++)
        if (m->params[i].grad && pt_model_param_decl(m, i)->sequence_partial) {
            memcpy(m->params[i].grad, at, m->params[i].numel * sizeof(float));
            at += m->params[i].numel;
        }
    free(buf);
    return rc;
}

/* Tensor slices: every part summed over the worker's slices, exactly
 * (each slice's bits in its own place), folded in slice order, so every
 * slice holds the whole model's part. */
static int sum_over_slices(pt_worker *w)
{
    pt_pipeline *p = w->p;
    int KD = p->n_chunks * p->s->replicas, T = p->T;
    float *buf = calloc((size_t)KD * T * 4, sizeof(float));
    if (!buf)
        return pt_fail(PT_ENOMEM, "cannot allocate the slices' parts");
    for (int i = 0; i < KD; i++) {
        uint64_t bits;
        memcpy(&bits, &w->parts[i], sizeof bits);
        put_bits(buf + ((size_t)w->tensor_rank * KD + i) * 4, bits, 4);
    }
    int rc =
        pt_transport_allreduce_sum_f32(w->tensor_t, w->tensor_group, T, buf, (size_t)KD * T * 4);
    for (int i = 0; rc == PT_OK && i < KD; i++) {
        double sq = 0.0, x;
        for (int t = 0; t < T; t++) {
            uint64_t bits = get_bits(buf + ((size_t)t * KD + i) * 4, 4);
            memcpy(&x, &bits, sizeof x);
            sq += x;
        }
        w->parts[i] = sq;
    }
    free(buf);
    return rc;
}

int pt_coll_norm(pt_worker *w)
{
    pt_pipeline *p = w->p;
    int D = p->s->replicas, rc;
    for (int c = 0; c < p->n_chunks; c++) {
        int me = pt_zero_position(p, w->rank, c);
        size_t off = 0, floats = 0, lo, hi;
        if (me >= 0)
            pt_worker_chunk_span(w, c, &off, &floats);
        for (int k = 0; k < D; k++) {
            /* a shard's part: its owner's when sharded, else every replica's */
            bool mine = me >= 0 && (!p->zero || me == k);
            pt_zero_shard(p, c, k, &lo, &hi);
            w->parts[c * D + k] =
                mine ? pt_optimizer_grad_sq_range(w->stage, p->chunk_first[c], p->chunk_last[c],
                                                  off + lo, off + hi, w->tensor_rank)
                     : 0.0;
        }
    }
    if (p->T > 1 && (rc = sum_over_slices(w)) != PT_OK)
        return rc;
    /* every loss is known by now: one exchange carries both */
    rc = pt_coll_share(w, true, true);
    if (rc != PT_OK)
        return rc;
    w->losses_shared = true;
    double sq = 0.0; /* folded in chunk and shard order by every worker alike */
    for (int c = 0; c < p->n_chunks; c++) {
        w->shares[c] = 0.0;
        for (int k = 0; k < D; k++)
            w->shares[c] += w->parts[c * D + k];
        sq += w->shares[c];
    }
    w->norm = sqrt(sq);
    w->clip = pt_optimizer_clip_factor(&p->optim, w->norm);
    w->skip = !isfinite(w->norm);
    return PT_OK;
}

/* Does worker w run in a process of its own (MPI), rather than beside every
 * other worker (threads)? Processes are what probabilities must reach. */
static bool own_process(const pt_pipeline *p) { return p->mpi; }

int pt_coll_share_probs(pt_worker *w, float *probs, size_t floats)
{
    pt_pipeline *p = w->p;
    int owner = pt_sched_worker_of(p->s, p->n_chunks - 1, 0);
    if (!own_process(p))
        return PT_OK; /* the owner wrote them into this process's buffer */
    uint64_t n = floats;
    int rc = PT_OK;
    if (w->rank == owner) {
        for (int r = 0; rc == PT_OK && r < p->P; r++) {
            if (r == owner)
                continue;
            pt_request a, b;
            rc = pt_transport_isend(w->t, r, TAG_PROBS_SIZE, &n, sizeof n, &a);
            if (rc == PT_OK)
                rc = pt_transport_isend(w->t, r, TAG_PROBS, probs, floats * sizeof(float), &b);
            if (rc == PT_OK)
                rc = pt_transport_wait(w->t, &a);
            if (rc == PT_OK)
                rc = pt_transport_wait(w->t, &b);
        }
        return rc;
    }
    pt_request r;
    rc = pt_transport_irecv(w->t, owner, TAG_PROBS_SIZE, &n, sizeof n, &r);
    if (rc == PT_OK)
        rc = pt_transport_wait(w->t, &r);
    if (rc == PT_OK)
        rc = pt_transport_irecv(w->t, owner, TAG_PROBS, probs, (size_t)n * sizeof(float), &r);
    if (rc == PT_OK)
        rc = pt_transport_wait(w->t, &r);
    return rc;
}

/* ---- agreement between processes ---- */

int pt_pipeline_agree(pt_pipeline *p, int status, void *buf, size_t n)
{
    if (!p->mpi)
        return status; /* one process: nothing to agree with */
    if (p->world_aborted)
        return pt_fail(PT_ETRANSPORT, "the pipeline's MPI world failed in an earlier call: %s",
                       p->world_abort_msg);
    char mine[512];
    snprintf(mine, sizeof mine, "%s", pt_last_error());
    float *f = calloc(n + 1, sizeof(float));
    if (!f)
        return pt_ranks_abort(p, pt_fail(PT_ENOMEM, "cannot allocate %zu bytes to agree on", n));
    f[0] = status != PT_OK ? 1.0f : 0.0f;
    const unsigned char *b = buf;
    for (size_t i = 0; p->rank == 0 && i < n; i++)
        f[1 + i] = (float)b[i]; /* bytes: exact in a float, summed with zeros */
    int rc = pt_transport_allreduce_sum_f32(p->mpi_t, p->all_workers, p->n_ranks, f, n + 1);
    int failed = rc == PT_OK ? (int)f[0] : 1;
    for (size_t i = 0; rc == PT_OK && i < n; i++)
        ((unsigned char *)buf)[i] = (unsigned char)f[1 + i];
    free(f);
    if (rc != PT_OK)
        return pt_ranks_abort(p, rc);
    if (status != PT_OK)
        return pt_fail(status, "%s", mine);
    if (failed)
        return pt_fail(PT_EIO, "%d other rank%s failed (each reports its own reason)", failed,
                       failed == 1 ? "" : "s");
    return PT_OK;
}

int pt_coll_sum_counts(pt_pipeline *p, uint64_t *v, size_t n)
{
    if (!p->mpi)
        return PT_OK;
    float *f = calloc(n * 4 + 1, sizeof(float));
    if (!f)
        return pt_fail(PT_ENOMEM, "cannot allocate %zu counts", n);
    for (size_t i = 0; i < n; i++)
        put_bits(f + 4 * i, v[i], 4);
    /* each count comes from one process, zeros from the others: the sum is it */
    int rc = pt_transport_allreduce_sum_f32(p->mpi_t, p->all_workers, p->n_ranks, f, n * 4);
    for (size_t i = 0; rc == PT_OK && i < n; i++)
        v[i] = get_bits(f + 4 * i, 4);
    free(f);
    return rc == PT_OK ? PT_OK : pt_ranks_abort(p, rc);
}
