/* bench_rounds.h: pipelines compared in rounds. On a shared machine the
 * speed moves by 10-15% over minutes, more than schedules differ, so
 * configurations run one after another, each for all its steps, are
 * compared at different speeds of the machine. Here every configuration's
 * pipeline is created first and then each round runs one step of each, in
 * an order rotated from round to round; a configuration's figure against
 * another is the median over the rounds of the ratio of their step times
 * in the same round. Each round starts after a warm-up step of every
 * pipeline. Header-only, beside bench_common.h. */
#ifndef PT_BENCH_ROUNDS_H
#define PT_BENCH_ROUNDS_H

#include <stdio.h>

#include "bench_common.h"

#define BENCH_MAX_ROUNDS  32
#define BENCH_MAX_WORKERS 4

typedef struct {
    pt_pipeline *p;
    int workers, threads; /* BLAS threads per worker, set before each of its steps */
    double step[BENCH_MAX_ROUNDS];
    double bubble[BENCH_MAX_WORKERS][BENCH_MAX_ROUNDS],
        predicted[BENCH_MAX_WORKERS][BENCH_MAX_ROUNDS];
} bench_entry;

/* One training step of e, timed, with its workers' bubbles (round r >= 0;
 * -1: the warm-up, not kept). */
static inline int bench_entry_step(bench_entry *e, const pt_microbatch *b, int r, float lr)
{
    float loss;
    pt_blas_set_threads(e->threads); /* the product threads are the process's */
    double t0 = bench_now();
    if (pt_pipeline_train_step(e->p, b, r + 1, lr, &loss) != PT_OK)
        return fprintf(stderr, "bench: %s\n", pt_last_error()), -1;
    if (r < 0)
        return 0;
    e->step[r] = bench_now() - t0;
    double mb[BENCH_MAX_WORKERS] = {0}, pb[BENCH_MAX_WORKERS] = {0};
    pt_pipeline_bubbles(e->p, mb, pb);
    for (int w = 0; w < e->workers && w < BENCH_MAX_WORKERS; w++)
        e->bubble[w][r] = mb[w], e->predicted[w][r] = pb[w];
    return 0;
}

/* A warm-up step of every entry, then `rounds` rounds (at most
 * BENCH_MAX_ROUNDS), entry (i + r) mod n running i-th in round r. */
static inline int bench_rounds(bench_entry *e, int n, const pt_microbatch *b, int rounds, float lr)
{
    for (int i = 0; i < n; i++)
        if (bench_entry_step(&e[i], b, -1, lr))
            return -1;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n; i++)
            if (bench_entry_step(&e[(i + r) % n], b, r, lr))
                return -1;
    return 0;
}

/* the median of a per-round series (copied: the series stays in order) */
static inline double bench_round_median(const double *x, int rounds)
{
    double y[BENCH_MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        y[r] = x[r];
    return bench_median(y, rounds);
}

/* the median over the rounds of x - y, each pair from the same round: a
 * worker's measured bubble against the simulator's prediction for that
 * step's measured chunk times (the medians of the two apart would pair
 * one step's measurement with another's prediction) */
static inline double bench_round_median_difference(const double *x, const double *y, int rounds)
{
    double d[BENCH_MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        d[r] = x[r] - y[r];
    return bench_median(d, rounds);
}

/* How much longer e's steps ran than the simulator's play of them: a
 * worker's busy time is the same in both (the program played with each
 * chunk's mean times, once per action), so (1 - predicted) / (1 - measured)
 * is the measured step's span over the simulated makespan. The mean over
 * the workers in a round, the median over the rounds; where it is not 1, a
 * bubble's miss is this and not one worker waiting on another. */
static inline double bench_round_span_ratio(const bench_entry *e, int rounds)
{
    double ratio[BENCH_MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        double sum = 0;
        for (int w = 0; w < e->workers; w++)
            sum += (1 - e->predicted[w][r]) / (1 - e->bubble[w][r]);
        ratio[r] = sum / e->workers;
    }
    return bench_median(ratio, rounds);
}

/* e's speed against base's: the median over the rounds of base's step time
 * over e's in the same round */
static inline double bench_round_speedup(const bench_entry *e, const bench_entry *base, int rounds)
{
    double ratio[BENCH_MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        ratio[r] = base->step[r] / e->step[r];
    return bench_median(ratio, rounds);
}

#endif
