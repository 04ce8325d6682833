/* matmul_avx512bf16.c: the bf16 product on AVX512_BF16's VDPBF16PS
 * (matmul_bf16.h), for CPUs that have the instruction but no AMX tiles (AMD
 * Zen 4 and 5, Intel Cooper Lake).
 *
 * VDPBF16PS reads two registers of 32 bf16 as 16 pairs each and adds both
 * products of each pair to one of 16 float lanes: 32 multiply-adds summed
 * in float (rounded to nearest even, bf16 and float denormals taken as
 * zero, as AMX does).
 *
 * Packing puts both operands into pairs along K: a 32-bit word holds
 * elements k and k+1 of one row of op(A) or one column of op(B), zero-padded
 * past K and past the edges:
 *   A in panels of MR rows:    for each pair, the MR rows' words;
 *   B in panels of NR columns: for each pair, the NR columns' words.
 * The micro-kernel keeps an MR x NR tile of C in 2 MR registers; for each
 * pair it loads B's two registers and broadcasts A's MR words against them
 * (24 VDPBF16PS to 2 loads and 12 broadcasts).
 * Blocking is GotoBLAS's: K in blocks of KC (a micro-panel of A stays in L1
 * while the panels of B stream by), N in blocks of NC (B's KC x NC slice
 * stays in L2); a tile's sums carry across the K blocks in a float buffer.
 * A finished tile goes through the seam's finish (alpha, beta, bias, one
 * rounding to bf16), vectorised, with pt_bf16_round's rounding bit for bit.
 * A worker with several threads (pt_blas_set_threads) shares a large
 * product's packing and then its rows of tiles between them
 * (pt_gemm_parallel), as the AMX product does; packing and the carry
 * buffer come from the calling thread's scratch (scratch.h).
 * Its speed against sgemm and the instruction's peak: docs/bf16.md. */
#include <stdint.h>
#include <string.h>

#include "tensor/bf16_avx512.h"
#include "tensor/gemm.h"
#include "tensor/scratch.h"

#if defined(__x86_64__) && defined(__GNUC__)

#define MR       12   /* rows of a tile of C */
#define NR       32   /* columns of a tile: two registers of 16 floats */
#define KC_PAIRS 192  /* pairs of K in a block: KC = 384 */
#define NC       1024 /* columns of C in a block */

#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

int pt_avx512bf16_usable(void)
{
    return pt_bf16x16_usable() && __builtin_cpu_supports("avx512bf16");
}

/* ---- packing ---- */

/* op(X)'s element (x, k), where x is a row of op(A) or a column of op(B),
 * lies at x * sx + k * sk. */
typedef struct {
    pt_mat X;
    size_t sx, sk;
    int n, K; /* x runs over 0..n-1 */
} operand;

static inline uint32_t bits(pt_mat X, size_t at)
{
    return X.dt == PT_BF16 ? ((const pt_bf16 *)X.p)[at] : pt_bf16_round(((const float *)X.p)[at]);
}

/* the word of pair kp of x: elements 2 kp and 2 kp + 1, zero past K */
static inline uint32_t pair_of(const operand *o, int x, int kp)
{
    size_t at = (size_t)x * o->sx + (size_t)2 * kp * o->sk;
    uint32_t lo = bits(o->X, at), hi = 2 * kp + 1 < o->K ? bits(o->X, at + o->sk) : 0;
    return lo | hi << 16;
}

/* Every pair of panel `panel` (W values of x from panel * W) into
 * out[kp][w], 16 lanes of x at a time: loads where x runs along memory
 * (sx 1), gathers where k does (sk 1); the last pair of an odd K, whose
 * second element lies past the row, word by word. */
