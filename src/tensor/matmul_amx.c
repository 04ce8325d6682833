/* matmul_amx.c: the bf16 product on AMX tiles (matmul_bf16.h).
 *
 * TDPBF16PS adds to a 16 x 16 float tile the products of a tile of A (16
 * rows of 16 pairs along K) and a tile of B (16 pairs along K, each row the
 * pair's words for 16 columns); a word is two bf16, elements k and k + 1.
 * Both operands are packed, zero-padded, into such tiles, each 1 KiB in one
 * piece (so a tile loads with a stride of 64 bytes):
 *   A in panels of 16 rows of op(A): panel p's tiles along K, then p + 1's;
 *   B in panels of 16 columns of op(B), likewise.
 * Packing runs 16 lanes at a time (bf16_avx512.h): where K runs along
 * memory (a non-transposed A, a transposed B) a row of a tile is one load of
 * 32 elements, where the rows or columns do (a transposed A, a
 * non-transposed B) a row of pairs is two loads interleaved, and where that
 * is not the tile's row a 16 x 16 transpose of words turns it round.
 * A non-transposed bf16 op(A) whose rows and K fill whole tiles is not
 * packed: its tiles are loaded from its rows in place.
 * A weight's tiles are kept between products while it is unchanged, as
 * gemm.c keeps its panels (gemm.h's pt_gemm_packed).
 * Each 32 x 32 block of C is four float tiles, fed by two tiles of A and two
 * of B per step of 32 along K; each tile is loaded for the next step as soon
 * as its last product in this one has been issued. A strip of 32 rows of A
 * (in L1 where K is short) meets every block of columns in turn, over at
 * most 1 MiB of B's tiles at a time (L2); that ran 2-26% faster than each
 * block of columns meeting every strip of A. A finished block goes through
 * the seam's finish (alpha, beta, bias, one rounding) 16 lanes at a time, a
 * few rows between each of the next block's steps, so that it runs beside
 * the products; where C is float and takes the sums as they are (alpha 1,
 * beta 0, no bias: attention's scores) a whole block is stored from the
 * tiles into C with no finish at all (the finish had been a quarter of such
 * a product's time at attention's sizes). The sums are the same TDPBF16PS
 * in the same order whatever the packing, the finish or the thread, so
 * what C holds depends only on the operands.
 * A worker with several threads (pt_blas_set_threads) shares a large
 * product's packing and then its blocks of C between them
 * (pt_gemm_parallel); inside a part of a block's own sharing (attention's
 * heads) a product runs on its thread alone.
 * Linux hands out the tiles only after arch_prctl(ARCH_REQ_XCOMP_PERM),
 * asked once by pt_amx_usable(); each call loads its tile configuration and
 * releases the tiles at the end. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tensor/bf16_avx512.h"
#include "tensor/gemm.h"
#include "tensor/scratch.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18

#define TILE_WORDS 256 /* 16 rows of 16 words: 1 KiB */

#define AMX __attribute__((target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16")))

static int usable;
static pthread_once_t checked = PTHREAD_ONCE_INIT;

