/* bench_attention: what packing each head's keys and values once for all
 * its bands is worth.
 *
 * Attention runs a head in bands of 64 query rows; three of a band's
 * products read the head's keys or values transposed (the scores, and in
 * backward their recompute and the probabilities' gradient), each band a
 * longer prefix of them. With pipetrain's own fp32 products the head packs
 * them once and every band reads a prefix of the panels (attention.c);
 * without, each band packs its own prefix. Forward + backward of one
 * micro-batch's attention (q, k, v given), both ways on one thread,
 * rounds taken in turn so that the machine's load falls on both alike:
 * the thread's CPU time, median of the rounds, and the ratio; the outputs
 * and gradients are compared bit for bit.
 * Usage: bench_attention [rounds] (default 15). Shapes: GPT-small's
 * micro-batch (2 x 256 tokens, 384 channels, 6 heads), GPT 12 / 768's (1
 * x 256, 768, 12) and GPT-2's context (1 x 1024, 768, 12). */
#include <stdio.h>
#include <string.h>

#include "bench_common.h"
#include "nn/attention.h"

#define MAX_ROUNDS 64

typedef struct {
    const char *what;
    int B, T, C, H;
} shape;

/* one forward + backward into y and dqkv; CPU seconds */
static double run(const pt_kernels *k, const shape *s, const float *qkv, const float *dy,
                  float *scratch, float *stats, float *y, float *dqkv)
{
    double t0 = bench_thread_seconds();
    pt_attention_forward(k, y, stats, scratch, qkv, s->B, s->T, s->C, s->H, 0.125f);
    pt_attention_backward(k, dqkv, stats, scratch, dy, qkv, s->B, s->T, s->C, s->H, 0.125f);
    return bench_thread_seconds() - t0;
}

static int bench(const pt_kernels *k, const shape *s, int rounds)
{
    pt_kernels repack = *k;
    repack.packed_floats = NULL; /* every band packs its own */
    size_t n = (size_t)s->B * s->T;
    float *qkv = malloc(sizeof(float) * n * 3 * s->C), *dy = malloc(sizeof(float) * n * s->C);
    float *scratch = malloc(sizeof(float) * pt_attention_scratch_floats(s->T, s->C, s->H, PT_F32));
    float *stats = malloc(sizeof(float) * (size_t)s->B * s->H * s->T * 2);
    float *y[2] = {malloc(sizeof(float) * n * s->C), malloc(sizeof(float) * n * s->C)};
    float *dqkv[2] = {malloc(sizeof(float) * n * 3 * s->C), malloc(sizeof(float) * n * 3 * s->C)};
    if (!qkv || !dy || !scratch || !stats || !y[0] || !y[1] || !dqkv[0] || !dqkv[1])
        return fprintf(stderr, "bench_attention: out of memory\n"), 1;
    pt_rng r;
    pt_rng_seed(&r, 3);
    pt_rng_fill_normal(&r, qkv, n * 3 * s->C, 1.0f);
    pt_rng_fill_normal(&r, dy, n * s->C, 1.0f);
    const pt_kernels *way[2] = {&repack, k};
    double t[2][MAX_ROUNDS];
    for (int i = 0; i < 2; i++) /* warm-up */
        run(way[i], s, qkv, dy, scratch, stats, y[i], dqkv[i]);
    for (int round = 0; round < rounds; round++)
        for (int w = 0; w < 2; w++) {
            int i = round % 2 ? 1 - w : w; /* the order alternates */
            t[i][round] = run(way[i], s, qkv, dy, scratch, stats, y[i], dqkv[i]);
        }
    int same = !memcmp(y[0], y[1], sizeof(float) * n * s->C) &&
               !memcmp(dqkv[0], dqkv[1], sizeof(float) * n * 3 * s->C);
    double a = bench_median(t[0], rounds), b = bench_median(t[1], rounds);
    printf("%-34s %12.2f %12.2f %8.3f  %s\n", s->what, 1e3 * a, 1e3 * b, a / b,
           same ? "same bits" : "DIFFERENT BITS");
    free(qkv), free(dy), free(scratch), free(stats);
    free(y[0]), free(y[1]), free(dqkv[0]), free(dqkv[1]);
    return !same;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    if (rounds < 1 || rounds > MAX_ROUNDS)
        return fprintf(stderr, "usage: bench_attention [rounds 1..%d]\n", MAX_ROUNDS), 2;
    pt_blas_set_threads(1);
    const pt_kernels *k = pt_kernels_cpu();
    printf("products: %s (%s)\n", k->products, k->name);
    if (!k->packed_floats) {
        printf("these products keep no panels: nothing to compare\n");
        return 0;
    }
    static const shape shapes[] = {{"GPT-small: 2 x 256, 384 / 6 heads", 2, 256, 384, 6},
                                   {"GPT 12/768: 1 x 256, 768 / 12", 1, 256, 768, 12},
                                   {"GPT-2 context: 1 x 1024, 768 / 12", 1, 1024, 768, 12}};
    printf("%-34s %12s %12s %8s  (ms of CPU, median of %d)\n", "forward + backward", "band's own",
           "head's once", "ratio", rounds);
    int bad = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        bad |= bench(k, &shapes[i], rounds);
    return bad;
}
