/* arena.c: see arena.h. */
#include "tensor/arena.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pipetrain.h"
#include "tensor/error.h"
#include "tensor/gemm.h"

size_t pt_arena_round(size_t n)
{
    const size_t per = PT_ALIGN / sizeof(float);
    return (n + per - 1) / per * per;
}

/* Zeroing a new buffer is the first touch of each of its pages, and the
 * page faults cost more than the stores (about 1 GB/s on one thread of a
 * KVM guest): ranges of ZERO_SPLIT bytes and more are zeroed by the
 * product threads (pt_blas_threads), in parts a whole number of pages
 * long (so two parts share at most the page where they meet), 1.7-2x as
 * fast on two. Creating a pipeline of a large model is mostly this (its
 * moments, activations and kept panels), and its stages are built on
 * every worker's threads (pipeline.c). */
#define ZERO_SPLIT ((size_t)8 << 20)

static void zero_range(void *base, size_t lo, size_t hi) { memset((char *)base + lo, 0, hi - lo); }

void pt_zero_floats(float *p, size_t n)
{
    pt_parallel_ranges(pt_blas_threads(), n * sizeof(float), ZERO_SPLIT / 2, 4096, zero_range, p);
}

float *pt_alloc_floats(size_t n)
{
    size_t floats = pt_arena_round(n ? n : 1);
    void *p = NULL;
    if (posix_memalign(&p, PT_ALIGN, floats * sizeof(float)) != 0)
        return NULL;
    pt_zero_floats(p, floats);
    return p;
}

void pt_free(void *p) { free(p); }

int pt_arena_init(pt_arena *a, size_t floats)
{
    a->base = pt_alloc_floats(floats);
    a->capacity = a->base ? pt_arena_round(floats ? floats : 1) : 0;
    a->used = a->mapped = 0;
    if (!a->base)
        return pt_fail(PT_ENOMEM, "cannot allocate %zu bytes", floats * sizeof(float));
    return PT_OK;
}

void pt_arena_free(pt_arena *a)
{
    if (a->mapped)
        munmap(a->base, a->mapped);
    else
        pt_free(a->base);
    a->base = NULL;
    a->capacity = a->used = a->mapped = 0;
}

static size_t page_bytes(void)
{
    long n = sysconf(_SC_PAGESIZE);
    return n > 0 ? (size_t)n : 4096;
}

/* AddressSanitizer watches heap memory, not mappings: under it a paged
 * arena is an ordinary one (pt_arena_clear zeroes, pt_arena_populate does
 * nothing), the same numbers with the heap's checks. */
#if defined(__SANITIZE_ADDRESS__)
enum { PAGED = 0 };
#else
enum { PAGED = 1 };
#endif

int pt_arena_init_paged(pt_arena *a, size_t floats)
{
    if (!PAGED)
        return pt_arena_init(a, floats);
    size_t page = page_bytes(), capacity = pt_arena_round(floats ? floats : 1);
    size_t bytes = (capacity * sizeof(float) + page - 1) / page * page;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *a = (pt_arena){0};
    if (p == MAP_FAILED)
        return pt_fail(PT_ENOMEM, "cannot map %zu bytes", bytes);
    *a = (pt_arena){.base = p, .capacity = capacity, .mapped = bytes};
    return PT_OK;
}

/* The whole pages inside floats [from, to) of a paged arena (its base is
 * page-aligned), in bytes from the base: [*lo, *hi), empty when none. */
static void inner_pages(size_t from, size_t to, size_t *lo, size_t *hi)
{
    size_t page = page_bytes();
    *lo = (from * sizeof(float) + page - 1) / page * page;
    *hi = to * sizeof(float) / page * page;
    if (*hi < *lo)
        *hi = *lo;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

void pt_arena_populate(pt_arena *a, size_t from, size_t to)
{
    if (!a->mapped || from >= to || to > a->capacity)
        return;
    size_t page = page_bytes(), lo = from * sizeof(float) / page * page;
    size_t hi = (to * sizeof(float) + page - 1) / page * page;
    hi = hi < a->mapped ? hi : a->mapped;
    (void)madvise((char *)a->base + lo, hi - lo, MADV_POPULATE_WRITE); /* a hint: may fail */
}

void pt_arena_clear(pt_arena *a, size_t from, size_t to)
{
    if (to > a->capacity)
        to = a->capacity;
    if (from >= to)
        return;
    size_t lo = 0, hi = 0;
    if (a->mapped)
        inner_pages(from, to, &lo, &hi);
    if (hi > lo && madvise((char *)a->base + lo, hi - lo, MADV_DONTNEED) == 0) {
        memset(a->base + from, 0, lo - from * sizeof(float));
        memset((char *)a->base + hi, 0, to * sizeof(float) - hi);
        return;
    }
    memset(a->base + from, 0, (to - from) * sizeof(float));
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
