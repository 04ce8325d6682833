/* error.c: status codes and the per-thread message behind pt_last_error().
 *
 * Every layer reports failure the same way: it calls pt_fail() with a status
 * and a printf-style message and returns what pt_fail() returns, so the
 * caller (at the top, the CLI) decides how to tell the user. */
#include "tensor/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *pt_last_error(void) { return last_error; }

int pt_fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

int pt_fail_within(int status, const char *fmt, ...)
{
    char inner[sizeof last_error];
    snprintf(inner, sizeof inner, "%s", last_error);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    size_t at = n < 0 ? 0 : (size_t)n, room = sizeof last_error - at;
    if (at < sizeof last_error && room > 3) { /* ": " and what fits of the inner message */
        size_t len = strlen(inner) < room - 3 ? strlen(inner) : room - 3;
        memcpy(last_error + at, ": ", 2);
        memcpy(last_error + at + 2, inner, len);
        last_error[at + 2 + len] = '\0';
    }
    return status;
}

void pt_clear_error(void) { last_error[0] = '\0'; }

void pt_set_error_message(const char *msg) { snprintf(last_error, sizeof last_error, "%s", msg); }

const char *pt_strerror(int status)
{
    switch (status) {
    case PT_OK: return "ok";
    case PT_EINVAL: return "invalid argument";
    case PT_ENOMEM: return "out of memory";
    case PT_EIO: return "input/output error";
    case PT_EFORMAT: return "malformed file";
    case PT_EDEADLOCK: return "schedule deadlocks";
    case PT_EUNSUPPORTED: return "not supported here";
    case PT_ETRANSPORT: return "transport failure";
    default: return "unknown error";
    }
}
