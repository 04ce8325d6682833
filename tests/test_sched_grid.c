/* test_sched_grid: every schedule generator, over P = 1..8 stages, M = 1..32
 * micro-batches and v = 1..4 chunks per worker wherever the schedule takes
 * them, produces a schedule the validator accepts, that holds every F and
 * backward piece exactly once (counted here independently of the
 * validator), that round-trips through the text format unchanged, and that
 * the simulator plays to the end. Parameters a schedule cannot take are
 * refused with PT_EINVAL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "sched/schedule.h"

#include "check.h"

/* Each (chunk, mb) has one F and one BW, or one F, one B and one W, all on
 * one worker; counted without the validator. */
static void check_complete(const pt_schedule *s, const char *what)
{
    int C = s->n_chunks, M = s->n_micro;
    int *count = calloc((size_t)C * M * 4, sizeof(int));
    int *where = malloc((size_t)C * M * sizeof(int));
    for (int i = 0; i < C * M; i++)
        where[i] = -1;
    for (int w = 0; w < s->n_workers; w++)
        for (int i = 0; i < s->n_actions[w]; i++) {
            const pt_action *a = &s->actions[w][i];
            count[(a->chunk * M + a->mb) * 4 + a->kind]++;
            int *at = &where[a->chunk * M + a->mb];
            CHECK(*at < 0 || *at == w, "%s: pieces of chunk %d mb %d on workers %d and %d", what,
                  a->chunk, a->mb, *at, w);
            *at = w;
        }
    for (int i = 0; i < C * M; i++) {
        int *n = &count[i * 4];
        bool fused = n[PT_ACT_F] == 1 && n[PT_ACT_BW] == 1 && !n[PT_ACT_B] && !n[PT_ACT_W];
        bool split = n[PT_ACT_F] == 1 && !n[PT_ACT_BW] && n[PT_ACT_B] == 1 && n[PT_ACT_W] == 1;
        CHECK(fused || split, "%s: chunk %d mb %d has F%d B%d W%d BW%d", what, i / M, i % M, n[0],
              n[1], n[2], n[3]);
    }
    free(count);
    free(where);
}

static void check_one(const pt_schedule_config *cfg)
{
    char what[96];
    snprintf(what, sizeof what, "%s P=%d M=%d v=%d R=%d", cfg->name, cfg->stages, cfg->microbatches,
             cfg->virtual_stages, cfg->replicas);
    pt_schedule *s = NULL;
    int rc = pt_schedule_create(cfg, &s);
    CHECK(rc == PT_OK, "%s: generate -> %d", what, rc);
    if (rc != PT_OK)
        return;
    int R = cfg->replicas ? cfg->replicas : 1;
    CHECK(pt_schedule_workers(s) == cfg->stages * R, "%s: %d workers", what,
          pt_schedule_workers(s));
    CHECK(pt_schedule_stages(s) == cfg->stages, "%s: %d stages", what, pt_schedule_stages(s));
    CHECK(pt_schedule_microbatches(s) == cfg->microbatches, "%s: micro-batches", what);
    CHECK(pt_schedule_virtual_stages(s) == cfg->virtual_stages, "%s: %d chunks per worker", what,
          pt_schedule_virtual_stages(s));
    rc = pt_schedule_validate(s);
    CHECK(rc == PT_OK, "%s: validate -> %d", what, rc);
    check_complete(s, what);

    char *text = NULL, *again = NULL;
    pt_schedule *back = NULL;
    CHECK(pt_schedule_format(s, &text) == PT_OK, "%s: format", what);
    rc = pt_schedule_parse(text, &back);
    CHECK(rc == PT_OK, "%s: parse of its own text -> %d", what, rc);
    if (rc == PT_OK) {
        CHECK(pt_sched_equal(s, back), "%s: round trip changed the schedule", what);
        CHECK(pt_schedule_format(back, &again) == PT_OK && !strcmp(text, again),
              "%s: text differs after a round trip", what);
    }
    pt_schedule_sim *sim = NULL;
    rc = pt_schedule_simulate(s, NULL, &sim);
    CHECK(rc == PT_OK, "%s: simulate -> %d", what, rc);
    if (rc == PT_OK) {
        CHECK(sim->makespan > 0 && sim->bubble_fraction >= 0 && sim->bubble_fraction < 1,
              "%s: makespan %g bubble %g", what, sim->makespan, sim->bubble_fraction);
    }
    pt_schedule_sim_destroy(sim);
    free(text);
    free(again);
    pt_schedule_destroy(back);
    pt_schedule_destroy(s);
}

static void check_refused(const char *name, int P, int M, int v, int R)
{
    pt_schedule_config cfg = {
        .name = name, .stages = P, .microbatches = M, .virtual_stages = v, .replicas = R};
    pt_schedule *s = (pt_schedule *)&cfg; /* must be reset to NULL */
    int rc = pt_schedule_create(&cfg, &s);
    CHECK(rc == PT_EINVAL && s == NULL && pt_last_error()[0],
          "%s P=%d M=%d v=%d R=%d should be refused, got %d", name, P, M, v, R, rc);
}

int main(void)
{
    int n = 0;
    for (int P = 1; P <= 8; P++)
        for (int M = 1; M <= 32; M++) {
            const char *flat[] = {"gpipe", "1f1b", "zbh1", "zbh2", "zb1p", "zb2p", "pipedream"};
            for (int i = 0; i < 7; i++, n++)
                check_one(&(pt_schedule_config){.name = flat[i],
                                                .stages = P,
                                                .microbatches = M,
                                                .virtual_stages = 1,
                                                .replicas = 1});
            for (int v = 1; v <= 4; v++) {
                check_one(&(pt_schedule_config){.name = "loopedbfs",
                                                .stages = P,
                                                .microbatches = M,
                                                .virtual_stages = v,
                                                .replicas = 1});
                n++;
                if (v == 1 || M % P == 0) {
                    check_one(&(pt_schedule_config){.name = "interleaved",
                                                    .stages = P,
                                                    .microbatches = M,
                                                    .virtual_stages = v,
                                                    .replicas = 1});
                    n++;
                } else {
                    check_refused("interleaved", P, M, v, 0);
                }
                if (v != 2)
                    check_refused("zbv", P, M, v, 0);
                if (v > 1) {
                    check_refused("gpipe", P, M, v, 0);
                    check_refused("1f1b-rr", P, M, v, 0);
                }
            }
            check_one(&(pt_schedule_config){
                .name = "zbv", .stages = P, .microbatches = M, .virtual_stages = 2, .replicas = 1});
            n++;
            for (int R = 1; R <= 3; R++, n++)
                check_one(&(pt_schedule_config){.name = "1f1b-rr",
                                                .stages = P,
                                                .microbatches = M,
                                                .virtual_stages = 1,
                                                .replicas = R});
        }
    check_refused("gpipe", 0, 4, 0, 0);
    check_refused("1f1b", 4, 0, 0, 0);
    check_refused("1f1b", 4, 4, 0, 2);
    check_refused("nonesuch", 4, 4, 0, 0);
    printf("%d schedules checked, %d failures\n", n, failures);
    return failures ? 1 : 0;
}
