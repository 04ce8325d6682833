/* published_data.h: the published-runs file the planner's checks read
 * (tests/data/published_runs.json, found through $PT_TEST_DATA). */
#ifndef PT_TESTS_PUBLISHED_DATA_H
#define PT_TESTS_PUBLISHED_DATA_H

#include <stdio.h>
#include <stdlib.h>

#include "io/published_runs.h"
#include "pipetrain.h"

/* The runs, or NULL with the reason printed. */
static inline pt_published *load_published(void)
{
    const char *data = getenv("PT_TEST_DATA");
    char path[1024];
    snprintf(path, sizeof path, "%s/published_runs.json", data ? data : "tests/data");
    pt_published *p = NULL;
    if (pt_published_load(path, &p) != PT_OK)
        fprintf(stderr, "%s\n", pt_last_error());
    return p;
}

#endif
