/* test_gpt_variants: the gpt computes what Hugging Face's GPT-2 computes for
 * each GPT2Config field that changes the arithmetic.
 * - For GPT-2's own config and for one variant per field (n_inner not 4C;
 *   each activation; layer_norm_epsilon 1e-3; scale_attn_weights 0;
 *   scale_attn_by_inverse_layer_idx 1; tie_word_embeddings 0; n_positions
 *   above seq_len), a small gpt (2 layers, C 32, 4 heads, T 16, V 64) with
 *   every parameter moved off its initial value computes its mean loss on a
 *   fixed batch; its weights (a checkpoint: one safetensors file under
 *   Hugging Face's names) and the config (Hugging Face's names) go to
 *   tests/hf_gpt2.py, an independent numpy forward in float64, whose
 *   loss must agree to 1e-6 relative. The variants that change no shape
 *   must also move the loss away from GPT-2's on the same weights by more
 *   than that (so the comparison would see a field ignored); n_positions
 *   above seq_len must leave it bit-identical (the extra rows are never
 *   read).
 * - Sizes and costs use the real widths: parameter counts and bytes,
 *   activation bytes and FLOPs of a transformer block for n_inner, the
 *   position table's rows, the untied head's own parameter; a stage's
 *   allocations equal the planner's prediction.
 * - A 2-stage pipeline of a variant (gelu, untied, n_inner, n_positions,
 *   every LayerNorm's epsilon, attention scaled by layer and not by head
 *   size) takes the same steps as a 1-stage one, bit for bit.
 * - Each field out of range is refused, the message naming it and its value.
 * - In bf16 (on each product kernel the machine has: portable, amx,
 *   avx512bf16; one it lacks is skipped with a line saying so), GPT-2,
 *   n_inner, each activation and the untied head against the reference
 *   rounding to bf16 where pipetrain's bf16 stores, to the same 1e-6.
 * Skipped (77) when the test Python environment cannot be had. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "pipetrain.h"
#include "tensor/rng.h"

#include "check.h"
#include "hf_reference.h"

#define B 2
#define T 16
#define V 64
#define C 32

/* Relative agreement required of the two losses. float32 against float64
 * agrees to about 1e-7 here; 1e-6 (tighter than 1e-5) is what lets the
 * comparison tell gelu from gelu_new, whose losses differ by about 6e-6. */
#define AGREE 1e-6

static pt_model_config small_gpt(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 2, c.n_head = 4, c.n_embd = C, c.seq_len = T, c.vocab = V, c.seed = 3;
    return c;
}

/* ---- the reference's inputs ---- */

static int tokens[B * T + 1], targets[B * T];

static void make_batch(void)
{
    pt_rng r;
    pt_rng_seed(&r, 42);
    for (int i = 0; i <= B * T; i++)
        tokens[i] = (int)pt_rng_below(&r, V);
    for (int i = 0; i < B * T; i++)
        targets[i] = tokens[i + 1];
    targets[5] = -1; /* not counted, as Hugging Face's -100 is not */
}

/* The config under GPT2Config's names, and the batch. */
static int write_config(const char *path, const pt_model_config *c)
{
    FILE *f = fopen(path, "w");
    REQUIRE(f, "cannot write %s", path);
    fprintf(f, "{\n");
    hf_write_gpt2(f, c);
    hf_write_rows(f, "tokens", tokens, B, T);
    fprintf(f, ",\n");
    hf_write_rows(f, "targets", targets, B, T);
    fprintf(f, "\n}\n");
    REQUIRE(fclose(f) == 0, "cannot write %s", path);
    return 0;
}

/* ---- pipetrain's side ---- */

/* The mean loss on the batch; the weights saved into `weights` (may be
 * NULL). */
static int pipetrain_loss(const pt_model_config *c, const char *weights, float *loss)
{
    pt_model *m;
    REQUIRE(pt_model_create(c, &m) == PT_OK, "create: %s", pt_last_error());
    hf_perturb(m, 0.3f);
    int last = pt_model_n_blocks(m) - 1;
    pt_activations *a;
    REQUIRE(pt_activations_create(m, 0, last, B, &a) == PT_OK, "%s", pt_last_error());
    pt_microbatch mb = {.batch = B, .tokens = tokens, .targets = targets};
    int rc = pt_model_forward(m, 0, last, &mb, NULL, a, loss);
    CHECK(rc == PT_OK, "forward: %s", pt_last_error());
    if (rc == PT_OK && weights) {
        rc = pt_checkpoint_save(weights, m, NULL, NULL);
        CHECK(rc == PT_OK, "save %s: %s", weights, pt_last_error());
    }
    pt_activations_destroy(a);
    pt_model_destroy(m);
    return rc != PT_OK;
}

