/* added_tokens.h: tokens added on top of a BPE vocabulary (<|endoftext|>,
 * ...), found in text before pre-tokenisation the way Hugging Face's
 * tokenizers finds them (AddedVocabulary): at the leftmost place where one
 * matches, the longest; a single_word token only between non-word
 * characters; lstrip and rstrip tokens take the whitespace beside them
 * along. Tokens matched on the raw text (normalized: false) are split off
 * first, then in what is left those matched on normalised text; pipetrain
 * has no normaliser, so both sets match the same bytes, in that order.
 *
 * Built by tokenizer_load.c; tokenizer.c walks text with pt_added_next. */
#ifndef PT_TEXT_ADDED_TOKENS_H
#define PT_TEXT_ADDED_TOKENS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    unsigned char *content; /* its UTF-8 bytes, at least one */
    size_t len;
    uint32_t id;
    int single_word, lstrip, rstrip, normalized, special;
} pt_added_token;

/* The tokens one pass looks for: longest first, so the first that matches
 * at a place is the longest. */
typedef struct {
    const pt_added_token **tokens;
    size_t n;
    unsigned char first[256]; /* 1: some token starts with this byte */
    int only_first;           /* the one first byte they all share, or -1 */
} pt_added_set;

/* Where the search in one stretch of text stands; start it zeroed. */
typedef struct {
    size_t search; /* the next match starts here or later */
    size_t done;   /* the text before this is handed out */
} pt_added_cursor;

/* The set of tokens with normalized == want from tokens[0..n); -1 if
 * memory ran out. */
int pt_added_set_build(pt_added_set *set, const pt_added_token *tokens, size_t n, int want);
void pt_added_set_free(pt_added_set *set);

/* Finds the next added token in s[0..n) from the cursor: its span
 * [*start, *stop), whitespace taken by lstrip/rstrip included, and its id.
 * The text from the cursor's done to *start is plain text. Returns 0 when
 * there is none (the rest, from done, is plain). */
int pt_added_next(const pt_added_set *set, const unsigned char *s, size_t n, pt_added_cursor *c,
                  size_t *start, size_t *stop, uint32_t *id);

#endif
