/* test_mpi_fault: a rank that dies or hangs mid-run ends the whole job,
 * non-zero, within 30 s, with a message naming it.
 *
 * Run alone (as CTest does), the program starts itself under mpirun with 3
 * ranks ($PT_MPIEXEC and $PT_MPIEXEC_FLAGS, set by tests/CMakeLists.txt)
 * and PIPETRAIN_TIMEOUT=3, three times, and checks each job's output,
 * duration and exit status:
 *   1. rank 1 dies (_exit, as a crash would), default launch: Open MPI ends
 *      the job at once, non-zero, and its own message names the rank
 *      ("Process name: [[job,1],1]");
 *   2. rank 1 hangs: the survivors' waits fail within the deadline, they
 *      print messages naming rank 1 and exit 1, and mpirun ends the job;
 *   3. rank 1 dies, with Open MPI's reflex off
 *      (OMPI_MCA_orte_abort_on_non_zero_status=0): the survivors name rank 1
 *      (mpirun then exits 0 by its own choice, so the status is not checked).
 * Under mpirun (PT_FAULT_MODE set) it is the job: the ranks pass a token
 * around a ring; at round 20 rank 1 fails; a survivor whose wait fails
 * prints pt_last_error() and exits 1, as the pipetrain command does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm/transport.h"
#include "mpi_launch.h"

#define RANKS  3
#define DIE_AT 20

static int job(void)
{
    pt_transport *t;
    if (pt_transport_mpi_create(NULL, &t) != PT_OK) {
        fprintf(stderr, "create: %s\n", pt_last_error());
        return 1;
    }
    int me = pt_transport_rank(t), n = pt_transport_size(t);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    for (int round = 0; round < 1000; round++) {
        if (me == 1 && round == DIE_AT) {
            if (strcmp(getenv("PT_FAULT_MODE"), "hang") == 0)
                sleep(60);
            _exit(3);
        }
        int out = round * n + me, in = -1;
        pt_request s, r;
        int rc = pt_transport_isend(t, next, round % 7, &out, sizeof out, &s);
        if (rc == PT_OK)
            rc = pt_transport_irecv(t, prev, round % 7, &in, sizeof in, &r);
        if (rc == PT_OK)
            rc = pt_transport_wait(t, &r);
        if (rc == PT_OK)
            rc = pt_transport_wait(t, &s);
        if (rc != PT_OK) {
            fprintf(stderr, "pipetrain: rank %d: %s\n", me, pt_last_error());
            fflush(stderr);
            return 1; /* exit without MPI_Finalize: a peer is dead */
        }
        if (in != round * n + prev) {
            fprintf(stderr, "rank %d: round %d: got %d\n", me, round, in);
            return 1;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "rank %d: the job ran to its end although rank 1 died\n", me);
    pt_transport_destroy(t);
    return 0;
}

/* The job of test k: rank 1 fails as `mode` says; keep_going switches off
 * Open MPI's abort when a rank exits non-zero. */
static int launch(const char *mpiexec, char *flags, const char *mode, int keep_going, char *out,
                  size_t cap, double *took)
{
    char mode_env[64], *env[5];
    int n = 0;
    snprintf(mode_env, sizeof mode_env, "PT_FAULT_MODE=%s", mode);
    env[n++] = mode_env;
    env[n++] = "PIPETRAIN_TIMEOUT=3";
    if (keep_going)
        env[n++] = "OMPI_MCA_orte_abort_on_non_zero_status=0";
    env[n] = NULL;
    return launch_self(mpiexec, flags, RANKS, (const char *const *)env, out, cap, took);
}

int main(void)
{
    if (getenv("PT_FAULT_MODE"))
        return job();
    const char *mpiexec = getenv("PT_MPIEXEC");
    if (!mpiexec || !*mpiexec) {
        printf("test_mpi_fault: PT_MPIEXEC not set; skipped\n");
        return 77;
    }
    const char *env_flags = getenv("PT_MPIEXEC_FLAGS");
    int failures = 0;
    static char out[1 << 16];
    static const char *modes[3] = {"exit", "hang", "exit"};
    for (int k = 0; k < 3; k++) {
        int keep_going = k == 2;
        char flags[256];
        snprintf(flags, sizeof flags, "%s", env_flags ? env_flags : "");
        double took = 0.0;
        int status = launch(mpiexec, flags, modes[k], keep_going, out, sizeof out, &took);
        printf("---- job %d (rank 1: %s) output ----\n%s---- exit status %d after %.1f s ----\n",
               k + 1, modes[k], out, status, took);
        if (status == 0 && !keep_going) {
            fprintf(stderr, "FAIL: job %d exited 0 although rank 1 failed\n", k + 1);
            failures++;
        }
        if (took >= 30.0) {
            fprintf(stderr, "FAIL: job %d took %.1f s to end; at most 30\n", k + 1, took);
            failures++;
        }
        /* Rank 2 waits for rank 1 directly; rank 0 hears through rank 2's
         * abort notice, or, when its own wait for rank 2 ends first, blames
         * rank 2, whose message then says it had waited for rank 1. Open
         * MPI's own message names ranks as [[job,1],r]. */
        int named = strstr(out, "rank 1 stopped answering") || strstr(out, "rank 1 failed");
        if (k == 0)
            named = named || strstr(out, ",1],1]");
        if (!named) {
            fprintf(stderr, "FAIL: nothing in job %d's output names rank 1\n", k + 1);
            failures++;
        }
    }
    if (failures)
        return 1;
    printf("test_mpi_fault: ok\n");
    return 0;
}
