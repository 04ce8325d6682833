/* test_bf16_blocks: every block's bf16 forward and backward against its
 * fp32 result on the same parameters and inputs.
 *
 * For each block kind (embedding, layernorm, linear, each activation,
 * attention, transformer with each activation, lm_head, classifier; conv2d,
 * the pools, GroupNorm, LayerNorm over an image, the residual block, the
 * Llama block, RMSNorm, the mse head and the last-token classifier) the
 * fp32 kernels give the reference output, input gradient and parameter
 * gradients; the bf16 kernels (inputs and the output gradient rounded to
 * bf16, activations stored as bf16) must agree with each within a relative
 * L2 error of TOL (bf16 keeps 8 significant bits: one rounding is 2^-9
 * relative, a block chains a few), and must differ from them (they round).
 * Where the machine has AMX or AVX512_BF16, those products and the portable
 * ones agree within PATHS: the paths round at the same places and differ
 * only in the order of float sums inside a product, which moves a stored
 * value by one bf16 step now and then. A kernel the machine lacks is
 * skipped with a line saying so. */
#include "block_harness.h"
#include "tensor/bf16.h"

#define TOL   5e-2
#define PATHS 5e-3

static int failures;

/* What a run of a block leaves: output, input gradient, parameter
 * gradients, all widened to float, one after another. */
typedef struct {
    float *v;
    size_t n;
    double loss;
} result;

static void *typed_copy(const float *x, size_t n, pt_elem_type t)
{
    void *p = harness_floats(n);
    if (t == PT_BF16)
        pt_bf16_from_floats(p, x, n);
    else
        memcpy(p, x, n * sizeof(float));
    return p;
}

static void append(result *r, const void *x, size_t n, pt_elem_type t)
{
    for (size_t i = 0; i < n; i++)
        r->v[r->n++] =
            t == PT_BF16 ? pt_bf16_widen(((const pt_bf16 *)x)[i]) : ((const float *)x)[i];
}

static size_t result_size(const harness *h)
{
    size_t n = h->n_out + h->n_in;
    for (int i = 0; i < h->b.n_params; i++)
        n += pt_param_decl_numel(&h->b.decl[i]);
    return n;
}

/* Forward, backward_input with dout = R, backward_weight, on kernels k. */
static void run(harness *h, const pt_kernels *k, result *r)
{
    pt_elem_type t = k->act, out_t = h->b.ops->out_is_float ? PT_F32 : t;
    h->b.k = k;
    void *in = typed_copy(h->in, h->n_in, t), *dout = typed_copy(h->R, h->n_out, out_t);
    void *out = harness_floats(h->n_out), *din = harness_floats(h->n_in);
    void *saved = harness_floats(pt_arena_floats_for(h->b.ops->saved_bytes(&h->b, h->B)));
    float *grads = harness_grads(&h->b, h->B), *work = harness_work(&h->b, h->B);
    h->b.grads = grads, h->b.work = work;
    pt_microbatch mb = h->mb;
    mb.inputs = NULL; /* the block's input is `in` */
    for (int i = 0; i < h->b.n_params; i++)
        memset(h->b.g[i], 0, pt_param_decl_numel(&h->b.decl[i]) * sizeof(float));
    double loss_sum = 0;
    int rows = 0;
    h->b.ops->forward(&h->b, &mb, in, out, saved, &loss_sum, &rows);
    r->n = 0;
    r->loss = rows ? loss_sum / rows : 0;
    append(r, out, h->n_out, out_t);
    h->b.ops->backward_input(&h->b, &mb, in, out, saved, dout, h->n_in ? din : NULL, 1.0f);
    h->b.ops->backward_weight(&h->b, &mb, in, out, saved, dout);
    append(r, din, h->n_in, t);
    for (int i = 0; i < h->b.n_params; i++)
        append(r, h->b.g[i], pt_param_decl_numel(&h->b.decl[i]), PT_F32);
    pt_free(in), pt_free(dout), pt_free(out), pt_free(din), pt_free(saved);
    pt_free(grads), pt_free(work);
    h->b.grads = h->grads, h->b.work = h->work;
}

