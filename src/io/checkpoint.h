/* checkpoint.h: a training run's state on disk, as one safetensors file or
 * as a checkpoint set (a folder in Hugging Face's sharded layout) that every
 * pipeline stage writes its own share of, in parallel.
 *
 * A set (folder) is the whole state, and what transformers loads as a
 * model folder: model.safetensors, or model-0000k-of-0000N.safetensors and
 * model.safetensors.index.json, holding the weights alone under Hugging
 * Face's GPT-2 names (the tied lm_head.weight left out); optimizer.safetensors, or
 * optimizer-0000k-of-0000N.safetensors and optimizer.safetensors.index.json, holding
 * exp_avg.<name>, exp_avg_sq.<name> or momentum.<name>; trainer_state.json (run id, step, data
 * position, optimizer kind, model config); for a gpt, config.json in transformers' GPT-2 form. Each
 * shard's __metadata__ holds "format": "pt", "run_id" and "step". docs/data-and-checkpoints.md
 * describes it all. A save into a set: one worker calls begin, every stage calls write_shard
 * (threads or processes, at once), then one worker calls publish, which
 * swaps the finished folder in whole: a kill at any moment leaves the
 * previous set under the name, loadable.
 *
 * Loading takes either form, and files and folders written by other
 * programs under Hugging Face's names (with or without GPT2LMHeadModel's
 * "transformer." prefix; F16 and BF16 weights widened), taking the config
 * from pipetrain's record, else config.json (in the folder, or beside the
 * file), else the tensor shapes. It reads only the tensors the model holds (a
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

/* 1 when path names a single file (ends in ".safetensors"), 0 for a set.
 * One file holds the weights alone, each parameter under its Hugging Face
 * name (the tied lm_head.weight left out), with __metadata__ "format": "pt",
 * the model config and the step: an export for inference and other
 * programs, which a run can start from but not resume exactly. */
int pt_checkpoint_is_file(const char *path);

/* Saves a whole model (every block held): a set of one shard (a folder), or
 * for a path ending in ".safetensors" one file of the weights (opt must
 * then be NULL). opt and state may be NULL: a set of weights alone. */
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

/* Copies the tokenizer a run used into the staging folder, each file
 * atomically: tokenizer, a tokenizer.json file or a folder holding
 * tokenizer.json or vocab.json and merges.txt (what pt_tokenizer_load
 * reads), so the set is a model folder with its tokenizer. One worker calls
 * it, before publish. */
int pt_checkpoint_write_tokenizer(const char *staging, const char *tokenizer);

/* After every stage's write_shard returned: reads the shards' headers,
 * checks that every parameter of the model (desc: any model of the run's
 * config, a description will do) is in exactly one shard with its shape,
 * and every moment too when opt is not NULL (opt gives the optimizer kind
 * only), and that every shard carries run_id and the step; writes
 * trainer_state.json, config.json and the indexes, the weights index last;
 * then puts the set under dest at once (the old set, if any, is swapped out
 * and removed). A dest ending in ".safetensors" gets the set's weights
 * merged into one file instead (the stages then write no moments: opt
 * NULL), written atomically. The staging folder is gone afterwards. */
int pt_checkpoint_publish(const char *staging, const char *dest, int n_shards, const pt_model *desc,
                          const pt_optimizer *opt, const pt_train_state *state, const char *run_id);

/* Writes a set's (or another file's) weights as one file, the same bytes
 * pt_checkpoint_save writes for the whole model; one tensor in memory at a
 * time. Half-precision weights are widened to F32. */
int pt_checkpoint_merge(const char *set_dir, const char *out_file);

/* ---- Loading either form ---------------------------------------------- */

/* The model config a checkpoint (file or folder) holds. One without
 * pipetrain's record (another program's gpt) gets it from config.json or
 * the tensor shapes; n_head then comes from config.json, the file's
 * metadata or, failing those, default_heads. */
int pt_checkpoint_read_config(const char *path, int default_heads, pt_model_config *cfg);

/* The largest dropout rate a checkpoint's config.json asks for (0 when it
 * has none, or no config.json); *field (may be NULL) names it. */
double pt_checkpoint_dropout(const char *path, const char **field);

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

/* Rewrites the weights file `path` (.safetensors) with every tensor as
 * BF16, rounded to nearest even, its metadata kept; atomic. */
int pt_checkpoint_narrow_bf16(const char *path);

#endif
