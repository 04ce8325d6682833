/* test_pipeline_matches_sequential: a synchronous pipeline computes what one
 * worker computes.
 *
 * For gpipe, 1f1b, interleaved (v = 2), loopedbfs (v = 2), zbh1, zbh2, zbv
 * and zb2p (the automatic zero-bubble order on unit times); P
 * in {1, 2, 3, 4}; M
 * in {1, 4, 8} (where the schedule takes them); an even and an uneven
 * balance; with and without activation checkpointing: the parameters and
 * every micro-batch's loss after 3 AdamW steps equal, bit for bit, those of
 * one worker that runs the same micro-batches in sequence, accumulating
 * their gradients with loss scale 1/M, and the tied copies (wte, lm_head)
 * stay identical. Also: the
 * profiled partition (no balance), a schedule loaded from a text file, an mlp,
 * the per-micro-batch losses, eval and forward_probs against the single
 * worker, the fused-backward schedules with their weight passes deferred
 * (defer_w), data-parallel replicas on threads (synchronous replicas equal the
 * single worker too), and refusals (a balance with the wrong sum, a train
 * step on a pipeline made without an optimizer). Under bf16, on the
 * portable products and on AMX and AVX512_BF16 where the machine has them
 * (a kernel it lacks is skipped with a line saying so): the same grid and
 * the mlp, bit for bit (bf16 rounds at the same places on every layout).
 * Every worker builds its own stage: the parameters are read back from the
 * workers that hold them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "runtime/optimizer.h"
#include "tensor/rng.h"

#include "check.h"
#include "pipeline_params.h"

#define STEPS 3
#define MBS   2
#define LR    1e-2f

static pt_model_config gpt_config(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 6, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 32, c.seed = 11;
    return c; /* 8 blocks: embedding, 6 transformer blocks, head */
}

static pt_model_config mlp_config(void)
{
    int widths[] = {6, 12, 12, 12, 5};
    pt_model_config c = pt_model_config_mlp(5, widths);
    c.seed = 5;
    return c;
}

/* Replicas sum their gradients in another order than one worker's
 * accumulation; AdamW turns the rounding noise of gradients that are zero in
 * exact arithmetic (attention's key bias) into whole steps, so those runs
 * compare under SGD, to 1e-4 (tests/test_mpi_pipeline.c shows replicas on
 * threads and under MPI bit-identical). Everything else: bit for bit. */
static int use_sgd;
static double tolerance = 0;

static pt_optim_config optim(void)
{
    pt_optim_config o = pt_optim_config_default(use_sgd ? PT_OPTIM_SGD : PT_OPTIM_ADAMW);
    o.grad_clip = 0.5f; /* small enough to clip: the global norm must be right */
    return o;
}

/* The batch of step s with M micro-batches: tokens and shifted targets. */
typedef struct {
    int *tokens, *targets;
    float *inputs;
    pt_microbatch mb;
} batch_t;

static void make_batch(const pt_model_config *c, int M, int s, batch_t *b)
{
    pt_rng r;
    pt_rng_seed(&r, 1000 + (uint64_t)s);
    int n = M * MBS;
    if (c->kind == PT_MODEL_GPT) {
        int rows = n * c->seq_len;
        b->tokens = malloc(sizeof(int) * (size_t)(rows + 1));
        for (int i = 0; i <= rows; i++)
            b->tokens[i] = (int)pt_rng_below(&r, (uint64_t)c->vocab);
        b->targets = b->tokens + 1;
        b->inputs = NULL;
        b->mb = (pt_microbatch){.batch = n, .tokens = b->tokens, .targets = b->targets};
    } else {
        b->inputs = malloc(sizeof(float) * (size_t)(n * c->widths[0]));
        pt_rng_fill_normal(&r, b->inputs, (size_t)(n * c->widths[0]), 1.0f);
        b->tokens = malloc(sizeof(int) * (size_t)n);
        for (int i = 0; i < n; i++)
            b->tokens[i] = (int)pt_rng_below(&r, (uint64_t)c->widths[c->n_widths - 1]);
        b->targets = b->tokens;
        b->mb = (pt_microbatch){.batch = n, .inputs = b->inputs, .targets = b->targets};
    }
}

static void free_batch(batch_t *b)
{
    free(b->tokens);
    free(b->inputs);
}

