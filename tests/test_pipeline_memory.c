/* test_pipeline_memory: the measured peak of live activation bytes per worker
 * behaves as the schedules promise.
 * - gpipe: every forward runs before any backward, so the peak grows with M;
 * - 1f1b: worker r holds at most P - r micro-batches, so the peak is the same
 *   for M = 4, 8 and 16 (P = 3), and worker 0 holds more than the last worker;
 * - activation checkpointing keeps only each chunk's input, so the peak drops
 *   under both schedules (except on 1f1b's last worker, which never holds
 *   more than the one micro-batch it is working on). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "runtime/optimizer.h"
#include "tensor/rng.h"

#include "check.h"

#define P   3
#define MBS 2

/* Peak bytes per worker after one step of `schedule` with M micro-batches. */
static int peaks(const char *schedule, int M, int ckpt, size_t *peak)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 4, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 32;
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    int balance[P] = {2, 2, 2};
    pc.stages = P, pc.microbatches = M, pc.micro_batch_size = MBS, pc.schedule = schedule;
    pc.balance = balance, pc.n_balance = P, pc.checkpoint_activations = ckpt;
    pc.blas_threads = 1;
    pt_pipeline *p;
    if (pt_pipeline_create(&c, &oc, &pc, &p))
        return printf("pipeline: %s\n", pt_last_error()), 1;
    int rows = M * MBS * c.seq_len;
    int *tok = malloc(sizeof(int) * (size_t)(rows + 1));
    pt_rng r;
    pt_rng_seed(&r, 3);
    for (int i = 0; i <= rows; i++)
        tok[i] = (int)pt_rng_below(&r, (uint64_t)c.vocab);
    pt_microbatch b = {.batch = M * MBS, .tokens = tok, .targets = tok + 1};
    float loss;
    int rc = pt_pipeline_train_step(p, &b, 0, 1e-3f, &loss);
    if (rc != PT_OK)
        printf("train_step: %s\n", pt_last_error());
    for (int w = 0; w < P; w++)
        peak[w] = pt_pipeline_peak_activation_bytes(p, w);
    printf("%-6s M=%-2d checkpoint %d: peak bytes per worker %zu %zu %zu\n", schedule, M, ckpt,
           peak[0], peak[1], peak[2]);
    free(tok);
    pt_pipeline_destroy(p);
    return rc != PT_OK;
}

int main(void)
{
    size_t g4[P], g8[P], g16[P], f4[P], f8[P], f16[P], gc8[P], fc8[P];
    REQUIRE(!peaks("gpipe", 4, 0, g4) && !peaks("gpipe", 8, 0, g8) && !peaks("gpipe", 16, 0, g16),
            "gpipe runs");
    REQUIRE(!peaks("1f1b", 4, 0, f4) && !peaks("1f1b", 8, 0, f8) && !peaks("1f1b", 16, 0, f16),
            "1f1b runs");
    REQUIRE(!peaks("gpipe", 8, 1, gc8) && !peaks("1f1b", 8, 1, fc8), "checkpointed runs");
    for (int w = 0; w < P; w++) {
        REQUIRE(g4[w] < g8[w] && g8[w] < g16[w],
                "gpipe worker %d: peak does not grow with M (%zu, %zu, %zu)", w, g4[w], g8[w],
                g16[w]);
        REQUIRE(g16[w] > 3 * g4[w], "gpipe worker %d: M x 4 grew the peak only from %zu to %zu", w,
                g4[w], g16[w]);
        REQUIRE(f4[w] == f8[w] && f8[w] == f16[w],
                "1f1b worker %d: peak changes with M (%zu, %zu, %zu)", w, f4[w], f8[w], f16[w]);
        REQUIRE(f16[w] < g16[w], "worker %d: 1f1b peak %zu not below gpipe's %zu", w, f16[w],
                g16[w]);
        /* the last 1f1b worker holds one micro-batch at a time: nothing to save */
        REQUIRE(gc8[w] < g8[w] && (w == P - 1 ? fc8[w] <= f8[w] : fc8[w] < f8[w]),
                "worker %d: checkpointing did not lower the peak (gpipe %zu -> %zu, 1f1b %zu -> "
                "%zu)",
                w, g8[w], gc8[w], f8[w], fc8[w]);
    }
    REQUIRE(f8[0] > f8[P - 1], "1f1b: worker 0 (%zu) should hold more than the last (%zu)", f8[0],
            f8[P - 1]);
    REQUIRE(gc8[0] * 2 < g8[0], "gpipe worker 0: checkpointing saved too little (%zu -> %zu)",
            g8[0], gc8[0]);
    printf("ok\n");
    return 0;
}
