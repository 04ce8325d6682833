/* text_data.h: token streams for language-model training: text corpora
 * and pre-tokenized files, their train/validation split, and the (B, T)
 * batches drawn from them.
 *
 * Sources (see docs/data-and-checkpoints.md for the rules in full):
 *  - text (text_corpus.c): files and directories. A directory contributes
 *    its regular, non-hidden files in byte order of name, skipping symlinks,
 *    sub-directories and any file holding a NUL byte (binary); a file
 *    reached twice (hard link, or named twice) is read once. The last
 *    val_fraction of every file's bytes (rounded down) is validation; the
 *    rest, in order, is training. Read as bytes here (vocab 256); encoded
 *    with a tokenizer by src/text/text_tokens.c.
 *  - token files (token_file.c): llm.c's format (256 int32 header: magic
 *    20240520, version 1 for uint16 tokens or 2 for uint32, token count;
 *    then the tokens) or nanoGPT's headerless uint16 .bin, told apart by the
 *    magic. Every token is checked against the caller's vocabulary size.
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
    uint32_t *train;
    size_t n_train;
    uint32_t *val;
    size_t n_val;
    int vocab;   /* every token is below this */
    int n_files; /* files read */
} pt_token_data;

#define PT_VAL_FRACTION_DEFAULT 0.1

/* ---- Text --------------------------------------------------------------- */

/* A file of a text corpus, as pt_text_files_list finds it. */
typedef struct {
    char *path;
    uint64_t size; /* when listed */
    int in_folder; /* reached through a directory: skipped if binary */
} pt_text_file;

/* The files of n_paths files or directories, in corpus order, each once.
 * *files is malloc'ed: free with pt_text_files_free. PT_EIO if a path
 * cannot be read. */
int pt_text_files_list(const char *const *paths, int n_paths, pt_text_file **files, size_t *n);
void pt_text_files_free(pt_text_file *files, size_t n);
/* The bytes of a listed file (malloc'ed), or *bytes NULL and *n 0 when it
 * gives no text: it is empty, or reached through a directory and binary. */
int pt_text_file_read(const pt_text_file *f, unsigned char **bytes, size_t *n);
/* PT_EINVAL: "PATH...: no text found (...)", for a corpus without text. */
int pt_text_none_found(const char *const *paths, int n_paths);

/* Makes room for k more tokens in ids (pipetrain.h's growable array). */
int pt_token_ids_reserve(pt_token_ids *ids, size_t k);

/* How one side of a file (its training head or validation tail, never
 * empty) becomes tokens: appended to out. */
typedef int (*pt_text_encoder)(void *user, const unsigned char *text, size_t n, pt_token_ids *out);

/* A corpus of n_paths files or directories: the head of every file goes to
 * training and its tail (the last val_fraction of its bytes, rounded down)
 * to validation, each turned into tokens below vocab by encode.
 * 0 <= val_fraction < 1. PT_EIO if a path cannot be read, PT_EINVAL if no
 * text was found. */
int pt_text_data_load_with(const char *const *paths, int n_paths, double val_fraction,
                           pt_text_encoder encode, void *user, int vocab, pt_token_data *out);

/* Byte-level text from n_paths files or directories (vocab 256).
 * 0 <= val_fraction < 1. PT_EIO if a path cannot be read, PT_EINVAL if no
 * text was found. */
int pt_text_data_load(const char *const *paths, int n_paths, double val_fraction,
                      pt_token_data *out);

/* ---- Token files -------------------------------------------------------- */

/* Tokens of one llm.c or nanoGPT file, checked against vocab (at least 1;
 * a nanoGPT file holds uint16 tokens, so at most 65536 for one). *tokens is
 * malloc'ed. PT_EIO if unreadable; PT_EFORMAT (message naming the file and
 * the problem, or the first bad token's index and value). */
int pt_token_file_read(const char *path, int vocab, uint32_t **tokens, size_t *n);

/* 1 when paths are one file named *.bin: what "auto" reads as a token file
 * (anything else is text). */
int pt_data_is_token_file(const char *const *paths, int n_paths);

/* Training tokens from train_path; validation tokens from val_path, or when
 * val_path is NULL the last val_fraction of train_path's tokens. */
int pt_token_data_load_files(const char *train_path, const char *val_path, int vocab,
                             double val_fraction, pt_token_data *out);

void pt_token_data_free(pt_token_data *d);

/* Writes an llm.c token file as it goes, atomically: the header is filled
 * in at the end, and the file appears under its name only on commit.
 * Version 1 (uint16 tokens) when vocab <= 65536, else version 2 (uint32). */
typedef struct pt_token_writer pt_token_writer;
/* PT_EIO when the file cannot be created. */
int pt_token_writer_open(const char *path, int vocab, pt_token_writer **out);
/* PT_EINVAL for a token not below vocab or past 2^31 - 1 tokens; PT_EIO. */
int pt_token_writer_add(pt_token_writer *w, const uint32_t *tokens, size_t n);
/* Writes the header and publishes the file; on failure nothing appears.
 * Frees w either way. */
int pt_token_writer_commit(pt_token_writer *w);
/* Drops the file; frees w. */
void pt_token_writer_abort(pt_token_writer *w);

/* ---- Batches ----------------------------------------------------------- */

/* Draws training batches: each of the B rows is a window of T+1 tokens at
 * an offset uniform in [0, n - T - 1]; inputs are its first T tokens, targets
 * its last T (inputs shifted by one). The only state is rng: saving and
 * restoring rng.s (4 uint64) resumes the exact sequence of batches. */
typedef struct {
    const uint32_t *tokens; /* not owned */
    size_t n;
    int B, T;
    pt_rng rng;
} pt_batch_sampler;

/* PT_EINVAL if B or T < 1, or the stream holds fewer than T+1 tokens. */
int pt_batch_sampler_init(pt_batch_sampler *s, const uint32_t *tokens, size_t n, int B, int T,
                          uint64_t seed);
/* Fills inputs and targets, B*T ints each, row-major (B, T). */
void pt_batch_next(pt_batch_sampler *s, int *inputs, int *targets);

/* Validation batches are fixed: batch k, row b is the window starting at
 * token (k*B + b)*T, so every evaluation sees the same tokens and validation
 * losses compare over time. The number of such full batches in n tokens: */
size_t pt_eval_batch_count(size_t n, int B, int T);
/* Fills batch k < pt_eval_batch_count(n, B, T); PT_EINVAL otherwise. */
int pt_eval_batch(const uint32_t *tokens, size_t n, int B, int T, size_t k, int *inputs,
                  int *targets);

#endif
