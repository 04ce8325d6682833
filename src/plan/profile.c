/* profile.c: measures what each block costs on this machine, the
 * partitioner's input (partition.h). Every block runs alone (its own
 * one-block activation record) on a random micro-batch of the configured
 * size, fed by the previous block's output, so the times are the ones a chunk
 * boundary would see. Called by the pipeline when no balance is given, and by
 * `pipetrain plan`. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/partition.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "tensor/rng.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

int pt_profile_blocks(pt_model *m, int batch, int reps, pt_block_profile *prof)
{
    const pt_model_config *c = pt_model_get_config(m);
    int n = pt_model_n_blocks(m);
    if (batch < 1 || reps < 1)
        return pt_fail(PT_EINVAL, "profiling needs a batch and repetitions >= 1");
    int gpt = c->kind == PT_MODEL_GPT;
    size_t rows = (size_t)batch * (gpt ? (size_t)c->seq_len : 1);
    int classes = gpt ? c->vocab : c->widths[c->n_widths - 1];
    int *tokens = malloc(sizeof(int) * rows), *targets = malloc(sizeof(int) * rows);
    float *inputs = gpt ? NULL : pt_alloc_floats((size_t)batch * (size_t)c->widths[0]);
    pt_activations **acts = calloc((size_t)n, sizeof *acts);
    float *dout = NULL, *din = NULL;
    double *t = malloc(sizeof(double) * 3 * (size_t)reps);
    int rc = tokens && targets && (gpt || inputs) && acts && t
                 ? PT_OK
                 : pt_fail(PT_ENOMEM, "cannot allocate the profiler's buffers");
    pt_rng rng;
    pt_rng_seed(&rng, 12345);
    for (size_t i = 0; rc == PT_OK && i < rows; i++) {
        tokens[i] = gpt ? (int)pt_rng_below(&rng, (uint64_t)c->vocab) : 0;
        targets[i] = (int)pt_rng_below(&rng, (uint64_t)classes);
    }
    if (rc == PT_OK && inputs)
        pt_rng_fill_normal(&rng, inputs, (size_t)batch * (size_t)c->widths[0], 1.0f);
    pt_microbatch mb = {
        .batch = batch, .tokens = gpt ? tokens : NULL, .inputs = inputs, .targets = targets};
    size_t widest = 0;
    for (int b = 0; rc == PT_OK && b < n; b++) {
        rc = pt_activations_create(m, b, b, batch, &acts[b]);
        size_t w = (size_t)pt_model_block_input_floats(m, b);
        widest = w > widest ? w : widest;
        w = pt_activations_output_floats(acts[b]) / (size_t)batch;
        widest = w > widest ? w : widest;
    }
    if (rc == PT_OK) {
        dout = pt_alloc_floats(widest * (size_t)batch);
        din = pt_alloc_floats(widest * (size_t)batch);
        if (!dout || !din)
            rc = pt_fail(PT_ENOMEM, "cannot allocate the profiler's gradients");
        else
            pt_rng_fill_normal(&rng, dout, widest * (size_t)batch, 1e-3f);
    }
    /* one warm-up pass fills every block's input */
    for (int b = 0; rc == PT_OK && b < n; b++) {
        const float *in = b ? pt_activations_output(acts[b - 1]) : NULL;
        rc = pt_model_forward(m, b, b, &mb, in, acts[b], NULL);
    }
    for (int b = 0; rc == PT_OK && b < n; b++) {
        const float *in = b ? pt_activations_output(acts[b - 1]) : NULL;
        const float *d = b == n - 1 ? NULL : dout;
        float *di = b ? din : NULL;
        for (int r = 0; rc == PT_OK && r <= reps; r++) {
            double t0 = now();
            rc = pt_model_forward(m, b, b, &mb, in, acts[b], NULL);
            double t1 = now();
            if (rc == PT_OK)
                rc = pt_model_backward_input(m, b, b, &mb, in, acts[b], d, di, 1.0f);
            double t2 = now();
            if (rc == PT_OK)
                rc = pt_model_backward_weight(m, b, b, &mb, in, acts[b]);
            double t3 = now();
            if (r > 0) /* the first is a warm-up */
                t[r - 1] = t1 - t0, t[reps + r - 1] = t2 - t1, t[2 * reps + r - 1] = t3 - t2;
        }
        if (rc != PT_OK)
            break;
        prof[b].f = median(t, reps);
        prof[b].b = median(t + reps, reps);
        prof[b].w = median(t + 2 * reps, reps);
        pt_block_cost cost = pt_model_block_cost(m, b);
        prof[b].param_bytes = cost.param_bytes;
        prof[b].activation_bytes = pt_activations_bytes(acts[b]);
    }
    pt_model_zero_grads(m);
    for (int b = 0; acts && b < n; b++)
        pt_activations_destroy(acts[b]);
    free(acts);
    free(tokens);
    free(targets);
    pt_free(inputs);
    pt_free(dout);
    pt_free(din);
    free(t);
    return rc;
}
