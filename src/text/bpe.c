/* bpe.c: byte-pair encoding of one word (see bpe.h).
 *
 * Two merge loops give the same result. Words of up to SHORT_WORD symbols
 * (nearly all) keep the rank of every adjacent pair in an array on the
 * stack and scan it for the lowest: after a merge only the two pairs
 * beside it are looked up again. Longer words (a line of 10,000 digits is
 * one word) use a heap of (rank, position) over a linked list of symbols,
 * O(n log n), as Hugging Face's Word::merge_all does; a heap entry whose
 * pair has changed since it was pushed is dropped when it comes up.
 *
 * The cache maps a word's bytes to its ids. Words longer than CACHE_WORD
 * bytes are not kept; when the cache holds CACHE_WORDS words it is emptied
 * and fills again, so it follows the text it is given. */
#include <stdlib.h>

#include "io/text_data.h"
#include "tensor/error.h"
#include "text/bpe.h"

enum {
    SHORT_WORD = 128,
    CACHE_WORD = 256,
    CACHE_WORDS = 1 << 18,
};

static inline uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t)a << 32 | b; }

static inline size_t pair_slot(uint64_t key, size_t cap)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

/* The merge of (a, b), or NULL. */
static inline const pt_bpe_merge *find_merge(const pt_bpe_merges *m, uint32_t a, uint32_t b)
{
    if (!m->cap)
        return NULL;
    uint64_t key = pair_key(a, b);
    for (size_t i = pair_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        const pt_bpe_merge *e = &m->slots[i];
        if (e->pair == key)
            return e;
        if (e->pair == PT_BPE_NO_PAIR)
            return NULL;
    }
}

static int grow_merges(pt_bpe_merges *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    pt_bpe_merge *slots = malloc(cap * sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < cap; i++)
        slots[i].pair = PT_BPE_NO_PAIR;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].pair == PT_BPE_NO_PAIR)
            continue;
        size_t j = pair_slot(m->slots[i].pair, cap);
        while (slots[j].pair != PT_BPE_NO_PAIR)
            j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int pt_bpe_merges_put(pt_bpe_merges *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id)
{
    pt_bpe_merge *old = (pt_bpe_merge *)find_merge(m, a, b);
    if (old) {
        old->rank = rank;
        old->id = id;
        return 0;
    }
    if (2 * (m->n + 1) > m->cap && grow_merges(m) != 0)
        return -1;
    uint64_t key = pair_key(a, b);
    size_t i = pair_slot(key, m->cap);
    while (m->slots[i].pair != PT_BPE_NO_PAIR)
        i = (i + 1) & (m->cap - 1);
    m->slots[i] = (pt_bpe_merge){.pair = key, .rank = rank, .id = id};
    m->n++;
    return 0;
}

/* ---- short words: ranks in an array ---------------------------------- */

static inline void look_up(const pt_bpe_merges *m, const uint32_t *sym, size_t i, uint32_t *rank,
                           uint32_t *id)
{
    const pt_bpe_merge *e = find_merge(m, sym[i], sym[i + 1]);
    rank[i] = e ? e->rank : UINT32_MAX;
    id[i] = e ? e->id : 0;
}

static size_t merge_short(const pt_bpe_merges *m, uint32_t *sym, size_t n)
{
    uint32_t rank[SHORT_WORD], id[SHORT_WORD]; /* of the pair (sym[i], sym[i + 1]) */
    for (size_t i = 0; i + 1 < n; i++)
        look_up(m, sym, i, rank, id);
    while (n > 1) {
        size_t at = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (rank[i] < rank[at])
                at = i;
        if (rank[at] == UINT32_MAX)
            break;
        sym[at] = id[at];
        for (size_t i = at + 1; i + 1 < n; i++)
            sym[i] = sym[i + 1];
        for (size_t i = at + 1; i + 2 < n; i++) {
            rank[i] = rank[i + 1];
            id[i] = id[i + 1];
        }
        n--;
        if (at > 0)
            look_up(m, sym, at - 1, rank, id);
        if (at + 1 < n)
            look_up(m, sym, at, rank, id);
    }
    return n;
}

/* ---- long words: a heap over a linked list --------------------------- */

typedef struct {
    uint32_t rank, pos; /* the pair (pos, next[pos]) */
} heap_item;

