/* test_tensor_trace: a tensor layout's step is seen rank by rank. GPT at
 * 2 stages x 2 tensor slices on threads, one AdamW step:
 * - the bubble report and pt_pipeline_bubbles() give every rank (4 rows),
 *   each slice its own measurement and a prediction from its worker's
 *   measured passes (a pass's tensor sums count in it), so none is 100%
 *   and the last stage's is above 0 (it waits for the first forward), and
 *   the slices of a worker share theirs;
 * - the step times give every rank, predicted above 0;
 * - the trace names a track per slice ("worker w slice t") and every
 *   track has the tensor group's sums in the program's order: for every
 *   forward sum AFc.m/k of the rank's program, a "tensor sum" slice of that
 *   name, in the order the program issues them, then its closing L, N and
 *   S as "step end" slices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipetrain.h"

#include "check.h"
#include "io/whole_file.h"
#include "runtime/pipeline_internal.h"
#include "sched/program.h"
#include "tensor/rng.h"

#define M     4
#define RANKS 4

/* The next slice named `want` (its "name" and "cat") on track `tid` from
 * `at` on, or NULL. */
static const char *next_slice(const char *at, const char *want, int tid)
{
    char tid_s[32];
    snprintf(tid_s, sizeof tid_s, "\"tid\": %d,", tid);
    for (const char *hit = at;; hit++) {
        hit = strstr(hit, want);
        if (!hit)
            return NULL;
        const char *end = strchr(hit, '}');
        const char *t = strstr(hit, tid_s);
        if (t && end && t < end)
            return hit;
    }
}

/* The trace's slices on track `tid`, in the file's order, must be the
 * forward and backward sums of `prog` for worker `w` in its order, then
 * its closing actions (SEQUENCE_SUM, NORM, STEP) in its order. */
static void check_sums(const char *json, const pt_program *prog, int w, int tid)
{
    const char *at = json;
    int sums = 0, closing = 0;
    for (int i = 0; i < prog->n_actions[w]; i++) {
        const pt_prog_action *a = &prog->actions[w][i];
        char want[96], tok[48];
        if (a->kind == PT_PROG_TENSOR_SUM)
            snprintf(want, sizeof want, "\"name\": \"A%s%d.%d/%d\", \"cat\": \"tensor sum\"",
                     a->backward ? "B" : "F", a->chunk, a->mb, a->peer);
        else if (a->kind == PT_PROG_SEQUENCE_SUM || a->kind == PT_PROG_NORM ||
                 a->kind == PT_PROG_STEP)
            snprintf(want, sizeof want, "\"name\": \"%s\", \"cat\": \"step end\"",
                     pt_prog_action_str(a, tok, sizeof tok));
        else
            continue;
        const char *hit = next_slice(at, want, tid);
        CHECK(hit, "track %d: %s missing or out of the program's order", tid, want);
        if (!hit)
            return;
        at = hit + 1;
        sums += a->kind == PT_PROG_TENSOR_SUM;
        closing += a->kind != PT_PROG_TENSOR_SUM;
    }
    CHECK(sums > 0, "worker %d's program has no tensor sums", w);
    CHECK(closing == 3, "worker %d's program closes with %d actions, not L N S", w, closing);
}

int main(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 2, c.n_head = 4, c.n_embd = 32, c.seq_len = 16, c.vocab = 64, c.seed = 3;
    pt_optim_config o = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = 2, pc.tensor = 2, pc.microbatches = M, pc.sequence_parallel = 1;
    pc.transport = PT_PIPELINE_THREADS;
    pt_pipeline *p;
    REQUIRE(pt_pipeline_create(&c, &o, &pc, &p) == PT_OK, "create: %s", pt_last_error());
    REQUIRE(pt_pipeline_ranks(p) == RANKS, "%d ranks", pt_pipeline_ranks(p));
    int tokens[M * 16 + 1];
    pt_rng r;
    pt_rng_seed(&r, 9);
    for (int i = 0; i <= M * c.seq_len; i++)
        tokens[i] = (int)pt_rng_below(&r, (uint64_t)c.vocab);
    pt_microbatch b = {.batch = M, .tokens = tokens, .targets = tokens + 1};
    float loss;
    REQUIRE(pt_pipeline_train_step(p, &b, 0, 1e-3f, &loss) == PT_OK, "step: %s", pt_last_error());

    double meas[RANKS], pred[RANKS];
    REQUIRE(pt_pipeline_bubbles(p, meas, pred) == PT_OK, "bubbles: %s", pt_last_error());
    for (int k = 0; k < RANKS; k++) {
        CHECK(meas[k] >= 0 && meas[k] < 1, "rank %d: measured bubble %g", k, meas[k]);
        /* the last stage waits for the first forward in any timing; the
         * first may never wait when its passes are the slowest (as they
         * can be, timed on four threads sharing the cores) */
        CHECK(pred[k] >= 0 && pred[k] < 1 && (pred[k] > 0 || k < RANKS / 2),
              "rank %d: predicted bubble %g", k, pred[k]);
        CHECK(pred[k] == pred[k - k % 2], "rank %d: its worker's slices predicted apart", k);
    }
    char report[4096];
    REQUIRE(pt_pipeline_bubble_report(p, report, sizeof report) == PT_OK, "report: %s",
            pt_last_error());
    int rows = 0;
    for (const char *l = strchr(report, '\n'); l && l[1]; l = strchr(l + 1, '\n'))
        rows++;
    CHECK(rows == RANKS, "bubble report has %d rows, not one per rank:\n%s", rows, report);
    CHECK(strstr(report, "3 1/1"), "bubble report names no rank 3 as worker 1 slice 1:\n%s",
          report);

    double step_meas[RANKS], step_pred[RANKS];
    REQUIRE(pt_pipeline_step_times(p, NULL, step_meas, step_pred) == PT_OK, "step times: %s",
            pt_last_error());
    for (int k = 0; k < RANKS; k++)
        CHECK(step_meas[k] > 0 && step_pred[k] > 0, "rank %d: step %g s, predicted %g s", k,
              step_meas[k], step_pred[k]);

    char path[] = "/tmp/pt_tensor_traceXXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "temporary file");
    REQUIRE(pt_pipeline_write_trace(p, path) == PT_OK, "trace: %s", pt_last_error());
    unsigned char *bytes;
    size_t n;
    REQUIRE(pt_read_whole_file(path, &bytes, &n) == PT_OK, "reading the trace: %s",
            pt_last_error());
    unlink(path);
    char *json = (char *)bytes;
    for (int k = 0; k < RANKS; k++) {
        char track[48];
        snprintf(track, sizeof track, "\"worker %d slice %d\"", k / 2, k % 2);
        CHECK(strstr(json, track), "no track %s", track);
        check_sums(json, p->train_program, k / 2, k);
    }
    free(json);
    pt_pipeline_destroy(p);
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
