/* test_transport_threads: the threads transport delivers every message once,
 * FIFO per (source, tag), whether the send or the receive comes first and
 * when a link's queue is full; allreduce gives the exact rank-order sum,
 * identical on every member, over several groups at once; abort wakes a
 * blocked waiter with PT_ETRANSPORT naming the failed rank; a timeout names
 * the silent peer. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/transport.h"

#define N       4
#define TAGS    5
#define PER_TAG 40 /* messages per (source, tag) */
#define WORDS   37

static int failures;
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(cond, ...)                                    \
    do {                                                    \
        if (!(cond)) {                                      \
            pthread_mutex_lock(&fail_mu);                   \
            failures++;                                     \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                   \
            fprintf(stderr, "\n");                          \
            pthread_mutex_unlock(&fail_mu);                 \
        }                                                   \
    } while (0)

typedef struct {
    pt_transport *t;
    int phase;
} worker_arg;

static void fill(int *msg, int src, int dst, int tag, int seq)
{
    for (int k = 0; k < WORDS; k++)
        msg[k] = ((src * 31 + dst) * 97 + tag) * 1009 + seq * 7 + k;
}

/* Every rank sends PER_TAG messages per tag to every other rank, tags
 * interleaved in an order that depends on the rank; receives are posted in
 * rounds that lag the sends by a rank-dependent amount (some before the
 * message arrives, some after), so every path runs: direct hand-over,
 * queued slot, parked send. */
static void exchange(pt_transport *t)
{
    int me = pt_transport_rank(t), n = pt_transport_size(t);
    int total = (n - 1) * TAGS * PER_TAG;
    int(*sbuf)[WORDS] = malloc(sizeof *sbuf * (size_t)total);
    int(*rbuf)[WORDS] = malloc(sizeof *rbuf * (size_t)total);
    int(*meta)[3] = malloc(sizeof *meta * (size_t)total); /* src, tag, seq */
    pt_request *sreq = calloc((size_t)total, sizeof *sreq);
    pt_request *rreq = calloc((size_t)total, sizeof *rreq);
    int posted[N][TAGS] = {{0}};
    int ns = 0, nr = 0, lag = me % 3;
    for (int seq = 0; seq < PER_TAG + lag; seq++) {
        for (int k = 0; seq < PER_TAG && k < TAGS; k++) {
            int tag = (me % 2) ? TAGS - 1 - k : k;
            for (int d = 1; d < n; d++) {
                int dst = (me + d) % n;
                fill(sbuf[ns], me, dst, tag, seq);
                CHECK(pt_transport_isend(t, dst, tag, sbuf[ns], sizeof sbuf[ns], &sreq[ns]) ==
                          PT_OK,
                      "isend: %s", pt_last_error());
                ns++;
            }
        }
        if (seq < lag)
            continue;
        for (int k = 0; k < TAGS; k++)
            for (int s = 1; s < n; s++) {
                int src = (me + n - s) % n;
                meta[nr][0] = src;
                meta[nr][1] = k;
                meta[nr][2] = posted[src][k]++;
                CHECK(pt_transport_irecv(t, src, k, rbuf[nr], sizeof rbuf[nr], &rreq[nr]) == PT_OK,
                      "irecv: %s", pt_last_error());
                nr++;
            }
    }
    CHECK(nr == total && ns == total, "rank %d posted %d receives, %d sends of %d", me, nr, ns,
          total);
    CHECK(pt_transport_wait_all(t, rreq, nr) == PT_OK, "recv wait: %s", pt_last_error());
    CHECK(pt_transport_wait_all(t, sreq, ns) == PT_OK, "send wait: %s", pt_last_error());
    for (int i = 0; i < nr; i++) {
        int want[WORDS];
        fill(want, meta[i][0], me, meta[i][1], meta[i][2]);
        CHECK(memcmp(want, rbuf[i], sizeof want) == 0,
              "rank %d: receive %d of (rank %d, tag %d) got another message", me, meta[i][2],
              meta[i][0], meta[i][1]);
    }
    free(sbuf);
    free(rbuf);
    free(meta);
    free(sreq);
    free(rreq);
}

/* Values whose float sum depends on the order of addition. */
static float value(int rank, size_t i)
{
    static const float scale[N] = {1e-3f, 3e4f, 0.7f, -3e4f};
    unsigned h = (unsigned)(i * 2654435761u) ^ (unsigned)(rank * 40503);
    return (float)(h % 100003) * scale[rank % N] / 7.0f;
}

