/* bench_model: how close one worker's forward + backward of a gpt comes to
 * the machine's sgemm rate, measured in the same run.
 *
 * For 1 and 2 BLAS threads: the sgemm GFLOP/s at the model's largest product
 * shape, then tokens/s and model FLOP utilisation (achieved FLOP/s / that
 * sgemm rate) of gpt with 4 layers, 6 heads, 384 embd, seq 256, batch 8,
 * vocab 256. Each figure is the median of several repeats, since the machine
 * may be shared. FLOPs are counted as the blocks' cost records do: every
 * product, attention over the full (T,T) square (PaLM's convention). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pipetrain.h"
#include "tensor/arena.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return x[n / 2];
}

/* GFLOP/s of C (M,N) = A (M,K) B (K,N), median of `reps` timed runs. */
static double sgemm_gflops(int M, int N, int K, int reps)
{
    const pt_kernels *k = pt_kernels_cpu();
    float *A = pt_alloc_floats((size_t)M * K), *B = pt_alloc_floats((size_t)K * N),
          *C = pt_alloc_floats((size_t)M * N);
    pt_rng r;
    pt_rng_seed(&r, 1);
    pt_rng_fill_normal(&r, A, (size_t)M * K, 1.0f);
    pt_rng_fill_normal(&r, B, (size_t)K * N, 1.0f);
    double t[32];
    k->matmul(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
    for (int i = 0; i < reps; i++) {
        double t0 = now();
        for (int j = 0; j < 4; j++)
            k->matmul(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
        t[i] = 4 * 2.0 * M * N * K / (now() - t0) / 1e9;
    }
    pt_free(A), pt_free(B), pt_free(C);
    return median(t, reps);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1 || reps > 32)
        reps = 5;
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 4, c.n_head = 6, c.n_embd = 384, c.seq_len = 256, c.vocab = 256;
    int B = 8, n = B * c.seq_len;
    pt_model *m;
    if (pt_model_create(&c, &m) != PT_OK) {
        fprintf(stderr, "bench_model: %s\n", pt_last_error());
        return 1;
    }
    int last = pt_model_n_blocks(m) - 1;
    double flops = 0;
    for (int b = 0; b <= last; b++) {
        pt_block_cost bc = pt_model_block_cost(m, b);
        flops += B * (bc.forward_flops + bc.backward_input_flops + bc.backward_weight_flops);
    }
    int *tok = malloc(sizeof(int) * (n + 1));
    pt_rng r;
    pt_rng_seed(&r, 3);
    for (int i = 0; i <= n; i++)
        tok[i] = (int)pt_rng_below(&r, 256);
    pt_microbatch mb = {.batch = B, .tokens = tok, .targets = tok + 1};
    pt_activations *a;
    pt_activations_create(m, 0, last, B, &a);

    printf("gpt: 4 layers, 6 heads, 384 embd, seq 256, batch 8, vocab 256: %.2f GFLOP per step\n",
           flops / 1e9);
    printf("%-8s %14s %12s %12s %12s\n", "threads", "sgemm GFLOP/s", "step ms", "tokens/s",
           "utilisation");
    for (int threads = 1; threads <= 2; threads++) {
        pt_blas_set_threads(threads);
        /* the model's most common product: (B*T, C) x (C, 4C) */
        double peak = sgemm_gflops(n, 4 * c.n_embd, c.n_embd, reps);
        double t[32];
        float loss;
        pt_model_step_microbatch(m, &mb, 1.0f, a, &loss); /* warm-up */
        for (int i = 0; i < reps; i++) {
            double t0 = now();
            pt_model_step_microbatch(m, &mb, 1.0f, a, &loss);
            t[i] = now() - t0;
        }
        double step = median(t, reps);
        double achieved = flops / step / 1e9;
        printf("%-8d %14.1f %12.1f %12.0f %11.1f%%\n", threads, peak, step * 1e3, n / step,
               100.0 * achieved / peak);
    }
    pt_activations_destroy(a);
    pt_model_destroy(m);
    free(tok);
    return 0;
}
