/* test_output_files: what pipetrain writes lands only in regular files, and
 * a killed writer never costs the file under the name.
 *   - an atomic write (checkpoints, rewritten logs) to a folder, a pipe, a
 *     symbolic link or a device is refused before anything is written; the
 *     thing under the name is untouched and no temporary file is left;
 *   - a file written in place (traces, metrics logs, drawings) is refused
 *     likewise, and a pipe nobody reads is refused at once instead of
 *     waiting forever;
 *   - temporary files of writers that were killed (their process is gone)
 *     are removed by the next successful write beside them; a live
 *     process's are kept;
 *   - a child writing one safetensors file over and over is killed with
 *     SIGKILL at random moments, PT_KILL_ROUNDS times (default 40; a long
 *     run asks for 100 or more): after every kill the file loads and holds
 *     one complete save, and at most one temporary file is left beside it. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "tensor/output_file.h"

static char dir[] = "/tmp/pt_outputs_XXXXXX";

static int count_tmp(const char *base)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s.tmp.", base);
    while (d && (e = readdir(d)))
        n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (d)
        closedir(d);
    return n;
}

static int check_refusals(void)
{
    char sub[512], fifo[512], link[512], target[512];
    snprintf(sub, sizeof sub, "%s/folder", dir);
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    snprintf(target, sizeof target, "%s/target", dir);
    REQUIRE(mkdir(sub, 0755) == 0 && mkfifo(fifo, 0644) == 0, "setup: %s", strerror(errno));
    FILE *t = fopen(target, "w");
    REQUIRE(t && fputs("keep", t) >= 0 && fclose(t) == 0, "setup target");
    REQUIRE(symlink(target, link) == 0, "symlink: %s", strerror(errno));
    const char *names[] = {sub, fifo, link, "/dev/null"};
    const char *says[] = {"a folder", "a pipe", "a symbolic link", "a device"};
    for (int i = 0; i < 4; i++) {
        pt_atomic_file af;
        CHECK(pt_atomic_open(&af, names[i]) == PT_EINVAL && strstr(pt_last_error(), says[i]),
              "atomic write over %s: %s", names[i], pt_last_error());
    }
    struct stat st;
    CHECK(lstat(sub, &st) == 0 && S_ISDIR(st.st_mode), "the folder was replaced");
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the pipe was replaced");
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link was replaced");
    CHECK(lstat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "/dev/null was replaced");
    CHECK(count_tmp("folder") + count_tmp("pipe") + count_tmp("link") == 0,
          "a refused write left a temporary file");
    /* written in place: a trace, a log */
    time_t t0 = time(NULL);
    CHECK(!pt_open_output(fifo, "w") && strstr(pt_last_error(), "pipe"),
          "a pipe with no reader: %s", pt_last_error());
    CHECK(time(NULL) - t0 < 5, "opening a pipe with no reader waited");
    CHECK(!pt_open_output(sub, "a") && strstr(pt_last_error(), "folder"), "a folder: %s",
          pt_last_error());
    CHECK(!pt_open_output("/dev/null", "w") && strstr(pt_last_error(), "not a regular file"),
          "a device: %s", pt_last_error());
    FILE *f = pt_open_output(target, "a");
    CHECK(f && fputs("!", f) >= 0 && fclose(f) == 0, "appending to a regular file: %s",
          pt_last_error());
    return 0;
}

/* One tensor of 4096 floats all equal to `value`. */
static int save(const char *path, float value)
{
    static float x[4096];
    for (int i = 0; i < 4096; i++)
        x[i] = value;
    pt_st_tensor t = {.name = "x", .dtype = PT_DT_F32, .ndim = 1, .shape = {4096}, .data = x};
    return pt_safetensors_write(path, &t, 1, NULL, 0);
}

/* The file holds one complete save: every value the same. */
static int load(const char *path, float *value)
{
    pt_safetensors *st;
    static float x[4096];
    int shape[1] = {4096};
    if (pt_safetensors_open(path, &st) != PT_OK)
        return 1;
    int rc = pt_safetensors_read(st, "x", PT_DT_F32, 1, shape, x);
    pt_safetensors_close(st);
    for (int i = 1; rc == PT_OK && i < 4096; i++)
        rc = x[i] == x[0] ? PT_OK : PT_EFORMAT;
    *value = x[0];
    return rc != PT_OK;
}

static int check_stale_and_kills(void)
{
    char path[512], stale[600], live[600];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    REQUIRE(save(path, 1.0f) == PT_OK, "first save: %s", pt_last_error());
    /* a writer that is gone, and one that lives (this test's parent) */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    snprintf(stale, sizeof stale, "%s.tmp.%d.7", path, (int)dead);
    snprintf(live, sizeof live, "%s.tmp.%d.7", path, (int)getppid());
    FILE *a = fopen(stale, "w"), *b = fopen(live, "w");
    REQUIRE(a && b, "setup temporaries");
    fclose(a), fclose(b);
    REQUIRE(save(path, 2.0f) == PT_OK, "second save: %s", pt_last_error());
    CHECK(access(stale, F_OK) != 0, "a dead writer's temporary file was kept");
    CHECK(access(live, F_OK) == 0, "a live writer's temporary file was removed");
    unlink(live);

    const char *env = getenv("PT_KILL_ROUNDS");
    int rounds = env && atoi(env) > 0 ? atoi(env) : 40, torn = 0, most_tmp = 0;
    srand((unsigned)time(NULL));
    for (int k = 0; k < rounds; k++) {
        pid_t child = fork();
        if (child == 0) {
            for (float v = 10.0f * (float)(k + 1);; v += 1.0f)
                if (save(path, v) != PT_OK)
                    _exit(1);
        }
        struct timespec ts = {0, (long)(rand() % 20000) * 1000};
        nanosleep(&ts, NULL);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        float v;
        torn += load(path, &v);
        int n = count_tmp("ck.safetensors");
        most_tmp = n > most_tmp ? n : most_tmp;
    }
    CHECK(torn == 0, "%d of %d kills left a file that does not load whole", torn, rounds);
    CHECK(most_tmp <= 1, "%d temporary files beside the checkpoint", most_tmp);
    printf("%d kills: the file always loaded whole; at most %d temporary file beside it\n", rounds,
           most_tmp);
    return 0;
}

int main(void)
{
    REQUIRE(mkdtemp(dir), "mkdtemp");
    return check_done(dir, check_refusals() || check_stale_and_kills());
}