static void check_allreduce(pt_transport *t, const int *group, int n, size_t count)
{
    int me = pt_transport_rank(t);
    float *buf = malloc(sizeof(float) * count);
    for (size_t i = 0; i < count; i++)
        buf[i] = value(me, i);
    CHECK(pt_transport_allreduce_sum_f32(t, group, n, buf, count) == PT_OK, "allreduce: %s",
          pt_last_error());
    int sorted[N];
    memcpy(sorted, group, sizeof(int) * (size_t)n);
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (sorted[b] < sorted[a]) {
                int x = sorted[a];
                sorted[a] = sorted[b];
                sorted[b] = x;
            }
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        float want = value(sorted[0], i);
        for (int j = 1; j < n; j++)
            want = want + value(sorted[j], i);
        if (memcmp(&want, &buf[i], sizeof want) != 0)
            bad++;
    }
    CHECK(bad == 0, "rank %d: allreduce over %d ranks: %zu of %zu sums differ from rank order", me,
          n, bad, count);
    free(buf);
}

static void *worker(void *p)
{
    worker_arg *a = p;
    pt_transport *t = a->t;
    int me = pt_transport_rank(t);
    exchange(t);
    CHECK(pt_transport_barrier(t) == PT_OK, "barrier: %s", pt_last_error());
    /* Whole world, listed in a scrambled order. */
    int world[N] = {2, 0, 3, 1};
    for (int rep = 0; rep < 3; rep++)
        check_allreduce(t, world, N, 10007);
    /* Two disjoint groups at once, then two other disjoint groups. */
    int pairs_a[2][2] = {{0, 2}, {3, 1}};
    check_allreduce(t, pairs_a[me % 2 == 0 ? 0 : 1], 2, 5000);
    int pairs_b[2][2] = {{1, 0}, {2, 3}};
    check_allreduce(t, pairs_b[me < 2 ? 0 : 1], 2, 33);
    /* Overlapping groups in sequence: {0,1,2} then {0,3} share leader 0. */
    if (me < 3) {
        int g[3] = {0, 1, 2};
        check_allreduce(t, g, 3, 4099);
    }
    if (me == 0 || me == 3) {
        int g[2] = {3, 0};
        check_allreduce(t, g, 2, 17);
    }
    int self[1] = {me};
    check_allreduce(t, self, 1, 9);
    CHECK(pt_transport_barrier(t) == PT_OK, "barrier: %s", pt_last_error());
    return NULL;
}

static void run_world(int queue_slots)
{
    pt_threads_options o = pt_threads_options_default();
    o.queue_slots = queue_slots;
    o.timeout_s = 20.0; /* a hang fails the test instead of blocking it */
    pt_threads_world *w;
    CHECK(pt_threads_world_create(N, &o, &w) == PT_OK, "create: %s", pt_last_error());
    pthread_t th[N];
    worker_arg args[N];
    for (int r = 0; r < N; r++) {
        args[r].t = pt_threads_world_endpoint(w, r);
        pthread_create(&th[r], NULL, worker, &args[r]);
    }
    for (int r = 0; r < N; r++)
        pthread_join(th[r], NULL);
    pt_threads_world_destroy(w);
}

/* ---- abort and timeout ----------------------------------------------------- */

typedef struct {
    pt_transport *t;
    int rc;
    char msg[512];
} waiter_arg;

static void *blocked_receiver(void *p)
{
    waiter_arg *a = p;
    int x;
    pt_request r;
    a->rc = pt_transport_irecv(a->t, 1, 7, &x, sizeof x, &r);
    if (a->rc == PT_OK)
        a->rc = pt_transport_wait(a->t, &r);
    snprintf(a->msg, sizeof a->msg, "%s", pt_last_error());
    return NULL;
}

static void *blocked_in_allreduce(void *p)
{
    waiter_arg *a = p;
    float v[4] = {1, 2, 3, 4};
    int g[3] = {0, 1, 2};
    a->rc = pt_transport_allreduce_sum_f32(a->t, g, 3, v, 4);
    snprintf(a->msg, sizeof a->msg, "%s", pt_last_error());
    return NULL;
}

