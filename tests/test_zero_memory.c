/* test_zero_memory: sharded optimizer state keeps 1/D of the moments on
 * every replica, and the memory report counts and predicts it.
 *
 * A GPT of 4 layers, width 64 and 512 tokens, on threads: 1 stage alone
 * (D = 1), then 1 stage x 4 replicas with zero 0, 1 and 2, one step each:
 *   - at zero 1 and 2 each worker's moments (allocated) are 1/4 of D = 1's,
 *     within the arena's alignment; at zero 0 they are D = 1's;
 *   - the report's measured figures equal the planner's prediction within
 *     10%, kind by kind, for every worker and zero;
 *   - zero 2's receive buffers (comm) are at most twice zero 1's (one set
 *     per piece in flight), which are at most the unsharded root's;
 *   - at zero 2 each worker's gradients are its quarter of the stage's
 *     and at most two blocks' beside it (the piece being scattered and the
 *     one before, still in flight), below zero 1's, and exactly as
 *     predicted;
 *   - in bf16 at zero 1 each worker keeps the whole bf16 copy, the float
 *     master of the tensors read as floats (vectors, the embedding tables)
 *     and its shard of the other matrices' (the four adding up to one
 *     stage's, within 1%), under 0.65x of zero 0's bytes;
 * and prints the report (peak RSS is the process's, shared by the threads). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "pipetrain.h"
#include "runtime/optimizer.h"
#include "tensor/rng.h"

#include "check.h"

#define M 4

static int near(size_t got, size_t want)
{
    double g = (double)got, w = (double)want;
    return (g == 0 && w == 0) || (g <= 1.1 * w + 4096 && g >= 0.9 * w - 4096);
}

/* One step at (1 stage, D replicas, zero); per-worker figures out. */
static pt_precision precision = PT_PRECISION_FP32;

static pt_model_config model(void)
{
    pt_model_config mc = pt_model_config_gpt();
    mc.n_layer = 4, mc.n_head = 4, mc.n_embd = 64, mc.seq_len = 16, mc.vocab = 512, mc.seed = 3;
    mc.precision = precision;
    /* the bf16 accounting below is the float master and the bf16 copy
     * alone: no kept panels (AMX's products would keep their tiles) */
    mc.repack_weights = precision == PT_PRECISION_BF16;
    return mc;
}

/* Bytes of the largest block's parameters. */
static size_t largest_block(void)
{
    pt_model_config mc = model();
    pt_model *m;
    REQUIRE(pt_model_create(&mc, &m) == PT_OK, "%s", pt_last_error());
    size_t most = 0, sum = 0;
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *p = pt_model_param(m, i);
        bool next = i + 1 == pt_model_n_params(m) || pt_model_param(m, i + 1)->block != p->block;
        sum += p->numel * sizeof(float);
        if (next)
            most = sum > most ? sum : most, sum = 0;
    }
    pt_model_destroy(m);
    return most;
}

static int run(int D, int zero, pt_memory_use *got)
{
    pt_model_config mc = model();
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = 1, pc.replicas = D, pc.zero = zero, pc.microbatches = M, pc.micro_batch_size = 1;
    pc.blas_threads = 1, pc.transport = PT_PIPELINE_THREADS;
    pt_pipeline *p;
    REQUIRE(pt_pipeline_create(&mc, &oc, &pc, &p) == PT_OK, "D=%d zero %d: %s", D, zero,
            pt_last_error());
    int tokens[M * 16 + 1];
    pt_rng g;
    pt_rng_seed(&g, 9);
    for (int i = 0; i <= M * 16; i++)
        tokens[i] = (int)pt_rng_below(&g, 512);
    pt_microbatch mb = {.batch = M, .tokens = tokens, .targets = tokens + 1};
    int rc = pt_pipeline_train_step(p, &mb, 0, 1e-3f, NULL);
    pt_memory_use want[4];
    size_t rss[4];
    if (rc == PT_OK)
        rc = pt_pipeline_memory(p, got, want, rss);
    if (rc != PT_OK) {
        pt_pipeline_destroy(p);
        REQUIRE(0, "D=%d zero %d: %s", D, zero, pt_last_error());
    }
    for (int w = 0; w < D; w++) {
        const size_t *x = &got[w].params, *y = &want[w].params;
        const char *kinds[] = {"params", "grads", "moments", "stash", "activations", "comm"};
        for (int k = 0; k < 6; k++)
            CHECK(near(x[k], y[k]) && (zero < 2 || k != 1 || x[k] == y[k]),
                  "D=%d zero %d worker %d: %s %zu bytes, predicted %zu", D, zero, w, kinds[k], x[k],
                  y[k]);
    }
    char report[4096];
    pt_pipeline_memory_report(p, got, want, rss, report, sizeof report);
    printf("1 stage x %d replicas, zero %d:\n%s", D, zero, report);
    pt_pipeline_destroy(p);
    return 0;
}

