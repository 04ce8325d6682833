/* metrics.c: the JSONL metrics log (see metrics.h). */
#include "io/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "io/json.h"
#include "tensor/error.h"
#include "tensor/output_file.h"

struct pt_metrics_log {
    FILE *f;
    char *path;
};

/* 1 if line[0..len) is a log line for a step <= resume_step. */
static int keep_line(const char *line, size_t len, int64_t resume_step)
{
    pt_json *v;
    if (pt_json_parse(line, len, 0, "metrics line", &v) != PT_OK)
        return 0;
    const pt_json *step = pt_json_get(v, "step");
    int keep =
        step && step->type == PT_JSON_NUMBER && step->is_int && step->int_value <= resume_step;
    pt_json_free(v);
    return keep;
}

/* Rewrites the log with only the lines a resumed run keeps. */
static int trim_for_resume(const char *path, int64_t resume_step)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? PT_OK : pt_fail(PT_EIO, "%s: %s", path, strerror(errno));
    char *text = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *t = realloc(text, ncap);
            if (!t) {
                free(text);
                fclose(f);
                return pt_fail(PT_ENOMEM, "out of memory");
            }
            text = t;
            cap = ncap;
        }
        size_t got = fread(text + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int read_error = ferror(f);
    fclose(f);
    if (read_error) {
        free(text);
        return pt_fail(PT_EIO, "%s: read failed", path);
    }
    pt_atomic_file af;
    int r = pt_atomic_open(&af, path);
    /* Only complete lines count: a line without its newline was torn. */
    for (size_t start = 0; r == PT_OK && start < n;) {
        char *nl = memchr(text + start, '\n', n - start);
        if (!nl)
            break;
        size_t len = (size_t)(nl - (text + start));
        if (keep_line(text + start, len, resume_step))
            r = pt_atomic_write(&af, text + start, len + 1);
        start += len + 1;
    }
    free(text);
    if (r != PT_OK) {
        if (af.f)
            pt_atomic_abort(&af);
        return r;
    }
    return pt_atomic_commit(&af);
}

int pt_metrics_open(const char *path, int64_t resume_step, pt_metrics_log **out)
{
    *out = NULL;
    /* a regular file or a new name, before anything reads or writes it */
    FILE *probe = pt_open_output(path, "a");
    if (!probe)
        return PT_EINVAL;
    fclose(probe);
    if (resume_step >= 0) {
        int r = trim_for_resume(path, resume_step);
        if (r != PT_OK)
            return r;
    }
    pt_metrics_log *log = calloc(1, sizeof *log);
    if (!log || !(log->path = strdup(path))) {
        free(log);
        return pt_fail(PT_ENOMEM, "out of memory");
    }
    log->f = pt_open_output(path, resume_step >= 0 ? "a" : "w");
    if (!log->f) {
        free(log->path);
        free(log);
        return PT_EIO;
    }
    *out = log;
    return PT_OK;
}

static int is_standard_key(const char *key)
{
    static const char *const keys[] = {"step",    "loss",      "lr",       "tokens_per_s",
                                       "step_ms", "grad_norm", "val_loss", "val_accuracy"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(key, keys[i]) == 0)
            return 1;
    return 0;
}

static int write_field(FILE *f, const char *key, double value)
{
    int bad = fputc(',', f) == EOF;
    bad |= pt_json_write_string(f, key, strlen(key)) != 0;
    bad |= fputc(':', f) == EOF;
    bad |= pt_json_write_number(f, value) != 0;
    return bad;
}

int pt_metrics_write(pt_metrics_log *log, const pt_metrics_row *row)
{
    if (row->n_extra < 0 || row->n_extra > PT_METRICS_MAX_EXTRA)
        return pt_fail(PT_EINVAL, "%s: %d extra metrics (at most %d)", log->path, row->n_extra,
                       PT_METRICS_MAX_EXTRA);
    for (int i = 0; i < row->n_extra; i++) {
        const char *key = row->extra[i].key;
        if (!key || !*key || is_standard_key(key))
            return pt_fail(PT_EINVAL, "%s: extra metric %d has no name or a standard one",
                           log->path, i);
        for (int j = 0; j < i; j++)
            if (strcmp(row->extra[j].key, key) == 0)
                return pt_fail(PT_EINVAL, "%s: extra metric '%s' given twice", log->path, key);
    }
    FILE *f = log->f;
    int bad = fprintf(f, "{\"step\":%lld", (long long)row->step) < 0;
    bad |= write_field(f, "loss", row->loss);
    bad |= write_field(f, "lr", row->lr);
    bad |= write_field(f, "tokens_per_s", row->tokens_per_s);
    bad |= write_field(f, "step_ms", row->step_ms);
    if (row->has_grad_norm)
        bad |= write_field(f, "grad_norm", row->grad_norm);
    if (row->has_val_loss)
        bad |= write_field(f, "val_loss", row->val_loss);
    if (row->has_val_accuracy)
        bad |= write_field(f, "val_accuracy", row->val_accuracy);
    for (int i = 0; i < row->n_extra; i++)
        bad |= write_field(f, row->extra[i].key, row->extra[i].value);
    bad |= fputs("}\n", f) == EOF;
    bad |= fflush(f) != 0;
    if (bad)
        return pt_fail(PT_EIO, "%s: write failed: %s", log->path, strerror(errno));
    return PT_OK;
}

int pt_metrics_close(pt_metrics_log *log)
{
    if (!log)
        return PT_OK;
    int r = PT_OK;
    if (fclose(log->f) != 0)
        r = pt_fail(PT_EIO, "%s: close failed: %s", log->path, strerror(errno));
    free(log->path);
    free(log);
    return r;
}
