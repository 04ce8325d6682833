/* json.c: see json.h. A recursive-descent parser over a byte range that
 * never reads past len, so text need not be NUL-terminated. Nesting is
 * bounded by PT_JSON_MAX_DEPTH, which bounds the recursion too. */
#include "io/json.h"

#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"

/* Numbers are converted and printed in the C locale whatever the program's
 * locale is: JSON's decimal point is always '.'. */
static locale_t c_locale_value;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void c_locale_init(void) { c_locale_value = newlocale(LC_ALL_MASK, "C", (locale_t)0); }
static locale_t c_locale(void)
{
    pthread_once(&c_locale_once, c_locale_init);
    return c_locale_value;
}

typedef struct {
    const unsigned char *s;
    size_t len, pos, base;
    int status; /* PT_OK until the first failure */
    size_t err_pos;
    const char *err_msg;
    char err_buf[160];
} parser;

static int fail_at(parser *p, size_t pos, const char *msg)
{
    if (p->status == PT_OK) {
        p->status = PT_EFORMAT;
        p->err_pos = pos;
        p->err_msg = msg;
    }
    return -1;
}

static int out_of_memory(parser *p)
{
    if (p->status == PT_OK) {
        p->status = PT_ENOMEM;
        p->err_pos = p->pos;
        p->err_msg = "out of memory";
    }
    return -1;
}

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static pt_json *new_node(parser *p, pt_json_type type, size_t pos)
{
    pt_json *v = calloc(1, sizeof *v);
    if (!v) {
        out_of_memory(p);
        return NULL;
    }
    v->type = type;
    v->offset = p->base + pos;
    return v;
}

