/* checkpoint_source.c: a checkpoint's tensors, in one file or in a set
 * folder (checkpoint_source.h).
 *
 * A set has two parts, the weights and the moments, each either one file
 * (model.safetensors) or an index and its shards. As transformers does, the
 * single file wins when both are there. The set's identity (run id and
 * step) comes from trainer_state.json, else from the weights index; every
 * index and shard that records one must agree with it, so a shard left from
 * another save is refused rather than mixed in. */
#include "io/checkpoint_source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/hf_config.h"
#include "io/json.h"

typedef struct {
    const char *stem; /* PT_SET_WEIGHTS or PT_SET_MOMENTS */
    int present;
    pt_json *index;     /* NULL when the part is one file */
    const pt_json *map; /* the index's weight_map */
    int n_files;
    char **names;           /* file names inside the folder */
    pt_safetensors **files; /* opened when first needed */
} set_part;

struct pt_ckpt_source {
    char *path;
    pt_safetensors *file; /* a single-file checkpoint */
    int is_set;
    set_part part[2]; /* weights, moments */
    pt_json *state;   /* trainer_state.json, or NULL */
    pt_json *config;  /* config.json, or NULL */
    char run_id[PT_RUN_ID_MAX], step[32];
    const char *identity_from; /* the file the run id and step came from */
    char identity_buf[PT_NAME_MAX];
};

const char *pt_ckpt_source_path(const pt_ckpt_source *s) { return s->path; }

void pt_ckpt_source_close(pt_ckpt_source *s)
{
    if (!s)
        return;
    pt_safetensors_close(s->file);
    for (int p = 0; p < 2; p++) {
        set_part *sp = &s->part[p];
        for (int i = 0; i < sp->n_files; i++) {
            free(sp->names[i]);
            pt_safetensors_close(sp->files[i]);
        }
        free(sp->names);
        free(sp->files);
        pt_json_free(sp->index);
    }
    pt_json_free(s->state);
    pt_json_free(s->config);
    free(s->path);
    free(s);
}

/* ---- JSON values as text ---------------------------------------------- */

/* A string as it is; an unsigned integer, or an array of them (comma
 * separated), written into buf. */
static const char *json_text(const pt_json *v, char *buf, size_t n)
{
    if (!v)
        return NULL;
    if (v->type == PT_JSON_STRING)
        return v->string;
    if (v->type == PT_JSON_NUMBER && v->is_uint) {
        snprintf(buf, n, "%llu", (unsigned long long)v->uint_value);
        return buf;
    }
    if (v->type != PT_JSON_ARRAY || n == 0)
        return NULL;
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < v->n && k < n; i++) {
        if (v->items[i]->type != PT_JSON_NUMBER || !v->items[i]->is_uint)
            return NULL;
        k += (size_t)snprintf(buf + k, n - k, "%s%llu", i ? "," : "",
                              (unsigned long long)v->items[i]->uint_value);
    }
    return buf;
}

static const char *json_lookup(const void *ctx, const char *key, char *buf, size_t n)
{
    return json_text(pt_json_get(ctx, key), buf, n);
}

static const char *meta_lookup(const void *ctx, const char *key, char *buf, size_t n)
{
    (void)buf, (void)n;
    return pt_safetensors_meta(ctx, key);
}

static int read_json(const char *path, pt_json **out) { return pt_json_load(path, 1, out); }

/* ---- The set's identity ------------------------------------------------ */

/* Compares what a file records (run_id, step; either may be absent) with
 * the set's identity, or makes it the identity when the set has none. */
