/* arena.h: float buffers carved from one block sized up front.
 *
 * A model's parameters, a micro-batch's activations, a worker's scratch: each
 * is a set of buffers whose sizes are known before the first step, so they
 * are taken from one aligned allocation and freed together. Nothing in a hot
 * loop allocates. */
#ifndef PT_TENSOR_ARENA_H
#define PT_TENSOR_ARENA_H

#include <stddef.h>

#define PT_ALIGN 64

typedef struct {
    float *base;
    size_t capacity; /* floats */
    size_t used;     /* floats */
    size_t mapped;   /* bytes mapped by pt_arena_init_paged; 0: allocated */
} pt_arena;

/* Allocates `floats` zeroed floats; returns PT_OK or PT_ENOMEM. */
int pt_arena_init(pt_arena *a, size_t floats);
void pt_arena_free(pt_arena *a);
/* As pt_arena_init, in memory whose pages exist only once written (an
 * anonymous mapping): floats never written cost nothing, and
 * pt_arena_clear gives pages back (under AddressSanitizer an ordinary
 * arena, which it watches). */
int pt_arena_init_paged(pt_arena *a, size_t floats);
/* Zeroes floats [from, to) of the arena; in a paged arena the whole pages
 * among them go back to the system (they read as zero again). */
void pt_arena_clear(pt_arena *a, size_t from, size_t to);
/* A paged arena: the pages under floats [from, to) made present and
 * writable now, their contents kept (where the system can: Linux 5.14's
 * MADV_POPULATE_WRITE; elsewhere nothing happens). Code that adds into
 * given-back pages would otherwise read each through the shared zero page
 * and then copy it, a fault whose TLB flush interrupts every core. */
void pt_arena_populate(pt_arena *a, size_t from, size_t to);
/* Takes n floats, aligned to PT_ALIGN bytes; NULL when the arena is full. */
float *pt_arena_take(pt_arena *a, size_t n);
/* n rounded up so consecutive takes stay aligned: size arenas with this. */
size_t pt_arena_round(size_t n);
/* The floats (rounded as above) that hold `bytes` bytes: what a tensor of
 * 2-byte elements takes from an arena. */
size_t pt_arena_floats_for(size_t bytes);

/* Aligned allocation of n floats, zeroed by pt_zero_floats; free with
 * pt_free(). */
float *pt_alloc_floats(size_t n);
/* n floats from p set to zero: large ranges shared out between the product
 * threads (pt_blas_threads), whose page faults on a new buffer cost more
 * than the stores. */
void pt_zero_floats(float *p, size_t n);
void pt_free(void *p);

#endif
