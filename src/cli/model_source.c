/* model_source.c: a command's model from a checkpoint (model_source.h). */
#include "cli/model_source.h"

#include <string.h>
#include <sys/stat.h>

#include "io/checkpoint.h"

static int contradicts(const char *cmd, const flag *flags, int n, const char *name, int flag_value,
                       int file_value, const char *field, const char *path)
{
    const char *given = flags_given(flags, n, name);
    if (!given || flag_value == file_value)
        return 0;
    fprintf(stderr,
            "pipetrain %s: --%s %s contradicts %s, whose %s is %d (leave the flag out: the "
            "checkpoint sets it)\n",
            cmd, name, given, path, field, file_value);
    return 1;
}

int model_from_checkpoint(const char *cmd, const char *path, const flag *flags, int n,
                          pt_model_config *cfg)
{
    pt_model_config file;
    int heads = flags_given(flags, n, "heads") ? cfg->n_head : 0;
    if (pt_checkpoint_read_config(path, heads, &file) != PT_OK) {
        fprintf(stderr, "pipetrain %s: %s\n", cmd, pt_last_error());
        return 1;
    }
    static const char *const kinds[] = {"a gpt", "an mlp", "a spec"};
    static const char *const gpt_shape[] = {"layers", "heads", "embd", "vocab", "seq", NULL};
    /* a spec gives every shape: it stands in for the default gpt when no
     * gpt flag says otherwise */
    int spec_for_gpt = file.kind == PT_MODEL_SPEC && cfg->kind == PT_MODEL_GPT;
    for (int i = 0; spec_for_gpt && gpt_shape[i]; i++)
        if (flags_given(flags, n, gpt_shape[i])) {
            fprintf(stderr,
                    "pipetrain %s: %s holds a spec, whose layers give every shape: drop "
                    "--%s\n",
                    cmd, path, gpt_shape[i]);
            return 2;
        }
    if (file.kind != cfg->kind && !spec_for_gpt) {
        fprintf(stderr, "pipetrain %s: %s holds %s, not %s\n", cmd, path, kinds[file.kind],
                kinds[cfg->kind]);
        return 2;
    }
    file.seed = cfg->seed;
    if (file.kind == PT_MODEL_SPEC) {
        *cfg = file;
        return 0;
    }
    if (file.kind == PT_MODEL_MLP) {
        int same = file.n_widths == cfg->n_widths &&
                   !memcmp(file.widths, cfg->widths, sizeof(int) * (size_t)file.n_widths);
        if (flags_given(flags, n, "widths") && !same) {
            fprintf(stderr, "pipetrain %s: --widths %s contradicts %s's widths\n", cmd,
                    flags_given(flags, n, "widths"), path);
            return 2;
        }
        *cfg = file;
        return 0;
    }
    if (file.n_head < 1) {
        fprintf(stderr,
                "pipetrain %s: %s does not record its attention heads (no config.json beside "
                "it): give --heads N\n",
                cmd, path);
        return 2;
    }
    if (contradicts(cmd, flags, n, "layers", cfg->n_layer, file.n_layer, "n_layer", path) ||
        contradicts(cmd, flags, n, "heads", cfg->n_head, file.n_head, "n_head", path) ||
        contradicts(cmd, flags, n, "embd", cfg->n_embd, file.n_embd, "n_embd", path) ||
        contradicts(cmd, flags, n, "vocab", cfg->vocab, file.vocab, "vocab_size", path))
        return 2;
    int positions = pt_gpt_positions(&file);
    if (flags_given(flags, n, "seq")) {
        if (cfg->seq_len > positions) {
            fprintf(stderr,
                    "pipetrain %s: --seq %d is longer than %s's n_positions %d (the positions "
                    "it has embeddings for)\n",
                    cmd, cfg->seq_len, path, positions);
            return 2;
        }
        file.seq_len = cfg->seq_len;
    }
    file.n_positions = positions;
    *cfg = file;
    return 0;
}

void model_note_dropout(const char *cmd, const char *path)
{
    const char *field = NULL;
    double p = pt_checkpoint_dropout(path, &field);
    if (p > 0)
        fprintf(stderr,
                "pipetrain %s: note: %s asks for dropout (%s %g); pipetrain trains without "
                "dropout\n",
                cmd, path, field, p);
}

const char *model_tokenizer(const char *path, char *buf, size_t n)
{
    struct stat sb;
    const char *slash = strrchr(path, '/');
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(buf, n, "%s", path);
    else if (slash)
        snprintf(buf, n, "%.*s", (int)(slash - path), path);
    else
        snprintf(buf, n, ".");
    return pt_tokenizer_find(buf) ? buf : NULL;
}

int model_precision(const char *cmd, const char *precision, pt_model_config *cfg)
{
    if (pt_precision_parse(precision, &cfg->precision) == PT_OK)
        return 0;
    fprintf(stderr, "pipetrain %s: %s\n", cmd, pt_last_error());
    return 2;
}
