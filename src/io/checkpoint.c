/* checkpoint.c: the single-file checkpoint (pt_checkpoint_save) and the
 * pieces of the format every checkpoint file shares (checkpoint_format.h):
 * names, metadata, the model config as key/value text. Loading is in
 * checkpoint_load.c, sets in checkpoint_set.c. */
#include "io/checkpoint_folder.h"

#include <math.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/hf_config.h"

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

void pt_ckpt_spec_line(const char *spec, char *out, size_t n)
{
    size_t k = 0;
    int blank = 1; /* at the start or after a space or ';' */
    for (const char *p = spec; *p && k + 2 < n; p++) {
        char ch = *p == '\n' ? ';' : *p == '\t' || *p == '\r' ? ' ' : *p;
        if (ch == '#') {
            while (p[1] && p[1] != '\n')
                p++;
            continue;
        }
        if (ch == ' ' && blank)
            continue;
        if (ch == ';' && k && out[k - 1] == ' ')
            k--;
        if (ch == ';' && (k == 0 || out[k - 1] == ';' || out[k - 1] == '('))
            continue;
        if (ch == ')' && k && out[k - 1] == ';')
            k--;
        out[k++] = ch;
        blank = ch == ' ' || ch == ';' || ch == '(';
        if (ch == ';')
            out[k++] = ' ';
    }
    while (k && (out[k - 1] == ' ' || out[k - 1] == ';'))
        k--;
    out[k] = '\0';
}

/* The shortest decimal that reads back as x (buf of 32). */
static const char *float_text(float x, char *buf)
{
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, 32, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x)
            break;
    }
    return buf;
}

