/* fuzz_published: the published-runs file `pipetrain plan --check` reads
 * (src/io/published_runs.c). The input is written as the file and loaded;
 * a file it accepts must carry a source beside every number of every row it
 * holds, and what it refuses, it refuses with a message. */
#include <stdlib.h>
#include <string.h>

#include "io/published_runs.h"

#include "harness.h"

static void sourced(const pt_cited *c, const char *what)
{
    FUZZ_REQUIRE(!c->value || c->source, "%s: %g without a source", what, c->value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096];
    fuzz_write("runs.json", data, size, path, sizeof path);
    pt_published *p = NULL;
    if (pt_published_load(path, &p) != PT_OK) {
        FUZZ_REQUIRE(!p && pt_last_error()[0], "a refusal without a message");
        return 0;
    }
    FUZZ_REQUIRE(p->n_zb + p->n_megatron > 0, "a file without runs was accepted");
    for (int i = 0; i < p->n_zb; i++) {
        const pt_published_zb *r = &p->zb[i];
        sourced(&r->t_f, "T_F"), sourced(&r->t_b, "T_B"), sourced(&r->t_w, "T_W");
        sourced(&r->stages, "stages"), sourced(&r->microbatches, "micro-batches");
        for (int k = 0; k < PT_ZB_N_SCHEDULES; k++)
            sourced(&r->bubble[k], "a bubble rate"),
                sourced(&r->samples_per_gpu_s[k], "a throughput");
    }
    for (int i = 0; i < p->n_megatron; i++) {
        const pt_published_megatron *r = &p->megatron[i];
        sourced(&r->tflops_per_gpu, "TFLOP/s"), sourced(&r->hidden, "hidden");
        sourced(&r->gpus, "GPUs"), sourced(&r->batch, "batch");
    }
    pt_published_free(p);
    return 0;
}
