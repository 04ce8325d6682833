/* fuzz_json: the strict JSON parser (src/io/json.c) that reads safetensors
 * headers, checkpoint indexes, trainer_state.json and the metrics log. The
 * input goes to pt_json_parse() as bytes (no NUL needed); a document it
 * accepts is written back with the library's own writers
 * (pt_json_write_string, pt_json_write_number) and parsed again, and the two
 * trees must agree: the same types, keys, strings (embedded NULs included)
 * and numbers (as doubles, or as floats for a value that is exactly one;
 * a number too large for a double is written as null). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"

#include "harness.h"

static void write_value(FILE *f, const pt_json *v)
{
    switch (v->type) {
    case PT_JSON_NULL: fputs("null", f); break;
    case PT_JSON_BOOL: fputs(v->boolean ? "true" : "false", f); break;
    case PT_JSON_NUMBER: pt_json_write_number(f, v->number); break;
    case PT_JSON_STRING: pt_json_write_string(f, v->string, v->len); break;
    case PT_JSON_ARRAY:
    case PT_JSON_OBJECT:
        fputc(v->type == PT_JSON_ARRAY ? '[' : '{', f);
        for (size_t i = 0; i < v->n; i++) {
            if (i)
                fputc(',', f);
            if (v->type == PT_JSON_OBJECT) {
                pt_json_write_string(f, v->keys[i], strlen(v->keys[i]));
                fputc(':', f);
            }
            write_value(f, v->items[i]);
        }
        fputc(v->type == PT_JSON_ARRAY ? ']' : '}', f);
        break;
    }
}

static int same(const pt_json *a, const pt_json *b)
{
    if (a->type == PT_JSON_NUMBER && !isfinite(a->number))
        return b->type == PT_JSON_NULL;
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case PT_JSON_BOOL: return a->boolean == b->boolean;
    case PT_JSON_NUMBER:
        /* a value that is exactly a float is written as the shortest text
         * that reads back as that float (json.h) */
        return a->number == b->number ||
               ((double)(float)a->number == a->number && (float)b->number == (float)a->number);
    case PT_JSON_STRING: return a->len == b->len && !memcmp(a->string, b->string, a->len);
    case PT_JSON_ARRAY:
    case PT_JSON_OBJECT:
        if (a->n != b->n)
            return 0;
        for (size_t i = 0; i < a->n; i++)
            if ((a->keys && strcmp(a->keys[i], b->keys[i])) || !same(a->items[i], b->items[i]))
                return 0;
        return 1;
    default: return 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_json *v = NULL, *back = NULL;
    if (pt_json_parse((const char *)data, size, 100, "fuzz", &v) != PT_OK) {
        FUZZ_REQUIRE(!v, "a refused document was handed back");
        return 0;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    FUZZ_REQUIRE(f, "open_memstream");
    write_value(f, v);
    FUZZ_REQUIRE(fclose(f) == 0, "writing to memory failed");
    FUZZ_REQUIRE(pt_json_parse(text, len, 0, "written back", &back) == PT_OK,
                 "what the writers wrote does not parse: %s\n%.500s", pt_last_error(), text);
    FUZZ_REQUIRE(same(v, back), "the document changed when written and read back:\n%.500s", text);
    pt_json_get(v, "weight_map");
    pt_json_free(back);
    pt_json_free(v);
    free(text);
    return 0;
}
