/* harness.h: what the fuzz harnesses (fuzz/fuzz_*.c) share. Each harness is
 * one LLVMFuzzerTestOneInput(); under clang's libFuzzer it is a fuzzer
 * (make fuzz), and linked with replay.c under gcc it replays the committed
 * corpus and crash files as a CTest test (make check).
 *
 * Parsers that read a path get the input written into a private folder made
 * once per process (under $TMPDIR, else /dev/shm, else /tmp: a tmpfs keeps
 * a million executions off the disk) and removed at exit. A property a
 * harness asserts and finds broken aborts with FUZZ_REQUIRE, which both
 * libFuzzer and the replay report as a failure. */
#ifndef PT_FUZZ_HARNESS_H
#define PT_FUZZ_HARNESS_H

#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_REQUIRE(cond, ...)                                              \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: property broken: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            abort();                                                         \
        }                                                                    \
    } while (0)

static char fuzz_dir_path[256];

static inline int fuzz_remove_entry(const char *path, const struct stat *sb, int type,
                                    struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    remove(path);
    return 0;
}

/* The folder and everything in it (files, and the folders some harnesses
 * make inside it). */
static inline void fuzz_dir_remove(void)
{
    nftw(fuzz_dir_path, fuzz_remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* The process's private folder. */
static inline const char *fuzz_dir(void)
{
    if (fuzz_dir_path[0])
        return fuzz_dir_path;
    struct stat sb;
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/pt-fuzz-XXXXXX", base);
    if (!mkdtemp(fuzz_dir_path)) {
        perror(fuzz_dir_path);
        abort();
    }
    atexit(fuzz_dir_remove);
    return fuzz_dir_path;
}

/* Writes data[0..n) as the file `name` of the private folder; its path
 * goes into path[0..cap), which is returned. */
static inline const char *fuzz_write(const char *name, const void *data, size_t n, char *path,
                                     size_t cap)
{
    snprintf(path, cap, "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        abort();
    }
    return path;
}

/* Removes the file `name` of the private folder, if there. */
static inline void fuzz_remove(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    unlink(path);
}

/* data[0..n) as a NUL-terminated string (caller frees); the text stops at
 * the first NUL byte, as a C reader's would. */
static inline char *fuzz_text(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        abort();
    memcpy(s, data, n);
    s[n] = '\0';
    return s;
}

#endif
