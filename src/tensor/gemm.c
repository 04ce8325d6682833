/* gemm.c: the blocked fp32 product's driver (gemm.h): blocking, packing,
 * the edges, the split of C between threads, and the portable micro-kernel.
 *
 * Loops, outermost first: columns of C in blocks of NC (op(B)'s block of
 * KC x NC is packed once and stays in L2), K in blocks of KC, rows in blocks
 * of MC (packed), then one A panel (MR x KC, in L1) against every B panel of
 * the block. NC is what fills half of this CPU's L2 at that KC
 * (block_columns). With op(B)'s panels kept (pt_gemm_packed) nothing of B
 * is packed, and its blocks are read in place. A non-transposed op(A)
 * (the activations of the forward and the input gradient) is not packed
 * where the kernel has a tile_rows: its panels are read in place, each
 * panel's tiles fetching the next panel's rows a few lines at a time; only
 * the rows short of a whole panel are packed. On GPT's products, with the
 * weights' panels kept and op(A) cycling through memory as in training,
 * that ran 0-6% faster than packing it (AVX2; bench/bench_packing.c).
 * KC = K split into equal blocks of at most KC_MAX: a function of K alone,
 * which is what keeps every thread's and worker's sums the same.
 * A tile that runs past M or N is computed whole into a buffer (the packing
 * pads with zeros) and only its part inside C is finished, by the same
 * expression the micro-kernels use. Packing goes to the calling thread's
 * scratch slots (scratch.h).
 * bf16's portable product (pt_gemm_bf16) runs the same loops: its packing
 * widens each operand's bf16 values to float (a float operand rounded to
 * bf16 first), A always packed; its tiles form plain sums (alpha 1, beta 0,
 * no bias), carried from block to block of K in a buffer of whole tiles,
 * and each tile is finished into C, rounded where C is bf16, after the
 * last block. So the widening and the finish are the tiles' own, on every
 * thread the product is shared with, and a weight's panels are kept. */
#include "tensor/gemm.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "tensor/bf16.h"
#include "tensor/scratch.h"

#define KC_MAX 384 /* an A panel of 12 x 384 floats is 18 KiB of L1 */
/* Columns of op(B) in a block, at most and at least (block_columns) */
#define NC_MAX     4096
#define NC_MIN     256
#define MC         192 /* a multiple of every MR */
#define MAX_TILE   (12 * 32)
#define MAX_PANEL  32 /* the widest panel: avx512's NR */
#define SLOT_SUMS  2  /* pt_gemm_bf16's sums carried between blocks of K */
#define SLOT_STAGE 3  /* streams widened before they are interleaved */
#define SLOT_A     4
#define SLOT_B     5

/* Products smaller than this many multiply-adds run on one thread: waking
 * a helper costs more than it saves. */
#define PARALLEL_MIN_FMAS (1L << 20)

typedef struct {
    const pt_gemm_kernel *k;
    int trans_a, trans_b, M, N, K, kc;
    float alpha, beta;
    const void *A, *B; /* their elements as a_read and b_read say */
    pt_gemm_reading a_read, b_read;
    const float *bias;
    int lda, ldb, ldc;
    float *C;              /* pt_gemm's C, which the tiles finish */
    void *out;             /* pt_gemm_bf16's C (NULL: pt_gemm's job), finished from the sums */
    int out_bf16;          /* its elements are bf16 */
    const float *panels;   /* op(B) packed whole (pt_gemm_packed), or NULL */
    size_t panel_row;      /* the panels' floats per row of op(B): all their columns' */
    int parts, split_rows; /* the split of C: rows or columns, in whole tiles */
    int failed;
} gemm_job;

static int min_int(int a, int b) { return a < b ? a : b; }

static long l2_set; /* pt_gemm_set_l2_bytes; 0: the CPU's */

void pt_gemm_set_l2_bytes(long bytes)
{
    __atomic_store_n(&l2_set, bytes > 0 ? bytes : 0, __ATOMIC_RELAXED);
}

/* Bytes of L2 the blocks are sized for: the set figure, else the CPU's
 * (0 where unknown) */
