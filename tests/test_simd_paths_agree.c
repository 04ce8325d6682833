/* test_simd_paths_agree: the vector paths of the memory-bound kernels give
 * the bits of their portable loops.
 *
 * A pipelined run must equal a one-worker run bit for bit, and a run must
 * not change with the CPU's vector width beyond what its kernels document.
 * So each kernel with AVX-512 and AVX2 paths (simd.h) runs on the same
 * seeded inputs once per level this CPU has (pt_simd_limit caps it), on
 * lengths that leave every tail length, and each result must equal the
 * portable loop's bit for bit. Levels the CPU lacks are reported as not
 * run. */
#include <string.h>

#include "check.h"
#include "tensor/adamw.h"
#include "tensor/arena.h"
#include "tensor/rng.h"
#include "tensor/simd.h"

#define N 1000 /* not a multiple of 16: every path has a tail */

typedef struct {
    float w[N], g[N], m1[N], m2[N];
    double sq;
} adamw_result;

static void run_adamw(adamw_result *r, size_t n)
{
    pt_rng rng;
    pt_rng_seed(&rng, 11);
    pt_rng_fill_normal(&rng, r->w, N, 0.5f);
    pt_rng_fill_normal(&rng, r->g, N, 1e-2f);
    pt_rng_fill_normal(&rng, r->m1, N, 1e-3f);
    pt_rng_fill_normal(&rng, r->m2, N, 1e-3f);
    for (int i = 0; i < N; i++)
        r->m2[i] *= r->m2[i];
    pt_adamw_step s = {.beta1 = 0.9f,
                       .beta2 = 0.95f,
                       .eps = 1e-8f,
                       .corr1 = 0.271f,
                       .corr2 = 0.143f,
                       .lr = 3e-4f,
                       .clip = 0.7f,
                       .decay = 0.1f};
    for (int step = 0; step < 3; step++)
        pt_adamw_update(&s, r->w, r->g, r->m1, r->m2, n);
    r->sq = pt_sum_squares(r->g, n);
}

static adamw_result want, got;

static void check_adamw(pt_simd_level level)
{
    for (size_t n = N - 17; n <= N; n++) {
        pt_simd_limit(PT_SIMD_PORTABLE);
        run_adamw(&want, n);
        pt_simd_limit(level);
        run_adamw(&got, n);
        CHECK(memcmp(&want, &got, sizeof want) == 0, "AdamW on %s differs from portable (n %zu)",
              pt_simd_name(level), n);
    }
}

int main(void)
{
    pt_simd_limit(PT_SIMD_AVX512);
    pt_simd_level top = pt_simd_level_of_cpu();
    for (int level = PT_SIMD_AVX2; level <= PT_SIMD_AVX512; level++) {
        if (level > (int)top) {
            printf("%s: not on this CPU, not run\n", pt_simd_name((pt_simd_level)level));
            continue;
        }
        check_adamw((pt_simd_level)level);
        printf("%s: agrees with portable\n", pt_simd_name((pt_simd_level)level));
    }
    pt_simd_limit(PT_SIMD_AVX512);
    return failures != 0;
}
