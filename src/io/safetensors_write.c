/* safetensors_write.c: the dtype table and the atomic safetensors writer
 * (see safetensors.h). The header is built in memory first, so every check
 * on the caller's tensors happens before the file is touched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "tensor/error.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[PT_DT_COUNT] = {
    [PT_DT_BOOL] = {"BOOL", 1},       [PT_DT_U8] = {"U8", 1},           [PT_DT_I8] = {"I8", 1},
    [PT_DT_F8_E5M2] = {"F8_E5M2", 1}, [PT_DT_F8_E4M3] = {"F8_E4M3", 1}, [PT_DT_I16] = {"I16", 2},
    [PT_DT_U16] = {"U16", 2},         [PT_DT_F16] = {"F16", 2},         [PT_DT_BF16] = {"BF16", 2},
    [PT_DT_I32] = {"I32", 4},         [PT_DT_U32] = {"U32", 4},         [PT_DT_F32] = {"F32", 4},
    [PT_DT_F64] = {"F64", 8},         [PT_DT_I64] = {"I64", 8},         [PT_DT_U64] = {"U64", 8},
};

const char *pt_dtype_name(pt_dtype dt)
{
    return (unsigned)dt < PT_DT_COUNT ? dtypes[dt].name : "?";
}

size_t pt_dtype_size(pt_dtype dt) { return (unsigned)dt < PT_DT_COUNT ? dtypes[dt].size : 0; }

int pt_dtype_from_name(const char *name, pt_dtype *out)
{
    for (int i = 0; i < PT_DT_COUNT; i++)
        if (strcmp(dtypes[i].name, name) == 0) {
            *out = (pt_dtype)i;
            return PT_OK;
        }
    return PT_EINVAL;
}

/* Byte size of a tensor, refusing shapes whose size overflows; with_data:
 * the caller's tensor must point at its bytes. */
static int tensor_bytes(const char *path, const pt_st_tensor *t, int with_data, uint64_t *bytes)
{
    if ((unsigned)t->dtype >= PT_DT_COUNT)
        return pt_fail(PT_EINVAL, "%s: tensor '%s': unknown dtype %d", path, t->name,
                       (int)t->dtype);
    if (t->ndim < 0 || t->ndim > PT_ST_MAX_DIMS)
        return pt_fail(PT_EINVAL, "%s: tensor '%s': %d dimensions (at most %d)", path, t->name,
                       t->ndim, PT_ST_MAX_DIMS);
    uint64_t n = pt_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0)
            return pt_fail(PT_EINVAL, "%s: tensor '%s': dimension %d is %d", path, t->name, d,
                           t->shape[d]);
        if (t->shape[d] > 0 && n > UINT64_MAX / (uint64_t)t->shape[d])
            return pt_fail(PT_EINVAL, "%s: tensor '%s': size overflows", path, t->name);
        n *= (uint64_t)t->shape[d];
    }
    if (n > 0 && with_data && !t->data)
        return pt_fail(PT_EINVAL, "%s: tensor '%s': no data", path, t->name);
    *bytes = n;
    return PT_OK;
}

static int check_names(const char *path, const pt_st_tensor *tensors, int n_tensors,
                       const pt_st_meta *meta, int n_meta)
{
    /* Checkpoints hold hundreds of tensors, not millions: pairwise is fine. */
    for (int i = 0; i < n_tensors; i++) {
        const char *name = tensors[i].name;
        if (!name || !*name)
            return pt_fail(PT_EINVAL, "%s: tensor %d has no name", path, i);
        if (strcmp(name, "__metadata__") == 0)
            return pt_fail(PT_EINVAL, "%s: '__metadata__' is not a tensor name", path);
        for (int j = 0; j < i; j++)
            if (strcmp(tensors[j].name, name) == 0)
                return pt_fail(PT_EINVAL, "%s: tensor '%s' given twice", path, name);
    }
    for (int i = 0; i < n_meta; i++) {
        if (!meta[i].key || !meta[i].value)
            return pt_fail(PT_EINVAL, "%s: metadata entry %d lacks a key or value", path, i);
        for (int j = 0; j < i; j++)
            if (strcmp(meta[j].key, meta[i].key) == 0)
                return pt_fail(PT_EINVAL, "%s: metadata key '%s' given twice", path, meta[i].key);
    }
    return PT_OK;
}

