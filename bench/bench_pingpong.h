/* bench_pingpong.h: one-way point-to-point time by ping-pong between ranks
 * 0 and 1, through a pt_transport and through raw MPI_Send/MPI_Recv, the
 * same way for both (warm-up rounds, then round trip / 2). Shared by
 * bench_transport.c (the transports' table) and bench_mpi.c (beside the
 * MPI pipeline's throughput). Header-only: each benchmark is one program. */
#ifndef PT_BENCH_PINGPONG_H
#define PT_BENCH_PINGPONG_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "comm/transport.h"
#ifdef PT_HAVE_MPI
#include <mpi.h>
#endif

static inline double pingpong_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Enough rounds to move about 256 MiB, 20 at least, 20000 at most. */
static inline int pingpong_rounds(size_t bytes)
{
    size_t r = ((size_t)256 << 20) / (bytes * 2);
    if (r > 20000)
        r = 20000;
    return r < 20 ? 20 : (int)r;
}

/* Ping-pong between endpoints 0 and 1 of a transport; seconds per one-way
 * message. Exits the program on a transport failure. */
static inline double pingpong_transport(pt_transport *t, void *buf, size_t bytes, int rounds)
{
    int me = pt_transport_rank(t), other = 1 - me;
    pt_request s, r;
    double t0 = 0.0;
    for (int i = -rounds / 10 - 1; i < rounds; i++) { /* negative rounds warm up */
        if (i == 0)
            t0 = pingpong_now();
        if (me == 0) {
            pt_transport_isend(t, other, 1, buf, bytes, &s);
            pt_transport_irecv(t, other, 2, buf, bytes, &r);
            if (pt_transport_wait(t, &s) || pt_transport_wait(t, &r))
                goto failed;
        } else {
            pt_transport_irecv(t, other, 1, buf, bytes, &r);
            if (pt_transport_wait(t, &r))
                goto failed;
            pt_transport_isend(t, other, 2, buf, bytes, &s);
            if (pt_transport_wait(t, &s))
                goto failed;
        }
    }
    return (pingpong_now() - t0) / (2.0 * rounds);
failed:
    fprintf(stderr, "ping-pong: %s\n", pt_last_error());
    exit(1);
}

#ifdef PT_HAVE_MPI
/* The same with MPI_Send/MPI_Recv on `pair` (ranks 0 and 1 of it). */
static inline double pingpong_raw_mpi(MPI_Comm pair, void *buf, size_t bytes, int rounds)
{
    int me, n = (int)bytes;
    MPI_Comm_rank(pair, &me);
    double t0 = 0.0;
    for (int i = -rounds / 10 - 1; i < rounds; i++) {
        if (i == 0)
            t0 = MPI_Wtime();
        if (me == 0) {
            MPI_Send(buf, n, MPI_BYTE, 1, 3, pair);
            MPI_Recv(buf, n, MPI_BYTE, 1, 4, pair, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, n, MPI_BYTE, 0, 3, pair, MPI_STATUS_IGNORE);
            MPI_Send(buf, n, MPI_BYTE, 0, 4, pair);
        }
    }
    return (MPI_Wtime() - t0) / (2.0 * rounds);
}
#endif

#endif
