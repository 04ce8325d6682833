/* gemm.c: the blocked fp32 product's driver (gemm.h): blocking, packing,
 * the edges, the split of C between threads, and the portable micro-kernel.
 *
 * Loops, outermost first: columns of C in blocks of NC (op(B)'s block of
 * KC x NC is packed once and stays in L2), K in blocks of KC, rows in blocks
 * of MC (packed), then one A panel (MR x KC, in L1) against every B panel of
 * the block. KC = K split into equal blocks of at most KC_MAX: a function of
 * K alone, which is what keeps every thread's and worker's sums the same.
 * A tile that runs past M or N is computed whole into a buffer (the packing
 * pads with zeros) and only its part inside C is finished, by the same
 * expression the micro-kernels use. Packing goes to the calling thread's
 * scratch slots (scratch.h). */
#include "tensor/gemm.h"

#include <string.h>

#include "tensor/scratch.h"

#define KC_MAX   384 /* an A panel of 12 x 384 floats is 18 KiB of L1 */
#define NC_MAX   1024
#define MC       192 /* a multiple of every MR */
#define MAX_TILE (12 * 32)
#define SLOT_A   4
#define SLOT_B   5

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
    int parts, split_rows; /* the split of C: rows or columns, in whole tiles */
    int failed;
} gemm_job;

static int min_int(int a, int b) { return a < b ? a : b; }

/* op(A)'s rows i0 .. i0+m-1, columns p0 .. p0+kc-1, into panels of mr rows:
 * panel r holds, for each p, its mr rows' elements (zero past m). Each p's
 * elements are written together: a row of A when A is transposed, one
 * element of each of mr rows (mr streams along the rows) when not. */
static void pack_a(const gemm_job *g, int i0, int m, int p0, int kc, float *out)
{
    int mr = g->k->mr;
    for (int r = 0; r < m; r += mr, out += (size_t)mr * kc) {
        int rows = min_int(mr, m - r);
        for (int p = 0; p < kc; p++) {
            float *dst = out + (size_t)p * mr;
            if (g->trans_a) /* A is (K,M): op(A)[i][p] = A[p][i] */
                memcpy(dst, g->A + (size_t)(p0 + p) * g->lda + i0 + r, sizeof(float) * rows);
            else
                for (int i = 0; i < rows; i++)
                    dst[i] = g->A[(size_t)(i0 + r + i) * g->lda + p0 + p];
            for (int i = rows; i < mr; i++)
                dst[i] = 0.0f;
        }
    }
}

/* op(B)'s rows p0 .. p0+kc-1, columns j0 .. j0+n-1, into panels of nr
 * columns: panel c holds, for each p, its nr columns (zero past n), written
 * as pack_a writes A's. */
static void pack_b(const gemm_job *g, int p0, int kc, int j0, int n, float *out)
{
    int nr = g->k->nr;
    for (int c = 0; c < n; c += nr, out += (size_t)nr * kc) {
        int cols = min_int(nr, n - c);
        for (int p = 0; p < kc; p++) {
            float *dst = out + (size_t)p * nr;
            if (!g->trans_b)
                memcpy(dst, g->B + (size_t)(p0 + p) * g->ldb + j0 + c, sizeof(float) * cols);
            else /* B is (N,K): op(B)[p][j] = B[j][p] */
                for (int j = 0; j < cols; j++)
                    dst[j] = g->B[(size_t)(j0 + c + j) * g->ldb + p0 + p];
            for (int j = cols; j < nr; j++)
                dst[j] = 0.0f;
        }
    }
}

/* the part of a tile inside C, from its sums: the micro-kernels' finish */
static void finish_edge(const float *acc, int nr, float *c, long ldc, int rows, int cols,
                        float alpha, float beta, const float *bias)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            float v = alpha * acc[i * nr + j];
            if (beta != 0.0f)
                v = v + beta * c[i * ldc + j];
            if (bias)
                v = v + bias[j];
            c[i * ldc + j] = v;
        }
}

/* C's rows m0 .. m1-1 and columns n0 .. n1-1 */
static void gemm_block(gemm_job *g, int m0, int m1, int n0, int n1)
{
    const pt_gemm_kernel *k = g->k;
    int mr = k->mr, nr = k->nr, kc = g->kc, mcb = MC / mr * mr;
    int nc = min_int(NC_MAX, ((n1 - n0) + nr - 1) / nr * nr);
    float *ap = pt_scratch(SLOT_A, sizeof(float) * (size_t)mcb * kc);
    float *bp = pt_scratch(SLOT_B, sizeof(float) * (size_t)nc * kc);
    if (!ap || !bp) {
        __atomic_store_n(&g->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    _Alignas(64) float edge[MAX_TILE];
    for (int jc = n0; jc < n1; jc += nc) {
        int nb = min_int(nc, n1 - jc);
        for (int pc = 0; pc < g->K; pc += kc) {
            int kb = min_int(kc, g->K - pc);
            /* the first block of K brings in beta and the bias, the others add */
            float beta = pc == 0 ? g->beta : 1.0f;
            const float *bias = pc == 0 && g->bias ? g->bias + jc : NULL;
            pack_b(g, pc, kb, jc, nb, bp);
            for (int ic = m0; ic < m1; ic += mcb) {
                int mb = min_int(mcb, m1 - ic);
                pack_a(g, ic, mb, pc, kb, ap);
                for (int ir = 0; ir < mb; ir += mr) {
                    const float *a = ap + (size_t)ir * kb;
                    int rows = min_int(mr, mb - ir);
                    for (int jr = 0; jr < nb; jr += nr) {
                        const float *b = bp + (size_t)jr * kb;
                        float *c = g->C + (size_t)(ic + ir) * g->ldc + jc + jr;
                        int cols = min_int(nr, nb - jr);
                        const float *bj = bias ? bias + jr : NULL;
                        if (rows == mr && cols == nr) {
                            k->tile(kb, a, b, c, g->ldc, g->alpha, beta, bj);
                        } else {
                            k->tile(kb, a, b, edge, nr, 1.0f, 0.0f, NULL);
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

int pt_gemm(const pt_gemm_kernel *k, int threads, int trans_a, int trans_b, int M, int N, int K,
            float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
            int ldc, const float *bias)
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
    int kblocks = (K + KC_MAX - 1) / KC_MAX;
    gemm_job g = {.k = k,
                  .trans_a = trans_a,
                  .trans_b = trans_b,
                  .M = M,
                  .N = N,
                  .K = K,
                  .kc = (K + kblocks - 1) / kblocks,
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
    int row_tiles = (M + k->mr - 1) / k->mr, col_tiles = (N + k->nr - 1) / k->nr;
    if (threads > 1 && (long)M * N * K >= PARALLEL_MIN_FMAS) {
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

static const pt_gemm_kernel generic = {"generic", GEN_MR, GEN_NR, tile_generic};

const pt_gemm_kernel *pt_gemm_generic(void) { return &generic; }
