/* bench_peak.h: one core's arithmetic peaks, from loops that keep only
 * registers busy: what the benchmarks state achieved rates against.
 *   bench_fma_gflops       float FMA (AVX-512: 16 lanes x 2 FLOPs an
 *                          instruction);
 *   bench_fma256_gflops    float FMA on AVX2's ymm (8 lanes), 0 without;
 *   bench_fma_peak         the widest of the two this CPU has, and on n
 *                          cores at once (bench_fma_peak_cores: n threads,
 *                          the sum of their rates, best of 5 tries);
 *   bench_dpbf16_gflops    AVX512_BF16's VDPBF16PS (16 lanes x 2 products x
 *                          2 FLOPs an instruction), 0 without it;
 *   bench_amx_gflops       AMX's TDPBF16PS on four float tiles from two
 *                          tiles of A and two of B held in the tile
 *                          registers (16 x 16 x 32 products x 2 FLOPs an
 *                          instruction), 0 without AMX or the permission
 *                          to use its tiles.
 * Each runs 12 independent chains, so it measures the units' throughput,
 * not one chain's latency. Header-only, beside bench_common.h. */
#ifndef PT_BENCH_PEAK_H
#define PT_BENCH_PEAK_H

#include <stdio.h>

#include "bench_common.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PEAK_CHAINS 12
#define PEAK_ITERS  20000000L

/* the chains summed and printed never, so the loop cannot be dropped */
__attribute__((target("avx512f"))) static inline void bench_keep(const __m512 *acc)
{
    float sink = 0;
    for (int i = 0; i < PEAK_CHAINS; i++)
        sink += _mm512_reduce_add_ps(acc[i]);
    if (sink == 12345.0f)
        printf(" ");
}

__attribute__((target("avx512f"))) static inline double bench_fma_gflops(void)
{
    __m512 acc[PEAK_CHAINS], x = _mm512_set1_ps(1.0f - 1e-7f), y = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < PEAK_CHAINS; i++)
        acc[i] = _mm512_set1_ps((float)i);
    double t0 = bench_now();
    for (long n = 0; n < PEAK_ITERS; n++)
        for (int i = 0; i < PEAK_CHAINS; i++)
            acc[i] = _mm512_fmadd_ps(acc[i], x, y);
    double secs = bench_now() - t0;
    bench_keep(acc);
    return PEAK_CHAINS * 16 * 2 * (double)PEAK_ITERS / secs / 1e9;
}

__attribute__((target("avx2,fma"))) static inline double bench_fma256_run(void)
{
    __m256 acc[PEAK_CHAINS], x = _mm256_set1_ps(1.0f - 1e-7f), y = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < PEAK_CHAINS; i++)
        acc[i] = _mm256_set1_ps((float)i);
    double t0 = bench_now();
    for (long n = 0; n < PEAK_ITERS; n++)
        for (int i = 0; i < PEAK_CHAINS; i++)
            acc[i] = _mm256_fmadd_ps(acc[i], x, y);
    double secs = bench_now() - t0;
    float lanes[8], sink = 0;
    for (int i = 0; i < PEAK_CHAINS; i++) {
        _mm256_storeu_ps(lanes, acc[i]);
        sink += lanes[0];
    }
    if (sink == 12345.0f)
        printf(" ");
    return PEAK_CHAINS * 8 * 2 * (double)PEAK_ITERS / secs / 1e9;
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) static inline double bench_dpbf16_run(void)
{
    /* pairs of 1.0 against pairs of 2^-10: normal numbers, sums stay finite */
    __m512i a = _mm512_set1_epi32(0x3f803f80), b = _mm512_set1_epi32(0x3a803a80);
    __m512 acc[PEAK_CHAINS];
    for (int i = 0; i < PEAK_CHAINS; i++)
        acc[i] = _mm512_set1_ps((float)i);
    double t0 = bench_now();
    for (long n = 0; n < PEAK_ITERS; n++)
        for (int i = 0; i < PEAK_CHAINS; i++)
            acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)a, (__m512bh)b);
    double secs = bench_now() - t0;
    bench_keep(acc);
    return PEAK_CHAINS * 16 * 4 * (double)PEAK_ITERS / secs / 1e9;
}

static inline int bench_has_avx512(void) { return __builtin_cpu_supports("avx512f"); }

#define AMX_ITERS 2000000L

