/* cmd_plan_layouts.c: `pipetrain plan --tensor T --replicas D --zero Z`
 * prints what each rank of that layout holds and the predicted step time;
 * `pipetrain plan --ranks N` does it for every P x T x D = N the model
 * allows, sorted by predicted step time, marking the layouts whose fullest
 * rank is above --memory-limit and naming the ones refused and why. The
 * predictions are src/plan/layout.c's, from the blocks cmd_plan.c profiled
 * on this machine. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "plan/layout.h"

typedef struct {
    pt_layout_plan l;
    pt_layout_estimate e;
} layout_row;

static double mib(size_t b) { return (double)b / (1 << 20); }

static void print_header(void)
{
    printf("%4s %4s %4s %4s  %9s %9s %9s %9s %9s %10s  %9s %9s %9s\n", "P", "T", "D", "zero",
           "params", "grads", "moments", "activ", "comm", "peak MiB", "step ms", "tensor ms",
           "replica ms");
}

static void print_row(const layout_row *r, double cap)
{
    const pt_memory_use *u = &r->e.worst;
    printf("%4d %4d %4d %4d  %9.1f %9.1f %9.1f %9.1f %9.1f %10.1f  %9.3f %9.3f %9.3f%s\n",
           r->l.stages, r->l.tensor, r->l.replicas, r->l.zero, mib(u->params), mib(u->grads),
           mib(u->moments), mib(u->activations), mib(u->comm), mib(r->e.peak), 1e3 * r->e.step_s,
           1e3 * r->e.tensor_sum_s, 1e3 * r->e.replica_sum_s,
           cap > 0 && (double)r->e.peak > cap ? "  over the limit" : "");
}

static int by_time(const void *a, const void *b)
{
    double x = ((const layout_row *)a)->e.step_s, y = ((const layout_row *)b)->e.step_s;
    return (x > y) - (x < y);
}

static int one_layout(const pt_model_config *model, const pt_block_profile *prof,
                      const pt_layout_plan *l, double cap)
{
    layout_row r = {.l = *l};
    if (pt_layout_predict(model, prof, l, &r.e) != PT_OK) {
        fprintf(stderr, "pipetrain plan: %s\n", pt_last_error());
        return 2;
    }
    printf("%d stages x %d tensor slices x %d replicas = %d ranks, zero %d, %d micro-batches of "
           "%d (1f1b, AdamW); rank = (stage x D + replica) x T + slice\n"
           "blocks per stage:",
           l->stages, l->tensor, l->replicas, l->stages * l->tensor * l->replicas, l->zero,
           l->microbatches, l->micro_batch_size);
    for (int s = 0; s < l->stages; s++)
        printf("%s%d", s ? "," : " ", r.e.balance[s]);
    printf("\n\nthe fullest rank (stage %d, replica 0, any slice), MiB:\n", r.e.worst_stage);
    print_header();
    print_row(&r, cap);
    return 0;
}

static int rank_layouts(const pt_model_config *model, const pt_block_profile *prof,
                        const pt_layout_plan *base, int ranks, double cap)
{
    layout_row *rows = calloc((size_t)ranks * ranks, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "pipetrain plan: cannot allocate the layouts\n");
        return 1;
    }
    int n = 0;
    printf("layouts of %d ranks (P x T x D), %d micro-batches of %d (1f1b, AdamW), zero %d where "
           "D > 1; the fullest rank of each:\n",
           ranks, base->microbatches, base->micro_batch_size, base->zero);
    for (int P = 1; P <= ranks; P++)
        for (int T = 1; P * T <= ranks; T++) {
            if (ranks % (P * T))
                continue;
            layout_row *r = &rows[n];
            r->l = *base;
            r->l.stages = P, r->l.tensor = T, r->l.replicas = ranks / (P * T);
            r->l.zero = r->l.replicas > 1 ? base->zero : 0;
            r->l.sequence_parallel = T > 1 && base->sequence_parallel;
            if (pt_layout_predict(model, prof, &r->l, &r->e) == PT_OK)
                n++;
            else
                printf("  refused: P %d T %d D %d: %s\n", P, T, r->l.replicas, pt_last_error());
        }
    qsort(rows, (size_t)n, sizeof *rows, by_time);
    printf("\n");
    print_header();
    for (int i = 0; i < n; i++)
        print_row(&rows[i], cap);
    int fits = 0;
    for (int i = 0; i < n && !fits; i++)
        if (cap <= 0 || (double)rows[i].e.peak <= cap) {
            fits = 1;
            printf("\nfastest that fits: --stages %d --tensor %d --replicas %d --zero %d\n",
                   rows[i].l.stages, rows[i].l.tensor, rows[i].l.replicas, rows[i].l.zero);
        }
    if (!fits)
        printf("\nno layout of %d ranks fits %.1f MiB per rank\n", ranks, cap / (1 << 20));
    free(rows);
    return 0;
}

int cmd_plan_layouts(const pt_model_config *model, const void *profile, int stages, int tensor,
                     int sequence, int replicas, int zero, int ranks, int microbatches, int batch,
                     double memory_limit, double bandwidth, double latency)
{
    pt_layout_plan l = {.stages = stages,
                        .tensor = tensor,
                        .sequence_parallel = sequence,
                        .replicas = replicas,
                        .zero = zero,
                        .microbatches = microbatches,
                        .micro_batch_size = batch,
                        .bandwidth = bandwidth,
                        .latency = latency};
    if (l.bandwidth <= 0) { /* ranks of one machine: the sums are memory copies */
        pt_device cpu;
        l.bandwidth = pt_device_builtin("cpu", &cpu) == PT_OK ? cpu.memory_bandwidth : 1e10;
    }
    printf("tensor-group and replica sums on %s at %.3g GB/s, latency %.3g ms%s\n\n",
           bandwidth > 0 ? "the link" : "this machine's memory copies", l.bandwidth / 1e9,
           1e3 * latency, sequence ? "; sequence parallelism where T > 1" : "");
    return ranks ? rank_layouts(model, profile, &l, ranks, memory_limit)
                 : one_layout(model, profile, &l, memory_limit);
}
