/* numbers.h: the one place where the command line's numbers are read. Every
 * numeric flag of every subcommand (flags.c's tables for train and generate,
 * the hand parsers of schedule and plan) goes through these functions. A
 * text is a number only when all of it is one: an optional minus sign and
 * decimal digits (integers), with a fraction and an exponent allowed for
 * reals; no spaces, no junk after it, no 0x, no nan or inf. The number must
 * also lie in the flag's range. Otherwise a message names the command, the
 * flag, the text given and what is allowed, e.g.
 *   pipetrain train: --lr 'nan': expected a finite number in (0, 10]
 * and the function returns 2, the exit status of a usage error. */
#ifndef PT_CLI_NUMBERS_H
#define PT_CLI_NUMBERS_H

#include <stdint.h>
#include <stdio.h>

/* The values a flag allows: [lo, hi], with lo or hi excluded as `open`
 * says. Integer ranges are exact up to 2^53. */
typedef struct {
    double lo, hi;
    int open; /* NUM_OPEN_LO | NUM_OPEN_HI */
} num_range;

enum { NUM_OPEN_LO = 1, NUM_OPEN_HI = 2 };
#define NUM_RANGE(lo, hi) ((num_range){(lo), (hi), 0})           /* [lo, hi] */
#define NUM_ABOVE(lo, hi) ((num_range){(lo), (hi), NUM_OPEN_LO}) /* (lo, hi] */
#define NUM_BELOW(lo, hi) ((num_range){(lo), (hi), NUM_OPEN_HI}) /* [lo, hi) */

/* Each returns 0 with *out set, or 2 after the message on stderr (*out is
 * then untouched). flag is the flag's name with or without its dashes. */
int num_int(const char *cmd, const char *flag, const char *text, num_range r, int *out);
int num_long(const char *cmd, const char *flag, const char *text, num_range r, long *out);
int num_u64(const char *cmd, const char *flag, const char *text, uint64_t *out);
int num_float(const char *cmd, const char *flag, const char *text, num_range r, float *out);
int num_double(const char *cmd, const char *flag, const char *text, num_range r, double *out);

/* "2,3,3" -> {2,3,3}: 1 to max integers in r separated by commas; *n gets
 * the count. */
int num_int_list(const char *cmd, const char *flag, const char *text, num_range r, int *out,
                 int max, int *n);

/* "0-5,1-4" -> {0,5,1,4}: 1 to max pairs A-B of integers in r separated by
 * commas; *n gets the number of pairs. */
int num_int_pairs(const char *cmd, const char *flag, const char *text, num_range r, int *out,
                  int max, int *n);

/* "3:7" -> 3 and 7; "5" -> 5 and 5: a span of integers A:B in r with
 * A <= B, or one integer alone (steps to trace). */
int num_long_span(const char *cmd, const char *flag, const char *text, num_range r, long *first,
                  long *last);

/* Prints r as "[1, 1024]", "(0, 10]" or "[0, 1)" (integers when integer
 * is set). */
void num_range_print(FILE *f, num_range r, int integer);

/* A link's bandwidth in bytes per second: a number, alone (bytes/s) or
 * followed by a unit, case aside: bit, kbit, mbit, gbit (bits per second,
 * powers of 1000) or b, kb, mb, gb (bytes per second), optionally ending in
 * "/s": "100mbit", "1Gbit", "12.5MB/s", "125000000". Must be > 0 and at
 * most 1e13 bytes/s. */
int num_rate(const char *cmd, const char *flag, const char *text, double *bytes_per_s);
/* A time in seconds: a number alone (seconds) or followed by s, ms or us:
 * "50us", "0.2ms", "0.001". In [0, 1000] s. */
int num_seconds(const char *cmd, const char *flag, const char *text, double *seconds);

/* The same message for a value read earlier that a later check refuses
 * (--min-lr above --lr): "pipetrain CMD: --FLAG 'TEXT': expected WANT". */
int num_refuse(const char *cmd, const char *flag, const char *text, const char *want);

/* *out = a * b; -1 when that overflows 64 bits (sizes are checked with it
 * before anything is allocated). */
int num_mul(uint64_t a, uint64_t b, uint64_t *out);

#endif
