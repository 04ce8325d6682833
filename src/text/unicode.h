/* unicode.h: what the tokenizer asks of Unicode: the classes of a code
 * point that GPT-2's pre-tokenisation pattern names (\p{L}, \p{N}, \s) and
 * the \w of single-word added tokens, and UTF-8 decoding that never fails.
 *
 * The classes come from a table generated once from Python's unicodedata by
 * scripts/gen-unicode-tables.py and committed (unicode_tables.c); the build
 * needs no Python. Callers: pretokenize.c, added_tokens.c. */
#ifndef PT_TEXT_UNICODE_H
#define PT_TEXT_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum {
    PT_UC_LETTER = 1, /* \p{L} */
    PT_UC_NUMBER = 2, /* \p{N} */
    PT_UC_SPACE = 4,  /* White_Space, the pattern's \s */
    PT_UC_WORD = 8    /* \w: Alphabetic, marks, Nd, Pc, Join_Control */
};

extern const unsigned char pt_uc_row[0x110000 >> 7];
extern const char pt_uc_rows[][129];

/* The class bits of code point cp (at most 0x10FFFF). */
static inline int pt_uc_class(uint32_t cp)
{
    return pt_uc_rows[pt_uc_row[cp >> 7]][cp & 127] - 'A';
}

/* Decodes the character at s[0..n), n >= 1, into *cp and returns its length
 * in bytes. A byte that does not start a well-formed UTF-8 sequence
 * (a stray continuation byte, an overlong form, a surrogate, a value past
 * U+10FFFF, a truncated sequence) is one character of its own: length 1
 * and *cp = PT_UC_INVALID, which has no class. */
#define PT_UC_INVALID 0xFFFFFFFFu
static inline int pt_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    *cp = PT_UC_INVALID;
    if (c < 0xC2 || c > 0xF4)
        return 1;
    if (c < 0xE0) {
        if (n < 2 || (s[1] & 0xC0) != 0x80)
            return 1;
        *cp = (c & 0x1Fu) << 6 | (s[1] & 0x3Fu);
        return 2;
    }
    if (c < 0xF0) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
            return 1;
        uint32_t v = (c & 0x0Fu) << 12 | (s[1] & 0x3Fu) << 6 | (s[2] & 0x3Fu);
        if (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF))
            return 1;
        *cp = v;
        return 3;
    }
    if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
        return 1;
    uint32_t v = (c & 0x07u) << 18 | (s[1] & 0x3Fu) << 12 | (s[2] & 0x3Fu) << 6 | (s[3] & 0x3Fu);
    if (v < 0x10000 || v > 0x10FFFF)
        return 1;
    *cp = v;
    return 4;
}

/* The class bits of the character at s[0..n) (0 for an invalid byte), and
 * its length in *len. */
static inline int pt_utf8_class(const unsigned char *s, size_t n, int *len)
{
    uint32_t cp;
    *len = pt_utf8_decode(s, n, &cp);
    return cp == PT_UC_INVALID ? 0 : pt_uc_class(cp);
}

#endif
