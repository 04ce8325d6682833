/* test_block_gradients_layers: the conv-net, Llama and head blocks'
 * analytic gradients (backward_input for the input, backward_weight for
 * each parameter, separately) agree with central finite differences of
 * their forward, on small random shapes: conv2d (padding, stride, no bias,
 * 1x1), max and average pools, the global average pool, flatten,
 * GroupNorm, LayerNorm over (C,H,W), the residual block (identity skip,
 * strided projection, 1x1 projection; either norm), the Llama block
 * (grouped-query and full heads), RMSNorm, the token table without
 * positions (tok_embedding), the mean-squared error head and
 * the last-token classifier. First, forwards against direct loops in
 * double: conv2d's against the convolution's sum, the pools' against their
 * windows, and the rotary kernel against Hugging Face's rotate_half. */
#include "block_gradcheck.h"
#include "nn/conv.h"

/* ---- forwards against their definitions ---- */

static void expect_close(const char *what, double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * (1.0 + fabs(want)))) {
        printf("  FAIL: %s is %.7g, not %.7g\n", what, got, want);
        failures++;
    }
}

static double pixel(const float *x, int C, int H, int W, int c, int y, int xx)
{
    (void)C;
    return y < 0 || y >= H || xx < 0 || xx >= W ? 0.0 : x[((size_t)c * H + y) * W + xx];
}

static void check_conv_forward(int C, int H, int W, int O, int k, int stride, int pad)
{
    harness h;
    memset(&h, 0, sizeof h);
    pt_block_shape s = {.channels = C,
                        .height = H,
                        .width = W,
                        .out_channels = O,
                        .kernel = k,
                        .stride = stride,
                        .padding = pad};
    pt_conv2d_init(&h.b, &s, "conv");
    harness_setup(&h, 2, 0, 0, 2, 40);
    harness_loss(&h);
    pt_conv c = pt_conv_make(C, H, W, O, k, stride, pad);
    double worst = 0.0;
    for (int i = 0; i < 2; i++)
        for (int o = 0; o < O; o++)
            for (int oy = 0; oy < c.g.OH; oy++)
                for (int ox = 0; ox < c.g.OW; ox++) {
                    double sum = h.b.p[1][o];
                    for (int ci = 0; ci < C; ci++)
                        for (int ky = 0; ky < k; ky++)
                            for (int kx = 0; kx < k; kx++)
                                sum += h.b.p[0][((o * C + ci) * k + ky) * k + kx] *
                                       pixel(h.in + (size_t)i * C * H * W, C, H, W, ci,
                                             oy * stride - pad + ky, ox * stride - pad + kx);
                    size_t at = (size_t)i * O * c.g.OH * c.g.OW + (o * c.g.OH + oy) * c.g.OW + ox;
                    worst = fmax(worst, fabs(h.out[at] - sum));
                }
    printf("conv2d %dx%dx%d -> %d, k %d stride %d pad %d: forward err %.1e\n", C, H, W, O, k,
           stride, pad, worst);
    expect_close("conv2d's largest error against the direct sum", worst, 0.0, 1e-5);
    harness_free(&h);
}

static void check_pool_forward(int is_max, int k, int stride, int pad)
{
    enum { C = 2, H = 7, W = 6 };
    harness h;
    memset(&h, 0, sizeof h);
    pt_block_shape s = {
        .channels = C, .height = H, .width = W, .kernel = k, .stride = stride, .padding = pad};
    if (is_max)
        pt_maxpool_init(&h.b, &s, "");
    else
        pt_avgpool_init(&h.b, &s, "");
    harness_setup(&h, 1, 0, 0, 2, 41);
    harness_loss(&h);
    pt_window g = pt_window_make(C, H, W, k, k, stride, pad);
    double worst = 0.0;
    for (int c = 0; c < C; c++)
        for (int oy = 0; oy < g.OH; oy++)
            for (int ox = 0; ox < g.OW; ox++) {
                double best = -INFINITY, sum = 0.0;
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++) {
                        int y = oy * stride - pad + ky, x = ox * stride - pad + kx;
                        double v = pixel(h.in, C, H, W, c, y, x);
                        sum += v;
                        if (y >= 0 && y < H && x >= 0 && x < W)
                            best = fmax(best, v);
                    }
                double want = is_max ? best : sum / (k * k);
                worst = fmax(worst, fabs(h.out[(c * g.OH + oy) * g.OW + ox] - want));
            }
    printf("%s k %d stride %d pad %d: forward err %.1e\n", is_max ? "maxpool" : "avgpool", k,
           stride, pad, worst);
    expect_close("the pool's largest error against its windows", worst, 0.0, 1e-6);
    harness_free(&h);
}

