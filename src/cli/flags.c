/* flags.c: see flags.h. */
#include "cli/flags.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void flags_help(FILE *f, const char *command, const char *summary, const flag *flags, int n)
{
    fprintf(f, "usage: pipetrain %s [FLAGS]\n\n%s\n\nflags:\n", command, summary);
    for (int i = 0; i < n; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", flags[i].name, flags[i].meta ? " " : "",
                 flags[i].meta ? flags[i].meta : "");
        fprintf(f, "  %-28s %s\n", left, flags[i].help);
    }
    fprintf(f, "  %-28s %s\n", "--help", "print this list and exit");
}

static int set_value(const char *command, const flag *fl, const char *text)
{
    char *end = NULL;
    errno = 0;
    switch (fl->kind) {
    case FLAG_INT: {
        long x = strtol(text, &end, 10);
        if (*text && !*end && !errno && x >= -2147483647L && x <= 2147483647L) {
            *(int *)fl->value = (int)x;
            return 0;
        }
        break;
    }
    case FLAG_LONG: {
        long x = strtol(text, &end, 10);
        if (*text && !*end && !errno) {
            *(long *)fl->value = x;
            return 0;
        }
        break;
    }
    case FLAG_U64: {
        unsigned long long x = strtoull(text, &end, 10);
        if (*text && *text != '-' && !*end && !errno) {
            *(uint64_t *)fl->value = x;
            return 0;
        }
        break;
    }
    case FLAG_FLOAT: {
        float x = strtof(text, &end);
        if (*text && !*end && !errno) {
            *(float *)fl->value = x;
            return 0;
        }
        break;
    }
    case FLAG_STRING: *(const char **)fl->value = text; return 0;
    case FLAG_BOOL: *(int *)fl->value = 1; return 0;
    case FLAG_LIST: {
        flag_list *l = fl->value;
        if (l->n < FLAG_LIST_MAX) {
            l->items[l->n++] = text;
            return 0;
        }
        fprintf(stderr, "pipetrain %s: --%s given more than %d times\n", command, fl->name,
                FLAG_LIST_MAX);
        return 2;
    }
    }
    fprintf(stderr, "pipetrain %s: --%s: '%s' is not a%s\n", command, fl->name, text,
            fl->kind == FLAG_FLOAT ? " number"
            : fl->kind == FLAG_U64 ? " non-negative integer"
                                   : "n integer");
    return 2;
}

int flags_parse(const char *command, const char *summary, const flag *flags, int n, int argc,
                char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            flags_help(stdout, command, summary, flags, n);
            return 1;
        }
        if (strncmp(arg, "--", 2)) {
            fprintf(stderr, "pipetrain %s: unexpected argument '%s' (flags start with --)\n",
                    command, arg);
            return 2;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const flag *fl = NULL;
        for (int k = 0; k < n; k++)
            if (strlen(flags[k].name) == len && !strncmp(flags[k].name, name, len))
                fl = &flags[k];
        if (!fl) {
            fprintf(stderr, "pipetrain %s: unknown flag '%s' (see pipetrain %s --help)\n", command,
                    arg, command);
            return 2;
        }
        const char *value;
        if (fl->kind == FLAG_BOOL) {
            if (eq) {
                fprintf(stderr, "pipetrain %s: --%s takes no value\n", command, fl->name);
                return 2;
            }
            value = "1";
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            fprintf(stderr, "pipetrain %s: --%s needs a value\n", command, fl->name);
            return 2;
        }
        if (set_value(command, fl, value))
            return 2;
    }
    return 0;
}

int flags_int_list(const char *command, const char *flag_name, const char *text, int *out, int max)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 1 || x > 1 << 24 || (*end && *end != ',') || n == max) {
            fprintf(stderr,
                    "pipetrain %s: --%s '%s' must be up to %d positive integers "
                    "separated by commas\n",
                    command, flag_name, text, max);
            return -1;
        }
        out[n++] = (int)x;
        p = *end ? end + 1 : end;
    }
    if (n == 0)
        fprintf(stderr, "pipetrain %s: --%s is empty\n", command, flag_name);
    return n ? n : -1;
}
