/* test_cluster_file: the files a user writes for the planner.
 *   - a cluster (io/cluster_file.c): a built-in device by name, a device of
 *     one's own, one based on a built-in with some figures changed; links in
 *     GB/s and microseconds; every missing or wrong field refused with the
 *     file and the field named;
 *   - the built-in devices: the vendors' peaks and memory, and this
 *     machine's CPU measured to a positive rate;
 *   - the published-runs file (io/published_runs.c): a number without its
 *     source, or an unknown schedule, is refused with the row and field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/published_runs.h"
#include "pipetrain.h"

#include "check.h"

static char dir[] = "/tmp/pt_cluster_file_XXXXXX";

static const char *write_file(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        CHECK(0, "cannot write %s", path);
    return path;
}

static void refused(const char *text, const char *want)
{
    pt_cluster c;
    const char *path = write_file("bad.json", text);
    int rc = pt_cluster_load(path, &c);
    CHECK(rc != PT_OK && strstr(pt_last_error(), want) && strstr(pt_last_error(), "bad.json"),
          "%s: refused with '%s', want a message naming %s", text, pt_last_error(), want);
}

static int run(void)
{
    pt_cluster c;
    const char *path = write_file("dgx.json", "{\"name\": \"dgx\", \"device\": \"a100-40gb\", "
                                              "\"nodes\": 2, \"devices_per_node\": 8, "
                                              "\"intra_node\": {\"bandwidth_gbs\": 300, "
                                              "\"latency_us\": 2}, \"inter_node\": "
                                              "{\"bandwidth_gbs\": 25, \"latency_us\": 7}}");
    REQUIRE(pt_cluster_load(path, &c) == PT_OK, "%s", pt_last_error());
    CHECK(!strcmp(c.name, "dgx") && !strcmp(c.device.name, "a100-40gb") && c.nodes == 2 &&
              c.devices_per_node == 8,
          "the cluster's name, device and sizes");
    CHECK(c.device.peak_flops[PT_PLAN_BF16] == 312e12 && c.device.memory_bytes == 40e9 &&
              c.device.memory_bandwidth == 1555e9,
          "the A100 40GB's figures");
    CHECK(c.intra_node.bandwidth == 300e9 && fabs(c.intra_node.latency - 2e-6) < 1e-15 &&
              c.inter_node.bandwidth == 25e9 && fabs(c.inter_node.latency - 7e-6) < 1e-15,
          "the links in bytes per second and seconds");

    path =
        write_file("own.json", "{\"device\": {\"name\": \"mine\", \"memory_gb\": 24, "
                               "\"memory_bandwidth_gbs\": 1000, \"peak_tflops\": {\"bf16\": 100, "
                               "\"fp32\": 50}, \"gemm_efficiency\": 0.5}, \"nodes\": 1, "
                               "\"devices_per_node\": 1}");
    REQUIRE(pt_cluster_load(path, &c) == PT_OK, "%s", pt_last_error());
    CHECK(!strcmp(c.device.name, "mine") && c.device.memory_bytes == 24e9 &&
              c.device.peak_flops[PT_PLAN_BF16] == 100e12 && c.device.gemm_efficiency == 0.5 &&
              c.device.memory_efficiency == 1,
          "a device of one's own");

    path = write_file("based.json", "{\"device\": {\"base\": \"h100\", \"memory_gb\": 94}, "
                                    "\"nodes\": 1, \"devices_per_node\": 2, \"intra_node\": "
                                    "{\"bandwidth_gbs\": 450}}");
    REQUIRE(pt_cluster_load(path, &c) == PT_OK, "%s", pt_last_error());
    CHECK(c.device.memory_bytes == 94e9 && c.device.peak_flops[PT_PLAN_FP8] == 1978.9e12,
          "a built-in device with its memory changed");

    refused("{\"device\": \"a100\", \"nodes\": 1, \"devices_per_node\": 1}", "'a100'");
    refused("{\"device\": \"h100\", \"devices_per_node\": 1}", "\"nodes\"");
    refused("{\"device\": \"h100\", \"nodes\": 2, \"devices_per_node\": 1}", "\"inter_node\"");
    refused("{\"device\": \"h100\", \"nodes\": 1, \"devices_per_node\": 4}", "\"intra_node\"");
    refused("{\"device\": \"h100\", \"nodes\": 1.5, \"devices_per_node\": 1}", "whole numbers");
    refused("{\"device\": {\"memory_gb\": 8, \"memory_bandwidth_gbs\": 100, \"peak_tflops\": "
            "{\"int4\": 1}}, \"nodes\": 1, \"devices_per_node\": 1}",
            "int4");
    refused("{\"device\": {\"memory_bandwidth_gbs\": 100}, \"nodes\": 1, \"devices_per_node\": 1}",
            "memory_gb");
    refused("{\"device\": \"h100\", \"nodes\": 1, \"devices_per_node\": 2, \"intra_node\": "
            "{\"bandwidth_gbs\": -3}}",
            "bandwidth_gbs");
    pt_cluster none;
    CHECK(pt_cluster_load("/nonexistent/cluster.json", &none) == PT_EIO,
          "a missing file is an I/O error");

    /* the built-in devices */
    pt_device d;
    for (const char *const *n = pt_device_names(); *n; n++) {
        CHECK(pt_device_builtin(*n, &d) == PT_OK && d.peak_flops[PT_PLAN_FP32] > 0 &&
                  d.memory_bytes > 0 && d.memory_bandwidth > 0 && d.gemm_efficiency > 0 &&
                  d.gemm_efficiency <= 1,
              "device %s: %s", *n, pt_last_error());
    }
    CHECK(pt_device_builtin("tpu", &d) == PT_EINVAL && strstr(pt_last_error(), "a100-80gb"),
          "an unknown device lists the known ones");

    /* the published-runs file refuses numbers without a source */
    pt_published *p;
    path =
        write_file("runs.json", "{\"megatron\": {\"device\": [\"a100-80gb\", \"s\"], "
                                "\"peak_tflops\": [312, \"s\"], \"devices_per_node\": [8, \"s\"], "
                                "\"intra_node_gbs\": [300, \"s\"], \"inter_node_gbs\": [25, "
                                "\"s\"], \"rows\": [{\"model\": \"x\", \"params_billion\": "
                                "1.7}]}}");
    CHECK(pt_published_load(path, &p) == PT_EFORMAT && strstr(pt_last_error(), "row 1") &&
              strstr(pt_last_error(), "source"),
          "a number without a source: %s", pt_last_error());
    path = write_file("runs2.json", "{\"zero_bubble\": {\"rows\": [{\"bubble\": {\"zbh9\": [0.1, "
                                    "\"s\"]}}]}}");
    CHECK(pt_published_load(path, &p) == PT_EFORMAT, "a row without its fields: %s",
          pt_last_error());
    return 0;
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    return check_done(dir, run());
}
