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
 * prediction for the step's measured per-chunk times, and the step's span
 * over the simulated makespan (every worker's busy time is the same in
 * both, so a miss shared by all the workers is this). The schedules of one
 * P run in rounds (bench_rounds.h): one step of each in turn per round,
 * after a warm-up step of each; every figure is a median over the rounds,
 * the ratio to 1f1b and the bubble's difference from its prediction taken
 * within a round. The machine may be shared: compare figures within one
 * run.
 * Usage: bench_schedules [rounds] [--bind-cores] [schedule...] (default 6
 * rounds, all; --bind-cores binds each worker to a CPU of its own,
 * pt_pipeline_config.bind_cores, and leaves out a P larger than the CPUs). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_rounds.h"

#define MBS   2
#define M     16
#define MAX_P 4

static const char *const names[] = {"1f1b", "zbh1", "zbv", "interleaved", "zb1p", "zb2p"};
#define N_NAMES ((int)(sizeof names / sizeof *names))

static int bind_cores; /* --bind-cores */

/* A pipeline of P workers on one BLAS thread each: 0, or 1 when it refuses
 * the configuration (its message printed). */
static int open_entry(const pt_model_config *c, const char *schedule, int P, bench_entry *e)
{
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = P, pc.microbatches = M, pc.micro_batch_size = MBS, pc.schedule = schedule;
    pc.blas_threads = 1;
    pc.bind_cores = bind_cores;
    *e = (bench_entry){.workers = P, .threads = 1};
    if (pt_pipeline_create(c, &oc, &pc, &e->p))
        return printf("%-12s P=%d  refused: %s\n", schedule, P, pt_last_error()), 1;
    return 0;
}

static bool wanted(const char *name, int argc, char **argv)
{
    bool any = false;
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--bind-cores")) {
            any = true;
            if (!strcmp(argv[i], name))
                return true;
        }
    return !any;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 6;
    if (rounds < 1 || rounds > BENCH_MAX_ROUNDS)
        rounds = 6;
    for (int i = 2; i < argc; i++)
        bind_cores |= !strcmp(argv[i], "--bind-cores");
    pt_model_config c = bench_gpt_small();
    int n = M * MBS, *tok;
    pt_microbatch b = bench_random_batch(&c, n, &tok);
    int rows = n * c.seq_len;

    printf("gpt 4 layers, 6 heads, 384 embd, seq 256, vocab 256; %d micro-batches of %d (%d "
           "tokens per step); 1 BLAS thread per worker%s; medians of %d rounds, each one step of "
           "every schedule of a P in turn\n\n",
           M, MBS, rows, bind_cores ? ", each bound to a CPU of its own" : "", rounds);
    printf("%-12s %2s %9s %10s %8s %8s  %s\n", "schedule", "P", "step s", "tokens/s", "vs 1f1b",
           "vs sim", "bubble per worker: measured / predicted (difference)");
    int worst = 0;
    double most = 0;
    for (int P = 2; P <= MAX_P; P += 2) {
        bench_entry e[N_NAMES];
        const char *name[N_NAMES];
        int n_open = 0;
        for (int i = 0; i < N_NAMES; i++)
            if ((i == 0 || wanted(names[i], argc, argv)) &&
                !open_entry(&c, names[i], P, &e[n_open]))
                name[n_open++] = names[i];
        if (n_open == 0 && bind_cores)
            continue; /* more workers than CPUs to bind them to */
        if (n_open == 0 || strcmp(name[0], "1f1b"))
            return fprintf(stderr, "bench_schedules: 1f1b at P=%d was refused\n", P), 1;
        if (bench_rounds(e, n_open, &b, rounds, pt_optim_config_default(PT_OPTIM_ADAMW).lr))
            return 1;
        for (int i = 0; i < n_open; i++) {
            double step = bench_round_median(e[i].step, rounds);
            printf("%-12s %2d %9.3f %10.0f %7.3fx %7.3fx ", name[i], P, step, rows / step,
                   bench_round_speedup(&e[i], &e[0], rounds),
                   bench_round_span_ratio(&e[i], rounds));
            for (int w = 0; w < P; w++) {
                double d =
                    100 * bench_round_median_difference(e[i].bubble[w], e[i].predicted[w], rounds);
                printf(" %4.1f/%4.1f (%+.1f)", 100 * bench_round_median(e[i].bubble[w], rounds),
                       100 * bench_round_median(e[i].predicted[w], rounds), d);
                if (d * d > most * most)
                    most = d, worst = P;
            }
            printf("\n");
            pt_pipeline_destroy(e[i].p);
        }
        fflush(stdout);
    }
    printf("\nlargest miss of the simulator: %+.1f points (at P=%d)\n", most, worst);
    free(tok);
    return 0;
}
