/* gemm.h: pipetrain's own fp32 product, behind the kernel seam's matmul
 * (kernels_cpu.c) and, reading its operands as bf16, bf16's portable
 * product (pt_gemm_bf16, kernels_bf16.c).
 *
 * GotoBLAS's and BLIS's design: op(B) is packed in blocks of KC rows by NC
 * columns (in panels NR wide, zero-padded), op(A) in blocks of MC rows (in
 * panels MR tall), and a register-blocked micro-kernel multiplies one A
 * panel by one B panel into an MR x NR tile of C held in registers. The
 * micro-kernels are written per instruction set, each compiled for it alone
 * (a target attribute per function), so one binary runs on every x86-64
 * and takes the widest the CPU has:
 *   avx512   MR 12 x NR 32 (24 zmm sums), gemm_avx512.c;
 *   avx2     MR 6 x NR 16 (12 ymm sums, FMA3), gemm_avx2.c;
 *   generic  MR 4 x NR 16 in plain C, on any CPU, gemm.c.
 * Every element of C is one chain of multiply-adds along K in order, its
 * blocks of K fixed by K alone, so what a product stores depends on the
 * shapes and the micro-kernel, never on how the tiles of C were shared out:
 * threads (gemm_pool.c) split C, never K, and a pipelined run stores what a
 * sequential one does. */
#ifndef PT_TENSOR_GEMM_H
#define PT_TENSOR_GEMM_H

#include <stddef.h>

/* One tile: acc (MR,NR) = sum over kc of a (kc,MR) x b (kc,NR), both packed
 * k-major; then each element of c (ldc between rows) becomes
 * (alpha acc + beta c) + bias[j], in that order and unfused; beta == 0
 * leaves c unread and bias may be NULL. */
typedef void pt_gemm_tile_fn(int kc, const float *a, const float *b, float *c, long ldc,
                             float alpha, float beta, const float *bias);

/* Packing's interleave: out[p][i] = src[i][p] for p < kc, i < width. */
typedef void pt_gemm_interleave_fn(float *out, const float *const *src, int kc, int width);

/* The same tile with op(A) not packed: its MR rows read where they are,
 * row i's element p at a[i lda + p] (a non-transposed A). The sums are
 * the packed tile's, in the same order, so it stores the same bits. */
typedef void pt_gemm_tile_rows_fn(int kc, const float *a, long lda, const float *b, float *c,
                                  long ldc, float alpha, float beta, const float *bias);

typedef struct {
    const char *name; /* "avx512", "avx2", "generic" */
    int mr, nr;
    pt_gemm_tile_fn *tile;
    pt_gemm_tile_rows_fn *tile_rows;   /* NULL: op(A) is always packed */
    pt_gemm_interleave_fn *interleave; /* NULL: gemm.c's portable loop */
} pt_gemm_kernel;

/* The micro-kernels; NULL where this CPU (or the operating system's saving
 * of its registers) cannot run it. */
const pt_gemm_kernel *pt_gemm_avx512(void);
const pt_gemm_kernel *pt_gemm_avx2(void);
const pt_gemm_kernel *pt_gemm_generic(void);

/* The micro-kernel of the fp32 products in use (pt_fp32_set_kernel,
 * kernels_cpu.c); NULL where they are OpenBLAS's. */
const pt_gemm_kernel *pt_fp32_gemm(void);

/* The interleave on AVX2 registers (gemm_avx2.c), which the AVX2 and
 * AVX-512 kernels pack with: x86-64 only, and only where the CPU has AVX2. */
pt_gemm_interleave_fn pt_gemm_interleave_avx2;

