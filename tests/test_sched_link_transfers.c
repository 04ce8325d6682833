/* test_sched_link_transfers: the simulators' link against closed forms.
 * A transfer of N bytes holds its link (one direction between two workers)
 * for N / bandwidth and arrives `latency` later; transfers on one link go
 * one after another, so
 *   - gpipe, P = 2, M = 1: f + (wire + lat) + f + b + w + (wire + lat) + b + w;
 *   - gpipe, P = 2, M = 4 with free compute: the four activations queue on
 *     one link and the four gradients on the other: 8 wire times;
 *   - 1f1b, P = 2, M large, F = B = W = 1: per micro-batch, the slower of
 *     the compute (3) and the loop of two in flight (3 + wire + lat);
 *   - per-boundary bytes replace transfer_bytes;
 *   - a link with no bandwidth limit is the old model (latency only), and
 *     costs with a bad bandwidth or byte count are refused;
 *   - the program a pipeline runs (lowered with split_sent_backward: a
 *     fused backward's input gradient leaves before its weight pass), 1f1b,
 *     P = 2, F = B = W = 1: per micro-batch 3 + max(0, t - W / 2) for a
 *     transfer of t, where the schedule's own play pays 3 + t; with the
 *     weight passes deferred past the next forward (defer_w), 2 + max(1, t).
 * The program simulator plays the same (tests/test_program_simulate.c). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "pipetrain.h"

#include "check.h"

static double makespan(const char *name, int P, int M, const pt_schedule_costs *c)
{
    pt_schedule *s = NULL;
    pt_schedule_sim *sim = NULL;
    double t = -1;
    if (pt_schedule_generate(name, P, M, 0, &s) == PT_OK &&
        pt_schedule_simulate(s, c, &sim) == PT_OK)
        t = sim->makespan;
    else
        CHECK(0, "%s P=%d M=%d: %s", name, P, M, pt_last_error());
    pt_schedule_sim_destroy(sim);
    pt_schedule_destroy(s);
    return t;
}

/* the makespan of the program a pipeline lowers from the schedule (its
 * weight passes deferred where defer_w) */
static double run_makespan(const char *name, int P, int M, const pt_schedule_costs *c, int defer_w)
{
    pt_schedule *s = NULL;
    pt_program *prog = NULL;
    pt_schedule_sim *sim = NULL;
    pt_lower_options o = pt_lower_options_default();
    o.split_sent_backward = 1;
    pt_schedule_config sc = pt_schedule_config_default();
    sc.name = name, sc.stages = P, sc.microbatches = M, sc.defer_w = defer_w;
    double t = -1;
    if (pt_schedule_create(&sc, &s) == PT_OK && pt_program_lower(s, &o, &prog) == PT_OK &&
        pt_program_simulate(prog, c, &sim) == PT_OK)
        t = sim->makespan;
    else
        CHECK(0, "%s P=%d M=%d lowered: %s", name, P, M, pt_last_error());
    pt_schedule_sim_destroy(sim);
    pt_program_destroy(prog);
    pt_schedule_destroy(s);
    return t;
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-9 * (1 + fabs(b)); }

