/* tokenizer.h: what a pt_tokenizer holds, shared by the loader
 * (tokenizer_load.c), which fills it from the files, and the encoder and
 * decoder (tokenizer.c). */
#ifndef PT_TEXT_TOKENIZER_H
#define PT_TEXT_TOKENIZER_H

#include "pipetrain.h"

#include "text/added_tokens.h"
#include "text/bpe.h"

#define PT_NO_TOKEN UINT64_MAX

struct pt_tokenizer {
    pt_bpe bpe;
    /* decoding: per id, offset << 32 | length of its bytes in `bytes`, or
     * PT_NO_TOKEN for an id no token has */
    uint32_t n_ids;
    uint64_t *piece;
    unsigned char *bytes;
    size_t bytes_n, bytes_cap;
    /* added tokens, in the file's order, and the two passes that find them:
     * [0] raw (normalized false), [1] normalized */
    pt_added_token *added;
    size_t n_added;
    pt_added_set sets[2];
    int add_prefix_space; /* ByteLevel: a space before text that lacks one */
    int use_regex;        /* ByteLevel: GPT-2's pattern cuts words (else one word) */
    int32_t endoftext;
};

#endif