/* ---- the reference ---- */

static int reference_loss(const char *py, const char *config, const char *weights, double *loss)
{
    char args[2400], line[512];
    snprintf(args, sizeof args, "reference '%s' '%s'", config, weights);
    REQUIRE(hf_run(py, args, line, sizeof line) == 0, "the reference failed on %s", config);
    REQUIRE(sscanf(line, "loss %lf", loss) == 1, "the reference printed no loss: %s", line);
    return 0;
}

typedef struct {
    const char *name;
    pt_model_config c;
    int same_shapes; /* GPT-2's arithmetic on the same weights gives another loss */
} variant;

/* bf16: the loss of GPT-2 and of the variants whose arithmetic differs
 * most against the reference rounding to bf16 where pipetrain's bf16
 * stores, on each product kernel, to AGREE; and away from fp32's loss by
 * more than that (the rounding is seen). */
static int check_bf16(const char *py, const char *dir, const variant *v, int n, const float *fp32)
{
    const char *kernels[] = {"portable", "amx", "avx512bf16"};
    for (int k = 0; k < 3; k++) {
        if (pt_bf16_set_kernel(kernels[k]) != PT_OK) {
            printf("skipped: bf16 on %s: %s\n", kernels[k], pt_last_error());
            continue;
        }
        for (int i = 0; i < n; i++) {
            if (i > 4 && i != 8) /* GPT-2, n_inner, each activation, untied */
                continue;
            pt_model_config c = v[i].c;
            c.precision = PT_PRECISION_BF16;
            char config[1100], weights[1100];
            snprintf(config, sizeof config, "%s/config-bf16-%d.json", dir, i);
            snprintf(weights, sizeof weights, "%s/model-bf16-%d.safetensors", dir, i);
            float loss;
            double ref;
            REQUIRE(write_config(config, &c) == 0, "config of %s", v[i].name);
            REQUIRE(pipetrain_loss(&c, weights, &loss) == 0, "bf16 %s", v[i].name);
            REQUIRE(reference_loss(py, config, weights, &ref) == 0, "bf16 %s", v[i].name);
            double rel = fabs(loss - ref) / fabs(ref), off = fabs(loss - fp32[i]) / fp32[i];
            printf("bf16 (%s) %-25s pipetrain %.7f  reference %.7f  rel %.1e  (fp32 %.1e away)\n",
                   kernels[k], v[i].name, loss, ref, rel, off);
            CHECK(rel < AGREE, "bf16 %s: pipetrain's loss %.8f, the reference's %.8f (rel %.2e)",
                  v[i].name, loss, ref, rel);
            CHECK(off > 2 * AGREE, "bf16 %s: the loss %.8f is fp32's %.8f: nothing was rounded",
                  v[i].name, loss, fp32[i]);
        }
    }
    pt_bf16_set_kernel("auto");
    return 0;
}

