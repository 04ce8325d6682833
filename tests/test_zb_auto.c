/* test_zb_auto: the zero-bubble schedules searched for given times (zb1p,
 * zb2p, gen_zb_auto.c) and the handcrafted ZB-H2 (zbh2):
 *   - every order the search returns is complete and deadlock-free (the
 *     simulator validates it) on a grid of P, M and random costs;
 *   - the simulator, given the same times, plays it to the span the search
 *     predicted (the two agree on what an F, B, W and a transfer cost);
 *   - no stage ever holds more activations than the limit: F adds one
 *     micro-batch, B gives back 1 - w, W the rest;
 *   - with P's memory (zb1p) it is no slower than ZB-H1, with 2P (zb2p)
 *     and M >= 2P it is at least as fast as zb1p, and at F = B = W without
 *     latency and M >= 3P its bubble is zero;
 *   - zbh2 on F = B = W holds at most 2(P-r)-1 micro-batches between F and
 *     B on worker r and idles (P-1)(F+B-2W) = 0 per worker once M >= 2P;
 *   - a limit below one micro-batch is refused with a message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "sched/schedule.h"

#include "check.h"

static double frand(unsigned *seed) { return (double)(rand_r(seed) % 1000) / 1000.0; }

static pt_schedule *make(const char *name, int P, int M, const pt_schedule_costs *c, double limit,
                         double w_memory)
{
    pt_schedule_config cfg = pt_schedule_config_default();
    cfg.name = name, cfg.stages = P, cfg.microbatches = M, cfg.costs = c;
    cfg.memory_limit = limit, cfg.w_memory = w_memory;
    pt_schedule *s = NULL;
    if (pt_schedule_create(&cfg, &s) != PT_OK)
        CHECK(0, "%s P=%d M=%d limit %g: %s", name, P, M, limit, pt_last_error());
    return s;
}

/* Most activations any worker holds over its list, in micro-batches. */
static double peak_memory(const pt_schedule *s, double w_memory)
{
    double most = 0;
    for (int r = 0; r < s->n_workers; r++) {
        double mem = 0;
        for (int i = 0; i < s->n_actions[r]; i++) {
            pt_action_kind k = s->actions[r][i].kind;
            mem += k == PT_ACT_F ? 1 : k == PT_ACT_B ? w_memory - 1 : -w_memory;
            most = mem > most ? mem : most;
        }
    }
    return most;
}

static double span_of(const pt_schedule *s, const pt_schedule_costs *c)
{
    pt_schedule_sim *sim;
    if (pt_schedule_simulate(s, c, &sim) != PT_OK) {
        CHECK(0, "%s: %s", s->name, pt_last_error());
        return -1;
    }
    double span = sim->span;
    pt_schedule_sim_destroy(sim);
    return span;
}

static void check_search(int P, int M, const pt_schedule_costs *c, double w_memory)
{
    double f[64], b[64], w[64];
    for (int j = 0; j < P; j++)
        f[j] = c->f, b[j] = c->b, w[j] = c->w;
    for (double limit = P; limit <= 2 * P; limit += P) {
        pt_zb_problem pb = {.stages = P,
                            .micro = M,
                            .f = f,
                            .b = b,
                            .w = w,
                            .comm = c->latency,
                            .mem_limit = limit,
                            .mem_w = w_memory};
        pt_schedule *s;
        double predicted;
        if (pt_sched_gen_zb_auto(&pb, &s, &predicted) != PT_OK) {
            CHECK(0, "P=%d M=%d limit %g: %s", P, M, limit, pt_last_error());
            continue;
        }
        double played = span_of(s, c);
        CHECK(fabs(played - predicted) <= 1e-9 * (1 + predicted),
              "P=%d M=%d limit %g: simulator span %g, search predicted %g", P, M, limit, played,
              predicted);
        double peak = peak_memory(s, w_memory);
        CHECK(peak <= limit + 1e-9, "P=%d M=%d: holds %g micro-batches over the limit %g", P, M,
              peak, limit);
        pt_schedule_destroy(s);
    }
}