/* q_embed = q cos + rotate_half(q) sin, rotate_half(q) = (-q2, q1) */
static void check_rope(void)
{
    enum { T = 5, HEADS = 2, HD = 8 };
    float x[T * HEADS * HD], y[T * HEADS * HD], cs[T * HD / 2], sn[T * HD / 2];
    for (int i = 0; i < T * HEADS * HD; i++)
        x[i] = y[i] = sinf(0.37f * (float)i + 0.1f);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < HD / 2; j++) {
            double inv = 1.0 / pow(10000.0, 2.0 * j / HD);
            cs[t * HD / 2 + j] = (float)cos(t * inv), sn[t * HD / 2 + j] = (float)sin(t * inv);
        }
    const pt_kernels *k = pt_kernels_cpu();
    k->rope(y, HEADS * HD, T, HEADS, HD, cs, sn, 0);
    double worst = 0.0, back = 0.0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < HEADS; h++)
            for (int j = 0; j < HD; j++) {
                const float *q = x + (t * HEADS + h) * HD;
                int jj = j % (HD / 2);
                double rot = j < HD / 2 ? -q[j + HD / 2] : q[j - HD / 2];
                double want = q[j] * cs[t * HD / 2 + jj] + rot * sn[t * HD / 2 + jj];
                worst = fmax(worst, fabs(y[(t * HEADS + h) * HD + j] - want));
            }
    k->rope(y, HEADS * HD, T, HEADS, HD, cs, sn, 1);
    for (int i = 0; i < T * HEADS * HD; i++)
        back = fmax(back, fabs(y[i] - x[i]));
    printf("rope: err against rotate_half %.1e, rotated back %.1e\n", worst, back);
    expect_close("rope's largest error against rotate_half", worst, 0.0, 1e-6);
    expect_close("rope then its inverse", back, 0.0, 1e-6);
}

/* ---- gradients ---- */

typedef void (*init_fn)(pt_block *b, const pt_block_shape *s, const char *prefix);

static void check_init(const char *label, init_fn init, pt_block_shape s, int B, uint64_t seed)
{
    harness h;
    memset(&h, 0, sizeof h);
    init(&h.b, &s, "m");
    harness_setup(&h, B, 0, s.T, 3, seed);
    check_block(label, &h, 1, 0.0f);
}

static void check_mse(void)
{
    harness h;
    memset(&h, 0, sizeof h);
    pt_mse_init(&h.b, &(pt_block_shape){.in = 5}, "");
    harness_setup(&h, 3, 1, 0, 2, 60);
    float *y = harness_floats(h.n_in);
    pt_rng r;
    pt_rng_seed(&r, 61);
    harness_fill(&r, y, h.n_in, 0.0f, 1.0f);
    h.mb.target_values = y;
    double want = 0.0;
    for (size_t i = 0; i < h.n_in; i++)
        want += ((double)h.in[i] - y[i]) * ((double)h.in[i] - y[i]);
    expect_close("the mse loss", harness_loss(&h), want / (double)h.n_in, 1e-6);
    check_block("mse (mean over samples and outputs)", &h, 1, 0.0f);
    pt_free(y);
}