static int check_variants(const char *py, const char *dir)
{
    variant v[16];
    int n = 0;
    pt_model_config base = small_gpt();
    v[n++] = (variant){"default (GPT-2)", base, 0};
    v[n] = (variant){"n_inner 48", base, 0}, v[n++].c.n_inner = 48;
    v[n] = (variant){"activation gelu", base, 1}, v[n++].c.activation = PT_ACT_GELU;
    v[n] = (variant){"activation relu", base, 1}, v[n++].c.activation = PT_ACT_RELU;
    v[n] = (variant){"activation silu", base, 1}, v[n++].c.activation = PT_ACT_SILU;
    v[n] = (variant){"layer_norm_epsilon 1e-3", base, 1}, v[n++].c.layer_norm_epsilon = 1e-3f;
    v[n] = (variant){"scale_attn_weights 0", base, 1}, v[n++].c.scale_attn_weights = 0;
    v[n] = (variant){"scale_attn_by_inverse_layer_idx 1", base, 1};
    v[n++].c.scale_attn_by_inverse_layer_idx = 1;
    v[n] = (variant){"tie_word_embeddings 0", base, 1}, v[n++].c.tie_word_embeddings = 0;
    v[n] = (variant){"n_positions 40", base, 0}, v[n++].c.n_positions = 40;
    float losses[16];
    for (int i = 0; i < n; i++) {
        char config[1100], weights[1100];
        snprintf(config, sizeof config, "%s/config-%d.json", dir, i);
        snprintf(weights, sizeof weights, "%s/model-%d.safetensors", dir, i);
        double ref;
        REQUIRE(write_config(config, &v[i].c) == 0, "config of %s", v[i].name);
        REQUIRE(pipetrain_loss(&v[i].c, weights, &losses[i]) == 0, "%s", v[i].name);
        REQUIRE(reference_loss(py, config, weights, &ref) == 0, "%s", v[i].name);
        double rel = fabs(losses[i] - ref) / fabs(ref);
        printf("%-36s pipetrain %.7f  reference %.7f  rel %.1e\n", v[i].name, losses[i], ref, rel);
        CHECK(rel < AGREE, "%s: pipetrain's loss %.8f, the reference's %.8f (relative %.2e)",
              v[i].name, losses[i], ref, rel);
        double moved = fabs(losses[i] - losses[0]) / losses[0];
        CHECK(!v[i].same_shapes || moved > 2 * AGREE,
              "%s: the loss %.7f is within %.1e of GPT-2's %.7f on the same weights: the "
              "comparison could not see the field ignored",
              v[i].name, losses[i], moved, losses[0]);
    }
    CHECK(losses[n - 1] == losses[0], "n_positions 40: the loss %.9g is not GPT-2's %.9g",
          losses[n - 1], losses[0]);
    return check_bf16(py, dir, v, n, losses);
}

/* ---- sizes and costs ---- */

static int check_sizes(void)
{
    pt_model_config c = small_gpt();
    const int I = 48, NP = 40;
    c.n_inner = I, c.n_positions = NP, c.tie_word_embeddings = 0;
    pt_model_config g = small_gpt();
    pt_model *m, *d;
    REQUIRE(pt_model_describe(&c, &m) == PT_OK && pt_model_describe(&g, &d) == PT_OK, "%s",
            pt_last_error());
    const pt_param *fc = pt_model_find_param(m, "transformer.h.1.mlp.c_fc.weight");
    const pt_param *proj = pt_model_find_param(m, "transformer.h.1.mlp.c_proj.weight");
    const pt_param *wpe = pt_model_find_param(m, "transformer.wpe.weight");
    const pt_param *head = pt_model_find_param(m, "lm_head.weight");
    CHECK(fc && fc->shape[0] == C && fc->shape[1] == I, "c_fc is not (C, n_inner)");
    CHECK(proj && proj->shape[0] == I && proj->shape[1] == C, "c_proj is not (n_inner, C)");
    CHECK(wpe && wpe->shape[0] == NP && wpe->shape[1] == C, "wpe is not (n_positions, C)");
    CHECK(head && !head->tied_to && head->shape[0] == V && head->shape[1] == C,
          "the untied lm_head is not a (V, C) parameter of its own");
    size_t layer = 4 * C + (size_t)C * 3 * C + 3 * C + C * C + C + (size_t)C * I + I + I * C + C;
    size_t count = (size_t)V * C + (size_t)NP * C + 2 * layer + 2 * C + (size_t)V * C;
    CHECK(pt_model_param_count(m) == count, "%zu parameters, expected %zu", pt_model_param_count(m),
          count);
    pt_block_cost got = pt_model_block_cost(m, 1), gpt2 = pt_model_block_cost(d, 1);
    CHECK(got.param_bytes == sizeof(float) * layer, "transformer block: %zu parameter bytes",
          got.param_bytes);
    /* h, its activation and their gradient are (T, n_inner) where GPT-2's are (T, 4C) */
    long extra = (long)T * (I - 4 * C) * (long)sizeof(float);
    CHECK((long)got.activation_bytes - (long)gpt2.activation_bytes == 2 * extra &&
              (long)got.grad_bytes - (long)gpt2.grad_bytes == extra,
          "transformer block: %zu activation and %zu gradient bytes, GPT-2's %zu and %zu: not "
          "%ld and %ld apart",
          got.activation_bytes, got.grad_bytes, gpt2.activation_bytes, gpt2.grad_bytes, 2 * extra,
          extra);
    double flops = 2.0 * T * 2 * C * (I - 4 * C); /* c_fc and mlp.c_proj */
    CHECK(got.forward_flops - gpt2.forward_flops == flops &&
              got.backward_weight_flops - gpt2.backward_weight_flops == flops,
          "transformer block FLOPs do not follow n_inner");
    CHECK(pt_model_block_cost(m, 0).param_bytes == sizeof(float) * ((size_t)V + NP) * C,
          "embedding: %zu parameter bytes", pt_model_block_cost(m, 0).param_bytes);
    pt_model_destroy(m);
    pt_model_destroy(d);
    return 0;
}