static pt_microbatch micro(const pt_model_config *c, const pt_microbatch *b, int k)
{
    pt_microbatch m = {.batch = MBS};
    if (c->kind == PT_MODEL_GPT) {
        m.tokens = b->tokens + k * MBS * c->seq_len;
        m.targets = b->targets + k * MBS * c->seq_len;
    } else {
        m.inputs = b->inputs + k * MBS * c->widths[0];
        m.targets = b->targets + k * MBS;
    }
    return m;
}

/* One worker: the reference. losses[s*M + k]. */
static int sequential(const pt_model_config *c, int M, pt_model **out, float *losses)
{
    pt_model *m;
    pt_optimizer *o;
    pt_optim_config oc = optim();
    if (pt_model_create(c, &m) || pt_optimizer_create(m, &oc, &o))
        return printf("create: %s\n", pt_last_error()), 1;
    int n = pt_model_n_blocks(m);
    pt_activations *a;
    pt_activations_create(m, 0, n - 1, MBS, &a);
    for (int s = 0; s < STEPS; s++) {
        batch_t b;
        make_batch(c, M, s, &b);
        pt_model_zero_grads(m);
        for (int k = 0; k < M; k++) {
            pt_microbatch mb = micro(c, &b.mb, k);
            if (pt_model_step_microbatch(m, &mb, 1.0f / (float)M, a, &losses[s * M + k]))
                return printf("step: %s\n", pt_last_error()), 1;
        }
        pt_model_sum_tied_grads(m);
        double norm = sqrt(pt_optimizer_grad_sq(m, 0, n - 1));
        pt_optimizer_step(o, m, 0, n - 1, s, LR, pt_optimizer_clip_factor(&oc, norm));
        free_batch(&b);
    }
    pt_activations_destroy(a);
    pt_optimizer_destroy(o);
    *out = m;
    return 0;
}

/* Largest |a-b| / max(|a|, |b|, 1e-3) over every parameter. */
static double max_rel_diff(const pt_model *a, const pt_model *b, const char **where)
{
    double worst = 0;
    for (int i = 0; i < pt_model_n_params(a); i++) {
        const pt_param *p = pt_model_param(a, i), *q = pt_model_param(b, i);
        for (size_t j = 0; j < p->numel; j++) {
            double x = p->data[j], y = q->data[j];
            double den = fmax(fmax(fabs(x), fabs(y)), 1e-3);
            double d = fabs(x - y) / den;
            if (d > worst || isnan(d))
                worst = isnan(d) ? INFINITY : d, *where = p->name;
        }
    }
    return worst;
}

static int tied_equal(const pt_model *m)
{
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *p = pt_model_param(m, i);
        if (!p->tied_to)
            continue;
        const pt_param *src = pt_model_find_param(m, p->tied_to);
        if (memcmp(p->data, src->data, p->numel * sizeof(float)))
            return 0;
    }
    return 1;
}

typedef struct {
    const char *schedule, *file;
    int P, M, ckpt, D, defer_w;
    int balance[16], n_balance; /* 0: profiled */
} run_t;

