/* checkpoint_format.h: what the checkpoint files (checkpoint*.c) share and
 * nothing else includes: the names a set's files and a moment's tensors
 * take, the metadata of the single-file format, the model config as
 * key/value text (one list serves a file's __metadata__ and
 * trainer_state.json), and the checks on a loaded config. */
#ifndef PT_IO_CHECKPOINT_FORMAT_H
#define PT_IO_CHECKPOINT_FORMAT_H

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "tensor/error.h"

/* ---- Names ------------------------------------------------------------- */

#define PT_SET_WEIGHTS "model"
#define PT_SET_MOMENTS "optimizer"
#define PT_SET_STATE   "trainer_state.json"
#define PT_SET_CONFIG  "config.json"
#define PT_NAME_MAX    256
/* The tokenizer files a set may carry (NULL-terminated). */
extern const char *const pt_set_tokenizer_files[];
/* GPT2LMHeadModel's names start with it; GPT2Model's (the "gpt2" files on
 * the Hugging Face hub) do not, and are read as the same tensors. */
#define PT_GPT_PREFIX "transformer."

/* "model.safetensors" for one shard, else "model-0000k-of-0000N.safetensors"
 * (k 1-based); stem is PT_SET_WEIGHTS or PT_SET_MOMENTS. */
void pt_set_file_name(char *buf, size_t n, const char *stem, int shard, int n_shards);
/* "model.safetensors.index.json" */
void pt_set_index_name(char *buf, size_t n, const char *stem);

/* A moment's name without prefix: "exp_avg", "exp_avg_sq" (AdamW),
 * "momentum" (SGD, which = 0 only); NULL when the kind has no such moment.
 * One file puts "optimizer." before it, a set nothing; then "." and the
 * parameter's name. */
const char *pt_ckpt_moment(pt_optim_kind kind, int which);
const char *pt_ckpt_optim_name(pt_optim_kind kind);
/* GPT-2's causal mask buffers, which older transformers versions saved. */
int pt_ckpt_ignorable(const char *name);
/* 1 to 64 of [A-Za-z0-9._-]. */
int pt_ckpt_check_run_id(const char *run_id);

/* ---- Metadata as key/value text --------------------------------------- */

#define PT_CKPT_MAX_META 28

typedef struct {
    char key[PT_CKPT_MAX_META][40];
    char value[PT_CKPT_MAX_META][160];
    char spec[PT_SPEC_MAX_TEXT]; /* the one long value: a spec model's layers */
    pt_st_meta meta[PT_CKPT_MAX_META];
    int n;
} pt_ckpt_meta;

void pt_ckpt_meta_add(pt_ckpt_meta *l, const char *key, const char *fmt, ...) PT_PRINTF(3, 4);
/* A spec on one line, as a checkpoint records it and compares it:
 * comments dropped, newlines as "; ", runs of blanks as one space. */
void pt_ckpt_spec_line(const char *spec, char *out, size_t n);
/* "format": "pt" (what transformers asks of a weights file), then the
 * config (model, n_layer ... or widths, seed). */
void pt_ckpt_config_meta(pt_ckpt_meta *l, const pt_model_config *c);
/* The single file's whole __metadata__: the config, then "optimizer" when
 * optimizer is not NULL, then step, data_rng, data_drawn when state is not. */
void pt_ckpt_file_meta(pt_ckpt_meta *l, const pt_model_config *c, const char *optimizer,
                       const pt_train_state *state);

/* Reads a value by key as text (NULL when absent); buf may hold it. */
typedef const char *(*pt_ckpt_lookup)(const void *ctx, const char *key, char *buf, size_t n);
/* A config from pt_ckpt_config_meta's keys; path names the source in
 * messages. */
int pt_ckpt_config_parse(pt_ckpt_lookup get, const void *ctx, const char *path,
                         pt_model_config *cfg);
/* PT_EFORMAT naming the difference when a checkpoint's config (a) is not the
 * model's (b). */
int pt_ckpt_same_config(const pt_model_config *a, const pt_model_config *b, const char *path);
/* Four 16-digit hex words, one after the other, into the sampler's state. */
int pt_ckpt_parse_rng(const char *hex, pt_rng *rng);

#endif
