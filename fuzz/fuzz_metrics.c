/* fuzz_metrics: reading back the JSONL metrics log on resume
 * (src/io/metrics.c). The input is written as a log; pt_metrics_open()
 * with a resume step keeps the lines of steps up to it and drops the rest
 * (later steps, torn or malformed lines), then one row is appended. The
 * step is the input's first byte minus 8, so a fresh log (a negative step)
 * is tried too. What remains must be whole lines of the input, in order,
 * followed by the new row. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/metrics.h"

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096];
    int64_t resume = size ? (int64_t)data[0] - 8 : 0;
    fuzz_write("metrics.jsonl", data, size, path, sizeof path);
    pt_metrics_log *log = NULL;
    FUZZ_REQUIRE(pt_metrics_open(path, resume, &log) == PT_OK, "open: %s", pt_last_error());
    pt_metrics_row row = {.step = resume + 1, .loss = 2.5, .lr = 1e-3};
    FUZZ_REQUIRE(pt_metrics_write(log, &row) == PT_OK, "write: %s", pt_last_error());
    FUZZ_REQUIRE(pt_metrics_close(log) == PT_OK, "close: %s", pt_last_error());

    FILE *f = fopen(path, "rb");
    FUZZ_REQUIRE(f, "the log is gone");
    char *text = malloc(size + 4096);
    FUZZ_REQUIRE(text, "out of memory");
    size_t len = fread(text, 1, size + 4096, f);
    fclose(f);
    FUZZ_REQUIRE(len > 0 && text[len - 1] == '\n', "the log does not end in a whole line");
    /* every kept line is a whole line of the input, in the input's order */
    size_t from = 0, at = 0;
    char *last = text;
    for (char *nl; (nl = memchr(text + at, '\n', len - at)) != NULL && nl + 1 < text + len;) {
        size_t n = (size_t)(nl - (text + at)) + 1;
        int found = 0;
        while (!found && from + n <= size) {
            const uint8_t *hit = memchr(data + from, '\n', size - from);
            size_t line_len = hit ? (size_t)(hit - (data + from)) + 1 : size - from;
            found = line_len == n && !memcmp(data + from, text + at, n);
            from += line_len;
        }
        FUZZ_REQUIRE(found, "kept line at byte %zu is no line of the input", at);
        at += n;
        last = text + at;
    }
    FUZZ_REQUIRE(resume >= 0 || at == 0, "a fresh log kept old lines");
    FUZZ_REQUIRE(!strncmp(last, "{\"step\":", 8), "the new row is not last");
    free(text);
    return 0;
}
