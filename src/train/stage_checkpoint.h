/* stage_checkpoint.h: checkpoints of a pipeline whose workers each own a
 * stage. Loading: every worker of this process reads, from a checkpoint
 * file or set, only the tensors its stage holds, so a run resumes under any
 * stage count, replica count, partition or schedule. Saving: every stage
 * (its replica 0) writes its own shard of a set at once, with no gather,
 * and the main process publishes the set (io/checkpoint.h). Callers: the
 * trainer (save, resume), the generate command and the tests. */
#ifndef PT_TRAIN_STAGE_CHECKPOINT_H
#define PT_TRAIN_STAGE_CHECKPOINT_H

#include "io/checkpoint.h"

/* Loads the parameters (and, when state is not NULL, the moments and the
 * run state) of every local worker's stage from path. */
int pt_stage_checkpoint_load(pt_pipeline *p, const char *path, pt_train_state *state,
                             const pt_checkpoint_load_options *o);
/* Saves the pipeline's parameters, moments and the run state under path: a
 * set (folder), or one file when path ends in ".safetensors". Every process
 * of the pipeline calls it. */
int pt_stage_checkpoint_save(pt_pipeline *p, const char *path, const pt_train_state *state,
                             const char *tokenizer);

#endif
