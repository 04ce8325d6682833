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

/* Threads each product may use (pipetrain's own, splitting C between the
 * calling thread and helpers of its own, or OpenBLAS's). Workers of a
 * pipeline each run their own products, so this is the count per worker.
 * n >= 1; 1 until set. */
int pt_blas_set_threads(int n);
int pt_blas_threads(void);

/* Which kernel runs fp32 products in this process: "auto" (the default:
 * "openblas" where the kernel OpenBLAS runs uses the widest vectors this
 * CPU has, otherwise pipetrain's blocked product for them, "avx512" then
 * "avx2"; so an OpenBLAS built for an older CPU or OPENBLAS_CORETYPE=Haswell
 * on an AVX-512 CPU cannot halve the speed), "avx512",
 * "avx2" (each PT_EUNSUPPORTED, naming what is missing, where the CPU lacks
 * it), "generic" (plain C, any CPU) or "openblas" (cblas_sgemm, whose
 * kernel OpenBLAS picks). Every kernel is checked against a sum in double
 * on first use; one that fails is never selected (auto takes the next and
 * says so on stderr; by name: PT_EUNSUPPORTED). */
int pt_fp32_set_kernel(const char *name);
/* The fp32 product kernel now: "gemm-avx512", "gemm-avx2", "gemm-generic"
 * or "openblas". */
const char *pt_fp32_kernel(void);

/* The arithmetic a model trains and runs in (docs/bf16.md).
 * fp32: everything in float.
 * bf16: mixed precision. Products take bf16 operands and sum in float;
 * activations (what blocks keep for the backward, what crosses between
 * blocks and between pipeline stages, gradients included) are stored as
 * bf16; parameters keep a float master copy that the optimizer updates,
 * and a bf16 copy the products read, refreshed from it; LayerNorm, softmax,
 * the loss, gradients and the optimizer stay float. */
typedef enum { PT_PRECISION_FP32 = 0, PT_PRECISION_BF16 = 1 } pt_precision;

/* "fp32" or "bf16" (NULL for another value) */
const char *pt_precision_name(pt_precision p);
/* The precision named s; PT_EINVAL names the value when it is neither. */
int pt_precision_parse(const char *s, pt_precision *out);
/* Which product kernel bf16 runs on in this process: "auto" (the default:
 * AMX tiles where the CPU has them and Linux allows them, otherwise the
 * portable path; AVX512_BF16's kernel only by name, since on the CPU it
 * was measured on it was slower than sgemm), "amx", "avx512bf16"
 * (each PT_EUNSUPPORTED, naming what is missing, where it cannot run) or
 * "portable" (operands rounded to bf16, multiplied by the fp32 product). Every kernel
 * stores the same values up to the order of the float sums inside a
 * product (docs/bf16.md). */
int pt_bf16_set_kernel(const char *name);
/* The product kernel bf16 runs on now: "amx", "avx512bf16" or "portable". */
const char *pt_bf16_kernel(void);

/* ---- Models ------------------------------------------------------------ */

typedef struct pt_model pt_model;

/* gpt and mlp are the two built-in families; spec is any list of layers
 * written in the spec grammar (docs/models.md), e.g.
 * "linear 1024 2048; relu; linear 2048 1024; mse". */
typedef enum { PT_MODEL_GPT = 0, PT_MODEL_MLP = 1, PT_MODEL_SPEC = 2 } pt_model_kind;

#define PT_MLP_MAX_WIDTHS   16
#define PT_SPEC_MAX_TEXT    4096 /* bytes of a spec, its NUL included */
#define PT_SPEC_MAX_TYPES   8    /* user-defined layer types one config may name */
#define PT_LAYER_MAX_PARAMS 8    /* parameters of one user-defined layer */

/* ---- User-defined layers ---------------------------------------------- */

/* What a user-defined layer's callbacks see for one micro-batch of `batch`
 * samples: its input (batch x in_floats), output (batch x out_floats), the
 * saved area (batch x saved_floats) it keeps from forward to backward, the
 * gradient of its output and of its input (din is NULL for the model's
 * first layer), and its parameters and their gradients in declaration
 * order. Every tensor is float: user-defined layers run under fp32 only. */
typedef struct {
    int batch;
    const float *in;
    float *out;
    float *saved;
    const float *dout;
    float *din;
    float *const *params;
    float *const *grads;
    void *user;
} pt_layer_call;

/* A parameter of a user-defined layer: named "<layer>.<name>" in the model
 * (as nn.Sequential names its modules' parameters), initialised to
 * `value` everywhere, or, when std > 0, from a normal of that deviation
 * drawn from the parameter's own seeded stream. */
typedef struct {
    const char *name;
    int ndim;
    int shape[4];
    float std;
    float value;
} pt_layer_param;

/* A layer pipetrain has never seen: registered in a config under `name`,
 * named in its spec like a built-in layer (without arguments), and cut
 * into stages like any other. forward fills out (and saved); backward_input
 * fills din from dout (it may read in, out and saved); backward_weight adds
 * (+=) the parameters' gradients. The pipeline runs them on its workers'
 * threads: they must not share writable state. Widths are per sample;
 * in_floats 0 takes the width entering it, out_floats 0 keeps it. The costs
 * are per-sample FLOPs: the partitioner and simulator weigh them. The struct
 * must outlive every model built from it. */
typedef struct {
    const char *name;
    int in_floats, out_floats;
    int saved_floats;
    int n_params;
    pt_layer_param params[PT_LAYER_MAX_PARAMS];
    double forward_flops, backward_input_flops, backward_weight_flops;
    void (*forward)(const pt_layer_call *c);
    void (*backward_input)(const pt_layer_call *c);
    void (*backward_weight)(const pt_layer_call *c);
    void *user;
} pt_layer_type;

/* The MLP's activation, as GPT2Config's activation_function names it. */
typedef enum {
    PT_ACT_GELU_NEW = 0, /* "gelu_new": GELU's tanh form, GPT-2's */
    PT_ACT_GELU,         /* "gelu": exact, 0.5 x (1 + erf(x / sqrt 2)) */
    PT_ACT_RELU,         /* "relu" */
    PT_ACT_SILU          /* "silu" (also "swish"): x sigmoid(x) */
} pt_activation;

typedef struct {
    pt_model_kind kind;
    /* gpt: GPT-2's architecture */
    int n_layer; /* transformer blocks (default 4) */
    int n_head;  /* attention heads (default 4) */
    int n_embd;  /* channels; a multiple of n_head (default 128) */
    int seq_len; /* T, tokens per sample (default 128) */
    int vocab;   /* V (default 256: bytes) */
    /* gpt: the GPT2Config fields that change the arithmetic, under Hugging
     * Face's names; pt_model_config_gpt() gives GPT-2's values */
    int n_inner;                         /* MLP width (0: 4 n_embd) */
    int n_positions;                     /* rows of wpe (0: seq_len); >= seq_len */
    pt_activation activation;            /* activation_function (gelu_new) */
    float layer_norm_epsilon;            /* (1e-5) */
    int scale_attn_weights;              /* scores / sqrt(head size) (1) */
    int scale_attn_by_inverse_layer_idx; /* layer l's scores also / (l + 1) (0) */
    int tie_word_embeddings;             /* lm_head.weight is wte (1); 0: its own */
    /* mlp: widths[0] inputs, widths[n_widths-1] classes, ReLU between */
    int n_widths;
    int widths[PT_MLP_MAX_WIDTHS];
    /* spec: the layer list (docs/models.md), and the user-defined layer
     * types it may name (pt_model_config_add_layer_type) */
    char spec[PT_SPEC_MAX_TEXT];
    int n_layer_types;
    const pt_layer_type *layer_types[PT_SPEC_MAX_TYPES];
    uint64_t seed;          /* initialisation (default 1) */
    pt_precision precision; /* arithmetic (default fp32) */
    /* a pipeline's stages, on pipetrain's own fp32 products and bf16's AMX
     * products, keep each weight matrix packed for them (its panels or
     * tiles as read forward and backward: twice its bytes in the type the
     * products read), packed again only after the weights change; 1: pack
     * it for every product and keep nothing (default 0).
     * A model made by pt_model_create keeps none. */
    int repack_weights;
} pt_model_config;

pt_model_config pt_model_config_gpt(void);
pt_model_config pt_model_config_mlp(int n_widths, const int *widths);
/* A spec model from its text (seed 1, fp32); PT_EINVAL when the text is too
 * long. The layers are checked when a model is created or described:
 * an unknown layer, widths that do not chain or a loss that is not last
 * are refused with the layer's name and position. */
int pt_model_config_spec(const char *text, pt_model_config *out);
/* The same from text given as a file's path (read whole) or as the text
 * itself: a value naming a readable file is that file. */
