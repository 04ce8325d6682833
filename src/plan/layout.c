/* layout.c: a (P, T, D, zero) layout's memory and step time per worker,
 * predicted (layout.h).
 *
 * Memory is memory.c's walk of one replica's 1f1b list over a slice's
 * description (the model cut as slice 0 of T: its parameters, gradients,
 * moments and activations, the split blocks' at 1/T, the layernorms,
 * residuals and the embedding's positions whole), with D replicas of every
 * worker and the moments of 1/D of the slice under zero 1 and 2; the
 * partition is the one the pipeline would choose from the same profile.
 *
 * Time: the simulator plays the 1f1b list for M/D micro-batches with each
 * stage's profiled F, B, W over T plus its tensor-group sums (each a ring
 * all-reduce, cluster.c's formula, of the block's input: Megatron's f and
 * g per attention and MLP, one after the embedding), the activations
 * between stages on the link; then each worker's gradient is summed over
 * the D replicas (a reduce-scatter and an all-gather under zero: the same
 * bytes), counted whole after the last backward though the runtime
 * overlaps it with earlier chunks' backward: an upper bound. */
#include "plan/layout.h"

#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "plan/cost.h"
#include "plan/memory.h"
#include "tensor/error.h"

/* A ring all-reduce on the layout's link: cluster.c's formula on a cluster
 * whose every device shares the link. */
static double allreduce_seconds(const pt_layout_plan *l, double bytes, int n)
{
    pt_cluster c = {.devices_per_node = 1 << 30};
    c.intra_node.bandwidth = l->bandwidth;
    c.intra_node.latency = l->latency;
    return pt_cluster_allreduce_seconds(&c, bytes, n, 1);
}

static int check_layout(const pt_model_config *cfg, const pt_layout_plan *l, int n_blocks)
{
    if (l->stages < 1 || l->tensor < 1 || l->replicas < 1 || l->micro_batch_size < 1)
        return pt_fail(PT_EINVAL, "stages, tensor slices, replicas and the micro-batch size "
                                  "must be at least 1");
    if (l->zero < 0 || l->zero > 2)
        return pt_fail(PT_EINVAL, "zero %d: sharded optimizer state is 1 or 2, 0 off", l->zero);
    if (l->zero && l->replicas < 2)
        return pt_fail(PT_EINVAL,
                       "zero %d shards the optimizer state across a stage's replicas, but "
                       "there is 1 replica: give replicas of 2 or more (--replicas)",
                       l->zero);
    if (l->tensor > 1 && cfg->kind == PT_MODEL_MLP) /* a spec says (its slice refuses) */
        return pt_fail(PT_EINVAL,
                       "--tensor %d: an mlp's linear layers do not declare how they split; "
                       "write it as a spec with column_linear and row_linear",
                       l->tensor);
    if (l->stages > n_blocks || l->stages > PT_PARTITION_MAX_CHUNKS)
        return pt_fail(PT_EINVAL, "%d stages need at least %d blocks, but the model has %d",
                       l->stages, l->stages, n_blocks);
    if (l->microbatches < l->replicas || l->microbatches % l->replicas)
        return pt_fail(PT_EINVAL,
                       "%d micro-batches cannot be shared by %d replicas: the micro-batch "
                       "count must be a multiple of the replicas",
                       l->microbatches, l->replicas);
    return PT_OK;
}

/* Stage s's F, B, W seconds on a slice, its tensor sums included. */
static void stage_costs(const pt_model *slice, const pt_block_profile *prof,
                        const pt_layout_plan *l, int first, int last, double *f, double *b,
                        double *w, double *sums)
{
    int T = l->tensor;
    *f = *b = *w = *sums = 0;
    for (int i = first; i <= last; i++) {
        *f += prof[i].f / T, *b += prof[i].b / T, *w += prof[i].w / T;
        if (T == 1)
            continue;
        double bytes = (double)l->micro_batch_size * (double)pt_model_block_input_floats(slice, i) *
                       sizeof(float);
        /* sequence parallelism: the input is the slice's positions, and a
         * reduce-scatter or all-gather of the whole moves half a ring
         * all-reduce's bytes */
        double one = l->sequence_parallel ? allreduce_seconds(l, bytes * T, T) / 2
                                          : allreduce_seconds(l, bytes, T);
        int sums_f = pt_model_tensor_pieces(slice, i, i, 0) - 1;
        int sums_b = pt_model_tensor_pieces(slice, i, i, 1) - 1;
        *f += sums_f * one, *b += sums_b * one;
        *sums += (sums_f + sums_b) * one;
    }
}

