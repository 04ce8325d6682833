/* flags.h: the subcommands' flag tables. A command lists its flags once,
 * with their kind, where the value goes, the default shown in --help and a
 * line of help; flags_parse() fills the values and refuses what it cannot
 * read, naming the flag. */
#ifndef PT_CLI_FLAGS_H
#define PT_CLI_FLAGS_H

#include <stdio.h>

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
} flag;

/* Parses argv[1..argc) (argv[0] is the command's name). Values come as
 * "--name value" or "--name=value"; bools take no value. Returns 0 on
 * success, 1 when --help was printed, 2 after printing a message. */
int flags_parse(const char *command, const char *summary, const flag *flags, int n, int argc,
                char **argv);
void flags_help(FILE *f, const char *command, const char *summary, const flag *flags, int n);

/* "2,3,3" -> {2,3,3}; returns the count, or -1 after printing a message
 * naming the flag. */
int flags_int_list(const char *command, const char *flag_name, const char *text, int *out, int max);

#endif
