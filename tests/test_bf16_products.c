/* test_bf16_products: every bf16 product kernel this CPU runs (amx,
 * avx512bf16) stores what the portable one stores, and the kernel is chosen
 * as documented.
 * - Exact sums: operands are small integers, so every product and every
 *   partial sum is exact in float whatever the order of the sums; then each
 *   kernel's C must equal the portable one's bit for bit, for every mix of
 *   float and bf16 operands and C, transposed or not, with alpha, beta and
 *   a bias, at shapes from 1 x 1 x 1 to past the kernels' blocks (K past a K
 *   block, N past a column block, M and N off the tile sizes, K odd, K 0).
 *   Sums such as 257 lie halfway between two bf16: the rounding of ties is
 *   checked too. Elements past N in C's rows are left untouched.
 * - Random operands: each element within what the order of float sums can
 *   move it (2 K 2^-24 sum |a b|, plus one bf16 step when C is bf16).
 * - A weight's tiles kept between products (where the kernel keeps them):
 *   the same bits as without, read while filled, and packed again by their
 *   owner's refill from B as it then is.
 * - A NaN in a row of A makes that row of C NaN (the step's non-finite check
 *   relies on it).
 * - Sums plus a bias that land on a float denormal round to the denormal's
 *   bf16 as the portable kernel rounds it (an instruction that takes
 *   denormals as zero must not round them).
 * - A product shared between a worker's threads (pt_blas_set_threads) is
 *   shared (its helpers run parts) and stores the same bits on 2, 3 and 5
 *   threads as on one.
 * - pt_bf16_set_kernel: each kernel by name where this CPU runs it (and
 *   pt_bf16_kernel() says so), refused with PT_EUNSUPPORTED naming what is
 *   missing where not; "auto" takes amx where the CPU runs it, else portable
 *   this CPU runs; an unknown name is PT_EINVAL naming it.
 * - The portable product is its definition, bit for bit: operands rounded
 *   to bf16 and widened, multiplied by the fp32 product in use (each of
 *   pipetrain's blocked products this CPU runs, and OpenBLAS's), each
 *   element finished as pt_matmul_finish does, also with op(B)'s columns
 *   in several blocks while its sums carry between blocks of K; with a
 *   weight's panels kept and on 2, 3 and 5 threads it stores the same
 *   bits.
 * A kernel this CPU lacks is skipped with a line saying so. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "tensor/bf16.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"
#include "tensor/matmul_bf16.h"
#include "tensor/rng.h"

#include "check.h"

typedef struct {
    int M, N, K;
} dims;

/* off the tile sizes (12 x 32, 32 x 32), K odd and 0, K past a block of
 * 384, N past a block of 1024 columns */
static const dims shapes[] = {{1, 1, 1},    {1, 1, 0},    {3, 5, 7},     {12, 32, 2},
                              {13, 33, 3},  {31, 17, 64}, {40, 70, 385}, {25, 47, 800},
                              {7, 1100, 9}, {64, 64, 33}};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };

/* A product's operands and C, stored in the types and layout of one case */
typedef struct {
    int ta, tb;
    pt_elem_type da, db, dc;
    int lda, ldb, ldc;
    void *A, *B, *C;
    float *bias;
} operands;

static float value(pt_rng *r, int exact)
{
    if (exact) /* -8 .. 8: products and sums of up to 2^17 of them are exact */
        return (float)((int)pt_rng_below(r, 17) - 8);
    float x;
    pt_rng_fill_normal(r, &x, 1, 1.0f);
    return x;
}

static void *typed(const float *x, size_t n, pt_elem_type t)
{
    void *p = malloc(n * pt_elem_size(t) + 1);
    if (t == PT_BF16)
        pt_bf16_from_floats(p, x, n);
    else
        memcpy(p, x, n * sizeof(float));
    return p;
}

static float read_at(const void *p, size_t i, pt_elem_type t)
{
    return t == PT_BF16 ? pt_bf16_widen(((const pt_bf16 *)p)[i]) : ((const float *)p)[i];
}