__attribute__((target("amx-tile,amx-bf16"))) static inline double bench_amx_run(void)
{
    struct {
        unsigned char palette, start_row, reserved[14];
        unsigned short colsb[16];
        unsigned char rows[16];
    } cfg = {.palette = 1};
    for (int t = 0; t < 8; t++)
        cfg.rows[t] = 16, cfg.colsb[t] = 64;
    /* pairs of 1.0 and of 2^-10, as for VDPBF16PS */
    static unsigned ones[256], small[256];
    for (int i = 0; i < 256; i++)
        ones[i] = 0x3f803f80u, small[i] = 0x3a803a80u;
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, small, 64);
    _tile_loadd(7, small, 64);
    double t0 = bench_now();
    for (long n = 0; n < AMX_ITERS; n++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    double secs = bench_now() - t0;
    float sink[256];
    _tile_stored(0, sink, 64);
    _tile_release();
    if (sink[0] == 12345.0f)
        printf(" ");
    return 4 * 16 * 16 * 32 * 2 * (double)AMX_ITERS / secs / 1e9;
}

static inline double bench_dpbf16_gflops(void)
{
    return __builtin_cpu_supports("avx512bf16") ? bench_dpbf16_run() : 0;
}

static inline double bench_amx_gflops(void)
{
    unsigned a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
    /* AMX-BF16 and AMX-TILE, and Linux's permission for the tile data */
    if (!((d >> 22) & 1) || !((d >> 24) & 1) || syscall(SYS_arch_prctl, 0x1023, 18) != 0)
        return 0;
    return bench_amx_run();
}

static inline double bench_fma256_gflops(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? bench_fma256_run() : 0;
}

/* the widest FMA this CPU has: 512, 256 or 0 bits */
static inline int bench_fma_bits(void)
{
    return bench_has_avx512() ? 512 : bench_fma256_gflops() > 0 ? 256 : 0;
}

static inline double bench_fma_peak(void)
{
    return bench_has_avx512() ? bench_fma_gflops() : bench_fma256_gflops();
}
#else
static inline double bench_fma_gflops(void) { return 0; }
static inline double bench_dpbf16_gflops(void) { return 0; }
static inline double bench_amx_gflops(void) { return 0; }
static inline int bench_has_avx512(void) { return 0; }
static inline double bench_fma256_gflops(void) { return 0; }
static inline int bench_fma_bits(void) { return 0; }
static inline double bench_fma_peak(void) { return 0; }
#endif

#include <pthread.h>
#include <time.h>

typedef struct {
    double (*peak)(void);
    double rate;
} bench_peak_job;

static inline void *bench_peak_thread(void *job)
{
    bench_peak_job *j = job;
    j->rate = j->peak();
    return NULL;
}

/* peak()'s rate on n (<= 64) threads at once, summed: one try */
static inline double bench_peak_try(int n, double (*peak)(void))
{
    pthread_t t[64];
    bench_peak_job jobs[64];
    int started[64] = {0};
    double sum = 0;
    for (int i = 0; i < n; i++)
        jobs[i] = (bench_peak_job){peak, 0};
    for (int i = 1; i < n; i++)
        started[i] = pthread_create(&t[i], NULL, bench_peak_thread, &jobs[i]) == 0;
    jobs[0].rate = peak();
    for (int i = 1; i < n; i++)
        if (started[i])
            pthread_join(t[i], NULL);
    for (int i = 0; i < n; i++)
        sum += jobs[i].rate;
    return sum;
}

/* the best of 5 tries of peak() on n threads: a machine shared with other
 * work only ever lowers a try, so the best is the nearest to what the cores
 * can do. It first waits 0.3 s: OpenBLAS's pool threads spin for a while
 * after a product (the start-up checks run some) and would take a core from
 * the loop. */
static inline double bench_peak_cores(int n, double (*peak)(void))
{
    double best = 0;
    bench_pause(0.3);
    n = n < 1 ? 1 : n > 64 ? 64 : n;
    for (int i = 0; i < 5; i++) {
        double r = bench_peak_try(n, peak);
        best = r > best ? r : best;
    }
    return best;
}

/* the widest FMA's rate on n threads at once, summed */
static inline double bench_fma_peak_cores(int n) { return bench_peak_cores(n, bench_fma_peak); }

/* AMX's TDPBF16PS rate on n threads at once, summed (0 without AMX): cores
 * that share one AMX unit show it here */
static inline double bench_amx_peak_cores(int n) { return bench_peak_cores(n, bench_amx_gflops); }

#endif
