/* textbuf.c: the growable text buffer behind the schedule text format and
 * the renderers (see textbuf.h). */
#include "sched/textbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(pt_textbuf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void pt_textbuf_printf(pt_textbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void pt_textbuf_puts(pt_textbuf *b, const char *str)
{
    size_t n = strlen(str);
    if (!reserve(b, n))
        return;
    memcpy(b->data + b->len, str, n + 1);
    b->len += n;
}

void pt_textbuf_repeat(pt_textbuf *b, char c, int n)
{
    if (n <= 0 || !reserve(b, (size_t)n))
        return;
    memset(b->data + b->len, c, (size_t)n);
    b->len += (size_t)n;
    b->data[b->len] = '\0';
}

int pt_textbuf_finish(pt_textbuf *b, char **out)
{
    if (!reserve(b, 0)) {
        pt_textbuf_free(b);
        return pt_fail(PT_ENOMEM, "out of memory building text");
    }
    b->data[b->len] = '\0';
    *out = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return PT_OK;
}

void pt_textbuf_free(pt_textbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}
