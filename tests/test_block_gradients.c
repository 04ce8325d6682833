/* test_block_gradients: for every block type, the analytic gradients
 * (backward_input for the input, backward_weight for each parameter) agree
 * with central finite differences of the forward, on small random shapes;
 * also for the GPT2Config variants a gpt's blocks take: each MLP activation,
 * the MLP width, LayerNorm's epsilon, the attention scores unscaled and
 * scaled by the layer, an untied LM head, a longer position table. First,
 * each activation kernel against its formula in double: its values, and its
 * derivative against central differences of that formula. */
#include "block_gradcheck.h"
#include "nn/attention.h"

/* The activations in double, as Hugging Face's ACT2FN computes them. */
static double activation_exact(pt_activation act, double x)
{
    switch (act) {
    case PT_ACT_GELU_NEW:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case PT_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case PT_ACT_RELU: return x > 0.0 ? x : 0.0;
    case PT_ACT_SILU: return x / (1.0 + exp(-x));
    }
    return NAN;
}

static void check_activation_kernel(const char *name, pt_activation act)
{
    enum { N = 481 };
    float x[N], y[N], d[N], ones[N];
    for (int i = 0; i < N; i++)
        x[i] = -12.0f + 0.05f * (float)i + 0.003f, ones[i] = 1.0f; /* 0 itself is relu's kink */
    pt_activation_kernels a = pt_activation_pick(pt_kernels_cpu(), act);
    a.forward(y, x, N);
    a.backward(d, x, ones, N);
    double worst_y = 0.0, worst_d = 0.0, h = 1e-5;
    for (int i = 0; i < N; i++) {
        double xi = x[i], scale = 1.0 + fabs(xi);
        double slope = (activation_exact(act, xi + h) - activation_exact(act, xi - h)) / (2.0 * h);
        worst_y = fmax(worst_y, fabs(y[i] - activation_exact(act, xi)) / scale);
        worst_d = fmax(worst_d, fabs(d[i] - slope) / scale);
    }
    printf("  %-10s kernel: value err %.1e, derivative err %.1e\n", name, worst_y, worst_d);
    if (!(worst_y < 2e-6 && worst_d < 2e-6)) {
        printf("  FAIL: the %s kernels do not compute %s\n", name, name);
        failures++;
    }
}

static void check_shape(const char *label, const pt_block_shape *s, int layer, int seed)
{
    harness h;
    memset(&h, 0, sizeof h);
    if (layer >= 0)
        pt_transformer_init(&h.b, s, layer);
    else
        pt_lm_head_init(&h.b, s);
    harness_setup(&h, 2, layer < 0, s->T, s->V, (uint64_t)seed);
    check_block(label, &h, 1, 0.0f);
}

