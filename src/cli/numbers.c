/* numbers.c: see numbers.h. The syntax is checked by hand first (strtol and
 * strtod alone would take leading spaces, 0x, nan and inf), then the C
 * library converts the text and the range is checked on the converted
 * value, float values after their rounding to float. */
#include "cli/numbers.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *dashes(const char *flag) { return strncmp(flag, "--", 2) ? "--" : ""; }

void num_range_print(FILE *f, num_range r, int integer)
{
    if (integer)
        fprintf(f, "%c%.0f, %.0f%c", r.open & NUM_OPEN_LO ? '(' : '[', r.lo, r.hi,
                r.open & NUM_OPEN_HI ? ')' : ']');
    else
        fprintf(f, "%c%g, %g%c", r.open & NUM_OPEN_LO ? '(' : '[', r.lo, r.hi,
                r.open & NUM_OPEN_HI ? ')' : ']');
}

int num_refuse(const char *cmd, const char *flag, const char *text, const char *want)
{
    fprintf(stderr, "pipetrain %s: %s%s '%s': expected %s\n", cmd, dashes(flag), flag, text, want);
    return 2;
}

static int refuse_range(const char *cmd, const char *flag, const char *text, num_range r,
                        int integer)
{
    fprintf(stderr, "pipetrain %s: %s%s '%s': expected %s in ", cmd, dashes(flag), flag, text,
            integer ? "an integer" : "a finite number");
    num_range_print(stderr, r, integer);
    fprintf(stderr, "\n");
    return 2;
}

static const char *digits(const char *p)
{
    while (*p >= '0' && *p <= '9')
        p++;
    return p;
}

/* -?[0-9]+ */
static int is_integer(const char *text)
{
    const char *p = text + (*text == '-');
    const char *end = digits(p);
    return end > p && !*end;
}

/* -?([0-9]+(.[0-9]*)?|.[0-9]+)([eE][+-]?[0-9]+)? */
static int is_real(const char *text)
{
    const char *p = text + (*text == '-');
    const char *end = digits(p);
    int mantissa = end > p;
    if (*end == '.') {
        const char *frac = end + 1;
        end = digits(frac);
        mantissa |= end > frac;
    }
    if (!mantissa)
        return 0;
    if (*end == 'e' || *end == 'E') {
        const char *exp = end + 1 + (end[1] == '+' || end[1] == '-');
        end = digits(exp);
        if (end == exp)
            return 0;
    }
    return !*end;
}

static int in_range(double x, num_range r)
{
    return (r.open & NUM_OPEN_LO ? x > r.lo : x >= r.lo) &&
           (r.open & NUM_OPEN_HI ? x < r.hi : x <= r.hi);
}

int num_long(const char *cmd, const char *flag, const char *text, num_range r, long *out)
{
    if (!is_integer(text))
        return refuse_range(cmd, flag, text, r, 1);
    errno = 0;
    long x = strtol(text, NULL, 10);
    if (errno || !in_range((double)x, r))
        return refuse_range(cmd, flag, text, r, 1);
    *out = x;
    return 0;
}

int num_int(const char *cmd, const char *flag, const char *text, num_range r, int *out)
{
    if (r.lo < -2147483647.0)
        r.lo = -2147483647.0;
    if (r.hi > 2147483647.0)
        r.hi = 2147483647.0;
    long x;
    int rc = num_long(cmd, flag, text, r, &x);
    if (!rc)
        *out = (int)x;
    return rc;
}

int num_u64(const char *cmd, const char *flag, const char *text, uint64_t *out)
{
    int ok = *text != '-' && is_integer(text);
    errno = 0;
    unsigned long long x = ok ? strtoull(text, NULL, 10) : 0;
    if (!ok || errno) {
        fprintf(stderr, "pipetrain %s: %s%s '%s': expected an integer in [0, %llu]\n", cmd,
                dashes(flag), flag, text, (unsigned long long)UINT64_MAX);
        return 2;
    }
    *out = (uint64_t)x;
    return 0;
}

int num_double(const char *cmd, const char *flag, const char *text, num_range r, double *out)
{
    if (!is_real(text))
        return refuse_range(cmd, flag, text, r, 0);
    double x = strtod(text, NULL); /* an underflow gives 0 or a subnormal: the range decides */
    if (!isfinite(x) || !in_range(x, r))
        return refuse_range(cmd, flag, text, r, 0);
    *out = x;
    return 0;
}

/* Splits "12.5MB/s" into its number and the unit's factor from units[]
 * (matched case aside, "/s" dropped); 0 when both are good. */
typedef struct {
    const char *name;
    double factor;
} num_unit;

static int number_with_unit(const char *text, const num_unit *units, int n_units, double *out)
{
    size_t len = strlen(text), end = 0;
    while (end < len && (strchr("0123456789.+-eE", text[end]) != NULL))
        end++;
    /* an exponent's 'e' belongs to the number only when digits follow it */
    while (end > 0 && strchr("eE+-", text[end - 1]))
        end--;
    char number[64], unit[16];
    if (end == 0 || end >= sizeof number || len - end >= sizeof unit)
        return -1;
    memcpy(number, text, end);
    number[end] = '\0';
    snprintf(unit, sizeof unit, "%s", text + end);
    size_t ul = strlen(unit);
    if (ul >= 2 && !strcmp(unit + ul - 2, "/s"))
        unit[ul - 2] = '\0';
    if (!is_real(number))
        return -1;
    for (int i = 0; i < n_units; i++)
        if (!strcasecmp(unit, units[i].name)) {
            *out = strtod(number, NULL) * units[i].factor;
            return isfinite(*out) ? 0 : -1;
        }
    return -1;
}

