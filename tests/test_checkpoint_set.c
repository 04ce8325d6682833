/* test_checkpoint_set: a checkpoint set saved by the stages of one cut of a
 * model (1 to 4 shards, cut at various block boundaries) loads into the
 * parts of another cut and into a whole model with every parameter, moment
 * and the training state bit-identical to the model that was saved (a part
 * holding lm_head.weight but not the embedding reads it from the
 * embedding's tensor); merged into one file it is byte-identical to
 * pt_checkpoint_save of the whole model, and so is a set published to a
 * .safetensors name. The layout is Hugging Face's: the shard names, an
 * index whose weight_map names every weight once, "format": "pt" in every
 * weights file, no optimizer tensor among the weights, a GPT-2
 * config.json. For a gpt with AdamW and an mlp with SGD. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint_harness.h"
#include "io/json.h"
#include "io/safetensors.h"

/* Cuts of a five-block model: one past each shard's last block. */
static const int cuts[][4] = {{5}, {2, 5}, {4, 5}, {1, 3, 5}, {1, 2, 4, 5}};
static const int cut_shards[] = {1, 2, 2, 3, 4};
enum { N_CUTS = 5 };

static pt_json *read_json(const char *path)
{
    size_t n;
    char *text = slurp(path, &n);
    pt_json *j = NULL;
    if (text && pt_json_parse(text, n, 0, path, &j) != PT_OK)
        j = NULL;
    free(text);
    return j;
}

static long json_int(const pt_json *o, const char *key)
{
    const pt_json *v = pt_json_get(o, key);
    return v && v->is_int ? (long)v->int_value : -1;
}

