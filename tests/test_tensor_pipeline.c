/* test_tensor_pipeline: GPT trained with tensor-parallel stages on threads
 * (--tensor T: ranks = stages x T x replicas) follows the one-worker run:
 * - at P in {1, 2}, T in {2, 4}, D in {1, 2}, and with replicas zero in
 *   {0, 1, 2}, the mean loss of every one of 20 AdamW steps (clipped: the
 *   global norm must count every slice's part once, and each shard's once)
 *   is within 1e-5 relative of the P = T = D = 1 run's (splitting a
 *   product's inner dimension changes the order of additions, so not bit
 *   for bit);
 * - zero 1 gives zero 0's losses bit for bit at each layout, and two runs
 *   of one layout (zero 1, zero 2) agree bit for bit;
 * - the lowered program carries the tensor group's sums (AF, AB) between
 *   the pieces of every compute action;
 * - a spec of column_linear / row_linear pairs (activations on the cut
 *   columns, biases and none) at P in {1, 2}, T in {2, 4}, D = 2, zero 1:
 *   within 1e-5 relative of its one-worker run, two runs bit for bit;
 * - with activation checkpointing (each backward re-runs its forward's
 *   pieces and sums first) the losses of the same layout bit for bit, and
 *   at (1, 4, 1) within 1e-5 of the one worker's;
 * - in bf16, gpt and the spec at (2, T, 2, zero 1), T in {2, 4}: every
 *   step's loss within 2e-4 relative of the one bf16 worker's;
 * - with sequence parallelism (each slice holds its positions outside the
 *   tensor-parallel regions) every gpt layout above within 1e-5 of the one
 *   worker's, zero 1 bit for bit zero 0's, two runs bit for bit,
 *   activation checkpointing bit for bit the run without, and in bf16 at
 *   (2, T, 2, zero 1) within 2e-4 of the one bf16 worker's;
 * - bad layouts are refused with a message: T not dividing the heads, an
 *   mlp, a layernorm on cut columns; sequence parallelism without a tensor
 *   group, on a spec, or with T not dividing the sequence.
 * tests/test_mpi_tensor.c runs the same layouts under MPI. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"

#include "check.h"
#include "sched/program.h"
#include "tensor/rng.h"

#define STEPS 20
/* bf16 slices against one bf16 worker over 20 steps: each rounds its own
 * partial sums' order differently (bf16 keeps 8 bits) */
#define BF16_TOLERANCE 2e-4
#define M              4

static pt_model_config gpt(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 2, c.n_head = 4, c.n_embd = 32, c.seq_len = 16, c.vocab = 64, c.seed = 3;
    return c;
}

static pt_optim_config optim(void)
{
    pt_optim_config o = pt_optim_config_default(PT_OPTIM_ADAMW);
    o.grad_clip = 0.5f;
    return o;
}

/* Megatron's pair twice, with a bias-free row, and an activation on the
 * cut columns of each */
static const char *SPEC = "input 24; column_linear 24 32; gelu; row_linear 32 24; "
                          "column_linear 24 16 bias=0; relu; row_linear 16 8 bias=0; mse";

static void make_batch(const pt_model_config *c, int s, int *tokens, float *x, float *y)
{
    pt_rng r;
    pt_rng_seed(&r, 500 + (uint64_t)s);
    if (c->kind == PT_MODEL_SPEC) {
        pt_rng_fill_normal(&r, x, M * 24, 1.0f);
        pt_rng_fill_normal(&r, y, M * 8, 1.0f);
        return;
    }
    for (int i = 0; i <= M * c->seq_len; i++)
        tokens[i] = (int)pt_rng_below(&r, (uint64_t)c->vocab);
}

static int checkpointing; /* --checkpoint-activations for the runs that follow */
static int sequence;      /* --sequence-parallel for the runs that follow */

