/* checkpoint.c: saving and loading a run's state (checkpoint.h). */
#include "io/checkpoint.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "tensor/error.h"

#define MAX_META 16

static const char *state_prefix(pt_optim_kind kind, int which)
{
    if (kind == PT_OPTIM_SGD)
        return which == 0 ? "optimizer.momentum." : NULL;
    return which == 0 ? "optimizer.exp_avg." : "optimizer.exp_avg_sq.";
}

static const char *optim_name(pt_optim_kind kind) { return kind == PT_OPTIM_SGD ? "sgd" : "adamw"; }

typedef struct {
    char key[MAX_META][24];
    char value[MAX_META][160];
    pt_st_meta meta[MAX_META];
    int n;
} meta_list;

static void meta_add(meta_list *l, const char *key, const char *fmt, ...) PT_PRINTF(3, 4);

static void meta_add(meta_list *l, const char *key, const char *fmt, ...)
{
    va_list ap;
    snprintf(l->key[l->n], sizeof l->key[0], "%s", key);
    va_start(ap, fmt);
    vsnprintf(l->value[l->n], sizeof l->value[0], fmt, ap);
    va_end(ap);
    l->meta[l->n] = (pt_st_meta){l->key[l->n], l->value[l->n]};
    l->n++;
}

static void config_meta(meta_list *l, const pt_model_config *c)
{
    meta_add(l, "format", "pipetrain");
    if (c->kind == PT_MODEL_GPT) {
        meta_add(l, "model", "gpt");
        meta_add(l, "n_layer", "%d", c->n_layer);
        meta_add(l, "n_head", "%d", c->n_head);
        meta_add(l, "n_embd", "%d", c->n_embd);
        meta_add(l, "n_positions", "%d", c->seq_len);
        meta_add(l, "vocab_size", "%d", c->vocab);
    } else {
        char widths[160] = "";
        for (int i = 0; i < c->n_widths; i++)
            snprintf(widths + strlen(widths), sizeof widths - strlen(widths), "%s%d", i ? "," : "",
                     c->widths[i]);
        meta_add(l, "model", "mlp");
        meta_add(l, "widths", "%s", widths);
    }
    meta_add(l, "seed", "%" PRIu64, c->seed);
}

int pt_checkpoint_save(const char *path, const pt_model *m, pt_optimizer *opt,
                       const pt_train_state *state)
{
    int n = pt_model_n_params(m);
    pt_st_tensor *t = calloc((size_t)n * 3, sizeof *t);
    char(*names)[128] = calloc((size_t)n * 2, sizeof *names);
    if (!t || !names) {
        free(t), free(names);
        return pt_fail(PT_ENOMEM, "cannot allocate the checkpoint's tensor list");
    }
    int nt = 0, nn = 0;
    for (int i = 0; i < n; i++) {
        const pt_param *p = pt_model_param(m, i);
        if (p->tied_to)
            continue;
        t[nt] =
            (pt_st_tensor){.name = p->name, .dtype = PT_DT_F32, .ndim = p->ndim, .data = p->data};
        memcpy(t[nt].shape, p->shape, sizeof(int) * (size_t)p->ndim);
        nt++;
    }
    pt_optim_kind kind = opt ? pt_optimizer_config(opt)->kind : PT_OPTIM_ADAMW;
    for (int which = 0; opt && which < 2; which++) {
        const char *prefix = state_prefix(kind, which);
        for (int i = 0; prefix && i < n; i++) {
            const pt_param *p = pt_model_param(m, i);
            if (p->tied_to)
                continue;
            snprintf(names[nn], sizeof names[0], "%s%s", prefix, p->name);
            t[nt] = (pt_st_tensor){.name = names[nn++],
                                   .dtype = PT_DT_F32,
                                   .ndim = p->ndim,
                                   .data = pt_optimizer_state(opt, m, i, which)};
            memcpy(t[nt].shape, p->shape, sizeof(int) * (size_t)p->ndim);
            nt++;
        }
    }
    meta_list l = {.n = 0};
    config_meta(&l, pt_model_get_config(m));
    if (opt)
        meta_add(&l, "optimizer", "%s", optim_name(kind));
    if (state) {
        const uint64_t *s = state->data_rng.s;
        meta_add(&l, "step", "%ld", state->step);
        meta_add(&l, "data_rng", "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, s[0],
                 s[1], s[2], s[3]);
        meta_add(&l, "data_drawn", "%" PRIu64, state->data_drawn);
    }
    int rc = pt_safetensors_write(path, t, nt, l.meta, l.n);
    free(t);
    free(names);
    return rc;
}

/* ---- reading ---- */

static int meta_int(const pt_safetensors *st, const char *key, int *out)
{
    const char *v = pt_safetensors_meta(st, key);
    if (!v)
        return 0;
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < 1 || x > 1 << 30)
        return -1;
    *out = (int)x;
    return 1;
}

