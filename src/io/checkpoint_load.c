/* checkpoint_load.c: loading a checkpoint (one file or a set) into a whole
 * model or a pipeline stage's part, and merging a set into one file
 * (checkpoint.h). Both first locate every tensor they need and check its
 * dtype and shape, and only then read, one tensor at a time by offset: a
 * refused checkpoint leaves the model and optimizer as they were, and
 * nothing is ever held in memory twice. */
#include "io/checkpoint_source.h"
#include "io/hf_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const pt_safetensors *st;
    const pt_st_info *info;
} located;

/* The tensor that holds parameter i's weights (which -1) or moment: its own
 * name, else for a tied copy the name of what it copies. */
static int locate(pt_ckpt_source *s, const pt_model *m, int i, int which, pt_optim_kind kind,
                  located *out)
{
    const pt_param *p = pt_model_param(m, i);
    int rc = pt_ckpt_source_find(s, p->name, which, kind, &out->st, &out->info);
    if (rc == PT_OK && !out->info && p->tied_to)
        rc = pt_ckpt_source_find(s, p->tied_to, which, kind, &out->st, &out->info);
    if (rc != PT_OK)
        return rc;
    const char *path = pt_ckpt_source_path(s);
    const char *moment = which < 0 ? NULL : pt_ckpt_moment(kind, which);
    if (!out->info)
        return pt_fail(PT_EFORMAT, "%s: no tensor %s%s'%s'%s", path, moment ? moment : "",
                       moment ? " of " : "", p->name,
                       moment ? " (optimizer state needed to resume)" : "");
    const pt_st_info *in = out->info;
    const char *file = pt_safetensors_path(out->st);
    /* weights may be half precision (widened as they are read); moments
     * are what this run's optimizer kept, F32 */
    if (in->dtype != PT_DT_F32 && (moment || (in->dtype != PT_DT_F16 && in->dtype != PT_DT_BF16)))
        return pt_fail(PT_EFORMAT, "%s: tensor '%s' is %s, expected F32%s", file, in->name,
                       pt_dtype_name(in->dtype), moment ? "" : ", F16 or BF16");
    int same = in->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++)
        same = in->shape[d] == p->shape[d];
    if (!same) {
        char has[64], want[64];
        return pt_fail(PT_EFORMAT, "%s: tensor '%s' has shape %s; the model's '%s' is %s", file,
                       in->name, pt_safetensors_shape_text(has, sizeof has, in->ndim, in->shape),
                       p->name, pt_safetensors_shape_text(want, sizeof want, p->ndim, p->shape));
    }
    return PT_OK;
}

/* The optimizer and training state a resume takes from s: *fresh when it
 * holds weights alone and the caller allows a fresh optimizer. */
static int resume_state(pt_ckpt_source *s, pt_optim_kind kind, int allow_fresh,
                        pt_train_state *loaded, int *fresh)
{
    const char *path = pt_ckpt_source_path(s);
    const char *saved = pt_ckpt_source_optimizer(s);
    *fresh = !saved;
    if (!saved && !allow_fresh)
        return pt_fail(PT_EFORMAT,
                       "%s holds weights only (no optimizer state): a run cannot resume from it "
                       "unless it starts its optimizer afresh",
                       path);
    if (saved && strcmp(saved, pt_ckpt_optim_name(kind)))
        return pt_fail(PT_EFORMAT, "%s: holds %s optimizer state; this run uses %s", path, saved,
                       pt_ckpt_optim_name(kind));
    int rc = pt_ckpt_source_state(s, loaded);
    if (rc == 1 && !*fresh)
        return pt_fail(PT_EFORMAT,
                       "%s: no step or data position is recorded: not a checkpoint a run can "
                       "resume from",
                       path);
    if (rc == 1)
        loaded->step = 0, loaded->data_drawn = 0;
    return rc == 1 ? PT_OK : rc;
}

static int load(pt_ckpt_source *s, pt_model *m, pt_optimizer *opt, pt_train_state *state,
                const pt_checkpoint_load_options *o)
{
    pt_model_config file_cfg;
    const pt_model_config *cfg = pt_model_get_config(m);
    int rc = pt_ckpt_source_config(s, cfg->n_head, &file_cfg);
    if (rc == PT_OK)
        rc = pt_ckpt_same_config(&file_cfg, cfg, pt_ckpt_source_path(s));
    pt_optim_kind kind = opt ? pt_optimizer_config(opt)->kind : PT_OPTIM_ADAMW;
    int with_state = opt && state, fresh = 0;
    pt_train_state loaded = state ? *state : (pt_train_state){0};
    if (rc == PT_OK && with_state)
        rc = resume_state(s, kind, o && o->allow_fresh_optimizer, &loaded, &fresh);
    if (rc == PT_OK)
        rc = pt_ckpt_source_check_names(s, m);
    int n = pt_model_n_params(m), moments = with_state && !fresh ? 2 : 0;
    located *at = calloc((size_t)n * 3, sizeof *at);
    if (rc == PT_OK && !at)
        rc = pt_fail(PT_ENOMEM, "out of memory");
    for (int i = 0; rc == PT_OK && i < n; i++)
        for (int which = -1; rc == PT_OK && which < moments; which++)
            if (pt_model_param(m, i)->data && (which < 0 || pt_ckpt_moment(kind, which)))
                rc = locate(s, m, i, which, kind, &at[3 * i + which + 1]);
    for (int i = 0; rc == PT_OK && i < n; i++) {
        const pt_param *p = pt_model_param(m, i);
        for (int which = -1; rc == PT_OK && p->data && which < 2; which++) {
            float *dst = which < 0 ? p->data : NULL;
            if (which >= 0 && with_state && pt_ckpt_moment(kind, which))
                dst = pt_optimizer_state(opt, m, i, which);
            const located *a = &at[3 * i + which + 1];
            if (dst && a->info)
                rc = pt_safetensors_read_f32(a->st, a->info, dst);
            else if (dst && fresh)
                memset(dst, 0, p->numel * sizeof(float));
        }
    }
    free(at);
    if (rc == PT_OK && with_state)
        *state = loaded;
    return rc;
}

