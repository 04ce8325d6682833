/* fuzz_cluster: the cluster description a user writes for `pipetrain plan
 * --cluster` (src/io/cluster_file.c). The input is written as the file and
 * loaded; a description it accepts must hold what the planner relies on
 * (at least one node and one device a node, links with positive bandwidth,
 * a device with memory, bandwidth, a peak and efficiencies in (0, 1]), and
 * a small GPT must then predict on it or be refused with a message. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096];
    fuzz_write("cluster.json", data, size, path, sizeof path);
    pt_cluster c;
    if (pt_cluster_load(path, &c) != PT_OK) {
        FUZZ_REQUIRE(pt_last_error()[0], "a refusal without a message");
        return 0;
    }
    const pt_device *d = &c.device;
    FUZZ_REQUIRE(c.nodes >= 1 && c.devices_per_node >= 1, "%d nodes of %d", c.nodes,
                 c.devices_per_node);
    FUZZ_REQUIRE(c.intra_node.bandwidth > 0 && c.inter_node.bandwidth > 0 &&
                     c.intra_node.latency >= 0 && c.inter_node.latency >= 0,
                 "a link without bandwidth");
    FUZZ_REQUIRE(d->memory_bytes > 0 && d->memory_bandwidth > 0 && d->gemm_efficiency > 0 &&
                     d->gemm_efficiency <= 1 && d->memory_efficiency > 0 &&
                     d->memory_efficiency <= 1,
                 "device %s: memory %g, bandwidth %g, efficiencies %g %g", d->name, d->memory_bytes,
                 d->memory_bandwidth, d->gemm_efficiency, d->memory_efficiency);
    int p = d->peak_flops[PT_PLAN_BF16] > 0 ? PT_PLAN_BF16 : PT_PLAN_FP32;
    FUZZ_REQUIRE(d->peak_flops[p] > 0, "a device without a peak");
    pt_model_config m = pt_model_config_gpt();
    m.n_layer = 4, m.n_head = 4, m.n_embd = 256, m.seq_len = 128, m.vocab = 1000;
    pt_layout l = {.pipeline = 1,
                   .tensor = 1,
                   .data = 1,
                   .virtual_stages = 1,
                   .micro_batch_size = 2,
                   .microbatches = 4,
                   .schedule = "1f1b",
                   .precision = (pt_plan_precision)p};
    pt_prediction pred;
    if (pt_plan_predict(&c, &m, &l, NULL, &pred) == PT_OK)
        FUZZ_REQUIRE(pred.iteration_s > 0 && isfinite(pred.iteration_s) && pred.memory_bytes > 0,
                     "a prediction of %g s and %zu bytes", pred.iteration_s, pred.memory_bytes);
    else
        FUZZ_REQUIRE(pt_last_error()[0], "a refusal without a message");
    return 0;
}
