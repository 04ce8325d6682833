/* memory.c: what each pipeline worker holds, predicted (memory.h).
 *
 * A worker owns the chunks the schedule places on it:
 *   parameters   every tensor of its chunks' blocks, each aligned as the
 *                stage's arena lays it out (a tied copy counts on each stage
 *                that holds it), and under bf16 the products' bf16 copy,
 *                in fp32 on pipetrain's own products the matrices' kept
 *                panels (pt_model_panel_bytes);
 *   gradients    as many bytes again;
 *   moments      one or two copies (SGD momentum, AdamW's two);
 *   stash        asynchronous schedules: one copy of a chunk's weights per
 *                version still in flight, plus the current weights while a
 *                stashed version is swapped in;
 *   activations  the records its list holds at once per chunk (found by
 *                walking the list): a forward's part from F to W, a
 *                backward's (the gradients W reads) from B to W, so a fused
 *                backward holds one of those at a time; the LM head's
 *                probabilities from F to B only; the boundary
 *                buffers on each side of its chunks, in the precision's
 *                activation type (bf16 halves them); and the one workspace
 *                its blocks share (the largest any of them needs: a pass's
 *                attention scratch, sequence parallelism's whole tensors);
 *   comm         the replicas' gradient sum: the group's root keeps a copy
 *                of each other replica's chunk gradient.
 * With sharded optimizer state (zero, replicas D > 1) a worker keeps the
 * moments of its shard of each chunk (1/D of it) and receives the other
 * replicas' copies of that shard one bucket at a time; parameters stay
 * whole (in bf16 runs the bf16 copy and the tensors read as floats; the
 * float master of the other matrices is the shard's alone), and gradients
 * too at zero 1. At zero 2 the gradients are the owned shards plus the
 * most two neighbouring pieces of a weight pass hold outside them (a
 * block's each: one being computed, the one before still being
 * reduce-scattered), counted in floats as the runtime counts them (zero.c).
 * The executor's pool is sized by the same walk (pt_plan_worker_records),
 * so what the prediction says is what the pool allocates up front. */
#include "plan/memory.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "model/model.h"
#include "plan/partition.h"
#include "tensor/arena.h"
#include "tensor/error.h"

/* What an action of kind k does to a part of a chunk's records: how many
 * more it uses while it runs, and how many more are held after it. */
typedef struct {
    int during, after;
} part_use;

/* The forward's part: taken at F and given back at W or BW; with
 * checkpointing F drops it at once and B takes it again (the recompute). */
static part_use forward_part(pt_action_kind k, bool checkpoint)
{
    bool backward = k == PT_ACT_B || k == PT_ACT_BW;
    int take = k == PT_ACT_F ? !checkpoint : backward && checkpoint;
    int give = k == PT_ACT_W || k == PT_ACT_BW;
    return (part_use){take || k == PT_ACT_F, take - give};
}

/* The backward's part: taken at B, given back at W (a BW both) */
static part_use backward_part(pt_action_kind k, bool checkpoint)
{
    (void)checkpoint;
    return (part_use){k == PT_ACT_B || k == PT_ACT_BW, (k == PT_ACT_B) - (k == PT_ACT_W)};
}

/* The most of one part each chunk holds at once, walking worker w's list */
static void walk_records(const pt_schedule *s, int worker, bool checkpoint,
                         part_use (*part)(pt_action_kind, bool), int *records)
{
    int *live = calloc((size_t)s->n_chunks, sizeof(int));
    if (!live)
        return;
    for (int i = 0; i < s->n_actions[worker]; i++) {
        const pt_action *a = &s->actions[worker][i];
        part_use u = part(a->kind, checkpoint);
        int c = a->chunk, peak = live[c] + u.during;
        live[c] += u.after;
        if (peak > records[c])
            records[c] = peak;
    }
    free(live);
}

/* The output kept apart (the LM head's): taken with the forward's part,
 * given back at the end of B (a BW's B) */