/* The stored A, B, C (C's rows padded by 3 elements), from one stream. */
static void make(operands *o, dims d, int code, int exact, uint64_t seed)
{
    o->ta = code & 1, o->tb = code >> 1 & 1;
    o->da = code >> 2 & 1, o->db = code >> 3 & 1, o->dc = code >> 4 & 1;
    int ar = o->ta ? d.K : d.M, ac = o->ta ? d.M : d.K;
    int br = o->tb ? d.N : d.K, bc = o->tb ? d.K : d.N;
    o->lda = ac + 1, o->ldb = bc + 2, o->ldc = d.N + 3;
    size_t na = (size_t)ar * o->lda, nb = (size_t)br * o->ldb, nc = (size_t)d.M * o->ldc;
    float *fa = malloc(sizeof(float) * (na + 1)), *fb = malloc(sizeof(float) * (nb + 1));
    float *fc = malloc(sizeof(float) * (nc + 1));
    o->bias = malloc(sizeof(float) * (d.N + 1));
    pt_rng r;
    pt_rng_seed(&r, seed);
    for (size_t i = 0; i < na; i++)
        fa[i] = value(&r, exact);
    for (size_t i = 0; i < nb; i++)
        fb[i] = value(&r, exact);
    for (size_t i = 0; i < nc; i++)
        fc[i] = value(&r, exact);
    for (int j = 0; j < d.N; j++)
        o->bias[j] = value(&r, 0);
    o->A = typed(fa, na, o->da), o->B = typed(fb, nb, o->db), o->C = typed(fc, nc, o->dc);
    free(fa), free(fb), free(fc);
}

static void release(operands *o) { free(o->A), free(o->B), free(o->C), free(o->bias); }

static void multiply(const pt_kernels *k, operands *o, dims d, float alpha, float beta, int bias)
{
    k->matmul(o->ta, o->tb, d.M, d.N, d.K, alpha, pt_mat_of(o->A, o->lda, o->da),
              pt_mat_of(o->B, o->ldb, o->db), beta, pt_mat_of(o->C, o->ldc, o->dc),
              bias ? o->bias : NULL);
}

/* sum over k of |op(A)(i,k) op(B)(k,j)|, as the operands are read (bf16) */
static double abs_sum(const operands *o, int i, int j, int K)
{
    double s = 0;
    for (int k = 0; k < K; k++) {
        size_t a = o->ta ? (size_t)k * o->lda + i : (size_t)i * o->lda + k;
        size_t b = o->tb ? (size_t)j * o->ldb + k : (size_t)k * o->ldb + j;
        s += fabs(pt_bf16_rounded(read_at(o->A, a, o->da)) *
                  (double)pt_bf16_rounded(read_at(o->B, b, o->db)));
    }
    return s;
}

static const char *case_name(const operands *o, char *buf, size_t n)
{
    snprintf(buf, n, "op(A)%s %s, op(B)%s %s, C %s", o->ta ? "^T" : "",
             o->da == PT_BF16 ? "bf16" : "float", o->tb ? "^T" : "",
             o->db == PT_BF16 ? "bf16" : "float", o->dc == PT_BF16 ? "bf16" : "float");
    return buf;
}

/* Kernel k against portable on every case of one shape. */
static void compare(const pt_kernels *k, dims d, int exact)
{
    for (int code = 0; code < 32; code++) {
        float alpha = code & 1 ? 1.0f : 0.75f, beta = code & 2 ? 0.0f : 0.5f;
        int bias = code >> 2 & 1;
        operands p, q;
        uint64_t seed = (uint64_t)code * 1000 + (uint64_t)d.M * 7 + (uint64_t)d.K;
        make(&p, d, code, exact, seed);
        make(&q, d, code, exact, seed);
        multiply(pt_kernels_bf16_portable(), &p, d, alpha, beta, bias);
        multiply(k, &q, d, alpha, beta, bias);
        char name[96];
        case_name(&p, name, sizeof name);
        int bad = 0;
        for (int i = 0; i < d.M && !bad; i++)
            for (int j = 0; j < p.ldc && !bad; j++) {
                size_t at = (size_t)i * p.ldc + j;
                float want = read_at(p.C, at, p.dc), got = read_at(q.C, at, q.dc);
                int same = p.dc == PT_BF16
                               ? ((pt_bf16 *)p.C)[at] == ((pt_bf16 *)q.C)[at]
                               : memcmp((float *)p.C + at, (float *)q.C + at, sizeof(float)) == 0;
                if (exact || j >= d.N) {
                    bad = !same;
                } else {
                    double room =
                        2.0 * d.K * ldexp(1.0, -24) * fabs(alpha) * abs_sum(&p, i, j, d.K);
                    if (p.dc == PT_BF16)
                        room += fabs(want) / 128 + 1e-30;
                    bad = !(fabs((double)got - want) <= room);
                }
                CHECK(!bad,
                      "%s %d x %d x %d (%s, alpha %g beta %g%s): C[%d][%d] %.9g, portable "
                      "%.9g%s",
                      k->products, d.M, d.N, d.K, name, alpha, beta, bias ? ", bias" : "", i, j,
                      got, want, j >= d.N ? " (past N: must be untouched)" : "");
            }
        release(&p), release(&q);
    }
}

