/* optimizer.h: AdamW and SGD with momentum over a model's parameters, with
 * clipping by global gradient norm and the learning-rate schedule (linear
 * warm-up, then cosine decay).
 *
 * The state (moments) is laid out like the model's parameter arena, so a
 * pipeline worker steps just the blocks it holds (first..last) and workers
 * never touch each other's state. A global clip needs every worker's sum of
 * squares: pt_optimizer_grad_sq() gives a range's share, the caller adds the
 * shares (a plain sum on one worker, an all-reduce across a pipeline) and
 * passes the clip factor to pt_optimizer_step().
 * Sharded optimizer state (--zero): an optimizer may own the moments of
 * some ranges of the parameter arena only (pt_optimizer_create_sharded);
 * it then steps the parameters inside them and nothing else, and the
 * caller brings the rest of the parameters from the other shards' owners.
 * Tied copies (lm_head.weight) hold the same gradient as what they copy once
 * pt_model_sum_tied_grads() has run; they are stepped like any parameter, so
 * both copies stay equal, and counted once in the norm. */
#ifndef PT_RUNTIME_OPTIMIZER_H
#define PT_RUNTIME_OPTIMIZER_H

#include "pipetrain.h"

/* Create, destroy, the config, the rate, the norm's share, the clip and
 * the step are public (include/pipetrain.h). */

/* Moments for the parameter arena's floats [lo[r], hi[r]) only (ascending,
 * disjoint ranges): a replica's shard of its stage. */
int pt_optimizer_create_sharded(const pt_model *m, const pt_optim_config *cfg, const size_t *lo,
                                const size_t *hi, int n, pt_optimizer **out);
/* The owned ranges (one, [0, capacity), unless sharded). */
int pt_optimizer_n_ranges(const pt_optimizer *o);
void pt_optimizer_range(const pt_optimizer *o, int r, size_t *lo, size_t *hi);

/* pt_optimizer_grad_sq over the arena's floats [lo, hi) only, walked in the
 * same order: a shard's share. On tensor slice `slice` above 0 only the
 * tensors split across the slices count (slice 0 counts the whole ones
 * every slice holds): the slices' shares add up to the whole model's. */
double pt_optimizer_grad_sq_range(const pt_model *m, int first, int last, size_t lo, size_t hi,
                                  int slice);
/* pt_optimizer_step for the parameters inside the arena's floats [lo, hi)
 * that the optimizer owns moments of; the per-element update is the same. */
void pt_optimizer_step_range(pt_optimizer *o, pt_model *m, int first, int last, size_t lo,
                             size_t hi, long step, float lr, float clip);

/* Bytes of every moment buffer. */
size_t pt_optimizer_bytes(const pt_optimizer *o);

/* The moment buffers of parameter i (NULL when the optimizer has none):
 * AdamW: exp_avg, exp_avg_sq; SGD: momentum, NULL. Checkpoints save these. */
float *pt_optimizer_state(pt_optimizer *o, const pt_model *m, int i, int which);
/* Moment `which` of the arena's floats [off, off + n), or NULL unless one
 * owned range holds all of them. */
float *pt_optimizer_moments(pt_optimizer *o, int which, size_t off, size_t n);
/* Both moments of [lo, hi) from src to dst, where both own them (a sharded
 * optimizer and a full one of the same stage: checkpoints). */
void pt_optimizer_copy_moments(pt_optimizer *dst, pt_optimizer *src, size_t lo, size_t hi);

#endif
