/* bench_passes: where one worker's training step spends its time, pass by
 * pass.
 *
 * One forward + backward of GPT-small's micro-batch (2 sequences of 256
 * tokens; 4 layers, 384 channels, 6 heads, vocab 256), fp32, then one AdamW
 * step. The blocks' kernel table is swapped for a copy whose every entry
 * times the kernel it calls and adds the time to the entry's kind of pass:
 * products, attention (its products; its softmax), layernorm, the MLP's
 * activation, residual adds, bias gradients, cross-entropy, the embedding.
 * What no kernel accounts for (copies, the model's bookkeeping) is "other".
 * AdamW (the clip's sum of squares and the update) is timed around the
 * optimizer. Each figure is a median over repeats, as a share of the step;
 * the F, B and W rows say what each piece of work costs against its share
 * of the FLOPs (a W pass that costs no more than its share of a fused
 * backward has a ratio near the products'). One thread by default, so the
 * figures are one core's.
 * Usage: bench_passes [repeats] [vocab] [threads] [fp32|bf16] (default 9,
 * 256, 1 and fp32; a vocabulary of 50257 is GPT-2's, where the LM head and
 * its cross-entropy weigh most; threads: the worker's, as --threads gives;
 * bf16: activations stored as bf16, the passes converting as they read and
 * write, the products on the bf16 kernel the CPU takes). Each pass is also
 * given in ms, to compare the two precisions' passes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench_common.h"
#include "model/model.h"
#include "runtime/optimizer.h"

enum {
    PASS_PRODUCTS,
    PASS_ATTENTION,
    PASS_SOFTMAX,
    PASS_LAYERNORM,
    PASS_ACTIVATION,
    PASS_RESIDUAL,
    PASS_BIAS,
    PASS_LOSS,
    PASS_EMBEDDING,
    PASS_KINDS
};

static const char *pass_names[PASS_KINDS] = {"products",
                                             "attention products",
                                             "attention softmax (+ stores)",
                                             "layernorm (+ residual)",
                                             "activation (gelu)",
                                             "residual adds",
                                             "bias gradients",
                                             "cross-entropy",
                                             "embedding"};

static double pass_time[PASS_KINDS];
static const pt_kernels *real;

#define TIMED(kind, call)                     \
    do {                                      \
        double t0_ = bench_now();             \
        call;                                 \
        pass_time[kind] += bench_now() - t0_; \
    } while (0)

/* The attention's products are the per-head ones: at most a sequence
 * (256) deep and long, where the projections and the LM head run over a
 * micro-batch's rows (512). */
