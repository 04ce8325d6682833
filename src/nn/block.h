/* block.h: the unit a stage boundary may fall between.
 *
 * A block maps a per-sample input of in_floats to an output of out_floats
 * (the token embedding reads tokens instead of an input; the loss heads write
 * probabilities and return the loss). Every block has three pieces of work:
 *   forward          in -> out, filling its saved activations;
 *   backward_input   dout -> din (what the previous stage waits for), and
 *                    stores in `saved` what backward_weight needs;
 *   backward_weight  adds its parameter gradients (nobody waits for it, so
 *                    zero-bubble schedules move it into bubbles).
 * A fused backward is backward_input then backward_weight.
 *
 * The caller (model.c) owns every buffer: a block's output and its saved
 * area of saved_bytes(B) bytes, kept per micro-batch from forward to
 * backward_weight, and the gradient of its output and its grads area of
 * grads_bytes(B), kept only from backward_input to backward_weight.
 * Blocks allocate nothing.
 * Inputs, outputs, their gradients and most saved tensors are activations,
 * stored in the kernels' activation type (k->act: float, or bf16 under
 * --precision bf16); a block's layout gives each saved tensor its type.
 * The loss heads' outputs (probabilities, then the logits' gradient) are
 * float under every precision (out_is_float).
 * model.c builds blocks in two passes: declare their parameters, then point
 * them at one arena and initialise them.
 */
#ifndef PT_NN_BLOCK_H
#define PT_NN_BLOCK_H

#include <stddef.h>

#include "pipetrain.h"
#include "tensor/bf16.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

typedef struct pt_block pt_block;

/* The shapes a block may need; each block reads the fields it uses. */
typedef struct {
    int T, C, H, V; /* sequence, channels, heads, vocabulary (gpt) */
    int in, out;    /* widths (linear, mlp) */
    int no_bias;    /* linear, conv2d: weight only */
    int n_layer;    /* for GPT-2's scaled init of residual projections */
    int index;      /* which transformer layer this is (0 .. n_layer-1) */
    /* gpt: GPT2Config's arithmetic, as pt_model_config names it. Each zero
     * is GPT-2's own choice, so a shape of T, C, H, V alone is GPT-2; the
     * gpt blocks resolve the zeros (pt_block_shape_gpt) when built. */
    int n_inner;       /* MLP width (0: 4C) */
    int n_positions;   /* rows of wpe (0: T) */
    pt_activation act; /* the MLP's activation (0: gelu_new) */
    float ln_eps;      /* every LayerNorm's epsilon (0: 1e-5) */
    int attn_unscaled; /* scores not divided by sqrt(head size) */
    int attn_by_layer; /* layer l's scores also divided by l + 1 */
    int head_untied;   /* lm_head.weight is its own parameter, not wte's copy */
    /* images (conv2d, pools, image norms, the residual block): a sample is
     * (channels, height, width), NCHW as PyTorch's */
    int channels, height, width;
    int out_channels; /* conv2d, residual */
    int kernel;       /* conv2d, pools: the window's side */
    int stride;       /* 0: 1 for conv2d, the kernel for pools; residual: its first conv's */
    int padding;      /* zeros on each side */
    int groups;       /* GroupNorm's groups; 0: LayerNorm over (C,H,W) */
    int n_kv_heads;   /* llama: key/value heads, dividing H (0: H) */
    float rope_theta; /* llama: rotary base (0: 10000) */
    float rms_eps;    /* llama, rmsnorm: RMSNorm's epsilon (0: 1e-6) */
    /* tensor parallelism (tensor_parallel.h): the block is slice tensor_rank
     * of `tensor` (0 or 1: the whole block); sequence_parallel: between its
     * tensor-parallel regions the slice holds its T / tensor positions of
     * every sample (sequence_split.h) */
    int tensor, tensor_rank, sequence_parallel;
} pt_block_shape;

/* s with its zeros resolved to GPT-2's values. */
pt_block_shape pt_block_shape_gpt(const pt_block_shape *s);

/* PT_INIT_CONSTANT fills with the declaration's std field as the value */
typedef enum { PT_INIT_ZEROS, PT_INIT_ONES, PT_INIT_NORMAL, PT_INIT_CONSTANT } pt_init_kind;

