/* checkpoint.h: a training run's state as one safetensors file.
 *
 * Tensors: every parameter under its Hugging Face GPT-2 name (the tied
 * lm_head.weight is left out, as transformers does, and restored from
 * transformer.wte.weight), then the optimizer's moments as
 * optimizer.exp_avg.<name> and optimizer.exp_avg_sq.<name> (AdamW) or
 * optimizer.momentum.<name> (SGD). __metadata__: "format": "pipetrain", the
 * model config (model, n_layer, n_head, n_embd, n_positions, vocab_size or
 * widths, seed), the optimizer kind, the step, and the data sampler's state
 * (data_rng: four 64-bit words in hex; data_drawn: samples drawn).
 *
 * Written atomically (temporary file, fsync, rename). Loading checks every
 * tensor's dtype and shape and the config before touching the model, so a
 * refused file changes nothing. A file written by another program with
 * Hugging Face's names (no pipetrain metadata) loads too: its config is read
 * from the tensor shapes, with n_head from metadata when present.
 * Callers: the trainer (save, resume) and the generate command. */
#ifndef PT_IO_CHECKPOINT_H
#define PT_IO_CHECKPOINT_H

#include "runtime/optimizer.h"
#include "tensor/rng.h"

typedef struct {
    long step;           /* optimizer steps taken */
    pt_rng data_rng;     /* the training sampler's stream */
    uint64_t data_drawn; /* samples drawn (digits sampler) */
} pt_train_state;

int pt_checkpoint_save(const char *path, const pt_model *m, pt_optimizer *opt,
                       const pt_train_state *state);

/* The model config a checkpoint holds. A file without pipetrain metadata
 * (another program's gpt) gets it from the tensor shapes; n_head then comes
 * from its metadata or, failing that, from default_heads. */
int pt_checkpoint_read_config(const char *path, int default_heads, pt_model_config *cfg);

/* Loads parameters into m (whose config must match the file's), and when opt
 * and state are not NULL the optimizer moments and the training state. */
int pt_checkpoint_load(const char *path, pt_model *m, pt_optimizer *opt, pt_train_state *state);

#endif
