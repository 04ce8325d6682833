/* weight_stash.c: PipeDream's weight stashing for one chunk.
 *
 * Under an asynchronous schedule a chunk's weights change after every
 * backward, while several micro-batches are between their forward and their
 * backward. Each forward records the version it used (the schedule's
 * `version`: updates applied to the chunk before it); its backward must run
 * with those same weights, or the gradient is taken at a point the forward
 * never visited. A chunk's parameters are one contiguous span of the model's
 * data arena, so a version is one copy of that span: pt_stash_forward() keeps
 * a copy per version still in flight (shared by the micro-batches that used
 * it), and around a backward whose version is no longer current
 * pt_stash_enter()/leave() swap the stashed copy in and the current weights
 * back out. The update after the backward then applies to the current
 * weights, as in PipeDream. Called by executor.c, on the chunk's worker. */
#include <stdlib.h>
#include <string.h>

#include "runtime/pipeline_internal.h"
#include "tensor/error.h"

int pt_stash_init(pt_weight_stash *w, pt_model *m, int first, int last)
{
    memset(w, 0, sizeof *w);
    int a = pt_model_block_first_param(m, first), b = pt_model_block_first_param(m, last + 1);
    if (b > a) {
        const pt_param *p0 = pt_model_param(m, a), *p1 = pt_model_param(m, b - 1);
        w->data = p0->data;
        w->model = m;
        w->grad = p0->grad;
        w->floats = (size_t)(p1->data + p1->numel - p0->data);
    }
    return PT_OK;
}

void pt_stash_free(pt_weight_stash *w)
{
    for (int i = 0; i < w->n_stash; i++)
        pt_free(w->stash[i]);
    free(w->stash);
    free(w->stash_version);
    free(w->stash_refs);
    pt_free(w->current);
    memset(w, 0, sizeof *w);
}

static int find(const pt_weight_stash *w, int version)
{
    for (int i = 0; i < w->n_stash; i++)
        if (w->stash_refs[i] > 0 && w->stash_version[i] == version)
            return i;
    return -1;
}

int pt_stash_forward(pt_weight_stash *w, int version)
{
    if (version != w->version)
        return pt_fail(PT_EINVAL,
                       "a forward of weight version %d runs when the chunk is at "
                       "version %d",
                       version, w->version);
    if (!w->floats)
        return PT_OK;
    int i = find(w, version);
    if (i >= 0) {
        w->stash_refs[i]++;
        return PT_OK;
    }
    for (i = 0; i < w->n_stash && w->stash_refs[i] > 0; i++)
        ;
    if (i == w->n_stash) {
        int n = w->n_stash + 1;
        float **st = realloc(w->stash, sizeof *st * (size_t)n);
        if (st)
            w->stash = st;
        int *sv = realloc(w->stash_version, sizeof *sv * (size_t)n);
        if (sv)
            w->stash_version = sv;
        int *sr = realloc(w->stash_refs, sizeof *sr * (size_t)n);
        if (sr)
            w->stash_refs = sr;
        float *copy = st && sv && sr ? pt_alloc_floats(w->floats) : NULL;
        /* the swap buffer comes with the first version, as the planner
         * counts it, rather than at a backward deep in some later step */
        if (copy && !w->current && !(w->current = pt_alloc_floats(w->floats))) {
            pt_free(copy);
            copy = NULL;
        }
        if (!copy)
            return pt_fail(PT_ENOMEM, "cannot stash a weight version (%zu floats)", w->floats);
        w->stash[i] = copy;
        w->n_stash = n;
    }
    memcpy(w->stash[i], w->data, w->floats * sizeof(float));
    w->stash_version[i] = version;
    w->stash_refs[i] = 1;
    return PT_OK;
}

int pt_stash_enter(pt_weight_stash *w, int version, bool *swapped)
{
    *swapped = false;
    if (!w->floats || version == w->version)
        return PT_OK;
    int i = find(w, version);
    if (i < 0)
        return pt_fail(PT_EINVAL,
                       "a backward needs weight version %d, which no forward "
                       "stashed",
                       version);
    memcpy(w->current, w->data, w->floats * sizeof(float));
    memcpy(w->data, w->stash[i], w->floats * sizeof(float));
    pt_model_params_changed(w->model);
    *swapped = true;
    return PT_OK;
}

void pt_stash_leave(pt_weight_stash *w, int version, bool swapped, bool done)
{
    if (!w->floats)
        return;
    if (swapped) {
        memcpy(w->data, w->current, w->floats * sizeof(float));
        pt_model_params_changed(w->model);
    }
    int i = done ? find(w, version) : -1;
    if (i >= 0)
        w->stash_refs[i]--;
}