/* Runs the pipeline; 0 ok, 1 failure, 2 the schedule refuses (P, M). */
static int pipelined(const pt_model_config *c, const run_t *r, const pt_model *ref,
                     const float *ref_losses)
{
    pt_model *m;
    pt_optimizer *o;
    pt_optim_config oc = optim();
    if (pt_model_create(c, &m) || pt_optimizer_create(m, &oc, &o))
        return printf("create: %s\n", pt_last_error()), 1;
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = r->P;
    pc.microbatches = r->M;
    pc.micro_batch_size = MBS;
    pc.schedule = r->schedule;
    pc.schedule_file = r->file;
    pc.balance = r->n_balance ? r->balance : NULL;
    pc.n_balance = r->n_balance;
    pc.checkpoint_activations = r->ckpt;
    pc.defer_w = r->defer_w;
    pc.blas_threads = 1;
    pt_pipeline *p;
    pc.replicas = r->D ? r->D : 1;
    int rc = pt_pipeline_create(c, &oc, &pc, &p);
    if (rc != PT_OK) {
        pt_optimizer_destroy(o);
        pt_model_destroy(m);
        if (rc == PT_EINVAL && strstr(pt_last_error(), r->schedule ? r->schedule : "?") &&
            !strstr(pt_last_error(), "balance"))
            return 2;
        return printf("pipeline %s P=%d M=%d: %s\n", r->schedule, r->P, r->M, pt_last_error()), 1;
    }
    int fail = 0;
    for (int s = 0; s < STEPS && !fail; s++) {
        batch_t b;
        make_batch(c, r->M, s, &b);
        float mean;
        if (pt_pipeline_train_step(p, &b.mb, s, LR, &mean) != PT_OK) {
            printf("train_step: %s\n", pt_last_error());
            fail = 1;
        }
        const float *l = pt_pipeline_losses(p);
        for (int k = 0; k < r->M && !fail; k++)
            if (tolerance == 0 ? l[k] != ref_losses[s * r->M + k]
                               : fabsf(l[k] - ref_losses[s * r->M + k]) >
                                     1e-5f * fabsf(ref_losses[s * r->M + k])) {
                printf("step %d micro-batch %d: loss %.7f, single worker %.7f\n", s, k, l[k],
                       ref_losses[s * r->M + k]);
                fail = 1;
            }
        free_batch(&b);
    }
    const char *where = "";
    if (!fail && pipeline_copy_out(p, m, NULL, NULL) != pt_model_n_params(m)) {
        printf("the workers do not hold every parameter: %s\n", pt_last_error());
        fail = 1;
    }
    double d = fail ? 0 : max_rel_diff(m, ref, &where);
    if (!fail && d > tolerance) {
        printf("%s%s P=%d M=%d ckpt=%d: parameters differ by %.3g (relative) at %s\n",
               r->schedule ? r->schedule : "file ", r->file ? r->file : "", r->P, r->M, r->ckpt, d,
               where);
        fail = 1;
    }
    if (!fail && !tied_equal(m)) {
        printf("%s P=%d M=%d: the tied copies drifted apart\n", r->schedule, r->P, r->M);
        fail = 1;
    }
    pt_pipeline_destroy(p);
    pt_optimizer_destroy(o);
    pt_model_destroy(m);
    return fail;
}

static void even_balance(int n_blocks, int K, int *bal)
{
    for (int c = 0; c < K; c++)
        bal[c] = n_blocks / K + (c >= K - n_blocks % K);
}

static void uneven_balance(int n_blocks, int K, int *bal)
{
    for (int c = 0; c < K; c++)
        bal[c] = 1;
    bal[K / 2] += n_blocks - K; /* everything else on one middle chunk */
}

/* Every synchronous schedule, P, M, balance and checkpointing for the
 * model gc against one worker; returns the references for M = 1, 4, 8. */
static int grid(const pt_model_config *gc, pt_model **ref, float **ref_losses)
{
    const int Ms[] = {1, 4, 8};
    for (int i = 0; i < 3; i++) {
        ref_losses[i] = malloc(sizeof(float) * STEPS * 8);
        REQUIRE(sequential(gc, Ms[i], &ref[i], ref_losses[i]) == 0, "reference M=%d", Ms[i]);
    }
    int n_blocks = pt_model_n_blocks(ref[0]);
    const char *scheds[] = {"gpipe", "1f1b", "interleaved", "loopedbfs",
                            "zbh1",  "zbh2", "zbv",         "zb2p"};
    int ran = 0, refused = 0;
    for (int si = 0; si < 8; si++)
        for (int P = 1; P <= 4; P++)
            for (int mi = 0; mi < 3; mi++)
                for (int bal = 0; bal < 2; bal++)
                    for (int ckpt = 0; ckpt < 2; ckpt++) {
                        int v = !strcmp(scheds[si], "interleaved") ||
                                        !strcmp(scheds[si], "loopedbfs") ||
                                        !strcmp(scheds[si], "zbv")
                                    ? 2
                                    : 1;
                        run_t r = {.schedule = scheds[si],
                                   .P = P,
                                   .M = Ms[mi],
                                   .ckpt = ckpt,
                                   .n_balance = P * v};
                        if (r.n_balance > n_blocks)
                            continue;
                        (bal ? uneven_balance : even_balance)(n_blocks, r.n_balance, r.balance);
                        int rc = pipelined(gc, &r, ref[mi], ref_losses[mi]);
                        REQUIRE(rc != 1, "%s %s P=%d M=%d balance %s checkpoint %d",
                                pt_precision_name(gc->precision), r.schedule, P, r.M,
                                bal ? "uneven" : "even", ckpt);
                        ran += rc == 0;
                        refused += rc == 2;
                    }
    printf("%s grid (products: %s): %d pipelines matched the single worker, %d (P, M) refused "
           "by their schedule\n",
           pt_precision_name(gc->precision),
           gc->precision == PT_PRECISION_BF16 ? pt_bf16_kernel() : "sgemm", ran, refused);
    REQUIRE(ran >= 180, "only %d pipelines ran", ran);
    return 0;
}