/* What a block declares of one parameter before storage exists. */
typedef struct {
    char name[96];
    int ndim;
    int shape[4];
    pt_init_kind init;
    float std;
    char tied_to[96]; /* "" unless a copy of another block's parameter */
    /* a slice of a tensor-parallel block: this tensor is part `split_part`
     * of `split_parts` along dimension split_dim of the whole (logical)
     * tensor, whose split_groups runs along that dimension (QKV's three) are
     * each cut alike; split_parts 0: the whole tensor */
    int split_dim, split_groups, split_parts, split_part;
    /* sequence parallelism: each slice's gradient is its positions' part,
     * summed over the tensor group before the norm (the LayerNorms') */
    int sequence_partial;
    /* a matrix the block reads as floats (an embedding's rows, a user
     * layer's tensors), not only through its bf16 copy: a bf16 run with
     * sharded state keeps its float master whole on every replica */
    int float_read;
    /* a matrix the products read as op(A) (a convolution's filters), not as
     * op(B): no panels are kept for it (pt_mat's packed) */
    int product_a;
} pt_param_decl;

#define PT_BLOCK_MAX_PARAMS 16

/* How a tensor group combines the buffer a piece leaves: summed on every
 * member (an all-reduce), or, where member k owns part k of each of
 * `blocks` runs of `part` floats (sequence parallelism's positions), summed
 * into each member's own parts (a reduce-scatter) or each member's parts
 * copied to every member (an all-gather). */
typedef enum { PT_GROUP_SUM, PT_GROUP_SCATTER, PT_GROUP_GATHER } pt_group_op;
typedef struct {
    pt_group_op op;
    size_t blocks, part; /* scatter, gather: the parts */
} pt_group_how;

typedef struct {
    const char *kind;
    int out_is_float; /* the output is float under every precision (loss heads) */
    /* the output is read by backward_input and nothing after it (the LM
     * head's probabilities, turned into the logits' gradient there): as a
     * range's last block it is kept only from forward to backward_input,
     * and backward_weight is given NULL for it */
    int out_to_backward;
    int reads_tokens; /* the micro-batch's tokens are its input (the embedding) */
    /* bytes kept per micro-batch of B samples between forward and backward */
    size_t (*saved_bytes)(const pt_block *b, int B);
    /* bytes backward_input leaves for backward_weight apart from saved (the
     * gradients inside the block), at b->grads: kept per micro-batch only
     * from its backward_input to its backward_weight, so a micro-batch
     * still waiting for its backward holds saved_bytes alone (NULL: none;
     * a block that leaves them in saved keeps them from its forward on) */
    size_t (*grads_bytes)(const pt_block *b, int B);
    /* loss is written by the loss heads only (sum over the micro-batch's
     * rows is divided by the rows counted); others ignore it */
    void (*forward)(pt_block *b, const pt_microbatch *mb, const void *in, void *out, void *saved,
                    double *loss_sum, int *loss_rows);
    /* din may be NULL (first block). Loss heads read loss_scale and ignore
     * dout; the others ignore loss_scale. */
    void (*backward_input)(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                           void *saved, const void *dout, void *din, float loss_scale);
    void (*backward_weight)(pt_block *b, const pt_microbatch *mb, const void *in, const void *out,
                            const void *saved, const void *dout);
    /* Tensor parallelism (tensor_parallel.h): blocks split over a tensor
     * group run forward and backward_input in pieces, and the group sums a
     * buffer between two pieces (the executor's TENSOR_SUM actions).
     * tensor_sums: the sums in forward (backward 0) or backward_input
     * (backward 1); 0 or NULL: the block runs whole. The pieces are
     * piece = 0 .. sums; forward and backward_input above run them all
     * without the sums (what a profile times). */
    int (*tensor_sums)(const pt_block *b, int backward);
    void (*forward_piece)(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                          void *out, void *saved, double *loss_sum, int *loss_rows);
    void (*backward_input_piece)(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                                 void *out, void *saved, const void *dout, void *din,
                                 float loss_scale);
    /* the floats summed over the group right after piece `piece`, and how
     * (NULL: PT_GROUP_SUM) */
    float *(*tensor_sum_buffer)(const pt_block *b, int backward, int piece, int B, void *out,
                                void *saved, size_t *count);
    pt_group_how (*tensor_sum_how)(const pt_block *b, int backward, int piece, int B);
    /* FLOPs per sample; model.c adds the byte counts, which follow from the
     * declarations and saved_bytes */
    pt_block_cost (*cost)(const pt_block *b);
    /* bytes of scratch one piece of work needs for a micro-batch of B and
     * nothing after it (NULL: none): the stage's one workspace, b->work,
     * shared by its blocks, so it is not kept per micro-batch in flight */
    size_t (*work_bytes)(const pt_block *b, int B);
} pt_block_ops;

