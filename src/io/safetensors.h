/* safetensors.h: read and write safetensors files, the tensor format of
 * Hugging Face, used for pipetrain's checkpoints.
 *
 * Layout: an 8-byte little-endian header length N; N bytes of JSON mapping
 * each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets relative to the end of the header) plus an optional
 * "__metadata__" object of string values; then the raw little-endian data.
 *
 * The writer is atomic (see atomic_file.h): a failure leaves the previous
 * file under the name untouched. The reader validates the whole header
 * before any data is read and refuses a malformed file with PT_EFORMAT and a
 * message naming the tensor or byte offset; data is read on request, one
 * tensor at a time, so a large checkpoint is never held twice in memory.
 * Callers: the checkpoint code (save/resume) and the CLI. */
#ifndef PT_IO_SAFETENSORS_H
#define PT_IO_SAFETENSORS_H

#include "pipetrain.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    PT_DT_BOOL,
    PT_DT_U8,
    PT_DT_I8,
    PT_DT_F8_E5M2,
    PT_DT_F8_E4M3,
    PT_DT_I16,
    PT_DT_U16,
    PT_DT_F16,
    PT_DT_BF16,
    PT_DT_I32,
    PT_DT_U32,
    PT_DT_F32,
    PT_DT_F64,
    PT_DT_I64,
    PT_DT_U64,
    PT_DT_COUNT
} pt_dtype;

/* "F32", "BF16", ... as the format spells them. */
const char *pt_dtype_name(pt_dtype dt);
/* Bytes per element. */
size_t pt_dtype_size(pt_dtype dt);
/* PT_OK, or PT_EINVAL for a name the format does not define. */
int pt_dtype_from_name(const char *name, pt_dtype *out);

#define PT_ST_MAX_DIMS 8

/* ---- Writing ----------------------------------------------------------- */

/* One tensor to write. A 0-dim tensor (ndim 0) is a scalar of one element. */
typedef struct {
    const char *name;
    pt_dtype dtype;
    int ndim;
    int shape[PT_ST_MAX_DIMS];
    const void *data; /* numel * pt_dtype_size(dtype) bytes, little-endian */
} pt_st_tensor;

typedef struct {
    const char *key;
    const char *value;
} pt_st_meta;

/* Writes tensors in the order given, with contiguous data offsets, and the
 * metadata as "__metadata__" (first in the header, as Hugging Face writes
 * it); the header is padded with spaces to a multiple of 8 bytes. Names must
 * be unique, non-empty and not "__metadata__"; metadata keys unique.
 * PT_EINVAL for such a mistake, PT_EIO if the file cannot be written. */
int pt_safetensors_write(const char *path, const pt_st_tensor *tensors, int n_tensors,
                         const pt_st_meta *meta, int n_meta);

/* The same, for tensors whose bytes are elsewhere (data may be NULL): the
 * writer calls fill(user, i, dst) for each tensor in order, dst holding that
 * tensor's byte size, and writes what it put there before asking for the
 * next, so only one tensor is in memory at a time (merging a checkpoint set
 * into one file). A fill that fails returns its status; the file under path
 * is then left as it was. */
typedef int (*pt_st_fill)(void *user, int i, void *dst);
int pt_safetensors_write_each(const char *path, const pt_st_tensor *tensors, int n_tensors,
                              const pt_st_meta *meta, int n_meta, pt_st_fill fill, void *user);

/* ---- Reading ----------------------------------------------------------- */

typedef struct pt_safetensors pt_safetensors;

/* What the header says about one tensor. */
typedef struct {
    const char *name;
    pt_dtype dtype;
    int ndim;
    int shape[PT_ST_MAX_DIMS];
    size_t numel;
    uint64_t begin, end; /* data offsets, relative to the data region */
} pt_st_info;

/* Opens and validates a file: PT_EIO if it cannot be read, PT_EFORMAT if
 * anything in it is malformed. */
int pt_safetensors_open(const char *path, pt_safetensors **out);
void pt_safetensors_close(pt_safetensors *st);

/* Tensors in header order (names are owned by st). */
int pt_safetensors_count(const pt_safetensors *st);
const pt_st_info *pt_safetensors_info(const pt_safetensors *st, int i);
/* NULL if there is no tensor of that name. */
const pt_st_info *pt_safetensors_find(const pt_safetensors *st, const char *name);

/* Copies tensor `name` into dst after checking that it exists (PT_EFORMAT
 * otherwise: a file lacking a tensor the caller needs is malformed for it)
 * and has exactly the dtype and shape the caller expects (PT_EINVAL with
 * a message naming the tensor and both dtypes or shapes). dst holds
 * numel * pt_dtype_size(dtype) bytes. PT_EIO if the read fails. */
int pt_safetensors_read(const pt_safetensors *st, const char *name, pt_dtype dtype, int ndim,
                        const int *shape, void *dst);
/* Copies a tensor's bytes as they are, whatever its dtype and shape; dst
 * holds info->end - info->begin bytes. */
int pt_safetensors_read_raw(const pt_safetensors *st, const pt_st_info *info, void *dst);
/* A F32, F16 or BF16 tensor as floats (widened exactly); dst holds one
 * float per element. Another dtype is PT_EINVAL naming it. */
int pt_safetensors_read_f32(const pt_safetensors *st, const pt_st_info *info, float *dst);

/* "[d0, d1, ...]" into buf. */
const char *pt_safetensors_shape_text(char *buf, size_t cap, int ndim, const int *shape);

/* Metadata: the value of key, or NULL if absent. */
const char *pt_safetensors_meta(const pt_safetensors *st, const char *key);
int pt_safetensors_meta_count(const pt_safetensors *st);
/* The i-th metadata entry in header order. */
void pt_safetensors_meta_at(const pt_safetensors *st, int i, const char **key, const char **value);
/* The path the file was opened with (for the caller's messages). */
const char *pt_safetensors_path(const pt_safetensors *st);

#endif