/* bf16, on each product kernel this machine has: every pipeline of the grid
 * and the mlp's equal one worker bit for bit, and the bf16 run is not the
 * fp32 one (its losses differ, by less than bf16's rounding allows). */
static int bf16_runs(const float *fp32_losses)
{
    const char *kernels[] = {"portable", "amx", "avx512bf16"};
    for (int i = 0; i < 3; i++) {
        if (pt_bf16_set_kernel(kernels[i]) != PT_OK) {
            printf("skipped: bf16 on %s: %s\n", kernels[i], pt_last_error());
            continue;
        }
        pt_model_config gc = gpt_config();
        gc.precision = PT_PRECISION_BF16;
        pt_model *ref[3];
        float *losses[3];
        if (grid(&gc, ref, losses))
            return 1;
        int differ = 0;
        for (int j = 0; j < STEPS * 4; j++) {
            differ |= losses[1][j] != fp32_losses[j];
            REQUIRE(fabsf(losses[1][j] - fp32_losses[j]) < 2e-2f * fabsf(fp32_losses[j]),
                    "bf16 loss %.6f is far from fp32's %.6f", losses[1][j], fp32_losses[j]);
        }
        REQUIRE(differ, "bf16 on %s computed fp32's losses exactly: it did not round", kernels[i]);
        for (int j = 0; j < 3; j++) {
            pt_model_destroy(ref[j]);
            free(losses[j]);
        }
        pt_model_config mc = mlp_config();
        mc.precision = PT_PRECISION_BF16;
        pt_model *mref;
        float mlosses[STEPS * 4];
        REQUIRE(sequential(&mc, 4, &mref, mlosses) == 0, "bf16 mlp reference");
        for (int P = 1; P <= 3; P++) {
            run_t r = {.schedule = "1f1b", .P = P, .M = 4};
            REQUIRE(pipelined(&mc, &r, mref, mlosses) == 0, "bf16 mlp 1f1b P=%d", P);
            run_t z = {.schedule = "zbh1", .P = P, .M = 4, .ckpt = 1};
            REQUIRE(pipelined(&mc, &z, mref, mlosses) == 0, "bf16 mlp zbh1 P=%d", P);
        }
        pt_model_destroy(mref);
    }
    pt_bf16_set_kernel("auto");
    return 0;
}