static int train_model(pt_model_config c, int P, int T, int D, int zero, float *losses)
{
    pt_optim_config o = optim();
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = P, pc.tensor = T, pc.replicas = D, pc.zero = zero, pc.microbatches = M;
    pc.checkpoint_activations = checkpointing;
    pc.sequence_parallel = sequence;
    pc.transport = PT_PIPELINE_THREADS;
    pt_pipeline *p;
    REQUIRE(pt_pipeline_create(&c, &o, &pc, &p) == PT_OK, "(%d, %d, %d, zero %d%s): %s", P, T, D,
            zero, sequence ? ", sequence-parallel" : "", pt_last_error());
    int *tokens = malloc(sizeof(int) * (size_t)(M * c.seq_len + 1));
    float x[M * 24], y[M * 8];
    REQUIRE(tokens, "allocation");
    for (int s = 0; s < STEPS; s++) {
        make_batch(&c, s, tokens, x, y);
        pt_microbatch b =
            c.kind == PT_MODEL_SPEC
                ? (pt_microbatch){.batch = M, .inputs = x, .target_values = y}
                : (pt_microbatch){.batch = M, .tokens = tokens, .targets = tokens + 1};
        REQUIRE(pt_pipeline_train_step(p, &b, s, 1e-3f, &losses[s]) == PT_OK, "step %d: %s", s,
                pt_last_error());
    }
    free(tokens);
    pt_pipeline_destroy(p);
    return 0;
}

static int train(int P, int T, int D, int zero, float *losses)
{
    return train_model(gpt(), P, T, D, zero, losses);
}

/* Layout (P, T, D) at zero 0, 1 and 2 (with replicas): within 1e-5 of
 * the one worker's losses, and zero 1 bit for bit zero 0's (zero 2 sums
 * each micro-batch's gradient over the replicas before adding it up, so
 * in another order). */
static void compare(int P, int T, int D, const float *ref)
{
    float l[3][STEPS];
    for (int z = 0; z < (D > 1 ? 3 : 1); z++) {
        if (train(P, T, D, z, l[z]))
            return;
        for (int s = 0; s < STEPS; s++)
            CHECK(fabsf(l[z][s] - ref[s]) <= 1e-5f * fabsf(ref[s]),
                  "(P %d, T %d, D %d, zero %d%s) step %d: loss %.9g, one worker %.9g (%.2g "
                  "relative)",
                  P, T, D, z, sequence ? ", sequence-parallel" : "", s, l[z][s], ref[s],
                  fabs(l[z][s] - ref[s]) / fabs(ref[s]));
        CHECK(z == 2 || !memcmp(l[z], l[0], sizeof l[0]),
              "(P %d, T %d, D %d%s): zero %d differs from zero 0", P, T, D,
              sequence ? ", sequence-parallel" : "", z);
    }
}

static void refused(pt_model_config c, int T, int checkpoint, const char *says)
{
    pt_optim_config o = optim();
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.tensor = T, pc.microbatches = M, pc.checkpoint_activations = checkpoint;
    pc.sequence_parallel = sequence;
    pc.transport = PT_PIPELINE_THREADS;
    pt_pipeline *p = NULL;
    int rc = pt_pipeline_create(&c, &o, &pc, &p);
    CHECK(rc != PT_OK && strstr(pt_last_error(), says), "--tensor %d: not refused with '%s' (%s)",
          T, says, rc == PT_OK ? "created" : pt_last_error());
    pt_pipeline_destroy(p);
}

