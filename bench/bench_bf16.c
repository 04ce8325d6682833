/* bench_bf16: what --precision bf16 buys on this machine.
 *
 * GPT-small (4 layers, 6 heads, 384 channels, context 256, vocabulary 256),
 * 8 micro-batches of 2 samples (4096 tokens a step), AdamW, 2 pipeline
 * stages under 1f1b with one BLAS thread each, in one run:
 *   the FMA peak      one core's float FMA rate from a register-only loop
 *                     (AVX-512: 2 x 16 lanes x 2 FLOPs a cycle at best);
 *   fp32              the baseline;
 *   bf16 <kernel>     on each product kernel this CPU runs: amx,
 *                     avx512bf16, and portable (rounded operands, sgemm),
 *                     as a machine without a bf16 unit runs it;
 *   bf16-P1x2 <kernel>  the kernel bf16 takes by default on one worker
 *                     with both cores' threads (no pipeline).
 * For each: tokens/s (median of the steps after a warm-up), its ratio to
 * fp32, achieved FLOP/s as a share of the two cores' FMA peak (and for
 * amx of AMX's TDPBF16PS peak on both cores at once), and every
 * worker's activation bytes (records and boundary buffers, as the memory
 * report counts them) and their ratio to fp32's.
 * Usage: bench_bf16 [steps] [all|default] (default 4 steps, all kernels;
 * "default": fp32 and the kernel bf16 takes by default alone). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_peak.h"

#define P   2
#define M   8
#define MBS 2

typedef struct {
    double step_s;
    size_t activations[P];
    float loss;
} result;

/* One configuration: P = 2 with a thread each, or one worker on 2 threads */
static int run(pt_precision precision, int stages, int steps, const pt_microbatch *b, result *res)
{
    pt_model_config c = bench_gpt_small();
    c.precision = precision;
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = stages, pc.microbatches = M, pc.micro_batch_size = MBS, pc.schedule = "1f1b";
    pc.blas_threads = P / stages;
    int balance[P] = {3, 3}; /* embedding + 2 layers | 2 layers + head */
    if (stages == P)
        pc.balance = balance, pc.n_balance = P;
    pt_pipeline *p;
    if (pt_pipeline_create(&c, &oc, &pc, &p))
        return fprintf(stderr, "bench_bf16: %s\n", pt_last_error()), 1;
    double t[32] = {0};
    for (int s = 0; s <= steps; s++) {
        double t0 = bench_now();
        if (pt_pipeline_train_step(p, b, s, oc.lr, &res->loss) != PT_OK)
            return fprintf(stderr, "bench_bf16: %s\n", pt_last_error()), 1;
        if (s > 0)
            t[s - 1] = bench_now() - t0;
    }
    res->step_s = bench_median(t, steps);
    pt_memory_use used[P];
    if (pt_pipeline_memory(p, used, NULL, NULL) != PT_OK)
        return fprintf(stderr, "bench_bf16: %s\n", pt_last_error()), 1;
    for (int w = 0; w < P; w++)
        res->activations[w] = w < stages ? used[w].activations : 0;
    pt_pipeline_destroy(p);
    return 0;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 4;
    if (steps < 1 || steps > 32)
        steps = 4;
    int only_default = argc > 2 && strcmp(argv[2], "default") == 0;
    pt_model_config c = bench_gpt_small();
    int n = M * MBS, *tok;
    pt_microbatch b = bench_random_batch(&c, n, &tok);
    int rows = n * c.seq_len; /* tokens a step */
    pt_model *m;
    pt_model_describe(&c, &m);
    double flops = bench_step_flops(m, n);
    pt_model_destroy(m);

    const char *fast = pt_bf16_kernel();
    double peak = bench_has_avx512() ? bench_fma_gflops() : 0;
    double amx = bench_amx_peak_cores(P);
    const char *kernels[] = {"amx", "avx512bf16", "portable"};
    char names[5][32] = {"fp32"};
    result rs[5];
    int n_runs = 1;
    if (run(PT_PRECISION_FP32, P, steps, &b, &rs[0]))
        return 1;
    for (int k = 0; k < 3; k++) {
        if ((only_default && strcmp(kernels[k], fast) != 0) ||
            pt_bf16_set_kernel(kernels[k]) != PT_OK)
            continue;
        snprintf(names[n_runs], sizeof names[n_runs], "bf16 %s", kernels[k]);
        if (run(PT_PRECISION_BF16, P, steps, &b, &rs[n_runs++]))
            return 1;
    }
    snprintf(names[n_runs], sizeof names[n_runs], "bf16-P1x2 %s", fast);
    if (pt_bf16_set_kernel(fast) != PT_OK || run(PT_PRECISION_BF16, 1, steps, &b, &rs[n_runs++]))
        return 1;
    pt_bf16_set_kernel("auto");
    double peak_after = bench_has_avx512() ? bench_fma_gflops() : 0;
    double amx_after = bench_amx_peak_cores(P), amx_cores = (amx + amx_after) / 2;
    double cores = 2 * (peak + peak_after) / 2;

    printf("gpt 4 layers, 6 heads, 384 embd, seq 256, vocab 256; P=2 1f1b --balance 3,3, "
           "%d micro-batches of %d (%d tokens a step); %.1f GFLOP a step\n",
           M, MBS, rows, flops / 1e9);
    printf("one-core float FMA peak: %.1f GFLOP/s before, %.1f after (AVX-512%s); 2 cores %.1f; "
           "bf16's products by default: %s\n",
           peak, peak_after, bench_has_avx512() ? "" : " absent: not measured", cores, fast);
    if (amx_cores > 0)
        printf("AMX's TDPBF16PS peak on 2 cores at once: %.0f GFLOP/s before, %.0f after\n", amx,
               amx_after);
    printf("\n");
    printf("%-18s %8s %9s %8s %11s %11s %14s %14s %8s\n", "precision", "step s", "tokens/s",
           "vs fp32", "of FMA peak", "of AMX peak", "activ. w0 MiB", "activ. w1 MiB", "vs fp32");
    const result *f32 = &rs[0];
    for (int i = 0; i < n_runs; i++) {
        double worst = 0;
        int pipelined = rs[i].activations[1] > 0; /* the one-worker row has its own layout */
        for (int w = 0; w < P; w++) {
            double ratio = (double)rs[i].activations[w] / (double)f32->activations[w];
            worst = ratio > worst ? ratio : worst;
        }
        printf("%-18s %8.3f %9.0f %7.2fx %10.1f%%", names[i], rs[i].step_s, rows / rs[i].step_s,
               f32->step_s / rs[i].step_s,
               cores > 0 ? 100 * flops / rs[i].step_s / 1e9 / cores : 0);
        if (amx_cores > 0 && strstr(names[i], "amx"))
            printf(" %10.1f%%", 100 * flops / rs[i].step_s / 1e9 / amx_cores);
        else
            printf(" %11s", "-");
        if (pipelined)
            printf(" %14.1f %14.1f %7.3fx\n", rs[i].activations[0] / 1048576.0,
                   rs[i].activations[1] / 1048576.0, worst);
        else
            printf(" %14.1f %14s %8s\n", rs[i].activations[0] / 1048576.0, "-", "-");
    }
    printf("\nloss of the last step:");
    for (int i = 0; i < n_runs; i++)
        printf("%s %s %.4f", i ? "," : "", names[i], rs[i].loss);
    printf("\n");
    free(tok);
    return 0;
}
