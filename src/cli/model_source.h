/* model_source.h: the model a command starts from a checkpoint (train
 * --init-from, generate, eval): the checkpoint's own config, with the model
 * flags the user gave checked against it. A flag that contradicts the
 * checkpoint is refused, never silently preferred; --seq may shorten the
 * context below the checkpoint's n_positions; --heads supplies the head
 * count to a file that does not record it (no config.json beside it). */
#ifndef PT_CLI_MODEL_SOURCE_H
#define PT_CLI_MODEL_SOURCE_H

#include "cli/flags.h"
#include "pipetrain.h"

/* Reads path's config into *cfg, which holds the flags' values on entry
 * (the flags "layers", "heads", "embd", "seq", "vocab" and "widths" of the
 * table, when present and given, are compared). Returns 0, or prints
 * "pipetrain CMD: ..." and returns the exit status: 1 when the checkpoint
 * cannot be read, 2 when a flag contradicts it. */
int model_from_checkpoint(const char *cmd, const char *path, const flag *flags, int n,
                          pt_model_config *cfg);

/* The --precision a forward-only command (eval, generate) runs in: the
 * checkpoint's float weights then go to the products as bf16, as in a bf16
 * run. */
#define FLAG_PRECISION(var)                                                                     \
    FLAG("precision", FLAG_STRING, &(var), "fp32|bf16",                                         \
         "the forward's arithmetic: bf16 rounds the products' operands and the activations as " \
         "a --precision bf16 run does, on the product kernel `auto` picks (default fp32; "      \
         "docs/bf16.md)")

/* Sets cfg's precision from a --precision value; 0, or prints "pipetrain
 * CMD: ..." and returns 2. */
int model_precision(const char *cmd, const char *precision, pt_model_config *cfg);

/* The folder holding the tokenizer files of the model at path (the folder
 * itself, or the one a file is in), written into buf; NULL when it has
 * none. */
const char *model_tokenizer(const char *path, char *buf, size_t n);

/* A note on stderr when path's config.json asks for dropout, which pipetrain
 * does not apply. */
void model_note_dropout(const char *cmd, const char *path);

#endif