int main(void)
{
    pt_memory_use one[1], z[3][4];
    if (run(1, 0, one))
        return 1;
    for (int zero = 0; zero <= 2; zero++)
        if (run(4, zero, z[zero]))
            return 1;
    size_t quarter = one[0].moments / 4;
    for (int w = 0; w < 4; w++) {
        CHECK(z[0][w].moments == one[0].moments, "zero 0 worker %d: moments %zu, D=1 %zu", w,
              z[0][w].moments, one[0].moments);
        for (int zero = 1; zero <= 2; zero++)
            CHECK(z[zero][w].moments <= quarter + 2 * 64 && z[zero][w].moments + 2 * 64 >= quarter,
                  "zero %d worker %d: moments %zu bytes, expected 1/4 of %zu = %zu", zero, w,
                  z[zero][w].moments, one[0].moments, quarter);
        size_t block = largest_block(), slack = 64 * 64; /* each tensor's alignment */
        CHECK(z[2][w].grads >= one[0].grads / 4 - slack &&
                  z[2][w].grads <= one[0].grads / 4 + 2 * block + slack &&
                  z[2][w].grads < z[1][w].grads,
              "zero 2 worker %d: gradients %zu bytes, expected a quarter of %zu plus at most "
              "two blocks' of %zu (zero 1: %zu)",
              w, z[2][w].grads, one[0].grads, block, z[1][w].grads);
        CHECK(z[2][w].comm <= 2 * z[1][w].comm && z[1][w].comm <= z[0][0].comm,
              "worker %d: receive buffers zero 2 %zu (two sets), zero 1 %zu, unsharded root %zu", w,
              z[2][w].comm, z[1][w].comm, z[0][0].comm);
    }
    printf("moments per worker: D=1 %zu bytes; D=4 zero 0 %zu, zero 1 %zu, zero 2 %zu\n",
           one[0].moments, z[0][0].moments, z[1][0].moments, z[2][0].moments);
    printf("gradients per worker: D=1 %zu bytes; D=4 zero 1 %zu, zero 2 %zu (largest block %zu)\n",
           one[0].grads, z[1][0].grads, z[2][0].grads, largest_block());

    /* bf16: 2 bytes of copy for every float, 4 of master for what stays */
    precision = PT_PRECISION_BF16;
    pt_memory_use b0[4], b1[4];
    if (run(4, 0, b0) || run(4, 1, b1))
        return 1;
    pt_model_config mc = model();
    pt_model *m;
    REQUIRE(pt_model_create(&mc, &m) == PT_OK, "%s", pt_last_error());
    double shards = 0, whole = 0;
    for (int i = 0; i < pt_model_n_params(m); i++)
        *(pt_model_master_shards(m, i) ? &shards : &whole) += (double)pt_model_param(m, i)->numel;
    pt_model_destroy(m);
    /* the shards cut the span, tensors kept whole or not: the replicas'
     * sharded floats add up to one stage's */
    double copy = (double)b0[0].params / 3, sum = 0; /* 6 bytes a float at zero 0 */
    double want = 4 * (copy + 4 * whole) + 4 * shards;
    for (int w = 0; w < 4; w++) {
        sum += (double)b1[w].params;
        CHECK(b1[w].params < 0.65 * b0[w].params,
              "bf16 zero 1 worker %d: parameters %zu bytes, zero 0's %zu", w, b1[w].params,
              b0[w].params);
    }
    CHECK(fabs(sum - want) <= 0.01 * want,
          "bf16 zero 1: parameters %.0f bytes over the 4 workers, expected about %.0f (each the "
          "bf16 copy %.0f and the float master of %.0f whole floats, and %.0f sharded floats "
          "in all)",
          sum, want, copy, whole, shards);
    printf("bf16 parameters per worker at D=4: zero 0 %zu bytes, zero 1 %zu (%.2fx)\n",
           b0[0].params, b1[0].params, (double)b1[0].params / (double)b0[0].params);
    return failures != 0;
}
