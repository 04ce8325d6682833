/* checkpoint.c: the single-file checkpoint (pt_checkpoint_save) and the
 * pieces of the format every checkpoint file shares (checkpoint_format.h):
 * names, metadata, the model config as key/value text. Loading is in
 * checkpoint_load.c, sets in checkpoint_set.c. */
#include "io/checkpoint_format.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Names ------------------------------------------------------------- */

void pt_set_file_name(char *buf, size_t n, const char *stem, int shard, int n_shards)
{
    if (n_shards == 1)
        snprintf(buf, n, "%s.safetensors", stem);
    else
        snprintf(buf, n, "%s-%05d-of-%05d.safetensors", stem, shard + 1, n_shards);
}

void pt_set_index_name(char *buf, size_t n, const char *stem)
{
    snprintf(buf, n, "%s.safetensors.index.json", stem);
}

const char *pt_ckpt_moment(pt_optim_kind kind, int which)
{
    if (kind == PT_OPTIM_SGD)
        return which == 0 ? "momentum" : NULL;
    return which == 0 ? "exp_avg" : "exp_avg_sq";
}

const char *pt_ckpt_optim_name(pt_optim_kind kind)
{
    return kind == PT_OPTIM_SGD ? "sgd" : "adamw";
}

int pt_ckpt_ignorable(const char *name)
{
    size_t n = strlen(name);
    return (n > 10 && !strcmp(name + n - 10, ".attn.bias")) ||
           (n > 17 && !strcmp(name + n - 17, ".attn.masked_bias"));
}

int pt_ckpt_check_run_id(const char *run_id)
{
    size_t n = run_id ? strlen(run_id) : 0;
    if (n < 1 || n >= PT_RUN_ID_MAX ||
        strspn(run_id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                       "0123456789._-") != n)
        return pt_fail(PT_EINVAL, "run id '%s' is not 1 to %d of A-Z a-z 0-9 . _ -",
                       run_id ? run_id : "(none)", PT_RUN_ID_MAX - 1);
    return PT_OK;
}

/* ---- Metadata ---------------------------------------------------------- */

void pt_ckpt_meta_add(pt_ckpt_meta *l, const char *key, const char *fmt, ...)
{
    if (l->n >= PT_CKPT_MAX_META)
        return;
    va_list ap;
    snprintf(l->key[l->n], sizeof l->key[0], "%s", key);
    va_start(ap, fmt);
    vsnprintf(l->value[l->n], sizeof l->value[0], fmt, ap);
    va_end(ap);
    l->meta[l->n] = (pt_st_meta){l->key[l->n], l->value[l->n]};
    l->n++;
}

void pt_ckpt_config_meta(pt_ckpt_meta *l, const pt_model_config *c)
{
    pt_ckpt_meta_add(l, "format", "pipetrain");
    if (c->kind == PT_MODEL_GPT) {
        pt_ckpt_meta_add(l, "model", "gpt");
        pt_ckpt_meta_add(l, "n_layer", "%d", c->n_layer);
        pt_ckpt_meta_add(l, "n_head", "%d", c->n_head);
        pt_ckpt_meta_add(l, "n_embd", "%d", c->n_embd);
        pt_ckpt_meta_add(l, "n_positions", "%d", c->seq_len);
        pt_ckpt_meta_add(l, "vocab_size", "%d", c->vocab);
    } else {
        char widths[160] = "";
        for (int i = 0; i < c->n_widths; i++)
            snprintf(widths + strlen(widths), sizeof widths - strlen(widths), "%s%d", i ? "," : "",
                     c->widths[i]);
        pt_ckpt_meta_add(l, "model", "mlp");
        pt_ckpt_meta_add(l, "widths", "%s", widths);
    }
    pt_ckpt_meta_add(l, "seed", "%" PRIu64, c->seed);
}

void pt_ckpt_file_meta(pt_ckpt_meta *l, const pt_model_config *c, const char *optimizer,
                       const pt_train_state *state)
{
    pt_ckpt_config_meta(l, c);
    if (optimizer)
        pt_ckpt_meta_add(l, "optimizer", "%s", optimizer);
    if (state) {
        const uint64_t *s = state->data_rng.s;
        pt_ckpt_meta_add(l, "step", "%ld", state->step);
        pt_ckpt_meta_add(l, "data_rng", "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64,
                         s[0], s[1], s[2], s[3]);
        pt_ckpt_meta_add(l, "data_drawn", "%" PRIu64, state->data_drawn);
    }
}

/* ---- The config as key/value text ------------------------------------- */

static int lookup_int(pt_ckpt_lookup get, const void *ctx, const char *key, int *out)
{
    char buf[32];
    const char *v = get(ctx, key, buf, sizeof buf);
    if (!v)
        return 0;
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < 1 || x > 1 << 30)
        return -1;
    *out = (int)x;
    return 1;
}

static int parse_widths(const char *w, const char *path, pt_model_config *cfg)
{
    int widths[PT_MLP_MAX_WIDTHS], n = 0;
    for (const char *p = w; p && *p;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || n == PT_MLP_MAX_WIDTHS)
            return pt_fail(PT_EFORMAT, "%s: widths '%s' is not a list of at most %d widths", path,
                           w, PT_MLP_MAX_WIDTHS);
        widths[n++] = (int)x;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            return pt_fail(PT_EFORMAT, "%s: widths '%s' is malformed", path, w);
    }
    *cfg = pt_model_config_mlp(n, widths);
    return PT_OK;
}

