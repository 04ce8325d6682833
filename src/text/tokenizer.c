/* tokenizer.c: encoding and decoding with a loaded pt_tokenizer (the
 * public API's Tokenizer section; the loader is tokenizer_load.c).
 *
 * Encoding is the tokenizers library's pipeline for GPT-2: added tokens are
 * split off (two passes, added_tokens.h), each stretch between them is cut
 * into words by GPT-2's pattern (pretokenize.h), and each word is split by
 * BPE (bpe.h). The library turns text into byte-level characters before
 * BPE; here BPE runs on the bytes themselves, whose initial symbols are the
 * ids of those characters, so no string is built. Decoding concatenates
 * the bytes each id stands for. */
#include <stdlib.h>
#include <string.h>

#include "io/text_data.h"
#include "tensor/error.h"
#include "text/pretokenize.h"
#include "text/tokenizer.h"

void pt_tokenizer_destroy(pt_tokenizer *t)
{
    if (!t)
        return;
    pt_bpe_free(&t->bpe);
    free(t->piece);
    free(t->bytes);
    for (size_t i = 0; i < t->n_added; i++)
        free(t->added[i].content);
    free(t->added);
    pt_added_set_free(&t->sets[0]);
    pt_added_set_free(&t->sets[1]);
    free(t);
}

int pt_tokenizer_vocab_size(const pt_tokenizer *t) { return (int)t->n_ids; }

int pt_tokenizer_endoftext(const pt_tokenizer *t) { return t->endoftext; }

/* Text without added tokens: words, then BPE. */
static int encode_words(pt_tokenizer *t, const unsigned char *s, size_t n, pt_token_ids *out)
{
    if (!t->use_regex)
        return n ? pt_bpe_encode_word(&t->bpe, s, n, out) : PT_OK;
    for (size_t i = 0; i < n;) {
        size_t end = pt_pretoken_end(s, n, i);
        int rc = pt_bpe_encode_word(&t->bpe, s + i, end - i, out);
        if (rc != PT_OK)
            return rc;
        i = end;
    }
    return PT_OK;
}

/* A stretch of text the ByteLevel pre-tokenizer sees: with
 * add_prefix_space, a space goes before it unless it starts with one. */
static int encode_stretch(pt_tokenizer *t, const unsigned char *s, size_t n, pt_token_ids *out)
{
    if (!n || !t->add_prefix_space || s[0] == ' ')
        return encode_words(t, s, n, out);
    unsigned char *spaced = malloc(n + 1);
    if (!spaced)
        return pt_fail(PT_ENOMEM, "out of memory for %zu bytes of text", n + 1);
    spaced[0] = ' ';
    memcpy(spaced + 1, s, n);
    int rc = encode_words(t, spaced, n + 1, out);
    free(spaced);
    return rc;
}

/* Splits off the added tokens of pass `pass` and hands the rest on. */
static int encode_pass(pt_tokenizer *t, int pass, const unsigned char *s, size_t n,
                       pt_token_ids *out)
{
    if (pass == 2)
        return encode_stretch(t, s, n, out);
    pt_added_cursor c = {0, 0};
    size_t start, stop;
    uint32_t id;
    for (;;) {
        size_t plain = c.done;
        int found = pt_added_next(&t->sets[pass], s, n, &c, &start, &stop, &id);
        int rc = encode_pass(t, pass + 1, s + plain, (found ? start : n) - plain, out);
        if (rc == PT_OK && found && (rc = pt_token_ids_reserve(out, 1)) == PT_OK)
            out->ids[out->n++] = id;
        if (rc != PT_OK || !found)
            return rc;
    }
}

int pt_tokenizer_encode(pt_tokenizer *t, const char *text, size_t len, pt_token_ids *out)
{
    size_t before = out->n;
    int rc = encode_pass(t, 0, (const unsigned char *)text, len, out);
    if (rc != PT_OK)
        out->n = before;
    return rc;
}

const char *pt_tokenizer_token(const pt_tokenizer *t, uint32_t id, size_t *len)
{
    if (id >= t->n_ids || t->piece[id] == PT_NO_TOKEN) {
        *len = 0;
        return NULL;
    }
    *len = (size_t)(t->piece[id] & 0xFFFFFFFFu);
    return (const char *)t->bytes + (t->piece[id] >> 32);
}

int pt_tokenizer_decode(const pt_tokenizer *t, const uint32_t *ids, size_t n, char **text,
                        size_t *len)
{
    *text = NULL;
    *len = 0;
    size_t total = 0, k;
    for (size_t i = 0; i < n; i++) {
        if (!pt_tokenizer_token(t, ids[i], &k))
            return pt_fail(PT_EINVAL,
                           "id %u (at %zu) is no token of this tokenizer (vocabulary %u)", ids[i],
                           i, t->n_ids);
        total += k;
    }
    char *s = malloc(total + 1);
    if (!s)
        return pt_fail(PT_ENOMEM, "out of memory for %zu bytes of text", total + 1);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = pt_tokenizer_token(t, ids[i], &k);
        memcpy(s + at, p, k);
        at += k;
    }
    s[at] = 0;
    *text = s;
    *len = at;
    return PT_OK;
}

/* A character in ASCII that is not whitespace. */
static int plain_ascii(unsigned char c)
{
    return c < 0x80 && c != ' ' && !(c >= '\t' && c <= '\r');
}

/* Why a cut after a lone newline (between two characters in ASCII that are
 * not whitespace) changes nothing: GPT-2's pattern makes that newline a
 * piece of its own either way (at the end of the left part \s+(?!\S)
 * takes it alone, in the whole text \s+ does; a longer run of whitespace
 * would end the left part as one piece but be split before its last
 * character in the whole), and no piece joins a newline to what follows
 * it (only a space joins a run). No added token can straddle the cut when
 * none holds a newline and none starts with the character after it, and
 * the word and whitespace tests around a match see the same characters on
 * either side. A prefix space, or a text taken as one word, would make
 * every part a new start. */
size_t pt_tokenizer_cut(const pt_tokenizer *t, const char *text, size_t len, size_t from)
{
    if (t->add_prefix_space || !t->use_regex)
        return len;
    for (size_t i = 0; i < t->n_added; i++)
        if (memchr(t->added[i].content, '\n', t->added[i].len))
            return len;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = from > 0 ? from : 1; i < len; i++) {
        const unsigned char *nl = memchr(s + i - 1, '\n', len - i);
        if (!nl)
            return len;
        i = (size_t)(nl - s) + 1;
        if (i >= 2 && plain_ascii(s[i - 2]) && plain_ascii(s[i]) && !t->sets[0].first[s[i]] &&
            !t->sets[1].first[s[i]])
            return i;
    }
    return len;
}
