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
 * Tied copies (lm_head.weight) hold the same gradient as what they copy once
 * pt_model_sum_tied_grads() has run; they are stepped like any parameter, so
 * both copies stay equal, and counted once in the norm. */
#ifndef PT_RUNTIME_OPTIMIZER_H
#define PT_RUNTIME_OPTIMIZER_H

#include "pipetrain.h"

/* Create, destroy, the rate, the clip and the step are public
 * (include/pipetrain.h). */

/* Bytes of every moment buffer. */
size_t pt_optimizer_bytes(const pt_optimizer *o);

/* The moment buffers of parameter i (NULL when the optimizer has none):
 * AdamW: exp_avg, exp_avg_sq; SGD: momentum, NULL. Checkpoints save these. */
float *pt_optimizer_state(pt_optimizer *o, const pt_model *m, int i, int which);

#endif