int pt_ckpt_config_parse(pt_ckpt_lookup get, const void *ctx, const char *path,
                         pt_model_config *cfg)
{
    char model_buf[16], widths_buf[160], seed_buf[32];
    const char *model = get(ctx, "model", model_buf, sizeof model_buf);
    const char *seed = get(ctx, "seed", seed_buf, sizeof seed_buf);
    if (model && !strcmp(model, "mlp")) {
        int rc = parse_widths(get(ctx, "widths", widths_buf, sizeof widths_buf), path, cfg);
        if (rc != PT_OK)
            return rc;
    } else if (model && !strcmp(model, "gpt")) {
        *cfg = pt_model_config_gpt();
        const struct {
            const char *key;
            int *field;
        } f[] = {{"n_layer", &cfg->n_layer},
                 {"n_head", &cfg->n_head},
                 {"n_embd", &cfg->n_embd},
                 {"n_positions", &cfg->seq_len},
                 {"vocab_size", &cfg->vocab}};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            if (lookup_int(get, ctx, f[i].key, f[i].field) != 1)
                return pt_fail(PT_EFORMAT, "%s: '%s' is missing or not a positive integer", path,
                               f[i].key);
    } else {
        return pt_fail(PT_EFORMAT, "%s: 'model' is '%s', expected gpt or mlp", path,
                       model ? model : "(missing)");
    }
    if (seed)
        cfg->seed = strtoull(seed, NULL, 10);
    return PT_OK;
}

int pt_ckpt_same_config(const pt_model_config *a, const pt_model_config *b, const char *path)
{
    if (a->kind != b->kind)
        return pt_fail(PT_EFORMAT, "%s holds a%s model, not a%s", path,
                       a->kind == PT_MODEL_GPT ? " gpt" : "n mlp",
                       b->kind == PT_MODEL_GPT ? " gpt" : "n mlp");
    if (a->kind == PT_MODEL_GPT &&
        (a->n_layer != b->n_layer || a->n_head != b->n_head || a->n_embd != b->n_embd ||
         a->seq_len != b->seq_len || a->vocab != b->vocab))
        return pt_fail(PT_EFORMAT,
                       "%s holds gpt layers %d heads %d embd %d seq %d vocab %d; the model is "
                       "layers %d heads %d embd %d seq %d vocab %d",
                       path, a->n_layer, a->n_head, a->n_embd, a->seq_len, a->vocab, b->n_layer,
                       b->n_head, b->n_embd, b->seq_len, b->vocab);
    if (a->kind == PT_MODEL_MLP &&
        (a->n_widths != b->n_widths ||
         memcmp(a->widths, b->widths, sizeof(int) * (size_t)a->n_widths)))
        return pt_fail(PT_EFORMAT, "%s holds an mlp of other widths than the model's", path);
    return PT_OK;
}

int pt_ckpt_parse_rng(const char *hex, pt_rng *rng)
{
    if (!hex || strlen(hex) != 64 || strspn(hex, "0123456789abcdefABCDEF") != 64)
        return PT_EFORMAT;
    for (int i = 0; i < 4; i++) {
        char word[17];
        memcpy(word, hex + 16 * i, 16);
        word[16] = '\0';
        rng->s[i] = strtoull(word, NULL, 16);
    }
    return PT_OK;
}

/* ---- The single file --------------------------------------------------- */

int pt_checkpoint_save(const char *path, const pt_model *m, pt_optimizer *opt,
                       const pt_train_state *state)
{
    size_t len = strlen(path);
    if (len < 12 || strcmp(path + len - 12, ".safetensors")) {
        /* a folder: a set of one shard */
        char staging[4096], run_id[PT_RUN_ID_MAX];
        int rc = pt_checkpoint_new_run_id(run_id, sizeof run_id);
        if (rc == PT_OK)
            rc = pt_checkpoint_begin(path, staging, sizeof staging);
        if (rc == PT_OK)
            rc = pt_checkpoint_write_shard(staging, 0, 1, m, opt, state, run_id);
        if (rc == PT_OK)
            rc = pt_checkpoint_publish(staging, path, 1, m, opt, state, run_id);
        return rc;
    }
    int n = pt_model_n_params(m);
    pt_st_tensor *t = calloc((size_t)n * 3, sizeof *t);
    char(*names)[PT_NAME_MAX] = calloc((size_t)n * 2, sizeof *names);
    if (!t || !names) {
        free(t), free(names);
        return pt_fail(PT_ENOMEM, "cannot allocate the checkpoint's tensor list");
    }
    int nt = 0, nn = 0;
    pt_optim_kind kind = opt ? pt_optimizer_config(opt)->kind : PT_OPTIM_ADAMW;
    for (int which = -1; which < (opt ? 2 : 0); which++) {
        const char *moment = which < 0 ? "" : pt_ckpt_moment(kind, which);
        for (int i = 0; moment && i < n; i++) {
            const pt_param *p = pt_model_param(m, i);
            if (p->tied_to)
                continue;
            t[nt] = (pt_st_tensor){.name = p->name, .dtype = PT_DT_F32, .ndim = p->ndim};
            t[nt].data = which < 0 ? p->data : pt_optimizer_state(opt, m, i, which);
            if (which >= 0) {
                snprintf(names[nn], sizeof names[0], "optimizer.%s.%s", moment, p->name);
                t[nt].name = names[nn++];
            }
            memcpy(t[nt].shape, p->shape, sizeof(int) * (size_t)p->ndim);
            nt++;
        }
    }
    pt_ckpt_meta l = {.n = 0};
    pt_ckpt_file_meta(&l, pt_model_get_config(m), opt ? pt_ckpt_optim_name(kind) : NULL, state);
    int rc = pt_safetensors_write(path, t, nt, l.meta, l.n);
    free(t);
    free(names);
    return rc;
}