static long l2_bytes(void)
{
    static long cpu = -1; /* -1: not asked yet */
    long set = __atomic_load_n(&l2_set, __ATOMIC_RELAXED);
    if (set)
        return set;
    long b = __atomic_load_n(&cpu, __ATOMIC_RELAXED);
    if (b < 0) {
        b = sysconf(_SC_LEVEL2_CACHE_SIZE);
        b = b > 0 ? b : 0;
        __atomic_store_n(&cpu, b, __ATOMIC_RELAXED);
    }
    return b;
}

/* Columns of op(B) in a block of depth kc, in whole panels of nr: as many
 * as fill half of L2 (1024 where its size is unknown), between NC_MIN and
 * NC_MAX. Each panel of op(A)'s rows reads the whole block again, with its
 * own panel and C's rows passing through L2 beside it; a block past L2
 * comes from L3 every time. The rule before, 1024 columns or, where the
 * weights' panels are kept, all of a weight's columns up to 4096 (op(A)
 * then packed once per block of K), ran GPT's weight products and its
 * training steps 4-6% slower on a Xeon with 2 MiB of L2
 * (docs/performance.md). Only the columns' grouping changes: every
 * element's sum is the same. */
static int block_columns(int kc, int nr)
{
    long l2 = l2_bytes();
    long cols = l2 ? l2 / 2 / ((long)kc * (long)sizeof(float)) : 1024;
    cols = cols < NC_MIN ? NC_MIN : cols > NC_MAX ? NC_MAX : cols;
    return (int)(cols / nr * nr);
}

/* n floats from src to dst: a copy of fixed size (a few moves, not a call
 * per p) for the panel widths the micro-kernels use, memcpy for the rest */
static inline void copy_floats(float *dst, const float *src, int n)
{
    switch (n) {
    case 4: memcpy(dst, src, 4 * sizeof(float)); break;
    case 6: memcpy(dst, src, 6 * sizeof(float)); break;
    case 12: memcpy(dst, src, 12 * sizeof(float)); break;
    case 16: memcpy(dst, src, 16 * sizeof(float)); break;
    case 32: memcpy(dst, src, 32 * sizeof(float)); break;
    default: memcpy(dst, src, sizeof(float) * (size_t)n);
    }
}

static size_t elem_bytes(pt_gemm_reading read) { return read == PT_GEMM_BF16 ? 2 : 4; }

/* x advanced by n elements read as `read` */
static const void *elem_at(const void *x, pt_gemm_reading read, size_t n)
{
    return (const char *)x + n * elem_bytes(read);
}

/* n bf16 values widened, or n floats rounded to bf16 values: kept inline
 * so that each panel width's loop is unrolled for it */
static inline __attribute__((always_inline)) void widen(float *restrict dst,
                                                        const pt_bf16 *restrict h, int n)
{
    for (int i = 0; i < n; i++)
        dst[i] = pt_bf16_widen(h[i]);
}

static inline __attribute__((always_inline)) void round_floats(float *restrict dst,
                                                               const float *restrict f, int n)
{
    for (int i = 0; i < n; i++)
        dst[i] = pt_bf16_rounded(f[i]);
}

/* n elements from x as floats, read as `read` says */
static inline void load_run(float *restrict dst, const void *x, pt_gemm_reading read, int n)
{
    if (read == PT_GEMM_BF16) {
        switch (n) {
        case 12: widen(dst, x, 12); break;
        case 16: widen(dst, x, 16); break;
        case 32: widen(dst, x, 32); break;
        default: widen(dst, x, n);
        }
    } else if (read == PT_GEMM_ROUNDED) {
        switch (n) {
        case 12: round_floats(dst, x, 12); break;
        case 16: round_floats(dst, x, 16); break;
        case 32: round_floats(dst, x, 32); break;
        default: round_floats(dst, x, n);
        }
    } else {
        copy_floats(dst, x, n);
    }
}

/* A panel of mr streams that each advance one float per p (rows of a
 * non-transposed A, columns of a transposed B): out[p][i] = src[i][p]. Kept
 * inline so that each panel width's copy is unrolled for it. */
