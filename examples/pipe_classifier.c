/* pipe_classifier.c: PyTorch's Pipe example as a pipetrain program.
 *
 *   Pipe(nn.Sequential(Linear(512, 1024), ReLU, Linear(1024, 10)),
 *        chunks=4, balance=[1, 1])  with cross-entropy
 *
 * balance counts the user's modules. Three modules do not split as [1, 1],
 * so, as in PyTorch, the first two are one module: a parenthesised group
 * (nn.Sequential(nn.Sequential(Linear, ReLU), Linear)), its parameters
 * named 0.0.weight, 0.0.bias, 1.weight, 1.bias. The loss holds no weights
 * and joins the last module. chunks=4: four micro-batches per step.
 * The data: 512 normal features, the label the largest of ten fixed random
 * projections of them (synthetic, seeded). Trains on two stages, then on
 * one, and checks that the losses agree bit for bit.
 *
 *   pipe_classifier [STEPS]   (default 60)
 * Exits 0 when the loss falls and both runs agree. */
#include <pipetrain.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IN = 512, CLASSES = 10, CHUNKS = 4, MBS = 8, BATCH = CHUNKS * MBS };

static const char *spec = "input 512\n"
                          "(linear 512 1024; relu)  # module 0\n"
                          "linear 1024 10           # module 1\n"
                          "cross_entropy\n";

/* A batch of samples first..: x (BATCH, IN), labels the argmax of y. */
static void draw(const pt_regression *data, uint64_t first, float *x, float *y, int *labels)
{
    pt_regression_batch(data, 0, first, BATCH, x, y);
    for (int b = 0; b < BATCH; b++) {
        labels[b] = 0;
        for (int k = 1; k < CLASSES; k++)
            if (y[b * CLASSES + k] > y[b * CLASSES + labels[b]])
                labels[b] = k;
    }
}

static int train(int stages, long steps, float *losses)
{
    pt_model_config model;
    pt_pipeline_config pipe = pt_pipeline_config_default();
    pt_optim_config optim = pt_optim_config_default(PT_OPTIM_ADAMW);
    optim.lr = 1e-3f;
    int balance[] = {1, 1};
    pipe.stages = stages;
    pipe.microbatches = CHUNKS;
    pipe.micro_batch_size = MBS;
    pipe.balance = stages == 2 ? balance : NULL;
    pipe.n_balance = stages == 2 ? 2 : 0;
    pipe.blas_threads = 1;
    pt_pipeline *p = NULL;
    pt_regression *data = NULL;
    float *x = malloc(sizeof(float) * BATCH * IN), *y = malloc(sizeof(float) * BATCH * CLASSES);
    int labels[BATCH], rc = pt_model_config_spec(spec, &model);
    if (rc == PT_OK)
        rc = pt_pipeline_create(&model, &optim, &pipe, &p);
    if (rc == PT_OK)
        rc = pt_regression_create(IN, CLASSES, 0.0f, 3, &data);
    for (long s = 0; rc == PT_OK && s < steps; s++) {
        draw(data, (uint64_t)(s * BATCH), x, y, labels);
        pt_microbatch batch = {.batch = BATCH, .inputs = x, .targets = labels};
        rc = pt_pipeline_train_step(p, &batch, s, optim.lr, &losses[s]);
    }
    if (rc != PT_OK)
        fprintf(stderr, "pipe_classifier: %s\n", pt_last_error());
    free(x), free(y);
    pt_regression_destroy(data);
    pt_pipeline_destroy(p);
    return rc != PT_OK;
}

int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 60;
    if (steps < 2)
        return fprintf(stderr, "usage: pipe_classifier [STEPS >= 2]\n"), 2;
    float *one = calloc((size_t)steps, sizeof(float)), *two = calloc((size_t)steps, sizeof(float));
    if (!one || !two || train(2, steps, two) || train(1, steps, one))
        return 1;
    for (long s = 0; s<steps; s += steps> 10 ? steps / 10 : 1)
        printf("step %3ld  loss %.6f  (one stage %.6f)\n", s + 1, two[s], one[s]);
    int same = !memcmp(one, two, sizeof(float) * (size_t)steps);
    double first = 0, last = 0; /* the first and last quarter's mean losses */
    long q = steps / 4 ? steps / 4 : 1;
    for (long s = 0; s < q; s++)
        first += two[s] / q, last += two[steps - 1 - s] / q;
    int falls = last < first;
    printf("two stages %s one stage bit for bit; the loss %s (first quarter %.4f, last %.4f)\n",
           same ? "equal" : "DIFFER from", falls ? "falls" : "DOES NOT fall", first, last);
    free(one), free(two);
    return same && falls ? 0 : 1;
}
