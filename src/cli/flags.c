/* flags.c: see flags.h. */
#include "cli/flags.h"

#include <string.h>

static void help(FILE *f, const char *command, const char *summary, const flag *flags, int n,
                 const char *args_meta)
{
    fprintf(f, "usage: pipetrain %s [FLAGS]%s%s\n\n%s\n\nflags:\n", command, args_meta ? " " : "",
            args_meta ? args_meta : "", summary);
    for (int i = 0; i < n; i++) {
        const flag *fl = &flags[i];
        char left[64], alias[8] = "";
        if (fl->alias)
            snprintf(alias, sizeof alias, "-%c, ", fl->alias);
        snprintf(left, sizeof left, "%s--%s%s%s", alias, fl->name, fl->meta ? " " : "",
                 fl->meta ? fl->meta : "");
        int number = fl->kind == FLAG_INT || fl->kind == FLAG_LONG || fl->kind == FLAG_FLOAT;
        size_t len = strlen(fl->help);
        int paren = number && len && fl->help[len - 1] == ')';
        fprintf(f, "  %-28s %.*s", left, (int)(paren ? len - 1 : len), fl->help);
        if (number) {
            fprintf(f, paren ? "; range " : " (range ");
            num_range_print(f, fl->range, fl->kind != FLAG_FLOAT);
            fprintf(f, ")");
        }
        fprintf(f, "\n");
    }
    fprintf(f, "  %-28s %s\n", "--help", "print this list and exit");
}

void flags_help(FILE *f, const char *command, const char *summary, const flag *flags, int n)
{
    help(f, command, summary, flags, n, NULL);
}

static int set_value(const char *command, const flag *fl, const char *text)
{
    switch (fl->kind) {
    case FLAG_INT: return num_int(command, fl->name, text, fl->range, fl->value);
    case FLAG_LONG: return num_long(command, fl->name, text, fl->range, fl->value);
    case FLAG_U64: return num_u64(command, fl->name, text, fl->value);
    case FLAG_FLOAT: return num_float(command, fl->name, text, fl->range, fl->value);
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
    return 2;
}

/* The flag an argument names ("--name", "--name=value", or "-a" for a
 * flag whose alias is 'a'), or NULL; *eq points at "=value" or is NULL. */
static flag *find_flag(flag *flags, int n, const char *arg, const char **eq)
{
    *eq = NULL;
    if (arg[0] == '-' && arg[1] && arg[1] != '-' && !arg[2]) {
        for (int k = 0; k < n; k++)
            if (flags[k].alias == arg[1])
                return &flags[k];
        return NULL;
    }
    const char *name = arg + 2;
    *eq = strchr(name, '=');
    size_t len = *eq ? (size_t)(*eq - name) : strlen(name);
    for (int k = 0; k < n; k++)
        if (strlen(flags[k].name) == len && !strncmp(flags[k].name, name, len))
            return &flags[k];
    return NULL;
}

int flags_parse_args(const char *command, const char *summary, flag *flags, int n, int argc,
                     char **argv, const char *args_meta, const char **args, int *n_args)
{
    int only_args = 0;
    if (n_args)
        *n_args = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (args && (only_args || arg[0] != '-' || !arg[1])) {
            args[(*n_args)++] = arg;
            continue;
        }
        if (args && !strcmp(arg, "--")) {
            only_args = 1;
            continue;
        }
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            help(stdout, command, summary, flags, n, args_meta);
            return 1;
        }
        if (arg[0] != '-' || (arg[1] == '-' && !arg[2])) {
            fprintf(stderr, "pipetrain %s: unexpected argument '%s' (flags start with --)\n",
                    command, arg);
            return 2;
        }
        const char *eq;
        flag *fl = find_flag(flags, n, arg, &eq);
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
        fl->text = value;
    }
    return 0;
}

int flags_parse(const char *command, const char *summary, flag *flags, int n, int argc, char **argv)
{
    return flags_parse_args(command, summary, flags, n, argc, argv, NULL, NULL, NULL);
}

const char *flags_given(const flag *flags, int n, const char *name)
{
    for (int k = 0; k < n; k++)
        if (!strcmp(flags[k].name, name))
            return flags[k].text;
    return NULL;
}

int flags_refuse_given(const char *command, const flag *flags, int n, const char *const *names,
                       const char *why)
{
    for (; *names; names++)
        if (flags_given(flags, n, *names)) {
            fprintf(stderr, "pipetrain %s: --%s does nothing %s\n", command, *names, why);
            return 2;
        }
    return 0;
}
