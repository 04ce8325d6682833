/* bench_conv: the conv-net and Llama blocks' speed, as ratios measured in
 * the same run, on one core (one BLAS thread):
 *   conv2d     forward + backward_input + backward_weight of a 3x3
 *              convolution (stride 1, padding 1, no bias) at ResNet's
 *              stage shapes (64 channels 56x56, 128 at 28x28, 256 at
 *              14x14; a micro-batch of 2), its product FLOPs over the time,
 *              against the sgemm rate of a 1024^3 product measured just
 *              after it (target: 60%);
 *   llama      the Llama block's utilisation (its cost's FLOPs over its
 *              time, over the sgemm rate) against the GPT-2 block's at the
 *              same width, heads and sequence (C 768, 12 heads, T 256; the
 *              Llama block with 4 key/value heads and an MLP of 2048, which
 *              together cost GPT-2's 12 C^2 per token within a few percent)
 *              (target: within 10%).
 * Each figure is the median of REPS runs; the machine may be shared. */
#include <stdio.h>
#include <string.h>

#include "bench_common.h"
#include "nn/block.h"

enum { REPS = 9 };

/* a block with random parameters and every buffer a step needs */
typedef struct {
    pt_block b;
    int B;
    float *in, *out, *dout, *din, *saved, *grads, *work;
} bench_block;

/* an area of a block's bytes (0: none) */
static float *area(size_t bytes) { return pt_alloc_floats(pt_arena_floats_for(bytes ? bytes : 1)); }

static void setup(bench_block *x, int B)
{
    pt_rng r;
    pt_rng_seed(&r, 7);
    x->B = B;
    x->b.k = pt_kernels_cpu();
    for (int i = 0; i < x->b.n_params; i++) {
        size_t n = pt_param_decl_numel(&x->b.decl[i]);
        x->b.p[i] = pt_alloc_floats(n);
        x->b.g[i] = pt_alloc_floats(n);
        pt_rng_fill_normal(&r, x->b.p[i], n, 0.05f);
        memset(x->b.g[i], 0, n * sizeof(float));
    }
    size_t n_in = (size_t)B * x->b.in_floats, n_out = (size_t)B * x->b.out_floats;
    x->in = pt_alloc_floats(n_in), x->din = pt_alloc_floats(n_in);
    x->out = pt_alloc_floats(n_out), x->dout = pt_alloc_floats(n_out);
    x->saved = area(x->b.ops->saved_bytes(&x->b, B));
    /* the grads area and the stage's workspace, as model.c gives them */
    x->b.grads = x->grads = area(x->b.ops->grads_bytes ? x->b.ops->grads_bytes(&x->b, B) : 0);
    x->b.work = x->work = area(x->b.ops->work_bytes ? x->b.ops->work_bytes(&x->b, B) : 0);
    pt_rng_fill_normal(&r, x->in, n_in, 1.0f);
    pt_rng_fill_normal(&r, x->dout, n_out, 1.0f);
}

static void release(bench_block *x)
{
    for (int i = 0; i < x->b.n_params; i++)
        pt_free(x->b.p[i]), pt_free(x->b.g[i]);
    pt_free(x->in), pt_free(x->din), pt_free(x->out), pt_free(x->dout), pt_free(x->saved);
    pt_free(x->grads), pt_free(x->work);
}

/* seconds of one forward + backward_input + backward_weight */
static double step_once(bench_block *x)
{
    pt_microbatch mb = {.batch = x->B};
    double t0 = bench_now();
    x->b.ops->forward(&x->b, &mb, x->in, x->out, x->saved, NULL, NULL);
    x->b.ops->backward_input(&x->b, &mb, x->in, x->out, x->saved, x->dout, x->din, 1.0f);
    x->b.ops->backward_weight(&x->b, &mb, x->in, x->out, x->saved, x->dout);
    return bench_now() - t0;
}