static inline __attribute__((always_inline)) void interleave(float *out, const float *const *src,
                                                             int kc, int mr)
{
    for (int p = 0; p < kc; p++, out += mr)
        for (int i = 0; i < mr; i++)
            out[i] = src[i][p];
}

static void interleave_panel(float *out, const float *const *src, int kc, int mr)
{
    switch (mr) {
    case 4: interleave(out, src, kc, 4); break;
    case 6: interleave(out, src, kc, 6); break;
    case 12: interleave(out, src, kc, 12); break;
    case 16: interleave(out, src, kc, 16); break;
    case 32: interleave(out, src, kc, 32); break;
    default: interleave(out, src, kc, mr);
    }
}

/* Rows of X that pack_rows copies together */
#define PACK_GROUP 16

/* n of X's values per p into panels `width` wide (zero past n) when X's
 * row p holds them side by side from x + p ldx (a transposed A, a
 * non-transposed B). PACK_GROUP rows at a time, panel by panel, so each
 * panel's share of them is written at once as whole cache lines, and the
 * group's rows are read from L1 across the panels. Row by row across the
 * panels, each row wrote a few floats to every panel in turn; the panels
 * lie a multiple of 4 KiB apart (12 x 256 floats, say), so those stores all
 * fell in one set of L1 and evicted each other: on attention's dV = p^T dy
 * (256 x 64 x 256) the packing took a third of the product. While a group
 * is copied, the next one's rows are fetched, a panel's width of each at a
 * time: these operands are activations, often in memory by now. */
static void pack_rows(float *out, const void *x, pt_gemm_reading read, long ldx, int kc, int n,
                      int width)
{
    size_t panel = (size_t)width * kc;
    for (int p0 = 0; p0 < kc; p0 += PACK_GROUP) {
        int p1 = min_int(p0 + PACK_GROUP, kc), next = min_int(p1 + PACK_GROUP, kc);
        float *dst = out + (size_t)p0 * width;
        for (int c = 0; c < n; c += width, dst += panel) {
            int used = min_int(width, n - c);
            for (int p = p1; p < next; p++)
                __builtin_prefetch(elem_at(x, read, (size_t)p * ldx + c));
            float *d = dst;
            for (int p = p0; p < p1; p++, d += width) {
                load_run(d, elem_at(x, read, (size_t)p * ldx + c), read, used);
                for (int i = used; i < width; i++)
                    d[i] = 0.0f;
            }
        }
    }
}

/* n of X's values per p into panels `width` wide (zero past n) when each
 * comes from a stream of its own, x + i ldx + p (a non-transposed A's rows,
 * a transposed B's). Streams not of floats read as they are are widened
 * into `stage` (room for MAX_PANEL x kc floats) first. */
static void pack_streams(const pt_gemm_kernel *k, float *out, const void *x, pt_gemm_reading read,
                         long ldx, int kc, int n, int width, float *stage)
{
    static const float zeros[KC_MAX] = {0}; /* the streams past n */
    const float *src[MAX_PANEL];
    for (int c = 0; c < n; c += width, out += (size_t)width * kc) {
        for (int i = 0; i < width; i++) {
            const void *stream = elem_at(x, read, (size_t)(c + i) * ldx);
            if (c + i >= n) {
                src[i] = zeros;
            } else if (read == PT_GEMM_FLOATS) {
                src[i] = stream;
            } else {
                src[i] = stage + (size_t)i * kc;
                load_run(stage + (size_t)i * kc, stream, read, kc);
            }
        }
        if (k->interleave)
            k->interleave(out, src, kc, width);
        else
            interleave_panel(out, src, kc, width);
    }
}

/* op(A)'s rows i0 .. i0+m-1, columns p0 .. p0+kc-1, into panels of mr rows:
 * panel r holds, for each p, its mr rows' elements (zero past m). */
