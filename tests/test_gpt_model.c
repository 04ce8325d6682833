/* test_gpt_model: the whole gpt as one worker runs it.
 * - at initialisation, the loss on random tokens is within 0.1 of ln(vocab);
 * - one SGD step on a fixed batch lowers the loss on that batch;
 * - the same seed gives bit-identical losses and parameters in two runs;
 * - parameters carry Hugging Face GPT-2's names and shapes, and the LM head
 *   is a copy of the token embedding whose gradient is summed with it;
 * - the LM head's activations hold one float per token and vocabulary entry
 *   (its probabilities), not a second for a gradient of its output that
 *   nothing reads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "tensor/rng.h"

#include "check.h"

static pt_model_config small_gpt(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 2, c.n_head = 2, c.n_embd = 32, c.seq_len = 16, c.vocab = 64, c.seed = 7;
    return c;
}

/* Trains `steps` SGD steps on one fixed batch; losses[i] before step i. */
static int train(int steps, float lr, float *losses, pt_model **keep)
{
    pt_model_config c = small_gpt();
    pt_model *m;
    if (pt_model_create(&c, &m) != PT_OK)
        return printf("create: %s\n", pt_last_error()), 1;
    int B = 4, n = B * c.seq_len;
    int *tok = malloc(sizeof(int) * (n + 1));
    pt_rng r;
    pt_rng_seed(&r, 99);
    for (int i = 0; i <= n; i++)
        tok[i] = (int)pt_rng_below(&r, (uint64_t)c.vocab);
    pt_microbatch mb = {.batch = B, .tokens = tok, .targets = tok + 1};
    pt_activations *a;
    pt_activations_create(m, 0, pt_model_n_blocks(m) - 1, B, &a);
    for (int s = 0; s < steps; s++) {
        pt_model_zero_grads(m);
        if (pt_model_step_microbatch(m, &mb, 1.0f, a, &losses[s]) != PT_OK)
            return printf("step: %s\n", pt_last_error()), 1;
        pt_model_sum_tied_grads(m);
        for (int i = 0; i < pt_model_n_params(m); i++) {
            const pt_param *p = pt_model_param(m, i);
            for (size_t j = 0; j < p->numel; j++)
                p->data[j] -= lr * p->grad[j];
        }
    }
    pt_activations_destroy(a);
    free(tok);
    *keep = m;
    return 0;
}