int main(void)
{
    pt_schedule_costs c = pt_schedule_costs_default();
    c.f = 1, c.b = 2, c.w = 0.5, c.latency = 0.1, c.bandwidth = 4, c.transfer_bytes = 2;
    double wire = 0.5, want = 1 + (wire + 0.1) + 1 + 2.5 + (wire + 0.1) + 2.5;
    double got = makespan("gpipe", 2, 1, &c);
    CHECK(near(got, want), "gpipe M=1: makespan %.17g, want %.17g", got, want);

    pt_schedule_costs q = pt_schedule_costs_default();
    q.f = q.b = q.w = 0, q.bandwidth = 1, q.transfer_bytes = 1;
    got = makespan("gpipe", 2, 4, &q);
    CHECK(near(got, 8), "gpipe M=4, free compute: makespan %.17g, want 8 wire times", got);

    pt_schedule_costs u = pt_schedule_costs_default();
    u.bandwidth = 1, u.transfer_bytes = 2, u.latency = 0.5; /* 2.5 per transfer */
    int M = 64;
    double t64 = makespan("1f1b", 2, M, &u), t32 = makespan("1f1b", 2, M / 2, &u);
    double per = (t64 - t32) / (M / 2);
    CHECK(near(per, 3 + 2.5), "1f1b P=2: %.17g per micro-batch in the steady state, want 5.5", per);
    u.transfer_bytes = 0, u.latency = 0;
    per = (makespan("1f1b", 2, M, &u) - makespan("1f1b", 2, M / 2, &u)) / (M / 2);
    CHECK(near(per, 3), "1f1b P=2, free link: %.17g per micro-batch, want 3", per);

    /* the gradient leaves before W: half of W covers each transfer of the
     * loop of two in flight */
    static const double transfer[] = {2.5, 1, 0.2};
    for (int i = 0; i < 3; i++) {
        pt_schedule_costs split = pt_schedule_costs_default();
        split.bandwidth = 1, split.transfer_bytes = transfer[i];
        per = (run_makespan("1f1b", 2, M, &split, 0) - run_makespan("1f1b", 2, M / 2, &split, 0)) /
              (M / 2);
        double want_split = 3 + fmax(0, transfer[i] - 0.5);
        CHECK(near(per, want_split),
              "1f1b P=2 as a pipeline runs it, transfer %g: %.17g per micro-batch, want %g",
              transfer[i], per, want_split);
        /* the first worker's W after its next forward: a whole W covers it */
        per = (run_makespan("1f1b", 2, M, &split, 1) - run_makespan("1f1b", 2, M / 2, &split, 1)) /
              (M / 2);
        double want_defer = 2 + fmax(1, transfer[i]);
        CHECK(near(per, want_defer),
              "1f1b P=2, weight passes deferred, transfer %g: %.17g per micro-batch, want %g",
              transfer[i], per, want_defer);
    }

    double f[2] = {1, 1}, b[2] = {2, 2}, w[2] = {0.5, 0.5}, bytes[2] = {0, 4};
    pt_schedule_costs per_chunk = c;
    per_chunk.n_chunk_costs = 2, per_chunk.chunk_f = f, per_chunk.chunk_b = b,
    per_chunk.chunk_w = w, per_chunk.boundary_bytes = bytes; /* wire 1 across boundary 1 */
    want = 1 + (1 + 0.1) + 1 + 2.5 + (1 + 0.1) + 2.5;
    got = makespan("gpipe", 2, 1, &per_chunk);
    CHECK(near(got, want), "boundary bytes: makespan %.17g, want %.17g", got, want);

    pt_schedule_costs free_link = c;
    free_link.bandwidth = 0;
    want = 1 + 0.1 + 1 + 2.5 + 0.1 + 2.5;
    got = makespan("gpipe", 2, 1, &free_link);
    CHECK(near(got, want), "no bandwidth limit: makespan %.17g, want %.17g", got, want);

    pt_schedule *s = NULL;
    pt_schedule_sim *sim = NULL;
    CHECK(pt_schedule_generate("1f1b", 2, 4, 0, &s) == PT_OK, "1f1b: %s", pt_last_error());
    pt_schedule_costs bad = c;
    bad.bandwidth = -1;
    CHECK(pt_schedule_simulate(s, &bad, &sim) == PT_EINVAL, "a negative bandwidth was taken");
    bad = c, bad.transfer_bytes = NAN;
    CHECK(pt_schedule_simulate(s, &bad, &sim) == PT_EINVAL, "NaN bytes were taken");
    bad = c, bad.boundary_bytes = bytes;
    CHECK(pt_schedule_simulate(s, &bad, &sim) == PT_EINVAL,
          "bytes per boundary without per-chunk costs were taken");
    pt_schedule_destroy(s);
    printf("test_sched_link_transfers: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
