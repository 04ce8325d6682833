/* text_corpus.c: byte-level text corpora from files and directories (see
 * text_data.h for the rules). Called by the train command through
 * pt_text_data_load().
 *
 * Why these directory rules: a directory of text as Debian ships it
 * (/usr/share/games/fortunes) holds each text once as a regular file, a
 * binary index next to it (the strfile *.dat files, which contain NUL bytes)
 * and a symlink to it (*.u8). Taking regular files without NUL bytes reads
 * each text exactly once and no index; dropping hidden files keeps editor
 * and VCS droppings out. Sorting by bytes, not by locale, keeps the corpus
 * (and so the run) the same on every machine. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/text_data.h"
#include "tensor/error.h"

typedef struct {
    uint16_t *data;
    size_t n, cap;
} token_buf;

static int buf_append(token_buf *b, const unsigned char *bytes, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n)
            cap *= 2;
        uint16_t *d = realloc(b->data, cap * sizeof *d);
        if (!d)
            return pt_fail(PT_ENOMEM, "out of memory for the text corpus");
        b->data = d;
        b->cap = cap;
    }
    for (size_t i = 0; i < n; i++)
        b->data[b->n + i] = bytes[i];
    b->n += n;
    return PT_OK;
}

typedef struct {
    token_buf train, val;
    double val_fraction;
    int n_files;
    struct file_id {
        dev_t dev;
        ino_t ino;
    } * seen;
    size_t n_seen, cap_seen;
} corpus;

/* 1 if this file was read already (hard link or named twice), else records
 * it and returns 0; negative on allocation failure. */
static int seen_before(corpus *c, const struct stat *sb)
{
    for (size_t i = 0; i < c->n_seen; i++)
        if (c->seen[i].dev == sb->st_dev && c->seen[i].ino == sb->st_ino)
            return 1;
    if (c->n_seen == c->cap_seen) {
        size_t cap = c->cap_seen ? c->cap_seen * 2 : 64;
        struct file_id *s = realloc(c->seen, cap * sizeof *s);
        if (!s)
            return pt_fail(PT_ENOMEM, "out of memory");
        c->seen = s;
        c->cap_seen = cap;
    }
    c->seen[c->n_seen].dev = sb->st_dev;
    c->seen[c->n_seen].ino = sb->st_ino;
    c->n_seen++;
    return 0;
}

static int read_whole_file(const char *path, unsigned char **out, size_t *out_n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return pt_fail(PT_EIO, "%s: %s", path, strerror(errno));
    unsigned char *data = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            unsigned char *d = realloc(data, ncap);
            if (!d) {
                free(data);
                fclose(f);
                return pt_fail(PT_ENOMEM, "%s: out of memory", path);
            }
            data = d;
            cap = ncap;
        }
        size_t got = fread(data + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(data);
        return pt_fail(PT_EIO, "%s: read failed", path);
    }
    *out = data;
    *out_n = n;
    return PT_OK;
}

/* Adds one file: its head to training, its tail to validation. With
 * skip_binary, a file holding a NUL byte is passed over. */
static int add_file(corpus *c, const char *path, const struct stat *sb, int skip_binary)
{
    int r = seen_before(c, sb);
    if (r != 0)
        return r < 0 ? r : PT_OK;
    unsigned char *bytes = NULL;
    size_t n = 0;
    r = read_whole_file(path, &bytes, &n);
    if (r != PT_OK)
        return r;
    if (n == 0 || (skip_binary && memchr(bytes, 0, n))) {
        free(bytes);
        return PT_OK;
    }
    size_t n_val = (size_t)((double)n * c->val_fraction);
    r = buf_append(&c->train, bytes, n - n_val);
    if (r == PT_OK)
        r = buf_append(&c->val, bytes + (n - n_val), n_val);
    free(bytes);
    c->n_files++;
    return r;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_directory(corpus *c, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return pt_fail(PT_EIO, "%s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int r = PT_OK;
    struct dirent *e;
    while (r == PT_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **nn = realloc(names, ncap * sizeof *nn);
            if (!nn) {
                r = pt_fail(PT_ENOMEM, "out of memory");
                break;
            }
            names = nn;
            cap = ncap;
        }
        if (!(names[n] = strdup(e->d_name)))
            r = pt_fail(PT_ENOMEM, "out of memory");
        else
            n++;
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof *names, compare_names);
    size_t dir_len = strlen(dir);
    for (size_t i = 0; i < n && r == PT_OK; i++) {
        size_t len = dir_len + strlen(names[i]) + 2;
        char *path = malloc(len);
        if (!path) {
            r = pt_fail(PT_ENOMEM, "out of memory");
            break;
        }
        snprintf(path, len, "%s/%s", dir, names[i]);
        struct stat sb;
        if (lstat(path, &sb) != 0)
            r = pt_fail(PT_EIO, "%s: %s", path, strerror(errno));
        else if (S_ISREG(sb.st_mode))
            r = add_file(c, path, &sb, 1);
        free(path);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return r;
}

int pt_text_data_load(const char *const *paths, int n_paths, double val_fraction,
                      pt_token_data *out)
{
    memset(out, 0, sizeof *out);
    if (n_paths < 1)
        return pt_fail(PT_EINVAL, "no text data given");
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        return pt_fail(PT_EINVAL, "validation fraction %g is not in [0, 1)", val_fraction);
    corpus c = {0};
    c.val_fraction = val_fraction;
    int r = PT_OK;
    for (int i = 0; i < n_paths && r == PT_OK; i++) {
        struct stat sb;
        /* A path the user names is followed even if it is a symlink. */
        if (stat(paths[i], &sb) != 0)
            r = pt_fail(PT_EIO, "%s: %s", paths[i], strerror(errno));
        else if (S_ISDIR(sb.st_mode))
            r = add_directory(&c, paths[i]);
        else
            r = add_file(&c, paths[i], &sb, 0);
    }
    free(c.seen);
    if (r == PT_OK && c.train.n == 0)
        r = pt_fail(PT_EINVAL,
                    "%s%s: no text found (directories give their regular files "
                    "without NUL bytes)",
                    paths[0], n_paths > 1 ? " and the other paths" : "");
    if (r != PT_OK) {
        free(c.train.data);
        free(c.val.data);
        return r;
    }
    out->train = c.train.data;
    out->n_train = c.train.n;
    out->val = c.val.data;
    out->n_val = c.val.n;
    out->vocab = 256;
    out->n_files = c.n_files;
    return PT_OK;
}

void pt_token_data_free(pt_token_data *d)
{
    if (!d)
        return;
    free(d->train);
    free(d->val);
    memset(d, 0, sizeof *d);
}