/* relative L2 distance of a from b over [from, to) */
static double rel_l2(const result *a, const result *b, size_t from, size_t to)
{
    double d = 0, n = 1e-30;
    for (size_t i = from; i < to; i++) {
        d += ((double)a->v[i] - b->v[i]) * ((double)a->v[i] - b->v[i]);
        n += (double)b->v[i] * b->v[i];
    }
    return sqrt(d / n);
}

static void check(const char *name, harness *h)
{
    result ref = {harness_floats(result_size(h)), 0, 0},
           low = {harness_floats(result_size(h)), 0, 0};
    run(h, pt_kernels_cpu(), &ref);
    run(h, pt_kernels_bf16_portable(), &low);
    size_t out_end = h->n_out, din_end = out_end + h->n_in;
    double e_out = rel_l2(&low, &ref, 0, out_end), e_din = rel_l2(&low, &ref, out_end, din_end);
    double e_grad = rel_l2(&low, &ref, din_end, ref.n);
    double e_loss = fabs(low.loss - ref.loss) / fmax(fabs(ref.loss), 1e-30);
    int same = !memcmp(low.v, ref.v, ref.n * sizeof(float));
    printf("  %-34s out %.1e  din %.1e  grads %.1e%s", name, e_out, e_din, e_grad,
           h->is_loss ? "" : "\n");
    if (h->is_loss)
        printf("  loss %.1e\n", e_loss);
    if (!(e_out < TOL && e_din < TOL && e_grad < TOL && e_loss < TOL) || same) {
        printf("  FAIL: %s in bf16 is %s fp32 (tolerance %.0e)\n", name,
               same ? "identical to" : "too far from", TOL);
        failures++;
    }
    const pt_kernels *fast[] = {pt_kernels_bf16_amx(), pt_kernels_bf16_avx512()};
    for (int i = 0; i < 2; i++) {
        if (!fast[i])
            continue;
        result r = {harness_floats(result_size(h)), 0, 0};
        run(h, fast[i], &r);
        double e = rel_l2(&r, &low, 0, ref.n);
        printf("  %-34s %s against portable %.1e\n", "", fast[i]->products, e);
        if (!(e < PATHS) || fabs(r.loss - low.loss) > PATHS * fabs(low.loss)) {
            printf("  FAIL: %s: %s and portable products differ by %.1e (tolerance %.0e)\n", name,
                   fast[i]->products, e, PATHS);
            failures++;
        }
        pt_free(r.v);
    }
    pt_free(ref.v), pt_free(low.v);
    harness_free(h);
}

static void setup_and_check(const char *name, harness *h, int is_loss, int per_sample, int V,
                            uint64_t seed)
{
    harness_setup(h, 3, is_loss, per_sample, V, seed);
    check(name, h);
}

typedef void (*init_fn)(pt_block *b, const pt_block_shape *s, const char *prefix);

static void check_init(const char *name, init_fn init, pt_block_shape s, uint64_t seed)
{
    harness h;
    memset(&h, 0, sizeof h);
    init(&h.b, &s, "m");
    setup_and_check(name, &h, 0, s.T, 2, seed);
}

