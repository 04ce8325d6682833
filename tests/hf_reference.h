/* hf_reference.h: what the tests that hold pipetrain's gpt to the numpy
 * GPT-2 of tests/hf_gpt2.py share (test_gpt_variants,
 * test_train_step_reference):
 *   hf_find_python     the test environment's interpreter
 *                      (scripts/install-test-python.sh), or 1 when it
 *                      cannot be had (the test then skips, 77);
 *   hf_write_gpt2      a model config under GPT2Config's names, as fields
 *                      of a JSON object the caller opened;
 *   hf_write_rows      a key of rows of integers (tokens, targets);
 *   hf_perturb         every parameter moved off its initial value by
 *                      normal noise (std `spread` for weight matrices,
 *                      biases and LayerNorms, 0.05 for the embeddings),
 *                      each from a stream named after it (a tied copy from
 *                      its source's, so the copies stay equal; parameters a
 *                      pipeline stage does not hold are left alone);
 *   hf_run             runs hf_gpt2.py with arguments and keeps the last
 *                      line it printed. */
#ifndef PT_TESTS_HF_REFERENCE_H
#define PT_TESTS_HF_REFERENCE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "tensor/rng.h"

static int hf_find_python(char *py, size_t n)
{
    const char *src = getenv("PT_SOURCE_DIR");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/install-test-python.sh'", src ? src : ".");
    FILE *f = popen(cmd, "r");
    if (!f)
        return 1;
    if (!fgets(py, (int)n, f))
        py[0] = '\0';
    int rc = pclose(f);
    py[strcspn(py, "\n")] = '\0';
    return rc != 0 || !py[0];
}

static const char *hf_activation_name(pt_activation a)
{
    static const char *const names[] = {"gelu_new", "gelu", "relu", "silu"};
    return names[a];
}

/* GPT2Config's fields of c, each line ending in a comma */
static void hf_write_gpt2(FILE *f, const pt_model_config *c)
{
    fprintf(f, "  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_embd\": %d,\n", c->n_layer, c->n_head,
            c->n_embd);
    fprintf(f, "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n", c->vocab,
            c->n_positions ? c->n_positions : c->seq_len);
    if (c->n_inner)
        fprintf(f, "  \"n_inner\": %d,\n", c->n_inner);
    else
        fprintf(f, "  \"n_inner\": null,\n");
    fprintf(f, "  \"activation_function\": \"%s\",\n", hf_activation_name(c->activation));
    fprintf(f, "  \"layer_norm_epsilon\": %.9g,\n", (double)c->layer_norm_epsilon);
    fprintf(f, "  \"scale_attn_weights\": %s,\n", c->scale_attn_weights ? "true" : "false");
    fprintf(f, "  \"scale_attn_by_inverse_layer_idx\": %s,\n",
            c->scale_attn_by_inverse_layer_idx ? "true" : "false");
    fprintf(f, "  \"tie_word_embeddings\": %s,\n", c->tie_word_embeddings ? "true" : "false");
    if (c->precision == PT_PRECISION_BF16)
        fprintf(f, "  \"pipetrain_precision\": \"bf16\",\n");
}

/* "key": [[x row 0], [x row 1], ...] with rows of cols integers, no comma */
static void hf_write_rows(FILE *f, const char *key, const int *x, int rows, int cols)
{
    fprintf(f, "  \"%s\": [", key);
    for (int b = 0; b < rows; b++) {
        fprintf(f, "%s[", b ? ", " : "");
        for (int t = 0; t < cols; t++)
            fprintf(f, "%s%d", t ? ", " : "", x[b * cols + t]);
        fprintf(f, "]");
    }
    fprintf(f, "]");
}

/* Small embedding rows keep the first LayerNorm's input variance (about
 * 5e-3) near epsilon, so that 1e-3 and 1e-5 give different losses. */
static float hf_noise_std(const char *name, float spread)
{
    return strstr(name, ".wte.") || strstr(name, ".wpe.") ? 0.05f : spread;
}

static void hf_perturb(pt_model *m, float spread)
{
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *p = pt_model_param(m, i);
        if (!p->data)
            continue;
        const char *stream = p->tied_to ? p->tied_to : p->name;
        pt_rng r;
        pt_rng_seed_named(&r, 1234, stream);
        float *noise = malloc(sizeof(float) * p->numel);
        pt_rng_fill_normal(&r, noise, p->numel, hf_noise_std(stream, spread));
        for (size_t j = 0; j < p->numel; j++)
            p->data[j] += noise[j];
        free(noise);
    }
    pt_model_params_changed(m);
}

/* `<py> tests/hf_gpt2.py <args>`: 0 with its last line of output in line,
 * 1 (with a message) when it fails. */
static int hf_run(const char *py, const char *args, char *line, size_t n)
{
    char cmd[8192], buf[512];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/hf_gpt2.py' %s", py, getenv("PT_SOURCE_DIR"), args);
    FILE *f = popen(cmd, "r");
    if (!f) {
        fprintf(stderr, "cannot run %s\n", cmd);
        return 1;
    }
    line[0] = '\0';
    while (fgets(buf, sizeof buf, f))
        snprintf(line, n, "%s", buf);
    int rc = pclose(f);
    if (rc != 0)
        fprintf(stderr, "%s exited with %d\n", cmd, rc);
    return rc != 0;
}

#endif
