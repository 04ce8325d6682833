/* cluster_file.c: a cluster description a user writes, read into a
 * pt_cluster (pt_cluster_load, pipetrain.h) for `pipetrain plan --cluster`.
 *
 *   {
 *     "name": "my-cluster",
 *     "device": "h100",                    a built-in device, or an object:
 *     "device": {"base": "a100-80gb",      start from a built-in one (optional)
 *                "name": "a100-40gb-pcie",
 *                "memory_gb": 40,          decimal gigabytes
 *                "memory_bandwidth_gbs": 1555,
 *                "peak_tflops": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312},
 *                "gemm_efficiency": 0.66, "memory_efficiency": 0.8},
 *     "nodes": 8,
 *     "devices_per_node": 8,
 *     "intra_node": {"bandwidth_gbs": 300, "latency_us": 2},
 *     "inter_node": {"bandwidth_gbs": 25, "latency_us": 5}
 *   }
 * Bandwidths are per device and per direction: NVLink's share, each
 * device's share of its node's network. The inter-node link is required
 * when there is more than one node, the intra-node one with more than one
 * device in a node. Every refusal names the file and the field. */
#include <stdio.h>
#include <string.h>

#include "io/json.h"
#include "pipetrain.h"
#include "tensor/error.h"

/* A positive number field: PT_OK, 1 when absent, or an error naming it. */
static int number(const pt_json *obj, const char *path, const char *where, const char *key,
                  double lo, double hi, double *out)
{
    const pt_json *v = pt_json_get(obj, key);
    if (!v)
        return 1;
    if (v->type != PT_JSON_NUMBER || !(v->number >= lo && v->number <= hi))
        return pt_fail(PT_EFORMAT, "%s: %s\"%s\" must be a number in [%g, %g]", path, where, key,
                       lo, hi);
    *out = v->number;
    return PT_OK;
}

static int required(int rc, const char *path, const char *where, const char *key)
{
    return rc == 1 ? pt_fail(PT_EFORMAT, "%s: %s\"%s\" is missing", path, where, key) : rc;
}

static int read_device(const pt_json *d, const char *path, pt_device *out)
{
    if (d && d->type == PT_JSON_STRING) {
        int rc = pt_device_builtin(d->string, out);
        return rc == PT_OK ? rc : pt_fail_within(rc, "%s: \"device\"", path);
    }
    if (!d || d->type != PT_JSON_OBJECT)
        return pt_fail(PT_EFORMAT,
                       "%s: \"device\" must name a built-in device (a100-40gb, a100-80gb, h100, "
                       "h200, cpu) or describe one as an object",
                       path);
    *out = (pt_device){.gemm_efficiency = 1, .memory_efficiency = 1};
    const pt_json *base = pt_json_get(d, "base");
    if (base && (base->type != PT_JSON_STRING || pt_device_builtin(base->string, out) != PT_OK))
        return pt_fail(PT_EFORMAT, "%s: device \"base\" must name a built-in device", path);
    const pt_json *name = pt_json_get(d, "name");
    if (name && name->type == PT_JSON_STRING)
        snprintf(out->name, sizeof out->name, "%s", name->string);
    else if (!base)
        snprintf(out->name, sizeof out->name, "custom");
    const char *in = "device ";
    double gb = out->memory_bytes / 1e9, gbs = out->memory_bandwidth / 1e9;
    int rc = number(d, path, in, "memory_gb", 1e-3, 1e7, &gb);
    if (rc < 0 || (rc == 1 && !base))
        return required(rc, path, in, "memory_gb");
    rc = number(d, path, in, "memory_bandwidth_gbs", 1e-3, 1e7, &gbs);
    if (rc == 1 && !base)
        return required(rc, path, in, "memory_bandwidth_gbs");
    if (rc < 0)
        return rc;
    out->memory_bytes = gb * 1e9, out->memory_bandwidth = gbs * 1e9;
    if ((rc = number(d, path, in, "gemm_efficiency", 1e-3, 1, &out->gemm_efficiency)) < 0 ||
        (rc = number(d, path, in, "memory_efficiency", 1e-3, 1, &out->memory_efficiency)) < 0)
        return rc;
    const pt_json *peaks = pt_json_get(d, "peak_tflops");
    if (peaks && peaks->type != PT_JSON_OBJECT)
        return pt_fail(PT_EFORMAT, "%s: device \"peak_tflops\" must be an object of precisions",
                       path);
    for (size_t i = 0; peaks && i < peaks->n; i++) {
        int p = pt_plan_precision_parse(peaks->keys[i]);
        double tf = 0;
        if (p < 0)
            return pt_fail(PT_EFORMAT,
                           "%s: device \"peak_tflops\": unknown precision \"%s\" (fp32, tf32, "
                           "fp16, bf16, fp8)",
                           path, peaks->keys[i]);
        if ((rc = number(peaks, path, "device peak_tflops ", peaks->keys[i], 0, 1e7, &tf)) < 0)
            return rc;
        out->peak_flops[p] = tf * 1e12;
    }
    if (out->peak_flops[PT_PLAN_FP32] <= 0 && out->peak_flops[PT_PLAN_BF16] <= 0)
        return pt_fail(PT_EFORMAT, "%s: device \"peak_tflops\" needs fp32 or bf16", path);
    return PT_OK;
}

