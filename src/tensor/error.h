/* error.h: how internal code fails: return pt_fail(PT_E..., "message", ...).
 * The message is kept per thread, so workers report independently. */
#ifndef PT_TENSOR_ERROR_H
#define PT_TENSOR_ERROR_H

#include "pipetrain.h"

#if defined(__GNUC__)
#define PT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PT_PRINTF(a, b)
#endif

/* Records the message for pt_last_error() and returns status. */
int pt_fail(int status, const char *fmt, ...) PT_PRINTF(2, 3);
/* Puts fmt's text in front of the current message: "<text>: <message>",
 * and returns status (the message of a failure one layer down, with what
 * this layer was doing). */
int pt_fail_within(int status, const char *fmt, ...) PT_PRINTF(2, 3);
void pt_clear_error(void);
/* Copies a message (one taken from another thread's pt_last_error()). */
void pt_set_error_message(const char *msg);

#endif
