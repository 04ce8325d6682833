/* test_zero_checkpoint_resume: a checkpoint set saved with sharded
 * optimizer state holds the same logical tensors as an unsharded one and
 * resumes under any stages, replicas and zero, on threads.
 *
 * Saved after 2 of 4 steps at (P = 2, D = 2, zero 1), the set is resumed
 *   - at (P = 2, D = 2, zero 2) and (P = 1, D = 2, zero 1): the losses of
 *     steps 3 and 4 are bit-identical to the uninterrupted run's (the same
 *     replicas sum in the same order);
 *   - at (P = 1, D = 2, zero 0), (P = 2, D = 1) and (P = 1, D = 1): within
 *     1e-5 relative of it (other replica counts group the micro-batches'
 *     sums otherwise);
 * and the moments read back at (P = 1, D = 1) are bit for bit those the
 * sharded run held at the save (gathered from their owners). A set saved
 * at (P = 2, D = 1) resumes at (P = 1, D = 2, zero 1) likewise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/stage_checkpoint.h"
#include "zero_runs.h"

#define SAVE_AT 2

static char dir[64];

static void cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static int save_from(zr_layout l, const char *path, zr_run *saved)
{
    REQUIRE(zr_start(&l, saved) == PT_OK, "save run: %s", pt_last_error());
    if (zr_steps(saved, 0, SAVE_AT))
        return 1;
    pt_train_state st = {.step = SAVE_AT};
    REQUIRE(pt_stage_checkpoint_save(saved->p, path, &st, NULL) == PT_OK, "save: %s",
            pt_last_error());
    return 0;
}

static int resume(zr_layout l, const char *path, const zr_run *ref, bool exact, zr_run *out)
{
    zr_run r;
    REQUIRE(zr_start(&l, &r) == PT_OK, "resume at P=%d D=%d zero %d: %s", l.stages, l.replicas,
            l.zero, pt_last_error());
    pt_train_state st = {0};
    REQUIRE(pt_stage_checkpoint_load(r.p, path, &st, NULL) == PT_OK, "load: %s", pt_last_error());
    REQUIRE(st.step == SAVE_AT, "the set's step is %ld, expected %d", st.step, SAVE_AT);
    if (out) { /* the moments as read, before any step */
        REQUIRE(pt_pipeline_run(r.p, zr_gather, NULL) == PT_OK, "gather: %s", pt_last_error());
        REQUIRE(pipeline_copy_out(r.p, out->m, out->o, NULL) > 0, "copy: %s", pt_last_error());
        pt_pipeline_run(r.p, zr_release, NULL);
    }
    if (zr_steps(&r, SAVE_AT, ZR_STEPS))
        return 1;
    double worst = 0;
    for (int s = SAVE_AT; s < ZR_STEPS; s++)
        for (int k = 0; k < ZR_M; k++) {
            double a = r.losses[s][k], b = ref->losses[s][k], d = fabs(a - b) / fabs(b);
            worst = d > worst ? d : worst;
            if (exact)
                CHECK(!memcmp(&r.losses[s][k], &ref->losses[s][k], sizeof(float)),
                      "P=%d D=%d zero %d: step %d mb %d: loss %.9g, uninterrupted %.9g", l.stages,
                      l.replicas, l.zero, s + 1, k, a, b);
            CHECK(d <= 1e-5, "P=%d D=%d zero %d: step %d mb %d: loss %.9g, uninterrupted %.9g",
                  l.stages, l.replicas, l.zero, s + 1, k, a, b);
        }
    printf("resumed at P=%d D=%d zero %d: worst relative loss difference %.2g%s\n", l.stages,
           l.replicas, l.zero, worst, exact ? " (bit-identical asked)" : "");
    zr_end(&r);
    return 0;
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/pt_zero_resume_XXXXXX");
    REQUIRE(mkdtemp(dir), "cannot make a temporary folder");
    char path[96], path2[96];
    snprintf(path, sizeof path, "%s/sharded", dir);
    snprintf(path2, sizeof path2, "%s/plain", dir);
    atexit(cleanup);
    zr_layout sharded = {"1f1b", 2, 2, 1, 0, PT_PIPELINE_THREADS};
    zr_run ref, saved, plain, read;
    REQUIRE(zr_start(&sharded, &ref) == PT_OK && !zr_steps(&ref, 0, ZR_STEPS), "reference: %s",
            pt_last_error());
    if (save_from(sharded, path, &saved))
        return 1;
    /* the moments the sharded run held at the save */
    REQUIRE(pt_pipeline_run(saved.p, zr_gather, NULL) == PT_OK, "gather: %s", pt_last_error());
    REQUIRE(pipeline_copy_out(saved.p, saved.m, saved.o, saved.held) > 0, "copy: %s",
            pt_last_error());
    pt_pipeline_run(saved.p, zr_release, NULL);
    zr_layout one = {"1f1b", 1, 1, 0, 0, PT_PIPELINE_THREADS};
    REQUIRE(zr_start(&one, &read) == PT_OK, "%s", pt_last_error());
    int fail = resume(one, path, &ref, false, &read);
    int which, i = pipeline_first_difference(read.m, read.o, saved.m, saved.o, NULL, &which);
    CHECK(i < 0, "read back at P=1 D=1: %s of %s differs from the sharded run's at the save",
          which < 0 ? "the value" : "a moment", i >= 0 ? pt_model_param(read.m, i)->name : "");
    fail |= resume((zr_layout){"1f1b", 2, 2, 2, 0, PT_PIPELINE_THREADS}, path, &ref, true, NULL);
    fail |= resume((zr_layout){"1f1b", 1, 2, 1, 0, PT_PIPELINE_THREADS}, path, &ref, true, NULL);
    fail |= resume((zr_layout){"1f1b", 1, 2, 0, 0, PT_PIPELINE_THREADS}, path, &ref, false, NULL);
    fail |= resume((zr_layout){"1f1b", 2, 1, 0, 0, PT_PIPELINE_THREADS}, path, &ref, false, NULL);
    /* and the other way: unsharded at the save, sharded on resume */
    zr_layout two = {"1f1b", 2, 1, 0, 0, PT_PIPELINE_THREADS};
    zr_run ref2;
    REQUIRE(zr_start(&two, &ref2) == PT_OK && !zr_steps(&ref2, 0, ZR_STEPS), "reference: %s",
            pt_last_error());
    if (save_from(two, path2, &plain))
        return 1;
    fail |= resume((zr_layout){"1f1b", 1, 2, 1, 0, PT_PIPELINE_THREADS}, path2, &ref2, false, NULL);
    zr_end(&ref2);
    zr_end(&plain);
    zr_end(&read);
    zr_end(&saved);
    zr_end(&ref);
    return fail || failures;
}