void pt_json_free(pt_json *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++) {
        pt_json_free(v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    free(v);
}

/* ---- Strings ----------------------------------------------------------- */

static int hex4(parser *p, size_t at, unsigned *out)
{
    if (p->len - at < 4)
        return fail_at(p, at, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p->s[at + i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return fail_at(p, at + i, "bad hex digit in \\u escape");
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *dst, unsigned cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the well-formed UTF-8 sequence at s[0..avail), or 0 if it is
 * not one (overlong forms, surrogates and values past U+10FFFF included). */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    size_t n;
    unsigned cp, min;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        n = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        n = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        n = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (avail < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

/* Parses the string literal at p->pos (which holds '"') into a fresh
 * NUL-terminated buffer. */
static int parse_string(parser *p, char **out, size_t *out_len)
{
    size_t start = ++p->pos;
    /* Decoded text is never longer than its source. */
    size_t end = start;
    while (end < p->len && p->s[end] != '"') {
        if (p->s[end] == '\\')
            end++;
        end++;
    }
    if (end >= p->len)
        return fail_at(p, start - 1, "unterminated string");
    char *buf = malloc(end - start + 1);
    if (!buf)
        return out_of_memory(p);
    size_t n = 0;
    while (p->pos < end) {
        unsigned char c = p->s[p->pos];
        if (c < 0x20) {
            free(buf);
            return fail_at(p, p->pos, "control character in string");
        }
        if (c != '\\') {
            size_t k = utf8_len(p->s + p->pos, end - p->pos);
            if (k == 0) {
                free(buf);
                return fail_at(p, p->pos, "invalid UTF-8 in string");
            }
            memcpy(buf + n, p->s + p->pos, k);
            n += k;
            p->pos += k;
            continue;
        }
        size_t esc = p->pos;
        unsigned char e = p->s[p->pos + 1];
        p->pos += 2;
        switch (e) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (hex4(p, p->pos, &cp) < 0)
                break;
            p->pos += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                fail_at(p, esc, "lone low surrogate in \\u escape");
                break;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (end - p->pos < 6 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
                    fail_at(p, esc, "high surrogate without its low half");
                    break;
                }
                if (hex4(p, p->pos + 2, &lo) < 0)
                    break;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    fail_at(p, esc, "high surrogate without its low half");
                    break;
                }
                p->pos += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            n += put_utf8(buf + n, cp);
            break;
        }
        default: fail_at(p, esc, "unknown escape in string"); break;
        }
        if (p->status != PT_OK) {
            free(buf);
            return -1;
        }
    }
    buf[n] = '\0';
    p->pos = end + 1;
    *out = buf;
    *out_len = n;
    return 0;
}

/* ---- Numbers ----------------------------------------------------------- */

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static pt_json *parse_number(parser *p)
{
    size_t start = p->pos, i = p->pos;
    int negative = 0, integral = 1;
    if (i < p->len && p->s[i] == '-') {
        negative = 1;
        i++;
    }
    if (i >= p->len || !is_digit(p->s[i])) {
        fail_at(p, start, "malformed number");
        return NULL;
    }
    if (p->s[i] == '0') {
        i++;
        if (i < p->len && is_digit(p->s[i])) {
            fail_at(p, start, "number with a leading zero");
            return NULL;
        }
    } else {
        while (i < p->len && is_digit(p->s[i]))
            i++;
    }
    size_t int_end = i;
    if (i < p->len && p->s[i] == '.') {
        integral = 0;
        i++;
        if (i >= p->len || !is_digit(p->s[i])) {
            fail_at(p, i, "malformed number: no digit after '.'");
            return NULL;
        }
        while (i < p->len && is_digit(p->s[i]))
            i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        integral = 0;
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-'))
            i++;
        if (i >= p->len || !is_digit(p->s[i])) {
            fail_at(p, i, "malformed number: no digit in exponent");
            return NULL;
        }
        while (i < p->len && is_digit(p->s[i]))
            i++;
    }
    pt_json *v = new_node(p, PT_JSON_NUMBER, start);
    if (!v)
        return NULL;
    p->pos = i;

    /* strtod needs a terminated copy; numbers are short unless hostile. */
    char small[64], *copy = small;
    size_t n = i - start;
    if (n >= sizeof small && !(copy = malloc(n + 1))) {
        free(v);
        out_of_memory(p);
        return NULL;
    }
    memcpy(copy, p->s + start, n);
    copy[n] = '\0';
    v->number = strtod_l(copy, NULL, c_locale());
    if (copy != small)
        free(copy);

    if (integral) {
        /* Exact integer value, digit by digit, with overflow detection. */
        uint64_t mag = 0;
        int overflow = 0;
        for (size_t k = start + (size_t)negative; k < int_end; k++) {
            unsigned d = p->s[k] - '0';
            if (mag > (UINT64_MAX - d) / 10) {
                overflow = 1;
                break;
            }
            mag = mag * 10 + d;
        }
        if (!overflow) {
            if (!negative || mag == 0) {
                v->is_uint = 1;
                v->uint_value = mag;
            }
            if (!negative && mag <= (uint64_t)INT64_MAX) {
                v->is_int = 1;
                v->int_value = (int64_t)mag;
            } else if (negative && mag <= (uint64_t)INT64_MAX + 1) {
                v->is_int = 1;
                v->int_value = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
            }
        }
    }
    return v;
}

/* ---- Values ------------------------------------------------------------ */

static pt_json *parse_value(parser *p, int depth);

static int append_item(parser *p, pt_json *c, pt_json *item, char *key, size_t *cap)
{
    if (c->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4;
        pt_json **items = realloc(c->items, ncap * sizeof *items);
        if (!items)
            return out_of_memory(p);
        c->items = items;
        if (c->type == PT_JSON_OBJECT) {
            char **keys = realloc(c->keys, ncap * sizeof *keys);
            if (!keys)
                return out_of_memory(p);
            c->keys = keys;
        }
        *cap = ncap;
    }
    c->items[c->n] = item;
    if (c->type == PT_JSON_OBJECT)
        c->keys[c->n] = key;
    c->n++;
    return 0;
}

static int compare_keys(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Duplicate keys make a document ambiguous; found by sorting, so a hostile
 * object with many keys costs n log n, not n^2. */
static int check_unique_keys(parser *p, const pt_json *c)
{
    if (c->n < 2)
        return 0;
    char **sorted = malloc(c->n * sizeof *sorted);
    if (!sorted)
        return out_of_memory(p);
    memcpy(sorted, c->keys, c->n * sizeof *sorted);
    qsort(sorted, c->n, sizeof *sorted, compare_keys);
    int r = 0;
    for (size_t i = 1; i < c->n && r == 0; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            snprintf(p->err_buf, sizeof p->err_buf, "duplicate key \"%.100s\" in this object",
                     sorted[i]);
            r = fail_at(p, c->offset - p->base, p->err_buf);
        }
    free(sorted);
    return r;
}

static pt_json *parse_container(parser *p, int depth, int is_object)
{
    pt_json *c = new_node(p, is_object ? PT_JSON_OBJECT : PT_JSON_ARRAY, p->pos);
    if (!c)
        return NULL;
    char close = is_object ? '}' : ']';
    size_t cap = 0;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return c;
    }
    for (;;) {
        char *key = NULL;
        size_t key_len = 0, key_pos = p->pos;
        if (is_object) {
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                fail_at(p, p->pos, "expected a string key");
                goto fail;
            }
            if (parse_string(p, &key, &key_len) < 0)
                goto fail;
            if (strlen(key) != key_len) {
                free(key);
                fail_at(p, key_pos, "object key contains \\u0000");
                goto fail;
            }
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                free(key);
                fail_at(p, p->pos, "expected ':' after object key");
                goto fail;
            }
            p->pos++;
            skip_ws(p);
        }
        pt_json *item = parse_value(p, depth + 1);
        if (!item) {
            free(key);
            goto fail;
        }
        if (append_item(p, c, item, key, &cap) < 0) {
            pt_json_free(item);
            free(key);
            goto fail;
        }
        skip_ws(p);
        if (p->pos >= p->len) {
            fail_at(p, p->pos, is_object ? "unterminated object" : "unterminated array");
            goto fail;
        }
        if (p->s[p->pos] == ',') {
            p->pos++;
            skip_ws(p);
            continue;
        }
        if (p->s[p->pos] == close) {
            p->pos++;
            if (is_object && check_unique_keys(p, c) < 0)
                goto fail;
            return c;
        }
        fail_at(p, p->pos, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
        goto fail;
    }
fail:
    pt_json_free(c);
    return NULL;
}

static pt_json *parse_literal(parser *p, const char *word, pt_json_type type, int b)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) {
        fail_at(p, p->pos, "unexpected character");
        return NULL;
    }
    pt_json *v = new_node(p, type, p->pos);
    if (v)
        v->boolean = b;
    p->pos += n;
    return v;
}