/* A weight's op(B) packed whole, kept between products while the weight
 * is unchanged: a training step multiplies each weight once per
 * micro-batch in each direction, and packing it every time cost about a
 * tenth of a step. The owner gives the room (pt_gemm_packed_floats of the
 * shape it will be read as) and clears `filled` whenever the weight
 * changes; the first product after that packs the panels (`cols` columns
 * of op(B) where that is more than its own N), and every product that
 * reads the same B the same way (transpose, K, stride) and at most as many
 * columns reads them instead of packing: a prefix of the columns is a
 * prefix of each block's panels (attention's bands read longer and longer
 * prefixes of one head's keys). A product that reads it another way packs
 * as if there were none, and so does one inside a part of
 * pt_gemm_parallel unless the panels are that part's own (`local`: shared
 * ones could be packed by two parts at once). Packing only copies, so a
 * product stores the same bits either way.
 * The owner may also pack them again itself once the weight has changed
 * (pt_gemm_packed_refill), in the reading the last product left. */
typedef struct pt_gemm_packed {
    float *panels;   /* for each block of K: every panel of nr columns */
    size_t capacity; /* floats */
    int cols;        /* columns to pack when they are filled (fewer: the product's own N) */
    int local;       /* only the calling thread reads them: usable inside a part */
    /* what the panels hold when filled, and held when last filled */
    const pt_gemm_kernel *k;
    const float *B; /* its elements of type dt (kernels.h's pt_elem_type), or
                     * for gemm.c's products read as dt (pt_gemm_reading) */
    int trans_b, K, N, ldb, dt, filled;
    /* packs that reading of B into the panels again (set by the kernel
     * that filled them last; NULL: never filled) */
    void (*refill)(struct pt_gemm_packed *kept);
} pt_gemm_packed;

/* 1 while the calling thread runs a part of pt_gemm_parallel (below) */
int pt_gemm_in_part(void);

/* Whether a product may read kept panels at all: there are some, and a
 * part of pt_gemm_parallel reads only its own (`local`) ones */
static inline int pt_gemm_packed_usable(const pt_gemm_packed *kept)
{
    return kept && kept->panels && (!pt_gemm_in_part() || kept->local);
}

/* Whether filled panels hold this reading of B (elements of type dt) in
 * `layout` (the kernel that packed them), with at least N columns */
static inline int pt_gemm_packed_holds(const pt_gemm_packed *kept, const pt_gemm_kernel *layout,
                                       const float *B, int dt, int trans_b, int K, int N, int ldb)
{
    return kept->filled && kept->k == layout && kept->B == B && kept->dt == dt &&
           kept->trans_b == trans_b && kept->K == K && kept->N >= N && kept->ldb == ldb;
}

/* Marks the panels filled with this reading of B (elements of type dt), N
 * columns of it, which `refill` packs again */
static inline void pt_gemm_packed_fill(pt_gemm_packed *kept, const pt_gemm_kernel *layout,
                                       const float *B, int trans_b, int K, int N, int ldb, int dt,
                                       void (*refill)(pt_gemm_packed *))
{
    kept->k = layout, kept->B = B, kept->trans_b = trans_b;
    kept->K = K, kept->N = N, kept->ldb = ldb, kept->dt = dt, kept->filled = 1;
    kept->refill = refill;
}

/* Stale panels packed again now, from B as it is now, in the reading the
 * last product left (its columns, transpose and stride), so that the next
 * product reads them instead of packing. A pipeline's worker calls it for
 * its stage's weights while it first waits in a step (executor.c), where
 * left to the first products of a step each stage's packing lay on the
 * pipeline's path, one stage after another. B must still be where it was.
 * Returns whether the panels are filled now. */
static inline int pt_gemm_packed_refill(pt_gemm_packed *kept)
{
    if (kept && kept->panels && !kept->filled && kept->refill)
        kept->refill(kept);
    return kept && kept->filled;
}

/* floats of a whole op(B) of K x N packed for kernel k */
size_t pt_gemm_packed_floats(const pt_gemm_kernel *k, int K, int N);

/* C (M,N) = alpha op(A) op(B) + beta C (+ bias (N) on every row), row-major
 * float matrices with leading dimensions lda, ldb, ldc; op transposes when
 * trans_* != 0. The calling thread and threads - 1 helpers of its own
 * share the tiles of C. packed_b, when not NULL, keeps op(B)'s panels
 * (above). Returns 0, or -1 when the packing buffers could not be
 * allocated (C is then partly written). */
