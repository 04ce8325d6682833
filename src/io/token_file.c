/* token_file.c: pre-tokenized corpora in llm.c's and nanoGPT's formats (see
 * text_data.h). The train command reads them through
 * pt_token_data_load_files(); `pipetrain tokenize` writes them with
 * pt_token_writer.
 *
 * llm.c: 256 little-endian int32 (magic 20240520, version, token count, the
 * rest zero), then count tokens: uint16 for version 1, uint32 for version
 * 2 (a vocabulary past 65536). nanoGPT: uint16 tokens, nothing else. A file
 * whose first int32 is the magic is taken as llm.c's; a nanoGPT file would
 * need its first two tokens to be 55432 and 308 to be mistaken for one, and
 * is then refused for its size rather than misread. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/atomic_file.h"
#include "io/text_data.h"
#include "tensor/error.h"

#define LLMC_MAGIC        20240520
#define LLMC_HEADER_BYTES 1024
#define LLMC_MAX_TOKENS   2147483647 /* the header's count is an int32 */

static int32_t le_i32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* Where the tokens start, how many there are and their width in bytes,
 * from the size and head. */
static int locate_tokens(const char *path, FILE *f, uint64_t size, long *start, size_t *count,
                         int *width)
{
    unsigned char head[12];
    size_t got = fread(head, 1, sizeof head, f);
    if (got >= 4 && le_i32(head) == LLMC_MAGIC) {
        if (size < LLMC_HEADER_BYTES)
            return pt_fail(PT_EFORMAT,
                           "%s: llm.c token file truncated: %llu bytes, shorter than its "
                           "%d-byte header",
                           path, (unsigned long long)size, LLMC_HEADER_BYTES);
        int32_t version = le_i32(head + 4), n = le_i32(head + 8);
        if (version != 1 && version != 2)
            return pt_fail(PT_EFORMAT,
                           "%s: llm.c token file version %d is not supported (version 1: "
                           "uint16 tokens, 2: uint32)",
                           path, version);
        if (n <= 0)
            return pt_fail(PT_EFORMAT, "%s: llm.c header gives %d tokens", path, n);
        *width = version == 1 ? 2 : 4;
        uint64_t body = size - LLMC_HEADER_BYTES, want = (uint64_t)*width * (uint64_t)n;
        if (body != want)
            return pt_fail(PT_EFORMAT,
                           "%s: llm.c header says %d tokens (%llu bytes) but %llu bytes follow "
                           "the header (%s)",
                           path, n, (unsigned long long)want, (unsigned long long)body,
                           body < want ? "truncated" : "trailing bytes");
        *start = LLMC_HEADER_BYTES;
        *count = (size_t)n;
        return PT_OK;
    }
    if (size == 0)
        return pt_fail(PT_EFORMAT, "%s: empty token file", path);
    if (size % 2 != 0)
        return pt_fail(PT_EFORMAT,
                       "%s: no llm.c magic (%d), and %llu bytes is an odd size for a headerless "
                       "file of uint16 tokens",
                       path, LLMC_MAGIC, (unsigned long long)size);
    *start = 0;
    *count = (size_t)(size / 2);
    *width = 2;
    return PT_OK;
}

int pt_token_file_read(const char *path, int vocab, uint32_t **tokens, size_t *n)
{
    *tokens = NULL;
    *n = 0;
    if (vocab < 1)
        return pt_fail(PT_EINVAL, "%s: vocabulary size %d is not positive", path, vocab);
    FILE *f = fopen(path, "rb");
    if (!f)
        return pt_fail(PT_EIO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return pt_fail(PT_EIO, "%s: not a readable regular file", path);
    }
    long start = 0;
    size_t count = 0;
    int width = 2;
    int r = locate_tokens(path, f, (uint64_t)sb.st_size, &start, &count, &width);
    if (r != PT_OK) {
        fclose(f);
        return r;
    }
    unsigned char *raw = malloc(count * (size_t)width);
    uint32_t *t = malloc(count * sizeof *t);
    if (!raw || !t) {
        free(raw);
        free(t);
        fclose(f);
        return pt_fail(PT_ENOMEM, "%s: out of memory for %zu tokens", path, count);
    }
    if (fseek(f, start, SEEK_SET) != 0 || fread(raw, (size_t)width, count, f) != count) {
        free(raw);
        free(t);
        fclose(f);
        return pt_fail(PT_EIO, "%s: read failed", path);
    }
    fclose(f);
    for (size_t i = 0; i < count; i++) {
        const unsigned char *p = raw + (size_t)width * i;
        t[i] = width == 2 ? (uint32_t)(p[0] | p[1] << 8) : (uint32_t)le_i32(p);
        if (t[i] >= (uint32_t)vocab) {
            r = pt_fail(PT_EFORMAT,
                        "%s: token %zu is %u, not below the vocabulary size %d (--vocab)", path, i,
                        (unsigned)t[i], vocab);
            free(raw);
            free(t);
            return r;
        }
    }
    free(raw);
    *tokens = t;
    *n = count;
    return PT_OK;
}

