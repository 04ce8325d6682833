/* model.h: the inside of pt_model: an ordered list of blocks whose
 * parameters and gradients live in two arenas (one contiguous run each, so
 * an optimizer or an all-reduce walks them in one pass; the gradients' in
 * pages that exist once written, pt_arena_init_paged). The builders (gpt.c,
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
    /* fp32 on pipetrain's own products: each matrix's panels as op(B),
     * untransposed and transposed (packed[2 i + t] for parameter i; gemm.h),
     * in panel_data's panel_floats; emptied whenever the data changes.
     * NULL with repack_weights or where the products keep none. */
    struct pt_gemm_packed *packed;
    float *panel_data;
    size_t panel_floats;
    /* bf16 with sharded optimizer state: the matrices' float master exists
     * only in [master_lo[k], master_hi[k]) of the data arena (vectors stay
     * whole), `released` floats of it given back; n_master 0: all of it
     * (pt_model_shard_master) */
    size_t *master_lo, *master_hi, released;
    int n_master;
    /* tensor parallelism: this model is slice tensor_rank of `tensor`
     * (1: the whole model); the split blocks say which tensors are cut;
     * sequence_parallel: with its rows of every sample between them */
    int tensor, tensor_rank, sequence_parallel;
    /* the blocks' one workspace (pt_block_ops.work_bytes), grown to the
     * largest micro-batch seen */
    void *work;
    size_t work_bytes;
};

/* Append blocks to m->blocks (allocated for PT_MODEL_MAX_BLOCKS) through
 * the layer table (spec.h). */
int pt_gpt_build(pt_model *m);
int pt_mlp_build(pt_model *m);
int pt_spec_build(pt_model *m);

/* Slice t of T of a model (tensor parallelism, transformer_split.c and
 * vocab_parallel.c): as pt_model_create_part (hold NULL: every block) or,
 * with describe, a description without tensors. T = 1 is the whole model.
 * sequence: with sequence parallelism (sequence_split.h; T >= 2, gpt). */
int pt_model_create_slice(const pt_model_config *cfg, const unsigned char *hold, int describe,
                          int T, int t, int sequence, pt_model **out);
/* A micro-batch's record in two parts (pt_activations_create makes both):
 * the forward's, kept from the forward to the weight pass, and the
 * backward's (the blocks' output gradients and grads_bytes areas), kept
 * from backward_input to the weight pass. A pipeline worker holds the
 * second only for the micro-batches between those two passes: one at a
 * time where every backward is fused, so most micro-batches in flight
 * keep the forward's part alone. A backward needs one attached. */
typedef struct pt_grad_record pt_grad_record;
int pt_activations_create_forward(const pt_model *m, int first, int last, int batch,
                                  pt_activations **out);
int pt_grad_record_create(const pt_model *m, int first, int last, int batch, pt_grad_record **out);
void pt_grad_record_destroy(pt_grad_record *g);
size_t pt_grad_record_bytes(const pt_grad_record *g);
void pt_activations_attach_grads(pt_activations *a, pt_grad_record *g);
/* The attached backward part, now detached (NULL: none). */
pt_grad_record *pt_activations_detach_grads(pt_activations *a);
pt_grad_record *pt_activations_grads(const pt_activations *a);
/* A forward's part leaves out the range's last output where it is kept
 * only until the backward (pt_block_ops.out_to_backward: the LM head's
 * probabilities): a worker holds that for the micro-batches between their
 * F and their B, attached here (a buffer of pt_model_output_part_bytes). */
void pt_activations_attach_output(pt_activations *a, void *buf);
/* The attached output, now detached (NULL: none, or not kept apart). */
void *pt_activations_detach_output(pt_activations *a);
/* What each part takes for blocks first..last and a batch (their sum is
 * pt_model_activation_bytes); the output part 0 where there is none. */
size_t pt_model_forward_record_bytes(const pt_model *m, int first, int last, int batch);
size_t pt_model_output_part_bytes(const pt_model *m, int first, int last, int batch);
size_t pt_model_grad_record_bytes(const pt_model *m, int first, int last, int batch);

/* The workspace blocks first..last need for micro-batches of `batch` (0:
 * none); a stage's is the largest over the blocks it has run (work_bytes). */
