/* gemm.c: the blocked fp32 product's driver (gemm.h): blocking, packing,
 * the edges, the split of C between threads, and the portable micro-kernel.
 *
 * Loops, outermost first: columns of C in blocks of NC (op(B)'s block of
 * KC x NC is packed once and stays in L2), K in blocks of KC, rows in blocks
 * of MC (packed), then one A panel (MR x KC, in L1) against every B panel of
 * the block. With op(B)'s panels kept (pt_gemm_packed) nothing of B is
 * packed, and the columns are blocks of up to KEPT_NC_MAX, so that op(A)
 * is packed once per block of K and MC rows rather than once per NC
 * columns too (GPT 12 / 768's MLP: three times). A non-transposed op(A)
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
 * scratch slots (scratch.h). */
#include "tensor/gemm.h"

#include <math.h>
#include <string.h>

#include "tensor/scratch.h"

#define KC_MAX 384 /* an A panel of 12 x 384 floats is 18 KiB of L1 */
#define NC_MAX 1024
/* With op(B)'s panels kept, columns at once: all of a weight's (op(A) is
 * then packed once per block of K, not once per block of columns too), up
 * to this many, so that a block of the kept panels (KC x 4096 floats, 6 MiB)
 * still stays in L3. All of them at once sent GPT-2's LM head (50257
 * columns, 77 MB a block of K) through memory once per panel of op(A)'s
 * rows: its forward ran 3x as long as its backward's products. */
#define KEPT_NC_MAX 4096
#define MC          192 /* a multiple of every MR */
#define MAX_TILE    (12 * 32)
#define MAX_PANEL   32 /* the widest panel: avx512's NR */
#define SLOT_A      4
#define SLOT_B      5

/* Products smaller than this many multiply-adds run on one thread: waking
 * a helper costs more than it saves. */
#define PARALLEL_MIN_FMAS (1L << 20)

typedef struct {
    const pt_gemm_kernel *k;
    int trans_a, trans_b, M, N, K, kc;
    float alpha, beta;
    const float *A, *B, *bias;
    int lda, ldb, ldc;
    float *C;
    const float *panels;   /* op(B) packed whole (pt_gemm_packed), or NULL */
    size_t panel_row;      /* the panels' floats per row of op(B): all their columns' */
    int parts, split_rows; /* the split of C: rows or columns, in whole tiles */
    int failed;
} gemm_job;

static int min_int(int a, int b) { return a < b ? a : b; }

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

/* Rows ahead that pack_rows fetches: any of 2 to 16 did as well */
#define PACK_AHEAD 4

/* n of X's values per p into panels `width` wide (zero past n) when X's
 * row p holds them side by side from x + p ldx (a transposed A, a
 * non-transposed B). Row by row across the panels, so X is read in order,
 * fetching the row PACK_AHEAD below: each row is a jump of ldx, often to
 * another page, where the hardware's prefetch starts again (these
 * operands are activations, often in memory by now). On the weight
 * gradient's product of GPT-small (384 x 1152 x 512) op(A) then packed
 * 1.3-2.1x as fast and op(B) 1.03-1.5x (packing timed inside the product,
 * in turn with and without). */
static void pack_rows(float *out, const float *x, long ldx, int kc, int n, int width)
{
    size_t panel = (size_t)width * kc;
    for (int p = 0; p < kc; p++) {
        const float *row = x + (size_t)p * ldx;
        float *dst = out + (size_t)p * width;
        for (int c = 0; p + PACK_AHEAD < kc && c < n; c += 16)
            __builtin_prefetch(row + (size_t)PACK_AHEAD * ldx + c);
        for (int c = 0; c < n; c += width, dst += panel) {
            int used = min_int(width, n - c);
            copy_floats(dst, row + c, used);
            for (int i = used; i < width; i++)
                dst[i] = 0.0f;
        }
    }
}

/* n of X's values per p into panels `width` wide (zero past n) when each
 * comes from a stream of its own, x + i ldx + p (a non-transposed A's rows,
 * a transposed B's). */
