/* stage_checkpoint.h: checkpoints of a pipeline whose workers each own a
 * stage. Loading: every worker of this process reads, from a checkpoint
 * file, only the tensors its stage holds (so a run resumes under any stage
 * count, partition or schedule). Saving: every stage's tensors end up in one
 * file. Callers: the trainer (save, resume) and the generate command. */
#ifndef PT_TRAIN_STAGE_CHECKPOINT_H
#define PT_TRAIN_STAGE_CHECKPOINT_H

#include "io/checkpoint.h"

/* Loads the parameters (and, when state is not NULL, the moments and the
 * run state) of every local worker's stage from path. */
int pt_stage_checkpoint_load(pt_pipeline *p, const char *path, pt_train_state *state);
/* Writes the pipeline's parameters, moments and the run state to path. */
int pt_stage_checkpoint_save(pt_pipeline *p, const char *path, const pt_train_state *state);

#endif