int pt_model_config_spec_load(const char *path_or_text, pt_model_config *out);
/* Lets c's spec name a user-defined layer type (kept by pointer). */
int pt_model_config_add_layer_type(pt_model_config *c, const pt_layer_type *type);
/* A gpt's derived sizes: its MLP width (n_inner, or 4 n_embd when 0) and
 * the rows of its position table (n_positions, or seq_len when 0). */
int pt_gpt_inner(const pt_model_config *c);
int pt_gpt_positions(const pt_model_config *c);
/* The shape of a published GPT by name (gpt2 ... gpt2-xl, gpt3-175b, the
 * models of Megatron-LM's weak-scaling table megatron-1.7b ... megatron-1t),
 * for planning; PT_EINVAL lists the names for another. */
int pt_model_config_named(const char *name, pt_model_config *out);
const char *const *pt_model_config_names(void); /* NULL-terminated */

int pt_model_create(const pt_model_config *cfg, pt_model **out);
/* A model that holds only some of its blocks, as a pipeline stage does:
 * hold[b] != 0 for each block whose parameters and gradients it allocates
 * (NULL: all). The other blocks keep their description (kind, cost,
 * parameter names and shapes) with data and grad NULL, and cannot run.
 * Held parameters equal the same ones of a whole model, bit for bit. */
int pt_model_create_part(const pt_model_config *cfg, const unsigned char *hold, pt_model **out);
/* The description alone: every block, no tensors (planning, partitioning). */
int pt_model_describe(const pt_model_config *cfg, pt_model **out);
void pt_model_destroy(pt_model *m);
int pt_model_holds_block(const pt_model *m, int block);
/* Bytes of the held parameters (the gradients take as many again). */
size_t pt_model_held_bytes(const pt_model *m);
const pt_model_config *pt_model_get_config(const pt_model *m);

/* Per-sample cost of one block: what the partitioner and simulator weigh. */
typedef struct {
    double forward_flops;
    double backward_input_flops;
    double backward_weight_flops;
    size_t param_bytes;
    size_t activation_bytes; /* kept from forward to the weight pass, per sample */
    size_t grad_bytes;       /* kept from backward to the weight pass, per sample: the
                                gradients of the output and inside the block */
} pt_block_cost;

int pt_model_n_blocks(const pt_model *m);
const char *pt_model_block_kind(const pt_model *m, int block);

/* Layers are what the user wrote, and what a balance counts: a spec's
 * layers (a parenthesised group counts as one; a loss joins the layer
 * before it), or a gpt's and mlp's blocks, one each. A layer is one or
 * more consecutive blocks. */
int pt_model_n_layers(const pt_model *m);
int pt_model_layer_blocks(const pt_model *m, int layer, int *first, int *last);
/* A balance in layers per chunk turned into blocks per chunk; PT_EINVAL
 * (naming the layers) when it does not sum to the layer count. */
int pt_model_balance_blocks(const pt_model *m, const int *layers, int n, int *blocks);
/* The inverse: blocks per chunk as layers per chunk (what --balance takes);
 * 0 when a chunk boundary falls inside a layer. */
int pt_model_balance_layers(const pt_model *m, const int *blocks, int n, int *layers);

/* What a model reads and what its loss compares against, per sample. */
typedef struct {
    int tokens;  /* token ids it reads (0: it reads floats) */
    int vocab;   /* token ids lie in 0..vocab-1 */
    int inputs;  /* floats it reads (0: it reads tokens) */
    int labels;  /* class labels its loss reads (0: none) */
    int classes; /* labels lie in 0..classes-1 (token models: -1 skips a position) */
    int values;  /* float targets its loss reads (regression; 0: none) */
} pt_model_io;

pt_model_io pt_model_get_io(const pt_model *m);
pt_block_cost pt_model_block_cost(const pt_model *m, int block);

/* A parameter: a named tensor owned by one block. Names and layouts follow
 * Hugging Face's GPT2LMHeadModel for gpt (weights stored (in, out) as its
 * Conv1D does). A parameter used by two blocks (the LM head uses the token
 * embedding) is held as two copies; the second names the first in tied_to,
 * and pt_model_sum_tied_grads() makes their gradients equal when one model
 * holds both (a pipeline sums them between its stages). data and grad are
 * NULL for a parameter of a block the model does not hold. */
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
/* Under bf16 the products read a bf16 copy of the parameters: after writing
 * a parameter's data directly, call this so the copy follows (the
 * optimizer, the pipeline and checkpoint loads do it themselves). */
void pt_model_params_changed(pt_model *m);
/* Bytes one stored activation takes: 4 under fp32, 2 under bf16. */
size_t pt_model_activation_size(const pt_model *m);

/* One micro-batch of samples, as pt_model_get_io says: tokens (batch x
 * io.tokens) or inputs (batch x io.inputs), and targets (batch x
 * io.labels class labels) or target_values (batch x io.values floats).
 * gpt reads tokens and targets, (batch, seq_len) each; mlp reads inputs
 * (batch, widths[0]) and targets (batch). */
typedef struct {
    int batch;
    const int *tokens;
    const float *inputs;
    const int *targets;
    const float *target_values; /* regression targets (batch, outputs): the mse head */
} pt_microbatch;

/* Everything blocks first..last keep for one micro-batch between its forward
 * and its backward: each block's output, saved activations and output
 * gradient. Sized once for a batch size; reusable across micro-batches. */
typedef struct pt_activations pt_activations;

int pt_activations_create(const pt_model *m, int first, int last, int batch, pt_activations **out);
/* What pt_activations_create would allocate for blocks first..last and a
 * batch, without allocating (the planner's figure). */
size_t pt_model_activation_bytes(const pt_model *m, int first, int last, int batch);
/* Bytes of the parameters of blocks first..last as a stage lays them out
 * (each tensor aligned); the gradients take as many. */
size_t pt_model_param_bytes(const pt_model *m, int first, int last);
void pt_activations_destroy(pt_activations *a);
size_t pt_activations_bytes(const pt_activations *a);
/* The output of the range's last block (batch x its width), after forward:
 * activations of pt_model_activation_size() bytes each, except the loss
 * heads' probabilities, which are float under every precision. */
const void *pt_activations_output(const pt_activations *a);
size_t pt_activations_output_floats(const pt_activations *a);
size_t pt_activations_output_bytes(const pt_activations *a);

/* Floats per sample entering block `block` (0 for the token embedding). */
int pt_model_block_input_floats(const pt_model *m, int block);
/* Floats per sample leaving block `block`. */
int pt_model_block_output_floats(const pt_model *m, int block);

/* Runs blocks first..last forward on a micro-batch. `in` is the range's input
 * (NULL when first is block 0: the micro-batch is the input), activations of
 * pt_model_activation_size() bytes each, as are dout and din below. When the range
 * ends with the model's last block, *loss receives the micro-batch's mean
 * loss (loss may be NULL otherwise). */
int pt_model_forward(pt_model *m, int first, int last, const pt_microbatch *mb, const void *in,
                     pt_activations *acts, float *loss);
/* Gradient with respect to the range's input, into din (NULL when first is
 * block 0). dout is the gradient of the range's output (NULL when the range
 * ends with the loss, whose gradient is loss_scale). Weight gradients are not
 * touched; pt_model_backward_weight() adds them afterwards. */
int pt_model_backward_input(pt_model *m, int first, int last, const pt_microbatch *mb,
                            const void *in, pt_activations *acts, const void *dout, void *din,
                            float loss_scale);
/* Adds the weight gradients of blocks first..last for a micro-batch whose
 * backward_input has run. */
int pt_model_backward_weight(pt_model *m, int first, int last, const pt_microbatch *mb,
                             const void *in, pt_activations *acts);
/* Forward of the whole model, then backward (input then weight) with the
 * gradient of loss_scale x loss: one micro-batch on one worker. */
int pt_model_step_microbatch(pt_model *m, const pt_microbatch *mb, float loss_scale,
                             pt_activations *acts, float *loss);

/* ---- Optimizers ------------------------------------------------------- */

typedef enum { PT_OPTIM_ADAMW = 0, PT_OPTIM_SGD = 1 } pt_optim_kind;

typedef struct {
    pt_optim_kind kind; /* default AdamW */
    float lr;           /* peak learning rate (default 3e-4) */
    float min_lr;       /* cosine decay ends here (default lr / 10) */
    long warmup_steps;  /* linear warm-up from lr / warmup (default 0) */
    long decay_steps;   /* cosine decay over this many steps (0: constant) */
    float beta1, beta2; /* AdamW moments (0.9, 0.95) */
    float eps;          /* AdamW (1e-8) */
    float weight_decay; /* decoupled, on 2-D weights only (0.1 AdamW, 0 SGD) */
    float momentum;     /* SGD (0.9) */
    float grad_clip;    /* max global gradient norm; 0 disables (1.0) */
} pt_optim_config;

