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
} pt_arena;

/* Allocates `floats` zeroed floats; returns PT_OK or PT_ENOMEM. */
int pt_arena_init(pt_arena *a, size_t floats);
void pt_arena_free(pt_arena *a);
/* Takes n floats, aligned to PT_ALIGN bytes; NULL when the arena is full. */
float *pt_arena_take(pt_arena *a, size_t n);
/* n rounded up so consecutive takes stay aligned: size arenas with this. */
size_t pt_arena_round(size_t n);
/* The floats (rounded as above) that hold `bytes` bytes: what a tensor of
 * 2-byte elements takes from an arena. */
size_t pt_arena_floats_for(size_t bytes);

/* Aligned allocation of n floats, zeroed; free with pt_free(). */
float *pt_alloc_floats(size_t n);
void pt_free(void *p);

#endif
