/* model_limits.h: how large a model, a batch and a pipeline the command line
 * accepts. The ranges of the shape and count flags shared by train,
 * generate, plan and schedule --memory live here, and two checks run on the
 * flags before anything is built: model_limits_shape() refuses a shape
 * whose element counts the blocks cannot index (they count rows and
 * per-sample floats in int) or whose sizes overflow 64 bits;
 * model_limits_memory() refuses a model whose parameters, gradients,
 * moments and one micro-batch's activations exceed this machine's memory,
 * giving the bytes needed and the flags that asked for them. Both compute
 * in 64 bits with overflow checks and return 0, or 2 after the message. */
#ifndef PT_CLI_MODEL_LIMITS_H
#define PT_CLI_MODEL_LIMITS_H

#include "cli/numbers.h"
#include "pipetrain.h"

#define LIMIT_LAYERS       NUM_RANGE(1, 1024)
#define LIMIT_HEADS        NUM_RANGE(1, 1024)
#define LIMIT_EMBD         NUM_RANGE(1, 65536)
#define LIMIT_SEQ          NUM_RANGE(1, 1048576)
#define LIMIT_VOCAB        NUM_RANGE(1, 16777216)
#define LIMIT_WIDTH        NUM_RANGE(1, 16777216) /* an mlp layer */
#define LIMIT_BATCH        NUM_RANGE(1, 1048576)
#define LIMIT_MICROBATCHES NUM_RANGE(1, 1048576)
#define LIMIT_STAGES       NUM_RANGE(1, 1024)
#define LIMIT_REPLICAS     NUM_RANGE(1, 1024)
#define LIMIT_ZERO         NUM_RANGE(0, 2)
#define LIMIT_VIRTUAL      NUM_RANGE(1, 64)
#define LIMIT_STEPS        NUM_RANGE(1, 2147483647)
#define LIMIT_COUNT0       NUM_RANGE(0, 2147483647) /* --warmup, --eval-every, ...: 0 has a meaning */

/* batch: the samples held at once (a whole batch's tokens). */
int model_limits_shape(const char *cmd, const pt_model_config *cfg, int batch);

/* mbs samples per micro-batch, set by mbs_flags ("--batch/--microbatches");
 * moments per parameter (2 AdamW, 1 SGD, 0 none); whole: this process holds
 * every block (a pipeline on threads), else one block is the least any
 * worker holds. Call after model_limits_shape(). */
int model_limits_memory(const char *cmd, const pt_model_config *cfg, int mbs, const char *mbs_flags,
                        int moments, int whole);

#endif