int main(void)
{
    pt_model_config gc = gpt_config();
    pt_model *ref[3];
    float *ref_losses[3];
    if (grid(&gc, ref, ref_losses) || bf16_runs(ref_losses[1]))
        return 1;
    int n_blocks = pt_model_n_blocks(ref[0]);

    /* weight passes deferred past the next local forward: the same sums */
    const char *fused[] = {"gpipe", "1f1b", "interleaved", "loopedbfs"};
    int deferred = 0;
    for (int si = 0; si < 4; si++)
        for (int P = 1; P <= 4; P *= 2) /* interleaved takes M = 4 on 1, 2, 4 */
            for (int ckpt = 0; ckpt < 2; ckpt++) {
                int v = si >= 2 ? 2 : 1;
                run_t r = {.schedule = fused[si],
                           .P = P,
                           .M = 4,
                           .ckpt = ckpt,
                           .defer_w = 1,
                           .n_balance = P * v};
                if (r.n_balance > n_blocks)
                    continue;
                even_balance(n_blocks, r.n_balance, r.balance);
                REQUIRE(pipelined(&gc, &r, ref[1], ref_losses[1]) == 0,
                        "%s P=%d M=4 checkpoint %d, weight passes deferred", fused[si], P, ckpt);
                deferred++;
            }
    REQUIRE(deferred >= 20, "only %d pipelines with deferred weight passes ran", deferred);

    /* data-parallel replicas on threads: 2 stages x 2 replicas, 1f1b and
     * gpipe lists replicated, each replica on half the micro-batches */
    use_sgd = 1, tolerance = 1e-4;
    pt_model *sgd_ref[2];
    float sgd_losses[2][STEPS * 8];
    REQUIRE(sequential(&gc, 4, &sgd_ref[0], sgd_losses[0]) == 0 &&
                sequential(&gc, 8, &sgd_ref[1], sgd_losses[1]) == 0,
            "SGD references");
    for (int D = 2; D <= 4; D += 2) {
        run_t r = {.schedule = "1f1b", .P = 2, .M = 8, .D = D, .n_balance = 2, .balance = {4, 4}};
        REQUIRE(pipelined(&gc, &r, sgd_ref[1], sgd_losses[1]) == 0, "1f1b P=2 D=%d on threads", D);
        run_t g = {.schedule = "gpipe", .P = 2, .M = 4, .D = D, .n_balance = 2, .balance = {3, 5}};
        REQUIRE(pipelined(&gc, &g, sgd_ref[0], sgd_losses[0]) == 0, "gpipe P=2 D=%d on threads", D);
    }
    run_t rr = {.schedule = "1f1b-rr", .P = 2, .M = 8, .D = 2, .n_balance = 2, .balance = {4, 4}};
    REQUIRE(pipelined(&gc, &rr, sgd_ref[1], sgd_losses[1]) == 0, "1f1b-rr P=2 D=2 on threads");
    pt_model_destroy(sgd_ref[0]);
    pt_model_destroy(sgd_ref[1]);
    use_sgd = 0, tolerance = 0;

    /* the profiled partition */
    run_t prof = {.schedule = "1f1b", .P = 3, .M = 4};
    REQUIRE(pipelined(&gc, &prof, ref[1], ref_losses[1]) == 0, "1f1b with a profiled partition");

    /* a schedule from a text file */
    const char *dir = getenv("PT_TEST_DATA");
    char path[1024];
    snprintf(path, sizeof path, "%s/pipeline/v_shape_2x3.txt", dir ? dir : "tests/data");
    for (int ckpt = 0; ckpt < 2; ckpt++) {
        run_t file = {
            .file = path, .P = 2, .M = 4, .ckpt = ckpt, .n_balance = 3, .balance = {2, 3, 3}};
        REQUIRE(pipelined(&gc, &file, ref[1], ref_losses[1]) == 0, "schedule file %s", path);
    }

    /* an mlp */
    pt_model_config mc = mlp_config();
    pt_model *mref;
    float mlosses[STEPS * 4];
    REQUIRE(sequential(&mc, 4, &mref, mlosses) == 0, "mlp reference");
    for (int P = 1; P <= 3; P++) {
        run_t r = {.schedule = "1f1b", .P = P, .M = 4};
        REQUIRE(pipelined(&mc, &r, mref, mlosses) == 0, "mlp 1f1b P=%d", P);
        run_t z = {.schedule = "zbh1", .P = P, .M = 4, .ckpt = 1};
        REQUIRE(pipelined(&mc, &z, mref, mlosses) == 0, "mlp zbh1 P=%d", P);
    }
    pt_model_destroy(mref);

    /* eval and forward_probs agree with one worker */
    {
        pt_model *m;
        pt_optimizer *o;
        pt_optim_config oc = optim();
        REQUIRE(pt_model_create(&gc, &m) == PT_OK && pt_optimizer_create(m, &oc, &o) == PT_OK,
                "create");
        pt_pipeline_config pc = pt_pipeline_config_default();
        pc.stages = 2, pc.microbatches = 4, pc.micro_batch_size = MBS, pc.schedule = "zbv";
        int bal[4] = {2, 2, 2, 2};
        pc.balance = bal, pc.n_balance = 4;
        pt_pipeline *p;
        REQUIRE(pt_pipeline_create(&gc, &oc, &pc, &p) == PT_OK, "zbv: %s", pt_last_error());
        batch_t b;
        make_batch(&gc, 4, 0, &b);
        float mean;
        REQUIRE(pt_pipeline_eval(p, &b.mb, &mean) == PT_OK, "eval: %s", pt_last_error());
        pt_activations *a;
        pt_activations_create(m, 0, n_blocks - 1, 1, &a);
        double sum = 0;
        for (int k = 0; k < 4; k++) {
            pt_microbatch mb = micro(&gc, &b.mb, k);
            float l;
            pt_activations *a2;
            pt_activations_create(m, 0, n_blocks - 1, MBS, &a2);
            pt_model_forward(m, 0, n_blocks - 1, &mb, NULL, a2, &l);
            pt_activations_destroy(a2);
            REQUIRE(fabsf(l - pt_pipeline_losses(p)[k]) < 1e-6f, "eval loss of micro-batch %d", k);
            sum += l;
        }
        REQUIRE(fabs(mean - sum / 4) < 1e-6, "eval mean %.6f vs %.6f", mean, sum / 4);
        pt_microbatch one = {.batch = 1, .tokens = b.tokens};
        size_t nprob = (size_t)gc.seq_len * (size_t)gc.vocab;
        float *probs = malloc(sizeof(float) * nprob);
        REQUIRE(pt_pipeline_forward_probs(p, &one, probs) == PT_OK, "probs: %s", pt_last_error());
        pt_model_forward(m, 0, n_blocks - 1, &one, NULL, a, NULL);
        const float *want = pt_activations_output(a);
        for (size_t i = 0; i < nprob; i++)
            REQUIRE(fabsf(probs[i] - want[i]) < 1e-6f, "probability %zu: %g vs %g", i, probs[i],
                    want[i]);
        char report[512];
        REQUIRE(pt_pipeline_bubble_report(p, report, sizeof report) == PT_OK, "report: %s",
                pt_last_error());
        pt_activations_destroy(a);
        free(probs);
        free_batch(&b);
        pt_pipeline_destroy(p);

        /* refusals */
        int wrong[2] = {3, 3};
        pc.schedule = "1f1b", pc.balance = wrong, pc.n_balance = 2;
        REQUIRE(pt_pipeline_create(&gc, &oc, &pc, &p) == PT_EINVAL &&
                    strstr(pt_last_error(), "8 blocks"),
                "a balance summing to 6 was accepted or badly reported: %s", pt_last_error());
        pc.schedule = "1f1b", pc.balance = NULL, pc.replicas = 3;
        REQUIRE(pt_pipeline_create(&gc, &oc, &pc, &p) == PT_EINVAL &&
                    strstr(pt_last_error(), "multiple"),
                "3 replicas accepted for 4 micro-batches: %s", pt_last_error());
        pc.replicas = 1;
        /* without an optimizer: forward passes only */
        REQUIRE(pt_pipeline_create(&gc, NULL, &pc, &p) == PT_OK, "inference pipeline: %s",
                pt_last_error());
        batch_t fwd;
        make_batch(&gc, 4, 2, &fwd);
        float fwd_loss;
        REQUIRE(pt_pipeline_eval(p, &fwd.mb, &fwd_loss) == PT_OK &&
                    pt_pipeline_train_step(p, &fwd.mb, 0, LR, NULL) == PT_EINVAL &&
                    strstr(pt_last_error(), "optimizer"),
                "an inference pipeline trained or failed to evaluate: %s", pt_last_error());
        free_batch(&fwd);
        pt_pipeline_destroy(p);
        pt_pipeline_create(&gc, &oc, &pc, &p);
        batch_t small;
        make_batch(&gc, 3, 0, &small);
        REQUIRE(pt_pipeline_train_step(p, &small.mb, 0, LR, NULL) == PT_EINVAL &&
                    strstr(pt_last_error(), "micro-batches"),
                "a batch of 6 samples accepted for 4 x 2: %s", pt_last_error());
        /* a failing worker: a token outside the vocabulary on micro-batch 3 */
        batch_t bad;
        make_batch(&gc, 4, 0, &bad);
        bad.tokens[3 * MBS * gc.seq_len + 1] = 99;
        REQUIRE(pt_pipeline_train_step(p, &bad.mb, 0, LR, NULL) == PT_EINVAL &&
                    strstr(pt_last_error(), "vocabulary"),
                "a bad token did not fail the step with its message: %s", pt_last_error());
        batch_t good;
        make_batch(&gc, 4, 1, &good);
        REQUIRE(pt_pipeline_train_step(p, &good.mb, 0, LR, NULL) == PT_OK,
                "the step after a failure: %s", pt_last_error());
        free_batch(&small);
        free_batch(&bad);
        free_batch(&good);
        pt_pipeline_destroy(p);
        pt_optimizer_destroy(o);
        pt_model_destroy(m);
    }

    for (int i = 0; i < 3; i++) {
        pt_model_destroy(ref[i]);
        free(ref_losses[i]);
    }
    printf("ok\n");
    return 0;
}
