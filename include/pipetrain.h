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

/* ---- Optimizers ------------------------------------------------------- */

typedef enum { PT_OPTIM_ADAMW = 0, PT_OPTIM_SGD = 1 } pt_optim_kind;

typedef struct {
    pt_optim_kind kind;  /* default AdamW */
    float lr;            /* peak learning rate (default 3e-4) */
    float min_lr;        /* cosine decay ends here (default lr / 10) */
    long warmup_steps;   /* linear warm-up from lr / warmup (default 0) */
    long decay_steps;    /* cosine decay over this many steps (0: constant) */
    float beta1, beta2;  /* AdamW moments (0.9, 0.95) */
    float eps;           /* AdamW (1e-8) */
    float weight_decay;  /* decoupled, on 2-D weights only (0.1 AdamW, 0 SGD) */
    float momentum;      /* SGD (0.9) */
    float grad_clip;     /* max global gradient norm; 0 disables (1.0) */
} pt_optim_config;

pt_optim_config pt_optim_config_default(pt_optim_kind kind);

/* ---- Schedules --------------------------------------------------------- */

/* A schedule is, for each worker, the ordered list of actions it runs: F
 * (forward of a chunk for a micro-batch), B (gradient w.r.t. the chunk's
 * input), W (gradient w.r.t. the chunk's weights) or BW (B and W fused). The
 * model's blocks are cut into chunks (virtual stages) in model order; a
 * worker holds one chunk, or several for interleaved, loopedbfs and zbv.
 * Building, checking, simulating and drawing a schedule needs no tensors.
 * docs/schedules.md describes the families and the text format. */
typedef struct pt_schedule pt_schedule;

typedef struct {
    const char *name;   /* gpipe 1f1b interleaved loopedbfs zbh1 zbv pipedream
                           1f1b-rr (default "1f1b") */
    int stages;         /* P, pipeline stages, >= 1 (default 4) */
    int microbatches;   /* M, micro-batches per mini-batch, >= 1 (default 8) */
    int virtual_stages; /* v, chunks per worker: interleaved and loopedbfs take
                           any v >= 1, zbv only 2, the others only 1; 0 = the
                           schedule's own (2 for interleaved, loopedbfs, zbv;
                           1 otherwise) (default 0) */
    int replicas;       /* data-parallel copies of every stage, 1f1b-rr only
                           (workers = stages x replicas); 0 = the schedule's
                           own (2 for 1f1b-rr, 1 otherwise) (default 0) */
} pt_schedule_config;

pt_schedule_config pt_schedule_config_default(void);
/* Generates a schedule; PT_EINVAL names the parameter the schedule cannot
 * take (M < P for interleaved, v != 2 for zbv, P = 0, ...). */
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
int pt_schedule_workers(const pt_schedule *s);       /* stages x replicas */
int pt_schedule_stages(const pt_schedule *s);        /* P */
int pt_schedule_chunks(const pt_schedule *s);        /* virtual stages in all */
int pt_schedule_virtual_stages(const pt_schedule *s); /* chunks per worker */
int pt_schedule_microbatches(const pt_schedule *s);  /* M */
int pt_schedule_replicas(const pt_schedule *s);

/* Proves the schedule complete and deadlock-free: every F and backward of
 * every chunk and micro-batch exactly once on the worker that holds it,
 * dependencies in order, no cycle when played with blocking receives.
 * PT_EINVAL for a missing, repeated or misplaced action or one ordered before
 * what it needs on its own worker, PT_EDEADLOCK for a cycle across workers;
 * the message names the worker, the action and what it waits for. */
int pt_schedule_validate(const pt_schedule *s);

/* Costs for the simulator, in any time unit. A fused BW costs b + w. */
typedef struct {
    double f, b, w;       /* time of one chunk's F, B, W (defaults 1, 1, 1) */
    double latency;       /* per transfer between two workers (default 0) */
    int n_chunk_costs;    /* 0, or pt_schedule_chunks(): then chunk_f[c],
                             chunk_b[c], chunk_w[c] replace f, b, w */
    const double *chunk_f, *chunk_b, *chunk_w;
} pt_schedule_costs;

pt_schedule_costs pt_schedule_costs_default(void);

/* What playing a schedule against a cost model gives. Arrays have one entry
 * per worker; start[w][i] and end[w][i] time worker w's i-th action. */
typedef struct {
    int workers;
    double makespan;
    double bubble_fraction;  /* sum of idle / (workers x makespan) */
    double *busy, *idle;
    int *peak_activations;   /* most (chunk, micro-batch) pairs whose F is done
                                and whose last backward piece is not */
    int *n_actions;
    double **start, **end;
} pt_schedule_sim;

/* Fails with PT_EDEADLOCK on a schedule that cannot complete. */
int pt_schedule_simulate(const pt_schedule *s, const pt_schedule_costs *costs,
                         pt_schedule_sim **out);
void pt_schedule_sim_destroy(pt_schedule_sim *sim);

/* Pictures of a simulated schedule, each a malloc'd string the caller frees:
 * an ASCII timeline (one row per worker, ".." for idle time), an SVG Gantt
 * chart, and Chrome/Perfetto trace-event JSON (one track per worker). */
int pt_schedule_draw_ascii(const pt_schedule *s, const pt_schedule_sim *sim, char **text);
int pt_schedule_draw_svg(const pt_schedule *s, const pt_schedule_sim *sim, char **text);
int pt_schedule_draw_trace(const pt_schedule *s, const pt_schedule_sim *sim, char **text);

#ifdef __cplusplus
}
#endif
#endif /* PIPETRAIN_H */