static void pack_a(const gemm_job *g, int i0, int m, int p0, int kc, float *out, float *stage)
{
    if (g->trans_a) /* A is (K,M): op(A)[i][p] = A[p][i] */
        pack_rows(out, elem_at(g->A, g->a_read, (size_t)p0 * g->lda + i0), g->a_read, g->lda, kc, m,
                  g->k->mr);
    else
        pack_streams(g->k, out, elem_at(g->A, g->a_read, (size_t)i0 * g->lda + p0), g->a_read,
                     g->lda, kc, m, g->k->mr, stage);
}

/* op(B)'s rows p0 .. p0+kc-1, columns j0 .. j0+n-1, into panels of nr
 * columns: panel c holds, for each p, its nr columns (zero past n). */
static void pack_b(const gemm_job *g, int p0, int kc, int j0, int n, float *out, float *stage)
{
    if (!g->trans_b)
        pack_rows(out, elem_at(g->B, g->b_read, (size_t)p0 * g->ldb + j0), g->b_read, g->ldb, kc, n,
                  g->k->nr);
    else /* B is (N,K): op(B)[p][j] = B[j][p] */
        pack_streams(g->k, out, elem_at(g->B, g->b_read, (size_t)j0 * g->ldb + p0), g->b_read,
                     g->ldb, kc, n, g->k->nr, stage);
}

/* Room to widen the streams of a job's operands, where one is not floats
 * read as they are (else none is needed: NULL, and *ok stays 1) */
static float *stage_for(const gemm_job *g, int kc, int *ok)
{
    if (g->a_read == PT_GEMM_FLOATS && g->b_read == PT_GEMM_FLOATS)
        return NULL;
    float *stage = pt_scratch(SLOT_STAGE, sizeof(float) * MAX_PANEL * (size_t)kc);
    *ok = *ok && stage;
    return stage;
}

/* One row of an edge tile's part in C, from its sums */
static inline __attribute__((always_inline)) void finish_row(const float *restrict acc,
                                                             float *restrict c, int cols,
                                                             float alpha, float beta,
                                                             const float *bias)
{
    for (int j = 0; j < cols; j++) {
        float v = alpha * acc[j];
        if (beta != 0.0f)
            v = v + beta * c[j];
        if (bias)
            v = v + bias[j];
        c[j] = v;
    }
}

/* the part of a tile inside C, from its sums: the micro-kernels' finish.
 * Rows as wide as a panel (a tile past M alone: 512 rows in panels of 6)
 * are finished at that width, so they vectorise without masks: masked
 * loads of C took a quarter of the driver's time. */
static void finish_edge(const float *acc, int nr, float *c, long ldc, int rows, int cols,
                        float alpha, float beta, const float *bias)
{
    for (int i = 0; i < rows; i++, acc += nr, c += ldc)
        switch (cols) {
        case 16: finish_row(acc, c, 16, alpha, beta, bias); break;
        case 32: finish_row(acc, c, 32, alpha, beta, bias); break;
        default: finish_row(acc, c, cols, alpha, beta, bias);
        }
}

/* pt_gemm_bf16's finish of one row of sums into a bf16 C, as
 * matmul_bf16.h's pt_matmul_finish */
static inline void finish_bf16_row(const float *restrict sum, pt_bf16 *restrict c, int cols,
                                   float alpha, float beta, const float *bias)
{
    for (int j = 0; j < cols; j++) {
        float v = alpha * sum[j];
        if (beta != 0.0f)
            v = v + beta * pt_bf16_widen(c[j]);
        if (bias)
            v = v + bias[j];
        c[j] = pt_bf16_round(v);
    }
}

/* pt_gemm_bf16's finish of rows x cols sums (rows lds apart) into its C
 * from element (i0, j0) */
static void finish_sums(const gemm_job *g, const float *sum, long lds, int i0, int j0, int rows,
                        int cols)
{
    const float *bias = g->bias ? g->bias + j0 : NULL;
    for (int i = 0; i < rows; i++, sum += lds) {
        size_t at = (size_t)(i0 + i) * g->ldc + j0;
        if (g->out_bf16)
            finish_bf16_row(sum, (pt_bf16 *)g->out + at, cols, g->alpha, g->beta, bias);
        else
            finish_row(sum, (float *)g->out + at, cols, g->alpha, g->beta, bias);
    }
}

