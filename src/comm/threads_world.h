/* threads_world.h: the inside of the threads transport, shared by its two
 * files: transport_threads.c (links, point to point, the world) and
 * threads_collective.c (allreduce and barrier). Nothing else includes it. */
#ifndef PT_COMM_THREADS_WORLD_H
#define PT_COMM_THREADS_WORLD_H

#include <pthread.h>
#include <stdatomic.h>

#include "comm/transport.h"

/* One buffered message; its buffer grows to the largest message seen and is
 * kept, so a steady run allocates nothing. */
typedef struct pt_slot {
    struct pt_slot *next;
    int tag;
    size_t bytes;
    size_t cap;
    void *data;
    pt_flight_log *flight; /* the sender's count its bytes stay in until received */
} pt_slot;

/* Messages from src to dst. Only src's thread sends on it and only dst's
 * thread receives on it. */
typedef struct {
    _Alignas(64) pthread_mutex_t mu;
    pthread_cond_t data_cv;           /* dst waits here for a receive to complete */
    pthread_cond_t space_cv;          /* src waits here for a parked send to complete */
    pt_slot *queue_head, *queue_tail; /* buffered messages, oldest first */
    pt_slot *free_slots;
    pt_request *recv_head, *recv_tail; /* receives posted by dst */
    pt_request *send_head, *send_tail; /* sends parked while the queue was full */
    pt_slot *slots;
    int src, dst;
    struct pt_threads_world *world;
} pt_link;

/* Where the members of one collective meet: the slot of the group's lowest
 * rank, the leader. The leader is in one collective at a time and opens the
 * slot for each in its own call order (a new epoch, once everyone has left
 * the previous one); the other members join only an epoch opened for their
 * group that they have not joined yet, so an early arrival waits its turn. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned epoch;   /* collectives opened on this slot so far */
    int users;        /* threads inside the current epoch's collective */
    int n;            /* the current group */
    int *members;     /* its ranks, ascending */
    float **bufs;     /* each member's buffer, by position */
    char *arrived_at; /* which positions reached the current barrier */
    int arrived;
    unsigned gen;
} pt_coll_slot;

typedef struct {
    pt_transport t;
    struct pt_threads_world *world;
    int *group;       /* scratch for sorting a collective's group */
    unsigned *joined; /* joined[leader]: the last epoch joined on that slot */
} pt_threads_endpoint;

typedef struct pt_threads_world {
    int n;
    int queue_slots;
    double timeout_s;
    pt_link *links; /* links[src * n + dst] */
    int n_links_ready;
    pt_threads_endpoint *endpoints;
    pt_coll_slot *colls; /* one per rank */
    atomic_int aborted;
    pthread_mutex_t abort_mu;
    int failed_rank;
    char reason[256];
} pt_threads_world;

static inline pt_threads_world *pt_threads_endpoint_world(pt_transport *t)
{
    return ((pt_threads_endpoint *)t->impl)->world;
}
static inline pt_link *pt_threads_link(pt_threads_world *w, int src, int dst)
{
    return &w->links[src * w->n + dst];
}

void pt_threads_cond_init(pthread_cond_t *cv);
double pt_threads_now(void);
int pt_threads_cond_wait(pthread_cond_t *cv, pthread_mutex_t *mu, double deadline);

/* One piece of an endpoint's idle work (transport.h), or a short spin where
 * there is none: what a wait that takes work does between its checks */
static inline void pt_threads_idle_piece(const pt_idle_work *idle)
{
    if (!idle->run())
        for (int i = 0; i < 16; i++)
            __builtin_ia32_pause();
}

void pt_threads_world_abort(pt_threads_world *w, int failed_rank, const char *reason);
int pt_threads_aborted(pt_threads_world *w);
/* Sets the message of an aborted world on this thread; returns PT_ETRANSPORT. */
int pt_threads_fail_aborted(pt_threads_world *w, int me);

int pt_threads_collectives_init(pt_threads_world *w);
void pt_threads_collectives_free(pt_threads_world *w);
void pt_threads_collectives_wake(pt_threads_world *w);
int pt_threads_allreduce_sum_f32(pt_transport *t, const int *group, int n_group, float *buf,
                                 size_t count);
int pt_threads_reduce_scatter_f32(pt_transport *t, const int *group, int n_group, float *buf,
                                  pt_parts parts);
int pt_threads_all_gather_f32(pt_transport *t, const int *group, int n_group, float *buf,
                              pt_parts parts);
int pt_threads_barrier(pt_transport *t);

#endif
