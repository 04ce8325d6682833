/* text_corpus.c: text corpora from files and directories (see text_data.h
 * for the rules): the listing of their files, which every reader of text
 * shares (byte-level corpora here, tokenized ones in
 * src/text/text_tokens.c, `pipetrain tokenize`), and byte-level corpora,
 * which the train command loads through pt_text_data_load().
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
#include "io/whole_file.h"
#include "tensor/error.h"

int pt_token_ids_reserve(pt_token_ids *ids, size_t k)
{
    if (ids->n + k <= ids->cap)
        return PT_OK;
    size_t cap = ids->cap ? ids->cap : 1024;
    while (cap < ids->n + k)
        cap *= 2;
    uint32_t *grown = realloc(ids->ids, cap * sizeof *grown);
    if (!grown)
        return pt_fail(PT_ENOMEM, "out of memory for %zu tokens", cap);
    ids->ids = grown;
    ids->cap = cap;
    return PT_OK;
}

/* ---- Listing ----------------------------------------------------------- */

typedef struct {
    pt_text_file *files;
    size_t n, cap;
    struct file_id {
        dev_t dev;
        ino_t ino;
    } * seen;
} listing;

/* Lists path unless it was listed already (hard link or named twice). */
static int list_file(listing *l, const char *path, const struct stat *sb, int in_folder)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->seen[i].dev == sb->st_dev && l->seen[i].ino == sb->st_ino)
            return PT_OK;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        pt_text_file *f = realloc(l->files, cap * sizeof *f);
        if (f)
            l->files = f;
        struct file_id *s = realloc(l->seen, cap * sizeof *s);
        if (s)
            l->seen = s;
        if (!f || !s)
            return pt_fail(PT_ENOMEM, "out of memory");
        l->cap = cap;
    }
    char *copy = strdup(path);
    if (!copy)
        return pt_fail(PT_ENOMEM, "out of memory");
    l->files[l->n] = (pt_text_file){copy, (uint64_t)sb->st_size, in_folder};
    l->seen[l->n].dev = sb->st_dev;
    l->seen[l->n].ino = sb->st_ino;
    l->n++;
    return PT_OK;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_directory(listing *l, const char *dir)
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
            r = list_file(l, path, &sb, 1);
        free(path);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return r;
}

int pt_text_files_list(const char *const *paths, int n_paths, pt_text_file **files, size_t *n)
{
    *files = NULL;
    *n = 0;
    if (n_paths < 1)
        return pt_fail(PT_EINVAL, "no text data given");
    listing l = {0};
    int r = PT_OK;
    for (int i = 0; i < n_paths && r == PT_OK; i++) {
        struct stat sb;
        /* A path the user names is followed even if it is a symlink. */
        if (stat(paths[i], &sb) != 0)
            r = pt_fail(PT_EIO, "%s: %s", paths[i], strerror(errno));
        else if (S_ISDIR(sb.st_mode))
            r = list_directory(&l, paths[i]);
        else
            r = list_file(&l, paths[i], &sb, 0);
    }
    free(l.seen);
    if (r != PT_OK) {
        pt_text_files_free(l.files, l.n);
        return r;
    }
    *files = l.files;
    *n = l.n;
    return PT_OK;
}

void pt_text_files_free(pt_text_file *files, size_t n)
{
    for (size_t i = 0; files && i < n; i++)
        free(files[i].path);
    free(files);
}

int pt_text_file_read(const pt_text_file *f, unsigned char **bytes, size_t *n)
{
    int r = pt_read_whole_file(f->path, bytes, n);
    if (r == PT_OK && (*n == 0 || (f->in_folder && memchr(*bytes, 0, *n)))) {
        free(*bytes);
        *bytes = NULL;
        *n = 0;
    }
    return r;
}

/* ---- Corpora ----------------------------------------------------------- */

int pt_text_none_found(const char *const *paths, int n_paths)
{
    return pt_fail(PT_EINVAL,
                   "%s%s: no text found (directories give their regular files without NUL "
                   "bytes)",
                   paths[0], n_paths > 1 ? " and the other paths" : "");
}

int pt_text_data_load_with(const char *const *paths, int n_paths, double val_fraction,
                           pt_text_encoder encode, void *user, int vocab, pt_token_data *out)
{
    memset(out, 0, sizeof *out);
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        return pt_fail(PT_EINVAL, "validation fraction %g is not in [0, 1)", val_fraction);
    pt_text_file *files;
    size_t n_files;
    int r = pt_text_files_list(paths, n_paths, &files, &n_files);
    if (r != PT_OK)
        return r;
    pt_token_ids train = {0}, val = {0};
    for (size_t i = 0; i < n_files && r == PT_OK; i++) {
        unsigned char *bytes;
        size_t n;
        r = pt_text_file_read(&files[i], &bytes, &n);
        if (r != PT_OK || !bytes)
            continue;
        size_t n_val = (size_t)((double)n * val_fraction);
        r = encode(user, bytes, n - n_val, &train);
        if (r == PT_OK && n_val > 0)
            r = encode(user, bytes + (n - n_val), n_val, &val);
        free(bytes);
        out->n_files++;
    }
    pt_text_files_free(files, n_files);
    if (r == PT_OK && train.n == 0)
        r = pt_text_none_found(paths, n_paths);
    if (r != PT_OK) {
        free(train.ids);
        free(val.ids);
        out->n_files = 0;
        return r;
    }
    out->train = train.ids;
    out->n_train = train.n;
    out->val = val.ids;
    out->n_val = val.n;
    out->vocab = vocab;
    return PT_OK;
}

/* Every byte is a token. */
static int bytes_as_tokens(void *user, const unsigned char *text, size_t n, pt_token_ids *out)
{
    (void)user;
    int r = pt_token_ids_reserve(out, n);
    if (r != PT_OK)
        return r;
    for (size_t i = 0; i < n; i++)
        out->ids[out->n + i] = text[i];
    out->n += n;
    return PT_OK;
}

int pt_text_data_load(const char *const *paths, int n_paths, double val_fraction,
                      pt_token_data *out)
{
    return pt_text_data_load_with(paths, n_paths, val_fraction, bytes_as_tokens, NULL, 256, out);
}

void pt_token_data_free(pt_token_data *d)
{
    if (!d)
        return;
    free(d->train);
    free(d->val);
    memset(d, 0, sizeof *d);
}
