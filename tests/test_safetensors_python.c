/* test_safetensors_python: files from and for another program. A Python
 * script using only json and struct (tests/test_safetensors_python.py) writes
 * a GPT-2 checkpoint under Hugging Face's names and layout (space-padded
 * header, __metadata__, header keys in another order than the data); the
 * reader must find every tensor with its exact values. Then the script
 * checks a file pipetrain wrote. Skipped (77) without python3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/safetensors.h"

#include "check.h"

/* Must match TENSORS in test_safetensors_python.py. */
static const struct {
    const char *name;
    int ndim, shape[4];
} tensors[] = {
    {"transformer.wte.weight", 2, {8, 4}},
    {"transformer.wpe.weight", 2, {4, 4}},
    {"transformer.h.0.ln_1.weight", 1, {4}},
    {"transformer.h.0.ln_1.bias", 1, {4}},
    {"transformer.h.0.attn.c_attn.weight", 2, {4, 12}},
    {"transformer.h.0.attn.c_attn.bias", 1, {12}},
    {"transformer.h.0.attn.bias", 4, {1, 1, 4, 4}},
    {"transformer.ln_f.weight", 1, {4}},
};
enum { N_TENSORS = sizeof tensors / sizeof tensors[0] };

static float value(int k, int i)
{
    float v = (float)((k * 1000 + i) * 0.125);
    return i % 2 ? -v : v;
}

static int numel(int k)
{
    int n = 1;
    for (int d = 0; d < tensors[k].ndim; d++)
        n *= tensors[k].shape[d];
    return n;
}

int main(void)
{
    if (system("python3 -c 'import json, struct' >/dev/null 2>&1") != 0) {
        printf("python3 not found: skipping\n");
        return 77;
    }
    const char *data = getenv("PT_TEST_DATA");
    if (!data) {
        fprintf(stderr, "PT_TEST_DATA is not set (run through ctest)\n");
        return 1;
    }
    char script[1024], dir[] = "/tmp/pt_st_python_XXXXXX", from_py[256], from_c[256], cmd[2048];
    snprintf(script, sizeof script, "%s/../test_safetensors_python.py", data);
    if (access(script, R_OK) != 0 || !mkdtemp(dir)) {
        fprintf(stderr, "%s: missing, or no temporary directory\n", script);
        return 1;
    }
    snprintf(from_py, sizeof from_py, "%s/gpt2_hf.safetensors", dir);
    snprintf(from_c, sizeof from_c, "%s/gpt2_pipetrain.safetensors", dir);

    /* Python writes, we read. */
    snprintf(cmd, sizeof cmd, "python3 '%s' write '%s'", script, from_py);
    int rc = system(cmd);
    CHECK(rc == 0, "%s exited with %d", cmd, rc);
    pt_safetensors *st;
    int r = pt_safetensors_open(from_py, &st);
    CHECK(r == PT_OK, "open: %s", pt_last_error());
    if (r == PT_OK) {
        CHECK(pt_safetensors_count(st) == N_TENSORS, "%d tensors", pt_safetensors_count(st));
        const char *fmt = pt_safetensors_meta(st, "format");
        CHECK(fmt && strcmp(fmt, "pt") == 0, "metadata format = %s", fmt ? fmt : "(none)");
        for (int k = 0; k < N_TENSORS; k++) {
            int n = numel(k);
            float *got = malloc((size_t)n * sizeof *got);
            r = pt_safetensors_read(st, tensors[k].name, PT_DT_F32, tensors[k].ndim,
                                    tensors[k].shape, got);
            CHECK(r == PT_OK, "read: %s", pt_last_error());
            for (int i = 0; r == PT_OK && i < n; i++)
                if (got[i] != value(k, i)) {
                    CHECK(0, "'%s'[%d] = %g, expected %g", tensors[k].name, i, got[i], value(k, i));
                    break;
                }
            free(got);
        }
        pt_safetensors_close(st);
    }

    /* We write, Python checks. */
    float *buf[N_TENSORS];
    pt_st_tensor t[N_TENSORS];
    for (int k = 0; k < N_TENSORS; k++) {
        buf[k] = malloc((size_t)numel(k) * sizeof(float));
        for (int i = 0; i < numel(k); i++)
            buf[k][i] = value(k, i);
        t[k] = (pt_st_tensor){tensors[k].name, PT_DT_F32, tensors[k].ndim, {0}, buf[k]};
        memcpy(t[k].shape, tensors[k].shape, sizeof tensors[k].shape);
    }
    pt_st_meta meta[2] = {{"format", "pt"}, {"written_by", "pipetrain"}};
    r = pt_safetensors_write(from_c, t, N_TENSORS, meta, 2);
    CHECK(r == PT_OK, "write: %s", pt_last_error());
    snprintf(cmd, sizeof cmd, "python3 '%s' check '%s'", script, from_c);
    rc = system(cmd);
    CHECK(rc == 0, "%s exited with %d", cmd, rc);
    for (int k = 0; k < N_TENSORS; k++)
        free(buf[k]);

    unlink(from_py);
    unlink(from_c);
    rmdir(dir);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("safetensors with Python: ok\n");
    return 0;
}
