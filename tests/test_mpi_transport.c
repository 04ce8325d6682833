/* test_mpi_transport: the MPI transport under mpirun. Messages of every size
 * arrive intact and FIFO per (source, tag) whatever the order receives are
 * posted in; allreduce over the world and over sub-groups is bit-identical
 * to the threads transport run in this process on the same inputs (and to
 * a plain rank-order fold); a receive that nobody answers fails within its
 * deadline with PT_ETRANSPORT naming the silent rank, and the other ranks
 * hear of it through the abort notice.
 * mpi-ranks: 2 4 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/transport.h"

static int failures;
static int me_global;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            failures++;                                                         \
            fprintf(stderr, "rank %d: %s:%d: ", me_global, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
        }                                                                       \
    } while (0)

static unsigned char pattern(int src, int dst, int tag, int seq, size_t i)
{
    return (unsigned char)(src * 71 + dst * 13 + tag * 7 + seq * 3 + (int)(i % 251));
}

/* Every rank sends to every other rank messages of several sizes on several
 * tags (three per tag, to check FIFO); receives are posted tags-reversed. */
static void exchange(pt_transport *t)
{
    int me = pt_transport_rank(t), n = pt_transport_size(t);
    static const size_t sizes[] = {0, 1, 4096, 1 << 20};
    enum { NSIZE = 4, SEQ = 3 };
    int per_peer = NSIZE * SEQ;
    int total = per_peer * (n - 1);
    unsigned char **sbuf = calloc((size_t)total, sizeof *sbuf);
    unsigned char **rbuf = calloc((size_t)total, sizeof *rbuf);
    pt_request *sreq = calloc((size_t)total, sizeof *sreq);
    pt_request *rreq = calloc((size_t)total, sizeof *rreq);
    int k = 0;
    for (int d = 1; d < n; d++) {
        int dst = (me + d) % n;
        for (int seq = 0; seq < SEQ; seq++)
            for (int s = 0; s < NSIZE; s++, k++) {
                sbuf[k] = malloc(sizes[s] + 1);
                for (size_t i = 0; i < sizes[s]; i++)
                    sbuf[k][i] = pattern(me, dst, s, seq, i);
                CHECK(pt_transport_isend(t, dst, s, sbuf[k], sizes[s], &sreq[k]) == PT_OK,
                      "isend: %s", pt_last_error());
            }
    }
    k = 0;
    for (int d = 1; d < n; d++) {
        int src = (me + n - d) % n;
        for (int seq = 0; seq < SEQ; seq++)
            for (int s = NSIZE - 1; s >= 0; s--, k++) {
                rbuf[k] = malloc(sizes[s] + 1);
                CHECK(pt_transport_irecv(t, src, s, rbuf[k], sizes[s], &rreq[k]) == PT_OK,
                      "irecv: %s", pt_last_error());
            }
    }
    CHECK(pt_transport_wait_all(t, rreq, total) == PT_OK, "recv: %s", pt_last_error());
    CHECK(pt_transport_wait_all(t, sreq, total) == PT_OK, "send: %s", pt_last_error());
    k = 0;
    for (int d = 1; d < n; d++) {
        int src = (me + n - d) % n;
        for (int seq = 0; seq < SEQ; seq++)
            for (int s = NSIZE - 1; s >= 0; s--, k++) {
                size_t bad = 0;
                for (size_t i = 0; i < sizes[s]; i++)
                    bad += rbuf[k][i] != pattern(src, me, s, seq, i);
                CHECK(bad == 0, "message %d of (rank %d, tag %d): %zu bytes wrong", seq, src, s,
                      bad);
            }
    }
    for (int i = 0; i < total; i++) {
        free(sbuf[i]);
        free(rbuf[i]);
    }
    free(sbuf);
    free(rbuf);
    free(sreq);
    free(rreq);
}

/* Ping-pong with rank 0 and test() polling. */
static void ping_pong(pt_transport *t)
{
    int me = pt_transport_rank(t), n = pt_transport_size(t);
    for (int peer = 1; peer < n; peer++) {
        if (me != 0 && me != peer)
            continue;
        int other = me == 0 ? peer : 0;
        for (int round = 0; round < 50; round++) {
            double v = round * 1000.0 + peer, got = -1;
            pt_request r;
            if ((me == 0) == (round % 2 == 0)) {
                CHECK(pt_transport_isend(t, other, 42, &v, sizeof v, &r) == PT_OK, "ping");
                CHECK(pt_transport_wait(t, &r) == PT_OK, "ping wait: %s", pt_last_error());
            } else {
                CHECK(pt_transport_irecv(t, other, 42, &got, sizeof got, &r) == PT_OK, "pong");
                int done = 0;
                while (!done)
                    CHECK(pt_transport_test(t, &r, &done) == PT_OK, "test: %s", pt_last_error());
                CHECK(got == v, "round %d: got %g, want %g", round, got, v);
            }
        }
    }
}

/* Values whose float sum depends on the order of addition. */
static float value(int rank, size_t i)
{
    static const float scale[4] = {1e-3f, 3e4f, 0.7f, -3e4f};
    unsigned h = (unsigned)(i * 2654435761u) ^ (unsigned)(rank * 40503);
    return (float)(h % 100003) * scale[rank % 4] / 7.0f;
}

/* The same allreduce on the threads transport: one thread per rank. */
typedef struct {
    pt_transport *t;
    const int *group;
    int n_group;
    float *buf;
    size_t count;
    int rc;
} threads_job;

static void *threads_member(void *p)
{
    threads_job *j = p;
    j->rc = pt_transport_allreduce_sum_f32(j->t, j->group, j->n_group, j->buf, j->count);
    return NULL;
}