static void check(void)
{
    unsigned a, b, c, d;
    if (!pt_bf16x16_usable() || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
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

/* ---- packing ---- */

/* op(X)'s element (x, k), where x is a row of op(A) or a column of op(B),
 * lies at x * sx + k * sk; one of sx, sk is 1. */
typedef struct {
    pt_mat X;
    size_t sx, sk;
    int n, K; /* x runs over 0..n-1 */
} operand;

/* v[r] becomes the r-th column of the 16 x 16 words it held: 32-bit
 * interleaves within 128-bit lanes, then 64-bit ones, then lanes moved
 * twice across registers */
PT_TARGET_BF16X16 static void transpose16(__m512i v[16])
{
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_i32x4(v[h + i], v[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_i32x4(v[h + i], v[h + i + 4], 0xdd);
        }
    for (int i = 0; i < 8; i++) {
        v[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        v[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
    }
}

/* The words of x over pairs 16 kb .. 16 kb + 15 (K along memory: sk 1) */
PT_TARGET_BF16X16 static inline __m512i pairs_of_x(const operand *o, int x, int kb)
{
    int k0 = 32 * kb, n = o->K - k0;
    if (x >= o->n || n <= 0)
        return _mm512_setzero_si512();
    size_t at = (size_t)x * o->sx + (size_t)k0;
    if (o->X.dt == PT_BF16) {
        __mmask32 m = n >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << n) - 1);
        return _mm512_maskz_loadu_epi16(m, (const pt_bf16 *)o->X.p + at);
    }
    const float *f = (const float *)o->X.p + at;
    __m512i lo = pt_bf16x16_round(_mm512_maskz_loadu_ps(pt_lanes16(n), f));
    __m512i hi = pt_bf16x16_round(_mm512_maskz_loadu_ps(pt_lanes16(n - 16), f + 16));
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(lo)),
                              _mm512_cvtepi32_epi16(hi), 1);
}

/* The words of pair kp for x0 .. x0 + 15 (x along memory: sx 1) */
PT_TARGET_BF16X16 static inline __m512i xs_of_pair(const operand *o, int x0, int kp)
{
    int live = o->n - x0, k = 2 * kp;
    __m512i lo =
        k < o->K ? pt_bf16x16_load(o->X, (size_t)x0 + k * o->sk, live) : _mm512_setzero_si512();
    __m512i hi = k + 1 < o->K ? pt_bf16x16_load(o->X, (size_t)x0 + (k + 1) * o->sk, live)
                              : _mm512_setzero_si512();
    return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

/* Tile (x0, kb) of an operand: row r holds x0 + r's words over the block's
 * pairs where rows_are_x (A's tiles), else pair 16 kb + r's words over
 * x0 .. x0 + 15 (B's) */
PT_TARGET_BF16X16 static void pack_tile(uint32_t *tile, const operand *o, int x0, int kb,
                                        int rows_are_x)
{
    __m512i v[16];
    int by_x = o->sk == 1;
    for (int r = 0; r < 16; r++)
        v[r] = by_x ? pairs_of_x(o, x0 + r, kb) : xs_of_pair(o, x0, 16 * kb + r);
    if (by_x != rows_are_x)
        transpose16(v);
    for (int r = 0; r < 16; r++)
        _mm512_storeu_si512(tile + r * 16, v[r]);
}

/* Tiles (x0, kb) and (x0 + 16, kb) of a bf16 operand whose x run along
 * memory, where all 32 x are there: a pair of rows read 32 elements at a
 * time and turned into each tile's row of words by one two-source permute
 * (xs_of_pair's way takes four loads, four widenings, two shifts and two
 * ors for the same two rows; the weight gradient's products 1.04-1.11x) */
PT_TARGET_BF16X16 static void pack_two_tiles(uint32_t *t0, uint32_t *t1, const operand *o, int x0,
                                             int kb, int rows_are_x)
{
    /* word 2j of a tile row: row k's element j, word 2j + 1: row k + 1's
     * (the second source's elements are 32 on in the permute's index) */
    static const short lo[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    static const short hi[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                 24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
    __m512i il = _mm512_loadu_si512(lo), ih = _mm512_loadu_si512(hi);
    const pt_bf16 *x = (const pt_bf16 *)o->X.p + x0;
    __m512i v0[16], v1[16];
    for (int r = 0; r < 16; r++) {
        int k = 32 * kb + 2 * r;
        __m512i a = k < o->K ? _mm512_loadu_si512(x + (size_t)k * o->sk) : _mm512_setzero_si512();
        __m512i b =
            k + 1 < o->K ? _mm512_loadu_si512(x + (size_t)(k + 1) * o->sk) : _mm512_setzero_si512();
        v0[r] = _mm512_permutex2var_epi16(a, il, b);
        v1[r] = _mm512_permutex2var_epi16(a, ih, b);
    }
    if (rows_are_x) {
        transpose16(v0);
        transpose16(v1);
    }
    for (int r = 0; r < 16; r++) {
        _mm512_storeu_si512(t0 + r * 16, v0[r]);
        _mm512_storeu_si512(t1 + r * 16, v1[r]);
    }
}

/* Panels p0 .. p1 - 1 of an operand's tiles (16 x a panel, each `blocks`
 * tiles along K; out holds panel 0 on). In the order the operand lies in
 * memory: along each x's row where K runs along memory, else 32 rows of K
 * at a time across the panels (panel by panel, each tile read 32 bytes
 * from each of 32 rows a page or more apart, and every line twice:
 * 1.05-1.75x the time on cold weight-gradient operands). */
static void pack(uint32_t *out, const operand *o, int p0, int p1, int blocks, int rows_are_x)
{
    size_t panel = (size_t)blocks * TILE_WORDS;
    if (o->sk == 1) {
        for (int p = p0; p < p1; p++)
            for (int kb = 0; kb < blocks; kb++)
                pack_tile(out + p * panel + (size_t)kb * TILE_WORDS, o, 16 * p, kb, rows_are_x);
        return;
    }
    for (int kb = 0; kb < blocks; kb++)
        for (int p = p0; p < p1; p++) {
            uint32_t *t = out + p * panel + (size_t)kb * TILE_WORDS;
            if (o->X.dt == PT_BF16 && p + 1 < p1 && 16 * p + 32 <= o->n)
                pack_two_tiles(t, t + panel, o, 16 * p, kb, rows_are_x), p++;
            else
                pack_tile(t, o, 16 * p, kb, rows_are_x);
        }
}

/* ---- a weight's tiles, kept (gemm.h's pt_gemm_packed) ---- */

/* what kept panels name as their layout when they hold AMX's tiles */
static const pt_gemm_kernel tiles_layout = {.name = "amx-tiles"};

size_t pt_amx_packed_floats(int K, int N)
{
    return K > 0 && N > 0 ? (size_t)up32(N) * (size_t)up32(K) / 2 : 0;
}

/* op(B), K x n, of a product that reads B (of type dt, rows ld apart)
 * transposed or not: a weight's reading, kept with its tiles */
static operand b_operand(const void *B, int ld, int dt, int trans_b, int n, int K)
{
    size_t ld_b = (size_t)ld;
    return (operand){pt_mat_of(B, ld, (pt_elem_type)dt), trans_b ? ld_b : 1, trans_b ? 1 : ld_b, n,
                     K};
}

static void refill_tiles(pt_gemm_packed *kept);

/* All of the operand's columns packed into the kept panels */
static void fill_tiles(pt_gemm_packed *kept, const operand *all, int trans_b)
{
    pack((uint32_t *)kept->panels, all, 0, up32(all->n) / 16, up32(all->K) / 32, 0);
    pt_gemm_packed_fill(kept, &tiles_layout, all->X.p, trans_b, all->K, all->n, all->X.ld,
                        all->X.dt, refill_tiles);
}

/* pt_gemm_packed's refill: the reading the last product packed */
static void refill_tiles(pt_gemm_packed *kept)
{
    operand all = b_operand(kept->B, kept->ldb, kept->dt, kept->trans_b, kept->N, kept->K);
    fill_tiles(kept, &all, kept->trans_b);
}

/* op(B)'s tiles in the kept panels: packed now when they are stale (all
 * `cols` columns where that is more than the product's own: a prefix of
 * the columns is a prefix of the panels), read as they are when they hold
 * this B read this way; NULL when this product cannot use them */
static const uint32_t *kept_tiles(pt_gemm_packed *kept, const operand *ob, int trans_b)
{
    if (!pt_gemm_packed_usable(kept))
        return NULL;
    const float *B = (const float *)ob->X.p;
    if (kept->filled)
        return pt_gemm_packed_holds(kept, &tiles_layout, B, ob->X.dt, trans_b, ob->K, ob->n,
                                    ob->X.ld)
                   ? (const uint32_t *)kept->panels
                   : NULL;
    operand all = *ob;
    all.n = kept->cols > ob->n ? kept->cols : ob->n;
    if (pt_amx_packed_floats(all.K, all.n) > kept->capacity)
        return NULL;
    fill_tiles(kept, &all, trans_b);
    return (const uint32_t *)kept->panels;
}

/* ---- the product ---- */

/* Where op(A)'s tiles lie: tile (panel p of 16 rows, block kb along K) at
 * base + p * panel + kb * block bytes, its rows `row` bytes apart. Packed:
 * 1 KiB tiles one after another; in place (a non-transposed bf16 A whose
 * rows and K fill whole tiles): the rows of A themselves. */
typedef struct {
    const char *base;
    size_t panel, block, row;
} a_tiles;

/* Columns of B whose tiles stay in L2 (1 MiB of them) while a strip of A's
 * rows meets them all */
static int l2_columns(int blocks)
{
    int cols = blocks ? (1 << 20) / (blocks * 2 * 1024) * 32 : 1 << 30;
    return cols < 32 ? 32 : cols;
}

/* A finished block of C waiting for its finish: rows `done` .. rows - 1 of
 * its float sums (32 a row) are still to go into C from (m0, n0) */
typedef struct {
    const float *sum;
    int m0, n0, rows, cols, done;
} pending;

/* The seam's finish of rows up to `last` of a pending block. (A path for
 * whole 32-wide rows with what does not change hoisted out, two registers
 * a row and one 64-byte store where C is bf16, ran no faster: the finish's
 * cost is C's memory, not its instructions.) */
PT_TARGET_BF16X16 static void finish_rows(pending *f, int last, pt_mat C, float alpha, float beta,
                                          const float *bias)
{
    last = last < f->rows ? last : f->rows;
    for (; f->done < last; f->done++)
        pt_bf16x16_finish_row(C, f->m0 + f->done, f->n0, f->cols, f->sum + f->done * 32, alpha,
                              beta, bias);
}

/* A block's rows of a C the finish reads (beta not 0: a weight gradient
 * summed over micro-batches, cold in memory since the last one) asked for
 * as its products start, so they are in cache when the block is finished
 * during the next block's steps */
static void prefetch_block(pt_mat C, int m0, int n0, int rows, int cols)
{
    size_t bytes = (size_t)cols * pt_elem_size(C.dt);
    for (int r = 0; r < rows; r++) {
        const char *row = pt_elems_at(C.p, (size_t)(m0 + r) * C.ld + n0, C.dt);
        for (size_t at = 0; at < bytes; at += 64)
            __builtin_prefetch(row + at, 1, 3);
    }
}

AMX static void multiply(a_tiles a, const uint32_t *b, int M, int N, int blocks, float alpha,
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
    float block[2][32 * 32] __attribute__((aligned(64)));
    int plain = C.dt == PT_F32 && alpha == 1.0f && beta == 0.0f && !bias;
    size_t panel = (size_t)blocks * TILE_WORDS; /* words of a panel of 16 columns */
    int chunk = l2_columns(blocks), per_step = (32 + blocks - 1) / (blocks ? blocks : 1), j = 0;
    pending prev = {0};
    for (int c0 = 0; c0 < N; c0 += chunk) {
        int c1 = N - c0 < chunk ? N : c0 + chunk;
        for (int m0 = 0; m0 < M; m0 += 32) {
            const char *a0 = a.base + (size_t)(m0 / 16) * a.panel, *a1 = a0 + a.panel;
            for (int n0 = c0; n0 < c1; n0 += 32) {
                const uint32_t *b0 = b + (size_t)(n0 / 16) * panel, *b1 = b0 + panel;
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
                if (blocks) {
                    _tile_loadd(4, a0, a.row);
                    _tile_loadd(6, b0, 64);
                    _tile_loadd(7, b1, 64);
                    _tile_loadd(5, a1, a.row);
                }
                int rows = M - m0 < 32 ? M - m0 : 32, cols = N - n0 < 32 ? N - n0 : 32;
                if (beta != 0.0f)
                    prefetch_block(C, m0, n0, rows, cols);
                /* each tile of A and B loaded for the next step as soon as
                 * its last product in this one has been issued (the tiles
                 * are not renamed), and a few rows of the block before
                 * finished between the steps, where they run beside the
                 * products rather than after them */
                for (int kb = 0; kb < blocks; kb++) {
                    finish_rows(&prev, (kb + 1) * per_step, C, alpha, beta, bias);
                    int next = kb + 1 < blocks;
                    size_t at = (size_t)(kb + 1) * TILE_WORDS, a_at = (size_t)(kb + 1) * a.block;
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 4, 7);
                    if (next)
                        _tile_loadd(4, a0 + a_at, a.row);
                    _tile_dpbf16ps(2, 5, 6);
                    if (next)
                        _tile_loadd(6, b0 + at, 64);
                    _tile_dpbf16ps(3, 5, 7);
                    if (next) {
                        _tile_loadd(7, b1 + at, 64);
                        _tile_loadd(5, a1 + a_at, a.row);
                    }
                }
                finish_rows(&prev, 32, C, alpha, beta, bias);
                /* C = the sums, as they are: stored straight from the tiles */
                int as_is = plain && rows == 32 && cols == 32;
                float *sum = as_is ? (float *)C.p + (size_t)m0 * C.ld + n0 : block[j++ & 1];
                size_t ld = as_is ? (size_t)C.ld : 32;
                _tile_stored(0, sum, ld * 4);
                _tile_stored(1, sum + 16, ld * 4);
                _tile_stored(2, sum + 16 * ld, ld * 4);
                _tile_stored(3, sum + 16 * ld + 16, ld * 4);
                prev = (pending){sum, m0, n0, as_is ? 0 : rows, cols, 0};
            }
        }
    }
    finish_rows(&prev, 32, C, alpha, beta, bias);
    _tile_release();
}

/* ---- a product shared between a worker's threads ---- */

/* One product: what is left to pack, the tiles to multiply, and how its
 * blocks of C are shared out (in strips of 32 rows or blocks of 32
 * columns, whichever has more) */
typedef struct {
    const operand *oa, *ob;
    uint32_t *pack_a, *pack_b; /* NULL: nothing to pack */
    int a_panels, b_panels, blocks;
    a_tiles a;
    const uint32_t *b;
    int M, N, parts, by_rows;
    float alpha, beta;
    pt_mat C;
    const float *bias;
} product;

static void pack_part(void *arg, int i)
{
    const product *g = arg;
    if (g->pack_a)
        pack(g->pack_a, g->oa, pt_bf16_share(g->a_panels, g->parts, i),
             pt_bf16_share(g->a_panels, g->parts, i + 1), g->blocks, 1);
    if (g->pack_b)
        pack(g->pack_b, g->ob, pt_bf16_share(g->b_panels, g->parts, i),
             pt_bf16_share(g->b_panels, g->parts, i + 1), g->blocks, 0);
}

/* Part i's blocks of C: each element is the same TDPBF16PS in the same
 * order whichever part it falls in, so the bits do not depend on the
 * thread count */
static void multiply_part(void *arg, int i)
{
    const product *g = arg;
    int n = g->by_rows ? (g->M + 31) / 32 : (g->N + 31) / 32;
    int lo = 32 * pt_bf16_share(n, g->parts, i), hi = 32 * pt_bf16_share(n, g->parts, i + 1);
    int all = g->by_rows ? g->M : g->N;
    hi = hi < all ? hi : all;
    if (lo >= hi)
        return;
    pt_mat C = g->C;
    if (g->by_rows) {
        a_tiles a = g->a;
        a.base += (size_t)(lo / 16) * a.panel;
        C.p = pt_elems_at(C.p, (size_t)lo * C.ld, C.dt);
        multiply(a, g->b, hi - lo, g->N, g->blocks, g->alpha, g->beta, C, g->bias);
    } else {
        C.p = pt_elems_at(C.p, (size_t)lo, C.dt);
        multiply(g->a, g->b + (size_t)(lo / 16) * g->blocks * TILE_WORDS, g->M, hi - lo, g->blocks,
                 g->alpha, g->beta, C, g->bias ? g->bias + lo : NULL);
    }
}

void pt_matmul_bf16_amx(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A,
                        pt_mat B, float beta, pt_mat C, const float *bias)
{
    int Mp = up32(M), Np = up32(N), blocks = up32(K) / 32;
    size_t ld_a = (size_t)A.ld;
    operand oa = {A, trans_a ? 1 : ld_a, trans_a ? ld_a : 1, M, K};
    operand ob = b_operand(B.p, B.ld, B.dt, trans_b, N, K);
    const uint32_t *kept = kept_tiles(B.packed ? &B.packed[trans_b != 0] : NULL, &ob, trans_b != 0);
    int in_place = !trans_a && A.dt == PT_BF16 && M % 32 == 0 && K % 32 == 0;
    uint32_t *a =
        in_place ? NULL : pt_scratch(0, sizeof(uint32_t) * ((size_t)Mp * blocks * 16 + 1));
    uint32_t *b = kept ? NULL : pt_scratch(1, sizeof(uint32_t) * ((size_t)Np * blocks * 16 + 1));
    if ((!in_place && !a) || (!kept && !b)) {
        pt_matmul_poison(M, N, C);
        return;
    }
    product g = {.oa = &oa,
                 .ob = &ob,
                 .pack_a = a,
                 .pack_b = b,
                 .a_panels = Mp / 16,
                 .b_panels = Np / 16,
                 .blocks = blocks,
                 .b = kept ? kept : b,
                 .M = M,
                 .N = N,
                 .parts = 1,
                 .by_rows = Mp >= Np,
                 .alpha = alpha,
                 .beta = beta,
                 .C = C,
                 .bias = bias};
    g.a = in_place
              ? (a_tiles){(const char *)A.p, 16 * ld_a * 2, 64, ld_a * 2}
              : (a_tiles){(const char *)a, (size_t)blocks * TILE_WORDS * 4, TILE_WORDS * 4, 64};
    g.parts = pt_bf16_parts(M, N, K, g.by_rows ? Mp / 32 : Np / 32);
    if (g.parts > 1) {
        if (a || b)
            pt_gemm_parallel(g.parts, pack_part, &g);
        pt_gemm_parallel(g.parts, multiply_part, &g);
    } else {
        pack_part(&g, 0);
        multiply_part(&g, 0);
    }
}

#else

int pt_amx_usable(void) { return 0; }

size_t pt_amx_packed_floats(int K, int N) { return (void)K, (void)N, 0; }

void pt_matmul_bf16_amx(int trans_a, int trans_b, int M, int N, int K, float alpha, pt_mat A,
                        pt_mat B, float beta, pt_mat C, const float *bias)
{
    pt_matmul_bf16_portable(trans_a, trans_b, M, N, K, alpha, A, B, beta, C, bias);
}

#endif
