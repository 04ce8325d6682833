/* textbuf.h: a growable text buffer for the schedule text format and the
 * renderers (ASCII, SVG, trace JSON), which build their output in memory and
 * hand the caller one malloc'd string. An allocation failure is remembered
 * and reported once, by pt_textbuf_finish(). */
#ifndef PT_SCHED_TEXTBUF_H
#define PT_SCHED_TEXTBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "tensor/error.h"

typedef struct {
    char *data;
    size_t len, cap;
    bool failed;
} pt_textbuf;

void pt_textbuf_printf(pt_textbuf *b, const char *fmt, ...) PT_PRINTF(2, 3);
void pt_textbuf_puts(pt_textbuf *b, const char *str);
void pt_textbuf_repeat(pt_textbuf *b, char c, int n);
/* Hands the text to *out (caller frees) or fails with PT_ENOMEM. */
int pt_textbuf_finish(pt_textbuf *b, char **out);
void pt_textbuf_free(pt_textbuf *b);

#endif
