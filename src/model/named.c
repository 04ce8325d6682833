/* named.c: GPT shapes of published models by name (pt_model_config_named),
 * for planning a run of a model nobody has built here yet: `pipetrain plan
 * --model NAME`. Each entry is the architecture its source states; nothing
 * else of the model (weights, tokenizer) is meant.
 *
 *   gpt2, gpt2-medium, gpt2-large, gpt2-xl
 *                   OpenAI's GPT-2 (Radford et al. 2019) as Hugging Face's
 *                   configs publish it: layers, heads, width, 1024 positions,
 *                   50,257 tokens
 *   gpt3-175b       Brown et al. 2020, "Language Models are Few-Shot
 *                   Learners", Table 2.1: 96 layers, 96 heads of 128, d_model
 *                   12,288, context 2048 (GPT-2's vocabulary)
 *   megatron-1.7b .. megatron-1t
 *                   Narayanan et al. 2021 (SC21), Table 1: heads, hidden,
 *                   layers; sequence 2048 and vocabulary 51,200 for all
 *                   (the Megatron-LM README of the table)
 */
#include <stdio.h>
#include <string.h>

#include "pipetrain.h"
#include "tensor/error.h"

static const struct {
    const char *name;
    int layers, heads, embd, seq, vocab;
} named[] = {
    {"gpt2", 12, 12, 768, 1024, 50257},
    {"gpt2-medium", 24, 16, 1024, 1024, 50257},
    {"gpt2-large", 36, 20, 1280, 1024, 50257},
    {"gpt2-xl", 48, 25, 1600, 1024, 50257},
    {"gpt3-175b", 96, 96, 12288, 2048, 50257},
    {"megatron-1.7b", 24, 24, 2304, 2048, 51200},
    {"megatron-3.6b", 30, 32, 3072, 2048, 51200},
    {"megatron-7.5b", 36, 32, 4096, 2048, 51200},
    {"megatron-18.4b", 40, 48, 6144, 2048, 51200},
    {"megatron-39.1b", 48, 64, 8192, 2048, 51200},
    {"megatron-76.1b", 60, 80, 10240, 2048, 51200},
    {"megatron-145.6b", 80, 96, 12288, 2048, 51200},
    {"megatron-310.1b", 96, 128, 16384, 2048, 51200},
    {"megatron-529.6b", 105, 128, 20480, 2048, 51200},
    {"megatron-1t", 128, 160, 25600, 2048, 51200},
};
#define N_NAMED (int)(sizeof named / sizeof named[0])

static const char *names[N_NAMED + 1];

const char *const *pt_model_config_names(void)
{
    for (int i = 0; i < N_NAMED; i++)
        names[i] = named[i].name;
    names[N_NAMED] = NULL;
    return names;
}

int pt_model_config_named(const char *name, pt_model_config *out)
{
    for (int i = 0; i < N_NAMED; i++)
        if (!strcmp(name, named[i].name)) {
            *out = pt_model_config_gpt();
            out->n_layer = named[i].layers;
            out->n_head = named[i].heads;
            out->n_embd = named[i].embd;
            out->seq_len = named[i].seq;
            out->vocab = named[i].vocab;
            return PT_OK;
        }
    char list[512] = "";
    for (int i = 0; i < N_NAMED; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 named[i].name);
    return pt_fail(PT_EINVAL, "unknown model '%s' (%s)", name, list);
}
