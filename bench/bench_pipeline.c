/* bench_pipeline: does pipelining use this machine's cores as well as
 * threading inside each product does?
 *
 * gpt with 4 layers, 6 heads, 384 embd, seq 256, vocab 256, micro-batches of
 * 2 samples, 16 micro-batches per step (8192 tokens); or, with `base`, gpt
 * with 12 layers, 12 heads, 768 embd, seq 256, vocab 256, micro-batches of
 * 1 sample, 16 per step (4096 tokens); AdamW, full training steps through
 * pt_pipeline:
 *   P = 1, one BLAS thread        the baseline
 *   P = 1, two BLAS threads       threading inside each product
 *   P = 2, one thread each        pipelining (the partitioner's cut), 1f1b
 *                                 or each schedule of a list
 * Prints tokens/s and the ratios to both baselines, utilisation (achieved
 * FLOP/s / (2 x the one-thread sgemm GFLOP/s measured in the same run, at the
 * model's MLP product shape)), and for P = 2 each worker's measured bubble
 * next to the simulator's prediction for the step's measured per-chunk
 * times. The configurations run in rounds (bench_rounds.h): one step of
 * each in turn per round, after a warm-up step of each; every figure is a
 * median over the rounds, and the ratios are taken within a round.
 * Also printed: the fp32 product kernel, OpenBLAS's core and the widest
 * FMA's two-core peak measured before and after the rounds (the higher
 * taken), and the utilisation against it.
 * Usage: bench_pipeline [rounds] [kernel] [small|base] [schedules] (default
 * 5, auto, small, 1f1b: the kernel as pt_fp32_set_kernel names it, to
 * compare two back to back; the P = 2 schedules comma-separated, e.g.
 * 1f1b,interleaved,zbv, each beside the P = 1 runs; a schedule
 * written NAME:repack runs with repack_weights, its products packing each
 * weight every time instead of keeping its panels). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_peak.h"
#include "bench_rounds.h"
#include "runtime/optimizer.h"

#define M             16
#define MAX_SCHEDULES 8

/* A pipeline of P workers with `threads` BLAS threads each, and the
 * partitioner's cut as --balance takes it (blocks per chunk). */
