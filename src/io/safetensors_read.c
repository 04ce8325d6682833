/* safetensors_read.c: the validating safetensors reader (see safetensors.h).
 *
 * pt_safetensors_open() reads only the header and checks, before anything
 * else happens, everything a later read relies on: the header length is
 * within the file, the JSON is well formed, every tensor has a known dtype,
 * a shape and data offsets, the offsets agree with dtype x shape, stay in the
 * data region, do not overlap and leave no gap. Tensor data is then read on
 * request with pread(). The file is taken as little-endian, as the format
 * says; this build assumes a little-endian machine. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/json.h"
#include "io/safetensors.h"
#include "tensor/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader copies it as is"
#endif

/* Hugging Face refuses headers over 100 MB; so do we, before allocating. */
#define MAX_HEADER_BYTES (100u * 1000u * 1000u)

struct pt_safetensors {
    char *path;
    int fd;
    uint64_t data_start; /* 8 + header length */
    uint64_t data_size;
    int n;
    pt_st_info *infos;
    int *by_name; /* indices of infos sorted by name, for lookup */
    int n_meta;
    char **meta_keys, **meta_values;
};

void pt_safetensors_close(pt_safetensors *st)
{
    if (!st)
        return;
    if (st->fd >= 0)
        close(st->fd);
    for (int i = 0; i < st->n; i++)
        free((char *)st->infos[i].name);
    for (int i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->infos);
    free(st->by_name);
    free(st->meta_keys);
    free(st->meta_values);
    free(st->path);
    free(st);
}

/* Reads exactly n bytes at offset; 0, or -1 with errno (0 at end of file). */
static int read_at(int fd, void *dst, size_t n, uint64_t offset)
{
    char *p = dst;
    while (n > 0) {
        ssize_t got = pread(fd, p, n, (off_t)offset);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0)
                errno = 0;
            return -1;
        }
        p += got;
        n -= (size_t)got;
        offset += (uint64_t)got;
    }
    return 0;
}

/* ---- Header validation ------------------------------------------------- */

static int parse_metadata(pt_safetensors *st, const pt_json *m)
{
    if (m->type != PT_JSON_OBJECT)
        return pt_fail(PT_EFORMAT, "%s: byte %zu: __metadata__ is not an object", st->path,
                       m->offset);
    st->meta_keys = calloc(m->n ? m->n : 1, sizeof *st->meta_keys);
    st->meta_values = calloc(m->n ? m->n : 1, sizeof *st->meta_values);
    if (!st->meta_keys || !st->meta_values)
        return pt_fail(PT_ENOMEM, "out of memory");
    for (size_t i = 0; i < m->n; i++) {
        const pt_json *v = m->items[i];
        if (v->type != PT_JSON_STRING)
            return pt_fail(PT_EFORMAT, "%s: byte %zu: __metadata__ value '%s' is not a string",
                           st->path, v->offset, m->keys[i]);
        st->meta_keys[i] = strdup(m->keys[i]);
        st->meta_values[i] = strdup(v->string);
        st->n_meta = (int)i + 1;
        if (!st->meta_keys[i] || !st->meta_values[i])
            return pt_fail(PT_ENOMEM, "out of memory");
    }
    return PT_OK;
}

