/* test_metrics_log: the JSONL metrics log parses back line by line with the
 * strict JSON parser: every field present with its exact value, val_loss
 * only where given, null for NaN and infinities; resuming keeps the lines up
 * to the checkpoint's step, drops later ones and a torn last line, and
 * appends after them. The JSON parser's own corner cases are checked here
 * too (escapes, surrogates, exact integers, malformed numbers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/json.h"
#include "io/metrics.h"

#include "check.h"

/* The lines of a file, parsed; returns the count (at most max). */
static int read_lines(const char *path, pt_json **lines, int max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char buf[4096];
    int n = 0;
    while (n < max && fgets(buf, sizeof buf, f)) {
        size_t len = strlen(buf);
        CHECK(len > 0 && buf[len - 1] == '\n', "line %d does not end in a newline", n + 1);
        int r = pt_json_parse(buf, len, 0, "metrics line", &lines[n]);
        CHECK(r == PT_OK, "line %d: %s", n + 1, pt_last_error());
        if (r != PT_OK)
            break;
        n++;
    }
    fclose(f);
    return n;
}

static int number_is(const pt_json *obj, const char *key, double want)
{
    const pt_json *v = pt_json_get(obj, key);
    return v && v->type == PT_JSON_NUMBER && v->number == want;
}

static int is_null(const pt_json *obj, const char *key)
{
    const pt_json *v = pt_json_get(obj, key);
    return v && v->type == PT_JSON_NULL;
}

static pt_metrics_row row_for(int step)
{
    pt_metrics_row r = {0};
    r.step = step;
    r.loss = 5.5451774444795623 / (step + 1);
    r.lr = 3e-4 * step;
    r.tokens_per_s = 10450.25;
    r.step_ms = 0.1 + step;
    return r;
}

static void log_lines(const char *path)
{
    pt_metrics_log *log;
    CHECK(pt_metrics_open(path, -1, &log) == PT_OK, "open: %s", pt_last_error());
    for (int step = 0; step < 5; step++) {
        pt_metrics_row row = row_for(step);
        if (step == 2) {
            row.has_val_loss = 1;
            row.val_loss = 1.0 / 3.0;
            row.n_extra = 1;
            row.extra[0].key = "val_acc";
            row.extra[0].value = 0.9375;
        }
        if (step == 4)
            row.loss = 2.31f; /* a float loss: written as 2.31 */
        if (step == 3) {
            row.loss = NAN;
            row.tokens_per_s = INFINITY;
            row.has_val_loss = 1;
            row.val_loss = -INFINITY;
        }
        CHECK(pt_metrics_write(log, &row) == PT_OK, "write: %s", pt_last_error());
    }
    pt_metrics_row bad = row_for(9);
    bad.n_extra = 1;
    bad.extra[0].key = "loss";
    bad.extra[0].value = 1;
    CHECK(pt_metrics_write(log, &bad) == PT_EINVAL, "an extra field named 'loss' was accepted");
    CHECK(pt_metrics_close(log) == PT_OK, "close: %s", pt_last_error());

    pt_json *lines[16];
    int n = read_lines(path, lines, 16);
    CHECK(n == 5, "%d lines, expected 5", n);
    for (int i = 0; i < n; i++) {
        pt_metrics_row want = row_for(i);
        const pt_json *o = lines[i];
        CHECK(o->type == PT_JSON_OBJECT, "line %d is not an object", i + 1);
        const pt_json *step = pt_json_get(o, "step");
        CHECK(step && step->is_int && step->int_value == i, "line %d: step", i + 1);
        CHECK(number_is(o, "lr", want.lr) && number_is(o, "step_ms", want.step_ms),
              "line %d: lr or step_ms not exact", i + 1);
        if (i == 3) {
            CHECK(is_null(o, "loss") && is_null(o, "tokens_per_s") && is_null(o, "val_loss"),
                  "line 4: NaN and infinities are not null");
        } else if (i == 4) {
            const pt_json *loss = pt_json_get(o, "loss");
            CHECK(loss && (float)loss->number == 2.31f && loss->number == 2.31,
                  "line 5: float loss not written as 2.31");
            CHECK(number_is(o, "tokens_per_s", want.tokens_per_s), "line 5: tokens_per_s");
        } else {
            CHECK(number_is(o, "loss", want.loss), "line %d: loss not exact", i + 1);
            CHECK(number_is(o, "tokens_per_s", want.tokens_per_s), "line %d: tokens_per_s", i + 1);
        }
        if (i == 2)
            CHECK(number_is(o, "val_loss", 1.0 / 3.0) && number_is(o, "val_acc", 0.9375),
                  "line 3: val_loss or val_acc");
        if (i != 2 && i != 3)
            CHECK(!pt_json_get(o, "val_loss"), "line %d: val_loss where none was given", i + 1);
        pt_json_free(lines[i]);
    }
}