static int open_entry(const pt_model_config *c, int mbs, int P, const char *schedule, int threads,
                      bench_entry *e, char *cut, size_t cut_size)
{
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = P, pc.microbatches = M, pc.micro_batch_size = mbs, pc.schedule = schedule;
    pc.blas_threads = threads;
    *e = (bench_entry){.workers = P, .threads = threads};
    if (pt_pipeline_create(c, &oc, &pc, &e->p))
        return fprintf(stderr, "bench_pipeline: %s\n", pt_last_error()), 1;
    cut[0] = 0;
    for (int ch = 0, first, last; pt_pipeline_chunk_blocks(e->p, ch, &first, &last) == PT_OK; ch++)
        snprintf(cut + strlen(cut), cut_size - strlen(cut), "%s%d", ch ? "," : "",
                 last - first + 1);
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1 || rounds > BENCH_MAX_ROUNDS)
        rounds = 5;
    if (argc > 2 && pt_fp32_set_kernel(argv[2]) != PT_OK)
        return fprintf(stderr, "bench_pipeline: %s\n", pt_last_error()), 2;
    int base = argc > 3 && !strcmp(argv[3], "base");
    if (argc > 3 && !base && strcmp(argv[3], "small"))
        return fprintf(stderr, "bench_pipeline: model '%s' is not small or base\n", argv[3]), 2;
    char list[256] = "1f1b", *schedules[MAX_SCHEDULES];
    if (argc > 4)
        snprintf(list, sizeof list, "%s", argv[4]);
    int n_sched = 0;
    for (char *save, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const char *colon = strchr(t, ':');
        if (colon && strcmp(colon, ":repack")) {
            fprintf(stderr, "bench_pipeline: '%s': only :repack may follow a schedule\n", t);
            return 2;
        }
        if (n_sched < MAX_SCHEDULES)
            schedules[n_sched++] = t;
    }
    if (n_sched == 0)
        return fprintf(stderr, "bench_pipeline: no schedule in '%s'\n", argv[4]), 2;
    double fma2 = bench_fma_peak_cores(2);
    pt_model_config c = bench_gpt_small();
    int mbs = 2;
    if (base)
        c.n_layer = 12, c.n_head = 12, c.n_embd = 768, mbs = 1;
    int n = M * mbs, *tok;
    pt_microbatch b = bench_random_batch(&c, n, &tok);
    int rows = n * c.seq_len; /* tokens a step */

    pt_model *m;
    pt_model_create(&c, &m);
    double flops = bench_step_flops(m, n);
    pt_model_destroy(m);

    pt_blas_set_threads(1);
    double sgemm1 = bench_sgemm_gflops(mbs * c.seq_len, 4 * c.n_embd, c.n_embd, 7);
    /* P = 1 on one thread, on two, then each schedule at P = 2 */
    int n_entries = 2 + n_sched;
    bench_entry e[2 + MAX_SCHEDULES];
    char cut[2 + MAX_SCHEDULES][64], label[2 + MAX_SCHEDULES][48];
    snprintf(label[0], sizeof label[0], "P=1, 1 BLAS thread");
    snprintf(label[1], sizeof label[1], "P=1, 2 BLAS threads");
    int rc = open_entry(&c, mbs, 1, "1f1b", 1, &e[0], cut[0], sizeof cut[0]) ||
             open_entry(&c, mbs, 1, "1f1b", 2, &e[1], cut[1], sizeof cut[1]);
    for (int i = 0; i < n_sched && !rc; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s", schedules[i]);
        char *colon = strchr(name, ':');
        pt_model_config ci = c;
        if (colon) /* ":repack", checked above */
            *colon = 0, ci.repack_weights = 1;
        snprintf(label[2 + i], sizeof label[2 + i], "P=2, %s, 1 thread each", schedules[i]);
        rc = open_entry(&ci, mbs, 2, name, 1, &e[2 + i], cut[2 + i], sizeof cut[2 + i]);
    }
    if (rc || bench_rounds(e, n_entries, &b, rounds, pt_optim_config_default(PT_OPTIM_ADAMW).lr))
        return 1;
    pt_blas_set_threads(1);
    double sgemm1b = bench_sgemm_gflops(mbs * c.seq_len, 4 * c.n_embd, c.n_embd, 7);
    double peak = 2 * (sgemm1 + sgemm1b) / 2; /* the 2-core limit, before and after */
    /* the FMA peak before and after the rounds, the higher taken: read while
     * the machine is slow, it would overstate every share of it */
    double fma2b = bench_fma_peak_cores(2), fma2a = fma2;
    fma2 = fma2b > fma2a ? fma2b : fma2a;

    printf("gpt %d layers, %d heads, %d embd, seq %d, vocab %d; %d micro-batches of %d "
           "(%d tokens per step); %.1f GFLOP per step\n",
           c.n_layer, c.n_head, c.n_embd, c.seq_len, c.vocab, M, mbs, rows, flops / 1e9);
    printf("one-thread sgemm (%dx%dx%d): %.1f GFLOP/s before, %.1f after; 2-core limit %.1f "
           "GFLOP/s\n\n",
           mbs * c.seq_len, 4 * c.n_embd, c.n_embd, sgemm1, sgemm1b, peak);
    printf("fp32 products on %s (openblas core %s); %d-bit FMA peak of 2 cores %.1f GFLOP/s "
           "(%.1f before the rounds, %.1f after)\n",
           pt_fp32_kernel(), openblas_get_corename(), bench_fma_bits(), fma2, fma2a, fma2b);
    printf("%d rounds, each one step of every configuration in turn; step s and tokens/s are "
           "medians over the rounds, vs P1x1 and vs P1x2 medians of the ratios within a "
           "round\n\n",
           rounds);
    printf("%-34s %9s %10s %9s %9s %11s %9s\n", "configuration", "step s", "tokens/s", "vs P1x1",
           "vs P1x2", "utilisation", "of peak");
    for (int i = 0; i < n_entries; i++) {
        double step = bench_round_median(e[i].step, rounds);
        printf("%-34s %9.3f %10.0f %8.2fx %8.2fx %10.1f%% %8.1f%%\n", label[i], step, rows / step,
               bench_round_speedup(&e[i], &e[0], rounds), bench_round_speedup(&e[i], &e[1], rounds),
               100 * flops / step / 1e9 / peak, 100 * flops / step / 1e9 / fma2);
    }
    printf("\nP=2, the partitioner's cut (blocks per chunk) and the bubble: medians over the "
           "rounds of the measured, of the predicted for that step's chunk times, and of their "
           "difference in each round\n");
    printf("%-14s %-10s %-8s %10s %10s %12s\n", "schedule", "cut", "worker", "measured",
           "predicted", "difference");
    for (int i = 0; i < n_sched; i++)
        for (int w = 0; w < 2; w++) {
            const bench_entry *x = &e[2 + i];
            printf("%-14s %-10s %-8d %9.1f%% %9.1f%% %+10.1f pt\n", schedules[i], cut[2 + i], w,
                   100 * bench_round_median(x->bubble[w], rounds),
                   100 * bench_round_median(x->predicted[w], rounds),
                   100 * bench_round_median_difference(x->bubble[w], x->predicted[w], rounds));
        }
    for (int i = 0; i < n_entries; i++)
        pt_pipeline_destroy(e[i].p);
    free(tok);
    return 0;
}
