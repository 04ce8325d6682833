/* sequence_split.h: Megatron-LM's sequence parallelism inside a tensor group
 * of T slices. Outside the tensor-parallel regions (the LayerNorms, the
 * residual adds, the embedding's sum) slice t holds positions
 * t L/T .. (t+1) L/T - 1 of every sample of L positions: its rows. The
 * regions need every position, so the group
 *   gathers         (all-gather, Megatron's g in forward): each slice puts
 *                   its rows into a whole buffer and the group's all-gather
 *                   fills in the others';
 *   reduce-scatters (g-bar): the group sums whole partial buffers into each
 *                   slice's own rows, which it takes.
 * Both are the program's TENSOR_SUM actions (pt_group_how: the parts of a
 * whole buffer of B samples are B runs of T parts of L/T rows). */
#ifndef PT_NN_SEQUENCE_SPLIT_H
#define PT_NN_SEQUENCE_SPLIT_H

#include <stddef.h>

#include "nn/block.h"

/* A micro-batch of B samples of L positions of C floats, of which the slice
 * t holds R = L / T positions each. */
typedef struct {
    int B, L, C, R, t;
} pt_seq_rows;

static inline pt_seq_rows pt_seq_rows_of(const pt_block *b, int B, int C)
{
    int L = b->shape.T;
    return (pt_seq_rows){B, L, C, L / b->shape.tensor, b->shape.tensor_rank};
}

/* Where sample i's rows of the slice start in the whole (B, L, C) buffer,
 * and in the slice's own (B, R, C) one, in floats. */
static inline size_t pt_seq_whole_at(pt_seq_rows r, int i)
{
    return ((size_t)i * r.L + (size_t)r.t * r.R) * r.C;
}
static inline size_t pt_seq_own_at(pt_seq_rows r, int i) { return (size_t)i * r.R * r.C; }

/* The group's reduce-scatter or all-gather of `tensors` whole (B, L, C)
 * tensors one after the other. */
static inline pt_group_how pt_seq_how(pt_group_op op, pt_seq_rows r, int tensors)
{
    return (pt_group_how){op, (size_t)tensors * r.B, (size_t)r.R * r.C};
}

/* whole (B, L, C) floats: the slice's rows from own (B, R, C), activations
 * of type t (the gather's part; the other rows are left as they are). */
void pt_seq_put(float *whole, const void *own, pt_elem_type t, pt_seq_rows r);
/* own (B, R, C), activations: the slice's rows of whole (what a
 * reduce-scatter keeps), stored once. */
void pt_seq_take(const pt_kernels *k, void *own, const float *whole, pt_seq_rows r);

#endif
