/* test_attention_threads: attention's heads shared between a worker's
 * threads (pt_kernels.threads) store the same bits as on one thread, in
 * forward (the output and the softmax statistics) and in backward (the
 * gradient of q, k and v), for the product kernel `auto` picks and for the
 * portable one, in fp32 and in bf16 on its portable products (which run on
 * that kernel) and on AMX's and AVX512_BF16's where the CPU has them, on 2, 3 and 5 threads; and
 * pipetrain's own products say the heads may be shared between as many threads as the products use.
 * Shapes with a partial band of query rows, more pairs of sample and head than threads. With
 * pipetrain's own fp32 products each head packs its keys and values once for all its bands: the
 * same bits as every band packing its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/attention.h"
#include "pipetrain.h"
#include "tensor/bf16.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

#include "kernel_acts.h"

static int failures;

#define CHECK(cond, ...)                    \
    do {                                    \
        if (!(cond)) {                      \
            printf("  FAIL: " __VA_ARGS__); \
            printf("\n");                   \
            failures++;                     \
        }                                   \
    } while (0)

typedef struct {
    void *y, *dqkv;
    float *stats;
} result;

enum { B = 2, T = 150, C = 48, H = 6 };

/* returns the threads the heads were shared between */
static int run(const pt_kernels *k, const float *qkv_f, const float *dy_f, int threads, result *r)
{
    size_t n = (size_t)B * T, e = pt_elem_size(k->act);
    void *qkv = kernel_acts(k, qkv_f, n * 3 * C), *dy = kernel_acts(k, dy_f, n * C);
    float *scratch = calloc(pt_attention_scratch_floats(T, C, H, k->act), sizeof(float));
    r->y = calloc(n * C, e);
    r->stats = calloc((size_t)B * H * T * 2, sizeof(float));
    r->dqkv = calloc(n * 3 * C, e);
    pt_blas_set_threads(threads);
    int shared = pt_kernels_threads(k);
    pt_attention_forward(k, r->y, r->stats, scratch, qkv, B, T, C, H, 0.35f);
    pt_attention_backward(k, r->dqkv, r->stats, scratch, dy, qkv, B, T, C, H, 0.35f);
    pt_blas_set_threads(1);
    free(scratch), free(qkv), free(dy);
    return shared;
}

static void check_table(const char *what, const pt_kernels *(*table)(void), const float *qkv,
                        const float *dy)
{
    const pt_kernels *k = table();
    result one, many;
    run(k, qkv, dy, 1, &one);
    size_t n = (size_t)B * T, e = pt_elem_size(k->act);
    static const int threads[] = {2, 3, 5};
    for (int i = 0; i < 3; i++) {
        int shared = run(k, qkv, dy, threads[i], &many);
        printf("  %s (%s), %d threads: heads shared between %d\n", what, k->products, threads[i],
               shared);
        CHECK(!memcmp(one.y, many.y, n * C * e), "%s: %d threads change the output", what,
              threads[i]);
        CHECK(!memcmp(one.stats, many.stats, (size_t)B * H * T * 2 * sizeof(float)),
              "%s: %d threads change the softmax statistics", what, threads[i]);
        CHECK(!memcmp(one.dqkv, many.dqkv, n * 3 * C * e), "%s: %d threads change the gradient",
              what, threads[i]);
        free(many.y), free(many.stats), free(many.dqkv);
    }
    if (k->packed_floats) { /* each head's keys and values packed once for its bands */
        pt_kernels repack = *k;
        repack.packed_floats = NULL;
        run(&repack, qkv, dy, 1, &many);
        CHECK(!memcmp(one.y, many.y, n * C * e) && !memcmp(one.dqkv, many.dqkv, n * 3 * C * e),
              "%s: the bands' kept panels change the output or the gradient", what);
        printf("  %s (%s): the same bits with every band packing its own keys and values\n", what,
               k->products);
        free(many.y), free(many.stats), free(many.dqkv);
    }
    free(one.y), free(one.stats), free(one.dqkv);
}

static void check_kernel(const char *kernel, const float *qkv, const float *dy)
{
    if (pt_fp32_set_kernel(kernel) != 0) {
        printf("  %s: not on this CPU\n", kernel);
        return;
    }
    check_table(kernel, pt_kernels_cpu, qkv, dy);
    /* bf16's portable products run on the fp32 kernel */
    check_table(kernel, pt_kernels_bf16_portable, qkv, dy);
}

int main(void)
{
    size_t n = (size_t)B * T;
    float *qkv = malloc(sizeof(float) * n * 3 * C), *dy = malloc(sizeof(float) * n * C);
    pt_rng r;
    pt_rng_seed(&r, 7);
    pt_rng_fill_normal(&r, qkv, n * 3 * C, 1.0f);
    pt_rng_fill_normal(&r, dy, n * C, 1.0f);
    check_kernel("auto", qkv, dy);
    check_kernel("generic", qkv, dy);
    /* AMX's and AVX512_BF16's products share a worker's threads too */
    if (pt_kernels_bf16_amx())
        check_table("amx", pt_kernels_bf16_amx, qkv, dy);
    else
        printf("  amx: not on this CPU\n");
    if (pt_kernels_bf16_avx512())
        check_table("avx512bf16", pt_kernels_bf16_avx512, qkv, dy);
    else
        printf("  avx512bf16: not on this CPU\n");
    pt_fp32_set_kernel("generic");
    CHECK(pt_kernels_threads(pt_kernels_cpu()) == 1, "one thread: the kernel shares nothing");
    pt_blas_set_threads(3);
    CHECK(pt_kernels_threads(pt_kernels_cpu()) == 3,
          "pipetrain's own products on 3 threads: attention may share its heads between 3");
    pt_blas_set_threads(1);
    pt_fp32_set_kernel("auto");
    free(qkv), free(dy);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
