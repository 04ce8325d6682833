/* bench_plan_search: how long the planner takes to rank every layout of a
 * model on a cluster (src/plan/search.c), on one core: the search is one
 * thread and calls no BLAS. The case the issue sets: Narayanan et al.'s 1T
 * GPT (128 layers, 160 heads, width 25,600, sequence 2048, vocabulary
 * 51,200) on their 3,072 A100s (384 nodes of 8; NVLink 300 GB/s, 25 GB/s
 * of network per GPU), a batch of 3,072, fp16; then GPT-3 175B on 1,024
 * of them and GPT-2 XL on 64 H100s. Each row is the median of three runs;
 * the last column is the time over the 10 s budget, which it must stay
 * under. */
#include <stdio.h>
#include <string.h>

#include "bench_common.h"
#include "pipetrain.h"

typedef struct {
    const char *model, *device;
    int nodes, batch;
} search_case;

int main(void)
{
    const search_case cases[] = {
        {"megatron-1t", "a100-80gb", 384, 3072},
        {"gpt3-175b", "a100-80gb", 128, 1536},
        {"gpt2-xl", "h100", 8, 512},
    };
    const double budget = 10;
    printf("%-12s %-10s %7s %6s %9s %8s %9s %8s  %s\n", "model", "device", "devices", "batch",
           "layouts", "played", "seconds", "/budget", "best layout");
    int over = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const search_case *k = &cases[i];
        pt_cluster c = {.nodes = k->nodes, .devices_per_node = 8};
        snprintf(c.name, sizeof c.name, "bench");
        pt_model_config m;
        if (pt_device_builtin(k->device, &c.device) != PT_OK ||
            pt_model_config_named(k->model, &m) != PT_OK) {
            fprintf(stderr, "%s\n", pt_last_error());
            return 1;
        }
        c.intra_node = (pt_interconnect){.latency = 0, .bandwidth = 300e9};
        c.inter_node = (pt_interconnect){.latency = 0, .bandwidth = 25e9};
        pt_search_config cfg = pt_search_config_default();
        cfg.global_batch = k->batch;
        cfg.precision = PT_PLAN_FP16;
        pt_plan_candidate best[5];
        pt_search_stats stats = {0};
        int n = 0;
        double t[3];
        for (int r = 0; r < 3; r++) {
            double t0 = bench_now();
            if (pt_plan_search(&c, &m, &cfg, NULL, best, 5, &n, &stats) != PT_OK) {
                fprintf(stderr, "%s: %s\n", k->model, pt_last_error());
                return 1;
            }
            t[r] = bench_now() - t0;
        }
        double s = bench_median(t, 3);
        const pt_layout *l = &best[0].layout;
        printf("%-12s %-10s %7d %6d %9ld %8ld %9.2f %8.3f  P%d T%d D%d %s v%d mbs%d: %.1f "
               "TFLOP/s\n",
               k->model, k->device, k->nodes * 8, k->batch, stats.layouts, stats.played, s,
               s / budget, l->pipeline, l->tensor, l->data, l->schedule, l->virtual_stages,
               l->micro_batch_size, best[0].prediction.flops_per_device / 1e12);
        over |= s >= budget;
    }
    return over;
}