/* the median step of each of n blocks, their runs taken in turn so that
 * a change in the machine's load falls on all of them (the first run of
 * each warms caches and pages) */
static void step_seconds(bench_block **x, int n, double *secs)
{
    double t[4][REPS];
    for (int i = -1; i < REPS; i++)
        for (int j = 0; j < n; j++) {
            double s = step_once(x[j]);
            if (i >= 0)
                t[j][i] = s;
        }
    for (int j = 0; j < n; j++)
        secs[j] = bench_median(t[j], REPS);
}

static double step_flops(const bench_block *x)
{
    pt_block_cost c = x->b.ops->cost(&x->b);
    return x->B * (c.forward_flops + c.backward_input_flops + c.backward_weight_flops);
}

int main(void)
{
    pt_blas_set_threads(1);
    double sgemm = bench_sgemm_gflops(1024, 1024, 1024, 5);
    printf("one core; sgemm 1024^3: %.1f GFLOP/s\n\n", sgemm);

    printf("%-28s %9s %10s %9s %9s\n", "conv2d 3x3 (fwd+bwd, B 2)", "ms", "GFLOP/s", "sgemm",
           "/sgemm");
    const int shapes[][2] = {{64, 56}, {128, 28}, {256, 14}};
    double worst = 1e9;
    for (int i = 0; i < 3; i++) {
        int C = shapes[i][0], HW = shapes[i][1];
        bench_block x;
        memset(&x, 0, sizeof x);
        pt_block_shape s = {.channels = C,
                            .height = HW,
                            .width = HW,
                            .out_channels = C,
                            .kernel = 3,
                            .padding = 1,
                            .no_bias = 1};
        pt_conv2d_init(&x.b, &s, "conv");
        setup(&x, 2);
        bench_block *one = &x;
        double secs;
        step_seconds(&one, 1, &secs);
        double rate = step_flops(&x) / secs / 1e9;
        /* sgemm again, just after: on a shared machine the load moves */
        sgemm = bench_sgemm_gflops(1024, 1024, 1024, 5);
        char label[64];
        snprintf(label, sizeof label, "%d channels %dx%d", C, HW, HW);
        printf("%-28s %9.1f %10.1f %9.1f %8.0f%%\n", label, 1e3 * secs, rate, sgemm,
               100 * rate / sgemm);
        worst = rate / sgemm < worst ? rate / sgemm : worst;
        release(&x);
    }
    printf("conv2d's lowest ratio: %.0f%% of sgemm (target 60%%)\n\n", 100 * worst);

    pt_block_shape gpt = {.T = 256, .C = 768, .H = 12, .n_layer = 12};
    pt_block_shape llama = {.T = 256, .C = 768, .H = 12, .n_kv_heads = 4, .n_inner = 2048};
    bench_block g, l;
    memset(&g, 0, sizeof g), memset(&l, 0, sizeof l);
    pt_transformer_init(&g.b, &gpt, 0);
    pt_llama_init(&l.b, &llama, "model.layers.0");
    setup(&g, 1), setup(&l, 1);
    bench_block *both[2] = {&g, &l};
    double secs[2];
    step_seconds(both, 2, secs);
    double ug = step_flops(&g) / secs[0] / 1e9 / sgemm, ul = step_flops(&l) / secs[1] / 1e9 / sgemm;
    printf("%-28s %14s %9s\n", "block (C 768, T 256, B 1)", "GFLOP a step", "/sgemm");
    printf("%-28s %14.2f %8.0f%%\n", "gpt-2 transformer", step_flops(&g) / 1e9, 100 * ug);
    printf("%-28s %14.2f %8.0f%%\n", "llama (4 kv heads)", step_flops(&l) / 1e9, 100 * ul);
    printf("llama's utilisation over gpt-2's: %.2f (target within 0.90..1.10)\n", ul / ug);
    release(&g), release(&l);
    return 0;
}
