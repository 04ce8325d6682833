/* mpi_launch.h: how the MPI fault tests start themselves under mpirun.
 * Run alone, such a test launches its own executable as an N-rank job
 * ($PT_MPIEXEC with $PT_MPIEXEC_FLAGS, set by tests/CMakeLists.txt), with
 * extra environment variables, and reads the job's exit status, combined
 * output and duration. Header-only: each test is one program. */
#ifndef PT_TESTS_MPI_LAUNCH_H
#define PT_TESTS_MPI_LAUNCH_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline double launch_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs this executable under mpirun with `ranks` ranks and the "NAME=value"
 * strings of env (NULL-terminated) added to the environment. Returns the
 * exit status (128 + signal if killed; -1 if it could not start), the tail
 * of the output in out, the wall time in *took. flags is split in place. */
static inline int launch_self(const char *mpiexec, char *flags, int ranks, const char *const *env,
                              char *out, size_t cap, double *took)
{
    char *argv[32], np[16], self[4096];
    int argc = 0;
    argv[argc++] = (char *)mpiexec;
    for (char *f = strtok(flags, " "); f && argc < 24; f = strtok(NULL, " "))
        argv[argc++] = f;
    snprintf(np, sizeof np, "%d", ranks);
    argv[argc++] = "-np";
    argv[argc++] = np;
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    argv[argc++] = self;
    argv[argc] = NULL;
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    double t0 = launch_seconds();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execvp(mpiexec, argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    for (;;) {
        ssize_t got = read(fds[0], out + len, cap - 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        len += (size_t)got;
        if (len == cap - 1)
            len = 0; /* keep reading; only the tail matters */
    }
    out[len] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    *took = launch_seconds() - t0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#endif