/* The header JSON, unpadded, in a malloc'ed buffer. */
static int build_header(const char *path, const pt_st_tensor *tensors, int n_tensors,
                        const pt_st_meta *meta, int n_meta, int with_data, char **out,
                        size_t *out_len)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return pt_fail(PT_ENOMEM, "out of memory");
    int r = PT_OK, bad = 0;
    const char *sep = "";
    fputc('{', f);
    if (n_meta > 0) {
        fputs("\"__metadata__\":{", f);
        for (int i = 0; i < n_meta; i++) {
            if (i)
                fputc(',', f);
            bad |= pt_json_write_string(f, meta[i].key, strlen(meta[i].key));
            fputc(':', f);
            bad |= pt_json_write_string(f, meta[i].value, strlen(meta[i].value));
        }
        fputc('}', f);
        sep = ",";
    }
    uint64_t offset = 0;
    for (int i = 0; i < n_tensors && r == PT_OK; i++) {
        const pt_st_tensor *t = &tensors[i];
        uint64_t bytes;
        r = tensor_bytes(path, t, with_data, &bytes);
        if (r != PT_OK)
            break;
        fputs(sep, f);
        sep = ",";
        bad |= pt_json_write_string(f, t->name, strlen(t->name));
        fprintf(f, ":{\"dtype\":\"%s\",\"shape\":[", pt_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            fprintf(f, d ? ",%d" : "%d", t->shape[d]);
        fprintf(f, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                (unsigned long long)(offset + bytes));
        offset += bytes;
    }
    fputc('}', f);
    if (fclose(f) != 0 || bad) {
        free(buf);
        return r != PT_OK ? r : pt_fail(PT_ENOMEM, "out of memory");
    }
    if (r != PT_OK) {
        free(buf);
        return r;
    }
    *out = buf;
    *out_len = len;
    return PT_OK;
}

/* Both writers: tensor i's bytes come from tensors[i].data, or when fill is
 * given from fill(user, i, buffer) into one buffer of the largest size. */
static int write_file(const char *path, const pt_st_tensor *tensors, int n_tensors,
                      const pt_st_meta *meta, int n_meta, pt_st_fill fill, void *user)
{
    if (n_tensors < 0 || n_meta < 0 || (n_tensors > 0 && !tensors) || (n_meta > 0 && !meta))
        return pt_fail(PT_EINVAL, "%s: bad tensor or metadata list", path);
    int r = check_names(path, tensors, n_tensors, meta, n_meta);
    if (r != PT_OK)
        return r;
    char *header = NULL;
    size_t header_len = 0;
    r = build_header(path, tensors, n_tensors, meta, n_meta, !fill, &header, &header_len);
    if (r != PT_OK)
        return r;
    uint64_t largest = 0, bytes;
    for (int i = 0; i < n_tensors; i++) {
        tensor_bytes(path, &tensors[i], 0, &bytes);
        largest = bytes > largest ? bytes : largest;
    }
    void *buf = NULL;
    if (fill && largest > SIZE_MAX / 2)
        r = pt_fail(PT_ENOMEM, "%s: a tensor of %llu bytes is too large for memory", path,
                    (unsigned long long)largest);
    else if (fill && !(buf = malloc(largest ? (size_t)largest : 1)))
        r = pt_fail(PT_ENOMEM, "%s: cannot allocate %llu bytes for a tensor", path,
                    (unsigned long long)largest);
    if (r != PT_OK) {
        free(header);
        return r;
    }

    /* Pad with spaces to a multiple of 8 so the data that follows is
     * aligned, as Hugging Face's writer does. */
    size_t padded = (header_len + 7) / 8 * 8;
    unsigned char prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    static const char spaces[8] = "        ";

    pt_atomic_file af;
    r = pt_atomic_open(&af, path);
    if (r != PT_OK) {
        free(header);
        free(buf);
        return r;
    }
    r = pt_atomic_write(&af, prefix, 8);
    if (r == PT_OK)
        r = pt_atomic_write(&af, header, header_len);
    if (r == PT_OK)
        r = pt_atomic_write(&af, spaces, padded - header_len);
    free(header);
    for (int i = 0; i < n_tensors && r == PT_OK; i++) {
        tensor_bytes(path, &tensors[i], 0, &bytes);
        const void *data = tensors[i].data;
        if (fill) {
            r = fill(user, i, buf);
            data = buf;
        }
        if (r == PT_OK)
            r = pt_atomic_write(&af, data, (size_t)bytes);
    }
    free(buf);
    if (r != PT_OK) {
        pt_atomic_abort(&af);
        return r;
    }
    return pt_atomic_commit(&af);
}

int pt_safetensors_write(const char *path, const pt_st_tensor *tensors, int n_tensors,
                         const pt_st_meta *meta, int n_meta)
{
    return write_file(path, tensors, n_tensors, meta, n_meta, NULL, NULL);
}

int pt_safetensors_write_each(const char *path, const pt_st_tensor *tensors, int n_tensors,
                              const pt_st_meta *meta, int n_meta, pt_st_fill fill, void *user)
{
    if (!fill)
        return pt_fail(PT_EINVAL, "%s: no function fills the tensors", path);
    return write_file(path, tensors, n_tensors, meta, n_meta, fill, user);
}
