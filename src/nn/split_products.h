/* split_products.h: the products of a tensor-parallel slice whose results
 * the tensor group sums (transformer_split.c, transformer_sequence.c): the
 * sum is float, and a row-parallel bias is added once, after it. */
#ifndef PT_NN_SPLIT_PRODUCTS_H
#define PT_NN_SPLIT_PRODUCTS_H

#include "nn/block.h"

/* A row-parallel product: sum (N,C) = inp (N,in) W in floats, no bias (it
 * follows the group's sum). */
static inline void pt_row_parallel(const pt_block *b, int w, float *sum, const void *inp, int N,
                                   int in, int C)
{
    b->k->matmul(0, 0, N, C, in, 1.0f, pt_block_act(b, inp, in), pt_block_weight(b, w, C), 0.0f,
                 pt_mat_of(sum, C, PT_F32), NULL);
}

/* x (N,C) = sum + bias (C) on every row, stored as activations */
static inline void pt_add_bias_rows(const pt_block *b, void *x, const float *sum, const float *bias,
                                    int N, int C)
{
    for (int i = 0; i < N; i++)
        b->k->add_floats(pt_elems_at(x, (size_t)i * C, b->k->act), sum + (size_t)i * C, bias, C);
}

/* A column-parallel product's input gradient: sum (N,in) = dout W^T in floats */
static inline void pt_column_input_grad(const pt_block *b, int w, float *sum, const void *dout,
                                        int N, int in, int out_w)
{
    b->k->matmul(0, 1, N, in, out_w, 1.0f, pt_block_act(b, dout, out_w),
                 pt_block_weight(b, w, out_w), 0.0f, pt_mat_of(sum, in, PT_F32), NULL);
}

#endif
