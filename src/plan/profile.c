/* profile.c: measures what each block costs on this machine, the
 * partitioner's input (partition.h). Every block runs alone (its own
 * one-block activation record) on a random micro-batch of the configured
 * size, fed by the previous block's output, so the times are the ones a chunk
 * boundary would see. Only the block being timed is held in memory, so a
 * model too large for this machine can still be profiled. Blocks that do the
 * same work (a gpt's layers) are timed once, on the first of them, with
 * more repetitions, and share its times. Called by the pipeline when no
 * balance is given, and by `pipetrain plan`. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
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

/* Times one block, `reps` runs after a warm-up, on the input `in` (NULL for
 * the first block); leaves its output in the record. */
static int time_block(pt_model *m, int b, const pt_microbatch *mb, const float *in,
                      pt_activations *acts, const float *dout, float *din, int reps, double *t,
                      pt_block_profile *prof)
{
    int n = pt_model_n_blocks(m), rc = PT_OK;
    const float *d = b == n - 1 ? NULL : dout;
    float *di = b ? din : NULL;
    for (int r = 0; rc == PT_OK && r <= reps; r++) {
        double t0 = now();
        rc = pt_model_forward(m, b, b, mb, in, acts, NULL);
        double t1 = now();
        if (rc == PT_OK)
            rc = pt_model_backward_input(m, b, b, mb, in, acts, d, di, 1.0f);
        double t2 = now();
        if (rc == PT_OK)
            rc = pt_model_backward_weight(m, b, b, mb, in, acts);
        double t3 = now();
        if (r > 0) /* the first is a warm-up */
            t[r - 1] = t1 - t0, t[reps + r - 1] = t2 - t1, t[2 * reps + r - 1] = t3 - t2;
    }
    if (rc != PT_OK)
        return rc;
    prof->f = median(t, reps);
    prof->b = median(t + reps, reps);
    prof->w = median(t + 2 * reps, reps);
    return PT_OK;
}

/* What block b holds in memory, measured on a model holding it and its
 * activation record. */
static void block_memory(const pt_model *m, int b, const pt_activations *acts,
                         pt_block_profile *prof)
{
    prof->param_bytes = pt_model_param_bytes(m, b, b); /* as a stage lays them out */
    /* the copies the products read (bf16's, or the kept panels), as the
     * memory prediction counts them */
    bool bf16 = pt_model_get_config(m)->precision == PT_PRECISION_BF16;
    prof->copy_bytes = (bf16 ? prof->param_bytes / 2 : 0) + pt_model_panel_bytes(m, b, b);
    prof->grad_bytes = pt_grad_record_bytes(pt_activations_grads(acts));
    prof->activation_bytes = pt_activations_bytes(acts) - prof->grad_bytes;
}

/* True when blocks a and b do the same work: the same kind, FLOPs,
 * parameters and activations (a gpt's transformer layers). */
static bool same_work(const pt_model *m, int a, int b)
{
    pt_block_cost x = pt_model_block_cost(m, a), y = pt_model_block_cost(m, b);
    return !strcmp(pt_model_block_kind(m, a), pt_model_block_kind(m, b)) &&
           x.forward_flops == y.forward_flops && x.backward_input_flops == y.backward_input_flops &&
           x.backward_weight_flops == y.backward_weight_flops && x.param_bytes == y.param_bytes &&
           x.activation_bytes == y.activation_bytes && x.grad_bytes == y.grad_bytes;
}

/* Each block's group: the first block that does the same work as it
 * (itself when none before it does). Measured alone, equal layers differ by
 * the machine's noise, and a cut chosen on that noise differs from run to
 * run (and on a uniform model, from the even cut): a group is timed once,
 * so the cut follows only the real differences between blocks, and a
 * gpt of 12 layers is timed in a fraction of the time. */
static void group_blocks(const pt_model *m, int n, int *group)
{
    for (int b = 0; b < n; b++) {
        group[b] = b;
        for (int a = 0; a < b; a++)
            if (group[a] == a && same_work(m, a, b)) {
                group[b] = a;
                break;
            }
    }
}

/* Repetitions for timing a group of k blocks: up to three times `reps`,
 * as many samples as up to three of them timed apart would give. */
static int group_reps(const int *group, int n, int g, int reps)
{
    int k = 0;
    for (int b = g; b < n; b++)
        k += group[b] == g;
    return reps * (k < 3 ? k : 3);
}

