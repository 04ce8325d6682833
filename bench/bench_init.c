/* bench_init: how long a model takes to build, which is nearly all its
 * parameters' normal draws.
 *
 * GPT-2 124M (12 layers, 768 channels, 12 heads, context 1024, vocabulary
 * 50257, the LM head tied to the token embedding) built whole by
 * pt_model_create on 1 and on 2 threads (the draws are shared a parameter
 * at a time), rounds taken in turn: wall seconds, median of the rounds, and
 * the normal draws per second of one thread filling a tensor; the two
 * builds' parameters are compared bit for bit. Then a pipeline of two
 * stages on threads (7 blocks each, AdamW, 2 micro-batches of 1) created
 * by pt_pipeline_create, which builds both stages on the threads of both
 * workers before they start: wall seconds, median of the rounds.
 * Usage: bench_init [rounds] (default 3). */
#include <stdio.h>
#include <string.h>

#include "bench_common.h"

#define MAX_ROUNDS 16

static pt_model *build(const pt_model_config *c, int threads, double *seconds)
{
    pt_blas_set_threads(threads);
    pt_model *m = NULL;
    double t0 = bench_now();
    if (pt_model_create(c, &m) != PT_OK) {
        fprintf(stderr, "bench_init: %s\n", pt_last_error());
        return NULL;
    }
    *seconds = bench_now() - t0;
    return m;
}

static double create_pipeline(const pt_model_config *c)
{
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    int balance[2] = {7, 7};
    pc.stages = 2, pc.microbatches = 2, pc.micro_batch_size = 1;
    pc.balance = balance, pc.n_balance = 2, pc.transport = PT_PIPELINE_THREADS;
    pt_pipeline *p;
    double t0 = bench_now();
    if (pt_pipeline_create(c, &oc, &pc, &p) != PT_OK) {
        fprintf(stderr, "bench_init: %s\n", pt_last_error());
        return -1.0;
    }
    double s = bench_now() - t0;
    pt_pipeline_destroy(p);
    return s;
}

static int same_params(const pt_model *a, const pt_model *b)
{
    for (int i = 0; i < pt_model_n_params(a); i++) {
        const pt_param *p = pt_model_param(a, i), *q = pt_model_param(b, i);
        if (memcmp(p->data, q->data, p->numel * sizeof(float)))
            return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    if (rounds < 1 || rounds > MAX_ROUNDS)
        return fprintf(stderr, "usage: bench_init [rounds 1..%d]\n", MAX_ROUNDS), 2;
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 12, c.n_head = 12, c.n_embd = 768, c.seq_len = 1024, c.vocab = 50257;

    enum { DRAWS = 1 << 24 };
    float *x = malloc(sizeof(float) * DRAWS);
    if (!x)
        return fprintf(stderr, "bench_init: out of memory\n"), 1;
    pt_rng r;
    pt_rng_seed(&r, 1);
    pt_rng_fill_normal(&r, x, DRAWS, 0.02f); /* the pages */
    double t0 = bench_now();
    pt_rng_fill_normal(&r, x, DRAWS, 0.02f);
    printf("normal draws, one thread: %.1f million/s\n", DRAWS / (bench_now() - t0) / 1e6);
    free(x);

    double t[2][MAX_ROUNDS];
    int same = 1;
    for (int round = 0; round < rounds; round++) {
        pt_model *one = build(&c, 1, &t[0][round]), *two = build(&c, 2, &t[1][round]);
        if (!one || !two)
            return 1;
        same &= same_params(one, two);
        pt_model_destroy(one);
        pt_model_destroy(two);
    }
    pt_blas_set_threads(1);
    printf("GPT-2 124M built: %.2f s on 1 thread, %.2f s on 2 (median of %d), %s\n",
           bench_median(t[0], rounds), bench_median(t[1], rounds), rounds,
           same ? "the same bits" : "DIFFERENT BITS");
    for (int round = 0; round < rounds; round++)
        if ((t[0][round] = create_pipeline(&c)) < 0)
            return 1;
    printf("a pipeline of 2 stages on threads created: %.2f s (median of %d)\n",
           bench_median(t[0], rounds), rounds);
    return !same;
}
