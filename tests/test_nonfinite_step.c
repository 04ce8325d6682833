/* test_nonfinite_step: a step whose gradient is not finite is skipped on
 * every worker and changes nothing (tests/nonfinite_check.h), with one
 * worker and with two stages on threads, in fp32 and in bf16; and the trainer, fed a learning
 * rate that makes the run diverge, reports the skipped steps on its metrics
 * log and ends with an error after max_skipped_steps in a row, leaving the
 * last checkpoint it saved finite and loadable; and generating from a gpt
 * whose parameters hold a NaN is an error, not text of NUL bytes. */
#include <unistd.h>

#include "nonfinite_check.h"

/* pt_train on the digits with SGD at a learning rate of 1e30. */
static int check_trainer(const char *dir)
{
    const char *data = getenv("PT_TEST_DATA");
    char digits[1024], ck[1024], log[1024];
    snprintf(digits, sizeof digits, "%s/../../data/digits.csv.gz", data ? data : "tests/data");
    if (access(digits, R_OK) != 0) {
        printf("skipped the trainer check: %s is missing\n", digits);
        return 0;
    }
    snprintf(ck, sizeof ck, "%s/run.safetensors", dir);
    snprintf(log, sizeof log, "%s/run.jsonl", dir);
    int widths[] = {64, 32, 10};
    const char *paths[] = {digits};
    for (int stages = 1; stages <= 2; stages++) {
        pt_train_config c = pt_train_config_default();
        c.model = pt_model_config_mlp(3, widths);
        c.optim = pt_optim_config_default(PT_OPTIM_SGD);
        c.optim.lr = 1e30f, c.optim.grad_clip = 0;
        c.batch = 16, c.microbatches = 2, c.steps = 20, c.save = ck, c.save_every = 1;
        c.metrics = log, c.data = paths, c.n_data = 1, c.max_skipped_steps = 2;
        c.pipeline.stages = stages;
        c.pipeline.transport = PT_PIPELINE_THREADS;
        pt_train_result r;
        int rc = pt_train(&c, &r);
        REQUIRE(rc != PT_OK && strstr(pt_last_error(), "2 steps in a row"),
                "a diverging run ended with %d: %s", rc, pt_last_error());
        FILE *f = fopen(log, "r");
        char line[4096];
        int skipped = 0;
        while (f && fgets(line, sizeof line, f))
            skipped += strstr(line, "\"skipped\":1") != NULL;
        if (f)
            fclose(f);
        CHECK(skipped == 2, "%d skipped steps on the metrics log, expected 2", skipped);
        pt_model *m;
        REQUIRE(pt_model_create(&c.model, &m) == PT_OK &&
                    pt_checkpoint_load(ck, m, NULL, NULL) == PT_OK,
                "the last checkpoint does not load: %s", pt_last_error());
        for (int i = 0; i < pt_model_n_params(m); i++) {
            const pt_param *q = pt_model_param(m, i);
            for (size_t k = 0; k < q->numel; k++)
                REQUIRE(isfinite(q->data[k]), "the checkpoint holds %s[%zu] = %g", q->name, k,
                        q->data[k]);
        }
        pt_model_destroy(m);
        printf("trainer, %d stage%s: %s\n", stages, stages == 1 ? "" : "s", pt_last_error());
    }
    return 0;
}

/* A gpt checkpoint with one NaN weight, loaded for generation. */
static int check_generate(const char *dir)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 1, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 256;
    pt_model *m;
    REQUIRE(pt_model_create(&c, &m) == PT_OK, "model: %s", pt_last_error());
    pt_model_param(m, 2)->data[0] = NAN;
    char path[512];
    snprintf(path, sizeof path, "%s/nan.safetensors", dir);
    REQUIRE(pt_checkpoint_save(path, m, NULL, NULL) == PT_OK, "save: %s", pt_last_error());
    pt_model_destroy(m);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.transport = PT_PIPELINE_THREADS;
    pt_pipeline *p;
    REQUIRE(pt_pipeline_create(&c, NULL, &pc, &p) == PT_OK &&
                pt_stage_checkpoint_load(p, path, NULL, NULL) == PT_OK,
            "load: %s", pt_last_error());
    int prompt[2] = {'T', 'h'}, out[4];
    CHECK(pt_generate(p, prompt, 2, 4, 0.8f, 1, out, NULL, NULL) == PT_EFORMAT &&
              strstr(pt_last_error(), "not finite"),
          "generation from a NaN weight: %s", pt_last_error());
    pt_pipeline_destroy(p);
    return 0;
}

int main(void)
{
    char dir[] = "/tmp/pt_nonfinite_XXXXXX";
    REQUIRE(mkdtemp(dir), "mkdtemp");
    int rc = nf_check(1, PT_PIPELINE_THREADS, dir) || nf_check(2, PT_PIPELINE_THREADS, dir);
    nf_precision = PT_PRECISION_BF16;
    rc = rc || nf_check(1, PT_PIPELINE_THREADS, dir) || nf_check(2, PT_PIPELINE_THREADS, dir);
    nf_precision = PT_PRECISION_FP32;
    return check_done(dir, rc || check_trainer(dir) || check_generate(dir));
}
