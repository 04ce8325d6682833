/* gemm_pool.c: the threads that share one worker's products (gemm.h's
 * pt_gemm_parallel).
 *
 * Each thread that asks for parallel parts (a pipeline worker, or the main
 * thread of a one-worker run) keeps its own helpers, so workers never wait
 * on each other's products, and the threads end with it (a key's
 * destructor). A job is published by bumping a generation counter; a
 * helper spins on it for SPIN_NS after its last job (products come back to
 * back, separated by short elementwise passes) and then sleeps on a
 * condition variable, so an idle worker costs no core. The caller runs part
 * 0 itself and spins until the helpers' count of parts left reaches zero.
 * A part that asks for parts of its own (a product inside one of
 * attention's heads) runs them itself, one after the other. The passes
 * between the products share the same helpers by ranges of rows, elements
 * or columns (pt_parallel_ranges).
 * A part can also be lent: a pipeline's workers on the threads of one
 * process, one core each, leave a core idle while one of them waits for a
 * message (the pipeline's bubble). A worker that lends counts one thread
 * more while another waits (pt_gemm_spare), and pt_gemm_parallel puts the
 * part its own threads leave on one board the process shares; the waiting
 * thread's transport runs it (pt_gemm_help) and marks it done. The caller
 * takes back a part nobody took once its own parts are done. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "pipetrain.h"
#include "tensor/gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define relax() _mm_pause()
#else
#define relax() ((void)0)
#endif

#define MAX_HELPERS 63
#define SPIN_NS     200000L /* 0.2 ms */

typedef struct pool {
    int n; /* helpers started */
    pthread_t thread[MAX_HELPERS];
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int sleeping;           /* helpers waiting on wake (under mu) */
    atomic_uint generation; /* bumped for each job */
    atomic_int pending;     /* helpers not done with the current job */
    atomic_int quit;
    void (*part)(void *, int); /* the current job, set before generation */
    void *arg;
    int parts;
    atomic_long helped; /* parts the helpers have run (pt_gemm_parts_helped) */
} pool;

typedef struct {
    pool *p;
    int index;     /* runs part index of each job, where the job has one */
    unsigned seen; /* the generation when it was started: jobs come after */
} helper_arg;

/* 1 on a thread while it runs a part (helpers: always) */
static _Thread_local int in_part;

int pt_gemm_in_part(void) { return in_part; }

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* the generation after `seen`, or seen when told to quit */
static unsigned next_job(pool *p, unsigned seen)
{
    long until = now_ns() + SPIN_NS;
    for (int spins = 0;; spins++) {
        unsigned g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen || atomic_load(&p->quit))
            return g;
        relax();
        if ((spins & 63) == 63 && now_ns() > until)
            break;
    }
    pthread_mutex_lock(&p->mu);
    p->sleeping++;
    unsigned g;
    while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit))
        pthread_cond_wait(&p->wake, &p->mu);
    p->sleeping--;
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *helper_main(void *arg)
{
    helper_arg h = *(helper_arg *)arg;
    free(arg);
    in_part = 1;
    unsigned seen = h.seen;
    for (;;) {
        seen = next_job(h.p, seen);
        if (atomic_load(&h.p->quit))
            return NULL;
        if (h.index < h.p->parts) {
            h.p->part(h.p->arg, h.index);
            atomic_fetch_add_explicit(&h.p->helped, 1, memory_order_relaxed);
        }
        atomic_fetch_sub_explicit(&h.p->pending, 1, memory_order_release);
    }
}

static void pool_end(void *arg)
{
    pool *p = arg;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n; i++)
        pthread_join(p->thread[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p);
}

static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void make_key(void) { pthread_key_create(&key, pool_end); }

/* the calling thread's pool with at least `helpers` helpers, as many as
 * could be started; NULL when none could be made */
static pool *pool_of_thread(int helpers)
{
    pthread_once(&once, make_key);
    pool *p = pthread_getspecific(key);
    if (!p) {
        if (!(p = calloc(1, sizeof *p)))
            return NULL;
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->wake, NULL);
        if (pthread_setspecific(key, p) != 0) {
            pool_end(p);
            return NULL;
        }
    }
    while (p->n < helpers && p->n < MAX_HELPERS) {
        helper_arg *h = malloc(sizeof *h);
        if (!h)
            break;
        *h = (helper_arg){p, p->n + 1, atomic_load(&p->generation)};
        if (pthread_create(&p->thread[p->n], NULL, helper_main, h) != 0) {
            free(h);
            break;
        }
        p->n++;
    }
    return p;
}

/* ---- the board of a part lent to a waiting thread ---- */

/* One part on offer at a time, in static storage (a waiting thread may read
 * the board just as the offer is taken back: it then finds it FREE or
 * someone else's, never gone). FREE -> SETTING (the caller fills it in) ->
 * OFFERED -> TAKEN (a waiting thread runs it) -> DONE -> FREE (the caller),
 * or OFFERED -> FREE where the caller takes it back. */