static int check_identity(pt_ckpt_source *s, const char *file, const char *run_id, const char *step)
{
    if (!run_id)
        return PT_OK;
    if (!s->identity_from) {
        snprintf(s->run_id, sizeof s->run_id, "%s", run_id);
        snprintf(s->step, sizeof s->step, "%s", step ? step : "");
        snprintf(s->identity_buf, sizeof s->identity_buf, "%s", file);
        s->identity_from = s->identity_buf;
        return PT_OK;
    }
    if (strcmp(run_id, s->run_id) || (step && *s->step && strcmp(step, s->step)))
        return pt_fail(PT_EFORMAT,
                       "%s/%s is of run '%s' step %s but %s is of run '%s' step %s: files of two "
                       "saves are mixed in this set",
                       s->path, file, run_id, step ? step : "?", s->identity_from, s->run_id,
                       *s->step ? s->step : "?");
    return PT_OK;
}

static int check_json_identity(pt_ckpt_source *s, const char *file, const pt_json *obj)
{
    char step[32];
    return check_identity(s, file, json_text(pt_json_get(obj, "run_id"), NULL, 0),
                          json_text(pt_json_get(obj, "step"), step, sizeof step));
}

/* ---- Opening ----------------------------------------------------------- */

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static int add_file(set_part *sp, const char *name)
{
    for (int i = 0; i < sp->n_files; i++)
        if (!strcmp(sp->names[i], name))
            return PT_OK;
    char **names = realloc(sp->names, (size_t)(sp->n_files + 1) * sizeof *names);
    if (names)
        sp->names = names;
    pt_safetensors **files = realloc(sp->files, (size_t)(sp->n_files + 1) * sizeof *files);
    if (files)
        sp->files = files;
    if (!names || !files || !(sp->names[sp->n_files] = strdup(name)))
        return pt_fail(PT_ENOMEM, "out of memory");
    sp->files[sp->n_files++] = NULL;
    return PT_OK;
}

/* One part of a set: its single file, or its index and the files it names
 * (each of which must exist). */
static int open_part(pt_ckpt_source *s, set_part *sp)
{
    char name[PT_NAME_MAX], path[4096];
    pt_set_file_name(name, sizeof name, sp->stem, 0, 1);
    snprintf(path, sizeof path, "%s/%s", s->path, name);
    if (exists(path)) {
        sp->present = 1;
        return add_file(sp, name);
    }
    pt_set_index_name(name, sizeof name, sp->stem);
    snprintf(path, sizeof path, "%s/%s", s->path, name);
    int rc = read_json(path, &sp->index);
    if (rc != PT_OK)
        return rc == 1 ? PT_OK : rc;
    sp->present = 1;
    sp->map = pt_json_get(sp->index, "weight_map");
    if (!sp->map || sp->map->type != PT_JSON_OBJECT)
        return pt_fail(PT_EFORMAT, "%s: no weight_map object", path);
    const pt_json *meta = pt_json_get(sp->index, "metadata");
    if ((rc = check_json_identity(s, name, meta)) != PT_OK)
        return rc;
    for (size_t i = 0; i < sp->map->n; i++) {
        const pt_json *f = sp->map->items[i];
        if (f->type != PT_JSON_STRING || !*f->string || strchr(f->string, '/'))
            return pt_fail(PT_EFORMAT, "%s: tensor '%s' maps to no file name of this folder", path,
                           sp->map->keys[i]);
        char shard[4096];
        snprintf(shard, sizeof shard, "%s/%s", s->path, f->string);
        if (!exists(shard))
            return pt_fail(PT_EFORMAT, "%s names %s (for '%s'), which is missing", path, f->string,
                           sp->map->keys[i]);
        if ((rc = add_file(sp, f->string)) != PT_OK)
            return rc;
    }
    return PT_OK;
}

static int open_set(pt_ckpt_source *s)
{
    char path[4096];
    s->is_set = 1;
    s->part[0].stem = PT_SET_WEIGHTS;
    s->part[1].stem = PT_SET_MOMENTS;
    snprintf(path, sizeof path, "%s/" PT_SET_STATE, s->path);
    int rc = read_json(path, &s->state);
    if (rc == PT_OK)
        rc = check_json_identity(s, PT_SET_STATE, s->state);
    if (rc == 1 || rc == PT_OK) {
        snprintf(path, sizeof path, "%s/" PT_SET_CONFIG, s->path);
        rc = read_json(path, &s->config);
    }
    for (int p = 0; (rc == 1 || rc == PT_OK) && p < 2; p++)
        rc = open_part(s, &s->part[p]);
    if (rc == PT_OK && !s->part[0].present)
        rc = pt_fail(PT_EFORMAT,
                     "%s: no model.safetensors nor model.safetensors.index.json: not a "
                     "checkpoint set",
                     s->path);
    return rc == 1 ? PT_OK : rc;
}

