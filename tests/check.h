/* check.h: the assertions the C tests share.
 *   CHECK(cond, fmt, ...)    on failure: print where and why, count it in
 *                            `failures`, go on (main returns failures != 0);
 *   REQUIRE(cond, fmt, ...)  on failure: print where and why, return 1 from
 *                            the calling function at once.
 * Only the first 20 failures are printed; a broken loop does not flood the
 * log. */
#ifndef PT_TESTS_CHECK_H
#define PT_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int failures;
/* MPI tests set their rank here: it then prefixes every failure */
static int check_rank = -1;

#define CHECK_REPORT(...)                                        \
    do {                                                         \
        if (failures <= 20) {                                    \
            if (check_rank >= 0)                                 \
                fprintf(stderr, "rank %d: ", check_rank);        \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fputc('\n', stderr);                                 \
        }                                                        \
    } while (0)

#define CHECK(cond, ...)               \
    do {                               \
        if (!(cond)) {                 \
            failures++;                \
            CHECK_REPORT(__VA_ARGS__); \
        }                              \
    } while (0)

#define REQUIRE(cond, ...)             \
    do {                               \
        if (!(cond)) {                 \
            failures++;                \
            CHECK_REPORT(__VA_ARGS__); \
            return 1;                  \
        }                              \
    } while (0)

/* The end of main for a test that works in a scratch folder: removes it,
 * then "ok" and 0 when nothing failed (rc is what the checks returned). */
static inline int check_done(const char *scratch, int rc)
{
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    if (system(cmd) != 0)
        printf("could not remove %s\n", scratch);
    if (rc || failures)
        return 1;
    printf("ok\n");
    return 0;
}

#endif
