/* test_checkpoint_set_refuses: a checkpoint set that is incomplete or
 * inconsistent is refused with a message naming the problem, and the model
 * and optimizer it was loaded into are left exactly as they were: an index
 * naming a missing shard, a shard of another run, a tensor of the wrong
 * shape or dtype, a tensor missing from the index, a weights-only set given
 * to resume (accepted with a fresh optimizer only when asked), another
 * model config. Publishing refuses a save a stage did not finish, parts
 * that leave a block out or hold one twice, and a shard of another run,
 * leaving the set already under the name as it was; a save never replaces
 * a folder that holds anything but a set. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint_harness.h"

static char dir[] = "/tmp/pt_ckref_XXXXXX";

static void sh(const char *fmt, const char *a, const char *b)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    CHECK(system(cmd) == 0, "%s", cmd);
}

/* A copy of the good set under `name`. */
static const char *copy_set(const char *good, const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    sh("cp -r '%s' '%s'", good, path);
    return path;
}

/* Replaces the first `from` in a file by `to` (same length), or deletes the
 * line holding it when to is NULL. */
static void edit(const char *path, const char *from, const char *to)
{
    size_t n;
    char *b = slurp(path, &n);
    char *hit = b ? memmem(b, n, from, strlen(from)) : NULL;
    CHECK(hit && (!to || strlen(to) == strlen(from)), "setup: '%s' not in %s", from, path);
    if (!hit) {
        free(b);
        return;
    }
    if (to) {
        memcpy(hit, to, strlen(to));
    } else {
        char *start = hit, *end = strchr(hit, '\n');
        while (start > b && start[-1] != '\n')
            start--;
        memmove(start, end + 1, (size_t)(b + n - end - 1));
        n -= (size_t)(end + 1 - start);
    }
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    free(b);
}

/* A copy of every parameter and moment of a whole model. */
static float *snapshot(const pt_model *m, pt_optimizer *opt)
{
    size_t total = 0;
    for (int i = 0; i < pt_model_n_params(m); i++)
        total += 3 * pt_model_param(m, i)->numel;
    float *s = malloc(total * sizeof *s), *at = s;
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *p = pt_model_param(m, i);
        memcpy(at, p->data, p->numel * sizeof *s), at += p->numel;
        for (int w = 0; w < 2; w++)
            memcpy(at, pt_optimizer_state(opt, m, i, w), p->numel * sizeof *s), at += p->numel;
    }
    return s;
}

static void expect_refused(const char *what, const char *path, part *t, int resume,
                           const char *needle, const char *needle2)
{
    float *before = snapshot(t->m, t->opt);
    pt_train_state st = {.step = 123};
    int rc = pt_checkpoint_load(path, t->m, resume ? t->opt : NULL, resume ? &st : NULL);
    const char *msg = pt_last_error();
    float *after = snapshot(t->m, t->opt);
    size_t bytes = 0;
    for (int i = 0; i < pt_model_n_params(t->m); i++)
        bytes += 3 * pt_model_param(t->m, i)->numel * sizeof(float);
    int untouched = !memcmp(before, after, bytes) && st.step == 123;
    CHECK(rc != PT_OK, "%s: accepted", what);
    CHECK(strstr(msg, needle) && (!needle2 || strstr(msg, needle2)),
          "%s: message '%s' does not name '%s'", what, msg, needle);
    CHECK(untouched, "%s: the model or optimizer changed", what);
    printf("%-4s %-26s -> %s\n", rc != PT_OK && untouched ? "ok" : "FAIL", what, msg);
    free(before), free(after);
}