static inline int before(heap_item a, heap_item b)
{
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(heap_item *h, size_t *n, heap_item x)
{
    size_t i = (*n)++;
    while (i > 0 && before(x, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static heap_item heap_pop(heap_item *h, size_t *n)
{
    heap_item top = h[0], x = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && before(h[c + 1], h[c]))
            c++;
        if (!before(h[c], x))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
    return top;
}

static void push_pair(const pt_bpe_merges *m, const uint32_t *sym, heap_item *h, size_t *hn,
                      size_t pos, size_t next)
{
    const pt_bpe_merge *e = find_merge(m, sym[pos], sym[next]);
    if (e)
        heap_push(h, hn, (heap_item){e->rank, (uint32_t)pos});
}

static int merge_long(const pt_bpe_merges *m, uint32_t *sym, size_t *n_sym)
{
    size_t n = *n_sym;
    if (n > UINT32_MAX)
        return pt_fail(PT_EINVAL, "a word of %zu bytes is too long to encode", n);
    /* next[i] < 0: i is last (-1) or merged into its left neighbour (-2) */
    int64_t *next = malloc(n * sizeof *next), *prev = malloc(n * sizeof *prev);
    heap_item *heap = malloc(3 * n * sizeof *heap); /* n - 1 pairs, then 2 per merge */
    if (!next || !prev || !heap) {
        free(next), free(prev), free(heap);
        return pt_fail(PT_ENOMEM, "out of memory for a word of %zu bytes", n);
    }
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        prev[i] = (int64_t)i - 1;
        next[i] = i + 1 < n ? (int64_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        push_pair(m, sym, heap, &hn, i, i + 1);
    while (hn) {
        heap_item top = heap_pop(heap, &hn);
        size_t i = top.pos;
        if (next[i] < 0)
            continue;
        size_t j = (size_t)next[i];
        const pt_bpe_merge *e = find_merge(m, sym[i], sym[j]);
        if (!e || e->rank != top.rank)
            continue; /* the pair changed since it was pushed */
        sym[i] = e->id;
        next[i] = next[j];
        if (next[j] >= 0)
            prev[next[j]] = (int64_t)i;
        next[j] = -2;
        if (prev[i] >= 0)
            push_pair(m, sym, heap, &hn, (size_t)prev[i], i);
        if (next[i] >= 0)
            push_pair(m, sym, heap, &hn, i, (size_t)next[i]);
    }
    size_t k = 0;
    for (int64_t i = 0; i >= 0; i = next[i])
        sym[k++] = sym[i];
    *n_sym = k;
    free(next), free(prev), free(heap);
    return PT_OK;
}

/* ---- a word ---------------------------------------------------------- */

/* The initial symbols of w into b->sym. */
static int initial_symbols(pt_bpe *b, const unsigned char *w, size_t n)
{
    b->sym.n = 0;
    int rc = pt_token_ids_reserve(&b->sym, n);
    if (rc != PT_OK)
        return rc;
    uint32_t *sym = b->sym.ids;
    size_t k = 0;
    int after_unk = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = b->byte_id[w[i]];
        if (id >= 0) {
            sym[k++] = (uint32_t)id;
            after_unk = 0;
        } else if (b->unk >= 0 && !(b->fuse_unk && after_unk)) {
            sym[k++] = (uint32_t)b->unk;
            after_unk = 1;
        }
    }
    b->sym.n = k;
    return PT_OK;
}

static int append(pt_token_ids *out, const uint32_t *ids, size_t k)
{
    int rc = pt_token_ids_reserve(out, k);
    if (rc != PT_OK)
        return rc;
    memcpy(out->ids + out->n, ids, k * sizeof *ids);
    out->n += k;
    return PT_OK;
}

/* Keeps the ids of word w; a full cache is emptied first. Memory running
 * out only means the word is not kept. */
static void remember(pt_bpe *b, const unsigned char *w, size_t n, uint64_t hash,
                     const uint32_t *ids, size_t k)
{
    if (b->cache.n >= CACHE_WORDS) {
        pt_bytes_map_clear(&b->cache);
        b->cache_ids.n = 0;
    }
    uint64_t value = (uint64_t)b->cache_ids.n << 32 | k;
    if (pt_token_ids_reserve(&b->cache_ids, k) == PT_OK &&
        pt_bytes_map_put(&b->cache, w, n, hash, value) == 0) {
        memcpy(b->cache_ids.ids + b->cache_ids.n, ids, k * sizeof *ids);
        b->cache_ids.n += k;
    }
}

int pt_bpe_encode_word(pt_bpe *b, const unsigned char *w, size_t n, pt_token_ids *out)
{
    if (n == 1 && b->byte_id[w[0]] >= 0) {
        uint32_t id = (uint32_t)b->byte_id[w[0]];
        return append(out, &id, 1);
    }
    uint64_t hash = 0;
    if (b->ignore_merges || n <= CACHE_WORD)
        hash = pt_bytes_hash(w, n);
    if (b->ignore_merges) {
        const uint64_t *id = pt_bytes_map_find(&b->whole, w, n, hash);
        if (id) {
            uint32_t v = (uint32_t)*id;
            return append(out, &v, 1);
        }
    }
    if (n <= CACHE_WORD) {
        const uint64_t *hit = pt_bytes_map_find(&b->cache, w, n, hash);
        if (hit)
            return append(out, b->cache_ids.ids + (*hit >> 32), (size_t)(*hit & 0xFFFFFFFFu));
    }
    int rc = initial_symbols(b, w, n);
    if (rc != PT_OK)
        return rc;
    size_t k = b->sym.n;
    if (k <= SHORT_WORD)
        k = merge_short(&b->merges, b->sym.ids, k);
    else if ((rc = merge_long(&b->merges, b->sym.ids, &k)) != PT_OK)
        return rc;
    if (n <= CACHE_WORD)
        remember(b, w, n, hash, b->sym.ids, k);
    return append(out, b->sym.ids, k);
}

void pt_bpe_free(pt_bpe *b)
{
    free(b->merges.slots);
    pt_bytes_map_free(&b->whole);
    pt_bytes_map_free(&b->cache);
    free(b->cache_ids.ids);
    free(b->sym.ids);
    memset(b, 0, sizeof *b);
}
