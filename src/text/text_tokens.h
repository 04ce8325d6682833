/* text_tokens.h: text corpora encoded with a tokenizer, for training a gpt
 * on text with --tokenizer. The files are those of io/text_data.h's rules,
 * split as it splits bytes (the last val_fraction of every file's bytes is
 * validation); each side of each file is encoded on its own, after an
 * <|endoftext|> when the tokenizer has one, as llm.c's and nanoGPT's
 * preparers join documents. Called by the trainer (src/train/trainer.c) and
 * `pipetrain eval`. */
#ifndef PT_TEXT_TEXT_TOKENS_H
#define PT_TEXT_TEXT_TOKENS_H

#include "pipetrain.h"

#include "io/text_data.h"

/* Like pt_text_data_load, with out->vocab the tokenizer's size. */
int pt_text_data_encode(const char *const *paths, int n_paths, double val_fraction,
                        pt_tokenizer *tok, pt_token_data *out);

/* The same with the tokenizer at tokenizer (pt_tokenizer_load's path), whose
 * size must be vocab, the model's (PT_EINVAL naming both otherwise). */
int pt_text_data_encode_path(const char *const *paths, int n_paths, double val_fraction,
                             const char *tokenizer, int vocab, pt_token_data *out);

/* Appends one document to ids: its <|endoftext|> (when the tokenizer has
 * one) and the ids of text[0..n). Nothing for an empty document. */
int pt_tokenizer_encode_document(pt_tokenizer *tok, const char *text, size_t n, pt_token_ids *ids);

#endif