static void check_program(void)
{
    pt_schedule_config sc = pt_schedule_config_default();
    sc.stages = 2, sc.microbatches = 2;
    pt_schedule *s;
    pt_program *prog;
    int pieces[4] = {3, 4, 2, 3};
    pt_lower_options o = pt_lower_options_default();
    o.tensor_pieces = pieces, o.split_sent_backward = 1;
    if (pt_schedule_create(&sc, &s) != PT_OK)
        return;
    CHECK(pt_program_lower(s, &o, &prog) == PT_OK, "lowering: %s", pt_last_error());
    char *text = NULL;
    CHECK(pt_program_format(prog, &text) == PT_OK, "%s", pt_last_error());
    CHECK(text && strstr(text, "F0.0 AF0.0/0 AF0.0/1 SF0.0>1"), "forward pieces: %s", text);
    CHECK(text && strstr(text, "B1.0 AB1.0/0 AB1.0/1 SB1.0>0 W1.0"), "backward pieces: %s", text);
    pt_program *back = NULL;
    CHECK(text && pt_program_parse(text, &back) == PT_OK && pt_prog_equal(prog, back),
          "the text form does not read back: %s", pt_last_error());
    free(text);
    pt_program_destroy(back);
    pt_program_destroy(prog);
    /* sequence parallelism: the LayerNorms' sum is an action of its own, after
     * the last backward piece and before the norm, on every worker */
    o.sequence_sum = 1;
    CHECK(pt_program_lower(s, &o, &prog) == PT_OK, "lowering: %s", pt_last_error());
    text = NULL;
    CHECK(pt_program_format(prog, &text) == PT_OK, "%s", pt_last_error());
    CHECK(text && strstr(text, "W0.1 L N S\n") && strstr(text, "W1.1 L N S\n"),
          "no SEQUENCE_SUM (L) between the last backward piece and the norm: %s", text);
    CHECK(pt_program_validate(prog) == PT_OK, "the program with L: %s", pt_last_error());
    back = NULL;
    CHECK(text && pt_program_parse(text, &back) == PT_OK && pt_prog_equal(prog, back),
          "L does not read back: %s", pt_last_error());
    pt_program_destroy(back);
    /* L before a backward piece it waits for is refused */
    char *early = text ? malloc(strlen(text) + 3) : NULL;
    char *at = text ? strstr(text, "W0.1 L") : NULL;
    if (early && at) {
        size_t head = (size_t)(at - text);
        memcpy(early, text, head);
        strcpy(early + head, "L W0.1");
        strcat(early, at + strlen("W0.1 L"));
        back = NULL;
        CHECK(pt_program_parse(early, &back) == PT_OK, "%s", pt_last_error());
        CHECK(back && pt_program_validate(back) != PT_OK &&
                  strstr(pt_last_error(), "backward piece"),
              "L before W0.1 is not refused: %s", pt_last_error());
        pt_program_destroy(back);
    }
    free(early);
    free(text);
    pt_program_destroy(prog);
    pt_schedule_destroy(s);
}

/* Sequence parallelism: the gpt layouts again, and what it refuses. */
static void check_sequence(const float *ref)
{
    float a[STEPS], b[STEPS];
    sequence = 1;
    for (int P = 1; P <= 2; P++)
        for (int T = 2; T <= 4; T += 2)
            for (int D = 1; D <= 2; D++)
                compare(P, T, D, ref);
    if (!train(2, 2, 2, 1, a) && !train(2, 2, 2, 1, b))
        CHECK(!memcmp(a, b, sizeof a), "sequence-parallel: two runs at (2, 2, 2, zero 1) differ");
    checkpointing = 1;
    if (!train(2, 2, 2, 1, b))
        CHECK(!memcmp(a, b, sizeof a), "sequence-parallel: checkpointing changes the losses");
    checkpointing = 0;
    pt_model_config c = gpt(), cb = gpt(), spec;
    refused(c, 1, 0, "needs --tensor 2 or more");
    /* bf16: the gathers and partial sums in floats, rounded once */
    cb.precision = PT_PRECISION_BF16;
    float one[STEPS];
    sequence = 0;
    if (!train_model(cb, 1, 1, 1, 0, one)) {
        sequence = 1;
        for (int T = 2; T <= 4; T += 2)
            if (!train_model(cb, 2, T, 2, 1, a))
                for (int st = 0; st < STEPS; st++)
                    CHECK(fabs(a[st] - one[st]) <= BF16_TOLERANCE * fabs(one[st]),
                          "bf16 sequence-parallel (2, %d, 2, zero 1) step %d: loss %.9g, one "
                          "worker %.9g",
                          T, st, a[st], one[st]);
    }
    sequence = 1;
    CHECK(pt_model_config_spec(SPEC, &spec) == PT_OK, "%s", pt_last_error());
    refused(spec, 2, 0, "only a gpt");
    c.seq_len = 18;
    refused(c, 4, 0, "does not divide the sequence of 18");
    sequence = 0;
}