static part_use output_part(pt_action_kind k, bool checkpoint)
{
    bool backward = k == PT_ACT_B || k == PT_ACT_BW;
    if (k == PT_ACT_F)
        return (part_use){1, !checkpoint};
    return (part_use){backward && checkpoint, backward && !checkpoint ? -1 : 0};
}

void pt_plan_worker_records(const pt_schedule *s, int worker, bool checkpoint, int *records)
{
    walk_records(s, worker, checkpoint, forward_part, records);
}

void pt_plan_worker_grad_records(const pt_schedule *s, int worker, int *records)
{
    walk_records(s, worker, false, backward_part, records);
}

void pt_plan_worker_outputs(const pt_schedule *s, int worker, bool checkpoint, int *outputs)
{
    walk_records(s, worker, checkpoint, output_part, outputs);
}

int pt_plan_worker_buffers(const pt_schedule *s, int worker)
{
    /* a chunk's input stays from its forward to its last backward piece,
     * recomputed or not: the records a list without checkpointing keeps */
    int *in_flight = calloc((size_t)s->n_chunks, sizeof(int));
    if (!in_flight)
        return -1;
    pt_plan_worker_records(s, worker, false, in_flight);
    int most = 0;
    for (int c = 0; c < s->n_chunks; c++)
        if (pt_sched_holds(s, worker, c, NULL) && in_flight[c] > most)
            most = in_flight[c];
    free(in_flight);
    /* and the next compute action's receive, the receives posted ahead of
     * it, the input gradient a backward writes until its send is done */
    return most + 1 + PT_RECEIVES_AHEAD + 1;
}

/* Most distinct weight versions of chunk c alive at once on worker w: a
 * version lives from the first forward that uses it to the last backward
 * piece of the micro-batches that used it. */
static int peak_versions(const pt_schedule *s, int w, int c)
{
    int n = s->n_actions[w], peak = 0;
    for (int i = 0; i < n; i++) {
        int alive = 0;
        for (int v = 0; v <= n; v++) { /* versions are update counts: below n */
            bool started = false, pending = false;
            for (int j = 0; j <= i; j++) {
                const pt_action *a = &s->actions[w][j];
                if (a->chunk == c && a->kind == PT_ACT_F && a->version == v)
                    started = true;
            }
            for (int j = i + 1; started && j < n && !pending; j++) {
                const pt_action *a = &s->actions[w][j];
                pending = a->chunk == c && a->kind != PT_ACT_F && a->version == v;
            }
            alive += started && pending;
        }
        peak = alive > peak ? alive : peak;
    }
    return peak;
}

/* Chunk first..last's shard at position pos of D, floats [*lo, *hi) of
 * its span as the stage's arena lays it out (zero.c's shards). */
static void shard_of(const pt_model *m, int first, int last, int D, int pos, size_t *lo, size_t *hi)
{
    size_t at = 0, floats = 0;
    for (int b = first; b <= last; b++)
        for (int i = 0; i < m->blocks[b].n_params; i++) {
            size_t n = pt_param_decl_numel(&m->blocks[b].decl[i]);
            floats = at + n;
            at += pt_arena_round(n);
        }
    *lo = floats * (size_t)pos / (size_t)D, *hi = floats * (size_t)(pos + 1) / (size_t)D;
}

static size_t overlap(size_t a, size_t b, size_t lo, size_t hi)
{
    size_t x = a > lo ? a : lo, z = b < hi ? b : hi;
    return z > x ? z - x : 0;
}

/* bf16 with sharded state: the bytes of float master the worker at
 * position pos does not keep (the matrices read only through their bf16
 * copy, outside its shard: pt_model_shard_master). */
static size_t released_master(const pt_model *m, int first, int last, int D, int pos)
{
    size_t lo, hi, at = 0, out = 0;
    shard_of(m, first, last, D, pos, &lo, &hi);
    for (int b = first; b <= last; b++)
        for (int i = 0; i < m->blocks[b].n_params; i++) {
            const pt_param_decl *d = &m->blocks[b].decl[i];
            size_t n = pt_param_decl_numel(d);
            if (d->ndim >= 2 && !d->float_read)
                out += n - overlap(at, at + n, lo, hi);
            at += pt_arena_round(n);
        }
    return out * sizeof(float);
}

