/* cmd_generate.c: `pipetrain generate`: loads a gpt checkpoint and prints
 * the prompt followed by sampled text (bytes, for a byte-level model; token
 * ids separated by spaces otherwise). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
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
        {"load", FLAG_STRING, &load, "FILE", "gpt checkpoint (safetensors; required)"},
        {"prompt", FLAG_STRING, &prompt, "TEXT", "text to continue (default a newline)"},
        {"tokens", FLAG_INT, &tokens, "N", "tokens to sample (default 200)"},
        {"temperature", FLAG_FLOAT, &temperature, "X",
         "softmax temperature; 0 takes the most likely token (default 0.8)"},
        {"seed", FLAG_U64, &seed, "N", "sampling seed (default 1)"},
        {"stages", FLAG_INT, &stages, "P",
         "run each forward across P pipeline stages, one thread each (default 1)"},
        {"heads", FLAG_INT, &heads, "N",
         "attention heads, for a checkpoint that does not record them (default: from the file)"},
    };
    int rc = flags_parse("generate", "Samples text from a trained gpt checkpoint.", flags,
                         (int)(sizeof flags / sizeof flags[0]), argc, argv);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (!load) {
        fprintf(stderr, "pipetrain generate: --load FILE is required\n");
        return 2;
    }
    if (tokens < 0 || !*prompt) {
        fprintf(stderr, "pipetrain generate: --tokens must be >= 0 and --prompt not empty\n");
        return 2;
    }
    pt_model_config cfg;
    pt_pipeline *pipe = NULL;
    rc = pt_checkpoint_read_config(load, heads ? heads : 1, &cfg);
    if (rc == PT_OK && cfg.kind != PT_MODEL_GPT)
        rc = -1;
    if (rc == PT_OK) {
        pt_pipeline_config pc = pt_pipeline_config_default();
        pc.stages = stages;
        pc.transport = PT_PIPELINE_THREADS;
        rc = pt_pipeline_create(&cfg, NULL, &pc, &pipe); /* forward passes only */
    }
    if (rc == PT_OK)
        rc = pt_stage_checkpoint_load(pipe, load, NULL, NULL);
    if (rc != PT_OK) {
        fprintf(stderr, "pipetrain generate: %s\n",
                rc == -1 ? "the checkpoint holds an mlp; only a gpt generates text"
                         : pt_last_error());
        pt_pipeline_destroy(pipe);
        return rc == PT_EINVAL ? 2 : 1;
    }
    int n_prompt = (int)strlen(prompt);
    int *ids = malloc(sizeof(int) * (size_t)(n_prompt + tokens + 1));
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
