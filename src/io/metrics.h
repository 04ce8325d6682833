/* metrics.h: the training run's metrics log, one JSON object per line (JSONL)
 * per step, so plotting scripts and dashboards can follow a run as it goes.
 *
 * A line: {"step":12,"loss":2.31,"lr":0.0003,"tokens_per_s":10450.2,
 * "step_ms":196.1} plus "grad_norm", "val_loss" and "val_accuracy" where
 * the step has them and any extra fields the caller adds (the trainer's
 * per-worker figures; docs/watching.md lists them all). Numbers are written so JSON
 * parsers read them back exactly (a double as that double, a value that is a
 * float as that float); NaN and infinities are written as null.
 * Each line is flushed as it is written, so a crash loses at most the line
 * being written. Callers: the train command. */
#ifndef PT_IO_METRICS_H
#define PT_IO_METRICS_H

#include "pipetrain.h"

#include <stdint.h>

typedef struct pt_metrics_log pt_metrics_log;

#define PT_METRICS_MAX_EXTRA 256

typedef struct {
    int64_t step;
    double loss, lr, tokens_per_s, step_ms;
    int has_grad_norm, has_val_loss, has_val_accuracy;
    double grad_norm, val_loss, val_accuracy;
    int n_extra; /* extra numeric fields, written after the standard ones */
    struct {
        const char *key;
        double value;
    } extra[PT_METRICS_MAX_EXTRA];
} pt_metrics_row;

/* Opens the log. resume_step < 0: a fresh log (the file is truncated).
 * resume_step >= 0: a run resumed from the checkpoint of that step: the
 * lines already there for steps up to resume_step are kept, later ones (the
 * interrupted run went on past its last checkpoint) and a torn last line are
 * dropped, atomically, and new lines are appended. PT_EIO if the file cannot
 * be written. */
int pt_metrics_open(const char *path, int64_t resume_step, pt_metrics_log **out);
/* Writes and flushes one line; PT_EIO on failure, PT_EINVAL for a bad row. */
int pt_metrics_write(pt_metrics_log *log, const pt_metrics_row *row);
/* Closes the log; PT_EIO if the last data could not be written. NULL is ok. */
int pt_metrics_close(pt_metrics_log *log);

#endif
