/* atomic_file.h: write a file so that readers see the old contents or the
 * complete new contents, never a half-written file.
 *
 * The data goes to a temporary file in the same directory (so rename() stays
 * on one filesystem), is flushed and fsync'ed, and only then renamed onto the
 * final name; the directory is fsync'ed after the rename. Any failure removes
 * the temporary file and leaves whatever was under the final name untouched.
 * Callers: safetensors.c (checkpoints), metrics.c (rewriting a log on
 * resume); anything else that must not leave a torn file. */
#ifndef PT_IO_ATOMIC_FILE_H
#define PT_IO_ATOMIC_FILE_H

#include "pipetrain.h"

#include <stddef.h>
#include <stdio.h>

typedef struct {
    FILE *f;        /* the temporary file; write to it directly or with pt_atomic_write */
    char *path;     /* the final name */
    char *tmp_path; /* "<path>.tmp.<pid>.<n>" */
    int failed;     /* errno of a failed write: commit will refuse */
} pt_atomic_file;

/* Creates the temporary file. PT_EIO (with the path and the system's reason)
 * if it cannot be created, e.g. the directory does not exist. */
int pt_atomic_open(pt_atomic_file *af, const char *path);
/* Writes n bytes; PT_EIO on failure (the file is then only good to abort). */
int pt_atomic_write(pt_atomic_file *af, const void *data, size_t n);
/* Flushes, fsyncs, closes and renames onto the final name. On any failure
 * the temporary file is removed and PT_EIO returned. Frees af's memory
 * either way. */
int pt_atomic_commit(pt_atomic_file *af);
/* Closes and removes the temporary file; the final name is untouched. */
void pt_atomic_abort(pt_atomic_file *af);
/* The whole file at once: open, write n bytes, commit (abort on failure). */
int pt_atomic_write_file(const char *path, const void *data, size_t n);
/* Makes renames and creations inside a directory durable (fsync of the
 * directory). Some filesystems refuse that; the files' data is safe by then,
 * so a failure is ignored. */
void pt_sync_dir(const char *dir);

#endif
