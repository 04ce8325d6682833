/* checkpoint_bf16.c: a weights file rewritten with bf16 weights, for
 * inference and Hugging Face users (train --save-dtype bf16).
 *
 * Training keeps float master weights and its checkpoints keep them: a run
 * resumes from floats. A .safetensors file of weights alone may instead
 * hold them as BF16 (half the bytes; transformers and pipetrain load it,
 * pipetrain widening each value exactly). The file is read back tensor by
 * tensor and written again, rounded to nearest even, with its metadata, in
 * one atomic replace: the F32 file stays until the BF16 one is complete. */
#include <stdlib.h>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "tensor/bf16.h"
#include "tensor/error.h"

typedef struct {
    const pt_safetensors *st;
    float *row;
} narrowing;

static int fill(void *user, int i, void *dst)
{
    narrowing *n = user;
    const pt_st_info *info = pt_safetensors_info(n->st, i);
    int rc = pt_safetensors_read_f32(n->st, info, n->row);
    if (rc == PT_OK)
        pt_bf16_from_floats(dst, n->row, info->numel);
    return rc;
}

int pt_checkpoint_narrow_bf16(const char *path)
{
    pt_safetensors *st;
    int rc = pt_safetensors_open(path, &st);
    if (rc != PT_OK)
        return rc;
    int n = pt_safetensors_count(st), n_meta = pt_safetensors_meta_count(st);
    pt_st_tensor *t = calloc((size_t)n + 1, sizeof *t);
    pt_st_meta *meta = calloc((size_t)n_meta + 1, sizeof *meta);
    size_t most = 1;
    for (int i = 0; i < n; i++)
        most = pt_safetensors_info(st, i)->numel > most ? pt_safetensors_info(st, i)->numel : most;
    narrowing job = {.st = st, .row = malloc(most * sizeof(float))};
    if (!t || !meta || !job.row)
        rc = pt_fail(PT_ENOMEM, "%s: cannot allocate its rewrite as bf16", path);
    for (int i = 0; rc == PT_OK && i < n; i++) {
        const pt_st_info *info = pt_safetensors_info(st, i);
        if (info->dtype != PT_DT_F32 && info->dtype != PT_DT_BF16 && info->dtype != PT_DT_F16)
            rc = pt_fail(PT_EINVAL, "%s: tensor %s is %s, not a float to write as bf16", path,
                         info->name, pt_dtype_name(info->dtype));
        t[i] = (pt_st_tensor){.name = info->name, .dtype = PT_DT_BF16, .ndim = info->ndim};
        for (int d = 0; d < info->ndim; d++)
            t[i].shape[d] = info->shape[d];
    }
    for (int i = 0; i < n_meta; i++)
        pt_safetensors_meta_at(st, i, &meta[i].key, &meta[i].value);
    if (rc == PT_OK)
        rc = pt_safetensors_write_each(path, t, n, meta, n_meta, fill, &job);
    free(job.row);
    free(t);
    free(meta);
    pt_safetensors_close(st);
    return rc;
}
