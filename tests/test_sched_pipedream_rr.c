/* test_sched_pipedream_rr: the pipedream generator with replicas (PipeDream's
 * 1F1B-RR). For P = 1..6 stages, M = 1..24 micro-batches and R = 1..3
 * replicas, the schedule has P x R workers, routes micro-batch m to replica
 * m % R of every stage, is accepted by the validator, round-trips through
 * the text format unchanged and plays to the end in the simulator; each
 * input-stage replica admits NOAM = ceil(workers / R) = P micro-batches (or
 * all it has) before its first backward; every backward carries an update.
 * When R divides M the replicas of a stage run the same list in lock-step
 * (same kinds, versions and updates; replica k's micro-batch is replica 0's
 * plus k), which is what lets the runtime pair their j-th updates. R = 1 is
 * the pipedream generator without replicas, and replicas 0 means 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "sched/schedule.h"

#include "check.h"

static pt_schedule *generate(int P, int M, int R)
{
    pt_schedule_config cfg = pt_schedule_config_default();
    cfg.name = "pipedream", cfg.stages = P, cfg.microbatches = M, cfg.replicas = R;
    pt_schedule *s = NULL;
    int rc = pt_schedule_create(&cfg, &s);
    CHECK(rc == PT_OK, "pipedream P=%d M=%d R=%d: generate -> %d (%s)", P, M, R, rc,
          pt_last_error());
    return rc == PT_OK ? s : NULL;
}

static void check_round_trip(const pt_schedule *s, const char *what)
{
    char *text = NULL, *again = NULL;
    pt_schedule *back = NULL;
    CHECK(pt_schedule_format(s, &text) == PT_OK, "%s: format", what);
    int rc = text ? pt_schedule_parse(text, &back) : PT_EINVAL;
    CHECK(rc == PT_OK, "%s: parse of its own text -> %d", what, rc);
    if (rc == PT_OK) {
        CHECK(pt_sched_equal(s, back), "%s: round trip changed the schedule", what);
        CHECK(pt_schedule_format(back, &again) == PT_OK && !strcmp(text, again),
              "%s: text differs after a round trip", what);
    }
    free(text);
    free(again);
    pt_schedule_destroy(back);
}

static void check_lock_step(const pt_schedule *s, int P, int R, const char *what)
{
    for (int st = 0; st < P; st++)
        for (int k = 1; k < R; k++) {
            int w0 = st * R, w = st * R + k;
            CHECK(s->n_actions[w] == s->n_actions[w0],
                  "%s: replicas 0 and %d of stage %d: %d and %d actions", what, k, st,
                  s->n_actions[w0], s->n_actions[w]);
            for (int i = 0; i < s->n_actions[w] && i < s->n_actions[w0]; i++) {
                const pt_action *a = &s->actions[w0][i], *b = &s->actions[w][i];
                CHECK(a->kind == b->kind && a->chunk == b->chunk && b->mb == a->mb + k &&
                          a->version == b->version && a->update == b->update,
                      "%s: stage %d, action %d: replica %d is not replica 0's, shifted by %d", what,
                      st, i, k, k);
            }
        }
}

static void check_one(int P, int M, int R)
{
    char what[64];
    snprintf(what, sizeof what, "pipedream P=%d M=%d R=%d", P, M, R);
    pt_schedule *s = generate(P, M, R);
    if (!s)
        return;
    CHECK(s->n_workers == P * R && s->replicas == R && pt_sched_stages(s) == P &&
              s->n_chunks == P && s->n_micro == M,
          "%s: %d workers, %d replicas, %d chunks", what, s->n_workers, s->replicas, s->n_chunks);
    CHECK(pt_sched_is_async(s), "%s: not asynchronous", what);
    CHECK(pt_schedule_validate(s) == PT_OK, "%s: validate: %s", what, pt_last_error());
    for (int m = 0; m < M; m++)
        for (int c = 0; c < P; c++)
            CHECK(pt_sched_worker_of(s, c, m) == c * R + m % R, "%s: chunk %d mb %d on worker %d",
                  what, c, m, pt_sched_worker_of(s, c, m));
    for (int w = 0; w < s->n_workers; w++) {
        int forwards = 0, first_backward = -1;
        for (int i = 0; i < s->n_actions[w]; i++) {
            const pt_action *a = &s->actions[w][i];
            if (a->kind == PT_ACT_F && first_backward < 0)
                forwards++;
            if (a->kind != PT_ACT_F) {
                first_backward = first_backward < 0 ? i : first_backward;
                CHECK(a->update, "%s: worker %d action %d carries no update", what, w, i);
            }
        }
        int own = M / R + (w % R < M % R), noam = (P * R + R - 1) / R;
        if (w < R)
            CHECK(forwards == (own < noam ? own : noam),
                  "%s: input replica %d admits %d micro-batches before its first backward, "
                  "NOAM %d",
                  what, w, forwards, noam);
    }
    if (M % R == 0)
        check_lock_step(s, P, R, what);
    check_round_trip(s, what);
    pt_schedule_sim *sim = NULL;
    CHECK(pt_schedule_simulate(s, NULL, &sim) == PT_OK && sim->makespan > 0, "%s: simulate: %s",
          what, pt_last_error());
    pt_schedule_sim_destroy(sim);
    pt_schedule_destroy(s);
}

int main(void)
{
    int n = 0;
    for (int P = 1; P <= 6; P++)
        for (int M = 1; M <= 24; M++)
            for (int R = 1; R <= 3; R++, n++)
                check_one(P, M, R);
    /* one replica is the plain generator; replicas 0 leaves it at one */
    pt_schedule *one = generate(4, 8, 1), *plain = NULL, *dflt = generate(4, 8, 0);
    CHECK(pt_schedule_generate("pipedream", 4, 8, 0, &plain) == PT_OK, "generate: %s",
          pt_last_error());
    CHECK(one && plain && dflt && pt_sched_equal(one, plain) && pt_sched_equal(dflt, plain),
          "pipedream with one replica differs from pipedream");
    pt_schedule_destroy(one);
    pt_schedule_destroy(plain);
    pt_schedule_destroy(dflt);
    /* the other flat schedules still take no replicas */
    pt_schedule_config cfg = pt_schedule_config_default();
    cfg.name = "1f1b", cfg.replicas = 2;
    pt_schedule *s = NULL;
    CHECK(pt_schedule_create(&cfg, &s) == PT_EINVAL && !s, "1f1b with 2 replicas accepted");
    printf("%d pipedream schedules with replicas checked, %d failures\n", n, failures);
    return failures ? 1 : 0;
}