static void expect_publish_refused(const char *what, const char *dest, const part *parts,
                                   const int *shards, int n_written, int n, const char *run_id,
                                   const pt_model *desc, const char *needle)
{
    char staging[4096];
    pt_train_state st = {.step = 2};
    int rc = pt_checkpoint_begin(dest, staging, sizeof staging);
    for (int k = 0; rc == PT_OK && k < n_written; k++)
        rc = pt_checkpoint_write_shard(staging, shards[k], n, parts[k].m, parts[k].opt, &st,
                                       k == 0 ? run_id : "run-a");
    if (rc == PT_OK)
        rc = pt_checkpoint_publish(staging, dest, n, desc, parts[0].opt, &st, "run-a");
    CHECK(rc != PT_OK && strstr(pt_last_error(), needle), "publish %s: %s", what,
          rc == PT_OK ? "accepted" : pt_last_error());
    printf("%-4s publish: %-17s -> %s\n", rc != PT_OK ? "ok" : "FAIL", what, pt_last_error());
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    pt_model_config c = small_gpt();
    pt_model *whole;
    pt_optimizer *wopt;
    if (trained(&c, PT_OPTIM_ADAMW, 2, &whole, &wopt))
        return printf("setup: %s\n", pt_last_error()), 1;
    const pt_optim_config *oc = pt_optimizer_config(wopt);
    int ends[] = {1, 3, 5};
    part parts[3];
    pt_train_state st = {.step = 2};
    char good[256], other[256], weights[256], path[512];
    snprintf(good, sizeof good, "%s/good", dir);
    snprintf(other, sizeof other, "%s/other_run", dir);
    snprintf(weights, sizeof weights, "%s/weights_only", dir);
    if (make_parts(&c, ends, 3, whole, wopt, oc, parts) ||
        save_set(good, parts, 3, whole, 1, &st, "run-a") ||
        save_set(other, parts, 3, whole, 1, &st, "run-b") ||
        save_set(weights, parts, 3, whole, 0, &st, "run-a"))
        return printf("setup: %s\n", pt_last_error()), 1;

    /* the target: a whole model of another seed, with moments of its own */
    pt_model_config c2 = c;
    c2.seed = 5;
    part target;
    make_part(&c2, 0, 4, NULL, NULL, oc, &target);
    for (int i = 0; i < pt_model_n_params(target.m); i++)
        for (int w = 0; w < 2; w++)
            pt_optimizer_state(target.opt, target.m, i, w)[0] = (float)(i + w);

    const char *p = copy_set(good, "missing_shard");
    snprintf(path, sizeof path, "%s/model-00002-of-00003.safetensors", p);
    unlink(path);
    expect_refused("index names a missing file", p, &target, 0, "model-00002-of-00003", "missing");

    p = copy_set(good, "mixed");
    sh("cp '%s/model-00002-of-00003.safetensors' '%s'", other, p);
    expect_refused("shards of two runs", p, &target, 0, "model-00002-of-00003", "run-b");

    p = copy_set(good, "bad_shape");
    snprintf(path, sizeof path, "%s/model-00001-of-00003.safetensors", p);
    edit(path, "\"shape\":[8,16]", "\"shape\":[16,8]");
    expect_refused("a tensor of another shape", p, &target, 0, "transformer.wpe.weight", "shape");

    p = copy_set(good, "bad_dtype");
    snprintf(path, sizeof path, "%s/model-00001-of-00003.safetensors", p);
    edit(path, "\"transformer.wpe.weight\":{\"dtype\":\"F32\"",
         "\"transformer.wpe.weight\":{\"dtype\":\"I32\"");
    expect_refused("a tensor of another dtype", p, &target, 0, "transformer.wpe.weight", "I32");

    p = copy_set(good, "missing_tensor");
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", p);
    edit(path, "\"transformer.h.1.ln_2.bias\"", NULL);
    expect_refused("a tensor missing", p, &target, 0, "transformer.h.1.ln_2.bias", "no tensor");

    expect_refused("weights only, to resume", weights, &target, 1, "weights only", NULL);
    pt_checkpoint_load_options fresh = {.allow_fresh_optimizer = 1};
    pt_train_state back = {.step = 99};
    int rc = pt_checkpoint_load_with(weights, target.m, target.opt, &back, &fresh);
    int zero = 1;
    for (int i = 0; i < pt_model_n_params(target.m); i++)
        zero &= pt_optimizer_state(target.opt, target.m, i, 0)[0] == 0.0f;
    CHECK(rc == PT_OK && back.step == 2 && zero && same_held(target.m, NULL, whole, NULL),
          "weights only with a fresh optimizer: %s", rc ? pt_last_error() : "wrong values");

    pt_model_config c3 = c;
    c3.n_layer = 4;
    part four;
    make_part(&c3, 0, 5, NULL, NULL, oc, &four);
    expect_refused("another model config", good, &four, 0, "layers 3", NULL);
    free_parts(&four, 1);

    /* publishing: the good set stays under the name whatever is refused */
    const int all[] = {0, 1, 2}, skip[] = {0, 2};
    part gap[3], twice[3];
    int gap_ends[][2] = {{0, 0}, {1, 2}, {4, 4}}, twice_ends[][2] = {{0, 1}, {1, 3}, {4, 4}};
    for (int k = 0; k < 3; k++) {
        make_part(&c, gap_ends[k][0], gap_ends[k][1], whole, wopt, oc, &gap[k]);
        make_part(&c, twice_ends[k][0], twice_ends[k][1], whole, wopt, oc, &twice[k]);
    }
    part unfinished[2] = {parts[0], parts[2]};
    expect_publish_refused("a stage failed", good, unfinished, skip, 2, 3, "run-a", whole,
                           "shard 2 of 3 was not written");
    expect_publish_refused("a block left out", good, gap, all, 3, 3, "run-a", whole,
                           "no shard holds 'transformer.h.2.ln_1.weight'");
    expect_publish_refused("a block twice", good, twice, all, 3, 3, "run-a", whole, "in both");
    expect_publish_refused("another run", good, parts, all, 3, 3, "run-x", whole, "run-x");
    free_parts(gap, 3), free_parts(twice, 3);
    make_part(&c2, 0, 4, NULL, NULL, oc, &four);
    CHECK(pt_checkpoint_load(good, four.m, four.opt, &back) == PT_OK &&
              same_held(four.m, four.opt, whole, wopt),
          "the set under the name changed after refused publishes: %s", pt_last_error());
    free_parts(&four, 1);

    /* a folder that is not a set is never replaced */
    char notes[600], staging[4096];
    snprintf(path, sizeof path, "%s/home", dir);
    snprintf(notes, sizeof notes, "%s/notes.txt", path);
    sh("mkdir '%s' && echo keep > '%s'", path, notes);
    rc = pt_checkpoint_begin(path, staging, sizeof staging);
    CHECK(rc != PT_OK && strstr(pt_last_error(), "notes.txt"), "begin into a folder: %s",
          rc ? pt_last_error() : "accepted");
    CHECK(access(notes, F_OK) == 0, "the folder's file is gone");
    printf("%-4s begin into another folder -> %s\n", rc ? "ok" : "FAIL", pt_last_error());

    free_parts(&target, 1);
    free_parts(parts, 3);
    pt_optimizer_destroy(wopt);
    pt_model_destroy(whole);
    if (!failures)
        sh("rm -rf '%s'%s", dir, "");
    return failures != 0;
}
