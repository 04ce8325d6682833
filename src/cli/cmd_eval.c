/* cmd_eval.c: `pipetrain eval`: the mean loss of a gpt checkpoint (or a
 * Hugging Face GPT-2, or a spec that reads tokens and scores every next
 * one) on text or token data, over fixed batches: row b of
 * batch k starts at token (k B + b) T, as validation reads them, so the
 * figure compares across runs and programs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/model_limits.h"
#include "cli/model_source.h"
#include "io/text_data.h"
#include "text/text_tokens.h"
#include "tensor/error.h"
#include "train/stage_checkpoint.h"
#include "pipetrain.h"

static int load_tokens(int tokens, const flag_list *data, const pt_model_config *cfg,
                       const char *tokenizer, pt_token_data *d)
{
    if (tokens && data->n > 1)
        return pt_fail(PT_EINVAL, "token data is one file (got %d)", data->n);
    if (tokens)
        return pt_token_data_load_files(data->items[0], NULL, cfg->vocab, 0.0, d);
    if (tokenizer)
        return pt_text_data_encode_path(data->items, data->n, 0.0, tokenizer, cfg->vocab, d);
    if (cfg->vocab != 256)
        return pt_fail(PT_EINVAL, "text is read as bytes: the gpt's vocab must be 256 (got %d)",
                       cfg->vocab);
    return pt_text_data_load(data->items, data->n, 0.0, d);
}

/* A spec is evaluated as a gpt is when it reads T tokens and is scored on
 * the next token of each: its T and vocabulary into cfg's seq_len, vocab. */
static int spec_as_language_model(pt_model_config *cfg)
{
    pt_model *m;
    int rc = pt_model_describe(cfg, &m);
    if (rc != PT_OK)
        return rc;
    pt_model_io io = pt_model_get_io(m);
    pt_model_destroy(m);
    if (!io.tokens || io.labels != io.tokens || io.classes != io.vocab)
        return pt_fail(PT_EINVAL,
                       "eval scores next tokens: the spec must read tokens and end in a loss over "
                       "the vocabulary at every position (it reads %d tokens, %d inputs and "
                       "compares %d labels of %d classes)",
                       io.tokens, io.inputs, io.labels, io.classes);
    cfg->seq_len = io.tokens;
    cfg->vocab = io.vocab;
    return PT_OK;
}

/* Mean loss over the first `batches` fixed batches (0: all there are). */
static int evaluate(pt_pipeline *pipe, const pt_token_data *d, int B, int T, long batches,
                    double *loss, long *used)
{
    size_t avail = pt_eval_batch_count(d->n_train, B, T);
    if (avail < 1)
        return pt_fail(PT_EINVAL, "the data holds %zu tokens: not one batch of %d x (%d + 1)",
                       d->n_train, B, T);
    *used = batches && (size_t)batches < avail ? batches : (long)avail;
    int *tokens = malloc(sizeof(int) * (size_t)B * (size_t)T);
    int *targets = malloc(sizeof(int) * (size_t)B * (size_t)T);
    int rc = tokens && targets ? PT_OK : pt_fail(PT_ENOMEM, "cannot allocate a batch");
    double sum = 0;
    for (long k = 0; rc == PT_OK && k < *used; k++) {
        float l;
        pt_eval_batch(d->train, d->n_train, B, T, (size_t)k, tokens, targets);
        pt_microbatch mb = {.batch = B, .tokens = tokens, .targets = targets};
        if ((rc = pt_pipeline_eval(pipe, &mb, &l)) == PT_OK)
            sum += l;
    }
    free(tokens), free(targets);
    *loss = sum / (double)*used;
    return rc;
}

