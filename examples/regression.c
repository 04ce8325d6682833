/* regression.c: GPipe's two-stage regression example as a pipetrain program.
 *
 *   Linear(1024, 2048) -> ReLU -> Linear(2048, 1024), mean-squared error
 *
 * trained on synthetic data (y = x A + noise, seeded) on two pipeline
 * stages, the first holding Linear and ReLU, the second Linear and the loss
 * (balance 2,1 counts the layers, the loss joining the last). The same run
 * on one stage must give the same losses bit for bit: a pipeline only
 * changes where the work runs. Only include/pipetrain.h is used.
 *
 *   regression [STEPS]        (default 20)
 * Exits 0 when the loss falls and both runs agree. */
#include <pipetrain.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IN = 1024, OUT = 1024, MICRO = 4, MBS = 4, BATCH = MICRO * MBS };

static int fail(const char *what)
{
    fprintf(stderr, "regression: %s: %s\n", what, pt_last_error());
    return 1;
}

/* Trains `steps` steps on `stages` stages; losses[s] is step s's mean. */
static int train(int stages, long steps, float *losses)
{
    pt_model_config model;
    if (pt_model_config_spec("linear 1024 2048; relu; linear 2048 1024; mse", &model) != PT_OK)
        return fail("spec");
    pt_optim_config optim = pt_optim_config_default(PT_OPTIM_ADAMW);
    optim.lr = 1e-4f;
    pt_pipeline_config pipe = pt_pipeline_config_default();
    int balance[] = {2, 1};
    pipe.stages = stages;
    pipe.microbatches = MICRO;
    pipe.micro_batch_size = MBS;
    pipe.balance = stages == 2 ? balance : NULL;
    pipe.n_balance = stages == 2 ? 2 : 0;
    pipe.blas_threads = 1; /* one thread per worker: the sums run in one order */
    pipe.schedule = "gpipe";
    pt_pipeline *p;
    if (pt_pipeline_create(&model, &optim, &pipe, &p) != PT_OK)
        return fail("pipeline");
    pt_regression *data;
    if (pt_regression_create(IN, OUT, 0.01f, 7, &data) != PT_OK)
        return fail("data");
    float *x = malloc(sizeof(float) * BATCH * IN), *y = malloc(sizeof(float) * BATCH * OUT);
    int rc = x && y ? 0 : 1;
    for (long s = 0; rc == 0 && s < steps; s++) {
        pt_regression_batch(data, 0, (uint64_t)(s * BATCH), BATCH, x, y);
        pt_microbatch batch = {.batch = BATCH, .inputs = x, .target_values = y};
        if (pt_pipeline_train_step(p, &batch, s, optim.lr, &losses[s]) != PT_OK)
            rc = fail("train step");
    }
    free(x), free(y);
    pt_regression_destroy(data);
    pt_pipeline_destroy(p);
    return rc;
}

int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 20;
    if (steps < 2)
        return fprintf(stderr, "usage: regression [STEPS >= 2]\n"), 2;
    float *one = calloc((size_t)steps, sizeof(float)), *two = calloc((size_t)steps, sizeof(float));
    if (!one || !two || train(2, steps, two) || train(1, steps, one))
        return 1;
    for (long s = 0; s < steps; s++)
        printf("step %3ld  loss %.6f  (one stage %.6f)\n", s + 1, two[s], one[s]);
    int same = !memcmp(one, two, sizeof(float) * (size_t)steps);
    int falls = two[steps - 1] < two[0];
    printf("two stages %s one stage bit for bit; the loss %s\n", same ? "equal" : "DIFFER from",
           falls ? "falls" : "DOES NOT fall");
    free(one), free(two);
    return same && falls ? 0 : 1;
}