/* zero 2: chunk first..last's gradient at position pos of D: the owned
 * shard's bytes, and the most bytes of weight pieces (a block with
 * parameters each) held outside it at once: a piece's last round is still
 * in flight while the next piece (the block below: pieces run from the
 * last block down) runs, so two neighbours (zero.c). */
static void scattered_grads(const pt_model *m, int first, int last, int D, int pos, size_t *owned,
                            size_t *most)
{
    size_t lo, hi, at = 0, below = 0; /* the piece of the block below */
    shard_of(m, first, last, D, pos, &lo, &hi);
    *owned = (hi - lo) * sizeof(float);
    *most = 0;
    for (int b = first; b <= last; b++) {
        size_t from = at, to = at;
        for (int i = 0; i < m->blocks[b].n_params; i++) {
            size_t n = pt_param_decl_numel(&m->blocks[b].decl[i]);
            to = at + n;
            at += pt_arena_round(n);
        }
        if (!m->blocks[b].n_params)
            continue;
        size_t out = (to - from - overlap(from, to, lo, hi)) * sizeof(float);
        *most = out + below > *most ? out + below : *most;
        below = out;
    }
}

int pt_plan_worker_memory(const pt_memory_plan *mp, int worker, pt_memory_use *out)
{
    const pt_schedule *s = mp->s;
    memset(out, 0, sizeof *out);
    if (worker < 0 || worker >= s->n_workers)
        return pt_fail(PT_EINVAL, "worker %d is not one of the schedule's %d", worker,
                       s->n_workers);
    int K = s->n_chunks, B = mp->micro_batch_size;
    int *records = calloc((size_t)K * 3, sizeof(int)), *grad_records = records + K;
    int *outputs = records + 2 * K;
    bool *buffered = calloc((size_t)K + 1, sizeof(bool));
    int buffers = records && buffered ? pt_plan_worker_buffers(s, worker) : -1;
    if (buffers < 0) {
        free(records);
        free(buffered);
        return pt_fail(PT_ENOMEM, "cannot allocate the memory plan");
    }
    pt_plan_worker_records(s, worker, mp->checkpoint_activations, records);
    pt_plan_worker_grad_records(s, worker, grad_records);
    pt_plan_worker_outputs(s, worker, mp->checkpoint_activations, outputs);
    bool async = pt_sched_is_async(s);
    bool copies = s->replicas == 1 && mp->replicas > 1; /* s is one replica's */
    int D = copies ? mp->replicas : s->replicas;
    size_t window = 0; /* zero 1 and 2: the one bucket's receive buffers */
    size_t most_work = 0, most_piece = 0;
    for (int c = 0; c < K; c++) {
        if (!pt_sched_holds(s, worker, c, NULL))
            continue;
        int first = mp->chunk_first[c], last = mp->chunk_last[c];
        size_t params = pt_model_param_bytes(mp->desc, first, last);
        bool bf16 = pt_model_get_config(mp->desc)->precision == PT_PRECISION_BF16;
        out->params +=
            params + (bf16 ? params / 2 : 0) + pt_model_panel_bytes(mp->desc, first, last);
        out->grads += params;
        size_t shard = params; /* bytes whose moments and sums this worker keeps */
        bool sharded = mp->zero && !async && D > 1;
        int pos = copies ? mp->replica : 0; /* this worker's place among the chunk's replicas */
        for (int k = 0; !copies && k < D; k++)
            pos += s->chunk_worker[c * D + k] < worker;
        if (sharded) {
            size_t floats = params / sizeof(float);
            shard = (floats * (size_t)(pos + 1) / (size_t)D - floats * (size_t)pos / (size_t)D) *
                    sizeof(float);
        }
        if (sharded && bf16) /* the float master of the shard (and what is read as floats) */
            out->params -= released_master(mp->desc, first, last, D, pos);
        if (sharded && mp->zero == 2) { /* the owned gradient, exactly as zero.c cuts it */
            size_t piece;
            scattered_grads(mp->desc, first, last, D, pos, &shard, &piece);
            out->grads += shard - params;
            most_piece = piece > most_piece ? piece : most_piece;
        }
        out->moments += (size_t)mp->moments * shard;
        out->activations +=
            (size_t)records[c] * pt_model_forward_record_bytes(mp->desc, first, last, B) +
            (size_t)grad_records[c] * pt_model_grad_record_bytes(mp->desc, first, last, B) +
            (size_t)outputs[c] * pt_model_output_part_bytes(mp->desc, first, last, B);
        size_t work = pt_model_work_bytes(mp->desc, first, last, B);
        most_work = work > most_work ? work : most_work;
        for (int b = c; b <= c + 1; b++)
            if (b >= 1 && b < K)
                buffered[b] = true;
        if (async && params) {
            int versions = peak_versions(s, worker, c);
            out->stash += (size_t)(versions + (versions > 0)) * params;
        }
        bool root = pos == 0;
        size_t bucket = (mp->bucket_floats ? mp->bucket_floats : (size_t)1 << 20) * sizeof(float);
        size_t one = bucket < shard ? bucket : shard;
        if (sharded) /* one window for every chunk */
            window = one > window ? one : window;
        else if (!async && D > 1 && root)
            out->comm += (size_t)(D - 1) * params;
    }
    out->comm += (size_t)(D - 1) * window * (mp->zero == 2 ? 2 : 1); /* zero 2: two in flight */
    out->grads += most_piece;
    out->activations += most_work;
    for (int b = 1; b < K; b++)
        if (buffered[b]) {
            size_t bytes = (size_t)B *
                           (size_t)pt_model_block_input_floats(mp->desc, mp->chunk_first[b]) *
                           pt_model_activation_size(mp->desc);
            out->activations += (size_t)buffers * pt_arena_floats_for(bytes) * sizeof(float);
        }
    free(records);
    free(buffered);
    return PT_OK;
}

