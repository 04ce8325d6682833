/* bench_common.h: what the benchmarks measure the same way: wall time,
 * medians of repeats (the machine may be shared), the sgemm rate that
 * utilisation is taken against, the FLOPs of a training step as the blocks'
 * cost records count them (every product; attention over the full (T,T)
 * square, PaLM's convention), and the GPT-small config of the issues'
 * figures. Header-only: each benchmark is one program. */
#ifndef PT_BENCH_COMMON_H
#define PT_BENCH_COMMON_H

#include <stdlib.h>
#include <time.h>

#include "pipetrain.h"
#include "tensor/arena.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* the calling thread's CPU seconds: on a machine shared with other jobs,
 * one thread's time without the time it was descheduled */
static inline double bench_thread_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* sleeps s seconds */
static inline void bench_pause(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts x in place. */
static inline double bench_median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, bench_cmp_double);
    return x[n / 2];
}

/* GFLOP/s of C (m,n) = A (m,k) B (k,n) with the current BLAS threads,
 * median of `reps` (at most 32) timed runs of four products. */
static inline double bench_sgemm_gflops(int m, int n, int k, int reps)
{
    const pt_kernels *kr = pt_kernels_cpu();
    float *A = pt_alloc_floats((size_t)m * k), *B = pt_alloc_floats((size_t)k * n),
          *C = pt_alloc_floats((size_t)m * n);
    pt_rng r;
    pt_rng_seed(&r, 1);
    pt_rng_fill_normal(&r, A, (size_t)m * k, 1.0f);
    pt_rng_fill_normal(&r, B, (size_t)k * n, 1.0f);
    double t[32] = {0};
    reps = reps < 1 ? 1 : reps > 32 ? 32 : reps;
    kr->matmul(0, 0, m, n, k, 1.0f, pt_mat_of(A, k, PT_F32), pt_mat_of(B, n, PT_F32), 0.0f,
               pt_mat_of(C, n, PT_F32), NULL);
    for (int i = 0; i < reps; i++) {
        double t0 = bench_now();
        for (int j = 0; j < 4; j++)
            kr->matmul(0, 0, m, n, k, 1.0f, pt_mat_of(A, k, PT_F32), pt_mat_of(B, n, PT_F32), 0.0f,
                       pt_mat_of(C, n, PT_F32), NULL);
        t[i] = 4 * 2.0 * m * n * k / (bench_now() - t0) / 1e9;
    }
    pt_free(A), pt_free(B), pt_free(C);
    return bench_median(t, reps);
}

/* FLOPs of forward + backward of `samples` samples through the model. */
static inline double bench_step_flops(const pt_model *m, int samples)
{
    double flops = 0;
    for (int b = 0; b < pt_model_n_blocks(m); b++) {
        pt_block_cost c = pt_model_block_cost(m, b);
        flops += samples * (c.forward_flops + c.backward_input_flops + c.backward_weight_flops);
    }
    return flops;
}

/* gpt with 4 layers, 6 heads, 384 channels, 256 tokens, vocab 256. */
static inline pt_model_config bench_gpt_small(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 4, c.n_head = 6, c.n_embd = 384, c.seq_len = 256, c.vocab = 256;
    return c;
}

/* A batch of n rows of T seeded random tokens (targets: the next token);
 * the caller frees *tokens. */
static inline pt_microbatch bench_random_batch(const pt_model_config *c, int n, int **tokens)
{
    int rows = n * c->seq_len;
    int *tok = malloc(sizeof(int) * (size_t)(rows + 1));
    pt_rng r;
    pt_rng_seed(&r, 7);
    for (int i = 0; tok && i <= rows; i++)
        tok[i] = (int)pt_rng_below(&r, (uint64_t)c->vocab);
    *tokens = tok;
    return (pt_microbatch){.batch = n, .tokens = tok, .targets = tok + 1};
}

#endif
