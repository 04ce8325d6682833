/* pipeline_params.h: tests compare what a pipeline's stages hold with a
 * whole model. pipeline_copy_out() copies every parameter (and, with an
 * optimizer, its moments) that a worker of this process holds into the same
 * tensors of a whole model `m` (and its optimizer `o`), and marks in
 * held[i] (may be NULL) which parameters it found; parameters held only by
 * other processes (MPI) keep m's values. */
#ifndef PT_TESTS_PIPELINE_PARAMS_H
#define PT_TESTS_PIPELINE_PARAMS_H

#include <string.h>

#include "pipetrain.h"
#include "runtime/optimizer.h"

static int pipeline_copy_out(const pt_pipeline *p, pt_model *m, pt_optimizer *o,
                             unsigned char *held)
{
    int found = 0;
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *q = pt_model_param(m, i);
        int ok = pt_pipeline_read_param(p, q->name, -1, q->data) == PT_OK;
        for (int which = 0; ok && o && which < 2; which++) {
            float *dst = pt_optimizer_state(o, m, i, which);
            if (dst && pt_pipeline_read_param(p, q->name, which, dst) != PT_OK)
                return -1;
        }
        if (held)
            held[i] = (unsigned char)ok;
        found += ok;
    }
    return found;
}

/* The first parameter i with held[i] (held NULL: every one) whose values
 * or moments differ between (ma, oa) and (mb, ob), bit for bit; -1 when
 * none does. *which tells what differs (-1 the values, 0 or 1 a moment);
 * oa or ob NULL: the values alone. */
static inline int pipeline_first_difference(const pt_model *ma, pt_optimizer *oa,
                                            const pt_model *mb, pt_optimizer *ob,
                                            const unsigned char *held, int *which)
{
    for (int i = 0; i < pt_model_n_params(ma); i++) {
        const pt_param *p = pt_model_param(ma, i), *q = pt_model_param(mb, i);
        if (held && !held[i])
            continue;
        *which = -1;
        if (memcmp(p->data, q->data, p->numel * sizeof(float)))
            return i;
        for (*which = 0; oa && ob && *which < 2; ++*which) {
            const float *x = pt_optimizer_state(oa, ma, i, *which);
            const float *y = pt_optimizer_state(ob, mb, i, *which);
            if (!x || !y || memcmp(x, y, p->numel * sizeof(float)))
                return i;
        }
    }
    return -1;
}

#endif
