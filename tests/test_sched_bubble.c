/* test_sched_bubble: the simulator against the closed forms of the field
 * (REFERENCES.md), computed here from P, M, v and the costs:
 *   gpipe, 1f1b:  bubble (P-1)/(M+P-1), for any equal stage costs;
 *   gpipe with latency L: makespan (M+P-1)(F+B+W) + 2(P-1)L;
 *   interleaved (M a multiple of P): (P-1)/(v*M+P-1);
 *   zbh1 (M >= P): idle per worker (P-1)(F+B-W), a third of 1f1b's at F=B=W;
 *   zbv below zbh1 at the same P, M;
 *   peaks: gpipe's worker 0 holds M, 1f1b's worker r min(P-r, M), zbh1's
 *   peak no higher than 1f1b's;
 *   pipedream: the forward of micro-batch m on worker r uses weight version
 *   max(0, m-(P-1-r)) (the backwards before it in 1F1B order). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "pipetrain.h"
#include "sched/schedule.h"

#include "check.h"

static bool near(double a, double b) { return fabs(a - b) <= 1e-9 * (1 + fabs(b)); }

static pt_schedule_sim *play(const char *name, int P, int M, int v, pt_schedule_costs c,
                             pt_schedule **keep)
{
    pt_schedule *s;
    pt_schedule_sim *sim = NULL;
    if (pt_schedule_generate(name, P, M, v, &s) != PT_OK) {
        CHECK(0, "%s P=%d M=%d v=%d: %s", name, P, M, v, pt_last_error());
        return NULL;
    }
    if (pt_schedule_simulate(s, &c, &sim) != PT_OK)
        CHECK(0, "%s P=%d M=%d: %s", name, P, M, pt_last_error());
    if (keep)
        *keep = s;
    else
        pt_schedule_destroy(s);
    return sim;
}

static int max_peak(const pt_schedule_sim *r)
{
    int m = 0;
    for (int w = 0; w < r->workers; w++)
        m = r->peak_activations[w] > m ? r->peak_activations[w] : m;
    return m;
}

int main(void)
{
    pt_schedule_costs unit = pt_schedule_costs_default();
    pt_schedule_costs other = unit;
    other.f = 2, other.b = 3, other.w = 0.5;
    for (int P = 1; P <= 8; P++)
        for (int M = 1; M <= 32; M++) {
            double flush = (double)(P - 1) / (M + P - 1);
            pt_schedule_sim *g = play("gpipe", P, M, 0, unit, NULL);
            pt_schedule_sim *o = play("1f1b", P, M, 0, unit, NULL);
            pt_schedule_sim *g2 = play("gpipe", P, M, 0, other, NULL);
            pt_schedule_sim *o2 = play("1f1b", P, M, 0, other, NULL);
            if (!g || !o || !g2 || !o2)
                return 1;
            CHECK(near(g->bubble_fraction, flush), "gpipe P=%d M=%d bubble %.12g, want %.12g", P, M,
                  g->bubble_fraction, flush);
            CHECK(near(o->bubble_fraction, flush), "1f1b P=%d M=%d bubble %.12g, want %.12g", P, M,
                  o->bubble_fraction, flush);
            CHECK(near(g2->bubble_fraction, flush) && near(o2->bubble_fraction, flush),
                  "P=%d M=%d F=2 B=3 W=.5: gpipe %g 1f1b %g, want %g", P, M, g2->bubble_fraction,
                  o2->bubble_fraction, flush);
            CHECK(g->peak_activations[0] == M, "gpipe P=%d M=%d worker 0 peak %d", P, M,
                  g->peak_activations[0]);
            for (int r = 0; r < P; r++) {
                int want = P - r < M ? P - r : M;
                CHECK(o->peak_activations[r] == want, "1f1b P=%d M=%d worker %d peak %d, want %d",
                      P, M, r, o->peak_activations[r], want);
            }

            pt_schedule_sim *z = play("zbh1", P, M, 0, unit, NULL);
            pt_schedule_sim *zv = play("zbv", P, M, 2, unit, NULL);
            if (!z || !zv)
                return 1;
            CHECK(max_peak(z) <= max_peak(o), "zbh1 P=%d M=%d peak %d above 1f1b's %d", P, M,
                  max_peak(z), max_peak(o));
            if (M >= P) {
                for (int r = 0; r < P; r++) {
                    double want = (P - 1) * (unit.f + unit.b - unit.w);
                    CHECK(near(z->idle[r], want), "zbh1 P=%d M=%d worker %d idle %g, want %g", P, M,
                          r, z->idle[r], want);
                    CHECK(near(3 * z->idle[r], o->idle[r]),
                          "zbh1 P=%d M=%d: idle %g is not a third of 1f1b's %g", P, M, z->idle[r],
                          o->idle[r]);
                }
                if (P > 1)
                    CHECK(zv->bubble_fraction < z->bubble_fraction,
                          "zbv P=%d M=%d bubble %g not below zbh1's %g", P, M, zv->bubble_fraction,
                          z->bubble_fraction);
            }
            for (int v = 2; v <= 4 && M % P == 0; v++) {
                pt_schedule_sim *in = play("interleaved", P, M, v, unit, NULL);
                if (!in)
                    return 1;
                double want = (double)(P - 1) / (v * M + P - 1);
                CHECK(near(in->bubble_fraction, want),
                      "interleaved P=%d M=%d v=%d bubble %.12g, want %.12g", P, M, v,
                      in->bubble_fraction, want);
                pt_schedule_sim_destroy(in);
            }

            pt_schedule_costs lat = unit;
            lat.f = 1.5, lat.b = 2, lat.w = 0.25, lat.latency = 0.75;
            pt_schedule_sim *gl = play("gpipe", P, M, 0, lat, NULL);
            double want = (M + P - 1) * (lat.f + lat.b + lat.w) + 2 * (P - 1) * lat.latency;
            CHECK(gl && near(gl->makespan, want), "gpipe P=%d M=%d latency: makespan %g, want %g",
                  P, M, gl ? gl->makespan : -1, want);
            pt_schedule_sim_destroy(gl);

            pt_schedule *pd;
            pt_schedule_sim *ps = play("pipedream", P, M, 0, unit, &pd);
            if (!ps)
                return 1;
            for (int r = 0; r < P; r++)
                for (int i = 0; i < pd->n_actions[r]; i++) {
                    const pt_action *a = &pd->actions[r][i];
                    int lag = P - 1 - r;
                    int want_v = a->mb - lag > 0 ? a->mb - lag : 0;
                    CHECK(a->version == want_v,
                          "pipedream P=%d M=%d worker %d mb %d version %d, "
                          "want %d",
                          P, M, r, a->mb, a->version, want_v);
                    CHECK(a->update == (a->kind == PT_ACT_BW), "pipedream: update flag on %d",
                          (int)a->kind);
                }
            CHECK(near(ps->bubble_fraction, flush), "pipedream P=%d M=%d bubble %g", P, M,
                  ps->bubble_fraction);
            pt_schedule_sim_destroy(ps);
            pt_schedule_destroy(pd);
            pt_schedule_sim_destroy(g);
            pt_schedule_sim_destroy(o);
            pt_schedule_sim_destroy(g2);
            pt_schedule_sim_destroy(o2);
            pt_schedule_sim_destroy(z);
            pt_schedule_sim_destroy(zv);
        }
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
