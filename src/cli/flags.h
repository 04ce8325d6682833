/* flags.h: the subcommands' flag tables. A command lists its flags once,
 * with their kind, where the value goes, the default shown in --help, a
 * line of help and, for a number, the values it allows; flags_parse() fills
 * the values through numbers.c's strict readers, refuses what it cannot
 * read, naming the flag, and marks which flags were given so the command
 * can refuse those that would do nothing in the mode chosen. */
#ifndef PT_CLI_FLAGS_H
#define PT_CLI_FLAGS_H

#include <stdio.h>

#include "cli/numbers.h"

typedef enum {
    FLAG_INT,
    FLAG_LONG,
    FLAG_FLOAT,
    FLAG_STRING,
    FLAG_BOOL,
    FLAG_U64,
    FLAG_LIST /* may repeat: each value is appended to a flag_list */
} flag_kind;

#define FLAG_LIST_MAX 64

typedef struct {
    const char *items[FLAG_LIST_MAX];
    int n;
} flag_list;

typedef struct {
    const char *name; /* without the leading dashes */
    flag_kind kind;
    void *value;      /* int, long, float, const char *, int (bool), uint64_t, flag_list */
    const char *meta; /* value placeholder in --help ("N", "FILE") */
    const char *help; /* ends with its default, as "(default 16)" */
    num_range range;  /* FLAG_INT, FLAG_LONG, FLAG_FLOAT: the values allowed */
    const char *text; /* set by flags_parse: the last value given (bools: "1"), or NULL */
    char alias;       /* 'o': -o works as --name too; 0: none */
} flag;

/* Table rows: FLAG for a string, bool, list or seed, FLAG_RANGED for an int,
 * long or float, with the values it allows. */
#define FLAG(name, kind, value, meta, help)                     \
    {                                                           \
        name, kind, value, meta, help, NUM_RANGE(0, 0), NULL, 0 \
    }
#define FLAG_RANGED(name, kind, value, meta, help, range) \
    {                                                     \
        name, kind, value, meta, help, range, NULL, 0     \
    }
/* A string flag with a one-letter alias (-o FILE). */
#define FLAG_ALIAS(name, alias, value, meta, help)                         \
    {                                                                      \
        name, FLAG_STRING, value, meta, help, NUM_RANGE(0, 0), NULL, alias \
    }

/* Parses argv[1..argc) (argv[0] is the command's name). Values come as
 * "--name value" or "--name=value"; bools take no value. Returns 0 on
 * success, 1 when --help was printed, 2 after printing a message. */
int flags_parse(const char *command, const char *summary, flag *flags, int n, int argc,
                char **argv);
/* As flags_parse, for a command that also takes arguments: those that do
 * not start with '-' (and "-" itself, and every one after "--") go to
 * args[0..*n_args), which has room for argc; args_meta names them in the
 * usage line ("FILES..."). */
int flags_parse_args(const char *command, const char *summary, flag *flags, int n, int argc,
                     char **argv, const char *args_meta, const char **args, int *n_args);
/* The help of a number ends with its range: "(default 4; range [1, 1024])". */
void flags_help(FILE *f, const char *command, const char *summary, const flag *flags, int n);

/* The text given for flag `name`, or NULL when it was not given. */
const char *flags_given(const flag *flags, int n, const char *name);

/* Refuses, with status 2, each of the NULL-terminated names that was given:
 * "pipetrain CMD: --NAME does nothing WHY". Returns 0 when none was. */
int flags_refuse_given(const char *command, const flag *flags, int n, const char *const *names,
                       const char *why);

#endif
