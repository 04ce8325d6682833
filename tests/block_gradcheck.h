/* block_gradcheck.h: a block's analytic gradients against central finite
 * differences of its forward (block_harness.h's loss): the input gradient
 * from backward_input and each parameter's from backward_weight, checked
 * separately, at up to 48 coordinates each. Failures are counted in
 * `failures`. Header-only: each gradient test includes it once. */
#ifndef PT_TESTS_BLOCK_GRADCHECK_H
#define PT_TESTS_BLOCK_GRADCHECK_H

#include "block_harness.h"

static int failures;

static float fd_step = 1e-2f; /* the central differences' step */

/* max over checked coordinates of |analytic - numeric| / max|analytic| */
static double compare(harness *h, float *x, const float *grad, size_t n, const char *what,
                      float skip_below)
{
    const float eps = fd_step;
    double gmax = 1e-6, worst = 0.0;
    for (size_t i = 0; i < n; i++)
        gmax = fmax(gmax, fabs(grad[i]));
    size_t stride = n > 48 ? n / 48 : 1;
    for (size_t i = 0; i < n; i += stride) {
        if (fabsf(x[i]) < skip_below)
            continue; /* a kink (ReLU at 0) has no derivative to compare */
        float keep = x[i];
        x[i] = keep + eps;
        double up = harness_loss(h);
        x[i] = keep - eps;
        double down = harness_loss(h);
        x[i] = keep;
        double numeric = (up - down) / (2.0 * eps);
        worst = fmax(worst, fabs(numeric - grad[i]) / gmax);
    }
    printf("  %-40s max rel err %.2e\n", what, worst);
    if (!(worst < 1e-3)) {
        printf("  FAIL: %s\n", what);
        failures++;
    }
    return worst;
}

static void check_block(const char *label, harness *h, int has_input, float skip_below)
{
    printf("%s\n", label);
    harness_backward(h);
    /* copies: the finite differences reuse the buffers */
    float *din = harness_floats(h->n_in);
    memcpy(din, h->din, h->n_in * sizeof(float));
    if (has_input)
        compare(h, h->in, din, h->n_in, "input", skip_below);
    for (int i = 0; i < h->b.n_params; i++) {
        size_t n = pt_param_decl_numel(&h->b.decl[i]);
        float *g = harness_floats(n);
        memcpy(g, h->b.g[i], n * sizeof(float));
        compare(h, h->b.p[i], g, n, h->b.decl[i].name, 0.0f);
        pt_free(g);
    }
    pt_free(din);
    harness_free(h);
}

#endif
