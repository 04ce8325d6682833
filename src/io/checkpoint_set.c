/* checkpoint_set.c: writing a checkpoint set: every stage its own shard,
 * then one worker publishes (checkpoint.h).
 *
 * A save goes to a staging folder beside the destination,
 * "<dest>.staging.<pid>.<n>". Stages write their weights and moments there
 * (each file atomically). Publishing checks the shards against the model
 * from their headers alone, writes trainer_state.json, config.json and the
 * indexes (the weights index last), and then swaps the staging folder and
 * the old set in one rename (renameat2's RENAME_EXCHANGE; a plain rename
 * when there is no old set) and removes the old one. A kill at any moment
 * thus leaves under dest either the old set or the new one, whole; what it
 * leaves beside dest is one staging folder, which the next begin removes.
 * Folder handling (what may be replaced, stale leftovers, the swap) is in
 * checkpoint_folder.c. */
#include "io/checkpoint_folder.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/hf_config.h"
#include "io/json.h"

int pt_checkpoint_new_run_id(char *buf, size_t n)
{
    uint64_t r[2];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        r[0] = (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
        r[1] = (uint64_t)clock() ^ (uint64_t)(uintptr_t)buf;
    }
    if (n < 33)
        return pt_fail(PT_EINVAL, "a run id needs 33 bytes, the buffer has %zu", n);
    snprintf(buf, n, "%016" PRIx64 "%016" PRIx64, r[0], r[1]);
    return PT_OK;
}

/* ---- Writing a shard --------------------------------------------------- */

/* The held tensors of moments which_from..which_to (-1: the weights), tied
 * copies left out, in model order. */
static int shard_list(const pt_model *m, pt_optimizer *opt, pt_optim_kind kind, int which_from,
                      int which_to, pt_st_tensor *t, char (*names)[PT_NAME_MAX])
{
    int nt = 0;
    for (int which = which_from; which <= which_to; which++) {
        const char *moment = which < 0 ? NULL : pt_ckpt_moment(kind, which);
        for (int i = 0; (which < 0 || moment) && i < pt_model_n_params(m); i++) {
            const pt_param *p = pt_model_param(m, i);
            if (p->tied_to || !p->data)
                continue;
            t[nt] = (pt_st_tensor){.name = p->name, .dtype = PT_DT_F32, .ndim = p->ndim};
            memcpy(t[nt].shape, p->shape, sizeof p->shape);
            t[nt].data = moment ? pt_optimizer_state(opt, m, i, which) : p->data;
            if (moment) {
                snprintf(names[nt], PT_NAME_MAX, "%s.%s", moment, p->name);
                t[nt].name = names[nt];
            }
            nt++;
        }
    }
    return nt;
}

int pt_checkpoint_write_shard(const char *staging, int shard, int n_shards, const pt_model *stage,
                              pt_optimizer *opt, const pt_train_state *state, const char *run_id)
{
    if (n_shards < 1 || n_shards > 99999 || shard < 0 || shard >= n_shards)
        return pt_fail(PT_EINVAL, "shard %d of %d: expected 0 <= shard < shards <= 99999", shard,
                       n_shards);
    int rc = pt_ckpt_check_run_id(run_id);
    if (rc != PT_OK)
        return rc;
    int n = pt_model_n_params(stage);
    pt_st_tensor *t = calloc((size_t)n * 2 + 1, sizeof *t);
    char(*names)[PT_NAME_MAX] = calloc((size_t)n * 2 + 1, sizeof *names);
    if (!t || !names) {
        free(t), free(names);
        return pt_fail(PT_ENOMEM, "cannot allocate shard %d's tensor list", shard);
    }
    pt_optim_kind kind = opt ? pt_optimizer_config(opt)->kind : PT_OPTIM_ADAMW;
    for (int part = 0; rc == PT_OK && part < (opt ? 2 : 1); part++) {
        pt_ckpt_meta l = {.n = 0};
        pt_ckpt_meta_add(&l, "format", "pt");
        pt_ckpt_meta_add(&l, "run_id", "%s", run_id);
        if (state)
            pt_ckpt_meta_add(&l, "step", "%ld", state->step);
        if (part)
            pt_ckpt_meta_add(&l, "optimizer", "%s", pt_ckpt_optim_name(kind));
        int nt = part ? shard_list(stage, opt, kind, 0, 1, t, names)
                      : shard_list(stage, NULL, kind, -1, -1, t, names);
        char name[PT_NAME_MAX], path[4096];
        pt_set_file_name(name, sizeof name, part ? PT_SET_MOMENTS : PT_SET_WEIGHTS, shard,
                         n_shards);
        snprintf(path, sizeof path, "%s/%s", staging, name);
        rc = pt_safetensors_write(path, t, nt, l.meta, l.n);
    }
    free(t), free(names);
    return rc;
}

