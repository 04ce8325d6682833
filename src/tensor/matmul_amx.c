/* matmul_amx.c: the bf16 product on AMX tiles (matmul_bf16.h).
 *
 * op(A) (M,K) is packed row-major and op(B) (K,N) in the pairs layout
 * TDPBF16PS reads (row k/2 holds, for every column n, the elements k and
 * k+1 side by side), both zero-padded to multiples of 32. Each 32 x 32
 * block of C is four 16 x 16 float tiles, fed by two tiles of A (16 rows x
 * 32 k) and two of B (16 k-pairs x 16 columns) per step of 32 along K; the
 * finished block goes through pt_matmul_finish. Blocks of C run column
 * block by column block, so B's block stays in cache while A streams by.
 * Linux hands out the tiles only after arch_prctl(ARCH_REQ_XCOMP_PERM), asked
 * once by pt_amx_usable(); each call loads its tile configuration and
 * releases the tiles at the end. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tensor/matmul_bf16.h"
#include "tensor/scratch.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18

static int usable;
static pthread_once_t checked = PTHREAD_ONCE_INIT;

static void check(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return;
    int tile = (d >> 24) & 1, bf16 = (d >> 22) & 1;
    usable = tile && bf16 && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

int pt_amx_usable(void)
{
    pthread_once(&checked, check);
    return usable;
}

typedef struct {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static int up32(int n) { return (n + 31) & ~31; }

static void pack_a(pt_bf16 *ap, pt_mat A, int trans, int M, int K, int Mp, int Kp)
{
    memset(ap, 0, sizeof(pt_bf16) * (size_t)Mp * Kp);
    if (!trans && A.dt == PT_BF16) {
        for (int i = 0; i < M; i++)
            memcpy(ap + (size_t)i * Kp, (const pt_bf16 *)A.p + (size_t)i * A.ld,
                   sizeof(pt_bf16) * K);
        return;
    }
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            ap[(size_t)i * Kp + k] = pt_mat_bf16(A, trans, i, k);
}

static void pack_b(pt_bf16 *bp, pt_mat B, int trans, int K, int N, int Kp, int Np)
{
    memset(bp, 0, sizeof(pt_bf16) * (size_t)Kp * Np);
    for (int k = 0; k < K; k++) {
        pt_bf16 *row = bp + (size_t)(k / 2) * Np * 2 + (k & 1);
        for (int n = 0; n < N; n++)
            row[2 * n] = pt_mat_bf16(B, trans, k, n);
    }
}

__attribute__((target("amx-tile,amx-bf16"))) static void
multiply(const pt_bf16 *ap, const pt_bf16 *bp, int M, int N, int Mp, int Np, int Kp, float alpha,
         float beta, pt_mat C, const float *bias)
{
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    float block[32 * 32] __attribute__((aligned(64)));
    size_t a_stride = (size_t)Kp * sizeof(pt_bf16), b_stride = (size_t)Np * 2 * sizeof(pt_bf16);
    for (int n0 = 0; n0 < Np; n0 += 32)
        for (int m0 = 0; m0 < Mp; m0 += 32) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            const pt_bf16 *a = ap + (size_t)m0 * Kp, *b = bp + (size_t)n0 * 2;
            for (int k0 = 0; k0 < Kp; k0 += 32) {
                _tile_loadd(4, a + k0, a_stride);
                _tile_loadd(5, a + (size_t)16 * Kp + k0, a_stride);
                _tile_loadd(6, b + (size_t)(k0 / 2) * Np * 2, b_stride);
                _tile_loadd(7, b + (size_t)(k0 / 2) * Np * 2 + 32, b_stride);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            _tile_stored(0, block, 128);
            _tile_stored(1, block + 16, 128);
            _tile_stored(2, block + 16 * 32, 128);
            _tile_stored(3, block + 16 * 32 + 16, 128);
            int rows = M - m0 < 32 ? M - m0 : 32, cols = N - n0 < 32 ? N - n0 : 32;
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < cols; j++)
                    pt_matmul_finish(C, m0 + i, n0 + j, block[i * 32 + j], alpha, beta, bias);
        }
    _tile_release();
}

void pt_matmul_bf16_amx(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A,
                        pt_mat B, float beta, pt_mat C, const float *bias)
{
    int Mp = up32(M), Np = up32(N), Kp = up32(K);
    pt_bf16 *ap = pt_scratch(0, sizeof(pt_bf16) * (size_t)Mp * Kp);
    pt_bf16 *bp = pt_scratch(1, sizeof(pt_bf16) * (size_t)Kp * Np);
    if (!ap || !bp) {
        pt_matmul_poison(M, N, C);
        return;
    }
    pack_a(ap, A, trans_a, M, K, Mp, Kp);
    pack_b(bp, B, trans_b, K, N, Kp, Np);
    multiply(ap, bp, M, N, Mp, Np, Kp, alpha, beta, C, bias);
}

#else

int pt_amx_usable(void) { return 0; }

void pt_matmul_bf16_amx(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A,
                        pt_mat B, float beta, pt_mat C, const float *bias)
{
    pt_matmul_bf16_portable(trans_a, trans_b, M, N, K, alpha, A, B, beta, C, bias);
}

#endif
