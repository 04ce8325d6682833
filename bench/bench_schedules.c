/* bench_schedules: do the zero-bubble schedules pay on this machine, and
 * does the simulator predict each worker's bubble?
 *
 * gpt with 4 layers, 6 heads, 384 embd, seq 256, vocab 256, micro-batches of
 * 2 samples, 16 micro-batches per step (8192 tokens), AdamW, full training
 * steps through pt_pipeline, one BLAS thread per worker:
 *   P = 2   1f1b, zbh1, zbv, interleaved, zb1p, zb2p (the partitioner's cut;
 *           the zero-bubble orders built for the profiled chunk times)
 *   P = 4   the same on 4 threads sharing the cores (zbv and interleaved need
 *           8 chunks: refused when the model has fewer blocks)
 * Prints tokens/s, the ratio to 1f1b at the same P, and per worker the
 * measured bubble (1 - busy / the step's span) next to the simulator's
 * prediction for the step's measured per-chunk times, each the median over
 * the steps after a warm-up step. The machine may be shared: compare figures
 * within one run.
 * Usage: bench_schedules [steps] [schedule...] (default 6 steps, all). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define MBS   2
#define M     16
#define MAX_P 4

typedef struct {
    double step_s;
    double bubble[MAX_P], predicted[MAX_P];
} result;

/* Runs `steps` steps after a warm-up; 1 when the pipeline refuses the
 * configuration (its message printed), -1 on a failed step. */
static int run(const pt_model_config *c, const char *schedule, int P, int steps,
               const pt_microbatch *b, result *res)
{
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = P, pc.microbatches = M, pc.micro_batch_size = MBS, pc.schedule = schedule;
    pc.blas_threads = 1;
    pt_pipeline *p;
    if (pt_pipeline_create(c, &oc, &pc, &p))
        return printf("%-12s P=%d  refused: %s\n", schedule, P, pt_last_error()), 1;
    double t[32], bub[MAX_P][32], pred[MAX_P][32];
    float loss;
    for (int s = 0; s <= steps; s++) {
        double t0 = bench_now();
        if (pt_pipeline_train_step(p, b, s, oc.lr, &loss) != PT_OK) {
            fprintf(stderr, "bench_schedules: %s\n", pt_last_error());
            pt_pipeline_destroy(p);
            return -1;
        }
        if (s == 0)
            continue; /* the warm-up */
        t[s - 1] = bench_now() - t0;
        double mb[MAX_P], pb[MAX_P];
        pt_pipeline_bubbles(p, mb, pb);
        for (int w = 0; w < P; w++)
            bub[w][s - 1] = mb[w], pred[w][s - 1] = pb[w];
    }
    res->step_s = bench_median(t, steps);
    for (int w = 0; w < P; w++)
        res->bubble[w] = bench_median(bub[w], steps),
        res->predicted[w] = bench_median(pred[w], steps);
    pt_pipeline_destroy(p);
    return 0;
}

static bool wanted(const char *name, int argc, char **argv)
{
    if (argc <= 2)
        return true;
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], name))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 6;
    if (steps < 1 || steps > 32)
        steps = 6;
    pt_model_config c = bench_gpt_small();
    int n = M * MBS, *tok;
    pt_microbatch b = bench_random_batch(&c, n, &tok);
    int rows = n * c.seq_len;
    static const char *const names[] = {"1f1b", "zbh1", "zbv", "interleaved", "zb1p", "zb2p"};
    int n_names = (int)(sizeof names / sizeof *names);

    printf("gpt 4 layers, 6 heads, 384 embd, seq 256, vocab 256; %d micro-batches of %d (%d "
           "tokens per step); 1 BLAS thread per worker; medians of %d steps\n\n",
           M, MBS, rows, steps);
    printf("%-12s %2s %9s %10s %8s  %s\n", "schedule", "P", "step s", "tokens/s", "vs 1f1b",
           "bubble per worker: measured / predicted (difference)");
    int worst = 0;
    double most = 0;
    for (int P = 2; P <= MAX_P; P += 2) {
        double base = 0;
        for (int i = 0; i < n_names; i++) {
            if (i > 0 && !wanted(names[i], argc, argv))
                continue;
            result r;
            int rc = run(&c, names[i], P, steps, &b, &r);
            if (rc < 0)
                return 1;
            if (rc > 0)
                continue;
            if (i == 0)
                base = r.step_s;
            printf("%-12s %2d %9.3f %10.0f %7.3fx ", names[i], P, r.step_s, rows / r.step_s,
                   base / r.step_s);
            for (int w = 0; w < P; w++) {
                double d = 100 * (r.bubble[w] - r.predicted[w]);
                printf(" %4.1f/%4.1f (%+.1f)", 100 * r.bubble[w], 100 * r.predicted[w], d);
                if (d * d > most * most)
                    most = d, worst = P;
            }
            printf("\n");
            fflush(stdout);
        }
    }
    printf("\nlargest miss of the simulator: %+.1f points (at P=%d)\n", most, worst);
    free(tok);
    return 0;
}
