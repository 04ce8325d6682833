/* layout.h: memory and step time per worker of a run laid out as P
 * pipeline stages x T tensor slices x D replicas (ZeRO stage zero over the
 * replicas), before it runs, from the model's description and the profile
 * of its blocks on this machine. Called by `pipetrain plan --tensor T
 * --replicas D --zero Z` and `pipetrain plan --layouts --ranks N`. */
#ifndef PT_PLAN_LAYOUT_H
#define PT_PLAN_LAYOUT_H

#include "pipetrain.h"
#include "plan/partition.h"

typedef struct {
    int stages, tensor, replicas, zero; /* P, T, D and the ZeRO stage */
    int sequence_parallel;              /* with T >= 2: sequence parallelism */
    int microbatches;                   /* M per step, shared by the D replicas */
    int micro_batch_size;
    double bandwidth, latency; /* the link between two ranks (bytes/s, s); bandwidth 0:
                                  this machine's memory copies */
} pt_layout_plan;

typedef struct {
    pt_memory_use worst;  /* the rank that holds the most, by kind */
    size_t peak;          /* its total */
    int worst_stage;      /* its stage */
    double step_s;        /* the pipeline's makespan plus the replicas' sums */
    double tensor_sum_s;  /* of which the busiest stage's tensor-group sums, a step's */
    double replica_sum_s; /* and the replicas' gradient sum after the last backward */
    int balance[PT_PARTITION_MAX_CHUNKS]; /* blocks per stage */
} pt_layout_estimate;

/* Predicts one layout of the model cfg describes (AdamW, 1f1b), given the
 * whole model's block profile (pt_profile_blocks on micro_batch_size). The
 * compute of a slice is its block's profiled time over T; each tensor-group
 * sum a ring all-reduce of the block's input over T ranks (with sequence
 * parallelism, a reduce-scatter or all-gather: half of one), and the
 * replicas' sum one of each worker's gradient over D, on the link.
 * PT_EINVAL names what the layout cannot do (T not dividing the heads, the
 * channels, the MLP width or the vocabulary; zero without replicas; more
 * stages than blocks; M not a multiple of D). */
int pt_layout_predict(const pt_model_config *cfg, const pt_block_profile *prof,
                      const pt_layout_plan *l, pt_layout_estimate *out);

#endif