static const char *json_str(const pt_json *o, const char *key)
{
    const pt_json *v = pt_json_get(o, key);
    return v && v->type == PT_JSON_STRING ? v->string : "";
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* The files of a set of n shards, the weights index, the weights files'
 * metadata and tensors, trainer_state.json and config.json. */
static void check_layout(const char *set, int n, const pt_model *m, const char *optimizer)
{
    char path[512], name[128];
    int gpt = pt_model_get_config(m)->kind == PT_MODEL_GPT;
    int files = 2 * n + (n > 1 ? 2 : 0) + 1 + gpt;
    CHECK(count_entries(set) == files, "%s: %d files, expected %d", set, count_entries(set), files);
    int weights = 0, held = 0;
    for (int i = 0; i < pt_model_n_params(m); i++)
        weights += !pt_model_param(m, i)->tied_to;
    for (int k = 0; k < n; k++) {
        for (int part = 0; part < 2; part++) {
            if (n == 1)
                snprintf(name, sizeof name, "%s.safetensors", part ? "optimizer" : "model");
            else
                snprintf(name, sizeof name, "%s-%05d-of-%05d.safetensors",
                         part ? "optimizer" : "model", k + 1, n);
            snprintf(path, sizeof path, "%s/%s", set, name);
            pt_safetensors *st;
            if (pt_safetensors_open(path, &st) != PT_OK) {
                CHECK(0, "%s: %s", path, pt_last_error());
                continue;
            }
            const char *fmt = pt_safetensors_meta(st, "format");
            CHECK(fmt && !strcmp(fmt, "pt"), "%s: format %s, expected pt", path, fmt ? fmt : "-");
            CHECK(pt_safetensors_meta(st, "run_id") && pt_safetensors_meta(st, "step"),
                  "%s: no run_id or step in the metadata", path);
            for (int t = 0; t < pt_safetensors_count(st); t++) {
                const char *tn = pt_safetensors_info(st, t)->name;
                int moment = !strncmp(tn, "exp_avg", 7) || !strncmp(tn, "momentum.", 9);
                CHECK(part ? moment : !moment && pt_model_find_param(m, tn), "%s holds '%s'", path,
                      tn);
                CHECK(strcmp(tn, "lm_head.weight"), "%s holds the tied lm_head.weight", path);
            }
            held += part ? 0 : pt_safetensors_count(st);
            pt_safetensors_close(st);
        }
    }
    CHECK(held == weights, "%s: the weights files hold %d tensors, the model has %d", set, held,
          weights);
    if (n > 1) {
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", set);
        pt_json *ix = read_json(path);
        const pt_json *map = pt_json_get(ix, "weight_map");
        CHECK(map && (int)map->n == weights, "%s: weight_map of %d names, expected %d", path,
              map ? (int)map->n : -1, weights);
        for (int i = 0; map && i < pt_model_n_params(m); i++) {
            const pt_param *p = pt_model_param(m, i);
            const pt_json *f = pt_json_get(map, p->name);
            CHECK(p->tied_to ? !f : f && !strncmp(f->string, "model-", 6), "%s: '%s' maps to %s",
                  path, p->name, f ? f->string : "nothing");
        }
        CHECK(json_int(pt_json_get(ix, "metadata"), "total_size") ==
                  (long)(pt_model_param_count(m) * sizeof(float)),
              "%s: total_size %ld", path, json_int(pt_json_get(ix, "metadata"), "total_size"));
        pt_json_free(ix);
    }
    snprintf(path, sizeof path, "%s/trainer_state.json", set);
    pt_json *ts = read_json(path);
    CHECK(ts && json_int(ts, "step") == 2 && !strcmp(json_str(ts, "optimizer"), optimizer) &&
              json_int(ts, "shards") == n,
          "%s: step, optimizer or shards wrong", path);
    pt_json_free(ts);
    if (!gpt)
        return;
    const pt_model_config *c = pt_model_get_config(m);
    snprintf(path, sizeof path, "%s/config.json", set);
    pt_json *hf = read_json(path);
    const pt_json *arch = pt_json_get(hf, "architectures");
    const pt_json *eps = pt_json_get(hf, "layer_norm_epsilon");
    const pt_json *tie = pt_json_get(hf, "tie_word_embeddings");
    CHECK(hf && !strcmp(json_str(hf, "model_type"), "gpt2") && arch && arch->n == 1 &&
              !strcmp(arch->items[0]->string, "GPT2LMHeadModel"),
          "%s: model_type or architectures wrong", path);
    CHECK(json_int(hf, "n_layer") == c->n_layer && json_int(hf, "n_head") == c->n_head &&
              json_int(hf, "n_embd") == c->n_embd && json_int(hf, "n_positions") == c->seq_len &&
              json_int(hf, "n_ctx") == c->seq_len && json_int(hf, "vocab_size") == c->vocab,
          "%s: a size is wrong", path);
    CHECK(!strcmp(json_str(hf, "activation_function"), "gelu_new") && eps && eps->number == 1e-5 &&
              tie && tie->type == PT_JSON_BOOL && tie->boolean,
          "%s: activation, epsilon or tying wrong", path);
    pt_json_free(hf);
}

static void check_model(const char *dir, const pt_model_config *c, pt_optim_kind kind)
{
    pt_model *whole;
    pt_optimizer *wopt;
    if (trained(c, kind, 2, &whole, &wopt)) {
        CHECK(0, "training: %s", pt_last_error());
        return;
    }
    const pt_optim_config *oc = pt_optimizer_config(wopt);
    const char *oname = kind == PT_OPTIM_SGD ? "sgd" : "adamw";
    pt_train_state st = {.step = 2, .data_drawn = 11};
    pt_rng_seed(&st.data_rng, 7);
    char ref[256], set[256], merged[256];
    snprintf(ref, sizeof ref, "%s/ref.safetensors", dir);
    CHECK(pt_checkpoint_save(ref, whole, NULL, &st) == PT_OK, "save: %s", pt_last_error());
    const pt_param *head = pt_model_find_param(whole, "lm_head.weight");
    if (head)
        CHECK(!memcmp(head->data, pt_model_find_param(whole, head->tied_to)->data,
                      head->numel * sizeof(float)),
              "setup: training left lm_head.weight unequal to what it copies");

    pt_model_config other = *c;
    other.seed = 99; /* loads must overwrite everything */
    for (int ci = 0; ci < N_CUTS; ci++) {
        int n = cut_shards[ci], li = (ci + 2) % N_CUTS, ln = cut_shards[li];
        part saved[4], loaded[4];
        snprintf(set, sizeof set, "%s/set%d", dir, ci);
        if (make_parts(c, cuts[ci], n, whole, wopt, oc, saved) ||
            save_set(set, saved, n, whole, 1, &st, "run-1") != PT_OK) {
            CHECK(0, "saving %d shards: %s", n, pt_last_error());
            continue;
        }
        check_layout(set, n, whole, oname);
        if (make_parts(&other, cuts[li], ln, NULL, NULL, oc, loaded))
            CHECK(0, "parts: %s", pt_last_error());
        for (int k = 0; k < ln; k++) {
            pt_train_state back = {0};
            int rc = pt_checkpoint_load(set, loaded[k].m, loaded[k].opt, &back);
            CHECK(rc == PT_OK, "load %d shards into part %d of %d: %s", n, k, ln, pt_last_error());
            CHECK(same_held(loaded[k].m, loaded[k].opt, whole, wopt),
                  "%d shards loaded into part %d of %d differ", n, k, ln);
            CHECK(back.step == 2 && back.data_drawn == 11 &&
                      !memcmp(&back.data_rng, &st.data_rng, sizeof st.data_rng),
                  "state of %d shards differs", n);
        }
        free_parts(loaded, ln);
        if (make_part(&other, 0, 4, NULL, NULL, oc, &loaded[0]) == 0) {
            pt_train_state back;
            CHECK(pt_checkpoint_load(set, loaded[0].m, loaded[0].opt, &back) == PT_OK &&
                      same_held(loaded[0].m, loaded[0].opt, whole, wopt),
                  "%d shards loaded into the whole model differ: %s", n, pt_last_error());
            free_parts(loaded, 1);
        }
        snprintf(merged, sizeof merged, "%s/merged%d.safetensors", dir, ci);
        CHECK(pt_checkpoint_merge(set, merged) == PT_OK, "merge: %s", pt_last_error());
        CHECK(same_bytes(merged, ref), "%d shards merged differ from pt_checkpoint_save's file", n);
        pt_model_config rc_cfg;
        CHECK(pt_checkpoint_read_config(set, 1, &rc_cfg) == PT_OK && rc_cfg.seed == c->seed &&
                  rc_cfg.n_layer == c->n_layer && rc_cfg.n_widths == c->n_widths,
              "config of the set: %s", pt_last_error());
        if (ci == 3) { /* the same parts published to one file */
            snprintf(merged, sizeof merged, "%s/published.safetensors", dir);
            CHECK(save_set(merged, saved, n, whole, 1, &st, "run-1") == PT_OK, "publish: %s",
                  pt_last_error());
            CHECK(same_bytes(merged, ref), "a set published to one file differs");
            CHECK(count_entries(dir) == 3 + 2 * ci + 1, "staging left behind in %s", dir);
        }
        free_parts(saved, n);
    }
    /* pt_checkpoint_save to a folder: a set of one shard */
    snprintf(set, sizeof set, "%s/saved_set", dir);
    CHECK(pt_checkpoint_save(set, whole, wopt, &st) == PT_OK, "save to a folder: %s",
          pt_last_error());
    check_layout(set, 1, whole, oname);
    snprintf(merged, sizeof merged, "%s/saved_set.safetensors", dir);
    CHECK(pt_checkpoint_merge(set, merged) == PT_OK && same_bytes(merged, ref),
          "a saved set merged differs: %s", pt_last_error());
    pt_optimizer_destroy(wopt);
    pt_model_destroy(whole);
}

int main(void)
{
    char dir[] = "/tmp/pt_ckset_XXXXXX", cmd[300];
    if (!mkdtemp(dir))
        return 1;
    pt_model_config gpt = small_gpt(), mlp = small_mlp();
    check_model(dir, &gpt, PT_OPTIM_ADAMW);
    snprintf(cmd, sizeof cmd, "rm -rf %s/*", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    check_model(dir, &mlp, PT_OPTIM_SGD);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    printf("%s: sets of 1 to 4 shards, gpt and mlp\n", failures ? "FAIL" : "ok");
    return failures != 0;
}