static int dims_of(const pt_safetensors *st, const char *path, const char *name, int ndim,
                   int *shape)
{
    const pt_st_info *in = pt_safetensors_find(st, name);
    if (!in)
        return pt_fail(PT_EFORMAT, "%s: no tensor '%s'", path, name);
    if (in->ndim != ndim)
        return pt_fail(PT_EFORMAT, "%s: tensor '%s' has %d dimensions, expected %d", path, name,
                       in->ndim, ndim);
    memcpy(shape, in->shape, sizeof(int) * (size_t)ndim);
    return PT_OK;
}

/* A gpt config from Hugging Face's tensor names and shapes. */
static int config_from_shapes(const pt_safetensors *st, const char *path, int default_heads,
                              pt_model_config *cfg)
{
    int te[2], pe[2], rc;
    if ((rc = dims_of(st, path, "transformer.wte.weight", 2, te)) != PT_OK ||
        (rc = dims_of(st, path, "transformer.wpe.weight", 2, pe)) != PT_OK)
        return rc;
    *cfg = pt_model_config_gpt();
    cfg->vocab = te[0], cfg->n_embd = te[1], cfg->seq_len = pe[0];
    char name[96];
    int layers = 0;
    for (;; layers++) {
        snprintf(name, sizeof name, "transformer.h.%d.ln_1.weight", layers);
        if (!pt_safetensors_find(st, name))
            break;
    }
    cfg->n_layer = layers;
    cfg->n_head = default_heads;
    int heads;
    if (meta_int(st, "n_head", &heads) > 0)
        cfg->n_head = heads;
    return PT_OK;
}

static int config_from_meta(const pt_safetensors *st, const char *path, pt_model_config *cfg)
{
    const char *model = pt_safetensors_meta(st, "model");
    const char *seed = pt_safetensors_meta(st, "seed");
    if (model && !strcmp(model, "mlp")) {
        const char *w = pt_safetensors_meta(st, "widths");
        int widths[PT_MLP_MAX_WIDTHS], n = 0;
        for (const char *p = w; p && *p && n < PT_MLP_MAX_WIDTHS;) {
            char *end;
            long x = strtol(p, &end, 10);
            if (end == p || x < 1)
                return pt_fail(PT_EFORMAT, "%s: metadata widths '%s' is not a list of widths", path,
                               w);
            widths[n++] = (int)x;
            p = *end == ',' ? end + 1 : end;
            if (*end != ',' && *end != '\0')
                return pt_fail(PT_EFORMAT, "%s: metadata widths '%s' is malformed", path, w);
        }
        *cfg = pt_model_config_mlp(n, widths);
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
            if (meta_int(st, f[i].key, f[i].field) != 1)
                return pt_fail(PT_EFORMAT, "%s: metadata '%s' is missing or not a positive integer",
                               path, f[i].key);
    } else {
        return pt_fail(PT_EFORMAT, "%s: metadata 'model' is '%s', expected gpt or mlp", path,
                       model ? model : "(missing)");
    }
    if (seed)
        cfg->seed = strtoull(seed, NULL, 10);
    return PT_OK;
}

static int read_config(const pt_safetensors *st, const char *path, int default_heads,
                       pt_model_config *cfg)
{
    const char *format = pt_safetensors_meta(st, "format");
    if (format && !strcmp(format, "pipetrain"))
        return config_from_meta(st, path, cfg);
    return config_from_shapes(st, path, default_heads, cfg);
}

int pt_checkpoint_read_config(const char *path, int default_heads, pt_model_config *cfg)
{
    pt_safetensors *st;
    int rc = pt_safetensors_open(path, &st);
    if (rc != PT_OK)
        return rc;
    rc = read_config(st, path, default_heads, cfg);
    pt_safetensors_close(st);
    return rc;
}

static int same_config(const pt_model_config *a, const pt_model_config *b, const char *path)
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

/* Tensors a file may carry that the model has no use for: GPT-2's causal
 * mask buffers, as older transformers versions saved them. */
static int ignorable(const char *name)
{
    size_t n = strlen(name);
    return (n > 10 && !strcmp(name + n - 10, ".attn.bias")) ||
           (n > 17 && !strcmp(name + n - 17, ".attn.masked_bias"));
}

/* Every check before anything is copied, so a refused file changes nothing. */
static int check_tensors(const pt_safetensors *st, const char *path, const pt_model *m,
                         pt_optim_kind kind, int with_state)
{
    char name[160];
    for (int i = 0; i < pt_model_n_params(m); i++) {
        const pt_param *p = pt_model_param(m, i);
        if (!p->data)
            continue; /* a block this stage does not hold */
        for (int which = -1; which < (with_state ? 2 : 0); which++) {
            const char *prefix = which < 0 ? "" : state_prefix(kind, which);
            if (!prefix)
                continue;
            snprintf(name, sizeof name, "%s%s", prefix, p->name);
            const pt_st_info *in = pt_safetensors_find(st, name);
            if (!in && p->tied_to)
                continue; /* restored from what it copies */
            if (!in)
                return pt_fail(PT_EFORMAT, "%s: no tensor '%s'%s", path, name,
                               which >= 0 ? " (optimizer state needed to resume)" : "");
            if (in->dtype != PT_DT_F32)
                return pt_fail(PT_EFORMAT, "%s: tensor '%s' is %s, expected F32", path, name,
                               pt_dtype_name(in->dtype));
            int same = in->ndim == p->ndim;
            for (int d = 0; same && d < p->ndim; d++)
                same = in->shape[d] == p->shape[d];
            if (!same)
                return pt_fail(PT_EFORMAT,
                               "%s: tensor '%s' has another shape than the model's "
                               "(%d dims, first %d; expected %d dims, first %d)",
                               path, name, in->ndim, in->ndim ? in->shape[0] : 0, p->ndim,
                               p->shape[0]);
        }
    }
    for (int i = 0; i < pt_safetensors_count(st); i++) {
        const char *tn = pt_safetensors_info(st, i)->name;
        if (!pt_model_find_param(m, tn) && strncmp(tn, "optimizer.", 10) && !ignorable(tn))
            return pt_fail(PT_EFORMAT, "%s: tensor '%s' is not a parameter of this model", path,
                           tn);
    }
    return PT_OK;
}