int pt_ckpt_source_open(const char *path, pt_ckpt_source **out)
{
    *out = NULL;
    pt_ckpt_source *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return pt_fail(PT_ENOMEM, "out of memory");
    }
    struct stat sb;
    int rc;
    if (stat(path, &sb) != 0)
        rc = pt_fail(PT_EIO, "%s: %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode))
        rc = open_set(s);
    else
        rc = pt_safetensors_open(path, &s->file);
    if (rc != PT_OK) {
        pt_ckpt_source_close(s);
        return rc;
    }
    *out = s;
    return PT_OK;
}

/* ---- Finding tensors --------------------------------------------------- */

static int open_shard(pt_ckpt_source *s, set_part *sp, int i)
{
    if (sp->files[i])
        return PT_OK;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", s->path, sp->names[i]);
    int rc = pt_safetensors_open(path, &sp->files[i]);
    if (rc == PT_OK)
        rc = check_identity(s, sp->names[i], pt_safetensors_meta(sp->files[i], "run_id"),
                            pt_safetensors_meta(sp->files[i], "step"));
    return rc;
}

int pt_ckpt_source_find(pt_ckpt_source *s, const char *name, int which, pt_optim_kind kind,
                        const pt_safetensors **st, const pt_st_info **info)
{
    *st = NULL, *info = NULL;
    char tensor[PT_NAME_MAX];
    const char *moment = which < 0 ? NULL : pt_ckpt_moment(kind, which);
    if (which >= 0 && !moment)
        return PT_OK;
    if (!s->is_set) {
        if (moment)
            snprintf(tensor, sizeof tensor, "optimizer.%s.%s", moment, name);
        *st = s->file;
        *info = pt_safetensors_find(s->file, moment ? tensor : name);
        if (!*info && !moment && !strncmp(name, PT_GPT_PREFIX, strlen(PT_GPT_PREFIX)))
            *info = pt_safetensors_find(s->file, name + strlen(PT_GPT_PREFIX));
        return PT_OK;
    }
    set_part *sp = &s->part[which < 0 ? 0 : 1];
    if (moment)
        snprintf(tensor, sizeof tensor, "%s.%s", moment, name);
    const char *tname = moment ? tensor : name;
    if (!sp->present)
        return PT_OK;
    int f = 0;
    if (sp->index) {
        const pt_json *v = pt_json_get(sp->map, tname);
        if (!v && !moment && !strncmp(name, PT_GPT_PREFIX, strlen(PT_GPT_PREFIX)))
            v = pt_json_get(sp->map, tname += strlen(PT_GPT_PREFIX));
        if (!v)
            return PT_OK;
        while (f < sp->n_files && strcmp(sp->names[f], v->string))
            f++;
    }
    int rc = open_shard(s, sp, f);
    if (rc != PT_OK)
        return rc;
    *st = sp->files[f];
    *info = pt_safetensors_find(sp->files[f], tname);
    if (!*info && !sp->index && !moment && !strncmp(name, PT_GPT_PREFIX, strlen(PT_GPT_PREFIX)))
        *info = pt_safetensors_find(sp->files[f], tname += strlen(PT_GPT_PREFIX));
    if (!*info && sp->index)
        return pt_fail(PT_EFORMAT, "%s/%s.safetensors.index.json puts '%s' in %s, which lacks it",
                       s->path, sp->stem, tname, sp->names[f]);
    return PT_OK;
}