static int predict_time(const pt_model *slice, const pt_block_profile *prof,
                        const pt_layout_plan *l, const pt_schedule *s, pt_layout_estimate *out)
{
    int P = l->stages;
    double *cost = calloc((size_t)P * 4, sizeof(double));
    if (!cost)
        return pt_fail(PT_ENOMEM, "cannot allocate the layout's costs");
    double *f = cost, *b = cost + P, *w = cost + 2 * P, *bytes = cost + 3 * P;
    out->tensor_sum_s = 0;
    for (int c = 0, first = 0; c < P; first += out->balance[c++]) {
        double sums;
        stage_costs(slice, prof, l, first, first + out->balance[c] - 1, &f[c], &b[c], &w[c], &sums);
        out->tensor_sum_s = sums > out->tensor_sum_s ? sums : out->tensor_sum_s;
        bytes[c] = c == 0 ? 0
                          : (double)l->micro_batch_size *
                                (double)pt_model_block_input_floats(slice, first) * sizeof(float);
    }
    out->tensor_sum_s *= (double)l->microbatches / l->replicas; /* a step's, as step_s */
    pt_schedule_costs sc = pt_schedule_costs_default();
    sc.n_chunk_costs = P, sc.chunk_f = f, sc.chunk_b = b, sc.chunk_w = w;
    sc.bandwidth = l->bandwidth, sc.latency = l->latency, sc.boundary_bytes = bytes;
    pt_schedule_sim *sim;
    int rc = pt_schedule_simulate_run(s, &sc, &sim);
    if (rc == PT_OK) {
        out->step_s = sim->makespan;
        pt_schedule_sim_destroy(sim);
    }
    out->replica_sum_s = 0;
    for (int c = 0, first = 0; rc == PT_OK && c < P; first += out->balance[c++]) {
        double grads = (double)pt_model_param_bytes(slice, first, first + out->balance[c] - 1);
        double t = allreduce_seconds(l, grads, l->replicas);
        out->replica_sum_s = t > out->replica_sum_s ? t : out->replica_sum_s;
    }
    out->step_s += out->replica_sum_s;
    free(cost);
    return rc;
}

static int predict_memory(const pt_model *slice, const pt_layout_plan *l, const pt_schedule *s,
                          pt_layout_estimate *out)
{
    int P = l->stages, first[PT_PARTITION_MAX_CHUNKS], last[PT_PARTITION_MAX_CHUNKS];
    for (int c = 0, b = 0; c < P; b += out->balance[c++])
        first[c] = b, last[c] = b + out->balance[c] - 1;
    pt_memory_plan mp = {.desc = slice,
                         .s = s,
                         .chunk_first = first,
                         .chunk_last = last,
                         .micro_batch_size = l->micro_batch_size,
                         .moments = 2,
                         .zero = l->zero,
                         .replicas = l->replicas,
                         .replica = 0}; /* the root at zero 0, the first shard's owner */
    out->peak = 0;
    for (int w = 0; w < P; w++) {
        pt_memory_use u;
        int rc = pt_plan_worker_memory(&mp, w, &u);
        if (rc != PT_OK)
            return rc;
        if (w == 0 || pt_memory_total(&u) > out->peak)
            out->worst = u, out->peak = pt_memory_total(&u), out->worst_stage = w;
    }
    return PT_OK;
}

int pt_layout_predict(const pt_model_config *cfg, const pt_block_profile *prof,
                      const pt_layout_plan *l, pt_layout_estimate *out)
{
    memset(out, 0, sizeof *out);
    pt_model *slice;
    int rc = pt_model_create_slice(cfg, NULL, 1, l->tensor, 0, l->sequence_parallel, &slice);
    if (rc != PT_OK)
        return rc;
    int n = pt_model_n_blocks(slice), micro = l->microbatches / (l->replicas ? l->replicas : 1);
    if ((rc = check_layout(cfg, l, n)) == PT_OK) /* the pipeline's cut, from the same profile */
        rc = pt_partition_solve(prof, n, l->stages, 0, micro < l->stages ? micro : l->stages,
                                out->balance, NULL);
    pt_schedule *s = NULL;
    if (rc == PT_OK) {
        pt_schedule_config sc = pt_schedule_config_default();
        sc.stages = l->stages, sc.microbatches = micro;
        rc = pt_schedule_create(&sc, &s);
    }
    if (rc == PT_OK)
        rc = predict_memory(slice, l, s, out);
    if (rc == PT_OK)
        rc = predict_time(slice, prof, l, s, out);
    pt_schedule_destroy(s);
    pt_model_destroy(slice);
    return rc;
}
