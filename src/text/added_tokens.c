/* added_tokens.c: finding added tokens in text (see added_tokens.h). The
 * search compares the tokens that start with a byte wherever that byte
 * occurs (memchr when they all start with the same one, as GPT-2's single
 * <|endoftext|> does): a handful of tokens costs about a pass over the text.
 * The word and whitespace tests around a match use the classes of
 * unicode.h: \w and \s of the Rust regex crate, which the tokenizers
 * library applies there. */
#include <stdlib.h>
#include <string.h>

#include "text/added_tokens.h"
#include "text/unicode.h"

static int longer_first(const void *a, const void *b)
{
    size_t x = (*(const pt_added_token *const *)a)->len;
    size_t y = (*(const pt_added_token *const *)b)->len;
    return x < y ? 1 : x > y ? -1 : 0;
}

int pt_added_set_build(pt_added_set *set, const pt_added_token *tokens, size_t n, int want)
{
    memset(set, 0, sizeof *set);
    set->only_first = -1;
    set->tokens = malloc((n ? n : 1) * sizeof *set->tokens);
    if (!set->tokens)
        return -1;
    int firsts = 0;
    for (size_t i = 0; i < n; i++) {
        if (!tokens[i].normalized != !want)
            continue;
        set->tokens[set->n++] = &tokens[i];
        unsigned char b = tokens[i].content[0];
        if (!set->first[b]) {
            set->first[b] = 1;
            set->only_first = b;
            firsts++;
        }
    }
    if (firsts != 1)
        set->only_first = -1;
    /* a stable order among equal lengths: the file's, as the library's */
    for (size_t i = 1; i < set->n; i++)
        for (size_t j = i; j > 0 && longer_first(&set->tokens[j - 1], &set->tokens[j]) > 0; j--) {
            const pt_added_token *t = set->tokens[j];
            set->tokens[j] = set->tokens[j - 1];
            set->tokens[j - 1] = t;
        }
    return 0;
}

void pt_added_set_free(pt_added_set *set)
{
    free(set->tokens);
    memset(set, 0, sizeof *set);
}

/* The leftmost-longest match at or after from: its place, and the token. */
static const pt_added_token *find(const pt_added_set *set, const unsigned char *s, size_t n,
                                  size_t from, size_t *at)
{
    for (size_t i = from; i < n; i++) {
        if (set->only_first >= 0) {
            const unsigned char *p = memchr(s + i, set->only_first, n - i);
            if (!p)
                return NULL;
            i = (size_t)(p - s);
        } else if (!set->first[s[i]]) {
            continue;
        }
        for (size_t k = 0; k < set->n; k++) {
            const pt_added_token *t = set->tokens[k];
            if (t->len <= n - i && t->content[0] == s[i] && !memcmp(s + i, t->content, t->len)) {
                *at = i;
                return t;
            }
        }
    }
    return NULL;
}

/* The start of the character that ends at s[i - 1] (i > 0). */
static size_t char_before(const unsigned char *s, size_t i)
{
    for (size_t k = 2; k <= 4 && k <= i; k++) {
        if ((s[i - k + 1] & 0xC0) != 0x80)
            break; /* s[i - k + 1] is no continuation byte: no longer character */
        uint32_t cp;
        if ((s[i - k] & 0xC0) != 0x80)
            return pt_utf8_decode(s + i - k, k, &cp) == (int)k ? i - k : i - 1;
    }
    return i - 1;
}

static int class_before(const unsigned char *s, size_t i)
{
    int len;
    size_t j = char_before(s, i);
    return pt_utf8_class(s + j, i - j, &len);
}

int pt_added_next(const pt_added_set *set, const unsigned char *s, size_t n, pt_added_cursor *c,
                  size_t *start, size_t *stop, uint32_t *id)
{
    if (!set->n)
        return 0;
    for (;;) {
        size_t at;
        const pt_added_token *t = find(set, s, n, c->search, &at);
        if (!t)
            return 0;
        size_t a = at, b = at + t->len;
        c->search = b;
        int len;
        if (t->single_word && ((a > 0 && (class_before(s, a) & PT_UC_WORD)) ||
                               (b < n && (pt_utf8_class(s + b, n - b, &len) & PT_UC_WORD))))
            continue;
        if (t->lstrip) {
            while (a > c->done && (class_before(s, a) & PT_UC_SPACE))
                a = char_before(s, a);
        }
        if (t->rstrip) {
            while (b < n && (pt_utf8_class(s + b, n - b, &len) & PT_UC_SPACE))
                b += (size_t)len;
            c->search = b;
        }
        *start = a;
        *stop = b;
        *id = t->id;
        c->done = b;
        return 1;
    }
}
