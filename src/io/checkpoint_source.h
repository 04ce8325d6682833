/* checkpoint_source.h: where a checkpoint's tensors are, for the code that
 * loads and merges (checkpoint_load.c). A source is one safetensors file
 * (pipetrain's format, or another program's under Hugging Face's names) or
 * a set folder (shards, indexes, trainer_state.json, config.json); asked
 * for a parameter's weights or moments by the parameter's name, it answers
 * with the file and the tensor's header entry. Opening reads the indexes
 * and trainer_state.json and checks that every file an index names exists;
 * shard files are opened (headers only) when first asked for, and each is
 * then checked to carry the set's run id and step. No tensor data is read
 * here. */
#ifndef PT_IO_CHECKPOINT_SOURCE_H
#define PT_IO_CHECKPOINT_SOURCE_H

#include "io/checkpoint_format.h"
#include "io/json.h"

typedef struct pt_ckpt_source pt_ckpt_source;

/* path: a regular file or a folder. PT_EIO when it cannot be read,
 * PT_EFORMAT when something in it is malformed or inconsistent. */
int pt_ckpt_source_open(const char *path, pt_ckpt_source **out);
void pt_ckpt_source_close(pt_ckpt_source *s);
const char *pt_ckpt_source_path(const pt_ckpt_source *s);

/* The tensor of parameter `name`: its weights (which -1) or moment `which`
 * of an optimizer of `kind`. PT_OK with *info NULL when the checkpoint has
 * no such tensor; an error when a file it needs is broken. */
int pt_ckpt_source_find(pt_ckpt_source *s, const char *name, int which, pt_optim_kind kind,
                        const pt_safetensors **st, const pt_st_info **info);

/* The model config (see pt_checkpoint_read_config). */
int pt_ckpt_source_config(pt_ckpt_source *s, int default_heads, pt_model_config *cfg);
/* "adamw" or "sgd" when the checkpoint holds moments, else NULL. */
const char *pt_ckpt_source_optimizer(const pt_ckpt_source *s);
/* PT_OK with the training state; 1 when the checkpoint records none; an
 * error when the record is malformed. */
/* config.json as parsed (of the folder, or beside the file), once
 * pt_ckpt_source_config has looked for it; NULL when there is none. */
const pt_json *pt_ckpt_source_hf_config(const pt_ckpt_source *s);
int pt_ckpt_source_state(const pt_ckpt_source *s, pt_train_state *state);
/* PT_EFORMAT naming the first tensor the checkpoint holds that is not a
 * parameter of m (nor a moment of one, nor a mask buffer). */
int pt_ckpt_source_check_names(pt_ckpt_source *s, const pt_model *m);

#endif
