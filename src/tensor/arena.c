/* arena.c: see arena.h. */
#include "tensor/arena.h"

#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"

size_t pt_arena_round(size_t n)
{
    const size_t per = PT_ALIGN / sizeof(float);
    return (n + per - 1) / per * per;
}

float *pt_alloc_floats(size_t n)
{
    size_t bytes = pt_arena_round(n ? n : 1) * sizeof(float);
    void *p = NULL;
    if (posix_memalign(&p, PT_ALIGN, bytes) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

void pt_free(void *p) { free(p); }

int pt_arena_init(pt_arena *a, size_t floats)
{
    a->base = pt_alloc_floats(floats);
    a->capacity = a->base ? pt_arena_round(floats ? floats : 1) : 0;
    a->used = 0;
    if (!a->base)
        return pt_fail(PT_ENOMEM, "cannot allocate %zu bytes", floats * sizeof(float));
    return PT_OK;
}

void pt_arena_free(pt_arena *a)
{
    pt_free(a->base);
    a->base = NULL;
    a->capacity = a->used = 0;
}

float *pt_arena_take(pt_arena *a, size_t n)
{
    size_t r = pt_arena_round(n);
    if (a->used + r > a->capacity)
        return NULL;
    float *p = a->base + a->used;
    a->used += r;
    return p;
}

size_t pt_arena_floats_for(size_t bytes) { return pt_arena_round((bytes + 3) / 4); }