pt_optim_config pt_optim_config_default(pt_optim_kind kind);

/* An optimizer over one model's held parameters: its moments laid out as
 * the parameters. A pipeline makes one per stage itself; this is for a
 * model trained on one worker (pt_model_step_microbatch). */
typedef struct pt_optimizer pt_optimizer;

int pt_optimizer_create(const pt_model *m, const pt_optim_config *cfg, pt_optimizer **out);
void pt_optimizer_destroy(pt_optimizer *o);
const pt_optim_config *pt_optimizer_config(const pt_optimizer *o);
/* The learning rate of step `step` (0-based) under the config's schedule:
 * linear warm-up, then cosine decay to min_lr. */
float pt_optimizer_lr(const pt_optim_config *cfg, long step);
/* Sum of squared gradients of blocks first..last, tied copies left out. */
double pt_optimizer_grad_sq(const pt_model *m, int first, int last);
/* The factor that brings a gradient of global norm `norm` within the
 * config's clip (1 when clipping is off or not needed). */
float pt_optimizer_clip_factor(const pt_optim_config *cfg, double norm);
/* Updates the parameters of blocks first..last from their gradients times
 * clip, at learning rate lr. `step` counts the updates made before this one
 * (AdamW's bias correction uses step + 1). */
void pt_optimizer_step(pt_optimizer *o, pt_model *m, int first, int last, long step, float lr,
                       float clip);
/* One optimizer step of a whole model on one worker: sums tied gradients,
 * clips by the global norm, steps at the schedule's rate for `step`. */
void pt_optimizer_step_model(pt_optimizer *o, pt_model *m, long step);

/* ---- Checkpoints ------------------------------------------------------ */

/* A model's weights (and, with opt, its optimizer moments and the step) to
 * path: a checkpoint set (a folder), or, for a path ending in
 * ".safetensors", one file of the weights alone (opt must be NULL).
 * Written to a temporary name and renamed. The model holds every block. */
int pt_model_save(const pt_model *m, pt_optimizer *opt, long step, const char *path);
/* Loads into m (whole or a part) the tensors it holds from a file or set
 * of the same config; with opt, also the moments (a checkpoint without them
 * is refused) and *step (may be NULL). */
int pt_model_load(pt_model *m, pt_optimizer *opt, long *step, const char *path);
/* The model config a checkpoint (file or folder) records. */
int pt_model_read_config(const char *path, pt_model_config *cfg);

/* ---- Memory ----------------------------------------------------------- */

/* Bytes one pipeline worker holds, by kind. */
typedef struct {
    size_t params;      /* its chunks' parameters (a tied copy counts where it is held) */
    size_t grads;       /* their gradients */
    size_t moments;     /* optimizer state: SGD's momentum, AdamW's two moments */
    size_t stash;       /* PipeDream's stashed weight versions */
    size_t activations; /* activation records and boundary buffers of micro-batches in flight */
    size_t comm;        /* communication buffers (the replicas' gradient sum) */
} pt_memory_use;

size_t pt_memory_total(const pt_memory_use *u);
/* This process's peak resident memory so far, in bytes. */
size_t pt_process_peak_rss(void);

/* ---- Schedules --------------------------------------------------------- */

/* A schedule is, for each worker, the ordered list of actions it runs: F
 * (forward of a chunk for a micro-batch), B (gradient w.r.t. the chunk's
 * input), W (gradient w.r.t. the chunk's weights) or BW (B and W fused). The
 * model's blocks are cut into chunks (virtual stages) in model order; a
 * worker holds one chunk, or several for interleaved, loopedbfs and zbv.
 * Building, checking, simulating and drawing a schedule needs no tensors.
 * docs/schedules.md describes the families and the text format. */
typedef struct pt_schedule pt_schedule;

/* Costs for the simulator, in any time unit. A fused BW costs b + w. */
typedef struct {
    double f, b, w;    /* time of one chunk's F, B, W (defaults 1, 1, 1) */
    double latency;    /* per transfer between two workers (default 0) */
    double send;       /* worker time one transfer takes its sender: 0 when sends
                          overlap compute, the transfer's time on a runtime whose
                          sends block (default 0); the data leaves when it ends */
    double collective; /* programs: one REDUCE, TIED or NORM (default 0) */
    int n_chunk_costs; /* 0, or pt_schedule_chunks(): then chunk_f[c],
                          chunk_b[c], chunk_w[c] replace f, b, w */
    const double *chunk_f, *chunk_b, *chunk_w;
    /* The link between two workers: a transfer of N bytes is on the wire for
     * N / bandwidth, one after another per direction of each pair of workers
     * (a transfer waits for the one before it on its link), and arrives
     * `latency` after it left the wire. Overlapped sends cost their worker
     * nothing; the wire time is what a receiver waits for. */
    double bandwidth;             /* bytes per time unit; 0: no limit, transfers take
                                     `latency` alone (default 0) */
    double transfer_bytes;        /* bytes of one activation or gradient between two
                                     chunks (default 0) */
    const double *boundary_bytes; /* NULL, or n_chunk_costs entries: [c] the bytes
                                     of a transfer between chunks c-1 and c,
                                     replacing transfer_bytes */
    double tensor_sum_bytes;      /* programs: bytes one TENSOR_SUM moves per member of
                                     its tensor group; it takes them / bandwidth
                                     (default 0) */
} pt_schedule_costs;

pt_schedule_costs pt_schedule_costs_default(void);

typedef struct {
    const char *name;   /* gpipe 1f1b interleaved loopedbfs zbh1 zbh2 zbv zb1p
                           zb2p pipedream 1f1b-rr (default "1f1b") */
    int stages;         /* P, pipeline stages, >= 1 (default 4) */
    int microbatches;   /* M, micro-batches per mini-batch, >= 1 (default 8) */
    int virtual_stages; /* v, chunks per worker: interleaved and loopedbfs take
                           any v >= 1, zbv only 2, the others only 1; 0 = the
                           schedule's own (2 for interleaved, loopedbfs, zbv;
                           1 otherwise) (default 0) */
    int replicas;       /* data-parallel copies of every stage, for 1f1b-rr and
                           pipedream (PipeDream's 1F1B-RR; workers = stages x
                           replicas); 0 = the schedule's own (2 for 1f1b-rr,
                           1 otherwise) (default 0) */
    /* zb1p, zb2p: the zero-bubble paper's automatic schedules, searched for
     * these times of one stage's F, B, W (per-chunk costs allowed) and of one
     * transfer (latency) under a limit on the activations a worker holds;
     * zbh1, zbh2, zbv: their greedy rules played on these times, the order
     * that finishes first kept (NULL: F = B = W = 1, no latency)
     * (default NULL) */
    const pt_schedule_costs *costs;
    double memory_limit; /* in micro-batches' activations; 0 = the schedule's own:
                            P for zb1p (1f1b's), 2P for zb2p (default 0) */
    double w_memory;     /* share of a micro-batch's activations kept from its B to
                            its W, in [0, 1] (default 0.5) */
    int defer_w;         /* schedules with fused, synchronous backwards (gpipe, 1f1b,
                            interleaved, loopedbfs, 1f1b-rr): a worker's backward that
                            is followed by a forward waiting for nothing from another
                            worker runs as B, that forward, then W, so the forward's
                            activation leaves a weight pass sooner (hides a slow link)
                            for one more micro-batch's activations held (default 0) */
} pt_schedule_config;

pt_schedule_config pt_schedule_config_default(void);
/* Generates a schedule; PT_EINVAL names the parameter the schedule cannot
 * take (M < P for interleaved, v != 2 for zbv, P = 0, a memory limit zb1p
 * cannot keep, ...). */
int pt_schedule_create(const pt_schedule_config *cfg, pt_schedule **out);
/* The same with replicas left to the schedule. */
int pt_schedule_generate(const char *name, int stages, int microbatches, int virtual_stages,
                         pt_schedule **out);
void pt_schedule_destroy(pt_schedule *s);
/* The generators' names, NULL-terminated. */
const char *const *pt_schedule_names(void);

/* The text format: reads a schedule (PT_EFORMAT with the line on a fault). */
int pt_schedule_parse(const char *text, pt_schedule **out);
int pt_schedule_load(const char *path, pt_schedule **out);
/* Writes a schedule as text into *text (malloc'd; the caller frees it). */
int pt_schedule_format(const pt_schedule *s, char **text);

