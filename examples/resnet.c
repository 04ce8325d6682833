/* resnet.c: a small ResNet on the 8x8 digits, split into two stages, as the
 * "PipelineResNet50" example splits torchvision's ResNet over two devices,
 * then pipelined inference: the held-out images streamed through both
 * stages as micro-batches, forward passes only (pt_pipeline_predict).
 *
 *   conv stem (3x3, 16 channels), GroupNorm, ReLU
 *   three basic blocks (16 -> 16, 16 -> 32 stride 2, 32 -> 32), GroupNorm
 *   global average pool, linear to 10 classes, cross-entropy
 *
 * The norms are GroupNorm, not BatchNorm: a batch's statistics would change
 * with the micro-batch size, and a pipelined run would not equal the whole
 * batch's. balance 4,4 counts the layers (the loss joins the linear).
 * The first steps also run on one stage: the losses must agree bit for bit.
 *
 *   resnet [DIGITS.csv.gz [STEPS]]  (default $PT_SOURCE_DIR/data/digits.csv.gz, 300)
 * Exits 0 when the loss falls, both runs agree and the held-out accuracy
 * is at least 97%; 77 when the digits are missing. */
#include <pipetrain.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PIXELS = 64, CLASSES = 10, MICRO = 4, MBS = 8, BATCH = MICRO * MBS, SAME_STEPS = 8 };

static const char *spec = "input 1 8 8\n"
                          "conv2d 1 16 3 padding=1 bias=0; groupnorm 4 16; relu\n"
                          "residual 16 16 groups=4\n"
                          "residual 16 32 stride=2 groups=4\n"
                          "residual 32 32 groups=4\n"
                          "global_avgpool; linear 32 10; cross_entropy\n";

static int fail(const char *what)
{
    fprintf(stderr, "resnet: %s: %s\n", what, pt_last_error());
    return 1;
}

static pt_pipeline *create(int stages)
{
    pt_model_config model;
    pt_optim_config optim = pt_optim_config_default(PT_OPTIM_ADAMW);
    optim.lr = 3e-3f;
    pt_pipeline_config pipe = pt_pipeline_config_default();
    int balance[] = {4, 4};
    pipe.stages = stages;
    pipe.microbatches = MICRO;
    pipe.micro_batch_size = MBS;
    pipe.balance = stages == 2 ? balance : NULL;
    pipe.n_balance = stages == 2 ? 2 : 0;
    pipe.blas_threads = 1; /* one thread per worker: the sums run in one order */
    pt_pipeline *p = NULL;
    if (pt_model_config_spec(spec, &model) != PT_OK ||
        pt_pipeline_create(&model, &optim, &pipe, &p) != PT_OK)
        fail("pipeline");
    return p;
}

/* Batch s of the training split, taken in order, wrapping round */
static void batch_of(const float *x, const int *y, int n, long s, float *bx, int *by)
{
    for (int b = 0; b < BATCH; b++) {
        int i = (int)((s * BATCH + b) % n);
        memcpy(bx + b * PIXELS, x + (size_t)i * PIXELS, sizeof(float) * PIXELS);
        by[b] = y[i];
    }
}

/* steps of a run of `total`, the learning rate decaying linearly over it */
static int train(pt_pipeline *p, const pt_digit_set *d, long steps, long total, float *losses)
{
    const float *x;
    const int *y;
    int n = pt_digit_set_split(d, 0, &x, &y), labels[BATCH];
    float images[BATCH * PIXELS];
    for (long s = 0; s < steps; s++) {
        batch_of(x, y, n, s, images, labels);
        pt_microbatch mb = {.batch = BATCH, .inputs = images, .targets = labels};
        float lr = 3e-3f * (1.0f - 0.9f * (float)s / (float)total);
        if (pt_pipeline_train_step(p, &mb, s, lr, &losses[s]) != PT_OK)
            return fail("train step");
    }
    return 0;
}

/* Held-out accuracy, whole batches streamed forward through the stages;
 * the last batch is filled up with its first image and those are not counted */
static double accuracy(pt_pipeline *p, const pt_digit_set *d)
{
    const float *x;
    const int *y;
    int n = pt_digit_set_split(d, 1, &x, &y), right = 0;
    float images[BATCH * PIXELS], probs[BATCH * CLASSES];
    for (int first = 0; first < n; first += BATCH) {
        for (int b = 0; b < BATCH; b++)
            memcpy(images + b * PIXELS, x + (size_t)(first + b < n ? first + b : first) * PIXELS,
                   sizeof(float) * PIXELS);
        pt_microbatch mb = {.batch = BATCH, .inputs = images};
        if (pt_pipeline_predict(p, &mb, probs, NULL) != PT_OK)
            return fail("predict"), -1.0;
        for (int b = 0; b < BATCH && first + b < n; b++) {
            int best = 0;
            for (int k = 1; k < CLASSES; k++)
                best = probs[b * CLASSES + k] > probs[b * CLASSES + best] ? k : best;
            right += best == y[first + b];
        }
    }
    return 100.0 * right / n;
}

int main(int argc, char **argv)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/data/digits.csv.gz",
             getenv("PT_SOURCE_DIR") ? getenv("PT_SOURCE_DIR") : ".");
    const char *digits = argc > 1 ? argv[1] : path;
    long steps = argc > 2 ? atol(argv[2]) : 300;
    if (steps < SAME_STEPS)
        return fprintf(stderr, "usage: resnet [DIGITS.csv.gz [STEPS >= %d]]\n", SAME_STEPS), 2;
    pt_digit_set *d;
    if (pt_digit_set_load(digits, 0.2, 1, &d) != PT_OK)
        return printf("skipped: %s (scripts/install-deps.sh extracts the digits)\n",
                      pt_last_error()),
               77;
    float *two = calloc((size_t)steps, sizeof(float)), one[SAME_STEPS];
    pt_pipeline *p2 = create(2), *p1 = create(1);
    int rc = !two || !p1 || !p2 || train(p2, d, steps, steps, two) ||
             train(p1, d, SAME_STEPS, steps, one);
    double acc = rc ? -1.0 : accuracy(p2, d);
    for (long s = 0; !rc && s < steps; s += steps / 10)
        printf("step %4ld  loss %.6f\n", s + 1, two[s]);
    int same = !rc && !memcmp(one, two, sizeof one), falls = !rc && two[steps - 1] < two[0];
    printf("first %d steps: two stages %s one stage bit for bit; the loss %s; held-out "
           "accuracy %.2f%% (pipelined inference)\n",
           SAME_STEPS, same ? "equal" : "DIFFER from", falls ? "falls" : "DOES NOT fall", acc);
    pt_pipeline_destroy(p1), pt_pipeline_destroy(p2);
    pt_digit_set_destroy(d);
    free(two);
    return !rc && same && falls && acc >= 97.0 ? 0 : 1;
}
