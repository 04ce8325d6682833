/* bpe.h: byte-pair encoding of one pre-tokenised word: the word's bytes
 * become their initial symbols, then the merges apply, the lowest rank
 * first and, among equal ranks, the leftmost pair first (as Hugging Face's
 * tokenizers and OpenAI's encoder.py do), until no adjacent pair has a
 * merge. Words already seen come from a cache.
 *
 * Built by tokenizer_load.c, called by tokenizer.c for every word. */
#ifndef PT_TEXT_BPE_H
#define PT_TEXT_BPE_H

#include "pipetrain.h"

#include <stddef.h>
#include <stdint.h>

#include "text/bytes_map.h"

/* The merge table: (left id, right id) -> (rank, merged id), open
 * addressing over one array so a look-up touches one cache line. */
typedef struct {
    uint64_t pair; /* left << 32 | right; PT_BPE_NO_PAIR: empty */
    uint32_t rank;
    uint32_t id;
} pt_bpe_merge;

#define PT_BPE_NO_PAIR UINT64_MAX

typedef struct {
    pt_bpe_merge *slots;
    size_t cap; /* a power of two */
    size_t n;
} pt_bpe_merges;

typedef struct {
    pt_bpe_merges merges;
    int32_t byte_id[256]; /* the symbol each byte starts as; -1: none */
    int32_t unk;          /* a byte with none becomes unk; -1: it is dropped */
    int fuse_unk;         /* consecutive unknown bytes make one unk */
    int ignore_merges;    /* a word that is a token is that token */
    pt_bytes_map whole;   /* ignore_merges: token bytes -> id */
    /* the cache: word bytes -> (offset << 32 | count) into cache_ids */
    pt_bytes_map cache;
    pt_token_ids cache_ids;
    pt_token_ids sym; /* scratch: one word's symbols */
} pt_bpe;

/* Records the merge of (a, b) into id at rank; a pair given twice keeps
 * the later rank, as Hugging Face's loader does. -1 if memory ran out. */
int pt_bpe_merges_put(pt_bpe_merges *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id);

/* Appends the ids of word w[0..n) (n >= 1) to out. PT_ENOMEM on failure. */
int pt_bpe_encode_word(pt_bpe *b, const unsigned char *w, size_t n, pt_token_ids *out);

void pt_bpe_free(pt_bpe *b);

#endif
