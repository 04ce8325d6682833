/* slice_state.c: a tensor slice's state as its worker's whole stage, for
 * checkpoints, which keep one logical layout whatever the run's T.
 *
 * A worker's whole stage is a model of the blocks it holds at T = 1
 * shapes (pt_model_create_part) and, with an optimizer, one of its
 * moments. To save, every slice of the worker places its part of each
 * tensor (and moment) where it lies in the whole one, by
 * pt_param_slice_copy's name-and-offset rule, the whole tensors from slice
 * 0 only, and the tensor group sums them; every other place holds -0.0,
 * the one value whose sum with any x is x, bits and sign of zero included,
 * so slice 0 ends with the tensors exactly as the slices hold them. To
 * load, each slice copies its part out of a whole stage read from the set
 * (under zero, into a whole optimizer of its slice, whose shards it then
 * keeps). Called by the trainer's checkpoints (train/stage_checkpoint.c). */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "nn/block.h"
#include "runtime/pipeline_internal.h"
#include "tensor/error.h"

int pt_pipeline_whole_stage(pt_pipeline *p, int rank, pt_model **whole, pt_optimizer **whole_opt)
{
    *whole = NULL;
    if (whole_opt)
        *whole_opt = NULL;
    pt_worker *w = pt_local_worker(p, rank);
    if (!w)
        return PT_OK;
    unsigned char *hold = pt_worker_hold(w);
    if (!hold)
        return PT_ENOMEM;
    int rc = pt_model_create_part(pt_model_get_config(p->desc), hold, whole);
    free(hold);
    if (rc == PT_OK && whole_opt && p->has_optim)
        rc = pt_optimizer_create(*whole, &p->optim, whole_opt);
    if (rc != PT_OK) {
        pt_model_destroy(*whole);
        *whole = NULL;
    }
    return rc;
}

/* The floats of parameter i (which -1) or of its moment `which`. */
static float *values(pt_model *m, pt_optimizer *o, int i, int which)
{
    return which < 0 ? pt_model_param(m, i)->data : o ? pt_optimizer_state(o, m, i, which) : NULL;
}

/* Slice w's part of one tensor into `dst` (whole-sized), -0.0 elsewhere,
 * then summed over the tensor group. */
static int gather_one(pt_worker *w, const pt_param_decl *d, const float *part, size_t part_n,
                      float *dst, size_t n)
{
    for (size_t k = 0; k < n; k++)
        dst[k] = -0.0f;
    if (d->split_parts > 1)
        pt_param_slice_copy(d, (float *)part, dst, 1);
    else if (w->tensor_rank == 0)
        memcpy(dst, part, part_n * sizeof(float));
    return pt_transport_allreduce_sum_f32(w->tensor_t, w->tensor_group, w->p->T, dst, n);
}

int pt_pipeline_gather_slices(pt_pipeline *p, int rank, pt_model **whole, pt_optimizer **whole_opt)
{
    pt_worker *w = pt_local_worker(p, rank);
    pt_optimizer *mine =
        whole_opt && w && p->has_optim ? (w->full_opt ? w->full_opt : w->opt) : NULL;
    int rc = pt_pipeline_whole_stage(p, rank, whole, mine ? whole_opt : NULL);
    if (!w || rc != PT_OK)
        return rc;
    pt_model *m = *whole;
    pt_optimizer *o = mine ? *whole_opt : NULL;
    for (int i = 0; rc == PT_OK && i < pt_model_n_params(w->stage); i++) {
        const pt_param *q = pt_model_param(w->stage, i);
        const pt_param *to = pt_model_find_param(m, q->name);
        if (!q->data || !to || !to->data)
            continue;
        int j = (int)(to - pt_model_param(m, 0));
        for (int which = -1; rc == PT_OK && which < (o ? 2 : 0); which++)
            rc = gather_one(w, pt_model_param_decl(w->stage, i), values(w->stage, mine, i, which),
                            q->numel, values(m, o, j, which), to->numel);
    }
    if (rc != PT_OK || w->tensor_rank != 0) {
        pt_optimizer_destroy(o);
        pt_model_destroy(m);
        *whole = NULL;
        if (whole_opt)
            *whole_opt = NULL;
    }
    return rc;
}

int pt_pipeline_take_slice(pt_pipeline *p, int rank, const pt_model *whole, pt_optimizer *whole_opt)
{
    pt_worker *w = pt_local_worker(p, rank);
    if (!w)
        return PT_OK;
    pt_optimizer *into = NULL; /* the slice's moments: whole under zero, then sharded */
    int rc = PT_OK;
    if (whole_opt && w->opt)
        rc = p->zero ? pt_optimizer_create(w->stage, &p->optim, &into) : (into = w->opt, PT_OK);
    for (int i = 0; rc == PT_OK && i < pt_model_n_params(w->stage); i++) {
        const pt_param *q = pt_model_param(w->stage, i);
        const pt_param *from = pt_model_find_param(whole, q->name);
        if (!q->data)
            continue;
        if (!from || !from->data)
            rc = pt_fail(PT_EINVAL, "rank %d: the whole stage has no %s to slice", rank, q->name);
        const pt_param_decl *d = pt_model_param_decl(w->stage, i);
        int j = rc == PT_OK ? (int)(from - pt_model_param(whole, 0)) : 0;
        for (int which = -1; rc == PT_OK && which < (into ? 2 : 0); which++) {
            float *dst = values(w->stage, into, i, which);
            const float *src = values((pt_model *)whole, whole_opt, j, which);
            if (d->split_parts > 1)
                pt_param_slice_copy(d, dst, src, 0);
            else
                memcpy(dst, src, q->numel * sizeof(float));
        }
    }
    if (rc == PT_OK && p->zero && into)
        pt_zero_take_moments(w, into);
    if (into != w->opt)
        pt_optimizer_destroy(into);
    return rc;
}