/* The portable product against its definition, for every case of one
 * shape, bit for bit: A and B rounded to bf16 and widened into floats as
 * they are stored, multiplied by the fp32 product in use, read the same
 * way round, with alpha 1 and beta 0 (the same blocked sums, whether the
 * portable product widens in its packing or first; OpenBLAS may sum a
 * transposed operand in another order than its copy laid out as op(A),
 * so the definition reads them as the call does), then each element
 * finished as matmul_bf16.h's pt_matmul_finish does. */
static void portable_is_defined(dims d)
{
    for (int code = 0; code < 32; code++) {
        float alpha = code & 1 ? 1.0f : 0.75f, beta = code & 2 ? 0.0f : 0.5f;
        int bias = code >> 2 & 1;
        operands p, q;
        uint64_t seed = (uint64_t)code * 1000 + (uint64_t)d.M * 7 + (uint64_t)d.K + 3;
        make(&p, d, code, 0, seed);
        make(&q, d, code, 0, seed);
        multiply(pt_kernels_bf16_portable(), &p, d, alpha, beta, bias);
        int ar = q.ta ? d.K : d.M, ac = q.ta ? d.M : d.K; /* A and B as stored */
        int br = q.tb ? d.N : d.K, bc = q.tb ? d.K : d.N;
        float *a = malloc(sizeof(float) * ((size_t)ar * ac + 1)),
              *b = malloc(sizeof(float) * ((size_t)br * bc + 1)),
              *sum = malloc(sizeof(float) * ((size_t)d.M * d.N + 1));
        for (int r = 0; r < ar; r++)
            for (int c = 0; c < ac; c++)
                a[(size_t)r * ac + c] = pt_bf16_rounded(read_at(q.A, (size_t)r * q.lda + c, q.da));
        for (int r = 0; r < br; r++)
            for (int c = 0; c < bc; c++)
                b[(size_t)r * bc + c] = pt_bf16_rounded(read_at(q.B, (size_t)r * q.ldb + c, q.db));
        pt_kernels_cpu()->matmul(q.ta, q.tb, d.M, d.N, d.K, 1.0f, pt_mat_of(a, ac, PT_F32),
                                 pt_mat_of(b, bc, PT_F32), 0.0f, pt_mat_of(sum, d.N, PT_F32), NULL);
        pt_mat C = pt_mat_of(q.C, q.ldc, q.dc);
        for (int i = 0; i < d.M; i++)
            for (int j = 0; j < d.N; j++)
                pt_matmul_finish(C, i, j, sum[(size_t)i * d.N + j], alpha, beta,
                                 bias ? q.bias : NULL);
        char name[96];
        case_name(&p, name, sizeof name);
        CHECK(!memcmp(p.C, q.C, (size_t)d.M * p.ldc * pt_elem_size(p.dc)),
              "portable on %s, %d x %d x %d (%s, alpha %g beta %g%s): not the bits of its "
              "definition",
              pt_fp32_kernel(), d.M, d.N, d.K, name, alpha, beta, bias ? ", bias" : "");
        free(a), free(b), free(sum);
        release(&p), release(&q);
    }
}

/* A NaN in row 1 of A: that row of C is NaN, the others finite. */
static void nan_row(const pt_kernels *k)
{
    dims d = {3, 40, 50};
    operands o;
    make(&o, d, 1 << 4, 0, 9); /* A and B float, C bf16 */
    ((float *)o.A)[1 * o.lda + 17] = NAN;
    multiply(k, &o, d, 1.0f, 0.0f, 1);
    for (int i = 0; i < d.M; i++)
        for (int j = 0; j < d.N; j++) {
            float c = read_at(o.C, (size_t)i * o.ldc + j, o.dc);
            CHECK(i == 1 ? isnan(c) : isfinite(c), "%s: a NaN in row 1 of A gives C[%d][%d] = %g",
                  k->products, i, j, c);
        }
    release(&o);
}