static void t_matmul(int ta, int tb, int M, int N, int K, float alpha, pt_mat A, pt_mat B,
                     float beta, pt_mat C, const float *bias)
{
    int kind = M <= 256 && K <= 256 ? PASS_ATTENTION : PASS_PRODUCTS;
    TIMED(kind, real->matmul(ta, tb, M, N, K, alpha, A, B, beta, C, bias));
}
static void t_ln_f(void *out, float *mean, float *rstd, const void *inp, const float *w,
                   const float *b, int N, int C, float eps)
{
    TIMED(PASS_LAYERNORM, real->layernorm_forward(out, mean, rstd, inp, w, b, N, C, eps));
}
static void t_res_ln_f(void *sum, void *out, float *mean, float *rstd, const void *a, const void *b,
                       const float *w, const float *bias, int N, int C, float eps)
{
    TIMED(PASS_LAYERNORM,
          real->residual_layernorm_forward(sum, out, mean, rstd, a, b, w, bias, N, C, eps));
}
static void t_ln_bi(void *dinp, const void *dres, const void *dout, const void *inp, const float *w,
                    const float *mean, const float *rstd, int N, int C)
{
    TIMED(PASS_LAYERNORM,
          real->layernorm_backward_input(dinp, dres, dout, inp, w, mean, rstd, N, C));
}
static void t_ln_bw(float *dw, float *db, const void *dout, const void *inp, const float *mean,
                    const float *rstd, int N, int C)
{
    TIMED(PASS_LAYERNORM, real->layernorm_backward_weight(dw, db, dout, inp, mean, rstd, N, C));
}
static void t_gelu_f(void *out, const void *inp, size_t n)
{
    TIMED(PASS_ACTIVATION, real->gelu_forward(out, inp, n));
}
static void t_gelu_b(void *dinp, const void *inp, const void *dout, size_t n)
{
    TIMED(PASS_ACTIVATION, real->gelu_backward(dinp, inp, dout, n));
}
static void t_bias_b(float *dbias, const void *dout, int N, int C)
{
    TIMED(PASS_BIAS, real->bias_backward(dbias, dout, N, C));
}
static void t_add(void *out, const void *a, const void *b, size_t n)
{
    TIMED(PASS_RESIDUAL, real->add(out, a, b, n));
}
static void t_add_floats(void *out, const float *a, const float *b, size_t n)
{
    TIMED(PASS_EMBEDDING, real->add_floats(out, a, b, n));
}
static void t_accumulate(float *g, const void *d, size_t n)
{
    TIMED(PASS_EMBEDDING, real->accumulate(g, d, n));
}
static void t_softmax_f(void *att, float *scores, float *stats, int r0, int n, int ld, float scale)
{
    TIMED(PASS_SOFTMAX, real->softmax_causal_forward(att, scores, stats, r0, n, ld, scale));
}
static void t_softmax_r(void *att, const float *scores, const float *stats, int r0, int n, int ld,
                        float scale)
{
    TIMED(PASS_SOFTMAX, real->softmax_causal_recompute(att, scores, stats, r0, n, ld, scale));
}
static void t_softmax_b(void *datt, const void *att, const float *dprob, int r0, int n, int ld,
                        float scale)
{
    TIMED(PASS_SOFTMAX, real->softmax_causal_backward(datt, att, dprob, r0, n, ld, scale));
}
static void t_store(void *out, const float *in, size_t n)
{
    TIMED(PASS_SOFTMAX, real->store_floats(out, in, n));
}
static double t_ce_f(float *probs, const int *targets, int N, int V)
{
    double loss;
    TIMED(PASS_LOSS, loss = real->crossentropy_forward(probs, targets, N, V));
    return loss;
}
static void t_ce_b(float *probs, const int *targets, int N, int V, float scale)
{
    TIMED(PASS_LOSS, real->crossentropy_backward(probs, targets, N, V, scale));
}

static pt_kernels timed_kernels(const pt_kernels *k)
{
    pt_kernels t = *k;
    t.matmul = t_matmul;
    t.layernorm_forward = t_ln_f;
    t.residual_layernorm_forward = t_res_ln_f;
    t.layernorm_backward_input = t_ln_bi;
    t.layernorm_backward_weight = t_ln_bw;
    t.gelu_forward = t_gelu_f;
    t.gelu_backward = t_gelu_b;
    t.bias_backward = t_bias_b;
    t.add = t_add;
    t.add_floats = t_add_floats;
    t.accumulate = t_accumulate;
    t.softmax_causal_forward = t_softmax_f;
    t.softmax_causal_recompute = t_softmax_r;
    t.softmax_causal_backward = t_softmax_b;
    t.store_floats = t_store;
    t.crossentropy_forward = t_ce_f;
    t.crossentropy_backward = t_ce_b;
    return t;
}