/* ---- a pipeline of a variant ---- */

static pt_model_config pipeline_variant(void)
{
    pt_model_config c = small_gpt();
    c.n_inner = 40, c.n_positions = 20, c.activation = PT_ACT_GELU, c.tie_word_embeddings = 0;
    c.layer_norm_epsilon = 1e-3f, c.scale_attn_weights = 0, c.scale_attn_by_inverse_layer_idx = 1;
    return c;
}

/* Two AdamW steps on `stages` workers (1f1b, 2 micro-batches of 2); the
 * losses, and every parameter copied into `into`. */
static int pipeline_steps(int stages, float *losses, pt_model *into)
{
    pt_model_config c = pipeline_variant();
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    int halves[2] = {2, 2}, whole[1] = {4}; /* embedding + layer 0 | layer 1 + head */
    pc.stages = stages, pc.microbatches = 2, pc.micro_batch_size = B, pc.blas_threads = 1;
    pc.balance = stages == 2 ? halves : whole, pc.n_balance = stages;
    pt_pipeline *p;
    REQUIRE(pt_pipeline_create(&c, &oc, &pc, &p) == PT_OK, "pipeline of %d: %s", stages,
            pt_last_error());
    int rows = 2 * B * T;
    int *tok = malloc(sizeof(int) * (size_t)(rows + 1));
    pt_rng r;
    pt_rng_seed(&r, 77);
    for (int i = 0; i <= rows; i++)
        tok[i] = (int)pt_rng_below(&r, V);
    pt_microbatch batch = {.batch = 2 * B, .tokens = tok, .targets = tok + 1};
    for (int s = 0; s < 2; s++) {
        REQUIRE(pt_pipeline_train_step(p, &batch, s, 1e-2f, &losses[s]) == PT_OK, "step: %s",
                pt_last_error());
    }
    for (int i = 0; i < pt_model_n_params(into); i++) {
        const pt_param *q = pt_model_param(into, i);
        REQUIRE(pt_pipeline_read_param(p, q->name, -1, q->data) == PT_OK, "read %s: %s", q->name,
                pt_last_error());
    }
    pt_memory_use got[2], want[2];
    size_t rss[2];
    REQUIRE(pt_pipeline_memory(p, got, want, rss) == PT_OK, "memory: %s", pt_last_error());
    for (int w = 0; w < stages; w++)
        CHECK(got[w].params == want[w].params && got[w].activations == want[w].activations,
              "%d stages, worker %d: allocated %zu parameter and %zu activation bytes, the "
              "planner predicted %zu and %zu",
              stages, w, got[w].params, got[w].activations, want[w].params, want[w].activations);
    free(tok);
    pt_pipeline_destroy(p);
    return 0;
}

static int check_pipeline(void)
{
    pt_model_config c = pipeline_variant();
    pt_model *one, *two;
    float l1[2], l2[2];
    REQUIRE(pt_model_create(&c, &one) == PT_OK && pt_model_create(&c, &two) == PT_OK, "%s",
            pt_last_error());
    REQUIRE(pipeline_steps(1, l1, one) == 0 && pipeline_steps(2, l2, two) == 0, "pipelines");
    printf("pipeline of the variant: losses %.7f %.7f (1 stage), %.7f %.7f (2 stages)\n", l1[0],
           l1[1], l2[0], l2[1]);
    CHECK(memcmp(l1, l2, sizeof l1) == 0, "the 2-stage losses differ from the 1-stage ones");
    CHECK(l1[1] < l1[0], "the variant did not learn (%.6f -> %.6f)", l1[0], l1[1]);
    for (int i = 0; i < pt_model_n_params(one); i++) {
        const pt_param *a = pt_model_param(one, i), *b = pt_model_param(two, i);
        CHECK(memcmp(a->data, b->data, sizeof(float) * a->numel) == 0,
              "%s differs between 1 and 2 stages", a->name);
    }
    const pt_param *wte = pt_model_find_param(one, "transformer.wte.weight");
    const pt_param *head = pt_model_find_param(one, "lm_head.weight");
    CHECK(memcmp(wte->data, head->data, sizeof(float) * wte->numel) != 0,
          "the untied head took the token embedding's values");
    pt_model_destroy(one);
    pt_model_destroy(two);
    return 0;
}

