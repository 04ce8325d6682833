/* model.h: the inside of pt_model: an ordered list of blocks whose
 * parameters and gradients live in two arenas (one contiguous run each, so
 * an optimizer or an all-reduce walks them in one pass). The builders (gpt.c,
 * mlp.c) only append blocks; model.c does the rest. */
#ifndef PT_MODEL_MODEL_H
#define PT_MODEL_MODEL_H

#include <stdbool.h>

#include "nn/block.h"
#include "tensor/arena.h"

#define PT_MODEL_MAX_BLOCKS 1024

struct pt_model {
    pt_model_config cfg;
    const pt_kernels *k;
    int n_blocks;
    pt_block *blocks;
    int n_params;
    pt_param *params;    /* in block order, then declaration order; data NULL
                            for a block this model does not hold */
    unsigned char *held; /* [n_blocks]: the block's tensors exist here */
    pt_arena data, grad;
    /* the user's layers (what a balance counts): layer l is blocks
     * layer_first[l] .. layer_first[l + 1] - 1 */
    int n_layers;
    int *layer_first;
    pt_model_io io; /* what a micro-batch carries */
    /* bf16: a copy of data, element for element, that the products read;
     * refreshed from data before the next forward or backward once
     * low_stale says data changed. NULL under fp32. */
    pt_bf16 *low;
    bool low_stale;
};

/* Append blocks to m->blocks (allocated for PT_MODEL_MAX_BLOCKS) through
 * the layer table (spec.h). */
int pt_gpt_build(pt_model *m);
int pt_mlp_build(pt_model *m);
int pt_spec_build(pt_model *m);

/* The parameters of block `block`: params[first .. first + count). */
int pt_model_block_first_param(const pt_model *m, int block);

#endif
