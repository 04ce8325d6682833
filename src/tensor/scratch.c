/* scratch.c: per-thread kernel scratch (scratch.h), held under a pthread key
 * whose destructor frees a thread's slots when it ends. */
#include "tensor/scratch.h"

#include <pthread.h>
#include <stdlib.h>

#include "tensor/arena.h"

typedef struct {
    void *p[PT_SCRATCH_SLOTS];
    size_t bytes[PT_SCRATCH_SLOTS];
} thread_scratch;

static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void release(void *arg)
{
    thread_scratch *s = arg;
    for (int i = 0; i < PT_SCRATCH_SLOTS; i++)
        pt_free(s->p[i]);
    free(s);
}

static void make_key(void) { pthread_key_create(&key, release); }

void *pt_scratch(int slot, size_t bytes)
{
    pthread_once(&once, make_key);
    thread_scratch *s = pthread_getspecific(key);
    if (!s) {
        if (!(s = calloc(1, sizeof *s)) || pthread_setspecific(key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->bytes[slot] < bytes) {
        size_t want = bytes + bytes / 4; /* room to grow a little */
        float *p = pt_alloc_floats((want + sizeof(float) - 1) / sizeof(float));
        if (!p)
            return NULL;
        pt_free(s->p[slot]);
        s->p[slot] = p;
        s->bytes[slot] = want;
    }
    return s->p[slot];
}
