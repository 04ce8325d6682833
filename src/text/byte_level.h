/* byte_level.h: GPT-2's byte <-> character table. A byte-level BPE
 * vocabulary spells every token with one printable character per byte:
 * the bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves (as
 * U+0021.. etc.), the other 68 bytes (controls, the space, 0x7F..0xA0,
 * 0xAD) for U+0100 onwards in byte order, so the space is 'Ġ' (U+0120)
 * and the newline 'Ċ' (U+010A).
 *
 * The encoder never builds those strings: it works on the text's bytes.
 * The table is read once, when a vocabulary is loaded (tokenizer_load.c),
 * to turn each token's string into the bytes it stands for. */
#ifndef PT_TEXT_BYTE_LEVEL_H
#define PT_TEXT_BYTE_LEVEL_H

#include <stddef.h>
#include <stdint.h>

/* The character that stands for byte b. */
uint32_t pt_byte_level_char(unsigned char b);

/* Writes the UTF-8 spelling of byte b to out (at most 2 bytes); returns its
 * length. */
int pt_byte_level_spell(unsigned char b, char out[2]);

/* The bytes a token string stands for: each character of s[0..n) mapped
 * back through the table, into out (room for n bytes). Returns their
 * count, or -1 when a character is not in the table (the string then
 * stands for its own UTF-8 bytes, as Hugging Face's ByteLevel decoder
 * takes it). */
long pt_byte_level_unspell(const char *s, size_t n, unsigned char *out);

#endif
