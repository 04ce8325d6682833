/* published_runs.h: the published-runs file read into plan/published.h's
 * structs (published_runs.c describes the format). Callers: `pipetrain plan
 * --check` and the tests that replay the runs. */
#ifndef PT_IO_PUBLISHED_RUNS_H
#define PT_IO_PUBLISHED_RUNS_H

#include "plan/published.h"

/* PT_EIO, PT_EFORMAT (naming the row and field) or PT_ENOMEM on failure. */
int pt_published_load(const char *path, pt_published **out);
void pt_published_free(pt_published *p);

#endif