size_t pt_memory_total(const pt_memory_use *u)
{
    return u->params + u->grads + u->moments + u->stash + u->activations + u->comm;
}

size_t pt_process_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (size_t)ru.ru_maxrss * 1024; /* Linux counts kilobytes */
}

int pt_schedule_predict_memory(const pt_schedule *s, const pt_model *desc, const int *balance,
                               int micro_batch_size, int checkpoint_activations, int moments,
                               pt_memory_use *per_worker)
{
    int K = s->n_chunks;
    int rc = pt_partition_check_balance(balance, K, K, pt_model_n_blocks(desc));
    if (rc != PT_OK)
        return rc;
    if (micro_batch_size < 1 || moments < 0 || moments > 2)
        return pt_fail(PT_EINVAL,
                       "a micro-batch size >= 1 and 0, 1 or 2 optimizer moments are needed "
                       "(got %d and %d)",
                       micro_batch_size, moments);
    int *first = malloc(sizeof(int) * (size_t)K), *last = malloc(sizeof(int) * (size_t)K);
    if (!first || !last)
        rc = pt_fail(PT_ENOMEM, "cannot allocate the partition");
    for (int c = 0, b = 0; rc == PT_OK && c < K; b += balance[c++])
        first[c] = b, last[c] = b + balance[c] - 1;
    pt_memory_plan mp = {.desc = desc,
                         .s = s,
                         .chunk_first = first,
                         .chunk_last = last,
                         .micro_batch_size = micro_batch_size,
                         .checkpoint_activations = checkpoint_activations != 0,
                         .moments = moments};
    for (int w = 0; rc == PT_OK && w < s->n_workers; w++)
        rc = pt_plan_worker_memory(&mp, w, &per_worker[w]);
    free(first);
    free(last);
    return rc;
}
