/* bytes_map.h: a hash table from byte strings to 64-bit values, with its
 * keys copied into one growing arena: open addressing with linear probing,
 * no deletion (pt_bytes_map_clear empties it whole).
 *
 * Callers: tokenizer_load.c (token strings to ids while the files are
 * read), bpe.c (the cache of words already split, and whole words for
 * ignore_merges). */
#ifndef PT_TEXT_BYTES_MAP_H
#define PT_TEXT_BYTES_MAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint64_t hash;   /* 0: the slot is empty */
    uint32_t key_at; /* offset of the key in the arena */
    uint32_t key_len;
    uint64_t value;
} pt_bytes_slot;

typedef struct {
    pt_bytes_slot *slots;
    size_t cap; /* a power of two */
    size_t n;
    unsigned char *keys;
    size_t keys_n, keys_cap;
} pt_bytes_map;

/* A hash of s[0..n) that is never 0. */
static inline uint64_t pt_bytes_hash(const unsigned char *s, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)s[i] << (8 * i);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h | 1;
}

/* The value stored under s[0..n) (hash: pt_bytes_hash of it), or NULL. */
static inline uint64_t *pt_bytes_map_find(pt_bytes_map *m, const unsigned char *s, size_t n,
                                          uint64_t hash)
{
    if (!m->cap)
        return NULL;
    for (size_t i = hash & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        pt_bytes_slot *e = &m->slots[i];
        if (!e->hash)
            return NULL;
        if (e->hash == hash && e->key_len == n && !memcmp(m->keys + e->key_at, s, n))
            return &e->value;
    }
}

/* Stores value under s[0..n), replacing what was there. Returns 0, or -1
 * when memory ran out or the arena would pass 4 GiB. */
int pt_bytes_map_put(pt_bytes_map *m, const unsigned char *s, size_t n, uint64_t hash,
                     uint64_t value);
/* Forgets every key, keeping the memory. */
void pt_bytes_map_clear(pt_bytes_map *m);
void pt_bytes_map_free(pt_bytes_map *m);

#endif
