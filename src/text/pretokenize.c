/* pretokenize.c: GPT-2's pre-tokenisation pattern by hand (see
 * pretokenize.h). The alternatives, tried in order at the piece's start:
 *
 *   's 't 're 've 'm 'll 'd   a contraction (ASCII apostrophe, lower case)
 *   ' '? letters              an optional space, then a run of one kind:
 *   ' '? numbers              letters, numbers, or "other" (neither those
 *   ' '? others                 nor whitespace; a stray byte is other)
 *   \s+(?!\S)                 whitespace up to the end of the text, or all
 *                               but its last character when something
 *                               follows (so " word" keeps its space)
 *   \s+                       a single whitespace character before \S
 *
 * Only the space U+0020 joins the following run; a tab or a newline before
 * a word is a piece of its own. Classes of ASCII come from a 128-entry
 * table, the rest from unicode.h's generated table. */
#include "text/pretokenize.h"
#include "text/unicode.h"

enum { OTHER = 0, LETTER = PT_UC_LETTER, NUMBER = PT_UC_NUMBER, SPACE = PT_UC_SPACE };

static const unsigned char ascii_kind[128] = {
    ['\t'] = SPACE, ['\n'] = SPACE, ['\v'] = SPACE, ['\f'] = SPACE, ['\r'] = SPACE, [' '] = SPACE,
    ['0'] = NUMBER, ['1'] = NUMBER, ['2'] = NUMBER, ['3'] = NUMBER, ['4'] = NUMBER, ['5'] = NUMBER,
    ['6'] = NUMBER, ['7'] = NUMBER, ['8'] = NUMBER, ['9'] = NUMBER, ['A'] = LETTER, ['B'] = LETTER,
    ['C'] = LETTER, ['D'] = LETTER, ['E'] = LETTER, ['F'] = LETTER, ['G'] = LETTER, ['H'] = LETTER,
    ['I'] = LETTER, ['J'] = LETTER, ['K'] = LETTER, ['L'] = LETTER, ['M'] = LETTER, ['N'] = LETTER,
    ['O'] = LETTER, ['P'] = LETTER, ['Q'] = LETTER, ['R'] = LETTER, ['S'] = LETTER, ['T'] = LETTER,
    ['U'] = LETTER, ['V'] = LETTER, ['W'] = LETTER, ['X'] = LETTER, ['Y'] = LETTER, ['Z'] = LETTER,
    ['a'] = LETTER, ['b'] = LETTER, ['c'] = LETTER, ['d'] = LETTER, ['e'] = LETTER, ['f'] = LETTER,
    ['g'] = LETTER, ['h'] = LETTER, ['i'] = LETTER, ['j'] = LETTER, ['k'] = LETTER, ['l'] = LETTER,
    ['m'] = LETTER, ['n'] = LETTER, ['o'] = LETTER, ['p'] = LETTER, ['q'] = LETTER, ['r'] = LETTER,
    ['s'] = LETTER, ['t'] = LETTER, ['u'] = LETTER, ['v'] = LETTER, ['w'] = LETTER, ['x'] = LETTER,
    ['y'] = LETTER, ['z'] = LETTER,
};

/* The kind of the character at s[i] and its length in *len. */
static inline int kind_at(const unsigned char *s, size_t n, size_t i, int *len)
{
    if (s[i] < 0x80) {
        *len = 1;
        return ascii_kind[s[i]];
    }
    return pt_utf8_class(s + i, n - i, len) & (LETTER | NUMBER | SPACE);
}

/* The end of the run of characters of this kind that starts at i. */
static inline size_t run_end(const unsigned char *s, size_t n, size_t i, int kind)
{
    while (i < n) {
        if (s[i] < 0x80) {
            if (ascii_kind[s[i]] != kind)
                break;
            i++;
            continue;
        }
        int len;
        if (kind_at(s, n, i, &len) != kind)
            break;
        i += (size_t)len;
    }
    return i;
}

static size_t contraction_end(const unsigned char *s, size_t n, size_t i)
{
    if (i + 1 >= n)
        return 0;
    unsigned char a = s[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return i + 2;
    if (i + 2 >= n)
        return 0;
    unsigned char b = s[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return i + 3;
    return 0;
}

size_t pt_pretoken_end(const unsigned char *s, size_t n, size_t i)
{
    if (s[i] == '\'') {
        size_t end = contraction_end(s, n, i);
        if (end)
            return end;
    }
    int len;
    int kind = kind_at(s, n, i, &len);
    size_t j = i + (size_t)len;
    if (s[i] == ' ' && j < n) {
        int next = kind_at(s, n, j, &len);
        if (next != SPACE)
            return run_end(s, n, j + (size_t)len, next);
    }
    if (kind != SPACE)
        return run_end(s, n, j, kind);
    /* whitespace: find the run's end and where its last character starts */
    size_t last = i;
    while (j < n && kind_at(s, n, j, &len) == SPACE) {
        last = j;
        j += (size_t)len;
    }
    if (j == n || last == i)
        return j;
    return last;
}