int cmd_eval(int argc, char **argv)
{
    const char *load = NULL, *format = "auto", *tokenizer = NULL, *precision = "fp32";
    flag_list data = {.n = 0};
    int batch = 8, stages = 1, microbatches = 1;
    long batches = 0;
    pt_model_config cfg = pt_model_config_gpt();
    cfg.n_head = 0;
    flag flags[] = {
        FLAG("load", FLAG_STRING, &load, "PATH",
             "gpt checkpoint or Hugging Face GPT-2: a folder (config.json and safetensors) or "
             "a .safetensors file; or a spec's checkpoint scoring next tokens (required)"),
        FLAG("data", FLAG_LIST, &data, "PATH",
             "text file or directory, or one token file (*.bin); repeatable (required)"),
        FLAG("data-format", FLAG_STRING, &format, "auto|text|tokens",
             "how to read --data (default auto: *.bin tokens, else text)"),
        FLAG("tokenizer", FLAG_STRING, &tokenizer, "PATH",
             "encode the text with this BPE tokenizer (default: the model folder's tokenizer if "
             "it has one, else bytes)"),
        FLAG_RANGED("batch", FLAG_INT, &batch, "B", "sequences per batch (default 8)", LIMIT_BATCH),
        FLAG_RANGED("batches", FLAG_LONG, &batches, "K",
                    "batches to average; 0: every whole batch the data holds (default 0)",
                    LIMIT_COUNT0),
        FLAG_RANGED("seq", FLAG_INT, &cfg.seq_len, "N",
                    "tokens per sequence, at most the model's n_positions (default: the "
                    "checkpoint's context)",
                    LIMIT_SEQ),
        FLAG_RANGED("heads", FLAG_INT, &cfg.n_head, "N",
                    "attention heads, only for a file that does not record them (default: from "
                    "the checkpoint)",
                    LIMIT_HEADS),
        FLAG_RANGED("stages", FLAG_INT, &stages, "P",
                    "run the forward across P pipeline stages, one thread each (default 1)",
                    LIMIT_STAGES),
        FLAG_RANGED("microbatches", FLAG_INT, &microbatches, "M",
                    "cut each batch into M micro-batches; M must divide B (default 1)",
                    LIMIT_MICROBATCHES),
        FLAG_PRECISION(precision),
    };
    int n = (int)(sizeof flags / sizeof flags[0]);
    int rc = flags_parse("eval",
                         "Prints a gpt's mean loss (nats per token) on text or token data, over "
                         "fixed batches read from the start of the data.",
                         flags, n, argc, argv);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (!load || data.n == 0) {
        fprintf(stderr, "pipetrain eval: --load PATH and --data PATH are required\n");
        return 2;
    }
    if (strcmp(format, "auto") && strcmp(format, "text") && strcmp(format, "tokens")) {
        fprintf(stderr, "pipetrain eval: --data-format '%s': expected auto, text or tokens\n",
                format);
        return 2;
    }
    if (batch % microbatches) {
        fprintf(stderr, "pipetrain eval: --microbatches %d does not divide --batch %d\n",
                microbatches, batch);
        return 2;
    }
    if ((rc = model_from_checkpoint("eval", load, flags, n, &cfg)) != 0 ||
        (rc = model_precision("eval", precision, &cfg)) != 0)
        return rc;
    if (cfg.kind == PT_MODEL_SPEC && spec_as_language_model(&cfg) != PT_OK) {
        fprintf(stderr, "pipetrain eval: %s: %s\n", load, pt_last_error());
        return 2;
    }
    if (model_limits_shape("eval", &cfg, batch))
        return 2;
    pt_token_data d = {0};
    pt_pipeline *pipe = NULL;
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = stages;
    pc.transport = PT_PIPELINE_THREADS;
    pc.microbatches = microbatches;
    pc.micro_batch_size = batch / microbatches;
    double loss = 0;
    long used = 0;
    int tokens = !strcmp(format, "tokens") ||
                 (!strcmp(format, "auto") && pt_data_is_token_file(data.items, data.n));
    if (tokens && tokenizer) {
        fprintf(stderr, "pipetrain eval: --tokenizer does nothing for token data: it holds ids\n");
        return 2;
    }
    char folder_tokenizer[4096];
    if (!tokenizer && !tokens)
        tokenizer = model_tokenizer(load, folder_tokenizer, sizeof folder_tokenizer);
    rc = load_tokens(tokens, &data, &cfg, tokenizer, &d);
    if (rc == PT_OK)
        rc = pt_pipeline_create(&cfg, NULL, &pc, &pipe);
    if (rc == PT_OK)
        rc = pt_stage_checkpoint_load(pipe, load, NULL, NULL);
    if (rc == PT_OK)
        rc = evaluate(pipe, &d, batch, cfg.seq_len, batches, &loss, &used);
    if (rc == PT_OK)
        printf("loss %.9g over %ld batches of %d x %d tokens\n", loss, used, batch, cfg.seq_len);
    else
        fprintf(stderr, "pipetrain eval: %s\n", pt_last_error());
    pt_pipeline_destroy(pipe);
    pt_token_data_free(&d);
    return rc == PT_OK ? 0 : rc == PT_EINVAL ? 2 : 1;
}
