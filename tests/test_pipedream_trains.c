/* test_pipedream_trains: PipeDream's asynchronous 1F1B (weight stashing, an
 * update after every backward, no flush) trains a small gpt on real text.
 * On the fortunes corpus (byte level), 3 workers, 4 micro-batches per step:
 * over 40 steps the training loss falls well below ln(256) and the
 * validation loss falls too; the tied embedding and LM head agree after every
 * step. Skipped (77) where the corpus is not installed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/text_data.h"
#include "pipetrain.h"
#include "runtime/optimizer.h"

#include "check.h"

#define CORPUS "/usr/share/games/fortunes"
#define STEPS  40
#define M      4
#define MBS    4

/* The two tied copies, on the first and the last stage, read back. */
static int tied_equal(const pt_pipeline *p, const pt_model_config *c)
{
    size_t n = (size_t)c->vocab * (size_t)c->n_embd;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    int same = a && b && pt_pipeline_read_param(p, "transformer.wte.weight", -1, a) == PT_OK &&
               pt_pipeline_read_param(p, "lm_head.weight", -1, b) == PT_OK &&
               !memcmp(a, b, n * sizeof(float));
    free(a), free(b);
    return same;
}

int main(void)
{
    struct stat st;
    if (stat(CORPUS, &st) != 0) {
        printf("skip: the fortunes corpus (%s) is not installed\n", CORPUS);
        return 77;
    }
    const char *paths[] = {CORPUS};
    pt_token_data data;
    REQUIRE(pt_text_data_load(paths, 1, 0.1, &data) == PT_OK, "load: %s", pt_last_error());

    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 2, c.n_head = 2, c.n_embd = 32, c.seq_len = 32, c.vocab = 256, c.seed = 3;
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    oc.lr = 3e-3f;
    pt_pipeline_config pc = pt_pipeline_config_default();
    int balance[3] = {1, 2, 1};
    pc.stages = 3, pc.microbatches = M, pc.micro_batch_size = MBS, pc.schedule = "pipedream";
    pc.balance = balance, pc.n_balance = 3, pc.blas_threads = 1;
    pt_pipeline *p;
    REQUIRE(pt_pipeline_create(&c, &oc, &pc, &p) == PT_OK, "pipeline: %s", pt_last_error());

    int n = M * MBS * c.seq_len;
    int *in = malloc(sizeof(int) * (size_t)n), *tg = malloc(sizeof(int) * (size_t)n);
    int *vin = malloc(sizeof(int) * (size_t)n), *vtg = malloc(sizeof(int) * (size_t)n);
    pt_batch_sampler s;
    REQUIRE(pt_batch_sampler_init(&s, data.train, data.n_train, M * MBS, c.seq_len, 1) == PT_OK,
            "sampler: %s", pt_last_error());
    REQUIRE(pt_eval_batch(data.val, data.n_val, M * MBS, c.seq_len, 0, vin, vtg) == PT_OK,
            "validation batch: %s", pt_last_error());
    pt_microbatch val = {.batch = M * MBS, .tokens = vin, .targets = vtg};
    float val0, val1, loss[STEPS];
    REQUIRE(pt_pipeline_eval(p, &val, &val0) == PT_OK, "eval: %s", pt_last_error());
    for (int step = 0; step < STEPS; step++) {
        pt_batch_next(&s, in, tg);
        pt_microbatch b = {.batch = M * MBS, .tokens = in, .targets = tg};
        REQUIRE(pt_pipeline_train_step(p, &b, step, oc.lr, &loss[step]) == PT_OK, "step %d: %s",
                step, pt_last_error());
        REQUIRE(isfinite(loss[step]), "step %d: loss %f", step, loss[step]);
        REQUIRE(tied_equal(p, &c), "step %d: the tied copies differ", step);
    }
    REQUIRE(pt_pipeline_eval(p, &val, &val1) == PT_OK, "eval: %s", pt_last_error());
    double first = (loss[0] + loss[1] + loss[2]) / 3, last = 0;
    for (int i = STEPS - 5; i < STEPS; i++)
        last += loss[i] / 5;
    printf("pipedream: train loss %.3f -> %.3f (ln 256 = %.3f), validation %.3f -> %.3f\n", first,
           last, log(256.0), val0, val1);
    REQUIRE(fabs(val0 - log(256.0)) < 0.3, "initial validation loss %.3f is not near ln 256", val0);
    REQUIRE(last < first - 1.0, "the training loss fell too little: %.3f -> %.3f", first, last);
    REQUIRE(val1 < val0 - 0.8, "the validation loss fell too little: %.3f -> %.3f", val0, val1);

    pt_pipeline_destroy(p);
    pt_token_data_free(&data);
    free(in), free(tg), free(vin), free(vtg);
    printf("ok\n");
    return 0;
}
