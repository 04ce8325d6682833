/* hf_config.h: Hugging Face's GPT2Config (config.json) read into a model
 * config and written from one.
 *
 * Reading takes what transformers writes for a GPT-2 and refuses, naming
 * the field and its value, anything that would make pipetrain compute
 * something else: another model type or architecture, an activation it does
 * not have, cross-attention, a value of the wrong type. Fields that do not
 * change the arithmetic (token ids, initializer_range, use_cache, the
 * summary head of the double-heads model, ...) are ignored, as transformers
 * ignores what a model does not use. Dropout rates are read and reported by
 * pt_hf_config_dropout(): pipetrain trains without dropout, and its callers
 * say so. Callers: the checkpoint source (a folder's or a file's
 * config.json) and the set writer. */
#ifndef PT_IO_HF_CONFIG_H
#define PT_IO_HF_CONFIG_H

#include <stdio.h>

#include "io/json.h"
#include "pipetrain.h"

/* A gpt config from a parsed config.json object; path names it in messages.
 * seq_len is n_positions (the longest context the model takes). */
int pt_hf_config_read(const pt_json *obj, const char *path, pt_model_config *cfg);

/* The largest of the config's dropout rates (attn_pdrop, embd_pdrop,
 * resid_pdrop), 0 when none is set; *name receives its field. */
double pt_hf_config_dropout(const pt_json *obj, const char **name);

/* The config.json transformers loads as this gpt: every field that shapes
 * the arithmetic, dropout 0, float32; bos_token_id and eos_token_id are
 * endoftext (GPT-2's <|endoftext|> is both), null when it is -1. */
int pt_hf_config_write(FILE *f, const pt_model_config *c, int endoftext);

/* "gelu_new", "gelu", "relu", "silu" */
const char *pt_hf_activation_name(pt_activation a);
/* The activation named (transformers' ACT2FN names for the functions
 * pipetrain computes: gelu_new, gelu_pytorch_tanh and gelu_fast are GELU's
 * tanh form, gelu and gelu_python its exact form, silu and swish the same);
 * -1 for any other name. */
int pt_hf_activation_parse(const char *name);

#endif
