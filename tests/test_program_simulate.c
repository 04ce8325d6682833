/* test_program_simulate: the program simulator against the schedule
 * simulator. For every synchronous generator without replicas over P =
 * 1..6, M = 1..16, v = 1..3, lowered with the first and last chunk tied and
 * NORM and STEP, the program plays to exactly the schedule's makespan,
 * bubble fraction, per-worker busy and idle time and peak activations: with
 * unit costs, with unequal F, B, W costs, and with a transfer latency (a
 * send arrives `latency` after it is posted, as the schedule simulator's
 * inputs do), and with a link of limited bandwidth (each transfer's wire
 * time, one transfer after another per link, in both). Replicated and asynchronous programs
 * (1f1b-rr, pipedream) play to the end, never faster than their schedule, and 1f1b-rr exactly as
 * fast with free collectives. A collective cost lengthens 1f1b by one NORM, and by one TIED more
 * with a tied pair. */
#include <stdio.h>
#include <stdlib.h>

#include "pipetrain.h"
#include "sched/program.h"

#include "check.h"

static int compared;

/* The simulations of s and of its lowered program, or false. */
static bool both(const pt_schedule *s, const pt_schedule_costs *c, pt_schedule_sim **a,
                 pt_schedule_sim **b, const char *what)
{
    int tied[2] = {0, pt_schedule_chunks(s) - 1};
    pt_lower_options o = pt_lower_options_default();
    o.tied = tied;
    o.n_tied = tied[1] > 0;
    pt_program *p = NULL;
    *a = *b = NULL;
    int rc = pt_program_lower(s, &o, &p);
    if (rc == PT_OK)
        rc = pt_program_simulate(p, c, b);
    if (rc == PT_OK)
        rc = pt_schedule_simulate(s, c, a);
    pt_program_destroy(p);
    CHECK(rc == PT_OK, "%s: %s", what, pt_last_error());
    compared++;
    return rc == PT_OK;
}

static void check_equal(const char *name, int P, int M, int v, const pt_schedule_costs *c,
                        const char *costs)
{
    char what[128];
    snprintf(what, sizeof what, "%s P=%d M=%d v=%d (%s)", name, P, M, v, costs);
    pt_schedule *s = NULL;
    pt_schedule_sim *a = NULL, *b = NULL;
    if (pt_schedule_generate(name, P, M, v, &s) != PT_OK) {
        CHECK(0, "%s: %s", what, pt_last_error());
        return;
    }
    if (both(s, c, &a, &b, what)) {
        CHECK(a->makespan == b->makespan, "%s: makespan %.17g, program %.17g", what, a->makespan,
              b->makespan);
        CHECK(a->bubble_fraction == b->bubble_fraction, "%s: bubble %.17g, program %.17g", what,
              a->bubble_fraction, b->bubble_fraction);
        for (int w = 0; w < a->workers; w++)
            CHECK(a->busy[w] == b->busy[w] && a->idle[w] == b->idle[w] &&
                      a->peak_activations[w] == b->peak_activations[w],
                  "%s: worker %d: busy %g/%g idle %g/%g peak %d/%d", what, w, a->busy[w],
                  b->busy[w], a->idle[w], b->idle[w], a->peak_activations[w],
                  b->peak_activations[w]);
    }
    pt_schedule_sim_destroy(a);
    pt_schedule_sim_destroy(b);
    pt_schedule_destroy(s);
}

static void check_replicated(const char *name, int P, int M, int R)
{
    char what[96];
    snprintf(what, sizeof what, "%s P=%d M=%d R=%d", name, P, M, R);
    pt_schedule_config cfg = {
        .name = name, .stages = P, .microbatches = M, .virtual_stages = 1, .replicas = R};
    pt_schedule *s = NULL;
    pt_schedule_sim *a = NULL, *b = NULL;
    if (pt_schedule_create(&cfg, &s) != PT_OK) {
        CHECK(0, "%s: %s", what, pt_last_error());
        return;
    }
    pt_schedule_costs c = pt_schedule_costs_default();
    if ((R == 1 || M % R == 0 || name[0] == '1') && both(s, &c, &a, &b, what)) {
        CHECK(b->makespan >= a->makespan, "%s: program %g faster than its schedule %g", what,
              b->makespan, a->makespan);
        CHECK(name[0] != '1' || b->makespan == a->makespan, "%s: 1f1b-rr program %g, schedule %g",
              what, b->makespan, a->makespan);
    }
    pt_schedule_sim_destroy(a);
    pt_schedule_sim_destroy(b);
    pt_schedule_destroy(s);
}

