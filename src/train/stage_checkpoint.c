/* stage_checkpoint.c: checkpoints of a pipeline whose workers each own a
 * stage (stage_checkpoint.h). Every worker loads its own tensors on its own
 * thread. Saving assembles the stages of this process into one file, which
 * needs every stage in this process (threads); a pipeline spread over MPI
 * ranks is refused. */
#include "train/stage_checkpoint.h"

#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"

typedef struct {
    const char *path;
    pt_train_state *states; /* one per worker: each thread writes its own */
} load_job;

static int load_stage(pt_pipeline *p, int worker, void *user)
{
    load_job *j = user;
    return pt_checkpoint_load(j->path, pt_pipeline_stage(p, worker),
                              j->states ? pt_pipeline_stage_optimizer(p, worker) : NULL,
                              j->states ? &j->states[worker] : NULL);
}

int pt_stage_checkpoint_load(pt_pipeline *p, const char *path, pt_train_state *state)
{
    load_job j = {.path = path};
    int P = pt_pipeline_workers(p);
    if (state && !(j.states = calloc((size_t)P, sizeof *j.states)))
        return pt_fail(PT_ENOMEM, "cannot allocate the run states");
    int rc = pt_pipeline_run(p, load_stage, &j);
    if (rc == PT_OK && state)
        *state = j.states[pt_pipeline_rank(p)];
    free(j.states);
    return rc;
}

/* Every local stage's parameters and moments copied into one whole model. */
static int assemble(pt_pipeline *p, pt_model *whole, pt_optimizer *opt)
{
    for (int i = 0; i < pt_model_n_params(whole); i++) {
        const pt_param *q = pt_model_param(whole, i);
        int rc = pt_pipeline_read_param(p, q->name, -1, q->data);
        for (int which = 0; rc == PT_OK && opt && which < 2; which++) {
            float *dst = pt_optimizer_state(opt, whole, i, which);
            if (dst)
                rc = pt_pipeline_read_param(p, q->name, which, dst);
        }
        if (rc != PT_OK)
            return rc;
    }
    return PT_OK;
}

int pt_stage_checkpoint_save(pt_pipeline *p, const char *path, const pt_train_state *state)
{
    for (int w = 0; w < pt_pipeline_workers(p); w++)
        if (!pt_pipeline_stage(p, w))
            return pt_fail(PT_EUNSUPPORTED,
                           "worker %d's stage is in another process: a single-file "
                           "checkpoint needs every stage in this one",
                           w);
    pt_model *whole = NULL;
    pt_optimizer *opt = NULL;
    pt_optimizer *first = pt_pipeline_stage_optimizer(p, 0);
    int rc = pt_model_create(pt_pipeline_model_config(p), &whole);
    if (rc == PT_OK && first)
        rc = pt_optimizer_create(whole, pt_optimizer_config(first), &opt);
    if (rc == PT_OK)
        rc = assemble(p, whole, opt);
    if (rc == PT_OK)
        rc = pt_checkpoint_save(path, whole, opt, state);
    pt_optimizer_destroy(opt);
    pt_model_destroy(whole);
    return rc;
}