static void pack_streams(const pt_gemm_kernel *k, float *out, const float *x, long ldx, int kc,
                         int n, int width)
{
    static const float zeros[KC_MAX] = {0}; /* the streams past n */
    const float *src[MAX_PANEL];
    for (int c = 0; c < n; c += width, out += (size_t)width * kc) {
        for (int i = 0; i < width; i++)
            src[i] = c + i < n ? x + (size_t)(c + i) * ldx : zeros;
        if (k->interleave)
            k->interleave(out, src, kc, width);
        else
            interleave_panel(out, src, kc, width);
    }
}

/* op(A)'s rows i0 .. i0+m-1, columns p0 .. p0+kc-1, into panels of mr rows:
 * panel r holds, for each p, its mr rows' elements (zero past m). */
static void pack_a(const gemm_job *g, int i0, int m, int p0, int kc, float *out)
{
    if (g->trans_a) /* A is (K,M): op(A)[i][p] = A[p][i] */
        pack_rows(out, g->A + (size_t)p0 * g->lda + i0, g->lda, kc, m, g->k->mr);
    else
        pack_streams(g->k, out, g->A + (size_t)i0 * g->lda + p0, g->lda, kc, m, g->k->mr);
}

/* op(B)'s rows p0 .. p0+kc-1, columns j0 .. j0+n-1, into panels of nr
 * columns: panel c holds, for each p, its nr columns (zero past n). */
