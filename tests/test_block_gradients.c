/* test_block_gradients: for every block type, the analytic gradients
 * (backward_input for the input, backward_weight for each parameter) agree
 * with central finite differences of the forward, on small random shapes. */
#include "block_harness.h"

static int failures;

/* max over checked coordinates of |analytic - numeric| / max|analytic| */
static double compare(harness *h, float *x, const float *grad, size_t n, const char *what,
                      float skip_below)
{
    const float eps = 1e-2f;
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

int main(void)
{
    const int B = 2, T = 5, C = 8, H = 2, V = 11;
    pt_block_shape gpt = {.T = T, .C = C, .H = H, .V = V, .n_layer = 2};
    harness h;

    memset(&h, 0, sizeof h);
    pt_embedding_init(&h.b, &gpt);
    harness_setup(&h, B, 0, T, V, 1);
    check_block("embedding", &h, 0, 0.0f);

    memset(&h, 0, sizeof h);
    pt_layernorm_init(&h.b, &gpt, "ln");
    harness_setup(&h, B, 0, T, V, 2);
    check_block("layernorm", &h, 1, 0.0f);

    memset(&h, 0, sizeof h);
    pt_block_shape lin = {.in = 7, .out = 6};
    pt_linear_init(&h.b, &lin, "fc.0");
    harness_setup(&h, B, 0, 0, V, 3);
    check_block("linear", &h, 1, 0.0f);

    memset(&h, 0, sizeof h);
    pt_block_shape ew = {.in = 13};
    pt_gelu_init(&h.b, &ew);
    harness_setup(&h, B, 0, 0, V, 4);
    check_block("gelu", &h, 1, 0.0f);

    memset(&h, 0, sizeof h);
    pt_relu_init(&h.b, &ew);
    harness_setup(&h, B, 0, 0, V, 5);
    check_block("relu", &h, 1, 0.05f);

    memset(&h, 0, sizeof h);
    pt_attention_init(&h.b, &gpt, "attn");
    harness_setup(&h, B, 0, T, V, 6);
    check_block("attention (causal, 2 heads)", &h, 1, 0.0f);

    /* long enough for several of attention's row bands, the last one short */
    pt_block_shape longer = {.T = 150, .C = 8, .H = 2, .V = V, .n_layer = 2};
    memset(&h, 0, sizeof h);
    pt_attention_init(&h.b, &longer, "attn");
    harness_setup(&h, 1, 0, longer.T, V, 10);
    check_block("attention (T 150: three row bands)", &h, 1, 0.0f);

    memset(&h, 0, sizeof h);
    pt_transformer_init(&h.b, &gpt, 0);
    harness_setup(&h, B, 0, T, V, 7);
    check_block("transformer", &h, 1, 0.0f);

    memset(&h, 0, sizeof h);
    pt_lm_head_init(&h.b, &gpt);
    harness_setup(&h, B, 1, T, V, 8);
    check_block("lm_head (ln_f, tied head, cross-entropy)", &h, 1, 0.0f);

    memset(&h, 0, sizeof h);
    pt_block_shape cls = {.in = 9, .out = 4};
    pt_classifier_init(&h.b, &cls, "fc.1");
    harness_setup(&h, B, 1, 0, 4, 9);
    check_block("classifier (linear, cross-entropy)", &h, 1, 0.0f);

    printf("%s\n", failures ? "FAILED" : "all block gradients agree");
    return failures ? 1 : 0;
}