int main(void)
{
    const int B = 2, T = 5, C = 8, H = 2, V = 11;
    pt_block_shape gpt = {.T = T, .C = C, .H = H, .V = V, .n_layer = 2};
    harness h;
    const struct {
        const char *name;
        pt_activation act;
        float skip_below; /* relu has a kink at 0 */
    } acts[] = {{"gelu_new", PT_ACT_GELU_NEW, 0.0f},
                {"gelu", PT_ACT_GELU, 0.0f},
                {"relu", PT_ACT_RELU, 0.05f},
                {"silu", PT_ACT_SILU, 0.0f}};

    for (int i = 0; i < 4; i++)
        check_activation_kernel(acts[i].name, acts[i].act);

    memset(&h, 0, sizeof h);
    pt_embedding_init(&h.b, &gpt);
    harness_setup(&h, B, 0, T, V, 1);
    check_block("embedding", &h, 0, 0.0f);

    pt_block_shape positions = gpt;
    positions.n_positions = T + 4;
    memset(&h, 0, sizeof h);
    pt_embedding_init(&h.b, &positions);
    harness_setup(&h, B, 0, T, V, 11);
    check_block("embedding (n_positions T + 4)", &h, 0, 0.0f);

    memset(&h, 0, sizeof h);
    pt_layernorm_init(&h.b, &gpt, "ln");
    harness_setup(&h, B, 0, T, V, 2);
    check_block("layernorm", &h, 1, 0.0f);

    pt_block_shape wide_eps = gpt;
    wide_eps.ln_eps = 0.5f; /* large beside the rows' variance of about 1 */
    memset(&h, 0, sizeof h);
    pt_layernorm_init(&h.b, &wide_eps, "ln");
    harness_setup(&h, B, 0, T, V, 12);
    check_block("layernorm (epsilon 0.5)", &h, 1, 0.0f);

    memset(&h, 0, sizeof h);
    pt_block_shape lin = {.in = 7, .out = 6};
    pt_linear_init(&h.b, &lin, "fc.0");
    harness_setup(&h, B, 0, 0, V, 3);
    check_block("linear", &h, 1, 0.0f);

    for (int i = 0; i < 4; i++) {
        char label[64];
        pt_block_shape ew = {.in = 13};
        memset(&h, 0, sizeof h);
        pt_activation_init(&h.b, &ew, acts[i].act);
        harness_setup(&h, B, 0, 0, V, 4 + (uint64_t)i);
        snprintf(label, sizeof label, "activation %s", acts[i].name);
        check_block(label, &h, 1, acts[i].skip_below);
    }

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

    check_shape("transformer", &gpt, 0, 7);
    for (int i = 1; i < 4; i++) {
        char label[64];
        pt_block_shape s = gpt;
        s.act = acts[i].act;
        snprintf(label, sizeof label, "transformer (%s)", acts[i].name);
        /* a relu's kink crossed by a step of 1e-2 would spoil the differences */
        fd_step = acts[i].act == PT_ACT_RELU ? 1e-3f : 1e-2f;
        check_shape(label, &s, 0, 20 + i);
    }
    fd_step = 1e-2f;
    pt_block_shape narrow = gpt;
    narrow.n_inner = 3 * C + 1;
    check_shape("transformer (n_inner 3C + 1)", &narrow, 0, 24);
    pt_block_shape eps = gpt;
    eps.ln_eps = 0.5f;
    check_shape("transformer (epsilon 0.5)", &eps, 0, 25);
    pt_block_shape unscaled = gpt;
    unscaled.attn_unscaled = 1;
    check_shape("transformer (scores not / sqrt(hs))", &unscaled, 0, 26);
    pt_block_shape by_layer = gpt;
    by_layer.attn_by_layer = 1;
    check_shape("transformer (layer 2, scores / 3)", &by_layer, 2, 27);
    by_layer.attn_unscaled = 1;
    check_shape("transformer (layer 1, scores / 2 only)", &by_layer, 1, 28);

    check_shape("lm_head (ln_f, tied head, cross-entropy)", &gpt, -1, 8);
    pt_block_shape untied = eps;
    untied.head_untied = 1;
    check_shape("lm_head (untied head, epsilon 0.5)", &untied, -1, 29);

    /* the scale the attention pieces receive is GPT2Attention's */
    float hs = (float)(C / H);
    struct {
        int unscaled, by_layer, layer;
        float expect;
    } scales[] = {{0, 0, 3, 1.0f / sqrtf(hs)},
                  {1, 0, 3, 1.0f},
                  {0, 1, 3, 1.0f / sqrtf(hs) / 4.0f},
                  {1, 1, 0, 1.0f},
                  {1, 1, 2, 1.0f / 3.0f}};
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
        pt_block_shape s = gpt;
        s.attn_unscaled = scales[i].unscaled, s.attn_by_layer = scales[i].by_layer;
        float got = pt_attention_scale(&s, scales[i].layer);
        if (fabsf(got - scales[i].expect) > 1e-7f * scales[i].expect) {
            printf("  FAIL: scale (unscaled %d, by layer %d, layer %d) is %g, not %g\n",
                   scales[i].unscaled, scales[i].by_layer, scales[i].layer, got, scales[i].expect);
            failures++;
        }
    }

    memset(&h, 0, sizeof h);
    pt_block_shape cls = {.in = 9, .out = 4};
    pt_classifier_init(&h.b, &cls, "fc.1");
    harness_setup(&h, B, 1, 0, 4, 9);
    check_block("classifier (linear, cross-entropy)", &h, 1, 0.0f);

    /* the spec's layers (src/nn/spec_*.c, linear without bias) */
    const struct {
        const char *label;
        void (*init)(pt_block *, const pt_block_shape *, const char *);
        pt_block_shape shape;
        int is_loss, labels, classes;
    } spec_layers[] = {
        {"linear without bias, 3 rows per sample",
         pt_linear_init_no_bias,
         {.in = 6, .out = 5, .T = 3},
         0,
         0,
         2},
        {"linear, 3 rows per sample", pt_linear_init, {.in = 6, .out = 5, .T = 3}, 0, 0, 2},
        {"tanh", pt_tanh_init, {.in = 7}, 0, 0, 2},
        {"cross_entropy (3 rows of 5 classes)", pt_cross_entropy_init, {.in = 5, .T = 3}, 1, 3, 5},
        {"mse", pt_mse_init, {.in = 7}, 1, 0, 2},
    };
    float values[2 * 7]; /* mse's targets */
    for (int i = 0; i < 2 * 7; i++)
        values[i] = 0.1f * (float)(i % 5) - 0.2f;
    for (size_t i = 0; i < sizeof spec_layers / sizeof spec_layers[0]; i++) {
        memset(&h, 0, sizeof h);
        spec_layers[i].init(&h.b, &spec_layers[i].shape, "0");
        harness_setup(&h, B, spec_layers[i].is_loss, spec_layers[i].labels, spec_layers[i].classes,
                      10 + i);
        h.mb.target_values = values;
        check_block(spec_layers[i].label, &h, 1, 0.0f);
    }

    printf("%s\n", failures ? "FAILED" : "all block gradients agree");
    return failures ? 1 : 0;
}