int pt_profile_blocks(const pt_model_config *c, int batch, int reps, pt_block_profile *prof)
{
    if (batch < 1 || reps < 1)
        return pt_fail(PT_EINVAL, "profiling needs a batch and repetitions >= 1");
    pt_model *desc;
    int rc = pt_model_describe(c, &desc);
    if (rc != PT_OK)
        return rc;
    int n = pt_model_n_blocks(desc);
    pt_model_io io = pt_model_get_io(desc);
    size_t n_tokens = (size_t)batch * (size_t)io.tokens;
    size_t n_labels = (size_t)batch * (size_t)io.labels;
    size_t n_values = (size_t)batch * (size_t)io.values;
    size_t n_inputs = (size_t)batch * (size_t)io.inputs;
    int *tokens = malloc(sizeof(int) * (n_tokens + 1)),
        *targets = malloc(sizeof(int) * (n_labels + 1));
    float *inputs = pt_alloc_floats(n_inputs + 1), *values = pt_alloc_floats(n_values + 1);
    unsigned char *hold = calloc((size_t)n, 1);
    int *group = malloc(sizeof(int) * (size_t)n);
    float *dout = NULL, *din = NULL, *in = NULL, *next = NULL;
    double *t = malloc(sizeof(double) * 9 * (size_t)reps); /* F, B, W of group_reps */
    size_t widest = 0;
    for (int b = 0; b < n; b++) {
        size_t w = (size_t)pt_model_block_input_floats(desc, b);
        widest = w > widest ? w : widest;
        w = (size_t)pt_model_block_output_floats(desc, b);
        widest = w > widest ? w : widest;
    }
    widest *= (size_t)batch;
    dout = pt_alloc_floats(widest);
    din = pt_alloc_floats(widest);
    in = pt_alloc_floats(widest);
    next = pt_alloc_floats(widest);
    rc = tokens && targets && inputs && values && hold && group && t && dout && din && in && next
             ? PT_OK
             : pt_fail(PT_ENOMEM, "cannot allocate the profiler's buffers");
    if (rc == PT_OK)
        group_blocks(desc, n, group);
    pt_rng rng;
    pt_rng_seed(&rng, 12345);
    for (size_t i = 0; rc == PT_OK && i < n_tokens; i++)
        tokens[i] = (int)pt_rng_below(&rng, (uint64_t)io.vocab);
    for (size_t i = 0; rc == PT_OK && i < n_labels; i++)
        targets[i] = (int)pt_rng_below(&rng, (uint64_t)io.classes);
    if (rc == PT_OK) {
        pt_rng_fill_normal(&rng, inputs, n_inputs, 1.0f);
        pt_rng_fill_normal(&rng, values, n_values, 1.0f);
        pt_rng_fill_normal(&rng, dout, widest, 1e-3f);
    }
    pt_microbatch mb = {.batch = batch,
                        .tokens = io.tokens ? tokens : NULL,
                        .inputs = io.tokens ? NULL : inputs,
                        .targets = targets,
                        .target_values = values};
    /* one block held at a time, fed by the last timed block's output (any
     * finite input times the same); a block of a group timed before is
     * only built, for what it holds in memory */
    for (int b = 0; rc == PT_OK && b < n; b++) {
        bool timed = group[b] == b;
        pt_model *m = NULL;
        pt_activations *acts = NULL;
        hold[b] = 1;
        rc = pt_model_create_part(c, hold, &m);
        hold[b] = 0;
        if (rc == PT_OK) /* products as a stage runs them: the warm-up packs the panels */
            rc = pt_model_keep_panels(m);
        if (rc == PT_OK)
            rc = pt_activations_create(m, b, b, batch, &acts);
        if (rc == PT_OK && timed)
            rc = time_block(m, b, &mb, b ? in : NULL, acts, dout, din,
                            group_reps(group, n, b, reps), t, &prof[b]);
        if (rc == PT_OK && !timed) {
            const pt_block_profile *first = &prof[group[b]];
            prof[b].f = first->f, prof[b].b = first->b, prof[b].w = first->w;
        }
        if (rc == PT_OK)
            block_memory(m, b, acts, &prof[b]);
        if (rc == PT_OK && timed && b + 1 < n) {
            memcpy(next, pt_activations_output(acts), pt_activations_output_bytes(acts));
            float *swap = in;
            in = next, next = swap;
        }
        pt_activations_destroy(acts);
        pt_model_destroy(m);
    }
    pt_model_destroy(desc);
    free(hold);
    free(group);
    free(tokens);
    free(targets);
    pt_free(inputs);
    pt_free(values);
    pt_free(dout);
    pt_free(din);
    pt_free(in);
    pt_free(next);
    free(t);
    return rc;
}