const char *pt_schedule_name(const pt_schedule *s);
int pt_schedule_workers(const pt_schedule *s);        /* stages x replicas */
int pt_schedule_stages(const pt_schedule *s);         /* P */
int pt_schedule_chunks(const pt_schedule *s);         /* virtual stages in all */
int pt_schedule_virtual_stages(const pt_schedule *s); /* chunks per worker */
int pt_schedule_microbatches(const pt_schedule *s);   /* M */
int pt_schedule_replicas(const pt_schedule *s);

/* Proves the schedule complete and deadlock-free: every F and backward of
 * every chunk and micro-batch exactly once on the worker that holds it,
 * dependencies in order, no cycle when played with blocking receives.
 * PT_EINVAL for a missing, repeated or misplaced action or one ordered before
 * what it needs on its own worker, PT_EDEADLOCK for a cycle across workers;
 * the message names the worker, the action and what it waits for. */
int pt_schedule_validate(const pt_schedule *s);

/* What playing a schedule against a cost model gives. Arrays have one entry
 * per worker; start[w][i] and end[w][i] time worker w's i-th action. */
typedef struct {
    int workers;
    double makespan;
    double bubble_fraction; /* sum of idle / (workers x makespan) */
    double span;            /* the longest time any worker is at work: from the start
                               of its first action to the end of its last (Qi et al.'s
                               "cost"; their bubble rate is 1 - busy / span when every
                               stage costs the same) */
    double *busy, *idle;
    int *peak_activations; /* most (chunk, micro-batch) pairs whose F is done
                              and whose last backward piece is not */
    int *n_actions;
    double **start, **end;
} pt_schedule_sim;

/* Fails with PT_EDEADLOCK on a schedule that cannot complete. */
int pt_schedule_simulate(const pt_schedule *s, const pt_schedule_costs *costs,
                         pt_schedule_sim **out);
void pt_schedule_sim_destroy(pt_schedule_sim *sim);

/* What each worker of schedule s will hold, by kind (per_worker has
 * pt_schedule_workers(s) entries), for a model (its description will do),
 * a partition (balance: blocks per chunk, pt_schedule_chunks(s) entries),
 * micro-batches of micro_batch_size samples, with or without activation
 * checkpointing, and 0 (no optimizer), 1 (SGD) or 2 (AdamW) moments per
 * parameter. The pipeline allocates what this predicts. */
int pt_schedule_predict_memory(const pt_schedule *s, const pt_model *desc, const int *balance,
                               int micro_batch_size, int checkpoint_activations, int moments,
                               pt_memory_use *per_worker);

/* Pictures of a simulated schedule, each a malloc'd string the caller frees:
 * an ASCII timeline (one row per worker, ".." for idle time), an SVG Gantt
 * chart, and Chrome/Perfetto trace-event JSON (one track per worker). */
int pt_schedule_draw_ascii(const pt_schedule *s, const pt_schedule_sim *sim, char **text);
int pt_schedule_draw_svg(const pt_schedule *s, const pt_schedule_sim *sim, char **text);
int pt_schedule_draw_trace(const pt_schedule *s, const pt_schedule_sim *sim, char **text);

/* A program is a schedule lowered to everything each worker does in one
 * step: its compute actions, the sends and receives of activations and
 * gradients between workers, the sums of a chunk's gradient over its
 * replicas (REDUCE) and of tied parameters between their holders (TIED), the
 * global gradient norm (NORM) and the optimizer step (STEP). It has a text
 * form (the schedule format with more tokens, docs/schedules.md) that users
 * may write by hand. */
typedef struct pt_program pt_program;

typedef struct {
    int forward_only; /* evaluation: forwards and their activations only, no
                         collectives (default 0) */
    int step;         /* synchronous training: end with NORM and STEP (default
                         1); 0 leaves the summed gradients to the caller.
                         Asynchronous schedules step after every update. */
    const int *tied;  /* n_tied pairs of chunks sharing a parameter (GPT: the
                         first chunk's token embedding and the last chunk's
                         LM head): tied[2i] and tied[2i+1], which may be one
                         chunk holding both (default none) */
    int n_tied;
    int split_sent_backward;  /* a fused BW whose input gradient goes to another
                                 worker becomes B, the send, W: the gradient
                                 leaves before the weight gradient is computed
                                 (synchronous schedules; default 0) */
    int zero;                 /* sharded optimizer state (ZeRO stage 1 or 2; default
                                 0): synchronous programs with replicas end with a
                                 GATHER of every chunk the worker holds after STEP,
                                 the parameters each replica updated brought to
                                 every other (docs/layouts.md); at 2 with
                                 weight_pieces, every weight pass is followed by
                                 its pieces' SCATTERs instead of one REDUCE */
    const int *weight_pieces; /* zero 2: NULL, or [c] the pieces chunk c's weight
                                 pass runs in (one per block with parameters);
                                 a SCATTER after each */
    const int *tensor_pieces; /* tensor parallelism: NULL, or 2 x the chunks:
                                 [c] the pieces chunk c's forward runs in,
                                 [chunks + c] its backward's; the tensor group's
                                 TENSOR_SUM after every piece but the last; a
                                 BW of several pieces becomes B, the sums, W
                                 (synchronous schedules; default NULL) */
    int sequence_sum;         /* sequence parallelism: a SEQUENCE_SUM before NORM,
                                 the gradients of the parameters each tensor slice
                                 saw only its positions of (the LayerNorms')
                                 summed over the group (synchronous training;
                                 default 0) */
} pt_lower_options;

pt_lower_options pt_lower_options_default(void);
/* Lowers a valid schedule into a program (opt NULL: the defaults).
 * PT_EINVAL for a schedule the validator refuses, a tied pair out of range,
 * or asynchronous replicas whose updates cannot pair up. */
int pt_program_lower(const pt_schedule *s, const pt_lower_options *opt, pt_program **out);
void pt_program_destroy(pt_program *p);
/* The text form, malloc'd into *text (the caller frees it). */
int pt_program_format(const pt_program *p, char **text);
/* Reads the text form (PT_EFORMAT with the line on a fault). */
int pt_program_parse(const char *text, pt_program **out);
/* Proves a program complete and deadlock-free: every compute action once,
 * every send paired with one receive (same peer, chunk, micro-batch and
 * direction), each action after what it waits for on its worker, every
 * collective reached by every member of its group in the same order, and no
 * cycle when played with blocking receives and blocking collectives.
 * PT_EINVAL or PT_EDEADLOCK, the message naming the worker, the action and
 * what it waits for. */
int pt_program_validate(const pt_program *p);
/* Plays a valid program against costs as pt_schedule_simulate() plays a
 * schedule: a transfer arrives `latency` after its send, a collective starts
 * when its last member reaches it and lasts `collective`; start and end time
 * each program action. */
int pt_program_simulate(const pt_program *p, const pt_schedule_costs *costs, pt_schedule_sim **out);
/* Plays a valid schedule as a pipeline runs it: lowered with
 * split_sent_backward (a fused backward whose input gradient goes to another
 * worker runs as B, the send, then W, as pt_pipeline_create() lowers it)
 * and played by pt_program_simulate() (its collectives cost
 * costs->collective, 0 by default); start and end time each program action.
 * Where the schedule does not lower (asynchronous replicas whose updates
 * cannot pair up), pt_schedule_simulate()'s play. The planner ranks
 * schedules by it. */
int pt_schedule_simulate_run(const pt_schedule *s, const pt_schedule_costs *costs,
                             pt_schedule_sim **out);
/* The ASCII timeline of a simulated program: compute actions as a
 * schedule's picture draws them, collectives by their tokens where they
 * take time (sends, receives and steps take none). */
int pt_program_draw_ascii(const pt_program *p, const pt_schedule_sim *sim, char **text);

/* ---- Planning a run on a cluster --------------------------------------- */

/* Before a cluster is rented: which layout of pipeline (P), tensor (T) and
 * data (D) parallelism, micro-batch size, schedule, recomputation and ZeRO
 * stage trains a model fastest on it, and does it fit? The planner models
 * every pass of every block from the model's description and the device's
 * (its FLOP/s, memory and bandwidth), plays the schedule through the
 * simulator and adds the collectives the layout implies. docs/planning.md
 * gives the formulas and how they were checked against published runs. */

/* The number formats a planned device computes in (the runtime trains in
 * pt_precision: fp32 or bf16). */
typedef enum {
    PT_PLAN_FP32 = 0, /* 32-bit storage and products */
    PT_PLAN_TF32,     /* 32-bit storage, TF32 products */
    PT_PLAN_FP16,     /* 16-bit activations and products, fp32 master weights and moments */
    PT_PLAN_BF16,     /* the same in bfloat16 */
    PT_PLAN_FP8,      /* fp8 products, 16-bit activations */
    PT_PLAN_N_PRECISIONS
} pt_plan_precision;

