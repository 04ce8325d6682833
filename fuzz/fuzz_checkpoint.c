/* fuzz_checkpoint: checkpoint sets (src/io/checkpoint_source.c,
 * checkpoint_load.c): a folder of model.safetensors.index.json, its shards
 * and trainer_state.json. The input is cut at each line "@@" into up to
 * three files of one folder: the weights index, one shard (written under
 * both names a two-shard index gives, model-00001-of-00002.safetensors and
 * model-00002-of-00002.safetensors) and trainer_state.json; a part left out
 * is no file. The folder goes to pt_checkpoint_read_config(), then to
 * pt_checkpoint_load() into a part model (every other block held) with an
 * AdamW optimizer and a training state (a resume, allowed to start the
 * optimizer afresh) and without (weights only). The model takes the config
 * the set records when that is small, else a fixed small gpt, so both
 * matching and mismatching configs reach the index and shard checks. */
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "pipetrain.h"

#include "harness.h"

#define SEPARATOR "\n@@\n"

static const char *const names[] = {"model.safetensors.index.json",
                                    "model-00001-of-00002.safetensors", "trainer_state.json"};

static int small(const pt_model_config *c)
{
    if (c->kind == PT_MODEL_MLP) {
        for (int i = 0; i < c->n_widths; i++)
            if (c->widths[i] > 64)
                return 0;
        return 1;
    }
    return c->n_layer <= 4 && c->n_embd <= 32 && c->seq_len <= 16 && c->vocab <= 64;
}

static int same_config(const pt_model_config *a, const pt_model_config *b)
{
    int same = a->kind == b->kind && a->n_layer == b->n_layer && a->n_head == b->n_head &&
               a->n_embd == b->n_embd && a->seq_len == b->seq_len && a->vocab == b->vocab &&
               a->n_widths == b->n_widths && a->seed == b->seed;
    for (int i = 0; same && i < a->n_widths && i < PT_MLP_MAX_WIDTHS; i++)
        same = a->widths[i] == b->widths[i];
    return same;
}

/* The part model and optimizer of the last config, kept from one input to
 * the next: making a model costs more than reading a checkpoint, and a
 * load either succeeds or changes nothing. */
static pt_model *part;
static pt_optimizer *part_opt;
static pt_model_config part_cfg;

static int make_part(const pt_model_config *cfg)
{
    if (part && same_config(cfg, &part_cfg))
        return PT_OK;
    pt_optimizer_destroy(part_opt);
    pt_model_destroy(part);
    part = NULL, part_opt = NULL;
    unsigned char hold[64];
    pt_model *desc = NULL;
    if (pt_model_describe(cfg, &desc) != PT_OK)
        return PT_EINVAL;
    int blocks = pt_model_n_blocks(desc);
    pt_model_destroy(desc);
    if (blocks > (int)sizeof hold)
        return PT_EINVAL;
    for (int b = 0; b < blocks; b++)
        hold[b] = b % 2 == 0;
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    if (pt_model_create_part(cfg, hold, &part) != PT_OK ||
        pt_optimizer_create(part, &oc, &part_opt) != PT_OK) {
        pt_model_destroy(part);
        part = NULL;
        return PT_EINVAL;
    }
    part_cfg = *cfg;
    return PT_OK;
}

static void load_into_part(const char *dir, const pt_model_config *cfg)
{
    if (make_part(cfg) != PT_OK)
        return;
    pt_train_state state = {.step = 0};
    pt_checkpoint_load_options o = {.allow_fresh_optimizer = 1};
    if (pt_checkpoint_load_with(dir, part, part_opt, &state, &o) == PT_OK)
        FUZZ_REQUIRE(state.step >= 0, "loaded step %ld", state.step);
    pt_checkpoint_load(dir, part, NULL, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096], second[4096];
    const char *p = (const char *)data, *end = p + size;
    for (int i = 0; i < 3; i++)
        fuzz_remove(names[i]);
    fuzz_remove("model-00002-of-00002.safetensors");
    for (int i = 0; i < 3 && p <= end; i++) {
        const char *cut = memmem(p, (size_t)(end - p), SEPARATOR, strlen(SEPARATOR));
        size_t n = cut ? (size_t)(cut - p) : (size_t)(end - p);
        fuzz_write(names[i], p, n, path, sizeof path);
        if (i == 1) {
            snprintf(second, sizeof second, "%s/model-00002-of-00002.safetensors", fuzz_dir());
            FUZZ_REQUIRE(link(path, second) == 0, "link %s", second);
        }
        p = cut ? cut + strlen(SEPARATOR) : end + 1;
    }
    const char *dir = fuzz_dir();
    pt_model_config cfg;
    if (pt_checkpoint_read_config(dir, 2, &cfg) != PT_OK || !small(&cfg)) {
        cfg = pt_model_config_gpt();
        cfg.n_layer = 2, cfg.n_head = 1, cfg.n_embd = 4, cfg.seq_len = 4, cfg.vocab = 8;
    }
    load_into_part(dir, &cfg);
    return 0;
}