/* the conv-net, Llama and head blocks */
static void check_layers(void)
{
    pt_block_shape img = {
        .channels = 4, .height = 9, .width = 8, .out_channels = 6, .kernel = 3, .padding = 1};
    check_init("conv2d", pt_conv2d_init, img, 20);
    pt_block_shape strided = img;
    strided.stride = 2, strided.no_bias = 1;
    check_init("conv2d (stride 2, no bias)", pt_conv2d_init, strided, 21);
    pt_block_shape pool = {
        .channels = 4, .height = 9, .width = 8, .kernel = 3, .stride = 2, .padding = 1};
    /* inputs already bf16: rounding would make near ties ties, and move
     * the gradient to another winner */
    harness h;
    memset(&h, 0, sizeof h);
    pt_maxpool_init(&h.b, &pool, NULL);
    harness_setup(&h, 3, 0, 0, 2, 22);
    for (size_t i = 0; i < h.n_in; i++)
        h.in[i] = pt_bf16_rounded(h.in[i]);
    check("maxpool", &h);
    check_init("avgpool", pt_avgpool_init, pool, 23);
    check_init("global_avgpool", pt_global_avgpool_init, pool, 24);
    pt_block_shape norm = {.channels = 6, .height = 5, .width = 5, .groups = 3};
    check_init("groupnorm", pt_groupnorm_init, norm, 25);
    check_init("layernorm over (C,H,W)", pt_layernorm_image_init, norm, 26);
    pt_block_shape res = {
        .channels = 4, .height = 8, .width = 8, .out_channels = 6, .stride = 2, .groups = 2};
    check_init("residual (projection)", pt_residual_init, res, 27);
    res.out_channels = 4, res.stride = 1;
    check_init("residual (identity)", pt_residual_init, res, 28);
    pt_block_shape llama = {.T = 20, .C = 16, .H = 4, .n_kv_heads = 2, .n_inner = 24};
    check_init("llama", pt_llama_init, llama, 29);
    check_init("rmsnorm", pt_rmsnorm_init, llama, 30);

    memset(&h, 0, sizeof h);
    pt_mse_init(&h.b, &(pt_block_shape){.in = 10}, "");
    harness_setup(&h, 3, 1, 0, 2, 31);
    float *y = harness_floats(h.n_in);
    for (size_t i = 0; i < h.n_in; i++)
        y[i] = 0.5f * h.R[i]; /* R: the harness's other random numbers */
    h.mb.target_values = y;
    check("mse", &h);
    pt_free(y);

    memset(&h, 0, sizeof h);
    pt_last_token_classifier_init(&h.b, &(pt_block_shape){.T = 6, .C = 16, .out = 5}, "score");
    setup_and_check("last-token classifier", &h, 1, 0, 5, 32);
}

int main(void)
{
    enum { T = 20, C = 16, H = 2, V = 24 };
    pt_block_shape gpt =
        pt_block_shape_gpt(&(pt_block_shape){.T = T, .C = C, .H = H, .V = V, .n_layer = 2});
    harness h;
    printf("bf16 against fp32 (relative L2), products: portable; against portable: %s, %s\n",
           pt_kernels_bf16_amx() ? "amx" : "skipped: amx (not on this CPU)",
           pt_kernels_bf16_avx512() ? "avx512bf16" : "skipped: avx512bf16 (not on this CPU)");

    memset(&h, 0, sizeof h);
    pt_embedding_init(&h.b, &gpt);
    setup_and_check("embedding", &h, 0, T, V, 1);

    memset(&h, 0, sizeof h);
    pt_layernorm_init(&h.b, &gpt, "ln");
    setup_and_check("layernorm", &h, 0, T, V, 2);

    memset(&h, 0, sizeof h);
    pt_linear_init(&h.b, &(pt_block_shape){.in = 37, .out = 29}, "fc.0");
    setup_and_check("linear", &h, 0, 0, V, 3);

    const char *act_names[] = {"gelu_new", "gelu", "relu", "silu"};
    for (int i = 0; i < 4; i++) {
        char label[64];
        memset(&h, 0, sizeof h);
        pt_activation_init(&h.b, &(pt_block_shape){.in = 50}, (pt_activation)i);
        snprintf(label, sizeof label, "activation %s", act_names[i]);
        setup_and_check(label, &h, 0, 0, V, 4 + (uint64_t)i);
    }

    memset(&h, 0, sizeof h);
    pt_attention_init(&h.b, &gpt, "attn");
    setup_and_check("attention", &h, 0, T, V, 8);

    for (int i = 0; i < 4; i++) {
        char label[64];
        pt_block_shape s = gpt;
        s.act = (pt_activation)i;
        memset(&h, 0, sizeof h);
        pt_transformer_init(&h.b, &s, 1);
        snprintf(label, sizeof label, "transformer (%s)", act_names[i]);
        setup_and_check(label, &h, 0, T, V, 9 + (uint64_t)i);
    }

    memset(&h, 0, sizeof h);
    pt_lm_head_init(&h.b, &gpt);
    setup_and_check("lm_head", &h, 1, T, V, 13);

    memset(&h, 0, sizeof h);
    pt_classifier_init(&h.b, &(pt_block_shape){.in = 31, .out = 7}, "fc.1");
    setup_and_check("classifier", &h, 1, 0, 7, 14);

    check_layers();

    printf("%s\n", failures ? "FAILED" : "every block's bf16 result agrees with fp32");
    return failures ? 1 : 0;
}