/* "fp32" "tf32" "fp16" "bf16" "fp8"; -1 for another name */
int pt_plan_precision_parse(const char *name);
const char *pt_plan_precision_name(pt_plan_precision p);

/* A device: what it computes and holds. A product runs at the roofline of
 * its shape: max(FLOPs / (peak x gemm_efficiency), bytes it moves /
 * (bandwidth x memory_efficiency)); elementwise work at the second term. */
typedef struct {
    char name[32];
    double peak_flops[PT_PLAN_N_PRECISIONS]; /* dense products, FLOP/s; 0: not supported */
    double memory_bytes;                     /* device memory */
    double memory_bandwidth;                 /* bytes per second */
    double gemm_efficiency;                  /* share of peak a compute-bound product reaches */
    double memory_efficiency;                /* share of the bandwidth memory-bound work reaches */
} pt_device;

/* The built-in devices, NULL-terminated: a100-40gb a100-80gb h100 h200 cpu. */
const char *const *pt_device_names(void);
/* A built-in device; "cpu" is this machine, measured (sgemm rate and copy
 * bandwidth) the first time it is asked for. PT_EINVAL for another name. */
int pt_device_builtin(const char *name, pt_device *out);
/* Seconds of `batch` products (m x k)(k x n) in precision p, by the roofline. */
double pt_device_gemm_seconds(const pt_device *d, pt_plan_precision p, double m, double n, double k,
                              double batch);
/* Seconds to move `bytes` through device memory (elementwise work). */
double pt_device_memory_seconds(const pt_device *d, double bytes);

/* A link: a transfer of n bytes takes latency + n / bandwidth. */
typedef struct {
    double latency;   /* seconds */
    double bandwidth; /* bytes per second, per device, each direction */
} pt_interconnect;

/* A cluster: nodes of identical devices, a fast link inside a node and a
 * network between nodes (each device's share of its node's network). */
typedef struct {
    char name[64];
    pt_device device;
    int nodes, devices_per_node;
    pt_interconnect intra_node, inter_node;
} pt_cluster;

/* Reads a cluster description (JSON, docs/planning.md); PT_EFORMAT names the
 * field that is missing or wrong. */
int pt_cluster_load(const char *path, pt_cluster *out);
/* Seconds of a ring all-reduce of `bytes` over n devices (n consecutive
 * groups of `stride` devices apart; inside a node while they fit in one). */
double pt_cluster_allreduce_seconds(const pt_cluster *c, double bytes, int n, int stride);

/* How a run is laid out on the cluster. */
typedef struct {
    int pipeline, tensor, data; /* P, T, D: P x T x D devices; devices of a tensor group
                                   sit in one node when they fit, then data replicas,
                                   then pipeline stages (Megatron-LM's order) */
    int virtual_stages;         /* chunks per pipeline worker (interleaved; zbv 2) */
    int micro_batch_size;       /* samples per micro-batch */
    int microbatches;           /* M per replica per iteration: batch = M x mbs x D */
    const char *schedule;       /* 1f1b interleaved gpipe zbh1 zbh2 zbv zb1p zb2p */
    int recompute;              /* 1: keep each layer's input only; recompute it in B */
    int zero;                   /* ZeRO stage over D: 0; 1 shards the optimizer state, 2
                                   also the gradients, 3 also the weights */
    pt_plan_precision precision;
} pt_layout;

/* What the runtime does that the model alone does not say. */
typedef struct {
    int blocking_sends;    /* a send holds its sender for the transfer (Megatron-LM's p2p) */
    int post_validation;   /* the optimizer step is not synchronized across workers, but
                              validated afterwards (Qi et al. section 4): an iteration
                              lasts the longest worker's span, not the makespan */
    int overlap_dp_reduce; /* the data-parallel gradient reduce overlaps the last
                              micro-batch's backward (PyTorch DDP) */
} pt_runtime;

/* Sends that overlap compute, a synchronized optimizer step, the
 * data-parallel reduce overlapped. */
pt_runtime pt_runtime_default(void);

/* What a layout is predicted to do. */
typedef struct {
    double iteration_s;      /* one optimizer step */
    double tokens_per_s;     /* for the whole cluster */
    double flops_per_device; /* executed FLOP/s per device, recomputation included */
    double mfu;              /* model FLOPs (no recomputation) / (time x devices x peak) */
    double bubble;           /* the pipeline's idle share of its time */
    double pipeline_s;       /* the schedule's part of an iteration */
    double dp_comm_s;        /* the exposed data-parallel (and tied-embedding) reduce */
    double optimizer_s;      /* the optimizer step */
    double tp_share;         /* share of a pass spent in tensor-parallel all-reduces */
    pt_memory_use memory;    /* the fullest device, by kind */
    size_t memory_bytes;     /* its total */
    int fits;                /* memory_bytes <= the device's memory */
} pt_prediction;

/* Predicts one layout of a gpt (its description: layers, heads, embd, seq,
 * vocab, n_inner) on the cluster. PT_EINVAL names what the layout cannot do
 * (P x T x D above the devices, T not dividing the heads, P x v above the
 * layers, a schedule that cannot take P and M, ...). */
int pt_plan_predict(const pt_cluster *c, const pt_model_config *m, const pt_layout *l,
                    const pt_runtime *rt, pt_prediction *out);

typedef struct {
    int global_batch;            /* samples per iteration (required) */
    int devices;                 /* devices to use, P x T x D (0: the whole cluster) */
    int max_micro_batch_size;    /* (default 8) */
    int max_virtual_stages;      /* (default 8) */
    int include_zero;            /* also try ZeRO stages 1 to 3 (default 1) */
    int include_no_recompute;    /* also try without recomputation (default 1) */
    pt_plan_precision precision; /* (default bf16) */
} pt_search_config;

pt_search_config pt_search_config_default(void);

typedef struct {
    pt_layout layout;
    pt_prediction prediction;
} pt_plan_candidate;

typedef struct {
    long layouts; /* layouts weighed (each ZeRO stage one) */
    long played;  /* schedules generated and played in full */
} pt_search_stats;

/* Every layout of the devices that fits their memory, ranked by predicted
 * iteration time (then memory); of layouts that differ in their ZeRO stage
 * alone, the better. The best `top` into best[] (*n_best of them); stats
 * may be NULL. PT_EINVAL when none fits (the message says how close the
 * nearest came). */
int pt_plan_search(const pt_cluster *c, const pt_model_config *m, const pt_search_config *cfg,
                   const pt_runtime *rt, pt_plan_candidate *best, int top, int *n_best,
                   pt_search_stats *stats);

/* ---- Pipelines ---------------------------------------------------------- */

/* A pipeline trains one model on P workers, each holding a contiguous range
 * of blocks (a chunk; several for interleaved and zbv). The schedule's action
 * lists alone drive the workers. docs/pipeline.md describes it.
 *
 * Every worker owns a stage: a model holding only its chunks' blocks
 * (parameters, gradients), the optimizer moments of those, its activations
 * and its communication buffers, and nothing of any other chunk; the
 * pipeline builds the stages itself from the model config. Two transports
 * carry everything the workers exchange. threads: every worker is a thread
 * of this process. MPI (the process was started by mpirun with more than one
 * rank): every rank runs one worker, worker index = rank. With replicas D,
 * stages x D workers run D data-parallel copies of every stage: worker s*D+k
 * is replica k of stage s, takes micro-batches m with m % D == k, and the
 * stage's gradients are summed across its replicas before the step.
 * docs/mpi.md describes the MPI side. */
typedef struct pt_pipeline pt_pipeline;

typedef enum {
    PT_PIPELINE_AUTO = 0, /* MPI when mpirun started more than one rank, else threads */
    PT_PIPELINE_THREADS,  /* this process alone, also under mpirun */
    PT_PIPELINE_MPI       /* one worker per rank of MPI_COMM_WORLD */
} pt_pipeline_transport;

