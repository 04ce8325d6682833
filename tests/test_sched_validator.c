/* test_sched_validator: the validator refuses each fault issue-listed on
 * hand-written schedules (tests/data/sched/bad_*.sched, each stating the
 * status and message it expects), naming worker, action and what it waits
 * for; accepts a hand-written good one; and refuses every generated schedule
 * with any one action dropped or doubled. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "sched/schedule.h"

#include "check.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    if (text && fread(text, 1, (size_t)n, f) != (size_t)n) {
        free(text);
        text = NULL;
    }
    if (text)
        text[n] = '\0';
    fclose(f);
    return text;
}

/* The value of "# KEY: value" in text, copied into out. */
static int expectation(const char *text, const char *key, char *out, size_t n)
{
    const char *p = strstr(text, key);
    if (!p)
        return -1;
    p += strlen(key);
    while (*p == ' ')
        p++;
    size_t len = strcspn(p, "\n");
    snprintf(out, n, "%.*s", (int)len, p);
    return 0;
}

static void check_bad_file(const char *dir, const char *name)
{
    char path[1024], status[64], message[512];
    snprintf(path, sizeof path, "%s/sched/%s", dir, name);
    char *text = slurp(path);
    CHECK(text, "%s: cannot read", path);
    if (!text)
        return;
    CHECK(!expectation(text, "expect-status:", status, sizeof status) &&
              !expectation(text, "expect-message:", message, sizeof message),
          "%s: no expect-status / expect-message lines", name);
    pt_schedule *s = NULL;
    int rc = pt_schedule_load(path, &s);
    CHECK(rc == PT_OK, "%s: the file should parse (%s)", name, pt_last_error());
    if (rc == PT_OK) {
        rc = pt_schedule_validate(s);
        int want = !strcmp(status, "EDEADLOCK") ? PT_EDEADLOCK : PT_EINVAL;
        CHECK(rc == want, "%s: status %d, want %s", name, rc, status);
        CHECK(strstr(pt_last_error(), message) != NULL, "%s: message\n  '%s'\nlacks\n  '%s'", name,
              pt_last_error(), message);
        /* the simulator refuses what the validator refuses */
        pt_schedule_sim *sim = NULL;
        CHECK(pt_schedule_simulate(s, NULL, &sim) == want && sim == NULL,
              "%s: the simulator played an invalid schedule", name);
    }
    pt_schedule_destroy(s);
    free(text);
}

/* Drops, then doubles, each action of a valid schedule in turn. */
static void check_mutations(const char *name, int P, int M, int v)
{
    pt_schedule *s;
    if (pt_schedule_generate(name, P, M, v, &s) != PT_OK) {
        CHECK(0, "%s: %s", name, pt_last_error());
        return;
    }
    int refused = 0, tried = 0;
    for (int w = 0; w < s->n_workers; w++)
        for (int i = 0; i < s->n_actions[w]; i++) {
            pt_action saved = s->actions[w][i];
            /* drop: shift the rest left */
            int n = s->n_actions[w];
            memmove(&s->actions[w][i], &s->actions[w][i + 1], (size_t)(n - i - 1) * sizeof saved);
            s->n_actions[w] = n - 1;
            tried++;
            refused += pt_schedule_validate(s) == PT_EINVAL && strstr(pt_last_error(), "missing");
            memmove(&s->actions[w][i + 1], &s->actions[w][i], (size_t)(n - i - 1) * sizeof saved);
            s->actions[w][i] = saved;
            s->n_actions[w] = n;
            /* double: overwrite the last action with this one (the last is then missing,
             * unless it is this one) */
            if (i != n - 1) {
                pt_action last = s->actions[w][n - 1];
                s->actions[w][n - 1] = saved;
                tried++;
                refused += pt_schedule_validate(s) == PT_EINVAL;
                s->actions[w][n - 1] = last;
            }
        }
    CHECK(refused == tried, "%s P=%d M=%d: %d of %d broken schedules refused", name, P, M, refused,
          tried);
    CHECK(pt_schedule_validate(s) == PT_OK, "%s: restored schedule refused", name);
    pt_schedule_destroy(s);
}

int main(void)
{
    const char *dir = getenv("PT_TEST_DATA");
    if (!dir)
        dir = "tests/data";
    const char *bad[] = {"bad_missing.sched",
                         "bad_repeated.sched",
                         "bad_f_before_upstream.sched",
                         "bad_b_before_f.sched",
                         "bad_b_before_downstream.sched",
                         "bad_w_before_b.sched",
                         "bad_deadlock.sched",
                         "bad_misplaced.sched",
                         "bad_weight_version.sched"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        check_bad_file(dir, bad[i]);

    char path[1024];
    snprintf(path, sizeof path, "%s/sched/good_1f1b_p2_m3.sched", dir);
    pt_schedule *good = NULL;
    CHECK(pt_schedule_load(path, &good) == PT_OK && pt_schedule_validate(good) == PT_OK,
          "good_1f1b_p2_m3.sched refused: %s", pt_last_error());
    pt_schedule_destroy(good);

    const char *names[] = {"gpipe", "1f1b", "zbh1", "zbv", "interleaved", "pipedream"};
    for (int i = 0; i < 6; i++)
        check_mutations(names[i], 3, 3, 0);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