/* ---- op(B) packed whole and kept (pt_gemm_packed) ---- */

/* columns of C rounded up to whole panels: a row of the kept panels */
static size_t padded_cols(const pt_gemm_kernel *k, int N)
{
    return (size_t)((N + k->nr - 1) / k->nr) * k->nr;
}

size_t pt_gemm_packed_floats(const pt_gemm_kernel *k, int K, int N)
{
    return K > 0 && N > 0 ? padded_cols(k, N) * (size_t)K : 0;
}

/* The panel of columns from jc in the block of K from pc (kb deep): the
 * blocks follow each other, each holding every panel of its kb rows. */
static const float *kept_panel(const gemm_job *g, int pc, int kb, int jc)
{
    return g->panels + g->panel_row * (size_t)pc + (size_t)jc * kb;
}

/* Blocks of K as deep as KC_MAX allows, all alike: fixed by K alone */
static int depth_of(int K)
{
    int kblocks = (K + KC_MAX - 1) / KC_MAX;
    return (K + kblocks - 1) / kblocks;
}

static void refill_kept(pt_gemm_packed *kept);

/* N columns of the job's op(B) packed into the kept panels; 0 when there
 * is no room to widen its streams (they stay empty) */
static int fill_kept(const gemm_job *g, pt_gemm_packed *kept, int N)
{
    int ok = 1;
    float *stage = stage_for(g, g->kc, &ok);
    if (!ok)
        return 0;
    size_t row = padded_cols(g->k, N);
    for (int pc = 0; pc < g->K; pc += g->kc)
        pack_b(g, pc, min_int(g->kc, g->K - pc), 0, N, kept->panels + row * (size_t)pc, stage);
    pt_gemm_packed_fill(kept, g->k, g->B, g->trans_b, g->K, N, g->ldb, (int)g->b_read, refill_kept);
    return 1;
}

/* pt_gemm_packed's refill: the reading the last product packed */
static void refill_kept(pt_gemm_packed *kept)
{
    gemm_job g = {.k = kept->k,
                  .trans_b = kept->trans_b,
                  .K = kept->K,
                  .kc = depth_of(kept->K),
                  .B = kept->B,
                  .b_read = (pt_gemm_reading)kept->dt,
                  .ldb = kept->ldb};
    fill_kept(&g, kept, kept->N);
}

/* The job's op(B) in the kept panels: packed now when they are stale, read
 * as they are when they already hold it or more of its columns (and
 * g->panel_row set); NULL when this product cannot use them (another
 * reading of B, too little room, a part's product with shared panels). */
static const float *use_kept(gemm_job *g, pt_gemm_packed *kept)
{
    if (!pt_gemm_packed_usable(kept))
        return NULL;
    if (kept->filled) {
        if (!pt_gemm_packed_holds(kept, g->k, g->B, (int)g->b_read, g->trans_b, g->K, g->N, g->ldb))
            return NULL;
        g->panel_row = padded_cols(g->k, kept->N);
        return kept->panels;
    }
    int N = kept->cols > g->N ? kept->cols : g->N;
    if (pt_gemm_packed_floats(g->k, g->K, N) > kept->capacity)
        return NULL;
    g->panel_row = padded_cols(g->k, N);
    return fill_kept(g, kept, N) ? kept->panels : NULL;
}

/* A fetch of a few cache lines of op(A)'s next panel, read in place,
 * before each tile of this one: spread over the panel's tiles, so that its
 * rows come in while they run (packing would have waited for them). The
 * next line to fetch is kept as its row and its place in the row: a
 * division per fetch took a quarter of the driver's time. */
typedef struct {
    const float *rows; /* NULL: nothing to fetch */
    long lda;
    int row_lines, per_tile, left; /* lines per row, per tile, not fetched */
    int row, line;                 /* the next line to fetch */
} next_panel;