/* 1f1b P=4 M=8: the step ends with TIED (optional) and NORM, each `cost`. */
static void check_collective_cost(int n_tied, double cost)
{
    pt_schedule *s = NULL;
    pt_program *p = NULL;
    pt_schedule_sim *a = NULL, *b = NULL;
    int tied[2] = {0, 3};
    pt_lower_options o = pt_lower_options_default();
    o.tied = tied;
    o.n_tied = n_tied;
    pt_schedule_costs c = pt_schedule_costs_default();
    c.collective = cost;
    int rc = pt_schedule_generate("1f1b", 4, 8, 0, &s);
    if (rc == PT_OK)
        rc = pt_program_lower(s, &o, &p);
    if (rc == PT_OK)
        rc = pt_program_simulate(p, &c, &b);
    if (rc == PT_OK)
        rc = pt_schedule_simulate(s, &c, &a);
    CHECK(rc == PT_OK, "collective cost: %s", pt_last_error());
    if (rc == PT_OK)
        CHECK(b->makespan == a->makespan + (1 + n_tied) * cost,
              "collective cost %g, %d tied: makespan %g, schedule %g", cost, n_tied, b->makespan,
              a->makespan);
    c.collective = -1;
    pt_schedule_sim *bad = NULL;
    CHECK(p && pt_program_simulate(p, &c, &bad) == PT_EINVAL && !bad,
          "a negative collective cost was taken");
    pt_schedule_sim_destroy(a);
    pt_schedule_sim_destroy(b);
    pt_program_destroy(p);
    pt_schedule_destroy(s);
}

int main(void)
{
    pt_schedule_costs unit = pt_schedule_costs_default(), other = unit, late = unit;
    other.f = 2, other.b = 3, other.w = 0.5;
    late.latency = 0.5;
    pt_schedule_costs wire = other; /* 0.75 on the wire, one after another per link */
    wire.latency = 0.25, wire.bandwidth = 2, wire.transfer_bytes = 1.5;
    for (int P = 1; P <= 6; P++)
        for (int M = 1; M <= 16; M++) {
            const char *flat[] = {"gpipe", "1f1b", "zbh1"};
            for (int i = 0; i < 3; i++) {
                check_equal(flat[i], P, M, 1, &unit, "unit");
                check_equal(flat[i], P, M, 1, &other, "F2 B3 W0.5");
                check_equal(flat[i], P, M, 1, &late, "latency 0.5");
                check_equal(flat[i], P, M, 1, &wire, "link 0.75 + 0.25");
            }
            for (int v = 1; v <= 3; v++) {
                check_equal("loopedbfs", P, M, v, &unit, "unit");
                check_equal("loopedbfs", P, M, v, &late, "latency 0.5");
                if (v == 1 || M % P == 0) {
                    check_equal("interleaved", P, M, v, &unit, "unit");
                    check_equal("interleaved", P, M, v, &other, "F2 B3 W0.5");
                    check_equal("interleaved", P, M, v, &wire, "link 0.75 + 0.25");
                }
            }
            check_equal("zbv", P, M, 2, &unit, "unit");
            check_equal("zbv", P, M, 2, &other, "F2 B3 W0.5");
            for (int R = 1; R <= 2; R++) {
                check_replicated("1f1b-rr", P, M, R);
                check_replicated("pipedream", P, M, R);
            }
        }
    check_collective_cost(0, 2.5);
    check_collective_cost(1, 2.5);
    printf("%d simulations compared, %d failures\n", compared, failures);
    return failures ? 1 : 0;
}