/* ---- Config, optimizer, state ----------------------------------------- */

static int dims_of(pt_ckpt_source *s, const char *name, int *shape)
{
    const pt_safetensors *st;
    const pt_st_info *in;
    int rc = pt_ckpt_source_find(s, name, -1, PT_OPTIM_ADAMW, &st, &in);
    if (rc != PT_OK)
        return rc;
    if (!in)
        return pt_fail(PT_EFORMAT, "%s: no tensor '%s'", s->path, name);
    if (in->ndim != 2)
        return pt_fail(PT_EFORMAT, "%s: tensor '%s' has %d dimensions, expected 2", s->path, name,
                       in->ndim);
    memcpy(shape, in->shape, 2 * sizeof(int));
    return PT_OK;
}

/* A gpt config from Hugging Face's tensor names and shapes. */
static int config_from_shapes(pt_ckpt_source *s, int default_heads, pt_model_config *cfg)
{
    int te[2], pe[2], rc;
    if ((rc = dims_of(s, "transformer.wte.weight", te)) != PT_OK ||
        (rc = dims_of(s, "transformer.wpe.weight", pe)) != PT_OK)
        return rc;
    *cfg = pt_model_config_gpt();
    cfg->vocab = te[0], cfg->n_embd = te[1], cfg->seq_len = cfg->n_positions = pe[0];
    int fc[2];
    if ((rc = dims_of(s, "transformer.h.0.mlp.c_fc.weight", fc)) != PT_OK)
        return rc;
    cfg->n_inner = fc[1];
    char name[96];
    for (cfg->n_layer = 0;; cfg->n_layer++) {
        const pt_safetensors *st;
        const pt_st_info *in;
        snprintf(name, sizeof name, "transformer.h.%d.ln_1.weight", cfg->n_layer);
        if ((rc = pt_ckpt_source_find(s, name, -1, PT_OPTIM_ADAMW, &st, &in)) != PT_OK)
            return rc;
        if (!in)
            break;
    }
    cfg->n_head = default_heads;
    const char *heads = s->file ? pt_safetensors_meta(s->file, "n_head") : NULL;
    if (heads && atoi(heads) > 0)
        cfg->n_head = atoi(heads);
    return PT_OK;
}

/* config.json beside a single file (in its folder), when there is one. */
static int config_beside(pt_ckpt_source *s, char *where, size_t n)
{
    const char *slash = strrchr(s->path, '/');
    if (slash)
        snprintf(where, n, "%.*s/" PT_SET_CONFIG, (int)(slash - s->path), s->path);
    else
        snprintf(where, n, PT_SET_CONFIG);
    return read_json(where, &s->config);
}

int pt_ckpt_source_config(pt_ckpt_source *s, int default_heads, pt_model_config *cfg)
{
    char where[4096];
    int rc = 1;
    if (s->file && pt_safetensors_meta(s->file, "model"))
        return pt_ckpt_config_parse(meta_lookup, s->file, s->path, cfg);
    if (s->state && pt_json_get(s->state, "model")) {
        snprintf(where, sizeof where, "%s/" PT_SET_STATE, s->path);
        return pt_ckpt_config_parse(json_lookup, pt_json_get(s->state, "model"), where, cfg);
    }
    if (s->file && !s->config)
        rc = config_beside(s, where, sizeof where);
    else if (s->config)
        rc = PT_OK, snprintf(where, sizeof where, "%s/" PT_SET_CONFIG, s->path);
    if (rc == PT_OK)
        return pt_hf_config_read(s->config, where, cfg);
    return rc == 1 ? config_from_shapes(s, default_heads, cfg) : rc;
}

const pt_json *pt_ckpt_source_hf_config(const pt_ckpt_source *s) { return s->config; }

const char *pt_ckpt_source_optimizer(const pt_ckpt_source *s)
{
    if (s->file)
        return pt_safetensors_meta(s->file, "optimizer");
    if (!s->part[1].present)
        return NULL;
    return json_text(pt_json_get(s->state, "optimizer"), NULL, 0);
}

