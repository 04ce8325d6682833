/* test_checkpoint_set_kill: a save killed at any moment leaves the set
 * under its name loadable and equal to one of the saves that completed (or
 * to the one in flight, once its swap is done), and never more than one
 * staging folder beside it. A child process saves sets of three shards
 * (three threads, as a pipeline's stages write them) into one folder in a
 * loop, each save with other values (a function of its step, so the parent
 * can tell what any save held); the parent SIGKILLs it after a random delay,
 * loads the folder and checks it, and starts the next child. Rounds:
 * PT_KILL_ROUNDS (default 30; a longer run may ask for 100 or more). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint_harness.h"

enum { SHARDS = 3 };
static char dir[] = "/tmp/pt_ckkill_XXXXXX", dest[256];

/* What save `step` holds for parameter i (which -1) or its moments. */
static float value(long step, int i, size_t j, int which)
{
    return (float)((step * 7919 + i * 131 + (long)j * 3 + which) % 100003) * 0.125f;
}

/* Save `step`'s values into every part: a tied copy holds what it copies. */
static void fill(part *parts, long step)
{
    for (int k = 0; k < SHARDS; k++)
        for (int i = 0; i < pt_model_n_params(parts[k].m); i++) {
            const pt_param *p = pt_model_param(parts[k].m, i);
            int id = p->tied_to ? (int)(pt_model_find_param(parts[k].m, p->tied_to) -
                                        pt_model_param(parts[k].m, 0))
                                : i;
            for (int w = -1; p->data && w < 2; w++) {
                float *dst = w < 0 ? p->data : pt_optimizer_state(parts[k].opt, parts[k].m, i, w);
                for (size_t j = 0; j < p->numel; j++)
                    dst[j] = value(step, id, j, w);
            }
        }
}

typedef struct {
    const char *staging;
    part *p;
    int shard;
    const pt_train_state *st;
    int rc;
} shard_job;

static void *write_one(void *arg)
{
    shard_job *j = arg;
    j->rc = pt_checkpoint_write_shard(j->staging, j->shard, SHARDS, j->p->m, j->p->opt, j->st,
                                      "kill-test");
    return NULL;
}

static int save(part *parts, const pt_model *desc, long step)
{
    pt_train_state st = {.step = step, .data_drawn = (uint64_t)step};
    pt_rng_seed(&st.data_rng, (uint64_t)step);
    fill(parts, step);
    char staging[4096];
    int rc = pt_checkpoint_begin(dest, staging, sizeof staging);
    pthread_t th[SHARDS];
    shard_job jobs[SHARDS];
    for (int k = 0; rc == PT_OK && k < SHARDS; k++) {
        jobs[k] = (shard_job){staging, &parts[k], k, &st, 0};
        pthread_create(&th[k], NULL, write_one, &jobs[k]);
    }
    for (int k = 0; rc == PT_OK && k < SHARDS; k++) {
        pthread_join(th[k], NULL);
        rc = rc ? rc : jobs[k].rc;
    }
    if (rc == PT_OK)
        rc = pt_checkpoint_publish(staging, dest, SHARDS, desc, parts[0].opt, &st, "kill-test");
    return rc;
}

static int staging_folders(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, ".staging.") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* The folder loads into a whole model, holds the values of one save, and
 * that save is `done` or `done + 1`; returns its step, or -1. */
static long check_folder(const pt_model_config *c, const pt_optim_config *oc, long done)
{
    part whole;
    pt_train_state st;
    if (make_part(c, 0, c->n_layer + 1, NULL, NULL, oc, &whole))
        return -1;
    int rc = pt_checkpoint_load(dest, whole.m, whole.opt, &st);
    CHECK(rc == PT_OK, "after a kill the set does not load: %s", pt_last_error());
    long step = rc == PT_OK ? st.step : -1;
    CHECK(rc != PT_OK || step == done || step == done + 1,
          "after a kill the set is of step %ld; saves up to %ld completed", step, done);
    int same = rc == PT_OK && st.data_drawn == (uint64_t)step;
    for (int i = 0; same && i < pt_model_n_params(whole.m); i++) {
        const pt_param *p = pt_model_param(whole.m, i);
        int id = p->tied_to
                     ? (int)(pt_model_find_param(whole.m, p->tied_to) - pt_model_param(whole.m, 0))
                     : i;
        for (int w = -1; same && w < 2; w++) {
            const float *got = w < 0 ? p->data : pt_optimizer_state(whole.opt, whole.m, i, w);
            for (size_t j = 0; same && j < p->numel; j++)
                same = got[j] == value(step, id, j, w);
        }
    }
    CHECK(rc != PT_OK || same, "after a kill the set of step %ld holds another save's values",
          step);
    free_parts(&whole, 1);
    return same ? step : -1;
}

int main(void)
{
    const char *env = getenv("PT_KILL_ROUNDS");
    int rounds = env ? atoi(env) : 30;
    if (!mkdtemp(dir))
        return 1;
    snprintf(dest, sizeof dest, "%s/set", dir);
    pt_model_config c = small_gpt();
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_model *desc;
    part parts[SHARDS];
    int ends[SHARDS] = {1, 3, 5};
    if (pt_model_describe(&c, &desc) || make_parts(&c, ends, SHARDS, NULL, NULL, &oc, parts))
        return printf("setup: %s\n", pt_last_error()), 1;

    /* the first saves, timed (the fastest): kills land within a few saves */
    long save_us = 0;
    for (long s = 0; s < 3; s++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (save(parts, desc, s) != PT_OK)
            return printf("save: %s\n", pt_last_error()), 1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
        save_us = s == 0 || us < save_us ? us : save_us;
    }
    long done = 2, next = 3, mid_save = 0;
    srand(12345);
    for (int r = 0; r < rounds && failures == 0; r++) {
        int fd[2];
        if (pipe(fd) != 0)
            return 1;
        pid_t pid = fork();
        if (pid == 0) {
            close(fd[0]);
            for (long s = next;; s++) {
                if (save(parts, desc, s) != PT_OK) {
                    fprintf(stderr, "child: %s\n", pt_last_error());
                    _exit(1);
                }
                if (write(fd[1], &s, sizeof s) != sizeof s)
                    _exit(1);
            }
        }
        close(fd[1]);
        usleep((useconds_t)(rand() % (3 * save_us + 1000)));
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status), "round %d: the child ended by itself (status %d)", r, status);
        for (long s; read(fd[0], &s, sizeof s) == sizeof s;)
            done = s;
        close(fd[0]);
        CHECK(staging_folders() <= 1, "round %d: %d staging folders", r, staging_folders());
        long step = check_folder(&c, &oc, done);
        mid_save += step == done + 1;
        done = step > done ? step : done; /* in place: a completed save */
        next = done + 1;
    }
    printf("%s: %d kills, the set always whole (%ld caught between swap and report), last "
           "step %ld, one save ~%ld us\n",
           failures ? "FAIL" : "ok", rounds, mid_save, done, save_us);
    free_parts(parts, SHARDS);
    pt_model_destroy(desc);
    if (!failures) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        CHECK(system(cmd) == 0, "%s", cmd);
    }
    return failures != 0;
}
