/* nonfinite_check.h: a step whose gradient is not finite changes nothing,
 * on every worker. Shared by test_nonfinite_step (one worker, two stages on
 * threads) and test_mpi_nonfinite_step (two stages over MPI).
 *
 * An mlp trains a good step, saves a checkpoint (A), then meets a batch
 * with one NaN input in its second micro-batch: the step is skipped (every
 * parameter and moment is bit for bit what it was, the pipeline says so and
 * names the stage whose gradient went non-finite: the first, whose weight
 * gradient multiplies the NaN input; the ReLU after it passes 0 on, so no
 * later stage sees it), a checkpoint saved now (B) is byte-identical to A,
 * and the next good step trains again (the parameters move). */
#ifndef PT_TESTS_NONFINITE_CHECK_H
#define PT_TESTS_NONFINITE_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pipeline_params.h"
#include "tensor/rng.h"
#include "train/stage_checkpoint.h"

#define NF_M   4
#define NF_MBS 2

/* The precision nf_check trains in (bf16 must skip as fp32 does). */
static pt_precision nf_precision = PT_PRECISION_FP32;

static pt_model_config nf_model(void)
{
    int widths[] = {8, 16, 16, 4};
    pt_model_config c = pt_model_config_mlp(4, widths);
    c.seed = 3;
    c.precision = nf_precision;
    return c;
}

static void nf_batch(int seed, float *x, int *y)
{
    pt_rng r;
    pt_rng_seed(&r, (uint64_t)seed);
    pt_rng_fill_normal(&r, x, NF_M * NF_MBS * 8, 1.0f);
    for (int i = 0; i < NF_M * NF_MBS; i++)
        y[i] = (int)pt_rng_below(&r, 4);
}

static int nf_same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int x = fgetc(fa), y = fgetc(fb);
        same = x == y;
        if (x == EOF || y == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* stages on `transport`; dir: where the checkpoints go (shared by the ranks) */
static int nf_check(int stages, pt_pipeline_transport transport, const char *dir)
{
    pt_model_config mc = nf_model();
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = stages, pc.microbatches = NF_M, pc.micro_batch_size = NF_MBS;
    pc.blas_threads = 1, pc.transport = transport;
    pt_pipeline *p;
    REQUIRE(pt_pipeline_create(&mc, &oc, &pc, &p) == PT_OK, "pipeline: %s", pt_last_error());
    pt_model *before, *after;
    pt_optimizer *ob, *oa;
    REQUIRE(pt_model_create(&mc, &before) == PT_OK && pt_model_create(&mc, &after) == PT_OK &&
                pt_optimizer_create(before, &oc, &ob) == PT_OK &&
                pt_optimizer_create(after, &oc, &oa) == PT_OK,
            "models: %s", pt_last_error());
    float x[NF_M * NF_MBS * 8];
    int y[NF_M * NF_MBS];
    pt_microbatch b = {.batch = NF_M * NF_MBS, .inputs = x, .targets = y};
    nf_batch(1, x, y);
    REQUIRE(pt_pipeline_train_step(p, &b, 0, 1e-2f, NULL) == PT_OK, "step 0: %s", pt_last_error());
    REQUIRE(!pt_pipeline_last_step_skipped(p, NULL, NULL), "a good step was skipped");
    pt_train_state st = {.step = 1};
    pt_rng_seed(&st.data_rng, 9);
    char a_path[512], b_path[512];
    snprintf(a_path, sizeof a_path, "%s/a.safetensors", dir);
    snprintf(b_path, sizeof b_path, "%s/b.safetensors", dir);
    REQUIRE(pt_stage_checkpoint_save(p, a_path, &st, NULL) == PT_OK, "save A: %s", pt_last_error());
    unsigned char held[64];
    pipeline_copy_out(p, before, ob, held);

    nf_batch(2, x, y);
    x[1 * NF_MBS * 8 + 3] = NAN; /* micro-batch 1 */
    float loss;
    REQUIRE(pt_pipeline_train_step(p, &b, 1, 1e-2f, &loss) == PT_OK, "the bad step failed: %s",
            pt_last_error());
    double norm;
    int stage;
    REQUIRE(pt_pipeline_last_step_skipped(p, &norm, &stage) && !isfinite(norm),
            "a NaN input was not caught (norm %g)", norm);
    CHECK(stage == 0, "the first non-finite stage is %d, expected 0", stage);
    pipeline_copy_out(p, after, oa, NULL);
    for (int i = 0; i < pt_model_n_params(before); i++) {
        const pt_param *q = pt_model_param(before, i), *r = pt_model_param(after, i);
        if (!held[i])
            continue;
        CHECK(!memcmp(q->data, r->data, q->numel * sizeof(float)), "%s changed", q->name);
        for (int which = 0; which < 2; which++)
            CHECK(!memcmp(pt_optimizer_state(ob, before, i, which),
                          pt_optimizer_state(oa, after, i, which), q->numel * sizeof(float)),
                  "a moment of %s changed", q->name);
    }
    REQUIRE(pt_stage_checkpoint_save(p, b_path, &st, NULL) == PT_OK, "save B: %s", pt_last_error());
    if (pt_pipeline_is_main(p))
        CHECK(nf_same_file(a_path, b_path), "the checkpoint after the skipped step differs");

    nf_batch(3, x, y);
    REQUIRE(pt_pipeline_train_step(p, &b, 1, 1e-2f, NULL) == PT_OK &&
                !pt_pipeline_last_step_skipped(p, NULL, NULL),
            "the step after: %s", pt_last_error());
    pipeline_copy_out(p, after, oa, NULL);
    int moved = 0;
    for (int i = 0; i < pt_model_n_params(before); i++) {
        const pt_param *q = pt_model_param(before, i), *r = pt_model_param(after, i);
        moved |= held[i] && memcmp(q->data, r->data, q->numel * sizeof(float));
    }
    CHECK(moved, "the good step after the skipped one changed nothing");
    if (pt_pipeline_is_main(p))
        printf("%s, %d stage%s on %s: the step with a NaN input was skipped everywhere (norm "
               "%g, stage %d first), the checkpoint after it equals the one before\n",
               pt_precision_name(nf_precision), stages, stages == 1 ? "" : "s",
               pt_pipeline_transport_name(p), norm, stage);
    pt_optimizer_destroy(ob);
    pt_optimizer_destroy(oa);
    pt_model_destroy(before);
    pt_model_destroy(after);
    pt_pipeline_destroy(p);
    return 0;
}

#endif