static int read_link(const pt_json *root, const char *path, const char *key, int needed,
                     pt_interconnect *out)
{
    const pt_json *l = pt_json_get(root, key);
    *out = (pt_interconnect){.latency = 0, .bandwidth = 1e30};
    if (!l && !needed)
        return PT_OK;
    if (!l || l->type != PT_JSON_OBJECT)
        return pt_fail(PT_EFORMAT, "%s: \"%s\" {\"bandwidth_gbs\": ..., \"latency_us\": ...} is %s",
                       path, key, l ? "not an object" : "missing");
    char where[32];
    snprintf(where, sizeof where, "%s ", key);
    double gbs = 0, us = 0;
    int rc = required(number(l, path, where, "bandwidth_gbs", 1e-6, 1e7, &gbs), path, where,
                      "bandwidth_gbs");
    if (rc == PT_OK && (rc = number(l, path, where, "latency_us", 0, 1e7, &us)) == 1)
        rc = PT_OK;
    out->bandwidth = gbs * 1e9, out->latency = us * 1e-6;
    return rc;
}

int pt_cluster_load(const char *path, pt_cluster *out)
{
    *out = (pt_cluster){0};
    pt_json *root;
    int rc = pt_json_load(path, 0, &root);
    if (rc != PT_OK)
        return rc;
    const pt_json *name = pt_json_get(root, "name");
    snprintf(out->name, sizeof out->name, "%s",
             name && name->type == PT_JSON_STRING ? name->string : "cluster");
    double nodes = 0, per_node = 0;
    rc = read_device(pt_json_get(root, "device"), path, &out->device);
    if (rc == PT_OK)
        rc = required(number(root, path, "", "nodes", 1, 1e6, &nodes), path, "", "nodes");
    if (rc == PT_OK)
        rc = required(number(root, path, "", "devices_per_node", 1, 1024, &per_node), path, "",
                      "devices_per_node");
    if (rc == PT_OK && (nodes != (int)nodes || per_node != (int)per_node))
        rc = pt_fail(PT_EFORMAT, "%s: \"nodes\" and \"devices_per_node\" are whole numbers", path);
    out->nodes = (int)nodes, out->devices_per_node = (int)per_node;
    if (rc == PT_OK)
        rc = read_link(root, path, "intra_node", per_node > 1, &out->intra_node);
    if (rc == PT_OK)
        rc = read_link(root, path, "inter_node", nodes > 1, &out->inter_node);
    pt_json_free(root);
    return rc;
}