static next_panel next_of(const float *rows, long lda, int mr, int kb, int tiles)
{
    next_panel n = {rows, lda, (kb + 15) / 16, 0, 0, 0, 0};
    n.left = rows ? mr * n.row_lines : 0;
    n.per_tile = (n.left + tiles - 1) / tiles;
    return n;
}

static inline void fetch_some(next_panel *n)
{
    for (int q = 0; q < n->per_tile && n->left > 0; q++, n->left--) {
        __builtin_prefetch(n->rows + (size_t)n->row * n->lda + (size_t)n->line * 16);
        if (++n->line == n->row_lines)
            n->line = 0, n->row++;
    }
}

/* One tile's sums over a block of K: op(A)'s panel a (its rows read in
 * place, lda apart, where direct) against op(B)'s panel b, into out (ldo
 * between rows) as (alpha acc + beta out) + bias */
static inline void tile_of(const gemm_job *g, int direct, int kb, const float *a, const float *b,
                           float *out, long ldo, float alpha, float beta, const float *bias)
{
    if (direct)
        g->k->tile_rows(kb, a, g->lda, b, out, ldo, alpha, beta, bias);
    else
        g->k->tile(kb, a, b, out, ldo, alpha, beta, bias);
}

/* C's rows m0 .. m1-1 and columns n0 .. n1-1 */
static void gemm_block(gemm_job *g, int m0, int m1, int n0, int n1)
{
    const pt_gemm_kernel *k = g->k;
    int mr = k->mr, nr = k->nr, kc = g->kc, mcb = MC / mr * mr, ok = 1;
    /* the columns in as few blocks as block_columns allows, all alike
     * (768 columns as 384 and 384, not 672 and 96) */
    int most = block_columns(kc, nr), nblocks = (n1 - n0 + most - 1) / most;
    int nc = ((n1 - n0 + nblocks - 1) / nblocks + nr - 1) / nr * nr;
    float *ap = pt_scratch(SLOT_A, sizeof(float) * (size_t)mcb * kc);
    float *bp = g->panels ? NULL : pt_scratch(SLOT_B, sizeof(float) * (size_t)nc * kc);
    float *stage = stage_for(g, kc, &ok);
    /* pt_gemm_bf16 with K in several blocks: the sums of a block of
     * columns (nc of them a row, every row of this part's, in whole
     * tiles) carried from one block of K to the next */
    int carried = g->out && kc < g->K;
    float *sums =
        carried ? pt_scratch(SLOT_SUMS,
                             sizeof(float) * (size_t)((m1 - m0 + mr - 1) / mr * mr) * (size_t)nc)
                : NULL;
    if (!ok || !ap || (!bp && !g->panels) || (carried && !sums)) {
        __atomic_store_n(&g->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    _Alignas(64) float edge[MAX_TILE];
    for (int jc = n0; jc < n1; jc += nc) {
        int nb = min_int(nc, n1 - jc), tiles = (nb + nr - 1) / nr;
        for (int pc = 0; pc < g->K; pc += kc) {
            int kb = min_int(kc, g->K - pc), last = pc + kb == g->K;
            /* the first block of K brings in beta and the bias, the others add */
            float beta = pc == 0 ? g->beta : 1.0f;
            const float *bias = pc == 0 && g->bias ? g->bias + jc : NULL;
            const float *bq = g->panels ? kept_panel(g, pc, kb, jc) : bp;
            if (!g->panels)
                pack_b(g, pc, kb, jc, nb, bp, stage);
            for (int ic = m0; ic < m1; ic += mcb) {
                int mb = min_int(mcb, m1 - ic);
                /* whole panels of a non-transposed A of floats are read in
                 * place (tile_rows), the rows left over are packed */
                int in_place =
                    !g->trans_a && g->a_read == PT_GEMM_FLOATS && k->tile_rows ? mb / mr * mr : 0;
                if (in_place < mb)
                    pack_a(g, ic + in_place, mb - in_place, pc, kb, ap, stage);
                for (int ir = 0; ir < mb; ir += mr) {
                    int rows = min_int(mr, mb - ir), direct = ir < in_place;
                    const float *a = direct ? (const float *)g->A + (size_t)(ic + ir) * g->lda + pc
                                            : ap + (size_t)(ir - in_place) * kb;
                    next_panel next = next_of(ir + mr < in_place ? a + (size_t)mr * g->lda : NULL,
                                              g->lda, mr, kb, tiles);
                    for (int jr = 0; jr < nb; jr += nr) {
                        fetch_some(&next);
                        const float *b = bq + (size_t)jr * kb;
                        int cols = min_int(nr, nb - jr);
                        if (g->out) { /* pt_gemm_bf16: plain sums, finished after the last block */
                            float *sum = sums ? sums + (size_t)(ic + ir - m0) * nc + jr : edge;
                            long lds = sums ? nc : nr;
                            tile_of(g, direct, kb, a, b, sum, lds, 1.0f, pc == 0 ? 0.0f : 1.0f,
                                    NULL);
                            if (last)
                                finish_sums(g, sum, lds, ic + ir, jc + jr, rows, cols);
                            continue;
                        }
                        float *c = g->C + (size_t)(ic + ir) * g->ldc + jc + jr;
                        const float *bj = bias ? bias + jr : NULL;
                        /* a tile past M or N goes whole to edge, then its part in C */
                        int whole = rows == mr && cols == nr;
                        if (whole) {
                            tile_of(g, direct, kb, a, b, c, g->ldc, g->alpha, beta, bj);
                        } else {
                            tile_of(g, direct, kb, a, b, edge, nr, 1.0f, 0.0f, NULL);
                            finish_edge(edge, nr, c, g->ldc, rows, cols, g->alpha, beta, bj);
                        }
                    }
                }
            }
        }
    }
}

/* part i of the split: whole tiles of rows or of columns */
static void gemm_part(void *arg, int i)
{
    gemm_job *g = arg;
    int unit = g->split_rows ? g->k->mr : g->k->nr, len = g->split_rows ? g->M : g->N;
    long tiles = (len + unit - 1) / unit;
    int lo = (int)(tiles * i / g->parts) * unit,
        hi = min_int(len, (int)(tiles * (i + 1) / g->parts) * unit);
    if (lo >= hi)
        return;
    if (g->split_rows)
        gemm_block(g, lo, hi, 0, g->N);
    else
        gemm_block(g, 0, g->M, lo, hi);
}

/* Whether cutting C into `parts` ranges of rows packs less per thread than
 * cutting it into ranges of columns. A part of rows packs all of op(B) and
 * its rows of op(A) once per block of NC columns; a part of columns packs
 * its columns of op(B) and all of op(A) once per block of its columns. On
 * a micro-batch of one sequence (256 rows against weights of 768 x 2304)
 * the columns pack a third less, and the products of two threads ran
 * 4-20% faster for it. With op(B)'s panels kept, nothing of op(B) is
 * packed. */
static int rows_pack_less(const pt_gemm_kernel *k, int M, int N, int K, int parts, int b_kept)
{
    double col_width = (double)N / parts, b = b_kept ? 0.0 : 1.0;
    double nc = block_columns(depth_of(K), k->nr);
    double rows = b * K * N + (double)M / parts * K * ceil((double)N / nc);
    double cols = b * K * col_width + (double)M * K * ceil(col_width / nc);
    return rows <= cols;
}

/* The job's product: op(B)'s kept panels taken (or filled), then C shared
 * between `threads` threads by rows or by columns, or on this thread alone */
static int run_job(gemm_job *g, int threads, pt_gemm_packed *packed_b)
{
    const pt_gemm_kernel *k = g->k;
    int M = g->M, N = g->N;
    g->panels = use_kept(g, packed_b);
    int row_tiles = (M + k->mr - 1) / k->mr, col_tiles = (N + k->nr - 1) / k->nr;
    if (threads > 1 && (long)M * N * g->K >= PARALLEL_MIN_FMAS && !pt_gemm_in_part()) {
        if (row_tiles >= threads && col_tiles >= threads)
            g->split_rows = rows_pack_less(k, M, N, g->K, threads, g->panels != NULL);
        else
            g->split_rows = row_tiles >= threads || row_tiles >= col_tiles;
        int tiles = g->split_rows ? row_tiles : col_tiles;
        g->parts = min_int(threads, tiles);
    }
    if (g->parts > 1)
        pt_gemm_parallel(g->parts, gemm_part, g);
    else
        gemm_block(g, 0, M, 0, N);
    return g->failed ? -1 : 0;
}

/* A product's job, C and the split left to the caller */
static gemm_job job_of(const pt_gemm_kernel *k, int trans_a, int trans_b, int M, int N, int K,
                       float alpha, const void *A, pt_gemm_reading a_read, int lda, const void *B,
                       pt_gemm_reading b_read, int ldb, float beta, int ldc, const float *bias)
{
    return (gemm_job){.k = k,
                      .trans_a = trans_a,
                      .trans_b = trans_b,
                      .M = M,
                      .N = N,
                      .K = K,
                      .kc = K > 0 ? depth_of(K) : 0,
                      .alpha = alpha,
                      .beta = beta,
                      .A = A,
                      .B = B,
                      .a_read = a_read,
                      .b_read = b_read,
                      .bias = bias,
                      .lda = lda,
                      .ldb = ldb,
                      .ldc = ldc,
                      .parts = 1,
                      .split_rows = 1};
}

int pt_gemm(const pt_gemm_kernel *k, int threads, int trans_a, int trans_b, int M, int N, int K,
            float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
            int ldc, const float *bias, pt_gemm_packed *packed_b)
{
    if (M <= 0 || N <= 0)
        return 0;
    if (K <= 0) { /* no sums: C = beta C + bias */
        _Alignas(64) float zero[MAX_TILE] = {0};
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j += k->nr)
                finish_edge(zero, k->nr, C + (size_t)i * ldc + j, ldc, 1, min_int(k->nr, N - j),
                            alpha, beta, bias ? bias + j : NULL);
        return 0;
    }
    gemm_job g = job_of(k, trans_a, trans_b, M, N, K, alpha, A, PT_GEMM_FLOATS, lda, B,
                        PT_GEMM_FLOATS, ldb, beta, ldc, bias);
    g.C = C;
    return run_job(&g, threads, packed_b);
}

int pt_gemm_bf16(const pt_gemm_kernel *k, int threads, int trans_a, int trans_b, int M, int N,
                 int K, float alpha, const void *A, pt_gemm_reading a_read, int lda, const void *B,
                 pt_gemm_reading b_read, int ldb, float beta, void *C, int c_bf16, int ldc,
                 const float *bias, pt_gemm_packed *packed_b)
{
    if (M <= 0 || N <= 0)
        return 0;
    gemm_job g = job_of(k, trans_a, trans_b, M, N, K, alpha, A, a_read, lda, B, b_read, ldb, beta,
                        ldc, bias);
    g.out = C, g.out_bf16 = c_bf16;
    if (K <= 0) { /* every sum 0: C = beta C + bias */
        static const float zero[MAX_TILE] = {0};
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j += MAX_TILE)
                finish_sums(&g, zero, 0, i, j, 1, min_int(MAX_TILE, N - j));
        return 0;
    }
    return run_job(&g, threads, packed_b);
}

/* ---- the portable micro-kernel ---- */

#define GEN_MR 4
#define GEN_NR 16

static void tile_generic(int kc, const float *a, const float *b, float *c, long ldc, float alpha,
                         float beta, const float *bias)
{
    float acc[GEN_MR][GEN_NR] = {{0}};
    for (int p = 0; p < kc; p++, a += GEN_MR, b += GEN_NR)
        for (int i = 0; i < GEN_MR; i++)
            for (int j = 0; j < GEN_NR; j++)
                acc[i][j] += a[i] * b[j];
    finish_edge(&acc[0][0], GEN_NR, c, ldc, GEN_MR, GEN_NR, alpha, beta, bias);
}

static const pt_gemm_kernel generic = {"generic", GEN_MR, GEN_NR, tile_generic, NULL, NULL};

const pt_gemm_kernel *pt_gemm_generic(void) { return &generic; }