size_t pt_model_work_bytes(const pt_model *m, int first, int last, int batch);
/* The pieces blocks first..last run in, forward or backward (1 + the
 * tensor group's sums between them; 1 for blocks that run whole). */
int pt_model_tensor_pieces(const pt_model *m, int first, int last, int backward);
/* Piece `piece` of pt_model_forward / pt_model_backward_input (the same
 * arguments); the pieces in order, with the group's sum of
 * pt_model_tensor_sum_buffer(piece) after each but the last, are the whole
 * pass. The loss is written by the last forward piece. */
int pt_model_forward_piece(pt_model *m, int first, int last, int piece, const pt_microbatch *mb,
                           const void *in, pt_activations *acts, float *loss);
int pt_model_backward_input_piece(pt_model *m, int first, int last, int piece,
                                  const pt_microbatch *mb, const void *in, pt_activations *acts,
                                  const void *dout, void *din, float loss_scale);
/* The floats the tensor group sums right after piece `piece` of the pass. */
float *pt_model_tensor_sum_buffer(const pt_model *m, int first, int last, int backward, int piece,
                                  const pt_activations *acts, size_t *count);
/* How the group combines that buffer (pt_group_how). */
pt_group_how pt_model_tensor_sum_how(const pt_model *m, int first, int last, int backward,
                                     int piece, int batch);

/* bf16: the float parameters are current everywhere (created, loaded, or
 * gathered for a save): the bf16 copy is brought up to them, then the
 * float master of the matrices read only through it (pt_model_master_shards)
 * outside the n ascending ranges [lo[k], hi[k]) of the data arena goes back
 * (reads as zero), and from then on the copy follows the kept ranges and
 * every other tensor; the rest of it is the caller's to bring (zero.c's
 * GATHER). n = 0 keeps all of it. Nothing to do in fp32. */
int pt_model_shard_master(pt_model *m, const size_t *lo, const size_t *hi, int n);
/* A sharded master's float parameters outside the kept ranges given back
 * again (after a save wrote them in whole); the bf16 copy is left as it is. */
void pt_model_release_master(pt_model *m);
/* Is parameter i's float master cut into the kept ranges when sharded (a
 * matrix read only through its bf16 copy)? */
bool pt_model_master_shards(const pt_model *m, int i);
/* The bf16 copy brought up to the kept float parameters now. */
void pt_model_refresh_low(pt_model *m);
/* After an update: the bf16 copy brought up and every kept panel that a
 * product had filled packed again now (gemm.h's pt_gemm_packed_refill),
 * shared between the worker's threads, rather than by the next products
 * that read them. The same bits as leaving it to them. */
void pt_model_prepare_products(pt_model *m);
/* A pipeline's stage: room for every held matrix's panels as pipetrain's
 * own fp32 products pack them (gemm.h's pt_gemm_packed), kept from one
 * product to the next until pt_model_params_changed; nothing where the
 * config says repack_weights or the products keep none. Only for a model
 * whose every write of its parameters says so (the pipeline's): a model of
 * the C API keeps none. */
int pt_model_keep_panels(pt_model *m);
/* Bytes of the panels a stage keeps for blocks first..last's matrices
 * (pt_model_keep_panels), beside their parameters. */
size_t pt_model_panel_bytes(const pt_model *m, int first, int last);
/* The weight pass of blocks first..last in pieces, one per block with
 * parameters from the last block down (zero 2 reduces each piece's
 * gradient as soon as it is computed): how many (1 when none has
 * parameters), piece `piece` of pt_model_backward_weight (the same
 * arguments; the pieces in order are the whole pass), and the floats
 * [*from, *to) of the gradient arena it writes. */
int pt_model_weight_pieces(const pt_model *m, int first, int last);
int pt_model_backward_weight_piece(pt_model *m, int first, int last, int piece,
                                   const pt_microbatch *mb, const void *in, pt_activations *acts);
void pt_model_weight_piece_grads(const pt_model *m, int first, int last, int piece, size_t *from,
                                 size_t *to);
/* The parameters of block `block`: params[first .. first + count). */
int pt_model_block_first_param(const pt_model *m, int block);
/* Parameter i's declaration: its name, shape and (a tensor slice's) split. */
const pt_param_decl *pt_model_param_decl(const pt_model *m, int i);

#endif