static int state_from_json(const pt_ckpt_source *s, pt_train_state *state)
{
    const pt_json *step = pt_json_get(s->state, "step"), *rng = pt_json_get(s->state, "data_rng");
    const pt_json *drawn = pt_json_get(s->state, "data_drawn");
    if (!step)
        return 1;
    char hex[65] = "";
    for (size_t i = 0; rng && rng->type == PT_JSON_ARRAY && rng->n == 4 && i < 4; i++)
        if (rng->items[i]->type == PT_JSON_STRING && strlen(rng->items[i]->string) == 16)
            memcpy(hex + 16 * i, rng->items[i]->string, 17);
    if (!step->is_int || step->int_value < 0 || pt_ckpt_parse_rng(hex, &state->data_rng) ||
        (drawn && !drawn->is_uint))
        return pt_fail(PT_EFORMAT,
                       "%s/" PT_SET_STATE ": step, data_rng (four 16-digit hex words) or "
                       "data_drawn is malformed",
                       s->path);
    state->step = (long)step->int_value;
    state->data_drawn = drawn ? drawn->uint_value : 0;
    return PT_OK;
}

int pt_ckpt_source_state(const pt_ckpt_source *s, pt_train_state *state)
{
    if (!s->file)
        return s->state ? state_from_json(s, state) : 1;
    const char *step = pt_safetensors_meta(s->file, "step");
    const char *rng = pt_safetensors_meta(s->file, "data_rng");
    const char *drawn = pt_safetensors_meta(s->file, "data_drawn");
    if (!step && !rng)
        return 1;
    char *end = NULL;
    state->step = step ? strtol(step, &end, 10) : -1;
    if (!step || *end || state->step < 0 || pt_ckpt_parse_rng(rng, &state->data_rng))
        return pt_fail(PT_EFORMAT, "%s: metadata step '%s' or data_rng '%s' is malformed", s->path,
                       step ? step : "(missing)", rng ? rng : "(missing)");
    state->data_drawn = drawn ? strtoull(drawn, NULL, 10) : 0;
    return PT_OK;
}

/* ---- Names the model does not know ------------------------------------ */

static int check_name(const pt_ckpt_source *s, const pt_model *m, const char *name, int moment)
{
    const char *param = name;
    if (moment) {
        param = strchr(name, '.');
        param = param ? param + 1 : name;
    }
    char prefixed[PT_NAME_MAX];
    snprintf(prefixed, sizeof prefixed, PT_GPT_PREFIX "%s", param);
    if (pt_model_find_param(m, param) || pt_ckpt_ignorable(param) ||
        (!moment && pt_model_find_param(m, prefixed)))
        return PT_OK;
    return pt_fail(PT_EFORMAT, "%s: tensor '%s' is not a%s parameter of this model", s->path, name,
                   moment ? " moment of a" : "");
}

int pt_ckpt_source_check_names(pt_ckpt_source *s, const pt_model *m)
{
    int rc = PT_OK;
    if (s->file) {
        for (int i = 0; rc == PT_OK && i < pt_safetensors_count(s->file); i++) {
            const char *name = pt_safetensors_info(s->file, i)->name;
            if (strncmp(name, "optimizer.", 10))
                rc = check_name(s, m, name, 0);
        }
        return rc;
    }
    for (int p = 0; rc == PT_OK && p < 2; p++) {
        set_part *sp = &s->part[p];
        if (sp->present && sp->index) {
            for (size_t i = 0; rc == PT_OK && i < sp->map->n; i++)
                rc = check_name(s, m, sp->map->keys[i], p);
        } else if (sp->present && (rc = open_shard(s, sp, 0)) == PT_OK) {
            for (int i = 0; rc == PT_OK && i < pt_safetensors_count(sp->files[0]); i++)
                rc = check_name(s, m, pt_safetensors_info(sp->files[0], i)->name, p);
        }
    }
    return rc;
}