struct pt_block {
    const pt_block_ops *ops;
    const pt_kernels *k;
    pt_block_shape shape;
    int in_floats, out_floats; /* per sample */
    int layer;                 /* transformer layer index, -1 elsewhere */
    /* loss heads: what they compare against, per sample: `labels` class
     * labels in 0..classes-1, or `values` floats (model.c reads these to
     * say what a micro-batch must carry) */
    int labels, classes, values;
    const pt_layer_type *user; /* a user-defined layer's callbacks (spec_user.c) */
    int n_params;
    pt_param_decl decl[PT_BLOCK_MAX_PARAMS];
    float *p[PT_BLOCK_MAX_PARAMS];    /* parameter data, in declaration order */
    float *g[PT_BLOCK_MAX_PARAMS];    /* their gradients */
    pt_bf16 *pl[PT_BLOCK_MAX_PARAMS]; /* bf16 copies the products read (NULL: none) */
    /* fp32: each matrix's kept panels, untransposed and transposed (NULL:
     * none; kernels.h's pt_mat) */
    struct pt_gemm_packed *packed[PT_BLOCK_MAX_PARAMS];
    void *work;  /* the stage's workspace (work_bytes), set by model.c */
    void *grads; /* the running micro-batch's grads_bytes area, set by model.c
                  * before each backward_input and backward_weight */
};

/* The pieces of work blocks without them share (block.c): a saved area of
 * no bytes, no input gradient (token inputs), no parameter gradients. */
size_t pt_block_saves_nothing(const pt_block *b, int B);
void pt_block_no_input_grad(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                            void *saved, const void *dout, void *din, float loss_scale);
void pt_block_no_weights(pt_block *b, const pt_microbatch *mb, const void *in, const void *out,
                         const void *saved, const void *dout);

/* Saved-area layouts: tensor after tensor, each at a byte offset, its bytes
 * rounded up to 4 so a float one never starts mid-word. Returns where the
 * next n elements of type t go and moves *at past them. */
static inline size_t pt_saved_take(size_t *at, size_t n, pt_elem_type t)
{
    size_t off = *at;
    *at += (n * pt_elem_size(t) + 3) & ~(size_t)3;
    return off;
}

/* The tensor at byte offset off of a saved area */
static inline void *pt_saved_at(const void *saved, size_t off) { return (char *)saved + off; }
static inline float *pt_saved_floats(const void *saved, size_t off)
{
    return (float *)pt_saved_at(saved, off);
}

/* An activation tensor as a product's operand */
static inline pt_mat pt_block_act(const pt_block *b, const void *p, int ld)
{
    return pt_mat_of(p, ld, b->k->act);
}
/* Parameter i as a product's operand: its bf16 copy when it has one */
static inline pt_mat pt_block_weight(const pt_block *b, int i, int ld)
{
    return b->pl[i] ? (pt_mat){b->pl[i], ld, PT_BF16, b->packed[i]}
                    : (pt_mat){b->p[i], ld, PT_F32, b->packed[i]};
}

/* Element i of an activation tensor, and storing one: for the few blocks
 * that work element by element outside the seam (tanh, the losses) */
static inline float pt_act_load(const pt_block *b, const void *p, size_t i)
{
    return b->k->act == PT_BF16 ? pt_bf16_widen(((const pt_bf16 *)p)[i]) : ((const float *)p)[i];
}
static inline void pt_act_store(const pt_block *b, void *p, size_t i, float x)
{
    if (b->k->act == PT_BF16)
        ((pt_bf16 *)p)[i] = pt_bf16_round(x);
    else
        ((float *)p)[i] = x;
}

/* An activation's two kernels from the seam, and its cost per element. */
typedef struct {
    void (*forward)(void *out, const void *inp, size_t n);
    void (*backward)(void *dinp, const void *inp, const void *dout, size_t n);
    double forward_flops, backward_flops;
} pt_activation_kernels;

/* NULL kernels for a value that is no activation. */
pt_activation_kernels pt_activation_pick(const pt_kernels *k, pt_activation act);

/* Declares a parameter; returns its index in b->p / b->g. */
int pt_block_declare(pt_block *b, const char *name, int ndim, const int *shape, pt_init_kind init,
                     float std);
/* weight (in,out) + bias (out) under <prefix>.weight and <prefix>.bias */
void pt_block_declare_linear(pt_block *b, const char *prefix, int in, int out, float std);
/* weight (C) = 1 and bias (C) = 0 */
void pt_block_declare_layernorm(pt_block *b, const char *prefix, int C);
size_t pt_param_decl_numel(const pt_param_decl *d);
/* Makes parameter i of b part `part` of `parts` along dimension dim (its
 * declared, whole shape is cut there; `groups` runs along dim, each cut
 * alike: QKV's 3). */
