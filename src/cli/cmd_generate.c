/* cmd_generate.c: `pipetrain generate`: loads a gpt checkpoint and prints
 * the prompt followed by sampled text (bytes, for a byte-level model; token
 * ids separated by spaces otherwise). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/model_limits.h"
#include "cli/model_source.h"
#include "train/stage_checkpoint.h"
#include "pipetrain.h"

static void print_token(int token, void *user)
{
    int bytes = *(int *)user;
    if (bytes)
        putchar(token);
    else
        printf(" %d", token);
    fflush(stdout);
}

int cmd_generate(int argc, char **argv)
{
    const char *load = NULL, *prompt = "\n";
    int tokens = 200, heads = 0, stages = 1;
    float temperature = 0.8f;
    uint64_t seed = 1;
    flag flags[] = {
        FLAG("load", FLAG_STRING, &load, "PATH",
             "gpt checkpoint or Hugging Face GPT-2: a folder (config.json and safetensors) or "
             "a .safetensors file (required)"),
        FLAG("prompt", FLAG_STRING, &prompt, "TEXT", "text to continue (default a newline)"),
        FLAG_RANGED("tokens", FLAG_INT, &tokens, "N", "tokens to sample (default 200)",
                    NUM_RANGE(1, 1 << 24)),
        FLAG_RANGED("temperature", FLAG_FLOAT, &temperature, "X",
                    "softmax temperature; 0 takes the most likely token (default 0.8)",
                    NUM_RANGE(0, 100)),
        FLAG("seed", FLAG_U64, &seed, "N", "sampling seed (default 1)"),
        FLAG_RANGED("stages", FLAG_INT, &stages, "P",
                    "run each forward across P pipeline stages, one thread each (default 1)",
                    LIMIT_STAGES),
        FLAG_RANGED("heads", FLAG_INT, &heads, "N",
                    "attention heads, only for a file that does not record them (no "
                    "config.json beside it; default: from the checkpoint)",
                    LIMIT_HEADS),
    };
    int rc = flags_parse("generate", "Samples text from a trained gpt checkpoint.", flags,
                         (int)(sizeof flags / sizeof flags[0]), argc, argv);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (!load) {
        fprintf(stderr, "pipetrain generate: --load FILE is required\n");
        return 2;
    }
    static const char *const sampled_only[] = {"seed", NULL};
    if (temperature == 0 &&
        flags_refuse_given("generate", flags, (int)(sizeof flags / sizeof flags[0]), sampled_only,
                           "with --temperature 0 (the most likely token is taken)"))
        return 2;
    if (!*prompt) {
        fprintf(stderr, "pipetrain generate: --prompt is empty: give at least one byte\n");
        return 2;
    }
    pt_model_config cfg = pt_model_config_gpt();
    pt_pipeline *pipe = NULL;
    cfg.n_head = heads;
    rc =
        model_from_checkpoint("generate", load, flags, (int)(sizeof flags / sizeof flags[0]), &cfg);
    if (rc)
        return rc;
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = stages;
    pc.transport = PT_PIPELINE_THREADS;
    rc = pt_pipeline_create(&cfg, NULL, &pc, &pipe); /* forward passes only */
    if (rc == PT_OK)
        rc = pt_stage_checkpoint_load(pipe, load, NULL, NULL);
    if (rc != PT_OK) {
        fprintf(stderr, "pipetrain generate: %s\n", pt_last_error());
        pt_pipeline_destroy(pipe);
        return rc == PT_EINVAL ? 2 : 1;
    }
    int n_prompt = (int)strlen(prompt);
    int *ids = malloc(sizeof(int) * ((size_t)n_prompt + (size_t)tokens + 1));
    if (!ids) {
        fprintf(stderr, "pipetrain generate: cannot allocate %zu bytes for --tokens %d\n",
                sizeof(int) * ((size_t)n_prompt + (size_t)tokens + 1), tokens);
        pt_pipeline_destroy(pipe);
        return 1;
    }
    for (int i = 0; i < n_prompt; i++)
        ids[i] = (unsigned char)prompt[i];
    int bytes = cfg.vocab == 256;
    if (!bytes)
        fprintf(stderr, "pipetrain generate: vocab %d is not bytes; printing token ids\n",
                cfg.vocab);
    fputs(prompt, stdout);
    rc = pt_generate(pipe, ids, n_prompt, tokens, temperature, seed, ids + n_prompt, print_token,
                     &bytes);
    printf("\n");
    if (rc != PT_OK)
        fprintf(stderr, "pipetrain generate: %s\n", pt_last_error());
    free(ids);
    pt_pipeline_destroy(pipe);
    return rc == PT_OK ? 0 : 1;
}