static int read_state(const pt_safetensors *st, const char *path, pt_train_state *state)
{
    const char *step = pt_safetensors_meta(st, "step");
    const char *rng = pt_safetensors_meta(st, "data_rng");
    const char *drawn = pt_safetensors_meta(st, "data_drawn");
    if (!step || !rng || strlen(rng) != 64)
        return pt_fail(PT_EFORMAT,
                       "%s: metadata 'step' or 'data_rng' is missing: not a "
                       "checkpoint a run can resume from",
                       path);
    char *end;
    state->step = strtol(step, &end, 10);
    if (*end || state->step < 0)
        return pt_fail(PT_EFORMAT, "%s: metadata step '%s' is not a step count", path, step);
    for (int i = 0; i < 4; i++) {
        char word[17];
        memcpy(word, rng + 16 * i, 16);
        word[16] = '\0';
        state->data_rng.s[i] = strtoull(word, &end, 16);
        if (*end)
            return pt_fail(PT_EFORMAT, "%s: metadata data_rng is not hexadecimal", path);
    }
    state->data_drawn = drawn ? strtoull(drawn, NULL, 10) : 0;
    return PT_OK;
}

int pt_checkpoint_load(const char *path, pt_model *m, pt_optimizer *opt, pt_train_state *state)
{
    pt_safetensors *st;
    int rc = pt_safetensors_open(path, &st);
    if (rc != PT_OK)
        return rc;
    pt_model_config file_cfg;
    const pt_model_config *cfg = pt_model_get_config(m);
    rc = read_config(st, path, cfg->n_head, &file_cfg);
    if (rc == PT_OK)
        rc = same_config(&file_cfg, cfg, path);
    pt_optim_kind kind = opt ? pt_optimizer_config(opt)->kind : PT_OPTIM_ADAMW;
    int with_state = opt && state;
    if (rc == PT_OK && with_state) {
        const char *saved = pt_safetensors_meta(st, "optimizer");
        if (!saved || strcmp(saved, optim_name(kind)))
            rc = pt_fail(PT_EFORMAT, "%s: holds %s optimizer state; this run uses %s", path,
                         saved ? saved : "no", optim_name(kind));
    }
    pt_train_state loaded = {0};
    if (rc == PT_OK && with_state)
        rc = read_state(st, path, &loaded);
    if (rc == PT_OK)
        rc = check_tensors(st, path, m, kind, with_state);
    char name[160];
    for (int i = 0; rc == PT_OK && i < pt_model_n_params(m); i++) {
        const pt_param *p = pt_model_param(m, i);
        if (!p->data)
            continue;
        for (int which = -1; rc == PT_OK && which < (with_state ? 2 : 0); which++) {
            const char *prefix = which < 0 ? "" : state_prefix(kind, which);
            if (!prefix)
                continue;
            snprintf(name, sizeof name, "%s%s", prefix, p->name);
            if (!pt_safetensors_find(st, name))
                continue; /* a tied copy, restored below */
            float *dst = which < 0 ? p->data : pt_optimizer_state(opt, m, i, which);
            rc = pt_safetensors_read(st, name, PT_DT_F32, p->ndim, p->shape, dst);
        }
    }
    for (int i = 0; rc == PT_OK && i < pt_model_n_params(m); i++) {
        const pt_param *p = pt_model_param(m, i);
        snprintf(name, sizeof name, "%s", p->name);
        if (!p->tied_to || !p->data || pt_safetensors_find(st, name))
            continue;
        /* the copy takes what it copies, from the file: this stage may not
         * hold the original */
        for (int which = -1; rc == PT_OK && which < (with_state ? 2 : 0); which++) {
            const char *prefix = which < 0 ? "" : state_prefix(kind, which);
            if (!prefix)
                continue;
            snprintf(name, sizeof name, "%s%s", prefix, p->tied_to);
            float *dst = which < 0 ? p->data : pt_optimizer_state(opt, m, i, which);
            rc = pt_safetensors_read(st, name, PT_DT_F32, p->ndim, p->shape, dst);
        }
    }
    if (rc == PT_OK && with_state)
        *state = loaded;
    pt_safetensors_close(st);
    return rc;
}
