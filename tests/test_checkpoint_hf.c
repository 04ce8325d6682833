/* test_checkpoint_hf: a GPT-2 checkpoint written by another program with
 * Hugging Face's names and layout (tests/hf_gpt2_writer.py, Python standard
 * library only) loads into the right tensors: its config is read from the
 * shapes, every parameter holds the values the writer put there, the tied
 * lm_head.weight equals the embedding, and the mask buffers are ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "pipetrain.h"

static float expected(int k, size_t j)
{
    return (float)(((long)k * 7919 + (long)j * 104729) % 2001 - 1000) / 1000.0f;
}

int main(void)
{
    const char *data = getenv("PT_TEST_DATA");
    if (system("python3 -c 'import json, struct' 2>/dev/null") != 0) {
        printf("skipped: python3 is not installed\n");
        return 77;
    }
    char dir[] = "/tmp/pt_hf_XXXXXX", path[256], cmd[1024];
    if (!data || !mkdtemp(dir))
        return printf("PT_TEST_DATA is not set\n"), 1;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(cmd, sizeof cmd, "python3 %s/../hf_gpt2_writer.py %s 2 16 8 40", data, path);
    if (system(cmd) != 0)
        return printf("FAIL: %s\n", cmd), 1;

    pt_model_config c;
    if (pt_checkpoint_read_config(path, 4, &c) != PT_OK)
        return printf("FAIL: %s\n", pt_last_error()), 1;
    printf("config from shapes: layers %d embd %d seq %d vocab %d heads %d\n", c.n_layer, c.n_embd,
           c.seq_len, c.vocab, c.n_head);
    if (c.kind != PT_MODEL_GPT || c.n_layer != 2 || c.n_embd != 16 || c.seq_len != 8 ||
        c.vocab != 40 || c.n_head != 4)
        return printf("FAIL: wrong config\n"), 1;
    pt_model *m;
    if (pt_model_create(&c, &m) != PT_OK || pt_checkpoint_load(path, m, NULL, NULL) != PT_OK)
        return printf("FAIL: %s\n", pt_last_error()), 1;

    /* the writer's order: wte, wpe, then per layer 13 tensors (one is the
     * mask buffer, index 2 within the layer), then ln_f weight and bias */
    int failures = 0, k = 0, checked = 0;
    const char *layer_names[] = {"ln_1.weight",        "ln_1.bias",        NULL,
                                 "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                                 "attn.c_proj.bias",   "ln_2.weight",      "ln_2.bias",
                                 "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",
                                 "mlp.c_proj.bias"};
    char name[128];
    for (int step = 0; step < 2 + 2 * 13 + 2; step++, k++) {
        if (step == 0)
            snprintf(name, sizeof name, "transformer.wte.weight");
        else if (step == 1)
            snprintf(name, sizeof name, "transformer.wpe.weight");
        else if (step < 2 + 2 * 13) {
            const char *n = layer_names[(step - 2) % 13];
            if (!n)
                continue;
            snprintf(name, sizeof name, "transformer.h.%d.%s", (step - 2) / 13, n);
        } else
            snprintf(name, sizeof name, "transformer.ln_f.%s", step == 28 ? "weight" : "bias");
        const pt_param *p = pt_model_find_param(m, name);
        if (!p) {
            printf("FAIL: no parameter %s\n", name);
            failures++;
            continue;
        }
        for (size_t j = 0; j < p->numel; j++)
            if (p->data[j] != expected(k, j)) {
                printf("FAIL: %s[%zu] = %g, expected %g\n", name, j, p->data[j], expected(k, j));
                failures++;
                break;
            }
        checked++;
    }
    const pt_param *wte = pt_model_find_param(m, "transformer.wte.weight");
    const pt_param *head = pt_model_find_param(m, "lm_head.weight");
    if (memcmp(wte->data, head->data, wte->numel * sizeof(float))) {
        printf("FAIL: lm_head.weight is not the loaded embedding\n");
        failures++;
    }
    printf("%d tensors hold the writer's values; lm_head tied: %s\n", checked,
           failures ? "see above" : "yes");
    pt_model_destroy(m);
    unlink(path);
    rmdir(dir);
    return failures || checked != 28 ? 1 : 0;
}