/* Sums plus a bias that land on a float denormal, in a bf16 C from alpha 1
 * and beta 0 (where a kernel may round 32 at a time by VCVTNE2PS2BF16,
 * which takes a denormal as zero): C as the portable kernel stores it, the
 * denormal's bf16 included; and the same product with no bias. Every
 * operand and sum is exact: 2^-63 2^-62 = 2^-125 (normal), and a bias of
 * -1.5 2^-126 takes it to 2^-127; rows 3 mod 4 sum to 0, so the bias
 * alone is left. */
static void denormal_sums(const pt_kernels *k)
{
    dims d = {64, 64, 40};
    int code = 1 << 4 | 1 << 3 | 1 << 2; /* bf16 A, B and C, neither transposed */
    for (int bias = 0; bias < 2; bias++) {
        operands p, q;
        make(&p, d, code, 1, 5);
        make(&q, d, code, 1, 5);
        for (operands *o = &p; o; o = o == &p ? &q : NULL) {
            memset(o->A, 0, sizeof(pt_bf16) * (size_t)d.M * o->lda);
            memset(o->B, 0, sizeof(pt_bf16) * (size_t)d.K * o->ldb);
            for (int i = 0; i < d.M; i++)
                ((pt_bf16 *)o->A)[(size_t)i * o->lda + 7] =
                    pt_bf16_round(i % 4 == 3 ? 0.0f : ldexpf(1.0f, -63));
            for (int j = 0; j < d.N; j++) {
                ((pt_bf16 *)o->B)[(size_t)7 * o->ldb + j] = pt_bf16_round(ldexpf(1.0f, -62));
                o->bias[j] = j % 3 ? -1.5f * ldexpf(1.0f, -126) : 0.0f;
            }
        }
        multiply(pt_kernels_bf16_portable(), &p, d, 1.0f, 0.0f, bias);
        multiply(k, &q, d, 1.0f, 0.0f, bias);
        pt_bf16 denormal = pt_bf16_round(ldexpf(1.0f, -127));
        CHECK(!bias || ((pt_bf16 *)p.C)[1] == denormal,
              "portable: 2^-125 - 1.5 2^-126 stored as %#x, not %#x", ((pt_bf16 *)p.C)[1],
              denormal);
        for (int i = 0; i < d.M; i++)
            for (int j = 0; j < d.N; j++) {
                size_t at = (size_t)i * p.ldc + j;
                pt_bf16 want = ((pt_bf16 *)p.C)[at], got = ((pt_bf16 *)q.C)[at];
                CHECK(got == want, "%s, %s: C[%d][%d] %#x, portable %#x", k->products,
                      bias ? "a bias making denormals" : "tiny sums, no bias", i, j, got, want);
            }
        release(&p), release(&q);
    }
}

/* A product large enough to be shared between a worker's threads stores
 * the same bits on 2, 3 and 5 threads as on one, cut by rows of C (M
 * larger) or by columns (N larger; AVX512_BF16 cuts rows always), K in one
 * block or, past 384, in several whose sums carry, in every case of
 * operands. */
static void threads_keep_bits(const pt_kernels *k)
{
    static const dims big[] = {{96, 200, 160}, {200, 64, 330}, {60, 70, 800}};
    static const int threads[] = {2, 3, 5};
    for (int s = 0; s < 3; s++)
        for (int code = 0; code < 32; code++) {
            dims d = big[s];
            float alpha = code & 1 ? 1.0f : 0.75f, beta = code & 2 ? 0.0f : 0.5f;
            operands one;
            make(&one, d, code, 0, 77 + (uint64_t)code);
            multiply(k, &one, d, alpha, beta, code >> 2 & 1);
            size_t bytes = (size_t)d.M * one.ldc * pt_elem_size(one.dc);
            for (int t = 0; t < 3; t++) {
                operands many;
                make(&many, d, code, 0, 77 + (uint64_t)code);
                pt_blas_set_threads(threads[t]);
                long helped = pt_gemm_parts_helped();
                multiply(k, &many, d, alpha, beta, code >> 2 & 1);
                helped = pt_gemm_parts_helped() - helped;
                pt_blas_set_threads(1);
                char name[96];
                CHECK(helped > 0, "%s %d x %d x %d (%s): %d threads, no part ran on a helper",
                      k->products, d.M, d.N, d.K, case_name(&one, name, sizeof name), threads[t]);
                CHECK(!memcmp(one.C, many.C, bytes), "%s %d x %d x %d (%s): %d threads change C",
                      k->products, d.M, d.N, d.K, case_name(&one, name, sizeof name), threads[t]);
                release(&many);
            }
            release(&one);
        }
}

