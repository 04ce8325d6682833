/* json.h: a small strict JSON parser and the string/number writers that go
 * with it.
 *
 * The io layer reads JSON it did not write: a safetensors header from any
 * program, a metrics log after a crash. So the parser accepts exactly RFC
 * 8259 (no comments, no trailing commas, no NaN, no lone surrogates, valid
 * UTF-8 only, no duplicate object keys), bounds its nesting depth, and on
 * failure names the byte offset of the problem. Callers: safetensors.c (the
 * header), metrics.c (resuming a log), tests.
 *
 * A parsed document is a tree of pt_json nodes; pt_json_free() releases it. */
#ifndef PT_IO_JSON_H
#define PT_IO_JSON_H

#include "pipetrain.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    PT_JSON_NULL,
    PT_JSON_BOOL,
    PT_JSON_NUMBER,
    PT_JSON_STRING,
    PT_JSON_ARRAY,
    PT_JSON_OBJECT
} pt_json_type;

#define PT_JSON_MAX_DEPTH 64

typedef struct pt_json pt_json;
struct pt_json {
    pt_json_type type;
    size_t offset; /* where the value starts, in the caller's numbering */
    int boolean;   /* PT_JSON_BOOL */
    /* PT_JSON_NUMBER: the value as a double; when the text is an integer
     * (no fraction, no exponent) that fits, also exactly as one of these. */
    double number;
    int is_uint; /* 0 <= value <= UINT64_MAX: uint_value holds it */
    int is_int;  /* INT64_MIN <= value <= INT64_MAX: int_value holds it */
    uint64_t uint_value;
    int64_t int_value;
    /* PT_JSON_STRING: decoded UTF-8, NUL-terminated; len excludes the NUL and
     * counts any escaped \u0000 inside. */
    char *string;
    size_t len;
    /* PT_JSON_ARRAY and PT_JSON_OBJECT: n children in document order;
     * objects also have keys[i] (decoded, NUL-terminated) for items[i]. */
    size_t n;
    pt_json **items;
    char **keys;
};

/* Parses text[0..len) as one JSON value, optionally followed by whitespace.
 * Offsets in nodes and messages are base + the position in text, so a caller
 * that parses part of a file can report file offsets. On failure returns
 * PT_EFORMAT (PT_ENOMEM if memory ran out) with the message
 * "<what>: byte <offset>: <problem>". */
int pt_json_parse(const char *text, size_t len, size_t base, const char *what, pt_json **out);
void pt_json_free(pt_json *v);

/* Reads and parses a JSON file whose top is an object: PT_OK; 1 when there
 * is no such file and missing_ok; else PT_EIO, PT_EFORMAT or PT_ENOMEM with
 * a message naming the file. */
int pt_json_load(const char *path, int missing_ok, pt_json **out);

/* The member of an object named key, or NULL (also when v is no object). */
const pt_json *pt_json_get(const pt_json *v, const char *key);

/* Writes s[0..len) as a JSON string literal with quotes and escapes.
 * Returns 0, or -1 if the stream failed. */
int pt_json_write_string(FILE *f, const char *s, size_t len);
/* Writes x so that JSON parsers accept it: null for NaN and infinities; an
 * integer below 2^53 whole; otherwise the shortest %.Ng that reads back as
 * the same value: the same float when x is exactly a float (so a float loss
 * prints as 2.31), else the same double. Returns 0, or -1 if the stream
 * failed. */
int pt_json_write_number(FILE *f, double x);

#endif