static void resume(const char *path)
{
    /* Steps 0..4 are in the file; add a torn line as a crash would. */
    FILE *f = fopen(path, "ab");
    fputs("{\"step\":5,\"loss\":1.2", f);
    fclose(f);
    pt_metrics_log *log;
    CHECK(pt_metrics_open(path, 2, &log) == PT_OK, "resume: %s", pt_last_error());
    for (int step = 3; step < 6; step++) {
        pt_metrics_row row = row_for(step);
        CHECK(pt_metrics_write(log, &row) == PT_OK, "write: %s", pt_last_error());
    }
    CHECK(pt_metrics_close(log) == PT_OK, "close");
    pt_json *lines[16];
    int n = read_lines(path, lines, 16);
    CHECK(n == 6, "%d lines after resuming, expected 6", n);
    for (int i = 0; i < n; i++) {
        const pt_json *step = pt_json_get(lines[i], "step");
        CHECK(step && step->int_value == i, "line %d has step %lld", i + 1,
              step ? (long long)step->int_value : -1LL);
        CHECK(i == 3 ? number_is(lines[i], "loss", row_for(3).loss) : 1,
              "line 4 is the old step 3, not the resumed one");
        pt_json_free(lines[i]);
    }
    /* Resuming a log that does not exist starts one. */
    unlink(path);
    CHECK(pt_metrics_open(path, 7, &log) == PT_OK, "resume without a log: %s", pt_last_error());
    pt_metrics_close(log);
    CHECK(access(path, F_OK) == 0, "no log created");
}

static void expect_json(const char *text, int status, const char *want)
{
    pt_json *v = NULL;
    int r = pt_json_parse(text, strlen(text), 0, "t", &v);
    if (r != status || (want && !strstr(pt_last_error(), want))) {
        fprintf(stderr, "parse '%s': %d \"%s\"; expected %d with \"%s\"\n", text, r,
                pt_last_error(), status, want ? want : "");
        failures++;
    }
    pt_json_free(v);
}

static void json_parser(void)
{
    pt_json *v;
    const char *text = "[\"a\\u00e9\\ud83d\\ude00\\n\\\"\", 18446744073709551615, "
                       "-9223372036854775808, 1.5e3, -0.25, true, false, null, {}]";
    CHECK(pt_json_parse(text, strlen(text), 0, "t", &v) == PT_OK, "%s", pt_last_error());
    if (v) {
        CHECK(v->n == 9, "%zu items", v->n);
        CHECK(strcmp(v->items[0]->string, "a\xc3\xa9\xf0\x9f\x98\x80\n\"") == 0,
              "escapes decoded as '%s'", v->items[0]->string);
        CHECK(v->items[1]->is_uint && v->items[1]->uint_value == UINT64_MAX, "u64 max");
        CHECK(v->items[2]->is_int && v->items[2]->int_value == INT64_MIN, "i64 min");
        CHECK(!v->items[3]->is_int && v->items[3]->number == 1500.0, "1.5e3");
        CHECK(v->items[4]->number == -0.25, "-0.25");
        CHECK(v->items[5]->boolean && !v->items[6]->boolean, "booleans");
        CHECK(v->items[7]->type == PT_JSON_NULL && v->items[8]->type == PT_JSON_OBJECT, "null {}");
        pt_json_free(v);
    }
    expect_json("18446744073709551616", PT_OK, NULL); /* a double, not an integer */
    expect_json("[1,]", PT_EFORMAT, "byte 3");
    expect_json("[1 2]", PT_EFORMAT, "byte 3: expected ',' or ']'");
    expect_json("01", PT_EFORMAT, "leading zero");
    expect_json("1.", PT_EFORMAT, "no digit after '.'");
    expect_json("1e", PT_EFORMAT, "exponent");
    expect_json("NaN", PT_EFORMAT, "byte 0: unexpected character");
    expect_json("\"\\ud800\"", PT_EFORMAT, "surrogate");
    expect_json("\"\\udc00\"", PT_EFORMAT, "surrogate");
    expect_json("\"\\x\"", PT_EFORMAT, "unknown escape");
    expect_json("\"a\tb\"", PT_EFORMAT, "control character");
    expect_json("\"\xc0\xaf\"", PT_EFORMAT, "invalid UTF-8");
    expect_json("\"abc", PT_EFORMAT, "unterminated string");
    expect_json("{\"a\":1,\"a\":2}", PT_EFORMAT, "duplicate key");
    expect_json("{\"a\" 1}", PT_EFORMAT, "expected ':'");
    expect_json("", PT_EFORMAT, "unexpected end");
}

int main(void)
{
    char dir[] = "/tmp/pt_metrics_XXXXXX", path[256];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/log.jsonl", dir);
    json_parser();
    log_lines(path);
    resume(path);
    unlink(path);
    rmdir(dir);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("metrics log: ok\n");
    return 0;
}