int main(void)
{
    check_conv_forward(3, 7, 6, 4, 3, 1, 1);
    check_conv_forward(3, 8, 7, 5, 3, 2, 1);
    check_conv_forward(2, 6, 6, 3, 1, 2, 0);
    check_pool_forward(1, 2, 2, 0);
    check_pool_forward(1, 3, 2, 1);
    check_pool_forward(0, 2, 2, 0);
    check_pool_forward(0, 3, 2, 1);
    check_rope();

    pt_block_shape img = {
        .channels = 3, .height = 7, .width = 6, .out_channels = 4, .kernel = 3, .padding = 1};
    check_init("conv2d (3x3, padding 1, bias)", pt_conv2d_init, img, 2, 1);
    pt_block_shape strided = img;
    strided.stride = 2, strided.padding = 0, strided.no_bias = 1;
    check_init("conv2d (3x3, stride 2, no bias)", pt_conv2d_init, strided, 2, 2);
    pt_block_shape pointwise = img;
    pointwise.kernel = 1, pointwise.padding = 0;
    check_init("conv2d (1x1)", pt_conv2d_init, pointwise, 2, 3);

    /* a pool's winner flips when a step crosses a tie: small steps */
    fd_step = 1e-3f;
    pt_block_shape pool = {.channels = 2, .height = 6, .width = 5, .kernel = 2};
    check_init("maxpool (2x2)", pt_maxpool_init, pool, 2, 4);
    pt_block_shape pool3 = {
        .channels = 2, .height = 7, .width = 7, .kernel = 3, .stride = 2, .padding = 1};
    check_init("maxpool (3x3, stride 2, padding 1)", pt_maxpool_init, pool3, 2, 5);
    fd_step = 1e-2f;
    check_init("avgpool (2x2)", pt_avgpool_init, pool, 2, 6);
    check_init("avgpool (3x3, stride 2, padding 1)", pt_avgpool_init, pool3, 2, 7);
    check_init("global_avgpool", pt_global_avgpool_init, pool, 2, 8);
    check_init("flatten", pt_flatten_init, pool, 2, 9);

    pt_block_shape norm = {.channels = 4, .height = 3, .width = 5, .groups = 2};
    check_init("groupnorm (2 groups)", pt_groupnorm_init, norm, 2, 10);
    check_init("layernorm over (C,H,W)", pt_layernorm_image_init, norm, 2, 11);

    /* the relus inside flip when a step crosses 0: small steps */
    fd_step = 1e-3f;
    pt_block_shape same = {.channels = 4, .height = 5, .width = 5, .out_channels = 4, .groups = 2};
    check_init("residual (identity skip, groupnorm)", pt_residual_init, same, 2, 12);
    pt_block_shape down = {.channels = 3, .height = 6, .width = 5, .out_channels = 4, .stride = 2};
    check_init("residual (stride 2 projection, layernorm)", pt_residual_init, down, 2, 13);
    pt_block_shape wider = {.channels = 3, .height = 4, .width = 4, .out_channels = 4, .groups = 4};
    check_init("residual (1x1 projection, groupnorm 4)", pt_residual_init, wider, 2, 14);
    fd_step = 1e-2f;

    pt_block_shape llama = {.T = 6, .C = 16, .H = 4, .n_kv_heads = 2, .n_inner = 20};
    check_init("llama (4 heads, 2 kv heads)", pt_llama_init, llama, 2, 15);
    pt_block_shape mha = {.T = 5, .C = 8, .H = 2, .rope_theta = 500.0f, .rms_eps = 1e-5f};
    check_init("llama (full heads, theta 500)", pt_llama_init, mha, 2, 16);
    pt_block_shape longer = {.T = 70, .C = 8, .H = 2, .n_kv_heads = 1, .n_inner = 8};
    check_init("llama (T 70: two row bands, 1 kv head)", pt_llama_init, longer, 1, 17);
    check_init("rmsnorm", pt_rmsnorm_init, mha, 2, 18);

    harness t;
    memset(&t, 0, sizeof t);
    pt_tok_embedding_init(&t.b, &(pt_block_shape){.T = 5, .C = 6, .V = 11}, "embed_tokens");
    harness_setup(&t, 3, 0, 5, 11, 20);
    check_block("tok_embedding (weight only: tokens have no gradient)", &t, 0, 0.0f);

    check_mse();

    harness h;
    memset(&h, 0, sizeof h);
    pt_last_token_classifier_init(&h.b, &(pt_block_shape){.T = 4, .C = 6, .out = 3}, "score");
    harness_setup(&h, 3, 1, 0, 3, 19);
    check_block("last-token classifier (cross-entropy)", &h, 1, 0.0f);

    printf("%s\n", failures ? "FAILED" : "all layer gradients agree");
    return failures ? 1 : 0;
}
