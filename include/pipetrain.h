/* pipetrain.h: the public API of pipetrain, and the only header a user
 * includes.
 *
 * pipetrain trains neural networks by pipeline parallelism: a model is an
 * ordered list of blocks, the blocks are cut into stages, each stage runs on
 * its own worker, and a schedule of actions (forward, backward-input,
 * backward-weight) overlaps the workers. This header is grouped as the layers
 * of the design are: errors, the numerical core, models, schedules, training.
 *
 * Conventions (libuv style): public names start with pt_; handles are opaque
 * and come in create/destroy pairs; a function that can fail returns an int
 * status (PT_OK or a negative PT_E* code) and leaves a message that
 * pt_last_error() returns. The library never exits the process.
 */
#ifndef PIPETRAIN_H
#define PIPETRAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors ------------------------------------------------------------ */

enum {
    PT_OK = 0,
    PT_EINVAL = -1,       /* an argument or configuration is not acceptable */
    PT_ENOMEM = -2,       /* an allocation failed */
    PT_EIO = -3,          /* a file could not be read or written */
    PT_EFORMAT = -4,      /* a file's contents are malformed */
    PT_EDEADLOCK = -5,    /* a schedule cannot complete */
    PT_EUNSUPPORTED = -6, /* this build or machine cannot do what was asked */
    PT_ETRANSPORT = -7    /* a peer worker failed or stopped answering */
};

/* The message of the last failure on the calling thread ("" if none). */
const char *pt_last_error(void);
/* A short name for a status code ("invalid argument", ...). */
const char *pt_strerror(int status);

/* ---- Numerical core ---------------------------------------------------- */

/* Threads each BLAS product may use. Workers of a pipeline each run their own
 * products, so this is the count per worker. n >= 1. */
int pt_blas_set_threads(int n);
int pt_blas_threads(void);

/* ---- Models ------------------------------------------------------------ */

typedef struct pt_model pt_model;

typedef enum { PT_MODEL_GPT = 0, PT_MODEL_MLP = 1 } pt_model_kind;

#define PT_MLP_MAX_WIDTHS 16

typedef struct {
    pt_model_kind kind;
    /* gpt: GPT-2's architecture */
    int n_layer;  /* transformer blocks (default 4) */
    int n_head;   /* attention heads (default 4) */
    int n_embd;   /* channels; a multiple of n_head (default 128) */
    int seq_len;  /* T, tokens per sample (default 128) */
    int vocab;    /* V (default 256: bytes) */
    /* mlp: widths[0] inputs, widths[n_widths-1] classes, ReLU between */
    int n_widths;
    int widths[PT_MLP_MAX_WIDTHS];
    uint64_t seed; /* initialisation (default 1) */
} pt_model_config;

pt_model_config pt_model_config_gpt(void);
pt_model_config pt_model_config_mlp(int n_widths, const int *widths);

int pt_model_create(const pt_model_config *cfg, pt_model **out);
void pt_model_destroy(pt_model *m);
const pt_model_config *pt_model_get_config(const pt_model *m);

/* Per-sample cost of one block: what the partitioner and simulator weigh. */
typedef struct {
    double forward_flops;
    double backward_input_flops;
    double backward_weight_flops;
    size_t param_bytes;
    size_t activation_bytes; /* kept from forward to backward, per sample */
} pt_block_cost;

int pt_model_n_blocks(const pt_model *m);
const char *pt_model_block_kind(const pt_model *m, int block);
pt_block_cost pt_model_block_cost(const pt_model *m, int block);

/* A parameter: a named tensor owned by one block. Names and layouts follow
 * Hugging Face's GPT2LMHeadModel for gpt (weights stored (in, out) as its
 * Conv1D does). A parameter used by two blocks (the LM head uses the token
 * embedding) is held as two copies; the second names the first in tied_to,
 * and pt_model_sum_tied_grads() makes their gradients equal. */
typedef struct {
    const char *name;
    float *data;
    float *grad;
    size_t numel;
    int ndim;
    int shape[4];
    int block;
    const char *tied_to; /* NULL unless this is a copy of another parameter */
} pt_param;

int pt_model_n_params(const pt_model *m);
const pt_param *pt_model_param(const pt_model *m, int i);
const pt_param *pt_model_find_param(const pt_model *m, const char *name);
size_t pt_model_param_count(const pt_model *m); /* elements, tied copies once */
void pt_model_zero_grads(pt_model *m);
void pt_model_sum_tied_grads(pt_model *m);

/* One micro-batch of samples. gpt reads tokens and targets, (batch, seq_len)
 * each; mlp reads inputs (batch, widths[0]) and targets (batch). */
typedef struct {
    int batch;
    const int *tokens;
    const float *inputs;
    const int *targets;
} pt_microbatch;

/* Everything blocks first..last keep for one micro-batch between its forward
 * and its backward: each block's output, saved activations and output
 * gradient. Sized once for a batch size; reusable across micro-batches. */
typedef struct pt_activations pt_activations;

int pt_activations_create(const pt_model *m, int first, int last, int batch,
                          pt_activations **out);
void pt_activations_destroy(pt_activations *a);
size_t pt_activations_bytes(const pt_activations *a);
/* The output of the range's last block (batch x its width), after forward. */
const float *pt_activations_output(const pt_activations *a);
size_t pt_activations_output_floats(const pt_activations *a);

/* Floats per sample entering block `block` (0 for the token embedding). */
int pt_model_block_input_floats(const pt_model *m, int block);

/* Runs blocks first..last forward on a micro-batch. `in` is the range's input
 * (NULL when first is block 0: the micro-batch is the input). When the range
 * ends with the model's last block, *loss receives the micro-batch's mean
 * loss (loss may be NULL otherwise). */
int pt_model_forward(pt_model *m, int first, int last, const pt_microbatch *mb,
                     const float *in, pt_activations *acts, float *loss);
/* Gradient with respect to the range's input, into din (NULL when first is
 * block 0). dout is the gradient of the range's output (NULL when the range
 * ends with the loss, whose gradient is loss_scale). Weight gradients are not
 * touched; pt_model_backward_weight() adds them afterwards. */
int pt_model_backward_input(pt_model *m, int first, int last, const pt_microbatch *mb,
                            const float *in, pt_activations *acts, const float *dout,
                            float *din, float loss_scale);
/* Adds the weight gradients of blocks first..last for a micro-batch whose
 * backward_input has run. */
int pt_model_backward_weight(pt_model *m, int first, int last, const pt_microbatch *mb,
                             const float *in, pt_activations *acts);
/* Forward of the whole model, then backward (input then weight) with the
 * gradient of loss_scale x loss: one micro-batch on one worker. */
int pt_model_step_microbatch(pt_model *m, const pt_microbatch *mb, float loss_scale,
                             pt_activations *acts, float *loss);

#ifdef __cplusplus
}
#endif
#endif /* PIPETRAIN_H */