int pt_data_is_token_file(const char *const *paths, int n_paths)
{
    size_t n = n_paths == 1 ? strlen(paths[0]) : 0;
    return n > 4 && !strcmp(paths[0] + n - 4, ".bin");
}

int pt_token_data_load_files(const char *train_path, const char *val_path, int vocab,
                             double val_fraction, pt_token_data *out)
{
    memset(out, 0, sizeof *out);
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        return pt_fail(PT_EINVAL, "validation fraction %g is not in [0, 1)", val_fraction);
    uint32_t *train;
    size_t n_train;
    int r = pt_token_file_read(train_path, vocab, &train, &n_train);
    if (r != PT_OK)
        return r;
    out->vocab = vocab;
    if (val_path) {
        r = pt_token_file_read(val_path, vocab, &out->val, &out->n_val);
        if (r != PT_OK) {
            free(train);
            return r;
        }
        out->train = train;
        out->n_train = n_train;
        out->n_files = 2;
        return PT_OK;
    }
    size_t n_val = (size_t)((double)n_train * val_fraction);
    if (n_val > 0) {
        out->val = malloc(n_val * sizeof *out->val);
        if (!out->val) {
            free(train);
            return pt_fail(PT_ENOMEM, "out of memory");
        }
        memcpy(out->val, train + (n_train - n_val), n_val * sizeof *out->val);
    }
    out->train = train;
    out->n_train = n_train - n_val;
    out->n_val = n_val;
    out->n_files = 1;
    return PT_OK;
}

/* ---- Writing ------------------------------------------------------------ */

struct pt_token_writer {
    pt_atomic_file af;
    int vocab, width;
    uint64_t count;
    unsigned char buf[65536];
};

static void put_le32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16), p[3] = (unsigned char)(v >> 24);
}

int pt_token_writer_open(const char *path, int vocab, pt_token_writer **out)
{
    *out = NULL;
    if (vocab < 1)
        return pt_fail(PT_EINVAL, "%s: vocabulary size %d is not positive", path, vocab);
    pt_token_writer *w = calloc(1, sizeof *w);
    if (!w)
        return pt_fail(PT_ENOMEM, "out of memory");
    w->vocab = vocab;
    w->width = vocab <= 65536 ? 2 : 4;
    int rc = pt_atomic_open(&w->af, path);
    if (rc == PT_OK)
        rc = pt_atomic_write(&w->af, w->buf, LLMC_HEADER_BYTES); /* filled in on commit */
    if (rc != PT_OK) {
        if (w->af.f)
            pt_atomic_abort(&w->af);
        free(w);
        return rc;
    }
    *out = w;
    return PT_OK;
}

int pt_token_writer_add(pt_token_writer *w, const uint32_t *tokens, size_t n)
{
    if (w->count + n > LLMC_MAX_TOKENS)
        return pt_fail(PT_EINVAL, "%s: more than %d tokens, the most an llm.c header counts",
                       w->af.path, LLMC_MAX_TOKENS);
    size_t per = sizeof w->buf / (size_t)w->width;
    for (size_t at = 0; at < n; at += per) {
        size_t k = n - at < per ? n - at : per;
        for (size_t i = 0; i < k; i++) {
            uint32_t t = tokens[at + i];
            if (t >= (uint32_t)w->vocab)
                return pt_fail(PT_EINVAL, "%s: token %u is not below the vocabulary size %d",
                               w->af.path, t, w->vocab);
            if (w->width == 2) {
                w->buf[2 * i] = (unsigned char)t;
                w->buf[2 * i + 1] = (unsigned char)(t >> 8);
            } else {
                put_le32(w->buf + 4 * i, t);
            }
        }
        int rc = pt_atomic_write(&w->af, w->buf, k * (size_t)w->width);
        if (rc != PT_OK)
            return rc;
    }
    w->count += n;
    return PT_OK;
}

int pt_token_writer_commit(pt_token_writer *w)
{
    unsigned char head[12];
    put_le32(head, LLMC_MAGIC);
    put_le32(head + 4, w->width == 2 ? 1 : 2);
    put_le32(head + 8, (uint32_t)w->count);
    int rc = PT_OK;
    if (w->count == 0)
        rc = pt_fail(PT_EINVAL, "%s: no tokens to write", w->af.path);
    else if (fseek(w->af.f, 0, SEEK_SET) != 0 ||
             fwrite(head, 1, sizeof head, w->af.f) != sizeof head)
        rc = pt_fail(PT_EIO, "%s: cannot write the header: %s", w->af.tmp_path, strerror(errno));
    if (rc == PT_OK)
        rc = pt_atomic_commit(&w->af);
    else
        pt_atomic_abort(&w->af);
    free(w);
    return rc;
}

void pt_token_writer_abort(pt_token_writer *w)
{
    if (!w)
        return;
    pt_atomic_abort(&w->af);
    free(w);
}