typedef struct {
    int stages;                /* P, workers (default 1) */
    int virtual_stages;        /* chunks per worker; 0 = the schedule's own (default 0) */
    int microbatches;          /* M per train_step (default 1) */
    int micro_batch_size;      /* samples per micro-batch (default 1) */
    const char *schedule;      /* generator name (default "1f1b") */
    const char *schedule_file; /* a schedule in the text format; overrides schedule */
    int defer_w;               /* pt_schedule_config.defer_w for the generated schedule
                                  (not with schedule_file) (default 0) */
    const int *balance;        /* layers per chunk (pt_model_n_layers: a spec's layers,
                                  a gpt's or mlp's blocks), n_balance = chunks; NULL =
                                  profile the blocks and choose (default NULL) */
    int n_balance;
    size_t max_stage_memory;         /* bytes per chunk for the partitioner; 0 = no cap */
    int checkpoint_activations;      /* keep only chunk inputs; recompute before backward */
    int blas_threads;                /* BLAS threads (process-wide); 0 = max(1, cores / P) */
    int bind_cores;                  /* threads: bind each worker and its BLAS threads to
                                        CPUs of its own, in the order of those the process
                                        may use; refused where they are fewer than workers
                                        x BLAS threads, and under MPI (mpirun --bind-to core
                                        binds ranks) (default 0: the kernel places them) */
    int record_trace;                /* keep each action's start and end (default 1) */
    int lend_idle;                   /* threads, each worker on one BLAS thread and a core of
                                        its own: a worker waiting for a message runs a part
                                        of another worker's products and passes meanwhile
                                        (the same bits; default 1, 0: it only waits) */
    int replicas;                    /* D data-parallel copies of every stage (default 1); D
                                        must divide microbatches; under MPI stages x replicas
                                        = the world size */
    int zero;                        /* sharded optimizer state across the replicas (ZeRO):
                                        0 off (default); 1 each replica owns 1/D of its
                                        stage's moments, sums only its shard's gradients
                                        and updates it, then the shards are gathered; 2 as
                                        1 with the sums' receive buffers bounded to a
                                        bucket. Needs replicas >= 2 and a synchronous
                                        schedule; the steps are bit-identical to 0
                                        (docs/layouts.md) */
    pt_pipeline_transport transport; /* default PT_PIPELINE_AUTO */
    int tensor;                      /* T tensor-parallel slices of every stage (default
                                        1; docs/layouts.md): GPT only, T dividing the
                                        heads, channels, MLP width and vocabulary;
                                        ranks = stages x tensor x replicas, rank =
                                        (stage x replicas + replica) x T + slice */
    int sequence_parallel;           /* with tensor >= 2: each slice holds 1/T of every
                                        sample's positions outside the tensor-parallel
                                        regions (Megatron's sequence parallelism): the
                                        LayerNorms, residuals and stage boundaries; gpt
                                        only, T dividing the sequence (docs/layouts.md) */
} pt_pipeline_config;

pt_pipeline_config pt_pipeline_config_default(void);
/* Builds the stages of this process's workers from the model config (the
 * same seed gives the same parameters on every layout) and their optimizer
 * state from optim; optim NULL makes a pipeline that only runs forward
 * passes (eval, forward_probs), whose train_step refuses.
 * PT_EINVAL names what is refused (a balance that does not sum to the
 * model's block count, a schedule that cannot take P and M, replicas that
 * do not divide M). */
int pt_pipeline_create(const pt_model_config *model, const pt_optim_config *optim,
                       const pt_pipeline_config *cfg, pt_pipeline **out);
void pt_pipeline_destroy(pt_pipeline *p);
/* One optimizer step on a batch of microbatches x micro_batch_size samples:
 * micro-batch k is samples [k*mbs, (k+1)*mbs). Synchronous schedules
 * accumulate every micro-batch's gradient (loss scale 1/M), sum the tied
 * copies, clip by the global norm and step once; pipedream updates each chunk
 * after each backward. mean_loss may be NULL. */
int pt_pipeline_train_step(pt_pipeline *p, const pt_microbatch *batch, long step, float lr,
                           float *mean_loss);
/* 1 when the last train_step's global gradient norm (in *norm, may be NULL)
 * was not finite: then no worker changed a parameter or moment, and the
 * caller decides what to do (the trainer reports it and does not count the
 * step). *stage (may be NULL) receives the pipeline stage whose gradient
 * went non-finite first in the backward pass (the last one in model order
 * with a non-finite share), -1 when none. Schedules that update per
 * micro-batch (pipedream) take no global norm and never skip. */
int pt_pipeline_last_step_skipped(const pt_pipeline *p, double *norm, int *stage);
/* The M per-micro-batch losses of the last train_step or eval. */
const float *pt_pipeline_losses(const pt_pipeline *p);
/* Forward only over a batch of the same shape; the mean loss. */
int pt_pipeline_eval(pt_pipeline *p, const pt_microbatch *batch, float *mean_loss);
/* Pipelined inference: the forward passes alone over a batch of the same
 * shape as train_step's, the micro-batches streamed through the stages as
 * the schedule orders its forwards (the lowered program with F actions
 * only). outputs receives, in batch order, what the last layer writes per
 * sample (a classifier's probabilities, mse's predictions): batch x its
 * width floats, on every process. Targets may be absent (the losses are
 * then 0); mean_loss may be NULL. */
int pt_pipeline_predict(pt_pipeline *p, const pt_microbatch *batch, float *outputs,
                        float *mean_loss);
/* Forward of one micro-batch (any batch size) across the stages; copies the
 * last block's output (probabilities, batch x its width) into probs. */
int pt_pipeline_forward_probs(pt_pipeline *p, const pt_microbatch *mb, float *probs);
/* Chrome/Perfetto trace-event JSON of the last step: a pt_trace of it alone,
 * labelled step + 1 for the `step` train_step was given. */
int pt_pipeline_write_trace(const pt_pipeline *p, const char *path);
/* A trace of one or more steps on one time axis, in Chrome/Perfetto
 * trace-event JSON: a track of the steps; per worker a track of its actions
 * (each with its chunk, micro-batch and step), with replicas a track of its
 * chunks' gradient sums, and counters of its activation bytes, micro-batches
 * in flight and transport bytes in flight (sent, not yet handed over). Add
 * a step right after pt_pipeline_train_step: a later eval or train step
 * replaces what the pipeline recorded. docs/watching.md shows one. */
typedef struct pt_trace pt_trace;
int pt_trace_create(pt_trace **out);
void pt_trace_destroy(pt_trace *t);
/* The pipeline's last step, labelled `step` (the trainer counts from 1, as
 * its metrics log does); the first step added is time 0. */
int pt_trace_add_step(pt_trace *t, const pt_pipeline *p, long step);
/* Writes every step added so far; PT_EINVAL when there is none. */
int pt_trace_write(const pt_trace *t, const char *path);
/* Per rank (with one tensor slice a rank is a worker): measured bubble of
 * the last step next to the simulator's prediction for the measured
 * per-chunk F/B/W times (a tensor group's sums count in its passes). */
int pt_pipeline_bubble_report(const pt_pipeline *p, char *buf, size_t n);
/* Measured bubble fractions of the last step, per rank (measured may be
 * NULL, predicted may be NULL); arrays of pt_pipeline_ranks() entries. */
int pt_pipeline_bubbles(const pt_pipeline *p, double *measured, double *predicted);
/* The link between workers: bytes per second (0: none, transfers are
 * copies in memory) and seconds of latency per transfer. */
typedef struct {
    double bandwidth, latency;
} pt_link_rate;
/* Times pipetrain's own ping-pong between neighbouring MPI ranks (a small
 * message, one transfer between chunks or 512 KiB, four times that) and gives the slowest
 * pair's bandwidth and latency; {0, 0} on threads. Every rank calls it, before
 * the first step. */
int pt_pipeline_probe_link(pt_pipeline *p, pt_link_rate *out);
/* Per rank (arrays of pt_pipeline_ranks() entries, each may be NULL):
 * when it ended its last compute action of the last step, measured from the
 * step's start, and when the simulator has it end for the measured F, B, W
 * times of every chunk, each boundary's bytes and the link (NULL: none).
 * Under MPI every rank must call it. */
int pt_pipeline_step_times(pt_pipeline *p, const pt_link_rate *link, double *measured,
                           double *predicted);
/* Those figures as a table into buf, headed by the link. */
int pt_pipeline_step_time_report(const pt_pipeline *p, const pt_link_rate *link,
                                 const double *measured, const double *predicted, char *buf,
                                 size_t n);
/* Per rank (arrays of pt_pipeline_ranks() entries, each may be NULL; with
 * one tensor slice a rank is a worker): the bytes its stage, optimizer,
 * stashes, activation pool and buffers have allocated, the planner's
 * prediction of them, and the peak resident memory of the process it runs
 * in. Under MPI every rank must call it (it sums every rank's figures); all
 * ranks' figures are then known everywhere. */
int pt_pipeline_memory(pt_pipeline *p, pt_memory_use *measured, pt_memory_use *predicted,
                       size_t *peak_rss);
/* Those figures (arrays of pt_pipeline_ranks() entries) as a table into
 * buf, in MiB, one row per rank with its stage, replica and tensor slice. */
int pt_pipeline_memory_report(const pt_pipeline *p, const pt_memory_use *measured,
                              const pt_memory_use *predicted, const size_t *peak_rss, char *buf,
                              size_t n);
