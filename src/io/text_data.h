/* text_data.h: token streams for language-model training: byte-level text
 * corpora and pre-tokenized files, their train/validation split, and the
 * (B, T) batches drawn from them.
 *
 * Sources (see docs/data-and-checkpoints.md for the rules in full):
 *  - text (text_corpus.c): files and directories read as bytes, vocab 256. A
 *    directory contributes its regular, non-hidden files in byte order of
 *    name, skipping symlinks, sub-directories and any file holding a NUL byte
 *    (binary); a file reached twice (hard link, or named twice) is read once.
 *    The last val_fraction of every file (rounded down) is validation; the
 *    rest, in order, is training.
 *  - token files (token_file.c): llm.c's format (256 int32 header: magic
 *    20240520, version 1, token count; then uint16 tokens) or nanoGPT's
 *    headerless uint16 .bin, told apart by the magic. Every token is checked
 *    against the caller's vocabulary size.
 * Batches (text_batches.c): random windows drawn with a pt_rng (training) or
 * a fixed sequence of windows (validation).
 * Callers: the train command and tests. */
#ifndef PT_IO_TEXT_DATA_H
#define PT_IO_TEXT_DATA_H

#include "pipetrain.h"

#include <stddef.h>
#include <stdint.h>

#include "tensor/rng.h"

/* A corpus as two token streams. Owned: free with pt_token_data_free(). */
typedef struct {
    uint16_t *train;
    size_t n_train;
    uint16_t *val;
    size_t n_val;
    int vocab;   /* every token is below this */
    int n_files; /* files read */
} pt_token_data;

#define PT_VAL_FRACTION_DEFAULT 0.1

/* Byte-level text from n_paths files or directories (vocab 256).
 * 0 <= val_fraction < 1. PT_EIO if a path cannot be read, PT_EINVAL if no
 * text was found. */
int pt_text_data_load(const char *const *paths, int n_paths, double val_fraction,
                      pt_token_data *out);

/* Tokens of one llm.c or nanoGPT file, checked against vocab (1..65536).
 * *tokens is malloc'ed. PT_EIO if unreadable; PT_EFORMAT (message naming the
 * file and the problem, or the first bad token's index and value). */
int pt_token_file_read(const char *path, int vocab, uint16_t **tokens, size_t *n);

/* Training tokens from train_path; validation tokens from val_path, or when
 * val_path is NULL the last val_fraction of train_path's tokens. */
int pt_token_data_load_files(const char *train_path, const char *val_path, int vocab,
                             double val_fraction, pt_token_data *out);

void pt_token_data_free(pt_token_data *d);

/* ---- Batches ----------------------------------------------------------- */

/* Draws training batches: each of the B rows is a window of T+1 tokens at
 * an offset uniform in [0, n - T - 1]; inputs are its first T tokens, targets
 * its last T (inputs shifted by one). The only state is rng: saving and
 * restoring rng.s (4 uint64) resumes the exact sequence of batches. */
typedef struct {
    const uint16_t *tokens; /* not owned */
    size_t n;
    int B, T;
    pt_rng rng;
} pt_batch_sampler;

/* PT_EINVAL if B or T < 1, or the stream holds fewer than T+1 tokens. */
int pt_batch_sampler_init(pt_batch_sampler *s, const uint16_t *tokens, size_t n, int B, int T,
                          uint64_t seed);
/* Fills inputs and targets, B*T ints each, row-major (B, T). */
void pt_batch_next(pt_batch_sampler *s, int *inputs, int *targets);

/* Validation batches are fixed: batch k, row b is the window starting at
 * token (k*B + b)*T, so every evaluation sees the same tokens and validation
 * losses compare over time. The number of such full batches in n tokens: */
size_t pt_eval_batch_count(size_t n, int B, int T);
/* Fills batch k < pt_eval_batch_count(n, B, T); PT_EINVAL otherwise. */
int pt_eval_batch(const uint16_t *tokens, size_t n, int B, int T, size_t k, int *inputs,
                  int *targets);

#endif