int num_rate(const char *cmd, const char *flag, const char *text, double *bytes_per_s)
{
    static const num_unit units[] = {{"", 1},           {"b", 1},          {"kb", 1e3},
                                     {"mb", 1e6},       {"gb", 1e9},       {"bit", 1.0 / 8},
                                     {"kbit", 1e3 / 8}, {"mbit", 1e6 / 8}, {"gbit", 1e9 / 8}};
    double x;
    if (number_with_unit(text, units, (int)(sizeof units / sizeof units[0]), &x) || !(x > 0) ||
        x > 1e13)
        return num_refuse(cmd, flag, text,
                          "a rate above 0 like 100mbit, 1gbit, 12.5MB/s or bytes per second "
                          "(at most 1e13 bytes/s)");
    *bytes_per_s = x;
    return 0;
}

int num_seconds(const char *cmd, const char *flag, const char *text, double *seconds)
{
    static const num_unit units[] = {{"", 1}, {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}};
    double x;
    if (number_with_unit(text, units, (int)(sizeof units / sizeof units[0]), &x) || !(x >= 0) ||
        x > 1000)
        return num_refuse(cmd, flag, text, "a time in [0, 1000] s like 50us, 0.2ms or 0.001");
    *seconds = x;
    return 0;
}

int num_float(const char *cmd, const char *flag, const char *text, num_range r, float *out)
{
    double x;
    if (num_double(cmd, flag, text, r, &x))
        return 2;
    float f = (float)x;
    if (!isfinite(f) || !in_range(f, r)) /* 1e-50 rounds to 0 */
        return refuse_range(cmd, flag, text, r, 0);
    *out = f;
    return 0;
}

/* Reads the integers of text, items separated by commas, each of `per`
 * integers separated by '-'; 0 when each is one in r and there are 1 to
 * max items. */
static int read_items(const char *text, num_range r, int per, int *out, int max, int *n)
{
    char item[32];
    const char *p = text;
    int count = 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len >= sizeof item || count == max * per)
            return -1;
        memcpy(item, p, len);
        item[len] = '\0';
        char *part = item;
        for (int k = 0; k < per; k++) {
            char *dash = k + 1 < per ? strchr(part + (*part == '-'), '-') : NULL;
            if (k + 1 < per && !dash)
                return -1;
            if (dash)
                *dash = '\0';
            if (!is_integer(part))
                return -1;
            errno = 0;
            long x = strtol(part, NULL, 10);
            if (errno || !in_range((double)x, r))
                return -1;
            out[count++] = (int)x;
            part = dash ? dash + 1 : part;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    *n = count / per;
    return 0;
}

static int refuse_items(const char *cmd, const char *flag, const char *text, num_range r,
                        const char *what, int max)
{
    fprintf(stderr, "pipetrain %s: %s%s '%s': expected 1 to %d %s in ", cmd, dashes(flag), flag,
            text, max, what);
    num_range_print(stderr, r, 1);
    fprintf(stderr, " separated by commas\n");
    return 2;
}

int num_int_list(const char *cmd, const char *flag, const char *text, num_range r, int *out,
                 int max, int *n)
{
    if (read_items(text, r, 1, out, max, n))
        return refuse_items(cmd, flag, text, r, "integers", max);
    return 0;
}

int num_int_pairs(const char *cmd, const char *flag, const char *text, num_range r, int *out,
                  int max, int *n)
{
    if (read_items(text, r, 2, out, max, n))
        return refuse_items(cmd, flag, text, r, "pairs of chunks A-B", max);
    return 0;
}

int num_long_span(const char *cmd, const char *flag, const char *text, num_range r, long *first,
                  long *last)
{
    char part[2][32];
    const char *colon = strchr(text, ':');
    size_t len = colon ? (size_t)(colon - text) : strlen(text);
    const char *rest = colon ? colon + 1 : text;
    long x[2];
    int ok = len < sizeof part[0] && strlen(rest) < sizeof part[1];
    if (ok) {
        memcpy(part[0], text, len);
        part[0][len] = '\0';
        strcpy(part[1], rest);
    }
    for (int k = 0; ok && k < 2; k++) {
        errno = 0;
        ok = is_integer(part[k]) && (x[k] = strtol(part[k], NULL, 10), !errno) &&
             in_range((double)x[k], r);
    }
    if (!ok || x[0] > x[1]) {
        fprintf(stderr,
                "pipetrain %s: %s%s '%s': expected A:B (or one N) with A <= B, integers in ", cmd,
                dashes(flag), flag, text);
        num_range_print(stderr, r, 1);
        fprintf(stderr, "\n");
        return 2;
    }
    *first = x[0];
    *last = x[1];
    return 0;
}

int num_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a && b > UINT64_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}
