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

#include "bench_common.h"

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1 || reps > 32)
        reps = 5;
    pt_model_config c = bench_gpt_small();
    int B = 8, n = B * c.seq_len;
    pt_model *m;
    if (pt_model_create(&c, &m) != PT_OK) {
        fprintf(stderr, "bench_model: %s\n", pt_last_error());
        return 1;
    }
    int last = pt_model_n_blocks(m) - 1;
    double flops = bench_step_flops(m, B);
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
        double peak = bench_sgemm_gflops(n, 4 * c.n_embd, c.n_embd, reps);
        double t[32] = {0};
        float loss;
        pt_model_step_microbatch(m, &mb, 1.0f, a, &loss); /* warm-up */
        for (int i = 0; i < reps; i++) {
            double t0 = bench_now();
            pt_model_step_microbatch(m, &mb, 1.0f, a, &loss);
            t[i] = bench_now() - t0;
        }
        double step = bench_median(t, reps);
        double achieved = flops / step / 1e9;
        printf("%-8d %14.1f %12.1f %12.0f %11.1f%%\n", threads, peak, step * 1e3, n / step,
               100.0 * achieved / peak);
    }
    pt_activations_destroy(a);
    pt_model_destroy(m);
    free(tok);
    return 0;
}