/* ---- Publishing: the shards against the model ------------------------- */

typedef struct {
    int n;
    pt_safetensors **files;
    char (*names)[PT_NAME_MAX];
    int *holder; /* per parameter of the model: the shard holding it, or -1 */
    uint64_t total_size;
} shard_set;

static void shards_close(shard_set *s)
{
    for (int k = 0; s->files && k < s->n; k++)
        pt_safetensors_close(s->files[k]);
    free(s->files), free(s->names), free(s->holder);
}

static int shards_open(shard_set *s, const char *staging, const char *stem, int n_shards,
                       const char *run_id, const pt_train_state *state, int n_params)
{
    s->n = n_shards;
    s->files = calloc((size_t)n_shards, sizeof *s->files);
    s->names = calloc((size_t)n_shards, sizeof *s->names);
    s->holder = calloc((size_t)n_params + 1, sizeof *s->holder);
    if (!s->files || !s->names || !s->holder)
        return pt_fail(PT_ENOMEM, "out of memory");
    char path[4096], step[32];
    snprintf(step, sizeof step, "%ld", state ? state->step : 0);
    for (int k = 0; k < n_shards; k++) {
        pt_set_file_name(s->names[k], PT_NAME_MAX, stem, k, n_shards);
        snprintf(path, sizeof path, "%s/%s", staging, s->names[k]);
        if (access(path, F_OK) != 0)
            return pt_fail(PT_EIO, "%s: shard %d of %d was not written (did its stage fail?)", path,
                           k + 1, n_shards);
        int rc = pt_safetensors_open(path, &s->files[k]);
        if (rc != PT_OK)
            return rc;
        const char *id = pt_safetensors_meta(s->files[k], "run_id");
        const char *st = pt_safetensors_meta(s->files[k], "step");
        if (!id || strcmp(id, run_id) || (state && (!st || strcmp(st, step))))
            return pt_fail(PT_EFORMAT, "%s is of run '%s' step %s, this save is run '%s' step %s",
                           path, id ? id : "(none)", st ? st : "(none)", run_id,
                           state ? step : "(none)");
    }
    return PT_OK;
}

/* Every parameter of desc (which_from -1: its weights; 0..1 its moments)
 * in exactly one shard, as F32 of its shape, both moments of a parameter in
 * the same shard, and nothing else in any shard. */
static int shards_cover(shard_set *s, const char *staging, const pt_model *desc, int which_from,
                        int which_to, pt_optim_kind kind)
{
    char tname[PT_NAME_MAX];
    int expected = 0, found = 0;
    for (int which = which_from; which <= which_to; which++) {
        const char *moment = which < 0 ? NULL : pt_ckpt_moment(kind, which);
        for (int i = 0; (which < 0 || moment) && i < pt_model_n_params(desc); i++) {
            const pt_param *p = pt_model_param(desc, i);
            if (p->tied_to)
                continue;
            snprintf(tname, sizeof tname, "%s%s%s", moment ? moment : "", moment ? "." : "",
                     p->name);
            int holder = -1;
            for (int k = 0; k < s->n; k++) {
                const pt_st_info *in = pt_safetensors_find(s->files[k], tname);
                if (!in)
                    continue;
                if (holder >= 0)
                    return pt_fail(PT_EFORMAT, "%s: '%s' is in both %s and %s", staging, tname,
                                   s->names[holder], s->names[k]);
                int same = in->dtype == PT_DT_F32 && in->ndim == p->ndim;
                for (int d = 0; same && d < p->ndim; d++)
                    same = in->shape[d] == p->shape[d];
                if (!same)
                    return pt_fail(PT_EFORMAT, "%s/%s: '%s' is not F32 of the model's shape",
                                   staging, s->names[k], tname);
                holder = k;
                s->total_size += in->end - in->begin;
            }
            if (holder < 0)
                return pt_fail(PT_EFORMAT, "%s: no shard holds '%s' (no stage saved its block)",
                               staging, tname);
            if (which > 0 && holder != s->holder[i])
                return pt_fail(PT_EFORMAT, "%s: the moments of '%s' are in two shards", staging,
                               p->name);
            s->holder[i] = holder;
            expected++;
        }
    }
    for (int k = 0; k < s->n; k++)
        found += pt_safetensors_count(s->files[k]);
    if (found != expected)
        return pt_fail(PT_EFORMAT,
                       "%s: the shards hold %d tensors, the model %d: a shard holds a tensor "
                       "that is not the model's",
                       staging, found, expected);
    return PT_OK;
}

