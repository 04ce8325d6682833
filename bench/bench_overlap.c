/* bench_overlap: does a transfer move while its sender computes? Rank 0
 * posts a send of B bytes, computes for about the transfer's own time (a
 * busy loop measured first), then waits for the send; rank 1 waits for the
 * message. The share of the transfer hidden behind the compute is
 *     hidden = 1 - (time from posting to the receive's end - compute) / alone
 * where `alone` is the same transfer with no compute. 1.00: it moved
 * entirely while rank 0 computed; 0.00: it waited for rank 0's next MPI
 * call. Run it with and without the MPI transport's progress thread:
 *   mpirun -np 2 bench_overlap
 *   mpirun -np 2 -x PIPETRAIN_MPI_PROGRESS=0 bench_overlap
 * (over TCP between test hosts: tests/testhosts.sh, docs/mpi.md). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_pingpong.h"

static volatile double sink;

static void compute_for(double seconds)
{
    double until = pingpong_now() + seconds, x = 1.0;
    while (pingpong_now() < until)
        for (int i = 0; i < 1000; i++)
            x = x * 1.0000001 + 1e-9;
    sink = x;
}

/* Seconds from rank 0's isend to rank 1's receive ending, both clocks
 * aligned by a barrier before; rank 0 computes `busy` between isend and
 * wait. */
static double one_transfer(pt_transport *t, void *buf, size_t bytes, double busy)
{
    pt_request r;
    pt_transport_barrier(t);
    double t0 = pingpong_now();
    if (pt_transport_rank(t) == 0) {
        pt_transport_isend(t, 1, 7, buf, bytes, &r);
        compute_for(busy);
        pt_transport_wait(t, &r);
    } else {
        pt_transport_irecv(t, 0, 7, buf, bytes, &r);
        pt_transport_wait(t, &r);
    }
    return pingpong_now() - t0;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    pt_transport *t;
    if (pt_transport_mpi_create(NULL, &t) != PT_OK || pt_transport_size(t) != 2) {
        fprintf(stderr, "bench_overlap: run under mpirun -np 2\n");
        return 1;
    }
    static const size_t sizes[] = {256 << 10, 1 << 20, 4 << 20};
    void *buf = calloc(1, 4 << 20);
    int me = pt_transport_rank(t);
    const char *env = getenv("PIPETRAIN_MPI_PROGRESS");
    if (me == 1)
        printf("progress thread: %s\n%10s %10s %10s %10s %8s\n",
               env && !strcmp(env, "0") ? "off" : "on", "bytes", "alone ms", "compute ms",
               "total ms", "hidden");
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        double alone = 1e9, total = 1e9;
        for (int rep = 0; rep < 5; rep++) {
            double a = one_transfer(t, buf, sizes[k], 0.0);
            alone = a < alone ? a : alone;
        }
        /* rank 1 measured it; rank 0 learns it to compute as long */
        float share = me == 1 ? (float)alone : 0.0f;
        int group[2] = {0, 1};
        pt_transport_allreduce_sum_f32(t, group, 2, &share, 1);
        double busy = (double)share;
        for (int rep = 0; rep < 5; rep++) {
            double x = one_transfer(t, buf, sizes[k], busy);
            total = x < total ? x : total;
        }
        double hidden = 1.0 - (total - busy) / busy;
        if (me == 1)
            printf("%10zu %10.2f %10.2f %10.2f %8.2f\n", sizes[k], 1e3 * alone, 1e3 * busy,
                   1e3 * total,
                   hidden < 0   ? 0.0
                   : hidden > 1 ? 1.0
                                : hidden);
    }
    pt_transport_destroy(t);
    MPI_Finalize();
    free(buf);
    return 0;
}