/* ---- checkpoints ---- */

/* A variant's weights saved and loaded into a model of another seed come
 * back bit for bit: the untied head is written (only a tied copy is left
 * out) and read as its own tensor, the longer position table whole. */
static int check_checkpoint(const char *dir)
{
    pt_model_config c = pipeline_variant();
    pt_model *m, *back;
    char path[1100];
    snprintf(path, sizeof path, "%s/variant.safetensors", dir);
    REQUIRE(pt_model_create(&c, &m) == PT_OK, "%s", pt_last_error());
    hf_perturb(m, 0.3f);
    c.seed = 99;
    REQUIRE(pt_model_create(&c, &back) == PT_OK, "%s", pt_last_error());
    REQUIRE(pt_checkpoint_save(path, m, NULL, NULL) == PT_OK, "save: %s", pt_last_error());
    REQUIRE(pt_checkpoint_load(path, back, NULL, NULL) == PT_OK, "load: %s", pt_last_error());
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *a = pt_model_param(m, i), *b = pt_model_param(back, i);
        CHECK(memcmp(a->data, b->data, sizeof(float) * a->numel) == 0,
              "%s did not come back from the checkpoint", a->name);
    }
    pt_model_destroy(m);
    pt_model_destroy(back);
    return 0;
}

/* ---- refusals ---- */

static void refuses(const char *what, pt_model_config c, const char *field, const char *value)
{
    pt_model *m = NULL;
    int rc = pt_model_create(&c, &m);
    const char *msg = pt_last_error();
    CHECK(rc == PT_EINVAL && strstr(msg, field) && strstr(msg, value),
          "%s: status %d, message '%s' (wanted %s and %s)", what, rc, msg, field, value);
    pt_model_destroy(m);
}

static void check_refusals(void)
{
    pt_model_config c = small_gpt();
    c.n_inner = -3;
    refuses("n_inner -3", c, "n_inner", "-3");
    c = small_gpt(), c.n_positions = T - 1;
    refuses("n_positions below seq_len", c, "n_positions 15", "seq_len 16");
    c = small_gpt(), c.layer_norm_epsilon = 0.0f;
    refuses("epsilon 0", c, "layer_norm_epsilon", "0");
    c = small_gpt(), c.layer_norm_epsilon = -1e-5f;
    refuses("epsilon -1e-5", c, "layer_norm_epsilon", "-1e-05");
    c = small_gpt(), c.layer_norm_epsilon = NAN;
    refuses("epsilon nan", c, "layer_norm_epsilon", "nan");
    c = small_gpt(), c.activation = (pt_activation)4;
    refuses("activation 4", c, "activation 4", "silu");
    c = small_gpt(), c.scale_attn_weights = 2;
    refuses("scale_attn_weights 2", c, "scale_attn_weights is 2", "0 or 1");
    c = small_gpt(), c.scale_attn_by_inverse_layer_idx = -1;
    refuses("scale_attn_by_inverse_layer_idx -1", c, "scale_attn_by_inverse_layer_idx is -1",
            "0 or 1");
    c = small_gpt(), c.tie_word_embeddings = 7;
    refuses("tie_word_embeddings 7", c, "tie_word_embeddings is 7", "0 or 1");
    c = small_gpt(), c.n_inner = 1 << 30;
    refuses("n_inner 2^30", c, "MLP width", "1073741824");
}

int main(void)
{
    REQUIRE(getenv("PT_SOURCE_DIR"), "PT_SOURCE_DIR is not set (run through ctest)");
    make_batch();
    check_refusals();
    char dir[] = "/tmp/pt_gpt_variants_XXXXXX", py[1024];
    REQUIRE(mkdtemp(dir), "no temporary folder");
    int rc = check_sizes() || check_pipeline() || check_checkpoint(dir);
    if (hf_find_python(py, sizeof py)) {
        printf("skipped: the test Python environment (scripts/install-test-python.sh) cannot "
               "be had\n");
        check_done(dir, 1);
        return rc || failures ? 1 : 77;
    }
    return check_done(dir, rc || check_variants(py, dir));
}