static float *threads_reference(int world, const int *group, int n_group, size_t count, int rank)
{
    pt_threads_world *w;
    CHECK(pt_threads_world_create(world, NULL, &w) == PT_OK, "threads world");
    pthread_t th[8];
    threads_job jobs[8];
    for (int m = 0; m < n_group; m++) {
        jobs[m] = (threads_job){pt_threads_world_endpoint(w, group[m]), group, n_group,
                                malloc(sizeof(float) * count),          count, 0};
        for (size_t i = 0; i < count; i++)
            jobs[m].buf[i] = value(group[m], i);
        pthread_create(&th[m], NULL, threads_member, &jobs[m]);
    }
    float *mine = NULL;
    for (int m = 0; m < n_group; m++) {
        pthread_join(th[m], NULL);
        CHECK(jobs[m].rc == PT_OK, "threads allreduce failed");
        if (group[m] == rank)
            mine = jobs[m].buf;
        else
            free(jobs[m].buf);
    }
    pt_threads_world_destroy(w);
    return mine;
}

static void check_allreduce(pt_transport *t, const int *group, int n_group, size_t count)
{
    int me = pt_transport_rank(t);
    float *buf = malloc(sizeof(float) * count);
    for (size_t i = 0; i < count; i++)
        buf[i] = value(me, i);
    CHECK(pt_transport_allreduce_sum_f32(t, group, n_group, buf, count) == PT_OK, "allreduce: %s",
          pt_last_error());
    float *ref = threads_reference(pt_transport_size(t), group, n_group, count, me);
    CHECK(ref && memcmp(ref, buf, sizeof(float) * count) == 0,
          "allreduce of %zu floats over %d ranks differs from the threads transport's", count,
          n_group);
    /* and from a plain fold in ascending rank order */
    int lo = group[0];
    for (int m = 1; m < n_group; m++)
        lo = group[m] < lo ? group[m] : lo;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        float want = 0.0f;
        int first = 1;
        for (int r = lo; r < pt_transport_size(t); r++) {
            int in = 0;
            for (int m = 0; m < n_group; m++)
                in |= group[m] == r;
            if (!in)
                continue;
            want = first ? value(r, i) : want + value(r, i);
            first = 0;
        }
        bad += memcmp(&want, &buf[i], sizeof want) != 0;
    }
    CHECK(bad == 0, "allreduce: %zu of %zu sums are not the rank-order fold", bad, count);
    free(ref);
    free(buf);
}

static void allreduces(pt_transport *t)
{
    int me = pt_transport_rank(t), n = pt_transport_size(t);
    int world[8];
    for (int r = 0; r < n; r++)
        world[r] = n - 1 - r;             /* listed backwards: order of the list must not matter */
    check_allreduce(t, world, n, 300007); /* crosses a segment boundary */
    check_allreduce(t, world, n, 1);
    if (n == 4) {
        int pairs[2][2] = {{2, 0}, {1, 3}};
        check_allreduce(t, pairs[me % 2], 2, 5003);
        if (me != 3) {
            int three[3] = {1, 2, 0};
            check_allreduce(t, three, 3, 777);
        }
    }
    int self[1] = {me};
    check_allreduce(t, self, 1, 10);
    CHECK(pt_transport_barrier(t) == PT_OK, "barrier: %s", pt_last_error());
}

/* Rank 0 waits for a message rank 1 never sends: its wait fails within the
 * deadline naming rank 1; the others, waiting for rank 0 with a long
 * deadline, are woken by the abort notice naming rank 1. */
static void timeout_path(pt_transport *t)
{
    int me = pt_transport_rank(t);
    int x = 0;
    pt_request r;
    if (me == 0) {
        t->timeout_s = 0.5;
        double t0 = MPI_Wtime();
        CHECK(pt_transport_irecv(t, 1, 999, &x, sizeof x, &r) == PT_OK, "irecv");
        int rc = pt_transport_wait(t, &r);
        double took = MPI_Wtime() - t0;
        CHECK(rc == PT_ETRANSPORT && strstr(pt_last_error(), "rank 1 stopped answering"),
              "timeout: rc %d, '%s'", rc, pt_last_error());
        CHECK(took >= 0.45 && took < 5.0, "timeout after %.2f s, wanted 0.5", took);
    } else {
        t->timeout_s = 20.0;
        CHECK(pt_transport_irecv(t, 0, 998, &x, sizeof x, &r) == PT_OK, "irecv");
        int rc = pt_transport_wait(t, &r);
        CHECK(rc == PT_ETRANSPORT && strstr(pt_last_error(), "rank 1"), "abort notice: rc %d, '%s'",
              rc, pt_last_error());
    }
    CHECK(pt_transport_isend(t, 0, 1, &x, sizeof x, &r) == PT_ETRANSPORT,
          "isend after an abort should fail");
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    CHECK(pt_transport_launched_by_mpirun(), "not seen as launched by mpirun");
    pt_transport *t;
    pt_mpi_options o = pt_mpi_options_default();
    o.timeout_s = 30.0;
    if (pt_transport_mpi_create(&o, &t) != PT_OK) {
        fprintf(stderr, "mpi create: %s\n", pt_last_error());
        return 1;
    }
    me_global = pt_transport_rank(t);
    CHECK(strcmp(pt_transport_name(t), "mpi") == 0, "name");
    exchange(t);
    ping_pong(t);
    allreduces(t);
    if (pt_transport_size(t) >= 2)
        timeout_path(t);
    pt_transport_destroy(t);
    int any = 0;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (me_global == 0)
        printf("test_mpi_transport: %s\n", any ? "FAILED" : "ok");
    return any ? 1 : 0;
}
