/* test_published_zero_bubble: pipetrain's schedules and simulator against
 * Qi et al., "Zero Bubble Pipeline Parallelism" (tests/data/
 * published_runs.json, every number with its table and row). From each of
 * the twelve rows' profiled T_F, T_B, T_W and T_comm (Table 9):
 *   - the bubble rate of 1F1B, interleaved 1F1B, ZB-H1, ZB-H2, ZB-1p and
 *     ZB-2p is within 1 point of Table 5's;
 *   - the predicted throughput of ZB-2p, ZB-1p and interleaved 1F1B
 *     relative to 1F1B is within 5% of the ratio Table 4 measured.
 * Also: every figure the check reads carries a source, and the replayed
 * ZB-1p and ZB-2p orders keep their memory limits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/published_runs.h"
#include "pipetrain.h"
#include "plan/published.h"

#include "check.h"
#include "published_data.h"

static void sourced(const pt_published_zb *r, const pt_cited *c, const char *what)
{
    CHECK(c->source && strlen(c->source) > 8, "%s m=%g: %s has no source", r->model,
          r->microbatches.value, what);
}

int main(void)
{
    pt_published *p = load_published();
    REQUIRE(p, "no published runs to check");
    REQUIRE(p->n_zb == 12, "%d zero-bubble rows, want the paper's 12", p->n_zb);
    double worst_bubble = 0, worst_ratio = 0;
    printf("%-6s %4s %-12s %9s %9s %6s %9s %9s %6s\n", "model", "m", "schedule", "bubble", "paper",
           "diff", "speedup", "measured", "err%");
    for (int i = 0; i < p->n_zb; i++) {
        const pt_published_zb *r = &p->zb[i];
        double bubble[PT_ZB_N_SCHEDULES], speedup[PT_ZB_N_SCHEDULES];
        REQUIRE(pt_replay_zb_bubbles(r, bubble) == PT_OK, "%s", pt_last_error());
        REQUIRE(pt_replay_zb_speedups(r, speedup) == PT_OK, "%s", pt_last_error());
        sourced(r, &r->t_f, "T_F");
        sourced(r, &r->t_b, "T_B");
        sourced(r, &r->t_w, "T_W");
        sourced(r, &r->t_comm, "T_comm");
        const pt_cited *base = &r->samples_per_gpu_s[PT_ZB_1F1B];
        sourced(r, base, "1F1B's throughput");
        for (int k = 0; k < PT_ZB_N_SCHEDULES; k++) {
            const pt_cited *b = &r->bubble[k];
            const pt_cited *t = &r->samples_per_gpu_s[k];
            sourced(r, b, pt_zb_schedule_names[k]);
            double diff = bubble[k] - b->value;
            CHECK(fabs(diff) <= 0.01, "%s m=%g %s: bubble %.4f, Table 5 %.4f", r->model,
                  r->microbatches.value, pt_zb_schedule_names[k], bubble[k], b->value);
            worst_bubble = fabs(diff) > worst_bubble ? fabs(diff) : worst_bubble;
            double measured = t->source && base->value > 0 ? t->value / base->value : 0;
            double err = measured > 0 ? speedup[k] / measured - 1 : 0;
            printf("%-6s %4g %-12s %9.4f %9.4f %+6.4f", r->model, r->microbatches.value,
                   pt_zb_schedule_names[k], bubble[k], b->value, diff);
            if (measured > 0 && k != PT_ZB_1F1B) {
                printf(" %9.3f %9.3f %+5.1f%%\n", speedup[k], measured, 100 * err);
                CHECK(fabs(err) <= 0.05, "%s m=%g %s: speedup over 1f1b %.3f, Table 4 %.3f",
                      r->model, r->microbatches.value, pt_zb_schedule_names[k], speedup[k],
                      measured);
                worst_ratio = fabs(err) > worst_ratio ? fabs(err) : worst_ratio;
            } else {
                printf("\n");
            }
        }
        /* ZB-2p and ZB-1p are the three the paper measured besides 1F1B */
        CHECK(r->samples_per_gpu_s[PT_ZB_2P].source && r->samples_per_gpu_s[PT_ZB_1P].source &&
                  r->samples_per_gpu_s[PT_ZB_INTERLEAVED].source,
              "%s m=%g: Table 4's throughputs are missing", r->model, r->microbatches.value);
    }
    printf("worst bubble difference %.4f (limit 0.01), worst speedup error %.1f%% (limit 5%%)\n",
           worst_bubble, 100 * worst_ratio);
    pt_published_free(p);
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