void pt_block_split_param(pt_block *b, int i, int dim, int groups, int parts, int part);
/* A split parameter's slice from its whole tensor (to_whole 0), or into
 * it (to_whole 1): the tensor's elements by offset, as a checkpoint names
 * them. */
void pt_param_slice_copy(const pt_param_decl *d, float *slice, const float *whole, int to_whole);
size_t pt_block_param_bytes(const pt_block *b);

/* Constructors: fill ops, shapes and parameter declarations. `prefix` is the
 * name stem of the block's parameters ("transformer.h.3", "fc.0"). */
void pt_embedding_init(pt_block *b, const pt_block_shape *s);
/* The token table alone (no positions): tokens (T) -> (T, C) */
void pt_tok_embedding_init(pt_block *b, const pt_block_shape *s, const char *prefix);
void pt_layernorm_init(pt_block *b, const pt_block_shape *s, const char *prefix);
void pt_linear_init(pt_block *b, const pt_block_shape *s, const char *prefix);
/* The same without the bias: <prefix>.weight alone. Both apply to each of
 * the input's s->T rows (0: one row per sample). */
void pt_linear_init_no_bias(pt_block *b, const pt_block_shape *s, const char *prefix);
/* An elementwise activation (in (n) -> out (n)), kind its GPT2Config name. */
void pt_activation_init(pt_block *b, const pt_block_shape *s, pt_activation act);
void pt_attention_init(pt_block *b, const pt_block_shape *s, const char *prefix);
void pt_transformer_init(pt_block *b, const pt_block_shape *s, int layer);
/* A whole transformer block, embedding or LM head made its tensor-parallel
 * slice (b->shape.tensor > 1; transformer_split.c, vocab_parallel.c): the
 * three inits above call these when the shape asks for slices. */
void pt_transformer_split(pt_block *b);
void pt_embedding_split(pt_block *b);
void pt_lm_head_split(pt_block *b);
/* The same three under sequence parallelism (shape.sequence_parallel;
 * transformer_sequence.c, vocab_parallel.c): their inputs and outputs are
 * the slice's positions. */
void pt_transformer_sequence(pt_block *b);
void pt_embedding_sequence(pt_block *b);
void pt_lm_head_sequence(pt_block *b);
void pt_lm_head_init(pt_block *b, const pt_block_shape *s);
void pt_classifier_init(pt_block *b, const pt_block_shape *s, const char *prefix);
/* Elementwise tanh: in (n) -> out (n), n = s->in (spec_tanh.c). */
void pt_tanh_init(pt_block *b, const pt_block_shape *s, const char *prefix);
/* A loss head without parameters (spec_losses.c): softmax cross-entropy
 * over each of s->T rows (0: one) of s->in logits against class labels. */
void pt_cross_entropy_init(pt_block *b, const pt_block_shape *s, const char *prefix);
/* A user-defined layer's callbacks as a block of in_floats inputs
 * (spec_user.c). */
void pt_user_layer_init(pt_block *b, const pt_layer_type *t, int in_floats, const char *prefix);

/* Images, in (channels, height, width) per sample (conv2d.c, pool.c,
 * image_norm.c, residual.c). */
void pt_conv2d_init(pt_block *b, const pt_block_shape *s, const char *prefix);
void pt_maxpool_init(pt_block *b, const pt_block_shape *s, const char *prefix);
void pt_avgpool_init(pt_block *b, const pt_block_shape *s, const char *prefix);
void pt_global_avgpool_init(pt_block *b, const pt_block_shape *s, const char *prefix);
void pt_flatten_init(pt_block *b, const pt_block_shape *s, const char *prefix);
void pt_groupnorm_init(pt_block *b, const pt_block_shape *s, const char *prefix);
void pt_layernorm_image_init(pt_block *b, const pt_block_shape *s, const char *prefix);
void pt_residual_init(pt_block *b, const pt_block_shape *s, const char *prefix);
/* The Llama family (llama.c, rmsnorm.c), in (T, C) per sample. */
void pt_llama_init(pt_block *b, const pt_block_shape *s, const char *prefix);
void pt_rmsnorm_init(pt_block *b, const pt_block_shape *s, const char *prefix);
/* Heads (mse.c, last_token.c): the mean squared error of s->in predictions
 * against as many float targets (MSELoss, mean reduction), GPT-2's score
 * head on the last token. */
void pt_mse_init(pt_block *b, const pt_block_shape *s, const char *prefix);
void pt_last_token_classifier_init(pt_block *b, const pt_block_shape *s, const char *prefix);

#endif
