/* regression.c: synthetic regression data: y = x A / sqrt(inputs) + noise,
 * x and A standard normal. A is fixed by the seed; sample i of a split is
 * drawn from its own stream (seed, split, i), so any sample can be drawn
 * again without the ones before it (a resumed run draws on where it
 * stopped) and the held-out split never meets the training one. Callers:
 * the trainer (--data-format synthetic-regression), the examples, tests. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "pipetrain.h"
#include "tensor/error.h"
#include "tensor/rng.h"

struct pt_regression {
    int inputs, outputs;
    float noise;
    uint64_t seed;
    float *map; /* (inputs, outputs), scaled by 1 / sqrt(inputs) */
};

int pt_regression_create(int inputs, int outputs, float noise, uint64_t seed, pt_regression **out)
{
    *out = NULL;
    if (inputs < 1 || outputs < 1 || !(noise >= 0.0f))
        return pt_fail(PT_EINVAL,
                       "synthetic regression needs inputs and outputs >= 1 and noise >= 0 "
                       "(got %d, %d, %g)",
                       inputs, outputs, (double)noise);
    pt_regression *r = calloc(1, sizeof *r);
    if (r)
        r->map = malloc(sizeof(float) * (size_t)inputs * (size_t)outputs);
    if (!r || !r->map) {
        pt_regression_destroy(r);
        return pt_fail(PT_ENOMEM, "cannot allocate a %d x %d regression map", inputs, outputs);
    }
    *r = (pt_regression){inputs, outputs, noise, seed, r->map};
    pt_rng rng;
    pt_rng_seed_named(&rng, seed, "regression.map");
    pt_rng_fill_normal(&rng, r->map, (size_t)inputs * outputs, 1.0f / sqrtf((float)inputs));
    *out = r;
    return PT_OK;
}

void pt_regression_destroy(pt_regression *r)
{
    if (!r)
        return;
    free(r->map);
    free(r);
}

int pt_regression_inputs(const pt_regression *r) { return r->inputs; }
int pt_regression_outputs(const pt_regression *r) { return r->outputs; }

// x (batch, inputs), y (batch, outputs)
void pt_regression_batch(const pt_regression *r, int split, uint64_t first, int batch, float *x,
                         float *y)
{
    double *sum = malloc(sizeof(double) * (size_t)r->outputs);
    for (int b = 0; sum && b < batch; b++) {
        char name[64];
        snprintf(name, sizeof name, "regression.%d.%llu", split,
                 (unsigned long long)(first + (uint64_t)b));
        pt_rng rng;
        pt_rng_seed_named(&rng, r->seed, name);
        float *xs = x + (size_t)b * r->inputs, *ys = y + (size_t)b * r->outputs;
        pt_rng_fill_normal(&rng, xs, (size_t)r->inputs, 1.0f);
        for (int o = 0; o < r->outputs; o++)
            sum[o] = 0.0;
        for (int i = 0; i < r->inputs; i++) /* row by row of A: contiguous */
            for (int o = 0; o < r->outputs; o++)
                sum[o] += (double)xs[i] * r->map[(size_t)i * r->outputs + o];
        for (int o = 0; o < r->outputs; o++)
            ys[o] = (float)sum[o] + r->noise * (float)pt_rng_normal(&rng);
    }
    free(sum);
}