static int parse_tensor(pt_safetensors *st, const char *name, const pt_json *t, pt_st_info *info)
{
    const char *path = st->path;
    if (t->type != PT_JSON_OBJECT)
        return pt_fail(PT_EFORMAT, "%s: tensor '%s': byte %zu: entry is not an object", path, name,
                       t->offset);
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->keys[i], "dtype") != 0 && strcmp(t->keys[i], "shape") != 0 &&
            strcmp(t->keys[i], "data_offsets") != 0)
            return pt_fail(PT_EFORMAT, "%s: tensor '%s': byte %zu: unknown field '%s'", path, name,
                           t->items[i]->offset, t->keys[i]);
    const pt_json *dtype = pt_json_get(t, "dtype"), *shape = pt_json_get(t, "shape"),
                  *offsets = pt_json_get(t, "data_offsets");
    if (!dtype || !shape || !offsets)
        return pt_fail(PT_EFORMAT, "%s: tensor '%s': byte %zu: no %s", path, name, t->offset,
                       !dtype   ? "dtype"
                       : !shape ? "shape"
                                : "data_offsets");

    if (dtype->type != PT_JSON_STRING)
        return pt_fail(PT_EFORMAT, "%s: tensor '%s': byte %zu: dtype is not a string", path, name,
                       dtype->offset);
    if (pt_dtype_from_name(dtype->string, &info->dtype) != PT_OK)
        return pt_fail(PT_EFORMAT, "%s: tensor '%s': byte %zu: unknown dtype \"%.40s\"", path, name,
                       dtype->offset, dtype->string);

    if (shape->type != PT_JSON_ARRAY || shape->n > PT_ST_MAX_DIMS)
        return pt_fail(PT_EFORMAT,
                       "%s: tensor '%s': byte %zu: shape is not an array of at most %d sizes", path,
                       name, shape->offset, PT_ST_MAX_DIMS);
    info->ndim = (int)shape->n;
    uint64_t bytes = pt_dtype_size(info->dtype), numel = 1;
    for (size_t d = 0; d < shape->n; d++) {
        const pt_json *s = shape->items[d];
        if (s->type != PT_JSON_NUMBER || !s->is_uint || s->uint_value > INT_MAX)
            return pt_fail(PT_EFORMAT,
                           "%s: tensor '%s': byte %zu: shape entry %zu is not a size 0..%d", path,
                           name, s->offset, d, INT_MAX);
        info->shape[d] = (int)s->uint_value;
        if (s->uint_value && bytes > UINT64_MAX / s->uint_value)
            return pt_fail(PT_EFORMAT, "%s: tensor '%s': shape's byte size overflows", path, name);
        bytes *= s->uint_value;
        numel *= s->uint_value;
    }
    info->numel = (size_t)numel;

    if (offsets->type != PT_JSON_ARRAY || offsets->n != 2 ||
        offsets->items[0]->type != PT_JSON_NUMBER || !offsets->items[0]->is_uint ||
        offsets->items[1]->type != PT_JSON_NUMBER || !offsets->items[1]->is_uint)
        return pt_fail(PT_EFORMAT,
                       "%s: tensor '%s': byte %zu: data_offsets is not [begin, end] of two "
                       "unsigned integers",
                       path, name, offsets->offset);
    info->begin = offsets->items[0]->uint_value;
    info->end = offsets->items[1]->uint_value;
    unsigned long long b = info->begin, e = info->end;
    if (info->end < info->begin)
        return pt_fail(PT_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] end before begin",
                       path, name, b, e);
    if (info->end > st->data_size)
        return pt_fail(PT_EFORMAT,
                       "%s: tensor '%s': data_offsets [%llu, %llu] end past the file's %llu data "
                       "bytes",
                       path, name, b, e, (unsigned long long)st->data_size);
    if (info->end - info->begin != bytes)
        return pt_fail(PT_EFORMAT,
                       "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but %s of "
                       "this shape needs %llu",
                       path, name, b, e, e - b, pt_dtype_name(info->dtype),
                       (unsigned long long)bytes);
    return PT_OK;
}

/* qsort_r comparators; ctx is the file's info array. Workers may open
 * checkpoints at the same time, so no static sort context. */
