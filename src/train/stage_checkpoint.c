/* stage_checkpoint.c: checkpoints of a pipeline whose workers each own a
 * stage (stage_checkpoint.h).
 *
 * A save runs in three beats, every process in step (pt_pipeline_agree):
 *   1. the main process prepares the staging folder and draws the run id,
 *      and every process learns both;
 *   2. every worker that is replica 0 of its stage writes the stage's
 *      shard, on its own thread, all at once;
 *   3. once every shard is written, the main process publishes the set (the
 *      index last, then the folder swapped in whole).
 * A failure anywhere stops every process at the next beat, and what was
 * published before stays; so does a stage holding a value that is not
 * finite. Loading: every worker reads its own tensors, on
 * its own thread. */
#include "train/stage_checkpoint.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"

/* What one worker's share of a load or save came to. A worker records its
 * failure instead of failing its job, so that a bad file or a full disk is
 * agreed on by every process (pt_pipeline_agree) rather than ending an MPI
 * world whose ranks are all well. */
typedef struct {
    int rc;
    char msg[512];
} outcome;

static int record(outcome *o, int rc)
{
    o->rc = rc;
    if (rc != PT_OK)
        snprintf(o->msg, sizeof o->msg, "%s", pt_last_error());
    return PT_OK;
}

/* The first local worker's failure, as this thread's error; then every
 * process learns whether any failed. */
static int agree_on(pt_pipeline *p, int rc, const outcome *all)
{
    for (int w = 0; rc == PT_OK && w < pt_pipeline_workers(p); w++)
        if (all[w].rc != PT_OK)
            rc = pt_fail(all[w].rc, "%s", all[w].msg);
    return pt_pipeline_agree(p, rc, NULL, 0);
}

typedef struct {
    const char *path;
    pt_train_state *states; /* one per worker: each thread writes its own */
    const pt_checkpoint_load_options *o;
    outcome *outcomes;
} load_job;

static int load_stage(pt_pipeline *p, int worker, void *user)
{
    load_job *j = user;
    pt_optimizer *opt = j->states ? pt_pipeline_stage_optimizer(p, worker) : NULL;
    pt_train_state *st = j->states ? &j->states[worker] : NULL;
    pt_model *stage = pt_pipeline_stage(p, worker);
    return record(&j->outcomes[worker], j->o
                                            ? pt_checkpoint_load_with(j->path, stage, opt, st, j->o)
                                            : pt_checkpoint_load(j->path, stage, opt, st));
}

int pt_stage_checkpoint_load(pt_pipeline *p, const char *path, pt_train_state *state,
                             const pt_checkpoint_load_options *o)
{
    load_job j = {.path = path, .o = o};
    int P = pt_pipeline_workers(p);
    j.outcomes = calloc((size_t)P, sizeof *j.outcomes);
    if (state && j.outcomes)
        j.states = calloc((size_t)P, sizeof *j.states);
    if (!j.outcomes || (state && !j.states)) {
        free(j.outcomes);
        return pt_fail(PT_ENOMEM, "cannot allocate the run states");
    }
    for (int w = 0; state && w < P; w++)
        j.states[w] = *state;
    int rc = agree_on(p, pt_pipeline_run(p, load_stage, &j), j.outcomes);
    if (rc == PT_OK && state)
        *state = j.states[pt_pipeline_rank(p)];
    free(j.states);
    free(j.outcomes);
    return rc;
}

typedef struct {
    char staging[PATH_MAX];
    char run_id[PT_RUN_ID_MAX];
} save_plan;

typedef struct {
    const save_plan *plan;
    const pt_train_state *state;
    outcome *outcomes;
} save_job;

/* A checkpoint is never written from values that are not finite: the run
 * would resume into them. */
static int check_finite(pt_pipeline *p, int worker)
{
    pt_model *m = pt_pipeline_stage(p, worker);
    pt_optimizer *opt = pt_pipeline_stage_optimizer(p, worker);
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *q = pt_model_param(m, i);
        for (int which = -1; q->data && which < 2; which++) {
            const float *x = which < 0 ? q->data
                             : opt     ? pt_optimizer_state(opt, m, i, which)
                                       : NULL;
            for (size_t k = 0; x && k < q->numel; k++)
                if (!isfinite(x[k]))
                    return pt_fail(PT_EINVAL,
                                   "worker %d: %s%s[%zu] is %g: a checkpoint is not written "
                                   "from values that are not finite",
                                   worker, which < 0 ? "" : "a moment of ", q->name, k, x[k]);
        }
    }
    return PT_OK;
}

static int write_shard(pt_pipeline *p, int worker, void *user)
{
    const save_job *j = user;
    int replica, stage = pt_pipeline_worker_stage(p, worker, &replica);
    if (stage < 0 || replica != 0)
        return PT_OK; /* replica 0 speaks for the stage */
    int rc = check_finite(p, worker);
    if (rc == PT_OK)
        rc = pt_checkpoint_write_shard(
            j->plan->staging, stage, pt_pipeline_stages(p), pt_pipeline_stage(p, worker),
            pt_pipeline_stage_optimizer(p, worker), j->state, j->plan->run_id);
    return record(&j->outcomes[worker], rc);
}

int pt_stage_checkpoint_save(pt_pipeline *p, const char *path, const pt_train_state *state)
{
    save_plan *plan = calloc(1, sizeof *plan);
    if (!plan)
        return pt_fail(PT_ENOMEM, "cannot allocate a save");
    int main = pt_pipeline_is_main(p), rc = PT_OK;
    if (main) {
        rc = pt_checkpoint_begin(path, plan->staging, sizeof plan->staging);
        if (rc == PT_OK)
            rc = pt_checkpoint_new_run_id(plan->run_id, sizeof plan->run_id);
    }
    rc = pt_pipeline_agree(p, rc, plan, sizeof *plan);
    save_job j = {.plan = plan, .state = state};
    if (rc == PT_OK && !(j.outcomes = calloc((size_t)pt_pipeline_workers(p), sizeof *j.outcomes)))
        rc = pt_fail(PT_ENOMEM, "cannot allocate a save");
    if (rc == PT_OK)
        rc = agree_on(p, pt_pipeline_run(p, write_shard, &j), j.outcomes);
    if (rc == PT_OK && main)
        rc = pt_checkpoint_publish(
            plan->staging, path, pt_pipeline_stages(p), pt_pipeline_description(p),
            pt_pipeline_stage_optimizer(p, pt_pipeline_rank(p)), state, plan->run_id);
    rc = pt_pipeline_agree(p, rc, NULL, 0);
    free(j.outcomes);
    free(plan);
    return rc;
}