/* o's B negated where it lies (exactly: a sign flip), so C = A op(B)
 * negates too */
static void negate_b(operands *o, dims d)
{
    size_t n = (size_t)(o->tb ? d.N : d.K) * o->ldb;
    for (size_t i = 0; i < n; i++)
        if (o->db == PT_BF16)
            ((pt_bf16 *)o->B)[i] ^= 0x8000;
        else
            ((float *)o->B)[i] = -((float *)o->B)[i];
}

/* C = A op(B), op(B)'s tiles kept in pair[tb] (NULL: none), into out */
static void product_kept(const pt_kernels *k, operands *o, dims d, pt_gemm_packed *pair, float *out)
{
    pt_mat B = pt_mat_of(o->B, o->ldb, o->db);
    B.packed = pair;
    k->matmul(o->ta, o->tb, d.M, d.N, d.K, 1.0f, pt_mat_of(o->A, o->lda, o->da), B, 0.0f,
              pt_mat_of(o->C, o->ldc, o->dc), NULL);
    memcpy(out, o->C, sizeof(float) * (size_t)d.M * o->ldc);
}

/* A weight's tiles kept between products (gemm.h's pt_gemm_packed), for
 * either reading of a bf16 or float B: a product that fills them and one
 * that reads them store what a product without them stores; B changed
 * behind them, they are what is read; emptied and packed again by their
 * owner (pt_gemm_packed_refill), the next product reads the new B's tiles
 * without packing (B changed again behind them is not seen). */
static void kept_tiles(const pt_kernels *k)
{
    static const dims shapes2[] = {{40, 70, 385}, {64, 33, 96}};
    for (int s = 0; s < 2; s++)
        for (int code = 0; code < 4; code++) {
            dims d = shapes2[s];
            operands o;
            make(&o, d, (code & 1) << 1 | 1 << 2 | (code >> 1) << 3, 0, 91 + (uint64_t)code);
            size_t floats = k->packed_floats(d.K, d.N), nc = (size_t)d.M * o.ldc;
            float *room = malloc(sizeof(float) * floats), *want = malloc(sizeof(float) * nc),
                  *got = malloc(sizeof(float) * nc), *negated = malloc(sizeof(float) * nc);
            if (!room || !want || !got || !negated) {
                fprintf(stderr, "out of memory\n");
                exit(1);
            }
            pt_gemm_packed pair[2] = {{.panels = room, .capacity = floats},
                                      {.panels = room, .capacity = floats}};
            pt_gemm_packed *kept = &pair[o.tb];
            char name[96];
            case_name(&o, name, sizeof name);
            product_kept(k, &o, d, NULL, want);
            product_kept(k, &o, d, pair, got);
            CHECK(kept->filled && !memcmp(got, want, sizeof(float) * nc),
                  "%s %s: filling the kept tiles changed C or left them empty", k->products, name);
            negate_b(&o, d);
            product_kept(k, &o, d, NULL, negated);
            product_kept(k, &o, d, pair, got);
            CHECK(!memcmp(got, want, sizeof(float) * nc),
                  "%s %s: a product with filled tiles read B itself", k->products, name);
            kept->filled = 0; /* what the weight's owner does when it changes */
            CHECK(pt_gemm_packed_refill(kept), "%s %s: the owner's refill left the tiles empty",
                  k->products, name);
            negate_b(&o, d); /* behind the refilled tiles */
            product_kept(k, &o, d, pair, got);
            CHECK(!memcmp(got, negated, sizeof(float) * nc),
                  "%s %s: the refilled tiles are not B's as it was when refilled", k->products,
                  name);
            free(room), free(want), free(got), free(negated);
            release(&o);
        }
}

