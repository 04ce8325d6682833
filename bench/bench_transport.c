/* bench_transport: point-to-point latency and bandwidth of the transports,
 * by ping-pong between two workers (one-way time = round trip / 2).
 *
 *   bench_transport                   the threads transport (two threads)
 *   mpirun -np 2 bench_transport      also the MPI transport, beside raw
 *                                     MPI_Send/MPI_Recv ping-pong measured
 *                                     in the same run (builds with MPI)
 *
 * Prints one table; the last column is the transport's time over raw MPI's
 * for the same size (1.00 = no overhead). Built by `make bench`. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_pingpong.h"

#define MAX_BYTES ((size_t)16 << 20)
static const size_t sizes[] = {8, 4096, 65536, 1 << 20, 4 << 20, MAX_BYTES};
#define NSIZES (sizeof sizes / sizeof sizes[0])

typedef struct {
    pt_transport *t;
    void *buf;
    double seconds[NSIZES];
} threads_arg;

static void *threads_worker(void *p)
{
    threads_arg *a = p;
    for (size_t k = 0; k < NSIZES; k++)
        a->seconds[k] = pingpong_transport(a->t, a->buf, sizes[k], pingpong_rounds(sizes[k]));
    return NULL;
}

static void threads_bench(double *seconds)
{
    /* mpirun binds a rank to one core; the two threads need two. */
    cpu_set_t all;
    CPU_ZERO(&all);
    for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; c++)
        CPU_SET((int)c, &all);
    sched_setaffinity(0, sizeof all, &all);
    pt_threads_world *w;
    if (pt_threads_world_create(2, NULL, &w) != PT_OK) {
        fprintf(stderr, "bench_transport: %s\n", pt_last_error());
        exit(1);
    }
    threads_arg a[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        a[r].t = pt_threads_world_endpoint(w, r);
        a[r].buf = calloc(1, MAX_BYTES);
        pthread_create(&th[r], NULL, threads_worker, &a[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    memcpy(seconds, a[0].seconds, sizeof a[0].seconds);
    for (int r = 0; r < 2; r++)
        free(a[r].buf);
    pt_threads_world_destroy(w);
}

static void row(const char *name, size_t bytes, double sec, double raw)
{
    char ratio[16] = "-";
    if (raw > 0.0)
        snprintf(ratio, sizeof ratio, "%.2f", sec / raw);
    printf("%-10s %10zu %12.2f %12.2f %12s\n", name, bytes, sec * 1e6, (double)bytes / sec / 1e9,
           ratio);
}

int main(void)
{
    double th[NSIZES], mpi[NSIZES] = {0}, raw[NSIZES] = {0};
    int me = 0, have_mpi = 0;
#ifdef PT_HAVE_MPI
    pt_transport *t = NULL;
    if (pt_transport_launched_by_mpirun()) {
        if (pt_transport_mpi_create(NULL, &t) != PT_OK) {
            fprintf(stderr, "bench_transport: %s\n", pt_last_error());
            return 1;
        }
        me = pt_transport_rank(t);
        have_mpi = pt_transport_size(t) >= 2;
    }
    if (have_mpi && me < 2) {
        char *buf = calloc(1, MAX_BYTES);
        MPI_Comm pair;
        MPI_Comm_split(MPI_COMM_WORLD, 0, me, &pair);
        for (size_t k = 0; k < NSIZES; k++) {
            int rounds = pingpong_rounds(sizes[k]);
            mpi[k] = pingpong_transport(t, buf, sizes[k], rounds);
            MPI_Barrier(pair);
            raw[k] = pingpong_raw_mpi(pair, buf, sizes[k], rounds);
        }
        MPI_Comm_free(&pair);
        free(buf);
    } else if (have_mpi) {
        MPI_Comm pair;
        MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, me, &pair);
    }
    /* The other ranks wait in the transport's barrier, which sleeps between
     * polls, so the threads measurement gets the cores. */
    if (have_mpi)
        t->timeout_s = 600.0;
    if (have_mpi && pt_transport_barrier(t) != PT_OK) {
        fprintf(stderr, "bench_transport: %s\n", pt_last_error());
        return 1;
    }
#endif
    if (me == 0) {
        threads_bench(th);
        printf("point-to-point ping-pong, one-way time (round trip / 2)%s\n",
               have_mpi ? "; ratio = time / raw MPI's" : "");
        printf("%-10s %10s %12s %12s %12s\n", "transport", "bytes", "time (us)", "GB/s",
               have_mpi ? "vs raw MPI" : "");
        for (size_t k = 0; k < NSIZES; k++)
            row("threads", sizes[k], th[k], raw[k]);
        for (size_t k = 0; have_mpi && k < NSIZES; k++)
            row("mpi", sizes[k], mpi[k], raw[k]);
        for (size_t k = 0; have_mpi && k < NSIZES; k++)
            row("raw MPI", sizes[k], raw[k], raw[k]);
    }
#ifdef PT_HAVE_MPI
    if (have_mpi)
        pt_transport_barrier(t);
    pt_transport_destroy(t);
#endif
    return 0;
}
