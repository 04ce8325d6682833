/* replay.c: the main() that turns a fuzz harness into a regression test.
 * Linked with one fuzz/fuzz_<name>.c (gcc, no libFuzzer), it feeds every
 * file named on the command line, or found in a folder named there, through
 * LLVMFuzzerTestOneInput() once, in name order. fuzz/CMakeLists.txt runs it
 * on fuzz/corpus/<name>/ (the seeds) and fuzz/crashes/<name>/ (every crash
 * ever found, kept once fixed), so `make check` replays both under
 * AddressSanitizer and UndefinedBehaviorSanitizer. A harness that crashes,
 * trips a sanitizer or breaks a property it asserts fails the test; so does
 * a first folder with no inputs in it (a replay that replays nothing proves
 * nothing). A folder that does not exist is taken as empty. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t *data = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *d = realloc(data, cap);
            if (!d)
                abort();
            data = d;
        }
        got = fread(data + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(data);
        fprintf(stderr, "%s: read failed\n", path);
        return -1;
    }
    /* an exact-size copy, so ASan sees a read one past the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact)
        abort();
    memcpy(exact, data, n);
    free(data);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays every regular file of dir; returns how many, or -1. */
static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char **nn = realloc(names, (n + 1) * sizeof *names);
        if (!nn || !(nn[n] = strdup(e->d_name)))
            abort();
        names = nn;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        char path[8192];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            if (replay_file(path) != 0)
                count = -1;
            else if (count >= 0)
                count++;
        }
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FOLDER_OR_FILE...\n", argv[0]);
        return 2;
    }
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        int n = stat(argv[i], &sb) == 0 && S_ISREG(sb.st_mode) ? (replay_file(argv[i]) ? -1 : 1)
                                                               : replay_dir(argv[i]);
        if (n < 0) {
            fprintf(stderr, "%s: cannot be replayed\n", argv[i]);
            return 1;
        }
        if (i == 1 && n == 0) {
            fprintf(stderr, "%s: no inputs to replay\n", argv[i]);
            return 1;
        }
        printf("%s: %d inputs\n", argv[i], n);
        total += n;
    }
    printf("%d inputs replayed\n", total);
    return 0;
}