static void pack_b(const gemm_job *g, int p0, int kc, int j0, int n, float *out)
{
    if (!g->trans_b)
        pack_rows(out, g->B + (size_t)p0 * g->ldb + j0, g->ldb, kc, n, g->k->nr);
    else /* B is (N,K): op(B)[p][j] = B[j][p] */
        pack_streams(g->k, out, g->B + (size_t)j0 * g->ldb + p0, g->ldb, kc, n, g->k->nr);
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

/* N columns of the job's op(B) packed into the kept panels */
static void fill_kept(const gemm_job *g, pt_gemm_packed *kept, int N)
{
    size_t row = padded_cols(g->k, N);
    for (int pc = 0; pc < g->K; pc += g->kc)
        pack_b(g, pc, min_int(g->kc, g->K - pc), 0, N, kept->panels + row * (size_t)pc);
    pt_gemm_packed_fill(kept, g->k, g->B, g->trans_b, g->K, N, g->ldb, 0, refill_kept);
}

/* pt_gemm_packed's refill: the reading the last product packed */
static void refill_kept(pt_gemm_packed *kept)
{
    gemm_job g = {.k = kept->k,
                  .trans_b = kept->trans_b,
                  .K = kept->K,
                  .kc = depth_of(kept->K),
                  .B = kept->B,
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
        if (!pt_gemm_packed_holds(kept, g->k, g->B, g->trans_b, g->K, g->N, g->ldb))
            return NULL;
        g->panel_row = padded_cols(g->k, kept->N);
        return kept->panels;
    }
    int N = kept->cols > g->N ? kept->cols : g->N;
    if (pt_gemm_packed_floats(g->k, g->K, N) > kept->capacity)
        return NULL;
    g->panel_row = padded_cols(g->k, N);
    fill_kept(g, kept, N);
    return kept->panels;
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

/* C's rows m0 .. m1-1 and columns n0 .. n1-1 */
static void gemm_block(gemm_job *g, int m0, int m1, int n0, int n1)
{
    const pt_gemm_kernel *k = g->k;
    int mr = k->mr, nr = k->nr, kc = g->kc, mcb = MC / mr * mr;
    int nc = min_int(g->panels ? KEPT_NC_MAX : NC_MAX, ((n1 - n0) + nr - 1) / nr * nr);
    float *ap = pt_scratch(SLOT_A, sizeof(float) * (size_t)mcb * kc);
    float *bp = g->panels ? NULL : pt_scratch(SLOT_B, sizeof(float) * (size_t)nc * kc);
    if (!ap || (!bp && !g->panels)) {
        __atomic_store_n(&g->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    _Alignas(64) float edge[MAX_TILE];
    for (int jc = n0; jc < n1; jc += nc) {
        int nb = min_int(nc, n1 - jc), tiles = (nb + nr - 1) / nr;
        for (int pc = 0; pc < g->K; pc += kc) {
            int kb = min_int(kc, g->K - pc);
            /* the first block of K brings in beta and the bias, the others add */
            float beta = pc == 0 ? g->beta : 1.0f;
            const float *bias = pc == 0 && g->bias ? g->bias + jc : NULL;
            const float *bq = g->panels ? kept_panel(g, pc, kb, jc) : bp;
            if (!g->panels)
                pack_b(g, pc, kb, jc, nb, bp);
            for (int ic = m0; ic < m1; ic += mcb) {
                int mb = min_int(mcb, m1 - ic);
                /* whole panels of a non-transposed A are read in place
                 * (tile_rows), the rows left over are packed */
                int in_place = !g->trans_a && k->tile_rows ? mb / mr * mr : 0;
                if (in_place < mb)
                    pack_a(g, ic + in_place, mb - in_place, pc, kb, ap);
                for (int ir = 0; ir < mb; ir += mr) {
                    int rows = min_int(mr, mb - ir), direct = ir < in_place;
                    const float *a = direct ? g->A + (size_t)(ic + ir) * g->lda + pc
                                            : ap + (size_t)(ir - in_place) * kb;
                    next_panel next = next_of(ir + mr < in_place ? a + (size_t)mr * g->lda : NULL,
                                              g->lda, mr, kb, tiles);
                    for (int jr = 0; jr < nb; jr += nr) {
                        fetch_some(&next);
                        const float *b = bq + (size_t)jr * kb;
                        float *c = g->C + (size_t)(ic + ir) * g->ldc + jc + jr;
                        int cols = min_int(nr, nb - jr);
                        const float *bj = bias ? bias + jr : NULL;
                        /* a tile past M or N goes whole to edge, then its part in C */
                        int whole = rows == mr && cols == nr;
                        float *out = whole ? c : edge;
                        long ldo = whole ? g->ldc : nr;
                        if (direct)
                            k->tile_rows(kb, a, g->lda, b, out, ldo, whole ? g->alpha : 1.0f,
                                         whole ? beta : 0.0f, whole ? bj : NULL);
                        else
                            k->tile(kb, a, b, out, ldo, whole ? g->alpha : 1.0f,
                                    whole ? beta : 0.0f, whole ? bj : NULL);
                        if (!whole)
                            finish_edge(edge, nr, c, g->ldc, rows, cols, g->alpha, beta, bj);
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
 * 4-20% faster for it. With op(B)'s panels kept, rows pack only their
 * share of op(A), once. */
static int rows_pack_less(int M, int N, int K, int parts, int b_kept)
{
    double col_width = (double)N / parts, b = b_kept ? 0.0 : 1.0;
    double nc = b_kept ? KEPT_NC_MAX : NC_MAX;
    double rows = b * K * N + (double)M / parts * K * ceil((double)N / nc);
    double cols = b * K * col_width + (double)M * K * ceil(col_width / nc);
    return rows <= cols;
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
    gemm_job g = {.k = k,
                  .trans_a = trans_a,
                  .trans_b = trans_b,
                  .M = M,
                  .N = N,
                  .K = K,
                  .kc = depth_of(K),
                  .alpha = alpha,
                  .beta = beta,
                  .A = A,
                  .B = B,
                  .bias = bias,
                  .lda = lda,
                  .ldb = ldb,
                  .ldc = ldc,
                  .C = C,
                  .parts = 1,
                  .split_rows = 1};
    g.panels = use_kept(&g, packed_b);
    int row_tiles = (M + k->mr - 1) / k->mr, col_tiles = (N + k->nr - 1) / k->nr;
    if (threads > 1 && (long)M * N * K >= PARALLEL_MIN_FMAS && !pt_gemm_in_part()) {
        if (row_tiles >= threads && col_tiles >= threads)
            g.split_rows = rows_pack_less(M, N, K, threads, g.panels != NULL);
        else
            g.split_rows = row_tiles >= threads || row_tiles >= col_tiles;
        int tiles = g.split_rows ? row_tiles : col_tiles;
        g.parts = min_int(threads, tiles);
    }
    if (g.parts > 1)
        pt_gemm_parallel(g.parts, gemm_part, &g);
    else
        gemm_block(&g, 0, M, 0, N);
    return g.failed ? -1 : 0;
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