static pt_json *parse_value(parser *p, int depth)
{
    if (depth > PT_JSON_MAX_DEPTH) {
        fail_at(p, p->pos, "nested too deeply");
        return NULL;
    }
    skip_ws(p);
    if (p->pos >= p->len) {
        fail_at(p, p->pos, "unexpected end of text");
        return NULL;
    }
    unsigned char c = p->s[p->pos];
    switch (c) {
    case '{': return parse_container(p, depth, 1);
    case '[': return parse_container(p, depth, 0);
    case '"': {
        pt_json *v = new_node(p, PT_JSON_STRING, p->pos);
        if (v && parse_string(p, &v->string, &v->len) < 0) {
            free(v);
            return NULL;
        }
        return v;
    }
    case 't': return parse_literal(p, "true", PT_JSON_BOOL, 1);
    case 'f': return parse_literal(p, "false", PT_JSON_BOOL, 0);
    case 'n': return parse_literal(p, "null", PT_JSON_NULL, 0);
    default:
        if (c == '-' || is_digit(c))
            return parse_number(p);
        fail_at(p, p->pos, "unexpected character");
        return NULL;
    }
}

int pt_json_parse(const char *text, size_t len, size_t base, const char *what, pt_json **out)
{
    parser p = {(const unsigned char *)text, len, 0, base, PT_OK, 0, NULL, {0}};
    *out = NULL;
    pt_json *v = parse_value(&p, 0);
    if (v) {
        skip_ws(&p);
        if (p.pos != p.len) {
            fail_at(&p, p.pos, "text after the end of the value");
            pt_json_free(v);
            v = NULL;
        }
    }
    if (!v)
        return pt_fail(p.status, "%s: byte %zu: %s", what, base + p.err_pos, p.err_msg);
    *out = v;
    return PT_OK;
}

const pt_json *pt_json_get(const pt_json *v, const char *key)
{
    if (!v || v->type != PT_JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0)
            return v->items[i];
    return NULL;
}

/* ---- Writing ----------------------------------------------------------- */

int pt_json_write_string(FILE *f, const char *s, size_t len)
{
    if (fputc('"', f) == EOF)
        return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        int r;
        if (c == '"' || c == '\\')
            r = fprintf(f, "\\%c", c);
        else if (c == '\n')
            r = fputs("\\n", f);
        else if (c == '\t')
            r = fputs("\\t", f);
        else if (c == '\r')
            r = fputs("\\r", f);
        else if (c < 0x20 || c == 0x7F)
            r = fprintf(f, "\\u%04x", c);
        else
            r = fputc(c, f);
        if (r < 0)
            return -1;
    }
    return fputc('"', f) == EOF ? -1 : 0;
}

int pt_json_write_number(FILE *f, double x)
{
    if (!isfinite(x))
        return fputs("null", f) < 0 ? -1 : 0;
    char buf[40];
    /* an integer (a byte count) prints whole, exact also for a reader of
     * doubles: 58953728, not the float's shortest 5.895373e+07 */
    if (x == trunc(x) && fabs(x) < 9007199254740992.0) {
        snprintf(buf, sizeof buf, "%.0f", x);
        return fputs(buf, f) < 0 ? -1 : 0;
    }
    locale_t old = uselocale(c_locale());
    /* A value that is a float (a loss computed in float) prints as the
     * shortest decimal that reads back as that float: 2.31, not
     * 2.3099999427795410. */
    int is_float = fabs(x) <= FLT_MAX && (double)(float)x == x;
    for (int prec = is_float ? 6 : 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        double back = strtod(buf, NULL);
        if (is_float ? (float)back == (float)x : back == x)
            break;
    }
    uselocale(old);
    return fputs(buf, f) < 0 ? -1 : 0;
}

int pt_json_load(const char *path, int missing_ok, pt_json **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT && missing_ok ? 1 : pt_fail(PT_EIO, "%s: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap) {
            char *t = realloc(text, cap = cap ? cap * 2 : 4096);
            if (!t) {
                free(text), fclose(f);
                return pt_fail(PT_ENOMEM, "%s: out of memory", path);
            }
            text = t;
        }
        got = fread(text + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    int bad = ferror(f);
    fclose(f);
    int rc =
        bad ? pt_fail(PT_EIO, "%s: read failed", path) : pt_json_parse(text, len, 0, path, out);
    free(text);
    if (rc == PT_OK && (*out)->type != PT_JSON_OBJECT) {
        pt_json_free(*out);
        *out = NULL;
        rc = pt_fail(PT_EFORMAT, "%s: not a JSON object", path);
    }
    return rc;
}