int pt_checkpoint_load_with(const char *path, pt_model *m, pt_optimizer *opt, pt_train_state *state,
                            const pt_checkpoint_load_options *o)
{
    pt_ckpt_source *s;
    int rc = pt_ckpt_source_open(path, &s);
    if (rc != PT_OK)
        return rc;
    rc = load(s, m, opt, state, o);
    pt_ckpt_source_close(s);
    return rc;
}

int pt_checkpoint_load(const char *path, pt_model *m, pt_optimizer *opt, pt_train_state *state)
{
    return pt_checkpoint_load_with(path, m, opt, state, NULL);
}

int pt_checkpoint_read_config(const char *path, int default_heads, pt_model_config *cfg)
{
    pt_ckpt_source *s;
    int rc = pt_ckpt_source_open(path, &s);
    if (rc != PT_OK)
        return rc;
    rc = pt_ckpt_source_config(s, default_heads, cfg);
    pt_ckpt_source_close(s);
    return rc;
}

double pt_checkpoint_dropout(const char *path, const char **field)
{
    pt_ckpt_source *s;
    pt_model_config cfg;
    double p = 0;
    const char *name = NULL;
    if (pt_ckpt_source_open(path, &s) != PT_OK)
        return 0;
    if (pt_ckpt_source_config(s, 1, &cfg) == PT_OK && pt_ckpt_source_hf_config(s))
        p = pt_hf_config_dropout(pt_ckpt_source_hf_config(s), &name);
    pt_ckpt_source_close(s);
    if (field)
        *field = name;
    return p;
}

/* ---- Merging ----------------------------------------------------------- */

static int merge_fill(void *user, int i, void *dst)
{
    const located *a = (const located *)user + i;
    return pt_safetensors_read_f32(a->st, a->info, dst);
}

/* The tensors of the single file: the parameters in model order, tied
 * copies left out. */
static int merge_list(pt_ckpt_source *s, const pt_model *d, pt_st_tensor *t, located *at, int *nt)
{
    int rc = PT_OK;
    *nt = 0;
    for (int i = 0; rc == PT_OK && i < pt_model_n_params(d); i++) {
        const pt_param *p = pt_model_param(d, i);
        if (p->tied_to)
            continue;
        t[*nt] = (pt_st_tensor){.name = p->name, .dtype = PT_DT_F32, .ndim = p->ndim};
        memcpy(t[*nt].shape, p->shape, sizeof p->shape);
        rc = locate(s, d, i, -1, PT_OPTIM_ADAMW, &at[(*nt)++]);
    }
    return rc;
}

int pt_checkpoint_merge(const char *set_dir, const char *out_file)
{
    pt_ckpt_source *s;
    int rc = pt_ckpt_source_open(set_dir, &s);
    if (rc != PT_OK)
        return rc;
    pt_model_config cfg;
    pt_model *d = NULL;
    pt_train_state state;
    rc = pt_ckpt_source_config(s, 0, &cfg);
    if (rc == PT_OK && cfg.kind == PT_MODEL_GPT && cfg.n_head < 1)
        rc = pt_fail(PT_EFORMAT, "%s does not record the number of attention heads", set_dir);
    if (rc == PT_OK)
        rc = pt_model_describe(&cfg, &d);
    int has_state = rc == PT_OK ? pt_ckpt_source_state(s, &state) : rc;
    if (has_state < 0)
        rc = has_state;
    if (rc == PT_OK)
        rc = pt_ckpt_source_check_names(s, d);
    int n = d ? pt_model_n_params(d) : 0, nt = 0;
    pt_st_tensor *t = calloc((size_t)n + 1, sizeof *t);
    located *at = calloc((size_t)n + 1, sizeof *at);
    if (rc == PT_OK && (!t || !at))
        rc = pt_fail(PT_ENOMEM, "out of memory");
    if (rc == PT_OK)
        rc = merge_list(s, d, t, at, &nt);
    if (rc == PT_OK) {
        pt_ckpt_meta l = {.n = 0};
        pt_ckpt_file_meta(&l, &cfg, NULL, has_state == PT_OK ? &state : NULL);
        rc = pt_safetensors_write_each(out_file, t, nt, l.meta, l.n, merge_fill, at);
    }
    free(t), free(at);
    pt_model_destroy(d);
    pt_ckpt_source_close(s);
    return rc;
}
