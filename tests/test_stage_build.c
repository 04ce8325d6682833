/* test_stage_build: a model built with only some of its blocks (a pipeline
 * stage) holds exactly the tensors of those blocks, bit-identical to the
 * same blocks of a whole-model build, and nothing else:
 * - for every block of a gpt and an mlp, a part holding that block alone has
 *   the whole model's values for its parameters and NULL for every other
 *   (the whole drawn on two threads, each part on one);
 * - the tied copy (lm_head.weight) on a part without the token embedding
 *   starts equal to the whole model's embedding;
 * - a part's held bytes are the sum of its blocks' parameter bytes (rounded
 *   to the arena's alignment), so stages of a cut add up to the whole;
 * - running a block the part does not hold is refused with a message;
 * - the description (no block held) holds no bytes;
 * - shapes the blocks cannot index (a gpt of 100000 tokens: heads x seq x
 *   seq floats in one tensor) and optimizer settings that are not finite
 *   are refused with a message, before anything is allocated. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"

#include "check.h"
#include "runtime/optimizer.h"

static int check_model(const pt_model_config *c)
{
    pt_model *whole, *desc;
    pt_blas_set_threads(2); /* the whole drawn on two threads, the parts on one */
    REQUIRE(pt_model_create(c, &whole) == PT_OK, "model: %s", pt_last_error());
    pt_blas_set_threads(1);
    REQUIRE(pt_model_describe(c, &desc) == PT_OK, "description: %s", pt_last_error());
    CHECK(pt_model_held_bytes(desc) == 0, "the description holds %zu bytes",
          pt_model_held_bytes(desc));
    int n = pt_model_n_blocks(whole);
    unsigned char *hold = calloc((size_t)n, 1);
    REQUIRE(hold, "allocation");
    size_t sum = 0;
    for (int b = 0; b < n; b++) {
        pt_model *part;
        hold[b] = 1;
        REQUIRE(pt_model_create_part(c, hold, &part) == PT_OK, "part %d: %s", b, pt_last_error());
        hold[b] = 0;
        CHECK(pt_model_holds_block(part, b) && !pt_model_holds_block(part, (b + 1) % n) == (n > 1),
              "block %d: holds_block is wrong", b);
        sum += pt_model_held_bytes(part);
        for (int i = 0; i < pt_model_n_params(part); i++) {
            const pt_param *p = pt_model_param(part, i), *q = pt_model_param(whole, i);
            CHECK(!strcmp(p->name, q->name) && p->numel == q->numel, "parameter %d differs", i);
            if (p->block != b) {
                CHECK(!p->data && !p->grad, "block %d's part holds %s of block %d", b, p->name,
                      p->block);
                continue;
            }
            CHECK(p->data && !memcmp(p->data, q->data, p->numel * sizeof(float)),
                  "block %d: %s differs from the whole model's", b, p->name);
            if (p->tied_to) {
                const pt_param *src = pt_model_find_param(whole, p->tied_to);
                CHECK(!memcmp(p->data, src->data, p->numel * sizeof(float)),
                      "%s does not start equal to %s", p->name, p->tied_to);
            }
        }
        /* a block it does not hold cannot run */
        int other = (b + 1) % n;
        if (n > 1) {
            pt_activations *a;
            REQUIRE(pt_activations_create(part, other, other, 1, &a) == PT_OK, "acts: %s",
                    pt_last_error());
            float dummy[1] = {0};
            int tokens[256] = {0};
            pt_microbatch mb = {.batch = 1, .tokens = tokens, .inputs = dummy, .targets = tokens};
            static float in[1 << 16];
            CHECK(pt_model_forward(part, other, other, &mb, in, a, NULL) == PT_EINVAL &&
                      strstr(pt_last_error(), "not held"),
                  "block %d ran on a part without it: %s", other, pt_last_error());
            pt_activations_destroy(a);
        }
        pt_model_destroy(part);
    }
    CHECK(sum == pt_model_held_bytes(whole), "the parts hold %zu bytes, the whole %zu", sum,
          pt_model_held_bytes(whole));
    free(hold);
    pt_model_destroy(desc);
    pt_model_destroy(whole);
    return 0;
}

static int check_refusals(void)
{
    pt_model_config g = pt_model_config_gpt();
    g.n_layer = 1, g.n_head = 1, g.n_embd = 8, g.seq_len = 100000;
    pt_model *m = NULL;
    CHECK(pt_model_describe(&g, &m) == PT_EINVAL && strstr(pt_last_error(), "100000") && !m,
          "a gpt of 100000 tokens: %s", pt_last_error());
    g.seq_len = 8;
    REQUIRE(pt_model_create(&g, &m) == PT_OK, "model: %s", pt_last_error());
    pt_activations *a = NULL;
    CHECK(pt_activations_create(m, 0, 2, 1 << 28, &a) == PT_EINVAL && !a,
          "a micro-batch of 2^28 samples: %s", pt_last_error());
    float bad[] = {INFINITY, NAN};
    for (int i = 0; i < 2; i++) {
        pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
        oc.lr = bad[i];
        pt_optimizer *o = NULL;
        CHECK(pt_optimizer_create(m, &oc, &o) == PT_EINVAL && !o, "lr %g accepted", oc.lr);
        oc = pt_optim_config_default(PT_OPTIM_SGD);
        oc.grad_clip = bad[i];
        CHECK(pt_optimizer_create(m, &oc, &o) == PT_EINVAL && !o, "grad clip %g accepted",
              oc.grad_clip);
    }
    pt_model_destroy(m);
    return 0;
}

int main(void)
{
    pt_model_config g = pt_model_config_gpt();
    g.n_layer = 3, g.n_head = 2, g.n_embd = 16, g.seq_len = 8, g.vocab = 32, g.seed = 5;
    int widths[] = {8, 16, 12, 4};
    pt_model_config m = pt_model_config_mlp(4, widths);
    m.seed = 9;
    if (check_model(&g) || check_model(&m) || check_refusals() || failures)
        return 1;
    printf("ok\n");
    return 0;
}
