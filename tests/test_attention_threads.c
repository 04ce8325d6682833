/* test_attention_threads: attention's heads shared between a worker's
 * threads (pt_kernels.threads) store the same bits as on one thread, in
 * forward (the output and the softmax statistics) and in backward (the
 * gradient of q, k and v), for the product kernel `auto` picks and for the
 * portable one, on 2, 3 and 5 threads; and pipetrain's own products say
 * the heads may be shared between as many threads as the products use.
 * Shapes with a partial band of query rows, more pairs of sample and head
 * than threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/attention.h"
#include "pipetrain.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

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
    float *y, *stats, *dqkv;
} result;

enum { B = 2, T = 150, C = 48, H = 6 };

/* returns the threads the heads were shared between */
static int run(const float *qkv, const float *dy, int threads, result *r)
{
    const pt_kernels *k = pt_kernels_cpu();
    size_t n = (size_t)B * T;
    float *scratch = calloc(pt_attention_scratch_floats(T, C, H, PT_F32), sizeof(float));
    r->y = calloc(n * C, sizeof(float));
    r->stats = calloc((size_t)B * H * T * 2, sizeof(float));
    r->dqkv = calloc(n * 3 * C, sizeof(float));
    pt_blas_set_threads(threads);
    int shared = pt_kernels_threads(k);
    pt_attention_forward(k, r->y, r->stats, scratch, qkv, B, T, C, H, 0.35f);
    pt_attention_backward(k, r->dqkv, r->stats, scratch, dy, qkv, B, T, C, H, 0.35f);
    pt_blas_set_threads(1);
    free(scratch);
    return shared;
}

static int same(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

static void check_kernel(const char *kernel, const float *qkv, const float *dy)
{
    if (pt_fp32_set_kernel(kernel) != 0) {
        printf("  %s: not on this CPU\n", kernel);
        return;
    }
    result one, many;
    run(qkv, dy, 1, &one);
    size_t n = (size_t)B * T;
    static const int threads[] = {2, 3, 5};
    for (int i = 0; i < 3; i++) {
        int shared = run(qkv, dy, threads[i], &many);
        printf("  %s (%s), %d threads: heads shared between %d\n", kernel,
               pt_kernels_cpu()->products, threads[i], shared);
        CHECK(same(one.y, many.y, n * C), "%s: %d threads change the output", kernel, threads[i]);
        CHECK(same(one.stats, many.stats, (size_t)B * H * T * 2),
              "%s: %d threads change the softmax statistics", kernel, threads[i]);
        CHECK(same(one.dqkv, many.dqkv, n * 3 * C), "%s: %d threads change the gradient", kernel,
              threads[i]);
        free(many.y), free(many.stats), free(many.dqkv);
    }
    free(one.y), free(one.stats), free(one.dqkv);
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