int main(void)
{
    unsigned seed = 7;
    for (int P = 1; P <= 8; P++)
        for (int M = 1; M <= 24; M += (M < 4 ? 1 : 5)) {
            pt_schedule_costs c = pt_schedule_costs_default();
            c.f = 0.5 + frand(&seed), c.b = 0.5 + frand(&seed), c.w = 0.1 + frand(&seed);
            c.latency = 0.1 * frand(&seed);
            check_search(P, M, &c, 0.1 + 0.8 * frand(&seed));
            check_search(P, M, &(pt_schedule_costs){.f = 1, .b = 1, .w = 1}, 0.5);
        }
    /* against the handcrafted schedules */
    for (int P = 2; P <= 8; P++)
        for (int M = P; M <= 4 * P; M += P) {
            pt_schedule_costs c = pt_schedule_costs_default();
            c.f = 1.2, c.b = 1.1, c.w = 0.6, c.latency = 0.05;
            pt_schedule *h1 = NULL, *z1 = make("zb1p", P, M, &c, 0, 0.4);
            pt_schedule *z2 = make("zb2p", P, M, &c, 0, 0.4);
            pt_schedule_generate("zbh1", P, M, 1, &h1);
            if (!h1 || !z1 || !z2)
                continue;
            double sh1 = span_of(h1, &c), s1 = span_of(z1, &c), s2 = span_of(z2, &c);
            CHECK(s1 <= sh1 + 1e-9, "P=%d M=%d: zb1p span %g above zbh1's %g", P, M, s1, sh1);
            if (M >= 2 * P)
                CHECK(s2 <= s1 + 1e-9, "P=%d M=%d: zb2p span %g above zb1p's %g", P, M, s2, s1);
            pt_schedule_destroy(h1);
            pt_schedule_destroy(z1);
            pt_schedule_destroy(z2);
            pt_schedule_costs unit = pt_schedule_costs_default();
            if (M >= 3 * P) {
                pt_schedule *u = make("zb2p", P, M, &unit, 0, 0.5);
                double span = u ? span_of(u, &unit) : 0;
                CHECK(fabs(span - 3.0 * M) < 1e-9, "P=%d M=%d: zb2p at F=B=W spans %g, want %d", P,
                      M, span, 3 * M);
                pt_schedule_destroy(u);
            }
            /* ZB-H2 */
            pt_schedule *h2 = NULL;
            if (pt_schedule_generate("zbh2", P, M, 1, &h2) != PT_OK) {
                CHECK(0, "zbh2 P=%d M=%d: %s", P, M, pt_last_error());
                continue;
            }
            pt_schedule_sim *sim;
            REQUIRE(pt_schedule_simulate(h2, &unit, &sim) == PT_OK, "zbh2: %s", pt_last_error());
            for (int r = 0; r < P; r++) {
                int in_flight = 0, most = 0;
                for (int i = 0; i < h2->n_actions[r]; i++) {
                    in_flight += h2->actions[r][i].kind == PT_ACT_F   ? 1
                                 : h2->actions[r][i].kind == PT_ACT_B ? -1
                                                                      : 0;
                    most = in_flight > most ? in_flight : most;
                }
                CHECK(most <= 2 * (P - r) - 1, "zbh2 P=%d M=%d worker %d: %d in flight", P, M, r,
                      most);
                if (M >= 2 * P)
                    CHECK(fabs(sim->span - 3.0 * M) < 1e-9,
                          "zbh2 P=%d M=%d: span %g, want %d (no bubble)", P, M, sim->span, 3 * M);
            }
            pt_schedule_sim_destroy(sim);
            pt_schedule_destroy(h2);
        }
    /* refusals */
    pt_schedule_config cfg = pt_schedule_config_default();
    cfg.name = "zb1p", cfg.stages = 4, cfg.microbatches = 8, cfg.memory_limit = 0.5;
    pt_schedule *s = NULL;
    CHECK(pt_schedule_create(&cfg, &s) == PT_EINVAL && strstr(pt_last_error(), "memory limit"),
          "a limit below one micro-batch: %s", pt_last_error());
    cfg.memory_limit = 0, cfg.w_memory = 1.5;
    CHECK(pt_schedule_create(&cfg, &s) == PT_EINVAL && strstr(pt_last_error(), "[0, 1]"),
          "a W share above 1: %s", pt_last_error());
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
