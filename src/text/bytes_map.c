/* bytes_map.c: growing and emptying the byte-string hash table of
 * bytes_map.h (its look-up is inline there: the encoder's hot path). */
#include <stdlib.h>

#include "text/bytes_map.h"

static int grow_slots(pt_bytes_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    pt_bytes_slot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        const pt_bytes_slot *e = &m->slots[i];
        if (!e->hash)
            continue;
        size_t j = e->hash & (cap - 1);
        while (slots[j].hash)
            j = (j + 1) & (cap - 1);
        slots[j] = *e;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int pt_bytes_map_put(pt_bytes_map *m, const unsigned char *s, size_t n, uint64_t hash,
                     uint64_t value)
{
    uint64_t *old = pt_bytes_map_find(m, s, n, hash);
    if (old) {
        *old = value;
        return 0;
    }
    /* at most half full: probes stay short */
    if (2 * (m->n + 1) > m->cap && grow_slots(m) != 0)
        return -1;
    if (m->keys_n + n > UINT32_MAX)
        return -1;
    if (m->keys_n + n > m->keys_cap) {
        size_t cap = m->keys_cap ? m->keys_cap : 4096;
        while (cap < m->keys_n + n)
            cap *= 2;
        unsigned char *keys = realloc(m->keys, cap);
        if (!keys)
            return -1;
        m->keys = keys;
        m->keys_cap = cap;
    }
    if (n)
        memcpy(m->keys + m->keys_n, s, n);
    size_t i = hash & (m->cap - 1);
    while (m->slots[i].hash)
        i = (i + 1) & (m->cap - 1);
    m->slots[i] = (pt_bytes_slot){
        .hash = hash, .key_at = (uint32_t)m->keys_n, .key_len = (uint32_t)n, .value = value};
    m->keys_n += n;
    m->n++;
    return 0;
}

void pt_bytes_map_clear(pt_bytes_map *m)
{
    if (m->cap)
        memset(m->slots, 0, m->cap * sizeof *m->slots);
    m->n = 0;
    m->keys_n = 0;
}

void pt_bytes_map_free(pt_bytes_map *m)
{
    free(m->slots);
    free(m->keys);
    memset(m, 0, sizeof *m);
}