/* ---- Publishing: the JSON files --------------------------------------- */

static int write_json(const char *dir, const char *name, char *text, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = pt_atomic_write_file(path, text, len);
    free(text);
    return rc;
}

/* A config value as JSON: digits are a number, digits and commas an array
 * of numbers (widths), anything else a string. */
static void write_value(FILE *f, const char *v)
{
    size_t n = strlen(v), digits = strspn(v, "0123456789");
    if (n && digits == n && n < 20)
        fputs(v, f);
    else if (n && strspn(v, "0123456789,") == n && v[n - 1] != ',')
        fprintf(f, "[%s]", v);
    else
        pt_json_write_string(f, v, n);
}

static int write_trainer_state(const char *staging, int n_shards, const pt_model *desc,
                               const pt_optimizer *opt, const pt_train_state *state,
                               const char *run_id)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return pt_fail(PT_ENOMEM, "out of memory");
    fprintf(f, "{\n  \"format\": \"pipetrain\",\n  \"run_id\": \"%s\",\n  \"shards\": %d,\n",
            run_id, n_shards);
    if (state) {
        const uint64_t *s = state->data_rng.s;
        fprintf(f,
                "  \"step\": %ld,\n  \"data_rng\": [\"%016" PRIx64 "\", \"%016" PRIx64
                "\", \"%016" PRIx64 "\", \"%016" PRIx64 "\"],\n  \"data_drawn\": %" PRIu64 ",\n",
                state->step, s[0], s[1], s[2], s[3], state->data_drawn);
    }
    if (opt)
        fprintf(f, "  \"optimizer\": \"%s\",\n",
                pt_ckpt_optim_name(pt_optimizer_config(opt)->kind));
    pt_ckpt_meta l = {.n = 0};
    pt_ckpt_config_meta(&l, pt_model_get_config(desc));
    fputs("  \"model\": {", f);
    for (int i = 1; i < l.n; i++) { /* 0 is "format" */
        fprintf(f, "%s\"%s\": ", i > 1 ? ", " : "", l.key[i]);
        write_value(f, l.meta[i].value);
    }
    fputs("}\n}\n", f);
    if (fclose(f) != 0)
        return free(text), pt_fail(PT_ENOMEM, "out of memory");
    return write_json(staging, PT_SET_STATE, text, len);
}

/* transformers' GPT-2 config, true to what pipetrain computes, with the
 * token ids of the tokenizer the set carries (pt_checkpoint_write_tokenizer
 * put it there before). */
