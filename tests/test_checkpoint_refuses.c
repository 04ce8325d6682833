/* test_checkpoint_refuses: a checkpoint that is truncated, has a corrupted
 * header, a tensor of the wrong dtype or shape, or belongs to another model
 * config is refused with a message naming the tensor or the byte offset,
 * and the model it was loaded into is left exactly as it was. A good
 * checkpoint (a set) round-trips parameters, optimizer moments and training
 * state; a single file takes the weights alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "pipetrain.h"

static int failures;

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*n);
    if (fread(b, 1, *n, f) != *n)
        *n = 0;
    fclose(f);
    return b;
}

static void spit(const char *path, const char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

/* A copy of the good file with the first `from` in its header replaced by
 * `to` (same length, so the header length still holds). */
static void edited(const char *good, const char *bad, const char *from, const char *to)
{
    size_t n;
    char *b = slurp(good, &n);
    char *hit = memmem(b, n, from, strlen(from));
    if (!hit || strlen(from) != strlen(to)) {
        printf("FAIL: test setup: '%s' not in the header\n", from);
        failures++;
    } else {
        memcpy(hit, to, strlen(to));
    }
    spit(bad, b, n);
    free(b);
}

static void expect_refused(const char *what, const char *path, pt_model *m, const char *needle)
{
    size_t before_n = pt_model_param(m, 0)->numel;
    float *before = malloc(before_n * sizeof(float));
    memcpy(before, pt_model_param(m, 0)->data, before_n * sizeof(float));
    int rc = pt_checkpoint_load(path, m, NULL, NULL);
    const char *msg = pt_last_error();
    int untouched = !memcmp(before, pt_model_param(m, 0)->data, before_n * sizeof(float));
    int ok = rc != PT_OK && strstr(msg, needle) && untouched;
    printf("%-4s %-22s -> %s\n", ok ? "ok" : "FAIL", what, msg);
    failures += !ok;
    free(before);
}

int main(void)
{
    char dir[] = "/tmp/pt_ckpt_XXXXXX", good[256], bad[256];
    if (!mkdtemp(dir))
        return 1;
    snprintf(good, sizeof good, "%s/good.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);

    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 32;
    pt_model *m, *fresh;
    pt_optimizer *opt, *opt2;
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    if (pt_model_create(&c, &m) || pt_optimizer_create(m, &oc, &opt))
        return printf("setup: %s\n", pt_last_error()), 1;
    /* give the moments recognisable values; a tied copy's equal what it
     * copies, as training keeps them */
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *p = pt_model_param(m, i);
        int id = p->tied_to ? (int)(pt_model_find_param(m, p->tied_to) - pt_model_param(m, 0)) : i;
        for (int w = 0; w < 2; w++) {
            float *s = pt_optimizer_state(opt, m, i, w);
            for (size_t j = 0; j < p->numel; j++)
                s[j] = (float)(id + 1) * 0.001f * (float)(w + 1) + (float)j * 1e-6f;
        }
    }
    pt_train_state st = {.step = 17, .data_drawn = 3};
    pt_rng_seed(&st.data_rng, 42);
    char set[256];
    snprintf(set, sizeof set, "%s/set", dir);
    if (pt_checkpoint_save(set, m, opt, &st) != PT_OK || pt_checkpoint_save(good, m, NULL, &st))
        return printf("save: %s\n", pt_last_error()), 1;
    /* one file holds the weights alone: the moments are refused, not dropped */
    int refused = pt_checkpoint_save(bad, m, opt, &st) == PT_EINVAL &&
                  strstr(pt_last_error(), "weights alone") && access(bad, F_OK) != 0;
    printf("%-4s a file is not given the optimizer state -> %s\n", refused ? "ok" : "FAIL",
           pt_last_error());
    failures += !refused;

    /* round trip into a model of another seed */
    pt_model_config c2 = c;
    c2.seed = 9;
    pt_model_create(&c2, &fresh);
    pt_optimizer_create(fresh, &oc, &opt2);
    pt_train_state back;
    if (pt_checkpoint_load(set, fresh, opt2, &back) != PT_OK)
        return printf("FAIL load: %s\n", pt_last_error()), 1;
    int same = back.step == 17 && !memcmp(&back.data_rng, &st.data_rng, sizeof st.data_rng);
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *a = pt_model_param(m, i), *b = pt_model_param(fresh, i);
        same &= !memcmp(a->data, b->data, a->numel * sizeof(float));
        for (int w = 0; w < 2; w++)
            same &= !memcmp(pt_optimizer_state(opt, m, i, w), pt_optimizer_state(opt2, fresh, i, w),
                            a->numel * sizeof(float));
    }
    printf("%-4s round trip of parameters, moments, step and data position\n",
           same ? "ok" : "FAIL");
    failures += !same;

    /* every refusal, into `fresh` (which must stay as it is) */
    size_t n;
    char *b = slurp(good, &n);
    spit(bad, b, n / 2);
    expect_refused("truncated", bad, fresh, "bad.safetensors");
    spit(bad, b, 5);
    expect_refused("shorter than 8 bytes", bad, fresh, "bad.safetensors");
    free(b);
    edited(good, bad, "{\"", "[\"");
    expect_refused("corrupted header", bad, fresh, "byte");
    edited(good, bad, "\"transformer.wpe.weight\":{\"dtype\":\"F32\"",
           "\"transformer.wpe.weight\":{\"dtype\":\"I32\"");
    expect_refused("wrong dtype", bad, fresh, "transformer.wpe.weight");
    edited(good, bad, "\"shape\":[8,16]", "\"shape\":[16,8]");
    expect_refused("wrong shape", bad, fresh, "transformer.wpe.weight");

    pt_model_config c3 = c;
    c3.n_layer = 3;
    pt_model *other;
    pt_model_create(&c3, &other);
    expect_refused("another model config", good, other, "layers 2");
    expect_refused("missing file", "/nonexistent/x.safetensors", fresh,
                   "/nonexistent/x.safetensors");

    pt_model_destroy(other);
    pt_optimizer_destroy(opt2);
    pt_model_destroy(fresh);
    pt_optimizer_destroy(opt);
    pt_model_destroy(m);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        return 1;
    return failures ? 1 : 0;
}
