/* memory.h: what each pipeline worker holds, predicted from the model's
 * description, the schedule, the partition and the micro-batch size, with
 * no tensor allocated. The same walk of a worker's action list sizes the
 * executor's activation pool (runtime/), so the pool and the prediction
 * cannot drift apart. Callers: the pipeline (its pool and its memory
 * report), `pipetrain plan`, `pipetrain schedule --memory`. */
#ifndef PT_PLAN_MEMORY_H
#define PT_PLAN_MEMORY_H

#include <stdbool.h>

#include "pipetrain.h"
#include "sched/schedule.h"

typedef struct {
    const pt_model *desc;   /* the model's description (tensors not needed) */
    const pt_schedule *s;   /* placement and action lists */
    const int *chunk_first; /* [chunks]: blocks of each chunk */
    const int *chunk_last;
    int micro_batch_size;
    bool checkpoint_activations; /* keep only chunk inputs, recompute before backward */
    int moments;                 /* optimizer moments per parameter: 2 AdamW, 1 SGD, 0 none */
    int zero;                    /* sharded optimizer state across the replicas: 0, 1, 2 */
    size_t bucket_floats;        /* floats per bucket of the replicas' sums; 0: 4 MiB's */
    /* s is one replica's schedule (s->replicas 1) of a run with `replicas`
     * copies of it (0 or 1: s is the run's own); the prediction is then for
     * replica `replica` of each worker (`pipetrain plan` before a run) */
    int replicas, replica;
} pt_memory_plan;

/* Receives each of a worker's streams keeps posted beyond those of its next
 * compute action, so that a stream's next message moves while the list
 * computes (runtime/executor.c); each holds a boundary buffer, which
 * pt_plan_worker_buffers() counts. */
#define PT_RECEIVES_AHEAD 1

/* Activation records chunk c needs at once on worker w (records[chunks]),
 * found by walking w's list as the executor will. */
void pt_plan_worker_records(const pt_schedule *s, int worker, bool checkpoint, int *records);
/* The backward parts of those records (model.h's pt_grad_record) chunk c
 * needs at once: the micro-batches between their B and their W (a fused
 * BW holds one while it runs). */
void pt_plan_worker_grad_records(const pt_schedule *s, int worker, int *records);
/* The outputs kept apart from those records (model.h: the LM head's
 * probabilities) chunk c needs at once: the micro-batches between their F
 * (or recompute) and the end of their B. */
void pt_plan_worker_outputs(const pt_schedule *s, int worker, bool checkpoint, int *outputs);
/* Boundary buffers each side of an own chunk needs: the most micro-batches
 * any own chunk has in flight (its inputs, kept for the backward even when
 * the records are recomputed), plus the next compute action's receive, one
 * posted ahead of it and the input gradient being sent; -1 without memory. */
int pt_plan_worker_buffers(const pt_schedule *s, int worker);
/* Predicted bytes of worker w by kind. */
int pt_plan_worker_memory(const pt_memory_plan *mp, int worker, pt_memory_use *out);

#endif
