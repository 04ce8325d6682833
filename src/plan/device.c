/* device.c: what a device computes and holds (pt_device, pipetrain.h): the
 * built-in table, the roofline that times a product by its shape, and this
 * machine's CPU measured on first use. The planner (predict.c) times every
 * pass of every block with these functions; a user's cluster file
 * (io/cluster_file.c) names a built-in device or describes its own.
 *
 * The figures of the table are the vendors' dense peaks (2:4 sparsity
 * halved away) and memory: NVIDIA's A100 datasheet (A100 SXM 40GB and 80GB:
 * FP32 19.5, TF32 156, FP16/BF16 312 TFLOP/s; 1,555 and 2,039 GB/s), H100
 * datasheet (H100 SXM: FP32 66.9, TF32 494.7, BF16 989.4, FP8 1,978.9
 * TFLOP/s; 80 GB at 3.35 TB/s) and H200 (the H100's compute, 141 GB at 4.8
 * TB/s). The two efficiencies are not the vendor's: the A100's are fitted to
 * two rows of Narayanan et al.'s Table 1 (replay_megatron.c says which and
 * docs/planning.md prints the fit); the H100 and H200 take the A100's,
 * which no published run in tests/data checks. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipetrain.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "tensor/kernels.h"

/* Fitted to Narayanan et al. Table 1 rows 1 and 9 (replay_megatron.c);
 * tests/test_published_megatron.c fits them again and compares. */
#define A100_GEMM_EFFICIENCY   0.6637
#define A100_MEMORY_EFFICIENCY 0.8164

#define TF 1e12
#define GB 1e9

/* name, dense peaks (FP32, TF32, FP16 = BF16, FP8) in TFLOP/s, GB, GB/s */
#define DEVICE(n, fp32, tf32, half, fp8, gb, gbs)                                            \
    {                                                                                        \
        .name = n, .peak_flops = {fp32 * TF, tf32 * TF, half * TF, half * TF, fp8 * TF},     \
        .memory_bytes = gb * GB, .memory_bandwidth = gbs * GB,                               \
        .gemm_efficiency = A100_GEMM_EFFICIENCY, .memory_efficiency = A100_MEMORY_EFFICIENCY \
    }

static const pt_device builtin[] = {
    DEVICE("a100-40gb", 19.5, 156, 312, 0, 40, 1555),
    DEVICE("a100-80gb", 19.5, 156, 312, 0, 80, 2039),
    DEVICE("h100", 66.9, 494.7, 989.4, 1978.9, 80, 3350),
    DEVICE("h200", 66.9, 494.7, 989.4, 1978.9, 141, 4800),
};
#define N_BUILTIN (int)(sizeof builtin / sizeof builtin[0])

static const char *const names[] = {"a100-40gb", "a100-80gb", "h100", "h200", "cpu", NULL};

const char *const *pt_device_names(void) { return names; }

static const char *const precision_names[PT_PLAN_N_PRECISIONS] = {"fp32", "tf32", "fp16", "bf16",
                                                                  "fp8"};

int pt_plan_precision_parse(const char *name)
{
    for (int p = 0; p < PT_PLAN_N_PRECISIONS; p++)
        if (!strcmp(name, precision_names[p]))
            return p;
    return -1;
}

const char *pt_plan_precision_name(pt_plan_precision p)
{
    return p >= 0 && p < PT_PLAN_N_PRECISIONS ? precision_names[p] : "?";
}

/* Bytes of one element of a product's operands: what it reads and writes. */
static double operand_bytes(pt_plan_precision p)
{
    return p == PT_PLAN_FP32 || p == PT_PLAN_TF32 ? 4 : p == PT_PLAN_FP8 ? 1 : 2;
}

double pt_device_memory_seconds(const pt_device *d, double bytes)
{
    return bytes / (d->memory_bandwidth * d->memory_efficiency);
}

double pt_device_gemm_seconds(const pt_device *d, pt_plan_precision p, double m, double n, double k,
                              double batch)
{
    double peak = d->peak_flops[p] > 0 ? d->peak_flops[p] : d->peak_flops[PT_PLAN_FP32];
    double flops = 2 * m * n * k * batch;
    double bytes = operand_bytes(p) * (m * k + k * n + m * n) * batch;
    double compute = flops / (peak * d->gemm_efficiency);
    double memory = pt_device_memory_seconds(d, bytes);
    return compute > memory ? compute : memory;
}

/* ---- this machine's CPU ---- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static pt_device cpu;
static int cpu_status = PT_OK;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

/* The best of a few runs: the machine's rate, not its noise. */
static void measure_cpu(void)
{
    const pt_kernels *k = pt_kernels_cpu();
    int n = 768;
    size_t big = (size_t)32 << 20; /* floats copied: 128 MiB each way */
    float *a = pt_alloc_floats((size_t)n * n), *b = pt_alloc_floats((size_t)n * n);
    float *c = pt_alloc_floats((size_t)n * n);
    float *src = pt_alloc_floats(big), *dst = pt_alloc_floats(big);
    if (!a || !b || !c || !src || !dst) {
        cpu_status = pt_fail(PT_ENOMEM, "out of memory measuring this machine's CPU");
        goto done;
    }
    for (size_t i = 0; i < (size_t)n * n; i++)
        a[i] = b[i] = (float)(i % 7) * 0.1f;
    memset(src, 1, big * sizeof(float));
    memset(dst, 0, big * sizeof(float));
    double flops = 0, bandwidth = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        k->matmul(0, 0, n, n, n, 1.0f, pt_mat_of(a, n, PT_F32), pt_mat_of(b, n, PT_F32), 0.0f,
                  pt_mat_of(c, n, PT_F32), NULL);
        double t1 = now();
        memcpy(dst, src, big * sizeof(float));
        double t2 = now();
        flops = fmax(flops, 2.0 * n * n * n / (t1 - t0));
        bandwidth = fmax(bandwidth, 2.0 * (double)big * sizeof(float) / (t2 - t1));
    }
    snprintf(cpu.name, sizeof cpu.name, "cpu");
    cpu.peak_flops[PT_PLAN_FP32] = flops; /* what sgemm reaches is the peak it has */
    cpu.memory_bandwidth = bandwidth;
    cpu.memory_bytes = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    cpu.gemm_efficiency = cpu.memory_efficiency = 1;
done:
    pt_free(a), pt_free(b), pt_free(c), pt_free(src), pt_free(dst);
}

int pt_device_builtin(const char *name, pt_device *out)
{
    for (int i = 0; i < N_BUILTIN; i++)
        if (!strcmp(name, builtin[i].name)) {
            *out = builtin[i];
            return PT_OK;
        }
    if (!strcmp(name, "cpu")) {
        pthread_once(&cpu_once, measure_cpu);
        if (cpu_status == PT_OK)
            *out = cpu;
        return cpu_status;
    }
    return pt_fail(PT_EINVAL, "unknown device '%s' (a100-40gb, a100-80gb, h100, h200, cpu)", name);
}