int main(void)
{
    float ref[STEPS], a[STEPS], b[STEPS];
    check_program();
    if (train(1, 1, 1, 0, ref))
        return 1;
    for (int P = 1; P <= 2; P++)
        for (int T = 2; T <= 4; T += 2)
            for (int D = 1; D <= 2; D++)
                compare(P, T, D, ref);
    if (!train(2, 2, 2, 1, a) && !train(2, 2, 2, 1, b))
        CHECK(!memcmp(a, b, sizeof a), "two runs at (2, 2, 2, zero 1) differ");
    if (!train(2, 2, 2, 2, a) && !train(2, 2, 2, 2, b))
        CHECK(!memcmp(a, b, sizeof a), "two runs at (2, 2, 2, zero 2) differ");
    pt_model_config c = gpt();
    refused(c, 3, 0, "heads");
    /* bf16: products of bf16 operands summed in floats, the slices' partial
     * sums added in floats and rounded once: near the one worker's bf16 run */
    pt_model_config cb = gpt(), sbf;
    cb.precision = PT_PRECISION_BF16;
    REQUIRE(pt_model_config_spec(SPEC, &sbf) == PT_OK, "%s", pt_last_error());
    sbf.precision = PT_PRECISION_BF16;
    for (int which = 0; which < 2; which++) {
        pt_model_config m = which ? sbf : cb;
        float one[STEPS], sliced[STEPS];
        double worst = 0;
        if (train_model(m, 1, 1, 1, 0, one))
            continue;
        for (int T = 2; T <= 4; T += 2) {
            if (train_model(m, 2, T, 2, 1, sliced))
                continue;
            for (int st = 0; st < STEPS; st++) {
                double d = fabs(sliced[st] - one[st]) / fabs(one[st]);
                worst = d > worst ? d : worst;
                CHECK(d <= BF16_TOLERANCE,
                      "bf16 %s (2, %d, 2, zero 1) step %d: loss %.9g, one "
                      "worker %.9g",
                      which ? "spec" : "gpt", T, st, sliced[st], one[st]);
            }
        }
        printf("bf16 %s: worst relative difference to one worker %.2g\n", which ? "spec" : "gpt",
               worst);
    }
    /* checkpointing: the recompute's sums lead each backward; the same bits */
    float k[STEPS];
    checkpointing = 1;
    if (!train(2, 2, 2, 1, k) && !train(2, 2, 2, 1, a))
        CHECK(!memcmp(k, a, sizeof k), "checkpointing: two runs at (2, 2, 2, zero 1) differ");
    checkpointing = 0;
    if (!train(2, 2, 2, 1, b))
        CHECK(!memcmp(k, b, sizeof k), "(2, 2, 2, zero 1): checkpointing changes the losses");
    checkpointing = 1;
    if (!train(1, 4, 1, 0, k) && !train(1, 1, 1, 0, a))
        for (int st = 0; st < STEPS; st++)
            CHECK(fabsf(k[st] - a[st]) <= 1e-5f * fabsf(a[st]),
                  "checkpointing (1, 4, 1) step %d: loss %.9g, one worker %.9g", st, k[st], a[st]);
    checkpointing = 0;
    int widths[3] = {8, 16, 4};
    refused(pt_model_config_mlp(3, widths), 2, 0, "column_linear and row_linear");
    pt_model_config spec;
    REQUIRE(pt_model_config_spec(SPEC, &spec) == PT_OK, "%s", pt_last_error());
    float sref[STEPS], sa[STEPS], sb[STEPS];
    if (!train_model(spec, 1, 1, 1, 0, sref))
        for (int P = 1; P <= 2; P++)
            for (int T = 2; T <= 4; T += 2)
                if (!train_model(spec, P, T, 2, 1, sa))
                    for (int st = 0; st < STEPS; st++)
                        CHECK(fabsf(sa[st] - sref[st]) <= 1e-5f * fabsf(sref[st]),
                              "spec (P %d, T %d, D 2, zero 1) step %d: loss %.9g, one worker %.9g",
                              P, T, st, sa[st], sref[st]);
    if (!train_model(spec, 2, 2, 1, 0, sa) && !train_model(spec, 2, 2, 1, 0, sb))
        CHECK(!memcmp(sa, sb, sizeof sa), "spec: two runs at (2, 2, 1) differ");
    spec.spec[0] = '\0';
    REQUIRE(
        pt_model_config_spec("input 24; column_linear 24 32; layernorm 32; row_linear 32 8; mse",
                             &spec) == PT_OK,
        "%s", pt_last_error());
    refused(spec, 2, 0, "close them with a row_linear");
    check_sequence(ref);
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