/* pt_bf16_set_kernel by name, and what auto takes. */
static void choice(void)
{
    const char *names[] = {"amx", "avx512bf16"};
    const char *lacks[] = {"AMX", "AVX512_BF16"};
    const pt_kernels *tables[] = {pt_kernels_bf16_amx(), pt_kernels_bf16_avx512()};
    const char *first = tables[0] ? "amx" : "portable"; /* auto leaves avx512bf16 out */
    for (int i = 0; i < 2; i++) {
        int rc = pt_bf16_set_kernel(names[i]);
        if (tables[i]) {
            CHECK(rc == PT_OK && !strcmp(pt_bf16_kernel(), names[i]),
                  "--bf16-kernel %s on a CPU that runs it: status %d, products on %s", names[i], rc,
                  pt_bf16_kernel());
        } else {
            const char *msg = pt_last_error();
            CHECK(rc == PT_EUNSUPPORTED && strstr(msg, names[i]) && strstr(msg, lacks[i]),
                  "--bf16-kernel %s on a CPU without it: status %d, message '%s'", names[i], rc,
                  msg);
        }
    }
    CHECK(pt_bf16_set_kernel("portable") == PT_OK && !strcmp(pt_bf16_kernel(), "portable"),
          "portable is not taken by name");
    CHECK(pt_bf16_set_kernel("auto") == PT_OK && !strcmp(pt_bf16_kernel(), first),
          "auto takes %s, expected %s (amx where this CPU runs it, else portable)",
          pt_bf16_kernel(), first);
    int rc = pt_bf16_set_kernel("fast");
    CHECK(rc == PT_EINVAL && strstr(pt_last_error(), "'fast'") &&
              strstr(pt_last_error(), "avx512bf16"),
          "an unknown kernel: status %d, message '%s'", rc, pt_last_error());
    CHECK(!strcmp(pt_bf16_kernel(), first), "a refused name changed the kernel to %s",
          pt_bf16_kernel());
    printf("auto takes %s\n", first);
}

int main(void)
{
    choice();
    /* the portable products on every fp32 product this CPU runs: its
     * blocked product's (widening as it packs) and OpenBLAS's */
    static const char *fp32[] = {"avx512", "avx2", "generic", "openblas"};
    for (int f = 0; f < 4; f++) {
        if (pt_fp32_set_kernel(fp32[f]) != PT_OK) {
            printf("skipped: portable on fp32 kernel %s: this CPU cannot run it\n", fp32[f]);
            continue;
        }
        int before = failures;
        for (int s = 0; s < N_SHAPES; s++)
            portable_is_defined(shapes[s]);
        /* op(B)'s columns in blocks of 256 (as for an L2 of 64 KiB), the
         * sums carried from block to block of K within each */
        pt_gemm_set_l2_bytes(1L << 16);
        portable_is_defined((dims){13, 600, 800});
        pt_gemm_set_l2_bytes(0);
        printf("portable on %s: %s its definition (%d shapes x 32 cases)\n", pt_fp32_kernel(),
               failures == before ? "the bits of" : "DIFFERS from", N_SHAPES + 1);
    }
    pt_fp32_set_kernel("auto");
    const pt_kernels *portable = pt_kernels_bf16_portable();
    if (portable->packed_floats(64, 64)) {
        int before = failures;
        kept_tiles(portable);
        threads_keep_bits(portable);
        printf("portable on %s: %s with kept panels and on 2, 3 and 5 threads\n", pt_fp32_kernel(),
               failures == before ? "the same bits" : "OTHER bits");
    }
    const pt_kernels *fast[] = {pt_kernels_bf16_amx(), pt_kernels_bf16_avx512()};
    const char *names[] = {"amx", "avx512bf16"};
    for (int i = 0; i < 2; i++) {
        if (!fast[i]) {
            printf("skipped: %s: this CPU cannot run it\n", names[i]);
            continue;
        }
        int before = failures;
        for (int s = 0; s < N_SHAPES; s++) {
            compare(fast[i], shapes[s], 1);
            compare(fast[i], shapes[s], 0);
        }
        nan_row(fast[i]);
        denormal_sums(fast[i]);
        if (fast[i]->packed_floats)
            kept_tiles(fast[i]);
        printf("%s: %s the portable products (%d shapes x 32 cases, exact and random)\n", names[i],
               failures == before ? "agrees with" : "DIFFERS from", N_SHAPES);
        before = failures;
        threads_keep_bits(fast[i]);
        printf("%s: %s bits on 2, 3 and 5 threads as on one\n", names[i],
               failures == before ? "the same" : "OTHER");
    }
    if (failures)
        printf("FAILED: %d checks\n", failures);
    else
        printf("ok\n");
    return failures != 0;
}