static int by_offsets(const void *a, const void *b, void *ctx)
{
    const pt_st_info *infos = ctx;
    const pt_st_info *x = &infos[*(const int *)a], *y = &infos[*(const int *)b];
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

static int by_name(const void *a, const void *b, void *ctx)
{
    const pt_st_info *infos = ctx;
    return strcmp(infos[*(const int *)a].name, infos[*(const int *)b].name);
}

/* The tensors must tile the data region: sorted by offsets, each begins
 * where the previous ended and the last ends at the end of the file. */
static int check_tiling(pt_safetensors *st, int *order)
{
    for (int i = 0; i < st->n; i++)
        order[i] = i;
    qsort_r(order, (size_t)st->n, sizeof *order, by_offsets, st->infos);
    uint64_t expect = 0;
    const pt_st_info *prev = NULL;
    for (int i = 0; i < st->n; i++) {
        const pt_st_info *t = &st->infos[order[i]];
        if (t->begin < expect)
            return pt_fail(PT_EFORMAT,
                           "%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' "
                           "[%llu, %llu]",
                           st->path, t->name, (unsigned long long)t->begin,
                           (unsigned long long)t->end, prev->name, (unsigned long long)prev->begin,
                           (unsigned long long)prev->end);
        if (t->begin > expect)
            return pt_fail(PT_EFORMAT,
                           "%s: tensor '%s': data_offsets [%llu, %llu] leave data bytes [%llu, "
                           "%llu) to no tensor",
                           st->path, t->name, (unsigned long long)t->begin,
                           (unsigned long long)t->end, (unsigned long long)expect,
                           (unsigned long long)t->begin);
        expect = t->end;
        prev = t;
    }
    if (expect != st->data_size)
        return pt_fail(PT_EFORMAT,
                       "%s: the tensors cover %llu of the file's %llu data bytes (byte %llu on "
                       "belongs to no tensor)",
                       st->path, (unsigned long long)expect, (unsigned long long)st->data_size,
                       (unsigned long long)(st->data_start + expect));
    return PT_OK;
}

static int parse_header(pt_safetensors *st, const pt_json *root)
{
    if (root->type != PT_JSON_OBJECT)
        return pt_fail(PT_EFORMAT, "%s: byte 8: the header is not a JSON object", st->path);
    if (root->n > INT_MAX)
        return pt_fail(PT_EFORMAT, "%s: too many tensors", st->path);
    st->infos = calloc(root->n ? root->n : 1, sizeof *st->infos);
    if (!st->infos)
        return pt_fail(PT_ENOMEM, "out of memory");
    int r = PT_OK;
    for (size_t i = 0; i < root->n && r == PT_OK; i++) {
        if (strcmp(root->keys[i], "__metadata__") == 0) {
            r = parse_metadata(st, root->items[i]);
            continue;
        }
        pt_st_info *info = &st->infos[st->n];
        info->name = strdup(root->keys[i]);
        if (!info->name)
            return pt_fail(PT_ENOMEM, "out of memory");
        st->n++;
        r = parse_tensor(st, info->name, root->items[i], info);
    }
    if (r != PT_OK)
        return r;
    st->by_name = malloc((st->n ? (size_t)st->n : 1) * sizeof *st->by_name);
    if (!st->by_name)
        return pt_fail(PT_ENOMEM, "out of memory");
    r = check_tiling(st, st->by_name);
    for (int i = 0; i < st->n; i++)
        st->by_name[i] = i;
    qsort_r(st->by_name, (size_t)st->n, sizeof *st->by_name, by_name, st->infos);
    return r;
}

int pt_safetensors_open(const char *path, pt_safetensors **out)
{
    *out = NULL;
    pt_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return pt_fail(PT_ENOMEM, "out of memory");
    }
    st->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (st->fd < 0 || fstat(st->fd, &sb) != 0) {
        int r = pt_fail(PT_EIO, "%s: %s", path, strerror(errno));
        pt_safetensors_close(st);
        return r;
    }
    if (!S_ISREG(sb.st_mode)) {
        pt_safetensors_close(st);
        return pt_fail(PT_EIO, "%s: not a regular file", path);
    }
    uint64_t size = (uint64_t)sb.st_size;
    unsigned char prefix[8];
    if (size < 8) {
        pt_safetensors_close(st);
        return pt_fail(PT_EFORMAT, "%s: %llu bytes: too short to hold the 8-byte header length",
                       path, (unsigned long long)size);
    }
    if (read_at(st->fd, prefix, 8, 0) != 0) {
        int r =
            pt_fail(PT_EIO, "%s: cannot read: %s", path, errno ? strerror(errno) : "short file");
        pt_safetensors_close(st);
        return r;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | prefix[i];
    if (n > size - 8) {
        pt_safetensors_close(st);
        return pt_fail(PT_EFORMAT,
                       "%s: byte 0: header length %llu runs past the end of the file (%llu bytes "
                       "after the length)",
                       path, (unsigned long long)n, (unsigned long long)(size - 8));
    }
    if (n > MAX_HEADER_BYTES) {
        pt_safetensors_close(st);
        return pt_fail(PT_EFORMAT, "%s: byte 0: header length %llu is over the %u-byte limit", path,
                       (unsigned long long)n, MAX_HEADER_BYTES);
    }
    st->data_start = 8 + n;
    st->data_size = size - 8 - n;

    char *header = malloc(n ? (size_t)n : 1);
    if (!header) {
        pt_safetensors_close(st);
        return pt_fail(PT_ENOMEM, "out of memory for a %llu-byte header", (unsigned long long)n);
    }
    if (read_at(st->fd, header, (size_t)n, 8) != 0) {
        int r = pt_fail(PT_EIO, "%s: cannot read the header: %s", path,
                        errno ? strerror(errno) : "short file");
        free(header);
        pt_safetensors_close(st);
        return r;
    }
    char what[512];
    snprintf(what, sizeof what, "%s: header", path);
    pt_json *root;
    int r = pt_json_parse(header, (size_t)n, 8, what, &root);
    free(header);
    if (r == PT_OK) {
        r = parse_header(st, root);
        pt_json_free(root);
    }
    if (r != PT_OK) {
        pt_safetensors_close(st);
        return r;
    }
    *out = st;
    return PT_OK;
}

/* ---- Queries and reads ------------------------------------------------- */

int pt_safetensors_count(const pt_safetensors *st) { return st->n; }

const pt_st_info *pt_safetensors_info(const pt_safetensors *st, int i)
{
    return i >= 0 && i < st->n ? &st->infos[i] : NULL;
}

const pt_st_info *pt_safetensors_find(const pt_safetensors *st, const char *name)
{
    int lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const pt_st_info *t = &st->infos[st->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0)
            return t;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

static float uint_as_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

int pt_safetensors_read_raw(const pt_safetensors *st, const pt_st_info *info, void *dst)
{
    uint64_t n = info->end - info->begin;
    if (n > SIZE_MAX)
        return pt_fail(PT_ENOMEM, "%s: tensor '%s' is too large for memory", st->path, info->name);
    if (n > 0 && read_at(st->fd, dst, (size_t)n, st->data_start + info->begin) != 0)
        return pt_fail(PT_EIO, "%s: tensor '%s': read failed: %s", st->path, info->name,
                       errno ? strerror(errno) : "the file shrank while open");
    return PT_OK;
}

/* IEEE half to float, exactly (every half is a float). */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023;
    if (exp == 31)
        return uint_as_float(sign | 0x7f800000u | (man << 13));
    if (exp == 0) { /* zero or subnormal: man x 2^-24 */
        float x = (float)man * 0x1p-24f;
        return sign ? -x : x;
    }
    return uint_as_float(sign | ((exp + 112) << 23) | (man << 13));
}

int pt_safetensors_read_f32(const pt_safetensors *st, const pt_st_info *info, float *dst)
{
    if (info->dtype != PT_DT_F32 && info->dtype != PT_DT_F16 && info->dtype != PT_DT_BF16)
        return pt_fail(PT_EINVAL, "%s: tensor '%s' is %s, expected F32, F16 or BF16", st->path,
                       info->name, pt_dtype_name(info->dtype));
    int rc = pt_safetensors_read_raw(st, info, dst);
    if (rc != PT_OK || info->dtype == PT_DT_F32)
        return rc;
    /* widen in place, from the last element down: element i's two bytes
     * sit at 2i, below the four of its float at 4i */
    size_t n = (size_t)(info->end - info->begin) / 2;
    const unsigned char *b = (const unsigned char *)dst;
    for (size_t i = n; i-- > 0;) {
        uint16_t h = (uint16_t)(b[2 * i] | b[2 * i + 1] << 8);
        dst[i] = info->dtype == PT_DT_BF16 ? uint_as_float((uint32_t)h << 16) : half_to_float(h);
    }
    return PT_OK;
}

const char *pt_safetensors_shape_text(char *buf, size_t cap, int ndim, const int *shape)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, d ? ", %d" : "%d", shape[d]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
    return buf;
}