int pt_pipeline_workers(const pt_pipeline *p); /* stages x replicas */
int pt_pipeline_ranks(const pt_pipeline *p);   /* stages x tensor slices x replicas */
int pt_pipeline_stages(const pt_pipeline *p);
int pt_pipeline_replicas(const pt_pipeline *p);
int pt_pipeline_zero(const pt_pipeline *p); /* the config's zero: 0, 1 or 2 */
int pt_pipeline_chunks(const pt_pipeline *p);
const pt_model_config *pt_pipeline_model_config(const pt_pipeline *p);
/* The model's description: every block's kind, cost and parameter names and
 * shapes, no tensors. */
const pt_model *pt_pipeline_description(const pt_pipeline *p);
/* Blocks of chunk c: first..last. */
int pt_pipeline_chunk_blocks(const pt_pipeline *p, int c, int *first, int *last);
/* The worker that holds chunk c. */
int pt_pipeline_chunk_worker(const pt_pipeline *p, int c);
/* Most activation bytes live at once on a worker since create (records and
 * boundary buffers taken from its pool). */
size_t pt_pipeline_peak_activation_bytes(const pt_pipeline *p, int worker);
const char *pt_pipeline_schedule_name(const pt_pipeline *p);
/* The schedule the pipeline runs (owned by it). Without a balance, the
 * zero-bubble ones (zbh1, zbh2, zbv, zb1p, zb2p) are ordered for the chunks'
 * F, B and W times the partitioner profiled on this machine (rank 0's under
 * MPI); with a balance, for unit costs (the same order on every run). */
const pt_schedule *pt_pipeline_schedule(const pt_pipeline *p);
/* "threads" or "mpi". */
const char *pt_pipeline_transport_name(const pt_pipeline *p);

/* Across MPI ranks. Every rank calls a pipeline function that takes a batch
 * (train_step, eval, forward_probs) and pt_pipeline_run in the same order.
 * train_step's mean_loss, pt_pipeline_losses and eval's mean loss are valid
 * on every rank; forward_probs fills probs on every rank. On threads these
 * are trivial: rank 0, main. */
/* This process's first worker: its MPI rank, 0 on threads. */
int pt_pipeline_rank(const pt_pipeline *p);
/* 1 on the one process that prints and writes metrics (rank 0). */
int pt_pipeline_is_main(const pt_pipeline *p);

/* Worker w's stage and its optimizer (NULL when w does not run in this
 * process, or the pipeline has no optimizer). Its parameters of blocks it
 * does not hold have data NULL. Here and below a worker is a rank
 * (pt_pipeline_ranks(): with tensor slices, slice t of worker w is rank
 * w T + t, and its stage holds that slice), as pt_pipeline_run passes it. */
pt_model *pt_pipeline_stage(pt_pipeline *p, int worker);
pt_optimizer *pt_pipeline_stage_optimizer(pt_pipeline *p, int worker);
/* Sharded optimizer state (zero): called on every worker in a
 * pt_pipeline_run job, gathers each stage's moments to its replica 0, whose
 * pt_pipeline_stage_optimizer() then answers with the whole stage's until
 * pt_pipeline_release_moments(); nothing to do without zero. In bf16 runs
 * the float master weights, sharded too, are gathered the same way (with
 * pt_pipeline_gather_master alone when no moments are wanted) into replica
 * 0's stage, which holds them whole until the release. */
int pt_pipeline_gather_moments(pt_pipeline *p, int worker);
int pt_pipeline_gather_master(pt_pipeline *p, int worker);
void pt_pipeline_release_moments(pt_pipeline *p, int worker);
/* Sharded: worker w keeps its shards of `full`, an optimizer of its whole
 * stage (a checkpoint read into it). */
void pt_pipeline_take_moments(pt_pipeline *p, int worker, pt_optimizer *full);
/* After the caller wrote worker w's whole stage (a checkpoint read into
 * it): in bf16 runs with sharded state the products' copy follows and the
 * float master keeps only the worker's shards again. */
int pt_pipeline_params_loaded(pt_pipeline *p, int worker);
/* The pipeline stage rank r is a replica of (0 .. stages-1), and which
 * replica (*replica, may be NULL); -1 for a rank that holds no chunk. */
int pt_pipeline_worker_stage(const pt_pipeline *p, int rank, int *replica);
/* Tensor slices, for checkpoints: a model of rank r's worker's blocks at
 * T = 1 shapes and, with whole_opt and an optimizer, one of its moments,
 * as freshly made (NULLs where r does not run here); the caller destroys
 * them. */
int pt_pipeline_whole_stage(pt_pipeline *p, int rank, pt_model **whole, pt_optimizer **whole_opt);
/* Tensor slices, for checkpoints: called in a pt_pipeline_run job by every
 * slice of a worker, gathers the worker's whole stage (a model of its
 * blocks at T = 1 shapes) and, with an optimizer, its whole moments
 * (gathered ones under zero) from the slices: *whole and *whole_opt on
 * slice 0 (the caller destroys them), NULL on the others. */
int pt_pipeline_gather_slices(pt_pipeline *p, int rank, pt_model **whole, pt_optimizer **whole_opt);
/* The inverse, for a load: rank r's slice of `whole` into its stage and
 * of `whole_opt` (may be NULL) into its moments (under zero, its shards). */
int pt_pipeline_take_slice(pt_pipeline *p, int rank, const pt_model *whole,
                           pt_optimizer *whole_opt);
/* Copies parameter `name` (which -1) or its optimizer moment `which` (0:
 * exp_avg or momentum, 1: exp_avg_sq) from the first worker of this process
 * that holds it; PT_EINVAL when none does. */
int pt_pipeline_read_param(const pt_pipeline *p, const char *name, int which, float *dst);
/* Every process of the pipeline meets here (MPI; on threads it returns at
 * once): the result is PT_OK only when every process passed PT_OK (a local
 * failure keeps its message; another's is reported as such), and the main
 * process's n bytes of buf reach every process. */
int pt_pipeline_agree(pt_pipeline *p, int status, void *buf, size_t n);
/* Runs fn(p, worker, user) for every worker of this process, each on its own
 * thread (threads) or the calling one (MPI), and waits for all; the first
 * failure is returned with its message. fn works on its worker's own stage
 * and exchanges nothing with other workers, so a failure leaves the
 * pipeline usable; processes learn of each other's with pt_pipeline_agree. */
int pt_pipeline_run(pt_pipeline *p, int (*fn)(pt_pipeline *p, int worker, void *user), void *user);

/* ---- Tokenizer -------------------------------------------------------- */

/* GPT-2's byte-level BPE: text bytes <-> token ids, the same ids Hugging
 * Face's tokenizers library gives for the same files (docs/tokenizer.md).
 * Any bytes encode, also bytes that are not UTF-8, and decoding gives them
 * back exactly: decode(encode(x)) == x for every x (unless the tokenizer
 * adds a prefix space). A tokenizer keeps a cache of the words it has
 * split: use one from one thread at a time. */
typedef struct pt_tokenizer pt_tokenizer;

/* Loads a tokenizer from path: a tokenizer.json file (any name), or a
 * folder holding tokenizer.json, or else vocab.json and merges.txt.
 * PT_EIO if a file cannot be read; PT_EFORMAT with the file and the problem
 * if one is malformed or asks for what is not implemented (a normalizer,
 * a pre-tokenizer other than GPT-2's ByteLevel, a model other than BPE). */
int pt_tokenizer_load(const char *path, pt_tokenizer **out);
void pt_tokenizer_destroy(pt_tokenizer *t);

/* 1 if folder holds tokenizer files pt_tokenizer_load would look for
 * (tokenizer.json, or vocab.json and merges.txt), else 0. */
int pt_tokenizer_find(const char *folder);

/* The number of ids: the largest id of the vocabulary and the added tokens,
 * plus one. */
int pt_tokenizer_vocab_size(const pt_tokenizer *t);
/* The id of <|endoftext|> (an added token, else a vocabulary entry), or -1. */
int pt_tokenizer_endoftext(const pt_tokenizer *t);

/* A growable array of ids, owned by its caller: start it zeroed, free(ids)
 * when done. Encoding appends to it. */
typedef struct {
    uint32_t *ids;
    size_t n, cap;
} pt_token_ids;

/* Appends the ids of text[0..len) to out. Added tokens (<|endoftext|>, ...)
 * are found in the text first, as the tokenizers library finds them; the
 * text between them is pre-tokenised and split by BPE. On failure (memory)
 * out->n is as it was. */
int pt_tokenizer_encode(pt_tokenizer *t, const char *text, size_t len, pt_token_ids *out);

