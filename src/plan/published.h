/* published.h: published large training runs, what the planner is checked
 * against (docs/planning.md): each run's configuration and its measured
 * results, every number with the paper, table and row it comes from.
 *
 * io/published_runs.c reads them from a JSON file (the repository's copy is
 * tests/data/published_runs.json); replay_zero_bubble.c and replay_megatron.c
 * predict each run from its configuration alone, for `pipetrain plan
 * --check` and the tests that hold the predictions to the published figures.
 */
#ifndef PT_PLAN_PUBLISHED_H
#define PT_PLAN_PUBLISHED_H

#include "pipetrain.h"

/* A published number and where it was read; value 0 and source NULL when
 * the run does not publish it. */
typedef struct {
    double value;
    const char *source;
} pt_cited;

/* The schedules of Qi et al.'s Tables 4 and 5, in their column order. */
enum { PT_ZB_1F1B, PT_ZB_INTERLEAVED, PT_ZB_H1, PT_ZB_H2, PT_ZB_1P, PT_ZB_2P, PT_ZB_N_SCHEDULES };
/* pipetrain's names of those schedules */
extern const char *const pt_zb_schedule_names[PT_ZB_N_SCHEDULES];

/* One row of Qi et al. (zero bubble): the model and pipeline (Table 3), the
 * profiled pass times (Table 9, milliseconds), the bubble rates computed
 * from them (Table 5) and the measured throughput and memory (Table 4). */
typedef struct {
    char model[16];
    pt_cited layers, heads, hidden, seq, stages, micro_batch_size, microbatches;
    pt_cited t_f, t_b, t_w, t_comm;
    pt_cited bubble[PT_ZB_N_SCHEDULES];
    pt_cited samples_per_gpu_s[PT_ZB_N_SCHEDULES]; /* per GPU per second */
    pt_cited memory_gb[PT_ZB_N_SCHEDULES];
} pt_published_zb;

/* One row of Narayanan et al.'s Table 1 (Megatron-LM), with what the
 * authors' script for it adds (micro-batch size, interleaving,
 * recomputation, how the data-parallel gradients are reduced). */
typedef struct {
    char model[16];
    pt_cited params_billion, heads, hidden, layers, tensor, pipeline, gpus, batch;
    pt_cited tflops_per_gpu, peak_percent;
    pt_cited micro_batch_size, layers_per_virtual_stage, seq, vocab;
    pt_cited recompute;            /* 1: every layer recomputed in the backward */
    pt_cited overlapped_dp_reduce; /* 1: PyTorch DDP (overlaps the backward), 0: after it */
} pt_published_megatron;

/* The cluster Narayanan et al. ran on (their section 5). */
typedef struct {
    char device[32]; /* a built-in device (pt_device_builtin) */
    pt_cited peak_tflops, devices_per_node, intra_node_gbs, inter_node_gbs;
} pt_published_cluster;

typedef struct {
    pt_published_zb *zb;
    int n_zb;
    pt_published_megatron *megatron;
    int n_megatron;
    pt_published_cluster megatron_cluster;
    char **strings; /* the sources, owned */
    int n_strings;
} pt_published;

/* ---- replay_zero_bubble.c ---- */

/* The bubble rates of the six schedules for row r's profiled times, as Qi
 * et al. define them (section 5.3): (span - M (T_F + T_B + T_W)) / span,
 * span the longest stage from its first F to its last pass, transfers
 * overlapped with compute and arriving T_comm after they are sent. */
int pt_replay_zb_bubbles(const pt_published_zb *r, double bubble[PT_ZB_N_SCHEDULES]);
/* The predicted throughput of each schedule relative to 1f1b's (1f1b's
 * entry is 1) on the runtime the paper measured: sends hold their sender
 * for T_comm (Megatron-LM's p2p), 1f1b and interleaved synchronize the
 * optimizer step (iteration = makespan), the zero-bubble schedules
 * post-validate it (iteration = the longest stage). */
int pt_replay_zb_speedups(const pt_published_zb *r, double speedup[PT_ZB_N_SCHEDULES]);
/* The chunks per worker of row r's interleaved 1F1B: one layer per chunk,
 * the first and last stage one layer short (section 5.1), so the middle
 * stages' (L + 2) / P. */
int pt_zb_interleaved_chunks(const pt_published_zb *r);

/* ---- replay_megatron.c ---- */

/* The rows (0-based) of Narayanan et al.'s Table 1 that the A100's two
 * efficiencies are fitted on. */
extern const int pt_megatron_fit_rows[2];

/* The cluster row r ran on: the published one, with `gpus` devices. */
int pt_megatron_cluster(const pt_published_cluster *h, int gpus, pt_cluster *out);
/* Row r's model, layout and runtime, from its configuration alone. */
int pt_megatron_layout(const pt_published_megatron *r, pt_model_config *m, pt_layout *l,
                       pt_runtime *rt);
/* Predicts row r on cluster c; *tflops receives the predicted TFLOP/s per
 * GPU as the paper counts it (its equation 3's FLOPs over the iteration). */
int pt_replay_megatron(const pt_cluster *c, const pt_published_megatron *r, pt_prediction *out,
                       double *tflops);
/* Fits the device's gemm_efficiency and memory_efficiency so that rows[0]
 * and rows[1] (0-based; pt_megatron_fit_rows by default) come out at their
 * published TFLOP/s. */
int pt_fit_megatron(const pt_published *p, const int rows[2], pt_device *fitted);

#endif
