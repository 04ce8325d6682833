/* cmd_generate.c: `pipetrain generate`: loads a gpt checkpoint and prints
 * the prompt followed by sampled text: with --tokenizer the prompt is
 * encoded and every sampled id printed as the bytes it stands for; without,
 * the model's tokens are bytes (vocab 256), or else printed as ids
 * separated by spaces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/model_limits.h"
#include "cli/model_source.h"
#include "train/stage_checkpoint.h"
#include "pipetrain.h"

typedef struct {
    const pt_tokenizer *tok; /* NULL: bytes, or ids */
    int bytes;
} printer;

static void print_token(int token, void *user)
{
    const printer *p = user;
    size_t len;
    const char *text = p->tok ? pt_tokenizer_token(p->tok, (uint32_t)token, &len) : NULL;
    if (text)
        fwrite(text, 1, len, stdout);
    else if (p->bytes)
        putchar(token);
    else
        printf(" %d", token);
    fflush(stdout);
}

/* The prompt's ids: its bytes, or its tokens. *ids has room for n_new more. */
static int encode_prompt(pt_tokenizer *tok, const char *prompt, int n_new, int **ids, int *n)
{
    pt_token_ids enc = {0};
    size_t len = strlen(prompt);
    if (tok && pt_tokenizer_encode(tok, prompt, len, &enc) != PT_OK) {
        fprintf(stderr, "pipetrain generate: --prompt: %s\n", pt_last_error());
        return 1;
    }
    size_t count = tok ? enc.n : len;
    if (count == 0 || count > (size_t)(1 << 24)) {
        fprintf(stderr, "pipetrain generate: --prompt gives %zu tokens: give 1 to %d\n", count,
                1 << 24);
        free(enc.ids);
        return 2;
    }
    *ids = malloc(sizeof(int) * (count + (size_t)n_new + 1));
    if (!*ids) {
        fprintf(stderr,
                "pipetrain generate: cannot allocate the %zu tokens of --prompt and --tokens\n",
                count + (size_t)n_new);
        free(enc.ids);
        return 1;
    }
    for (size_t i = 0; i < count; i++)
        (*ids)[i] = tok ? (int)enc.ids[i] : (unsigned char)prompt[i];
    *n = (int)count;
    free(enc.ids);
    return 0;
}

int cmd_generate(int argc, char **argv)
{
    const char *load = NULL, *prompt = "\n", *tokenizer = NULL, *precision = "fp32";
    int tokens = 200, heads = 0, stages = 1;
    float temperature = 0.8f;
    uint64_t seed = 1;
    flag flags[] = {
        FLAG("load", FLAG_STRING, &load, "PATH",
             "gpt checkpoint or Hugging Face GPT-2: a folder (config.json and safetensors) or "
             "a .safetensors file (required)"),
        FLAG("prompt", FLAG_STRING, &prompt, "TEXT", "text to continue (default a newline)"),
        FLAG("tokenizer", FLAG_STRING, &tokenizer, "PATH",
             "the BPE tokenizer the model was trained with (tokenizer.json, or a folder holding "
             "it or vocab.json and merges.txt): the prompt is encoded, the output decoded "
             "(default: the model folder's tokenizer if it has one, else tokens are bytes)"),
        FLAG_RANGED("tokens", FLAG_INT, &tokens, "N", "tokens to sample (default 200)",
                    NUM_RANGE(1, 1 << 24)),
        FLAG_RANGED("temperature", FLAG_FLOAT, &temperature, "X",
                    "softmax temperature; 0 takes the most likely token (default 0.8)",
                    NUM_RANGE(0, 100)),
        FLAG("seed", FLAG_U64, &seed, "N", "sampling seed (default 1)"),
        FLAG_PRECISION(precision),
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
    if (!rc)
        rc = model_precision("generate", precision, &cfg);
    if (rc)
        return rc;
    pt_tokenizer *tok = NULL;
    int *ids = NULL, n_prompt = 0;
    char folder_tokenizer[4096];
    if (!tokenizer)
        tokenizer = model_tokenizer(load, folder_tokenizer, sizeof folder_tokenizer);
    if (tokenizer && pt_tokenizer_load(tokenizer, &tok) != PT_OK) {
        fprintf(stderr, "pipetrain generate: tokenizer: %s\n", pt_last_error());
        return 1;
    }
    if (tok && pt_tokenizer_vocab_size(tok) != cfg.vocab) {
        fprintf(stderr,
                "pipetrain generate: the tokenizer %s has %d tokens but the model %s has a "
                "vocabulary of %d\n",
                tokenizer, pt_tokenizer_vocab_size(tok), load, cfg.vocab);
        rc = 2;
    } else {
        rc = encode_prompt(tok, prompt, tokens, &ids, &n_prompt);
    }
    if (rc) {
        pt_tokenizer_destroy(tok);
        return rc;
    }
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = stages;
    pc.transport = PT_PIPELINE_THREADS;
    rc = pt_pipeline_create(&cfg, NULL, &pc, &pipe); /* forward passes only */
    if (rc == PT_OK)
        rc = pt_stage_checkpoint_load(pipe, load, NULL, NULL);
    if (rc != PT_OK) {
        fprintf(stderr, "pipetrain generate: %s\n", pt_last_error());
        free(ids);
        pt_tokenizer_destroy(tok);
        pt_pipeline_destroy(pipe);
        return rc == PT_EINVAL ? 2 : 1;
    }
    printer p = {.tok = tok, .bytes = cfg.vocab == 256};
    if (!tok && !p.bytes)
        fprintf(stderr,
                "pipetrain generate: vocab %d is not bytes; printing token ids (--tokenizer "
                "decodes them)\n",
                cfg.vocab);
    fputs(prompt, stdout);
    rc = pt_generate(pipe, ids, n_prompt, tokens, temperature, seed, ids + n_prompt, print_token,
                     &p);
    printf("\n");
    if (rc != PT_OK)
        fprintf(stderr, "pipetrain generate: %s\n", pt_last_error());
    free(ids);
    pt_tokenizer_destroy(tok);
    pt_pipeline_destroy(pipe);
    return rc == PT_OK ? 0 : 1;
}
