/* mlp.c: a classifier of widths w0 -> w1 -> ... -> classes as a list of
 * layers: linear "fc.i" and ReLU for each hidden layer, then the classifier
 * (linear + cross-entropy) to the last width. */
#include <stdio.h>

#include "model/spec.h"
#include "tensor/error.h"

/* A layer of the list, its arguments given. */
static void add(pt_layer_list *l, const char *name, const char *prefix, int a0, int a1)
{
    pt_layer_item *it = pt_layer_list_add(l, name, prefix);
    it->arg[0] = a0, it->arg[1] = a1, it->arg[2] = 1; /* linear: with bias */
}

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
    pt_layer_list l;
    int rc = pt_layer_list_init(&l);
    if (rc != PT_OK)
        return rc;
    char prefix[32];
    int last = c->n_widths - 2;
    for (int i = 0; i < last; i++) {
        snprintf(prefix, sizeof prefix, "fc.%d", i);
        add(&l, "linear", prefix, c->widths[i], c->widths[i + 1]);
        add(&l, "relu", "", 0, 0);
    }
    snprintf(prefix, sizeof prefix, "fc.%d", last);
    add(&l, "classifier", prefix, c->widths[last], c->widths[last + 1]);
    rc = pt_layers_build(m, &l);
    pt_layer_list_free(&l);
    return rc;
}
