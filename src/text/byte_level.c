/* byte_level.c: GPT-2's byte <-> character table (see byte_level.h), as
 * OpenAI's encoder.py bytes_to_unicode() builds it. */
#include "text/byte_level.h"
#include "text/unicode.h"

/* The 68 bytes that do not stand for themselves, in order: 0x00..0x20,
 * 0x7F..0xA0 and 0xAD, become U+0100..U+0143. */
uint32_t pt_byte_level_char(unsigned char b)
{
    if (b <= 0x20)
        return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0)
        return 0x100 + 33 + (b - 0x7F);
    if (b == 0xAD)
        return 0x100 + 67;
    return b;
}

int pt_byte_level_spell(unsigned char b, char out[2])
{
    uint32_t c = pt_byte_level_char(b);
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    out[0] = (char)(0xC0 | c >> 6);
    out[1] = (char)(0x80 | (c & 0x3F));
    return 2;
}

/* The byte that character c stands for, or -1. */
static int byte_of(uint32_t c)
{
    if (c < 0x100)
        return pt_byte_level_char((unsigned char)c) == c ? (int)c : -1;
    uint32_t n = c - 0x100;
    if (n <= 32)
        return (int)n;
    if (n <= 66)
        return (int)(0x7F + n - 33);
    return n == 67 ? 0xAD : -1;
}

long pt_byte_level_unspell(const char *s, size_t n, unsigned char *out)
{
    const unsigned char *u = (const unsigned char *)s;
    long k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        i += (size_t)pt_utf8_decode(u + i, n - i, &c);
        int b = c == PT_UC_INVALID ? -1 : byte_of(c);
        if (b < 0)
            return -1;
        out[k++] = (unsigned char)b;
    }
    return k;
}
