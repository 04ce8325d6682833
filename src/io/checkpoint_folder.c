/* checkpoint_folder.c: the folder side of a checkpoint set's save
 * (checkpoint_folder.h) and pt_checkpoint_begin.
 *
 * A save never replaces what is not a checkpoint: a set's destination must
 * be absent, an empty folder or a folder of a set's files alone, so a
 * mistyped --save naming a home folder is refused rather than swapped out
 * and deleted. Staging folders are named "<dest>.staging.<pid>.<n>": one
 * save into a dest at a time, so any such folder found at begin is left by
 * a killed save (a half-written set, or an old set swapped out but not yet
 * removed) and is removed, as are "<dest>.tmp.*" files of a killed
 * single-file writer. */
#include "io/checkpoint_folder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/atomic_file.h"

#define PATH_BYTES 4096

static atomic_uint staging_counter;

int pt_checkpoint_is_file(const char *dest)
{
    size_t n = strlen(dest);
    return n >= 12 && !strcmp(dest + n - 12, ".safetensors");
}

/* dest without trailing slashes, the folder it is in, and its own name. */
static int split(const char *dest, char *path, char *dir, const char **base)
{
    size_t n = strlen(dest);
    while (n > 1 && dest[n - 1] == '/')
        n--;
    if (n == 0 || n >= PATH_BYTES)
        return pt_fail(PT_EINVAL, "'%s' is no name for a checkpoint", dest);
    memcpy(path, dest, n);
    path[n] = '\0';
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, PATH_BYTES, ".");
    else if (slash == path)
        snprintf(dir, PATH_BYTES, "/");
    else
        snprintf(dir, PATH_BYTES, "%.*s", (int)(slash - path), path);
    *base = slash ? slash + 1 : path;
    if (!**base || !strcmp(*base, ".") || !strcmp(*base, ".."))
        return pt_fail(PT_EINVAL, "'%s' is no name for a checkpoint", dest);
    return PT_OK;
}

static int starts_with(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

/* A name a set's folder may hold (its temporary files included). */
static int set_member(const char *name)
{
    if (starts_with(name, PT_SET_STATE) || starts_with(name, PT_SET_CONFIG))
        return 1;
    for (int i = 0; pt_set_tokenizer_files[i]; i++)
        if (starts_with(name, pt_set_tokenizer_files[i]))
            return 1;
    return (starts_with(name, PT_SET_WEIGHTS) || starts_with(name, PT_SET_MOMENTS)) &&
           strstr(name, ".safetensors");
}

int pt_ckpt_check_dest(const char *dest)
{
    struct stat sb;
    if (lstat(dest, &sb) != 0)
        return errno == ENOENT ? PT_OK : pt_fail(PT_EIO, "%s: %s", dest, strerror(errno));
    if (pt_checkpoint_is_file(dest))
        return S_ISREG(sb.st_mode) ? PT_OK
                                   : pt_fail(PT_EINVAL,
                                             "%s exists and is not a file: a checkpoint will not "
                                             "replace it",
                                             dest);
    if (!S_ISDIR(sb.st_mode))
        return pt_fail(PT_EINVAL,
                       "%s exists and is not a folder: a checkpoint set is a folder (a name "
                       "ending in .safetensors saves one file)",
                       dest);
    DIR *d = opendir(dest);
    if (!d)
        return pt_fail(PT_EIO, "%s: %s", dest, strerror(errno));
    int rc = PT_OK;
    for (struct dirent *e; rc == PT_OK && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !set_member(e->d_name))
            rc = pt_fail(PT_EINVAL,
                         "%s holds '%s', which is no part of a checkpoint set: a save will not "
                         "replace this folder",
                         dest, e->d_name);
    closedir(d);
    return rc;
}

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    remove(path);
    return 0;
}

void pt_ckpt_remove_tree(const char *path) { nftw(path, remove_entry, 8, FTW_DEPTH | FTW_PHYS); }

/* What killed saves into dir/base left: staging folders and temporary
 * files. */
static void remove_stale(const char *dir, const char *base)
{
    char staging[PATH_BYTES], tmp[PATH_BYTES], path[2 * PATH_BYTES];
    snprintf(staging, sizeof staging, "%s.staging.", base);
    snprintf(tmp, sizeof tmp, "%s.tmp.", base);
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (starts_with(e->d_name, staging))
            pt_ckpt_remove_tree(path);
        else if (starts_with(e->d_name, tmp))
            unlink(path);
    }
    closedir(d);
}

int pt_checkpoint_begin(const char *dest, char *staging, size_t n)
{
    char path[PATH_BYTES], dir[PATH_BYTES], buf[PATH_BYTES + 64];
    const char *base;
    int rc = split(dest, path, dir, &base);
    struct stat sb;
    if (rc == PT_OK && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        rc = pt_fail(PT_EIO, "%s: the folder %s does not exist", dest, dir);
    if (rc == PT_OK)
        rc = pt_ckpt_check_dest(path);
    if (rc != PT_OK)
        return rc;
    remove_stale(dir, base);
    for (int attempt = 0;; attempt++) {
        snprintf(buf, sizeof buf, "%s.staging.%ld.%u", path, (long)getpid(),
                 atomic_fetch_add(&staging_counter, 1u));
        if (mkdir(buf, 0777) == 0)
            break;
        if (errno != EEXIST || attempt == 100)
            return pt_fail(PT_EIO, "%s: cannot make a staging folder: %s", buf, strerror(errno));
    }
    if (strlen(buf) >= n) {
        rmdir(buf);
        return pt_fail(PT_EINVAL, "%s: the path is longer than the caller's %zu bytes", buf, n);
    }
    memcpy(staging, buf, strlen(buf) + 1);
    return PT_OK;
}

int pt_ckpt_swap_in(const char *staging, const char *dest)
{
    char path[PATH_BYTES], dir[PATH_BYTES], old[PATH_BYTES + 8];
    const char *base;
    int rc = split(dest, path, dir, &base);
    if (rc == PT_OK)
        rc = pt_ckpt_check_dest(path);
    if (rc != PT_OK)
        return rc;
    if (renameat2(AT_FDCWD, staging, AT_FDCWD, path, RENAME_EXCHANGE) == 0) {
        pt_sync_dir(dir);
        pt_ckpt_remove_tree(staging); /* the old set, now under the staging name */
        return PT_OK;
    }
    if (errno == ENOENT && rename(staging, path) == 0) {
        pt_sync_dir(dir);
        return PT_OK;
    }
    if (errno == EINVAL || errno == ENOSYS) {
        /* a filesystem without the exchange: a moment with no set under
         * dest, the old one whole beside it */
        snprintf(old, sizeof old, "%s.old", staging);
        if (rename(path, old) == 0 && rename(staging, path) == 0) {
            pt_sync_dir(dir);
            pt_ckpt_remove_tree(old);
            return PT_OK;
        }
    }
    return pt_fail(PT_EIO, "%s: cannot put the new set in place: %s", dest, strerror(errno));
}