static int write_hf_config(const char *staging, const pt_model_config *c)
{
    int endoftext = -1;
    pt_tokenizer *tok;
    if (pt_tokenizer_find(staging)) {
        int rc = pt_tokenizer_load(staging, &tok);
        if (rc != PT_OK)
            return rc;
        endoftext = pt_tokenizer_endoftext(tok);
        pt_tokenizer_destroy(tok);
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return pt_fail(PT_ENOMEM, "out of memory");
    int rc = pt_hf_config_write(f, c, endoftext);
    if (fclose(f) != 0 || rc != PT_OK)
        return free(text), rc != PT_OK ? rc : pt_fail(PT_ENOMEM, "out of memory");
    return write_json(staging, PT_SET_CONFIG, text, len);
}

/* The index of a part of n > 1 shards; tensors in model order. */
static int write_index(const char *staging, const char *stem, const shard_set *s,
                       const pt_model *desc, pt_optim_kind kind, int moments, const char *run_id,
                       const pt_train_state *state)
{
    char *text = NULL, name[PT_NAME_MAX];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return pt_fail(PT_ENOMEM, "out of memory");
    fprintf(f, "{\n  \"metadata\": {\"total_size\": %" PRIu64 ", \"run_id\": \"%s\"", s->total_size,
            run_id);
    if (state)
        fprintf(f, ", \"step\": %ld", state->step);
    fputs("},\n  \"weight_map\": {", f);
    const char *sep = "\n";
    for (int which = moments ? 0 : -1; which < (moments ? 2 : 0); which++) {
        const char *moment = which < 0 ? NULL : pt_ckpt_moment(kind, which);
        for (int i = 0; (which < 0 || moment) && i < pt_model_n_params(desc); i++) {
            const pt_param *p = pt_model_param(desc, i);
            if (p->tied_to)
                continue;
            snprintf(name, sizeof name, "%s%s%s", moment ? moment : "", moment ? "." : "", p->name);
            fprintf(f, "%s    ", sep);
            pt_json_write_string(f, name, strlen(name));
            fprintf(f, ": \"%s\"", s->names[s->holder[i]]);
            sep = ",\n";
        }
    }
    fputs("\n  }\n}\n", f);
    if (fclose(f) != 0)
        return free(text), pt_fail(PT_ENOMEM, "out of memory");
    pt_set_index_name(name, sizeof name, stem);
    return write_json(staging, name, text, len);
}

/* ---- Publishing -------------------------------------------------------- */

static int finish_staging(const char *staging, int n_shards, const pt_model *desc,
                          const pt_optimizer *opt, const pt_train_state *state, const char *run_id)
{
    int n = pt_model_n_params(desc), rc = PT_OK;
    pt_optim_kind kind = opt ? pt_optimizer_config(opt)->kind : PT_OPTIM_ADAMW;
    shard_set parts[2] = {{0}, {0}};
    for (int part = 0; rc == PT_OK && part < (opt ? 2 : 1); part++) {
        rc = shards_open(&parts[part], staging, part ? PT_SET_MOMENTS : PT_SET_WEIGHTS, n_shards,
                         run_id, state, n);
        if (rc == PT_OK)
            rc = shards_cover(&parts[part], staging, desc, part ? 0 : -1, part ? 1 : -1, kind);
    }
    if (rc == PT_OK)
        rc = write_trainer_state(staging, n_shards, desc, opt, state, run_id);
    if (rc == PT_OK && pt_model_get_config(desc)->kind == PT_MODEL_GPT)
        rc = write_hf_config(staging, pt_model_get_config(desc));
    for (int part = 1; rc == PT_OK && n_shards > 1 && part >= 0; part--)
        if (part == 0 || opt)
            rc = write_index(staging, part ? PT_SET_MOMENTS : PT_SET_WEIGHTS, &parts[part], desc,
                             kind, part, run_id, state);
    shards_close(&parts[0]);
    shards_close(&parts[1]);
    if (rc == PT_OK)
        pt_sync_dir(staging);
    return rc;
}

int pt_checkpoint_publish(const char *staging, const char *dest, int n_shards, const pt_model *desc,
                          const pt_optimizer *opt, const pt_train_state *state, const char *run_id)
{
    int rc = pt_ckpt_check_run_id(run_id);
    if (rc == PT_OK && (n_shards < 1 || n_shards > 99999))
        rc = pt_fail(PT_EINVAL, "%d shards: expected 1 to 99999", n_shards);
    if (rc == PT_OK)
        rc = pt_ckpt_check_dest(dest);
    if (rc == PT_OK)
        rc = finish_staging(staging, n_shards, desc, opt, state, run_id);
    if (rc != PT_OK)
        return rc;
    if (!pt_checkpoint_is_file(dest))
        return pt_ckpt_swap_in(staging, dest);
    rc = pt_checkpoint_merge(staging, dest);
    if (rc == PT_OK)
        pt_ckpt_remove_tree(staging);
    return rc;
}