#define MAX_REPS 32

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    reps = reps < 1 || reps > MAX_REPS ? 9 : reps;
    pt_model_config c = bench_gpt_small();
    if (argc > 4 && pt_precision_parse(argv[4], &c.precision) != PT_OK) {
        fprintf(stderr, "bench_passes: %s\n", pt_last_error());
        return 1;
    }
    int vocab = argc > 2 ? atoi(argv[2]) : 256;
    c.vocab = vocab < 2 || vocab > (1 << 20) ? 256 : vocab;
    int B = 2, last;
    pt_model *m;
    pt_optimizer *opt;
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    if (pt_model_create(&c, &m) != PT_OK || pt_optimizer_create(m, &oc, &opt) != PT_OK) {
        fprintf(stderr, "bench_passes: %s\n", pt_last_error());
        return 1;
    }
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    threads = threads < 1 || threads > 64 ? 1 : threads;
    pt_blas_set_threads(threads);
    last = m->n_blocks - 1;
    real = m->k;
    pt_kernels timed = timed_kernels(real);
    for (int i = 0; i < m->n_blocks; i++)
        m->blocks[i].k = &timed;
    int *tok;
    pt_microbatch mb = bench_random_batch(&c, B, &tok);
    pt_activations *a;
    pt_activations_create(m, 0, last, B, &a);

    double ms_of[PASS_KINDS][MAX_REPS], share[PASS_KINDS][MAX_REPS], f[MAX_REPS], bi[MAX_REPS],
        bw[MAX_REPS], adam[MAX_REPS], other[MAX_REPS], step[MAX_REPS];
    float loss;
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        memset(pass_time, 0, sizeof pass_time);
        double t0 = bench_now();
        pt_model_forward(m, 0, last, &mb, NULL, a, &loss);
        double t1 = bench_now();
        pt_model_backward_input(m, 0, last, &mb, NULL, a, NULL, NULL, 1.0f);
        double t2 = bench_now();
        pt_model_backward_weight(m, 0, last, &mb, NULL, a);
        double t3 = bench_now();
        double norm = sqrt(pt_optimizer_grad_sq(m, 0, last));
        pt_optimizer_step(opt, m, 0, last, r + 1, oc.lr, pt_optimizer_clip_factor(&oc, norm));
        double t4 = bench_now();
        if (r < 0)
            continue;
        double counted = 0;
        step[r] = t4 - t0;
        for (int k = 0; k < PASS_KINDS; k++)
            share[k][r] = pass_time[k] / step[r], ms_of[k][r] = pass_time[k] * 1e3,
            counted += pass_time[k];
        f[r] = t1 - t0, bi[r] = t2 - t1, bw[r] = t3 - t2, adam[r] = (t4 - t3) / step[r];
        other[r] = (t3 - t0 - counted) / step[r];
    }

    double fl = 0, bil = 0, bwl = 0;
    for (int i = 0; i <= last; i++) {
        pt_block_cost bc = pt_model_block_cost(m, i);
        fl += B * bc.forward_flops, bil += B * bc.backward_input_flops;
        bwl += B * bc.backward_weight_flops;
    }
    double ms = bench_median(step, reps) * 1e3;
    printf("gpt-small micro-batch (2 x 256 tokens, vocab %d), %s, %s, %d thread%s: step %.1f "
           "ms (%.1f GFLOP/s)\n",
           c.vocab, pt_precision_name(c.precision), real->name, threads, threads > 1 ? "s" : "", ms,
           (fl + bil + bwl) / ms / 1e6);
    printf("%-32s %8s %8s\n", "pass", "share", "ms");
    for (int k = 0; k < PASS_KINDS; k++)
        printf("%-32s %7.1f%% %8.2f\n", pass_names[k], 100 * bench_median(share[k], reps),
               bench_median(ms_of[k], reps));
    printf("%-32s %7.1f%% %8.2f\n", "AdamW (norm + update)", 100 * bench_median(adam, reps),
           bench_median(adam, reps) * ms);
    printf("%-32s %7.1f%% %8.2f\n", "other (copies, bookkeeping)", 100 * bench_median(other, reps),
           bench_median(other, reps) * ms);
    double tf = bench_median(f, reps), tbi = bench_median(bi, reps), tbw = bench_median(bw, reps);
    double tall = tf + tbi + tbw, fall = fl + bil + bwl;
    printf("%-32s %8s %8s %8s\n", "piece of work", "ms", "time", "FLOPs");
    printf("%-32s %8.2f %7.1f%% %7.1f%%\n", "F (forward)", tf * 1e3, 100 * tf / tall,
           100 * fl / fall);
    printf("%-32s %8.2f %7.1f%% %7.1f%%\n", "B (backward, input)", tbi * 1e3, 100 * tbi / tall,
           100 * bil / fall);
    printf("%-32s %8.2f %7.1f%% %7.1f%%\n", "W (backward, weights)", tbw * 1e3, 100 * tbw / tall,
           100 * bwl / fall);
    pt_activations_destroy(a);
    pt_optimizer_destroy(opt);
    pt_model_destroy(m);
    free(tok);
    return 0;
}
