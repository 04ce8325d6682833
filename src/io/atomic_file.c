/* atomic_file.c: see atomic_file.h. The temporary name carries the process
 * id and a per-process counter and is created with O_EXCL, so two writers
 * (two threads, two processes) never share a temporary file; permissions
 * follow the umask, as a plain fopen() would give. Only a regular file (or
 * a name that does not exist yet) is ever replaced: a device, a folder, a
 * pipe or a symbolic link under the name is refused before anything is
 * written and again right before the rename. Opening and committing remove
 * the temporary files that killed writers left beside the name (their
 * process is gone), so at most one is ever left. */
#include "io/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor/error.h"

static atomic_uint tmp_counter;

static void release(pt_atomic_file *af)
{
    free(af->path);
    free(af->tmp_path);
    af->path = af->tmp_path = NULL;
    af->f = NULL;
}

/* PT_OK when path names a regular file or nothing yet. */
static int replaceable(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT
                   ? PT_OK
                   : pt_fail(PT_EIO, "%s: cannot look at it: %s", path, strerror(errno));
    if (S_ISREG(st.st_mode))
        return PT_OK;
    const char *what = S_ISDIR(st.st_mode)                          ? "a folder"
                       : S_ISLNK(st.st_mode)                        ? "a symbolic link"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                       : S_ISFIFO(st.st_mode)                       ? "a pipe"
                                                                    : "not a regular file";
    return pt_fail(PT_EINVAL, "%s is %s: only a regular file (or a new name) is written over", path,
                   what);
}

/* Removes "<name>.tmp.<pid>.<n>" beside path whose writer process is gone
 * (a writer killed before its rename). This process's own, and those of
 * live processes, stay: they may be writing right now. */
static void remove_stale(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return;
    char *slash = strrchr(copy, '/');
    const char *dir = slash ? (slash == copy ? "/" : copy) : ".", *base = slash ? slash + 1 : copy;
    if (slash)
        *slash = '\0';
    size_t n = strlen(base);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *name = e->d_name;
        if (strncmp(name, base, n) || strncmp(name + n, ".tmp.", 5))
            continue;
        char *end;
        long pid = strtol(name + n + 5, &end, 10);
        if (end == name + n + 5 || *end != '.' || pid <= 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive, or not ours to ask about */
        char *full = malloc(strlen(dir) + strlen(name) + 2);
        if (full) {
            sprintf(full, "%s/%s", dir, name);
            unlink(full);
            free(full);
        }
    }
    if (d)
        closedir(d);
    free(copy);
}

int pt_atomic_open(pt_atomic_file *af, const char *path)
{
    memset(af, 0, sizeof *af);
    size_t n = strlen(path);
    if (n == 0)
        return pt_fail(PT_EINVAL, "empty file name");
    int rc = replaceable(path);
    if (rc != PT_OK)
        return rc;
    remove_stale(path); /* so a killed writer's file never meets another's */
    af->path = strdup(path);
    af->tmp_path = malloc(n + 64);
    if (!af->path || !af->tmp_path) {
        release(af);
        return pt_fail(PT_ENOMEM, "out of memory");
    }
    int fd = -1, err = 0;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(af->tmp_path, n + 64, "%s.tmp.%ld.%u", path, (long)getpid(),
                 atomic_fetch_add(&tmp_counter, 1u));
        fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        err = errno;
        if (fd < 0 && err != EEXIST)
            break;
    }
    if (fd < 0) {
        int r = pt_fail(PT_EIO, "%s: cannot create a temporary file to write it: %s", path,
                        strerror(err));
        release(af);
        return r;
    }
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        err = errno;
        close(fd);
        unlink(af->tmp_path);
        int r = pt_fail(PT_EIO, "%s: %s", path, strerror(err));
        release(af);
        return r;
    }
    return PT_OK;
}

int pt_atomic_write(pt_atomic_file *af, const void *data, size_t n)
{
    if (af->failed)
        return PT_EIO;
    if (n > 0 && fwrite(data, 1, n, af->f) != n) {
        af->failed = errno ? errno : EIO;
        return pt_fail(PT_EIO, "%s: write failed (%s); the file was not changed", af->path,
                       strerror(af->failed));
    }
    return PT_OK;
}

void pt_atomic_abort(pt_atomic_file *af)
{
    if (af->f)
        fclose(af->f);
    if (af->tmp_path)
        unlink(af->tmp_path);
    release(af);
}

void pt_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Makes the rename itself durable. */
static void sync_parent_dir(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return;
    char *slash = strrchr(copy, '/');
    const char *dir = ".";
    if (slash == copy)
        dir = "/";
    else if (slash) {
        *slash = '\0';
        dir = copy;
    }
    pt_sync_dir(dir);
    free(copy);
}

int pt_atomic_commit(pt_atomic_file *af)
{
    const char *step = NULL;
    int err = 0;
    if (af->failed || ferror(af->f)) {
        step = "write";
        err = af->failed ? af->failed : EIO;
    } else if (fflush(af->f) != 0) {
        step = "flush";
        err = errno;
    } else if (fsync(fileno(af->f)) != 0) {
        step = "fsync";
        err = errno;
    }
    int close_r = fclose(af->f);
    af->f = NULL;
    if (!step && close_r != 0) {
        step = "close";
        err = errno;
    }
    if (!step && replaceable(af->path) != PT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", pt_last_error());
        unlink(af->tmp_path);
        release(af);
        return pt_fail(PT_EINVAL, "%s", msg);
    }
    if (!step && rename(af->tmp_path, af->path) != 0) {
        step = "rename";
        err = errno;
    }
    if (step) {
        unlink(af->tmp_path);
        int r =
            pt_fail(PT_EIO, "%s: %s of the temporary file %s failed (%s); the file was not changed",
                    af->path, step, af->tmp_path, strerror(err));
        release(af);
        return r;
    }
    sync_parent_dir(af->path);
    remove_stale(af->path);
    release(af);
    return PT_OK;
}

int pt_atomic_write_file(const char *path, const void *data, size_t n)
{
    pt_atomic_file af;
    int rc = pt_atomic_open(&af, path);
    if (rc == PT_OK)
        rc = pt_atomic_write(&af, data, n);
    if (rc == PT_OK)
        rc = pt_atomic_commit(&af);
    else if (af.f)
        pt_atomic_abort(&af);
    return rc;
}
