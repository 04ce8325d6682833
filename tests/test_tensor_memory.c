/* test_tensor_memory: GPT-2 small's shape (12 layers, 768 channels, 12
 * heads, a vocabulary of 50304, M = 4 micro-batches of one sample of 16
 * tokens) at 2 stages x 2 tensor slices (4 ranks, threads), one AdamW step:
 *   - every rank's allocated bytes (the memory report's measured figures)
 *     are at most 0.35x of what one process (P = T = D = 1) holds, as the
 *     planner predicts it from the whole model's description (the same
 *     prediction test_pipeline_memory checks against an allocation);
 *   - the report's prediction for each rank is within 10% of what the rank
 *     allocated, kind by kind;
 *   - the two slices of a stage hold the same bytes;
 * and prints the report. Then with sequence parallelism (GPT 4 layers /
 * 256 / 8 heads, context 256, the same layout): what a micro-batch in
 * flight keeps for the transformer blocks at most 0.5x of what it keeps
 * without, and every rank's activations (its records, boundary buffers and
 * the stage's one workspace for whole-sequence tensors) at most 0.75x of
 * the same run's without, as predicted within 10%.
 * ctest: slow (the 160M parameters' seeded initialization takes seconds) */
#include <stdio.h>
#include <stdlib.h>

#include "pipetrain.h"
#include "model/model.h"
#include "tensor/rng.h"

#include "check.h"

#define M     4
#define SEQ   16
#define RANKS 4

static pt_model_config gpt_small(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 12, c.n_head = 12, c.n_embd = 768, c.seq_len = SEQ, c.vocab = 50304, c.seed = 5;
    return c;
}

static int near(size_t got, size_t want)
{
    double g = (double)got, w = (double)want;
    return (g == 0 && w == 0) || (g <= 1.1 * w + 4096 && g >= 0.9 * w - 4096);
}

/* What one process holds for the whole model (1 stage, AdamW, 1f1b). */
static int one_process(size_t *total)
{
    pt_model_config c = gpt_small();
    pt_model *desc;
    REQUIRE(pt_model_describe(&c, &desc) == PT_OK, "describe: %s", pt_last_error());
    pt_schedule_config sc = pt_schedule_config_default();
    sc.stages = 1, sc.microbatches = M;
    pt_schedule *s;
    int rc = pt_schedule_create(&sc, &s);
    int balance[1] = {pt_model_n_blocks(desc)};
    pt_memory_use u;
    if (rc == PT_OK) {
        rc = pt_schedule_predict_memory(s, desc, balance, 1, 0, 2, &u);
        pt_schedule_destroy(s);
    }
    pt_model_destroy(desc);
    REQUIRE(rc == PT_OK, "one process's prediction: %s", pt_last_error());
    *total = pt_memory_total(&u);
    return 0;
}

/* One step of GPT 4/256/8, context 256, at P = 2, T = 2: each rank's
 * measured and predicted memory, with or without sequence parallelism. */
static pt_model_config gpt_long(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 4, c.n_head = 8, c.n_embd = 256, c.seq_len = 256, c.vocab = 256, c.seed = 5;
    return c;
}

/* The bytes a micro-batch of one sample keeps for the transformer blocks
 * of slice 0 of 2. */
static size_t block_record(int sequence)
{
    pt_model_config c = gpt_long();
    pt_model *m;
    if (pt_model_create_slice(&c, NULL, 1, 2, 0, sequence, &m) != PT_OK)
        return 0;
    size_t bytes = pt_model_activation_bytes(m, 1, c.n_layer, 1);
    pt_model_destroy(m);
    return bytes;
}

static int sequence_run(int sequence, pt_memory_use *got, pt_memory_use *want)
{
    pt_model_config c = gpt_long();
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = 2, pc.tensor = 2, pc.microbatches = M, pc.micro_batch_size = 1;
    pc.sequence_parallel = sequence;
    pc.blas_threads = 1, pc.transport = PT_PIPELINE_THREADS;
    int halves[2] = {3, 3};
    pc.balance = halves, pc.n_balance = 2;
    pt_pipeline *p;
    REQUIRE(pt_pipeline_create(&c, &oc, &pc, &p) == PT_OK, "sequence %d: %s", sequence,
            pt_last_error());
    int tokens[M * 256 + 1];
    for (int i = 0; i <= M * 256; i++)
        tokens[i] = (i * 7 + 3) % c.vocab;
    pt_microbatch mb = {.batch = M, .tokens = tokens, .targets = tokens + 1};
    size_t rss[RANKS];
    int rc = pt_pipeline_train_step(p, &mb, 0, 1e-4f, NULL);
    if (rc == PT_OK)
        rc = pt_pipeline_memory(p, got, want, rss);
    pt_pipeline_destroy(p);
    REQUIRE(rc == PT_OK, "sequence %d step: %s", sequence, pt_last_error());
    return 0;
}

