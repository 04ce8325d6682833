/* stage_checkpoint.c: checkpoints of a pipeline whose workers each own a
 * stage (stage_checkpoint.h).
 *
 * A save runs in three beats, every process in step (pt_pipeline_agree):
 *   1. the main process prepares the staging folder and draws the run id,
 *      and every process learns both;
 *   2. every worker that is replica 0 of its stage writes the stage's
 *      shard, on its own thread, all at once (with sharded optimizer state
 *      it first gathers the stage's moments, and in bf16 runs its float
 *      master weights, from the other replicas, and frees them once the set
 *      is published);
 *   3. once every shard is written, the main process publishes the set (the
 *      index last, then the folder swapped in whole).
 * A failure anywhere (a full disk, a stage holding a value that is not
 * finite) stops every process at the next beat, each naming its own
 * reason, and what was published before stays. Loading: every worker reads
 * its own tensors, on its own thread, and the processes agree likewise. */
#include "train/stage_checkpoint.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"

typedef struct {
    const char *path;
    pt_train_state *states; /* one per worker: each thread writes its own */
    const pt_checkpoint_load_options *o;
} load_job;

static int read_into(const load_job *j, pt_model *m, pt_optimizer *o, pt_train_state *st)
{
    return j->o ? pt_checkpoint_load_with(j->path, m, o, st, j->o)
                : pt_checkpoint_load(j->path, m, o, st);
}

/* Tensor slices: the worker's whole stage read, each slice's part kept. */
static int load_slice(pt_pipeline *p, int worker, const load_job *j)
{
    pt_model *whole;
    pt_optimizer *whole_opt;
    pt_train_state *st = j->states ? &j->states[worker] : NULL;
    int rc = pt_pipeline_whole_stage(p, worker, &whole, j->states ? &whole_opt : NULL);
    if (rc == PT_OK && whole)
        rc = read_into(j, whole, j->states ? whole_opt : NULL, st);
    if (rc == PT_OK && whole)
        rc = pt_pipeline_take_slice(p, worker, whole, j->states ? whole_opt : NULL);
    if (rc == PT_OK)
        rc = pt_pipeline_params_loaded(p, worker);
    if (j->states)
        pt_optimizer_destroy(whole_opt);
    pt_model_destroy(whole);
    return rc;
}

static int load_stage(pt_pipeline *p, int worker, void *user)
{
    load_job *j = user;
    if (pt_pipeline_ranks(p) > pt_pipeline_workers(p))
        return load_slice(p, worker, j);
    pt_optimizer *opt = j->states ? pt_pipeline_stage_optimizer(p, worker) : NULL;
    pt_train_state *st = j->states ? &j->states[worker] : NULL;
    pt_model *stage = pt_pipeline_stage(p, worker);
    /* sharded state: the whole stage's moments are read, the shards kept */
    pt_optimizer *whole = NULL;
    int rc = PT_OK;
    if (opt && pt_pipeline_zero(p))
        rc = pt_optimizer_create(stage, pt_optimizer_config(opt), &whole);
    if (rc == PT_OK)
        rc = read_into(j, stage, whole ? whole : opt, st);
    if (rc == PT_OK && whole)
        pt_pipeline_take_moments(p, worker, whole);
    pt_optimizer_destroy(whole);
    return rc == PT_OK ? pt_pipeline_params_loaded(p, worker) : rc;
}

int pt_stage_checkpoint_load(pt_pipeline *p, const char *path, pt_train_state *state,
                             const pt_checkpoint_load_options *o)
{
    load_job j = {.path = path, .o = o};
    int P = pt_pipeline_ranks(p);
    if (state && !(j.states = calloc((size_t)P, sizeof *j.states)))
        return pt_fail(PT_ENOMEM, "cannot allocate the run states");
    for (int w = 0; state && w < P; w++)
        j.states[w] = *state;
    /* a worker that cannot read its tensors stops every process */
    int rc = pt_pipeline_agree(p, pt_pipeline_run(p, load_stage, &j), NULL, 0);
    if (rc == PT_OK && state)
        *state = j.states[pt_pipeline_rank(p)];
    free(j.states);
    return rc;
}

