/* checkpoint.h: a training run's state on disk, as one safetensors file or
 * as a checkpoint set (a folder in Hugging Face's sharded layout) that every
 * pipeline stage writes its own share of, in parallel.
 *
 * One file (today's format, pt_checkpoint_save): every parameter under its
 * Hugging Face GPT-2 name (the tied lm_head.weight is left out, as
 * transformers does, and restored from transformer.wte.weight), then the
 * optimizer's moments as optimizer.exp_avg.<name> and
 * optimizer.exp_avg_sq.<name> (AdamW) or optimizer.momentum.<name> (SGD).
 * __metadata__: "format": "pipetrain", the model config (model, n_layer,
 * n_head, n_embd, n_positions, vocab_size or widths, seed), the optimizer
 * kind, the step, and the data sampler's state (data_rng: four 64-bit words
 * in hex; data_drawn: samples drawn). Written atomically (temporary file,
 * fsync, rename).
 *
 * A set (folder): model.safetensors, or model-0000k-of-0000N.safetensors and
 * model.safetensors.index.json, holding the weights alone under the same
 * names; optimizer.safetensors, or optimizer-0000k-of-0000N.safetensors and
 * optimizer.safetensors.index.json, holding exp_avg.<name>,
 * exp_avg_sq.<name> or momentum.<name>; trainer_state.json (run id, step,
 * data position, optimizer kind, model config); for a gpt, config.json in
 * transformers' GPT-2 form. Each shard's __metadata__ holds "format": "pt",
 * "run_id" and "step". docs/data-and-checkpoints.md describes it all.
 * A save into a set: one worker calls begin, every stage calls write_shard
 * (threads or processes, at once), then one worker calls publish, which
 * swaps the finished folder in whole: a kill at any moment leaves the
 * previous set under the name, loadable.
 *
 * Loading takes either form, and files written by other programs under
 * Hugging Face's names. It reads only the tensors the model holds (a
 * pipeline stage's part), one at a time by offset, and checks every dtype,
 * shape, run id and the config before touching the model, so a refused
 * checkpoint changes nothing.
 * Callers: the trainer (save, resume), the pipeline (sets), the generate and
 * merge commands. */
#ifndef PT_IO_CHECKPOINT_H
#define PT_IO_CHECKPOINT_H

#include "runtime/optimizer.h"
#include "tensor/rng.h"

typedef struct {
    long step;           /* optimizer steps taken */
    pt_rng data_rng;     /* the training sampler's stream */
    uint64_t data_drawn; /* samples drawn (digits sampler) */
} pt_train_state;

/* Saves a whole model (every block held). A path ending in ".safetensors"
 * is one file; any other path is a set of one shard (a folder). opt and
 * state may be NULL: a weights-only checkpoint. */
int pt_checkpoint_save(const char *path, const pt_model *m, pt_optimizer *opt,
                       const pt_train_state *state);

/* ---- Sets, written by every stage ------------------------------------- */

/* A run id: the same for every shard of one save, so shards of two runs are
 * never mixed. 1 to 64 of [A-Za-z0-9._-]. This makes a random one. */
#define PT_RUN_ID_MAX 65
int pt_checkpoint_new_run_id(char *buf, size_t n);

/* Prepares an empty staging folder beside dest (a set folder, or a file
 * ending in ".safetensors") and writes its path into staging (n bytes).
 * Removes what earlier killed saves into dest left (staging folders,
 * temporary files). Refuses a dest that exists and is neither a set nor an
 * empty folder (or, for a file dest, not a file), so nothing else is ever
 * replaced. One worker calls it; one save into a dest at a time. */
int pt_checkpoint_begin(const char *dest, char *staging, size_t n);

/* Stage `shard` (0-based) of n_shards writes the parameters its part model
 * holds (tied copies left out) into the staging folder, and their moments
 * when opt is not NULL; state (may be NULL) gives the step recorded in the
 * files' metadata. Every stage calls it at once: each touches only its own
 * two files. */
int pt_checkpoint_write_shard(const char *staging, int shard, int n_shards, const pt_model *stage,
                              pt_optimizer *opt, const pt_train_state *state, const char *run_id);

/* After every stage's write_shard returned: reads the shards' headers,
 * checks that every parameter of the model (desc: any model of the run's
 * config, a description will do) is in exactly one shard with its shape,
 * and every moment too when opt is not NULL (opt gives the optimizer kind
 * only), and that every shard carries run_id and the step; writes
 * trainer_state.json, config.json and the indexes, the weights index last;
 * then puts the set under dest at once (the old set, if any, is swapped out
 * and removed). A dest ending in ".safetensors" gets the set merged into one
 * file instead (byte-identical to pt_checkpoint_save of the whole model),
 * written atomically. The staging folder is gone afterwards. */
int pt_checkpoint_publish(const char *staging, const char *dest, int n_shards, const pt_model *desc,
                          const pt_optimizer *opt, const pt_train_state *state, const char *run_id);

/* Merges a set (folder) into one file of the single-file format, the same
 * bytes pt_checkpoint_save writes for the whole model; one tensor in memory
 * at a time. */
int pt_checkpoint_merge(const char *set_dir, const char *out_file);

/* ---- Loading either form ---------------------------------------------- */

/* The model config a checkpoint (file or folder) holds. One without
 * pipetrain's record (another program's gpt) gets it from config.json or
 * the tensor shapes; n_head then comes from config.json, the file's
 * metadata or, failing those, default_heads. */
int pt_checkpoint_read_config(const char *path, int default_heads, pt_model_config *cfg);

typedef struct {
    /* Resuming (opt and state given) from weights alone (no optimizer
     * state): refused unless this is set; then the held moments are zeroed
     * and the state comes from the checkpoint if it has one, else is step 0
     * with data_drawn 0 and data_rng as the caller had it. */
    int allow_fresh_optimizer;
} pt_checkpoint_load_options;

/* Loads into m (a whole model or a part) the tensors it holds, and when opt
 * and state are not NULL the held moments and the training state. A tied
 * copy the checkpoint leaves out (lm_head.weight) is read from what it
 * copies, also when this part does not hold that. */
int pt_checkpoint_load(const char *path, pt_model *m, pt_optimizer *opt, pt_train_state *state);
int pt_checkpoint_load_with(const char *path, pt_model *m, pt_optimizer *opt, pt_train_state *state,
                            const pt_checkpoint_load_options *o);

#endif