void pt_ckpt_config_meta(pt_ckpt_meta *l, const pt_model_config *c)
{
    char eps[32];
    pt_ckpt_meta_add(l, "format", "pt");
    if (c->kind == PT_MODEL_SPEC && l->n < PT_CKPT_MAX_META) {
        pt_ckpt_meta_add(l, "model", "spec");
        pt_ckpt_meta_add(l, "spec", "%s", "");
        pt_ckpt_spec_line(c->spec, l->spec, sizeof l->spec);
        l->meta[l->n - 1].value = l->spec;
    } else if (c->kind == PT_MODEL_GPT) {
        pt_ckpt_meta_add(l, "model", "gpt");
        pt_ckpt_meta_add(l, "n_layer", "%d", c->n_layer);
        pt_ckpt_meta_add(l, "n_head", "%d", c->n_head);
        pt_ckpt_meta_add(l, "n_embd", "%d", c->n_embd);
        pt_ckpt_meta_add(l, "n_positions", "%d", pt_gpt_positions(c));
        pt_ckpt_meta_add(l, "vocab_size", "%d", c->vocab);
        pt_ckpt_meta_add(l, "seq_len", "%d", c->seq_len);
        pt_ckpt_meta_add(l, "n_inner", "%d", pt_gpt_inner(c));
        pt_ckpt_meta_add(l, "activation_function", "%s", pt_hf_activation_name(c->activation));
        pt_ckpt_meta_add(l, "layer_norm_epsilon", "%s", float_text(c->layer_norm_epsilon, eps));
        pt_ckpt_meta_add(l, "scale_attn_weights", "%d", !!c->scale_attn_weights);
        pt_ckpt_meta_add(l, "scale_attn_by_inverse_layer_idx", "%d",
                         !!c->scale_attn_by_inverse_layer_idx);
        pt_ckpt_meta_add(l, "tie_word_embeddings", "%d", !!c->tie_word_embeddings);
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

/* The fields a record written before they existed lacks: GPT-2's values,
 * and a context of n_positions. */
static int parse_gpt_variant(pt_ckpt_lookup get, const void *ctx, const char *path,
                             pt_model_config *cfg)
{
    char buf[64];
    cfg->n_positions = cfg->seq_len;
    if (lookup_int(get, ctx, "seq_len", &cfg->seq_len) < 0 ||
        lookup_int(get, ctx, "n_inner", &cfg->n_inner) < 0)
        return pt_fail(PT_EFORMAT, "%s: 'seq_len' or 'n_inner' is not a positive integer", path);
    const char *act = get(ctx, "activation_function", buf, sizeof buf);
    if (act && pt_hf_activation_parse(act) < 0)
        return pt_fail(PT_EFORMAT, "%s: activation_function '%s' is not one pipetrain computes",
                       path, act);
    if (act)
        cfg->activation = (pt_activation)pt_hf_activation_parse(act);
    const char *eps = get(ctx, "layer_norm_epsilon", buf, sizeof buf);
    char *end = NULL;
    if (eps && (cfg->layer_norm_epsilon = strtof(eps, &end),
                *end || !(cfg->layer_norm_epsilon > 0) || !isfinite(cfg->layer_norm_epsilon)))
        return pt_fail(PT_EFORMAT, "%s: layer_norm_epsilon '%s' is not a positive number", path,
                       eps);
    const struct {
        const char *key;
        int *field;
    } flags[] = {{"scale_attn_weights", &cfg->scale_attn_weights},
                 {"scale_attn_by_inverse_layer_idx", &cfg->scale_attn_by_inverse_layer_idx},
                 {"tie_word_embeddings", &cfg->tie_word_embeddings}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        const char *v = get(ctx, flags[i].key, buf, sizeof buf);
        if (v && strcmp(v, "0") && strcmp(v, "1"))
            return pt_fail(PT_EFORMAT, "%s: '%s' is '%s', expected 0 or 1", path, flags[i].key, v);
        if (v)
            *flags[i].field = *v == '1';
    }
    return PT_OK;
}

int pt_ckpt_config_parse(pt_ckpt_lookup get, const void *ctx, const char *path,
                         pt_model_config *cfg)
{
    char model_buf[16], widths_buf[160], seed_buf[32], spec_buf[PT_SPEC_MAX_TEXT];
    const char *model = get(ctx, "model", model_buf, sizeof model_buf);
    const char *seed = get(ctx, "seed", seed_buf, sizeof seed_buf);
    if (model && !strcmp(model, "spec")) {
        const char *spec = get(ctx, "spec", spec_buf, sizeof spec_buf);
        int rc = spec ? pt_model_config_spec(spec, cfg)
                      : pt_fail(PT_EFORMAT, "%s: a spec model without its 'spec'", path);
        if (rc != PT_OK)
            return rc;
    } else if (model && !strcmp(model, "mlp")) {
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
        int rc = parse_gpt_variant(get, ctx, path, cfg);
        if (rc != PT_OK)
            return rc;
    } else {
        return pt_fail(PT_EFORMAT, "%s: 'model' is '%s', expected gpt, mlp or spec", path,
                       model ? model : "(missing)");
    }
    if (seed)
        cfg->seed = strtoull(seed, NULL, 10);
    return PT_OK;
}

/* A gpt's config as the checkpoint files record it, for messages. */
static void gpt_text(const pt_model_config *c, char *buf, size_t n)
{
    snprintf(buf, n,
             "layers %d heads %d embd %d positions %d vocab %d n_inner %d %s epsilon %g%s%s%s",
             c->n_layer, c->n_head, c->n_embd, pt_gpt_positions(c), c->vocab, pt_gpt_inner(c),
             pt_hf_activation_name(c->activation), (double)c->layer_norm_epsilon,
             c->scale_attn_weights ? "" : " unscaled attention",
             c->scale_attn_by_inverse_layer_idx ? " attention / layer index" : "",
             c->tie_word_embeddings ? "" : " untied lm_head");
}

static const char *kind_text(pt_model_kind k)
{
    return k == PT_MODEL_GPT ? " gpt" : k == PT_MODEL_MLP ? "n mlp" : " spec";
}

int pt_ckpt_same_config(const pt_model_config *a, const pt_model_config *b, const char *path)
{
    if (a->kind != b->kind)
        return pt_fail(PT_EFORMAT, "%s holds a%s model, not a%s", path, kind_text(a->kind),
                       kind_text(b->kind));
    if (a->kind == PT_MODEL_SPEC) {
        char la[PT_SPEC_MAX_TEXT], lb[PT_SPEC_MAX_TEXT];
        pt_ckpt_spec_line(a->spec, la, sizeof la);
        pt_ckpt_spec_line(b->spec, lb, sizeof lb);
        if (strcmp(la, lb))
            return pt_fail(PT_EFORMAT, "%s holds the spec '%s'; the model is '%s'", path, la, lb);
    }
    if (a->kind == PT_MODEL_GPT &&
        (a->n_layer != b->n_layer || a->n_head != b->n_head || a->n_embd != b->n_embd ||
         pt_gpt_positions(a) != pt_gpt_positions(b) || a->vocab != b->vocab ||
         pt_gpt_inner(a) != pt_gpt_inner(b) || a->activation != b->activation ||
         a->layer_norm_epsilon != b->layer_norm_epsilon ||
         !a->scale_attn_weights != !b->scale_attn_weights ||
         !a->scale_attn_by_inverse_layer_idx != !b->scale_attn_by_inverse_layer_idx ||
         !a->tie_word_embeddings != !b->tie_word_embeddings)) {
        char ta[256], tb[256];
        gpt_text(a, ta, sizeof ta);
        gpt_text(b, tb, sizeof tb);
        return pt_fail(PT_EFORMAT, "%s holds a gpt of %s; the model is %s", path, ta, tb);
    }
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
    if (pt_checkpoint_is_file(path) && opt)
        return pt_fail(PT_EINVAL,
                       "%s: a .safetensors file holds the weights alone; the optimizer state "
                       "needs a checkpoint folder",
                       path);
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
