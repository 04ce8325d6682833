/* pipeline_params.h: tests compare what a pipeline's stages hold with a
 * whole model. pipeline_copy_out() copies every parameter (and, with an
 * optimizer, its moments) that a worker of this process holds into the same
 * tensors of a whole model `m` (and its optimizer `o`), and marks in
 * held[i] (may be NULL) which parameters it found; parameters held only by
 * other processes (MPI) keep m's values. */
#ifndef PT_TESTS_PIPELINE_PARAMS_H
#define PT_TESTS_PIPELINE_PARAMS_H

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

#endif
