/* mlp.c: a classifier of widths w0 -> w1 -> ... -> classes as blocks:
 * Linear "fc.i" and ReLU for each hidden layer, then the classifier block
 * (linear + cross-entropy) to the last width. */
#include <stdio.h>

#include "model/model.h"
#include "tensor/error.h"

int pt_mlp_build(pt_model *m)
{
    const pt_model_config *c = &m->cfg;
    if (c->n_widths < 2 || c->n_widths > PT_MLP_MAX_WIDTHS)
        return pt_fail(PT_EINVAL, "mlp needs 2 to %d widths (got %d)", PT_MLP_MAX_WIDTHS,
                       c->n_widths);
    for (int i = 0; i < c->n_widths; i++)
        if (c->widths[i] < 1)
            return pt_fail(PT_EINVAL, "mlp width %d is %d; widths must be >= 1", i, c->widths[i]);
    if (c->widths[c->n_widths - 1] < 2)
        return pt_fail(PT_EINVAL, "mlp needs at least 2 classes (last width)");
    char prefix[32];
    int last = c->n_widths - 2;
    for (int i = 0; i < last; i++) {
        pt_block_shape s = {.in = c->widths[i], .out = c->widths[i + 1]};
        snprintf(prefix, sizeof prefix, "fc.%d", i);
        pt_linear_init(&m->blocks[m->n_blocks++], &s, prefix);
        pt_block_shape r = {.in = c->widths[i + 1]};
        pt_activation_init(&m->blocks[m->n_blocks++], &r, PT_ACT_RELU);
    }
    pt_block_shape s = {.in = c->widths[last], .out = c->widths[last + 1]};
    snprintf(prefix, sizeof prefix, "fc.%d", last);
    pt_classifier_init(&m->blocks[m->n_blocks++], &s, prefix);
    return PT_OK;
}
