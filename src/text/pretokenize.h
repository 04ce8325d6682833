/* pretokenize.h: GPT-2's pre-tokenisation, the pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * that cuts text into the words BPE then splits, written by hand over UTF-8.
 * Called by tokenizer.c for each stretch of text between added tokens. */
#ifndef PT_TEXT_PRETOKENIZE_H
#define PT_TEXT_PRETOKENIZE_H

#include <stddef.h>

/* Where the piece that starts at s[i] ends (i < n): the pattern's leftmost
 * match at i, taken the way a backtracking engine (Oniguruma, as Hugging
 * Face's tokenizers runs it) takes it. A byte that is not well-formed UTF-8
 * counts as a character of its own that is neither a letter, a number nor
 * a space. */
size_t pt_pretoken_end(const unsigned char *s, size_t n, size_t i);

#endif