int pt_safetensors_read(const pt_safetensors *st, const char *name, pt_dtype dtype, int ndim,
                        const int *shape, void *dst)
{
    const pt_st_info *t = pt_safetensors_find(st, name);
    if (!t)
        return pt_fail(PT_EFORMAT, "%s: no tensor '%s'", st->path, name);
    if (t->dtype != dtype)
        return pt_fail(PT_EINVAL, "%s: tensor '%s' is %s, expected %s", st->path, name,
                       pt_dtype_name(t->dtype), pt_dtype_name(dtype));
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == shape[d];
    if (!same) {
        char have[128], want[128];
        pt_safetensors_shape_text(have, sizeof have, t->ndim, t->shape);
        pt_safetensors_shape_text(want, sizeof want,
                                  ndim < 0                ? 0
                                  : ndim > PT_ST_MAX_DIMS ? PT_ST_MAX_DIMS
                                                          : ndim,
                                  shape);
        return pt_fail(PT_EINVAL, "%s: tensor '%s' has shape %s, expected %s", st->path, name, have,
                       want);
    }
    return pt_safetensors_read_raw(st, t, dst);
}

const char *pt_safetensors_meta(const pt_safetensors *st, const char *key)
{
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0)
            return st->meta_values[i];
    return NULL;
}

int pt_safetensors_meta_count(const pt_safetensors *st) { return st->n_meta; }

void pt_safetensors_meta_at(const pt_safetensors *st, int i, const char **key, const char **value)
{
    *key = i >= 0 && i < st->n_meta ? st->meta_keys[i] : NULL;
    *value = i >= 0 && i < st->n_meta ? st->meta_values[i] : NULL;
}

const char *pt_safetensors_path(const pt_safetensors *st) { return st->path; }