typedef struct {
    char staging[PATH_MAX];
    char run_id[PT_RUN_ID_MAX];
} save_plan;

typedef struct {
    const save_plan *plan;
    const pt_train_state *state;
    int file; /* one file: the weights alone */
} save_job;

/* A checkpoint is never written from values that are not finite: the run
 * would resume into them. */
static int check_finite(pt_model *m, pt_optimizer *opt, int worker)
{
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

static int gather_moments(pt_pipeline *p, int worker, void *user)
{
    const save_job *j = user; /* a weights file: the float master alone (bf16) */
    return j->file ? pt_pipeline_gather_master(p, worker) : pt_pipeline_gather_moments(p, worker);
}

static int release_moments(pt_pipeline *p, int worker, void *user)
{
    (void)user;
    pt_pipeline_release_moments(p, worker);
    return PT_OK;
}

static int write_shard(pt_pipeline *p, int worker, void *user)
{
    const save_job *j = user;
    int replica, stage = pt_pipeline_worker_stage(p, worker, &replica);
    if (stage < 0 || replica != 0)
        return PT_OK; /* replica 0 speaks for the stage */
    pt_model *m = pt_pipeline_stage(p, worker), *whole = NULL;
    pt_optimizer *opt = j->file ? NULL : pt_pipeline_stage_optimizer(p, worker), *whole_opt = NULL;
    int rc = PT_OK;
    if (pt_pipeline_ranks(p) > pt_pipeline_workers(p)) { /* slice 0 writes the whole stage */
        rc = pt_pipeline_gather_slices(p, worker, &whole, opt ? &whole_opt : NULL);
        m = whole, opt = whole_opt;
    }
    if (rc == PT_OK && m)
        rc = check_finite(m, opt, worker);
    if (rc == PT_OK && m)
        rc = pt_checkpoint_write_shard(j->plan->staging, stage, pt_pipeline_stages(p), m, opt,
                                       j->state, j->plan->run_id);
    pt_optimizer_destroy(whole_opt);
    pt_model_destroy(whole);
    return rc;
}

int pt_stage_checkpoint_save(pt_pipeline *p, const char *path, const pt_train_state *state,
                             const char *tokenizer)
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
    save_job j = {.plan = plan, .state = state, .file = pt_checkpoint_is_file(path)};
    /* sharded optimizer state: replica 0 writes the stage's whole moments */
    if (rc == PT_OK && pt_pipeline_zero(p))
        rc = pt_pipeline_agree(p, pt_pipeline_run(p, gather_moments, &j), NULL, 0);
    if (rc == PT_OK)
        rc = pt_pipeline_agree(p, pt_pipeline_run(p, write_shard, &j), NULL, 0);
    if (rc == PT_OK && main && tokenizer && !j.file)
        rc = pt_checkpoint_write_tokenizer(plan->staging, tokenizer);
    /* the set's index lists whole tensors: with tensor slices, the whole
     * model's description rather than the pipeline's (slice 0's shapes) */
    pt_model *whole = NULL;
    if (rc == PT_OK && main && pt_pipeline_ranks(p) > pt_pipeline_workers(p))
        rc = pt_model_describe(pt_pipeline_model_config(p), &whole);
    if (rc == PT_OK && main)
        rc = pt_checkpoint_publish(
            plan->staging, path, pt_pipeline_stages(p), whole ? whole : pt_pipeline_description(p),
            j.file ? NULL : pt_pipeline_stage_optimizer(p, pt_pipeline_rank(p)), state,
            plan->run_id);
    pt_model_destroy(whole);
    if (pt_pipeline_zero(p))
        pt_pipeline_run(p, release_moments, NULL);
    rc = pt_pipeline_agree(p, rc, NULL, 0);
    free(plan);
    return rc;
}