AVX512BF16 static void pack_panel(uint32_t *out, const operand *o, int panel, int W, int pairs)
{
    int x0 = panel * W, live = o->n - x0 < W ? o->n - x0 : W;
    /* pairs of two elements; none where a gather's 32-bit offsets would overflow */
    int whole = o->sx == 1 ? pairs : o->K / 2;
    if (o->sx != 1 && (size_t)(x0 + W) * o->sx > INT32_MAX)
        whole = 0;
    __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int w = 0; w < W; w += 16) {
        int n = live - w < 0 ? 0 : live - w > 16 ? 16 : live - w;
        __mmask16 m = (__mmask16)((1u << n) - 1);
        __mmask16 keep = W - w >= 16 ? 0xffff : (__mmask16)((1u << (W - w)) - 1);
        __m512i idx = _mm512_mullo_epi32(_mm512_add_epi32(iota, _mm512_set1_epi32(x0 + w)),
                                         _mm512_set1_epi32((int)o->sx));
        for (int kp = 0; kp < whole; kp++) {
            size_t at = (size_t)x0 + w + (size_t)2 * kp * o->sk, k_at = (size_t)2 * kp;
            __m512i pair;
            if (o->sx == 1) {
                __m512i lo = pt_bf16x16_load(o->X, at, n);
                __m512i hi = 2 * kp + 1 < o->K ? pt_bf16x16_load(o->X, at + o->sk, n)
                                               : _mm512_setzero_si512();
                pair = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
            } else if (o->X.dt == PT_BF16) {
                pair = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx,
                                                   (const pt_bf16 *)o->X.p + k_at, 2);
            } else {
                const float *f = (const float *)o->X.p + k_at;
                __m512 z = _mm512_setzero_ps();
                __m512i lo = pt_bf16x16_round(_mm512_mask_i32gather_ps(z, m, idx, f, 4));
                __m512i hi = pt_bf16x16_round(_mm512_mask_i32gather_ps(z, m, idx, f + 1, 4));
                pair = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
            }
            _mm512_mask_storeu_epi32(out + (size_t)kp * W + w, keep, pair);
        }
    }
    for (int kp = whole; kp < pairs; kp++)
        for (int w = 0; w < W; w++)
            out[(size_t)kp * W + w] = w < live ? pair_of(o, x0 + w, kp) : 0;
}

/* Panels p0 .. p1 - 1 of an operand: panel p's pairs at out + p * pairs * W */
static void pack(uint32_t *out, const operand *o, int W, int pairs, int p0, int p1)
{
    for (int p = p0; p < p1; p++)
        pack_panel(out + (size_t)p * pairs * W, o, p, W, pairs);
}

/* ---- the micro-kernel ---- */

/* out (MR x NR floats, row stride ld) = (carry ? out : 0) + a b over
 * `pairs` pairs of K; a: MR words a pair, b: NR words a pair */
AVX512BF16 static void micro_kernel(int pairs, const uint32_t *a, const uint32_t *b, float *out,
                                    size_t ld, int carry)
{
    __m512 c[MR][2];
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
        c[r][0] = carry ? _mm512_loadu_ps(out + r * ld) : _mm512_setzero_ps();
        c[r][1] = carry ? _mm512_loadu_ps(out + r * ld + 16) : _mm512_setzero_ps();
    }
    for (int kp = 0; kp < pairs; kp++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
#pragma GCC unroll 12
        for (int r = 0; r < MR; r++) {
            __m512bh ar = (__m512bh)_mm512_set1_epi32((int)a[r]);
            c[r][0] = _mm512_dpbf16_ps(c[r][0], ar, b0);
            c[r][1] = _mm512_dpbf16_ps(c[r][1], ar, b1);
        }
        a += MR;
        b += NR;
    }
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
        _mm512_storeu_ps(out + r * ld, c[r][0]);
        _mm512_storeu_ps(out + r * ld + 16, c[r][1]);
    }
}

/* ---- the loops ---- */

typedef struct {
    const uint32_t *a, *b; /* packed, whole K */
    float *carry;          /* Mp x Np sums between K blocks (NULL with one block) */
    int M, N, pairs, Np;
    float alpha, beta;
    pt_mat C;
    const float *bias;
} product;

/* Tile (p, q) over pairs kp0..kp1-1 of K: its sums carried in g->carry
 * until kp1 ends K, then finished into C. */
static void run_tile(const product *g, int p, int q, int kp0, int kp1)
{
    float tile[MR * NR] __attribute__((aligned(64)));
    float *sum = g->carry ? g->carry + (size_t)p * MR * g->Np + (size_t)q * NR : tile;
    size_t ld = g->carry ? (size_t)g->Np : NR;
    micro_kernel(kp1 - kp0, g->a + ((size_t)p * g->pairs + kp0) * MR,
                 g->b + ((size_t)q * g->pairs + kp0) * NR, sum, ld, kp0 > 0);
    if (kp1 < g->pairs)
        return;
    int i0 = p * MR, j0 = q * NR;
    int rows = g->M - i0 < MR ? g->M - i0 : MR, cols = g->N - j0 < NR ? g->N - j0 : NR;
    for (int r = 0; r < rows; r++)
        pt_bf16x16_finish_row(g->C, i0 + r, j0, cols, sum + r * ld, g->alpha, g->beta, g->bias);
}