enum { FREE, SETTING, OFFERED, TAKEN, DONE };
static struct {
    atomic_int state;
    void (*part)(void *, int);
    void *arg;
    int index;
} board;
static atomic_int waiting;        /* threads in a wait that take lent parts */
static atomic_long lent;          /* parts waiting threads have run */
static _Thread_local int lending; /* this thread may lend (pt_gemm_set_lending) */

void pt_gemm_set_lending(int on) { lending = on; }

int pt_gemm_spare(void)
{
    return lending && !in_part && atomic_load_explicit(&waiting, memory_order_relaxed) > 0 &&
           atomic_load_explicit(&board.state, memory_order_relaxed) == FREE;
}

void pt_gemm_wait_begin(void) { atomic_fetch_add(&waiting, 1); }
void pt_gemm_wait_end(void) { atomic_fetch_sub(&waiting, 1); }
long pt_gemm_parts_lent(void) { return atomic_load(&lent); }

int pt_gemm_help(void)
{
    int offered = OFFERED;
    if (atomic_load_explicit(&board.state, memory_order_relaxed) != OFFERED ||
        !atomic_compare_exchange_strong_explicit(&board.state, &offered, TAKEN,
                                                 memory_order_acquire, memory_order_relaxed))
        return 0;
    int was = in_part;
    in_part = 1;
    board.part(board.arg, board.index);
    in_part = was;
    atomic_fetch_add_explicit(&lent, 1, memory_order_relaxed);
    atomic_store_explicit(&board.state, DONE, memory_order_release);
    return 1;
}

/* Part i of a job on the board, where a thread waits to take it and the
 * board is free: 1 when it is there */
static int offer(void (*part)(void *, int), void *arg, int i)
{
    int free_ = FREE;
    if (!lending || atomic_load_explicit(&waiting, memory_order_relaxed) == 0 ||
        !atomic_compare_exchange_strong(&board.state, &free_, SETTING))
        return 0;
    board.part = part, board.arg = arg, board.index = i;
    atomic_store_explicit(&board.state, OFFERED, memory_order_release);
    return 1;
}

/* The offered part done, by the thread that took it or here */
static void settle_offer(void)
{
    int offered = OFFERED;
    if (atomic_compare_exchange_strong(&board.state, &offered, SETTING)) { /* taken back */
        board.part(board.arg, board.index);
    } else {
        for (int spins = 0; atomic_load_explicit(&board.state, memory_order_acquire) != DONE;
             spins++)
            if (spins < 4096)
                relax();
            else
                sched_yield();
    }
    atomic_store_explicit(&board.state, FREE, memory_order_release);
}

long pt_gemm_parts_helped(void)
{
    pthread_once(&once, make_key);
    pool *p = pthread_getspecific(key);
    return p ? atomic_load(&p->helped) : 0;
}

void pt_gemm_parallel(int n, void (*part)(void *arg, int i), void *arg)
{
    /* a lending worker's own threads, and past them one part lent where a
     * thread waits to take it (its products and passes counted one more) */
    int own = lending && pt_blas_threads() < n ? pt_blas_threads() : n;
    pool *p = own > 1 && !in_part ? pool_of_thread(own - 1) : NULL;
    int helpers = p ? p->n : 0;
    int lent_part = n > helpers + 1 && !in_part && offer(part, arg, n - 1) ? n - 1 : -1;
    int was = in_part;
    in_part = 1;
    if (!helpers) {
        for (int i = 0; i < n; i++)
            if (i != lent_part)
                part(arg, i);
        if (lent_part >= 0)
            settle_offer();
        in_part = was;
        return;
    }
    p->part = part, p->arg = arg, p->parts = n;
    atomic_store_explicit(&p->pending, p->n, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_mutex_lock(&p->mu);
    if (p->sleeping)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    part(arg, 0);
    for (int i = p->n + 1; i < n; i++) /* parts no helper could take */
        if (i != lent_part)
            part(arg, i);
    if (lent_part >= 0)
        settle_offer();
    in_part = was;
    /* a helper that the machine's other jobs keep off its core is given
     * this one's time after a short spin */
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++)
        if (spins < 4096)
            relax();
        else
            sched_yield();
}

typedef struct {
    void (*run)(void *arg, size_t lo, size_t hi);
    void *arg;
    size_t n, each;
} ranges;

static void range_part(void *arg, int i)
{
    const ranges *r = arg;
    size_t lo = (size_t)i * r->each, hi = lo + r->each < r->n ? lo + r->each : r->n;
    if (lo < hi)
        r->run(r->arg, lo, hi);
}

void pt_parallel_ranges(int threads, size_t n, size_t least, size_t align,
                        void (*run)(void *arg, size_t lo, size_t hi), void *arg)
{
    align = align ? align : 1;
    size_t parts = n / (least ? least : 1);
    if (parts > (size_t)threads)
        parts = (size_t)threads;
    if (parts < 2 || in_part) {
        if (n)
            run(arg, 0, n);
        return;
    }
    size_t each = (n + parts - 1) / parts;
    each = (each + align - 1) / align * align;
    ranges r = {run, arg, n, each};
    pt_gemm_parallel((int)((n + each - 1) / each), range_part, &r);
}