static void test_abort(void)
{
    pt_threads_world *w;
    pt_threads_options o = pt_threads_options_default();
    o.timeout_s = 0.0;
    CHECK(pt_threads_world_create(3, &o, &w) == PT_OK, "create: %s", pt_last_error());
    waiter_arg recv = {pt_threads_world_endpoint(w, 0), 0, ""};
    waiter_arg coll = {pt_threads_world_endpoint(w, 2), 0, ""};
    pthread_t a, b;
    pthread_create(&a, NULL, blocked_receiver, &recv);
    pthread_create(&b, NULL, blocked_in_allreduce, &coll);
    usleep(100 * 1000); /* let both block */
    pt_transport_abort(pt_threads_world_endpoint(w, 1), "stage 1 ran out of memory");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK(recv.rc == PT_ETRANSPORT, "abort: receiver got %d", recv.rc);
    CHECK(strstr(recv.msg, "rank 1 failed") && strstr(recv.msg, "out of memory"),
          "abort message: '%s'", recv.msg);
    CHECK(coll.rc == PT_ETRANSPORT, "abort: allreduce got %d", coll.rc);
    CHECK(strstr(coll.msg, "rank 1 failed"), "abort message in allreduce: '%s'", coll.msg);
    /* Later calls fail too. */
    int x = 0;
    pt_request r;
    CHECK(pt_transport_isend(pt_threads_world_endpoint(w, 2), 0, 1, &x, sizeof x, &r) ==
              PT_ETRANSPORT,
          "isend after abort should fail");
    pt_threads_world_destroy(w);
}

static void test_timeout(void)
{
    pt_threads_world *w;
    pt_threads_options o = pt_threads_options_default();
    o.timeout_s = 0.2;
    CHECK(pt_threads_world_create(2, &o, &w) == PT_OK, "create: %s", pt_last_error());
    pt_transport *t0 = pt_threads_world_endpoint(w, 0);
    int x;
    pt_request r;
    CHECK(pt_transport_irecv(t0, 1, 3, &x, sizeof x, &r) == PT_OK, "irecv");
    int rc = pt_transport_wait(t0, &r);
    CHECK(rc == PT_ETRANSPORT && strstr(pt_last_error(), "rank 1 stopped answering"),
          "timeout: rc %d '%s'", rc, pt_last_error());
    /* The world is aborted for rank 1 as well. */
    pt_transport *t1 = pt_threads_world_endpoint(w, 1);
    CHECK(pt_transport_isend(t1, 0, 3, &x, sizeof x, &r) == PT_ETRANSPORT &&
              strstr(pt_last_error(), "rank 1"),
          "rank 1 after timeout: '%s'", pt_last_error());
    pt_threads_world_destroy(w);
}

static void test_size_mismatch(void)
{
    pt_threads_world *w;
    CHECK(pt_threads_world_create(2, NULL, &w) == PT_OK, "create: %s", pt_last_error());
    pt_transport *t0 = pt_threads_world_endpoint(w, 0), *t1 = pt_threads_world_endpoint(w, 1);
    int a[4] = {1, 2, 3, 4}, b[2];
    pt_request s, r;
    CHECK(pt_transport_isend(t0, 1, 0, a, sizeof a, &s) == PT_OK, "isend");
    CHECK(pt_transport_irecv(t1, 0, 0, b, sizeof b, &r) == PT_OK, "irecv");
    int rc = pt_transport_wait(t1, &r);
    CHECK(rc == PT_EINVAL && strstr(pt_last_error(), "16 bytes"), "mismatch: %d '%s'", rc,
          pt_last_error());
    CHECK(pt_transport_wait(t0, &s) == PT_OK, "send of a mismatched message");
    CHECK(pt_transport_irecv(t1, 5, 0, b, sizeof b, &r) == PT_EINVAL, "bad peer accepted");
    CHECK(pt_transport_isend(t0, 1, PT_TAG_MAX + 1, a, sizeof a, &s) == PT_EINVAL,
          "bad tag accepted");
    pt_threads_world_destroy(w);
}

int main(void)
{
    run_world(8);
    run_world(1); /* every link full at once: sends park and complete in wait() */
    test_abort();
    test_timeout();
    test_size_mismatch();
    if (failures) {
        fprintf(stderr, "test_transport_threads: %d failures\n", failures);
        return 1;
    }
    printf("test_transport_threads: ok\n");
    return 0;
}