/* ---- a product shared between a worker's threads ---- */

/* One product cut into `parts`: each packs a share of both operands'
 * panels, then multiplies a share of the rows of tiles of C over every
 * block of K in order, so each tile is the same VDPBF16PS in the same
 * order whichever part it falls in and the bits do not depend on the
 * thread count */
typedef struct {
    product g;
    const operand *oa, *ob;
    uint32_t *a, *b; /* g's packed operands, written by pack_part */
    int parts;
} shared;

static void pack_part(void *arg, int i)
{
    const shared *s = arg;
    int pa = (s->oa->n + MR - 1) / MR, pb = (s->ob->n + NR - 1) / NR;
    pack(s->a, s->oa, MR, s->g.pairs, pt_bf16_share(pa, s->parts, i),
         pt_bf16_share(pa, s->parts, i + 1));
    pack(s->b, s->ob, NR, s->g.pairs, pt_bf16_share(pb, s->parts, i),
         pt_bf16_share(pb, s->parts, i + 1));
}

static void tiles_part(void *arg, int i)
{
    const shared *s = arg;
    const product *g = &s->g;
    int rows = (g->M + MR - 1) / MR;
    int p0 = pt_bf16_share(rows, s->parts, i), p1 = pt_bf16_share(rows, s->parts, i + 1), kp0 = 0;
    do { /* K = 0 still finishes every tile: C = beta C + bias */
        int kp1 = g->pairs - kp0 < KC_PAIRS ? g->pairs : kp0 + KC_PAIRS;
        for (int n0 = 0; n0 < g->Np; n0 += NC) {
            int q1 = (n0 + NC < g->Np ? n0 + NC : g->Np) / NR;
            for (int p = p0; p < p1; p++)
                for (int q = n0 / NR; q < q1; q++)
                    run_tile(g, p, q, kp0, kp1);
        }
        kp0 = kp1;
    } while (kp0 < g->pairs);
}

void pt_matmul_bf16_avx512(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A,
                           pt_mat B, float beta, pt_mat C, const float *bias)
{
    int pairs = (K + 1) / 2, Mp = (M + MR - 1) / MR * MR, Np = (N + NR - 1) / NR * NR;
    int blocks = (pairs + KC_PAIRS - 1) / KC_PAIRS;
    uint32_t *a = pt_scratch(0, sizeof(uint32_t) * (size_t)Mp * pairs);
    uint32_t *b = pt_scratch(1, sizeof(uint32_t) * (size_t)Np * pairs);
    float *carry = blocks > 1 ? pt_scratch(2, sizeof(float) * (size_t)Mp * Np) : NULL;
    if (!a || !b || (blocks > 1 && !carry)) {
        pt_matmul_poison(M, N, C);
        return;
    }
    size_t ld_a = (size_t)A.ld, ld_b = (size_t)B.ld;
    operand oa = {A, trans_a ? 1 : ld_a, trans_a ? ld_a : 1, M, K};
    operand ob = {B, trans_b ? ld_b : 1, trans_b ? 1 : ld_b, N, K};
    shared s = {{a, b, carry, M, N, pairs, Np, alpha, beta, C, bias}, &oa, &ob, a, b, 1};
    s.parts = pt_bf16_parts(M, N, K, Mp / MR);
    if (s.parts > 1) {
        pt_gemm_parallel(s.parts, pack_part, &s);
        pt_gemm_parallel(s.parts, tiles_part, &s);
    } else {
        pack_part(&s, 0);
        tiles_part(&s, 0);
    }
}

#else

int pt_avx512bf16_usable(void) { return 0; }

/* never chosen: pt_kernels_bf16_avx512() is NULL without the instruction */
void pt_matmul_bf16_avx512(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A,
                           pt_mat B, float beta, pt_mat C, const float *bias)
{
    (void)trans_a, (void)trans_b, (void)K, (void)alpha, (void)A, (void)B, (void)beta, (void)bias;
    pt_matmul_poison(M, N, C);
}

#endif