static void check_sequence(void)
{
    size_t record_off = block_record(0), record_on = block_record(1);
    CHECK(record_on > 0 && record_on <= 0.5 * (double)record_off,
          "a micro-batch keeps %zu bytes for the blocks with sequence parallelism, %zu without",
          record_on, record_off);
    printf("a micro-batch's blocks: %.2f MiB with sequence parallelism, %.2f without\n",
           record_on / 1048576.0, record_off / 1048576.0);
    pt_memory_use off[RANKS], on[RANKS], want[RANKS], ignored[RANKS];
    if (sequence_run(0, off, ignored) || sequence_run(1, on, want))
        return;
    for (int r = 0; r < RANKS; r++) {
        double ratio = (double)on[r].activations / (double)off[r].activations;
        CHECK(ratio <= 0.75,
              "rank %d: activations %zu bytes with sequence parallelism, %zu without", r,
              on[r].activations, off[r].activations);
        CHECK(near(on[r].activations, want[r].activations),
              "rank %d: activations %zu bytes with sequence parallelism, predicted %zu", r,
              on[r].activations, want[r].activations);
        printf("rank %d: activations %.1f MiB with sequence parallelism, %.1f without (%.2fx)\n", r,
               on[r].activations / 1048576.0, off[r].activations / 1048576.0, ratio);
    }
}

int main(void)
{
    size_t whole;
    if (one_process(&whole))
        return 1;
    pt_model_config c = gpt_small();
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = 2, pc.tensor = 2, pc.microbatches = M, pc.micro_batch_size = 1;
    pc.blas_threads = 1, pc.transport = PT_PIPELINE_THREADS;
    /* the embedding, blocks and head cut in halves, not by the profiled
     * costs, which move with the machine's load */
    int layers = c.n_layer + 2, halves[2] = {layers / 2, layers - layers / 2};
    pc.balance = halves, pc.n_balance = 2;
    pt_pipeline *p;
    REQUIRE(pt_pipeline_create(&c, &oc, &pc, &p) == PT_OK, "P=2 T=2: %s", pt_last_error());
    REQUIRE(pt_pipeline_ranks(p) == RANKS, "2 stages x 2 slices: %d ranks", pt_pipeline_ranks(p));
    int *tokens = malloc(sizeof(int) * (M * SEQ + 1));
    REQUIRE(tokens, "allocation");
    pt_rng g;
    pt_rng_seed(&g, 9);
    for (int i = 0; i <= M * SEQ; i++)
        tokens[i] = (int)pt_rng_below(&g, (uint64_t)c.vocab);
    pt_microbatch mb = {.batch = M, .tokens = tokens, .targets = tokens + 1};
    pt_memory_use got[RANKS], want[RANKS];
    size_t rss[RANKS];
    int rc = pt_pipeline_train_step(p, &mb, 0, 1e-4f, NULL);
    if (rc == PT_OK)
        rc = pt_pipeline_memory(p, got, want, rss);
    free(tokens);
    if (rc != PT_OK) {
        pt_pipeline_destroy(p);
        REQUIRE(0, "P=2 T=2 step: %s", pt_last_error());
    }
    const char *kinds[] = {"params", "grads", "moments", "stash", "activations", "comm"};
    for (int r = 0; r < RANKS; r++) {
        size_t held = pt_memory_total(&got[r]);
        CHECK(held <= 0.35 * (double)whole, "rank %d holds %zu bytes, %.3fx of one process's %zu",
              r, held, (double)held / (double)whole, whole);
        const size_t *x = &got[r].params, *y = &want[r].params;
        for (int k = 0; k < 6; k++)
            CHECK(near(x[k], y[k]), "rank %d: %s %zu bytes, predicted %zu", r, kinds[k], x[k],
                  y[k]);
        CHECK(held == pt_memory_total(&got[r ^ 1]), "slices %d and %d of a stage: %zu and %zu", r,
              r ^ 1, held, pt_memory_total(&got[r ^ 1]));
        printf("rank %d: %zu bytes, %.3fx of one process's %zu\n", r, held,
               (double)held / (double)whole, whole);
    }
    char report[4096];
    pt_pipeline_memory_report(p, got, want, rss, report, sizeof report);
    printf("%s", report);
    pt_pipeline_destroy(p);
    check_sequence();
    return failures != 0;
}