int pt_gemm(const pt_gemm_kernel *k, int threads, int trans_a, int trans_b, int M, int N, int K,
            float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
            int ldc, const float *bias, pt_gemm_packed *packed_b);

/* The bytes of L2 cache that the products size their blocks of op(B) for
 * (half of it a block); 0, the default, takes the CPU's own figure. For
 * benches and tests that compare blockings: what a product stores does not
 * depend on it. */
void pt_gemm_set_l2_bytes(long bytes);

/* How the packing reads an operand's elements: floats as they are, or as
 * bf16 values widened exactly to float, stored as bf16 or as floats that
 * it rounds to nearest even (bf16.h's pt_bf16_round). The first two are
 * kernels.h's PT_F32 and PT_BF16. */
typedef enum { PT_GEMM_FLOATS = 0, PT_GEMM_BF16 = 1, PT_GEMM_ROUNDED = 2 } pt_gemm_reading;

/* bf16's portable product on this blocked product (matmul_bf16.h): A and
 * B read as a_read and b_read say (bf16 values: never PT_GEMM_FLOATS), the
 * tiles forming each element's float sum of them as pt_gemm would with
 * alpha 1, beta 0 and no bias on those values widened beforehand (the same
 * tiles, blocks of K and order: the same bits), each element of C then
 * finished once as (alpha sum + beta C) + bias, and rounded to bf16 where
 * c_bf16 (C's elements are bf16; else float). Threads, kept panels (a
 * weight's bf16 values, widened) and the return value as pt_gemm's. */
int pt_gemm_bf16(const pt_gemm_kernel *k, int threads, int trans_a, int trans_b, int M, int N,
                 int K, float alpha, const void *A, pt_gemm_reading a_read, int lda, const void *B,
                 pt_gemm_reading b_read, int ldb, float beta, void *C, int c_bf16, int ldc,
                 const float *bias, pt_gemm_packed *packed_b);

/* Runs part(arg, i) for i in 0 .. n-1: part 0 on the calling thread, the
 * others on helpers the calling thread keeps (started on first use, they
 * spin a little after each job and then sleep; they end with it). Returns
 * when every part has. Helpers that cannot be started leave their parts to
 * the calling thread; called inside a part, it runs the parts itself. */
void pt_gemm_parallel(int n, void (*part)(void *arg, int i), void *arg);

/* How many parts of the calling thread's jobs its helpers have run since
 * they started: how a test sees that a product or pass was shared */
long pt_gemm_parts_helped(void);

/* A part lent to a thread that waits (gemm_pool.c): a pipeline worker on
 * threads whose core would idle in a bubble takes a part of another
 * worker's product or pass while it waits for a message. The parts are
 * the ones the products and passes cut anyway, so nothing stored changes.
 *   pt_gemm_set_lending  the calling thread lends (a pipeline's worker);
 *   pt_gemm_spare        1 when it lends and a thread waits to take a part
 *                        now: its products and passes count one thread more;
 *   pt_gemm_wait_begin / _end  around a wait that takes parts, in which
 *   pt_gemm_help         runs the part on offer, if any (1 when it ran one);
 *   pt_gemm_parts_lent   parts waiting threads have run in this process. */
void pt_gemm_set_lending(int on);
int pt_gemm_spare(void);
void pt_gemm_wait_begin(void);
int pt_gemm_help(void);
void pt_gemm_wait_end(void);
long pt_gemm_parts_lent(void);

/* Runs run(arg, lo, hi) over [0, n) cut into contiguous ranges, at most
 * `threads` of them (pt_gemm_parallel's parts), each at least `least`
 * items long and starting at a multiple of `align` (least, align >= 1);
 * one range, on the calling thread, where n is too short to cut. */
void pt_parallel_ranges(int threads, size_t n, size_t least, size_t align,
                        void (*run)(void *arg, size_t lo, size_t hi), void *arg);

#endif