int main(void)
{
    pt_model *m1, *m2;
    float l1[8], l2[8];
    REQUIRE(train(8, 0.1f, l1, &m1) == 0, "first run");
    REQUIRE(train(8, 0.1f, l2, &m2) == 0, "second run");

    double lnv = log(64.0);
    printf("initial loss %.4f, ln(vocab) %.4f; after 7 steps %.4f\n", l1[0], lnv, l1[7]);
    REQUIRE(fabs(l1[0] - lnv) < 0.1, "initial loss %.4f is not within 0.1 of ln V %.4f", l1[0],
            lnv);
    REQUIRE(l1[1] < l1[0], "one SGD step did not lower the loss (%.5f -> %.5f)", l1[0], l1[1]);
    REQUIRE(l1[7] < l1[0] - 0.3, "eight steps lowered the loss too little (%.4f -> %.4f)", l1[0],
            l1[7]);
    REQUIRE(memcmp(l1, l2, sizeof l1) == 0, "the same seed gave different losses");
    for (int i = 0; i < pt_model_n_params(m1); i++) {
        const pt_param *a = pt_model_param(m1, i), *b = pt_model_param(m2, i);
        REQUIRE(memcmp(a->data, b->data, a->numel * sizeof(float)) == 0,
                "parameter %s differs between two runs of the same seed", a->name);
    }

    /* Hugging Face names and layouts */
    const struct {
        const char *name;
        int d0, d1;
    } expect[] = {{"transformer.wte.weight", 64, 32},
                  {"transformer.wpe.weight", 16, 32},
                  {"transformer.h.0.ln_1.weight", 32, 0},
                  {"transformer.h.1.attn.c_attn.weight", 32, 96},
                  {"transformer.h.1.attn.c_attn.bias", 96, 0},
                  {"transformer.h.0.attn.c_proj.weight", 32, 32},
                  {"transformer.h.0.mlp.c_fc.weight", 32, 128},
                  {"transformer.h.0.mlp.c_proj.weight", 128, 32},
                  {"transformer.ln_f.bias", 32, 0},
                  {"lm_head.weight", 64, 32}};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        const pt_param *p = pt_model_find_param(m1, expect[i].name);
        REQUIRE(p, "no parameter named %s", expect[i].name);
        REQUIRE(p->shape[0] == expect[i].d0 &&
                    (expect[i].d1 == 0 ? p->ndim == 1 : p->shape[1] == expect[i].d1),
                "%s has the wrong shape", expect[i].name);
    }
    REQUIRE(pt_model_n_params(m1) == 2 + 2 * 12 + 3, "parameter count %d", pt_model_n_params(m1));
    const pt_param *wte = pt_model_find_param(m1, "transformer.wte.weight");
    const pt_param *head = pt_model_find_param(m1, "lm_head.weight");
    REQUIRE(head->tied_to && !strcmp(head->tied_to, wte->name), "lm_head is not tied to wte");
    REQUIRE(memcmp(wte->data, head->data, wte->numel * sizeof(float)) == 0,
            "the tied copies drifted apart");
    REQUIRE(pt_model_param_count(m1) == 64 * 32 + 16 * 32 + 2 * (12 * 32 * 32 + 13 * 32) + 2 * 32,
            "element count %zu", pt_model_param_count(m1));

    /* costs: the partitioner's inputs are present and plausible */
    pt_block_cost tc = pt_model_block_cost(m1, 1);
    REQUIRE(tc.forward_flops > 2.0 * 16 * 12 * 32 * 32 && tc.backward_weight_flops > 0 &&
                tc.param_bytes == sizeof(float) * (12 * 32 * 32 + 13 * 32) &&
                tc.activation_bytes > 0,
            "transformer block cost record");

    /* the head's activations grow by one float per token and vocabulary
     * entry: its probabilities, and no gradient of them */
    pt_model_config wide = small_gpt();
    wide.vocab = 2 * 64;
    pt_model *m3;
    REQUIRE(pt_model_create(&wide, &m3) == PT_OK, "create: %s", pt_last_error());
    int head_block = pt_model_n_blocks(m1) - 1, B = 2;
    size_t narrow_head = pt_model_activation_bytes(m1, head_block, head_block, B),
           wide_head = pt_model_activation_bytes(m3, head_block, head_block, B),
           probabilities = (size_t)B * wide.seq_len * 64 * sizeof(float);
    REQUIRE(wide_head - narrow_head == probabilities,
            "64 more vocabulary entries added %zu bytes to the head's activations, not %zu",
            wide_head - narrow_head, probabilities);
    pt_model_destroy(m3);

    /* bad input is refused, not crashed on */
    pt_model_config bad = small_gpt();
    bad.n_embd = 31;
    pt_model *none;
    REQUIRE(pt_model_create(&bad, &none) == PT_EINVAL && strstr(pt_last_error(), "multiple"),
            "embd not divisible by heads accepted: %s", pt_last_error());
    int tokens[16] = {0}, targets[16] = {0};
    tokens[3] = 64;
    pt_microbatch mb = {.batch = 1, .tokens = tokens, .targets = targets};
    pt_activations *a;
    pt_activations_create(m1, 0, pt_model_n_blocks(m1) - 1, 1, &a);
    float loss;
    REQUIRE(pt_model_forward(m1, 0, pt_model_n_blocks(m1) - 1, &mb, NULL, a, &loss) == PT_EINVAL &&
                strstr(pt_last_error(), "vocabulary"),
            "token 64 of vocab 64 accepted");
    pt_activations_destroy(a);

    pt_model_destroy(m1);
    pt_model_destroy(m2);
    printf("ok\n");
    return 0;
}