/* The bytes of ids[0..n) into *text (malloc'ed, NUL-terminated; the NUL is
 * not counted in *len). PT_EINVAL naming the first id that is no token. */
int pt_tokenizer_decode(const pt_tokenizer *t, const uint32_t *ids, size_t n, char **text,
                        size_t *len);
/* The bytes one id stands for (not NUL-terminated) and their count, or
 * NULL when id is no token. Valid while t lives. */
const char *pt_tokenizer_token(const pt_tokenizer *t, uint32_t id, size_t *len);

/* A place to cut long text so that encoding the two sides one after the
 * other gives the ids of the whole: the first such place at or after from
 * (after a newline that stands between two characters in ASCII that are
 * not whitespace, the second not the start of an added token), or len when
 * there is none. Callers encode a large file piece by piece with it. */
size_t pt_tokenizer_cut(const pt_tokenizer *t, const char *text, size_t len, size_t from);

/* ---- Data -------------------------------------------------------------- */

/* scikit-learn's 8x8 handwritten digits (digits.csv.gz; docs/training.md),
 * 64 pixels in [0, 1] per image, row-major, one channel; labels 0..9.
 * Shuffled with the seed and split: the last test_fraction are held out. */
typedef struct pt_digit_set pt_digit_set;

int pt_digit_set_load(const char *path, double test_fraction, uint64_t seed, pt_digit_set **out);
void pt_digit_set_destroy(pt_digit_set *d);
/* Split 0 (training) or 1 (held out): its images (n, 64) and labels (n). */
int pt_digit_set_split(const pt_digit_set *d, int split, const float **x, const int **y);

/* A text corpus or token file as training batches of T+1-token windows
 * (inputs and next-token targets), as the train command reads --data: text
 * files or folders as bytes (vocab 256) or, with a tokenizer, as its ids;
 * a *.bin token file (llm.c or nanoGPT) as ids. The last val_fraction of
 * the tokens is held out. */
typedef struct pt_token_batches pt_token_batches;

/* tokenizer NULL: text is bytes (vocab must be 256); a token file is
 * recognised by its name (*.bin). Batches hold `batch` windows. */
int pt_token_batches_open(const char *const *paths, int n_paths, const char *tokenizer, int vocab,
                          int seq_len, int batch, double val_fraction, uint64_t seed,
                          pt_token_batches **out);
void pt_token_batches_destroy(pt_token_batches *b);
/* The next random training batch: tokens and targets (batch, seq_len). */
void pt_token_batches_next(pt_token_batches *b, int *tokens, int *targets);
/* Held-out batch k (0 .. pt_token_batches_val_count - 1): the same windows
 * every time. */
size_t pt_token_batches_val_count(const pt_token_batches *b);
int pt_token_batches_val(const pt_token_batches *b, size_t k, int *tokens, int *targets);

/* Synthetic regression: y = x A / sqrt(inputs) + noise N(0, noise^2), x
 * and A standard normal, A fixed by the seed. Sample i of split 0
 * (training) or 1 (held out) is the same every time it is drawn. */
typedef struct pt_regression pt_regression;

int pt_regression_create(int inputs, int outputs, float noise, uint64_t seed, pt_regression **out);
void pt_regression_destroy(pt_regression *r);
int pt_regression_inputs(const pt_regression *r);
int pt_regression_outputs(const pt_regression *r);
/* Samples first .. first + batch - 1 of a split: x (batch, inputs), y
 * (batch, outputs). */
void pt_regression_batch(const pt_regression *r, int split, uint64_t first, int batch, float *x,
                         float *y);

/* ---- Training --------------------------------------------------------- */

typedef enum {
    PT_DATA_AUTO = 0, /* gpt: a single *.bin file is tokens, anything else text; mlp: digits */
    PT_DATA_TEXT,     /* text files or directories: bytes (vocab 256) or tokenized */
    PT_DATA_TOKENS,   /* llm.c or nanoGPT token file */
    PT_DATA_DIGITS,   /* scikit-learn's digits.csv.gz */
    PT_DATA_SYNTHETIC_REGRESSION /* pt_regression: seeded, no files (data may be empty) */
} pt_data_kind;

/* What the trainer tells its caller after every step. */
typedef struct {
    long step, steps; /* steps done, of the run's total */
    float loss, lr;
    double tokens_per_s; /* samples/s for mlp */
    double step_ms;
    double elapsed_s, eta_s; /* since the run began; left at the pace so far */
    int has_val;             /* val_loss (and for mlp val_accuracy) measured this step */
    float val_loss, val_accuracy;
    long saved_step; /* the step of the last checkpoint written to cfg.save (-1: none yet) */
} pt_train_report;

typedef struct {
    pt_model_config model;
    pt_optim_config optim;
    int batch;               /* samples per optimizer step (default 16) */
    int microbatches;        /* the batch is cut into this many (default 1) */
    long steps;              /* total steps, counted from 0 also when resuming */
    uint64_t seed;           /* data order (default 1) */
    const char *const *data; /* files or directories */
    int n_data;
    pt_data_kind data_kind;
    const char *tokenizer; /* text is encoded with this tokenizer (file or folder, see
                              pt_tokenizer_load); model.vocab must be its size. NULL:
                              text is bytes, vocab 256 */
    const char *val_data;  /* token file for validation (tokens only) */
    double val_fraction;   /* held out when val_data is NULL (default 0.1) */
    int eval_every;        /* validation every K steps and at the end; 0: only at the end */
    int eval_batches;      /* batches per validation (default 8; mlp: the whole test set) */
    const char *save;      /* checkpoint: a set (folder: every stage writes its own shard)
                              or, for a path ending in .safetensors, one file; written at
                              the end and every save_every steps */
    long save_every;
    pt_precision save_dtype;      /* fp32 (default), or bf16: a .safetensors save holds its
                                     weights as BF16, rounded, for inference (a folder keeps
                                     float master weights: a run resumes from them) */
    const char *resume;           /* checkpoint (file or set) to continue from; of the same
                                     model config, saved under any layout */
    int resume_fresh_optimizer;   /* resume from weights alone, with fresh optimizer moments
                                     (otherwise a checkpoint without them is refused) */
    const char *init_from;        /* weights to start from (a checkpoint or a Hugging Face
                                     model: folder or file) with a fresh optimizer, at step 0;
                                     model must be its config (its context may be shorter) */
    int max_skipped_steps;        /* a step whose gradient is not finite changes nothing and
                                     is reported; this many in a row end the run with an
                                     error (default 3) */
    const char *metrics;          /* JSONL log */
    const char *trace;            /* Chrome/Perfetto trace (pt_trace) of the last step, or
                                     of trace_first..trace_last */
    long trace_first, trace_last; /* the steps traced, inclusive, counted from 1 as the
                                     reports and the metrics log count them (step k is
                                     the k-th counted step); 0 and 0: the last step */
    const char *tensorboard;      /* folder for TensorBoard event files (NULL: none) */
    pt_pipeline_config pipeline;  /* stages, schedule, ...; microbatches and
                                     micro_batch_size come from the fields above */
    void (*on_report)(const pt_train_report *r, void *user);
    void *user;
} pt_train_config;

pt_train_config pt_train_config_default(void);

typedef struct {
    long steps;
    long saved_step; /* the step of the last checkpoint this run wrote to cfg.save
                        (-1: none), valid also when pt_train fails: a run ended by a
                        dead peer or link says where to resume from */
    float loss, val_loss, val_accuracy;
    double tokens_per_s;
    char bubbles[1024];    /* per worker: measured bubble vs the simulator's */
    char step_times[1024]; /* the link (MPI: measured at the start) and per worker the
                              last step's time vs the simulator's for that link */
    pt_link_rate link;
    char memory[4096];   /* per worker: bytes by kind, measured vs predicted, peak RSS */
    char partition[256]; /* the cut trained with, the partitioner's or the one given:
                            "--balance 3,3" (layers per chunk), or blocks per chunk
                            where a chunk boundary falls inside a layer */
    int is_main;         /* this process reports for the run (always, but under mpirun) */
} pt_train_result;

/* Trains as configured; a usage mistake (batch not divisible, ...) returns
 * PT_EINVAL with a message, before anything is written. */
int pt_train(const pt_train_config *cfg, pt_train_result *result);

/* Samples n_new tokens after the prompt from a gpt, feeding it at most
 * seq_len tokens of context. temperature 0 takes the most likely token.
 * Each forward runs across the pipeline's stages (one stage: one worker).
 * out receives the n_new tokens; on_token (may be NULL) sees each one. */
int pt_generate(pt_pipeline *pipe, const int *prompt, int n_prompt, int n_new, float temperature,
                uint64_t seed, int *out, void (*on_token)(int token, void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif /* PIPETRAIN_H */
