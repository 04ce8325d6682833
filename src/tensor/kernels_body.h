/* kernels_body.h: the elementwise kernels of the seam, written once for
 * every activation type. A backend includes it after defining
 *   ACT      the type activations are stored in (float, pt_bf16);
 *   LD(x)    an ACT widened to float;
 *   ST(x)    a float rounded to ACT;
 *   KN(name) the backend's name for a kernel;
 *   PASS_THREADS()  the threads its passes may share (below);
 * and may define
 *   ST_RUN(out, v, n)  n floats v rounded to ACT at out, as ST would each
 *            (bf16: by AVX512_BF16's conversion where the CPU has it);
 *            the heaviest passes then write through runs of floats (STORE_EACH).
 * and gets static functions KN(layernorm_forward) ... KN(crossentropy_backward)
 * to put in its table (kernels_cpu.c, kernels_bf16.c). Everything is
 * computed in float; an activation is rounded once, where it is written.
 * With ACT float, LD and ST are the identity and the arithmetic is exactly
 * fp32's. */
#include <stdlib.h>

#include "tensor/gemm.h"
#include "tensor/kernels_math.h"

/* A pass big enough is shared between the worker's threads on
 * pipetrain's own pool (pt_parallel_ranges; PASS_THREADS() of them: the
 * threads of the backend's table in use): a pass over rows or elements is cut into
 * contiguous ranges of them, a sum over rows (the weight and bias
 * gradients) into ranges of columns, each column still summed over every
 * row in order. Every element is computed by the same code whatever range
 * it falls in (and -ffp-contract=off keeps vector and scalar loops alike),
 * so the bits do not depend on the thread count. SPLIT_LEAST is the least
 * work, in elements, worth waking a helper for; SPLIT_ALIGN keeps ranges
 * of elements on whole cache lines. */
#ifndef SPLIT_LEAST
#define SPLIT_LEAST ((size_t)1 << 15)
#define SPLIT_ALIGN ((size_t)64)

static inline int pass_threads(void) { return PASS_THREADS(); }

/* the least count of rows (or columns) of `width` elements worth a range */
static inline size_t least_rows(size_t width) { return SPLIT_LEAST / (width ? width : 1) + 1; }
#endif

/* out[i] = ST(value) for i < n, value an expression of i: where the
 * backend stores through runs (ST_RUN), computed a run of floats at a time
 * into L1 and rounded by the run (GELU's forward pass 1.3x faster in bf16
 * with AVX512_BF16's conversion, the same bits); else written at once. */
#ifndef STORE_RUN_LEN
#define STORE_RUN_LEN 256
#endif
#ifdef ST_RUN
#define STORE_EACH(out, n, i, value)                                       \
    do {                                                                   \
        float run_[STORE_RUN_LEN] __attribute__((aligned(64)));            \
        for (size_t r0_ = 0; r0_ < (n); r0_ += STORE_RUN_LEN) {            \
            size_t m_ = (n)-r0_ < STORE_RUN_LEN ? (n)-r0_ : STORE_RUN_LEN; \
            for (size_t j_ = 0; j_ < m_; j_++) {                           \
                size_t i = r0_ + j_;                                       \
                run_[j_] = (value);                                        \
            }                                                              \
            ST_RUN((out) + r0_, run_, m_);                                 \
        }                                                                  \
    } while (0)
#else
#define STORE_EACH(out, n, i, value)     \
    do {                                 \
        for (size_t i = 0; i < (n); i++) \
            (out)[i] = ST(value);        \
    } while (0)
#endif

/* A sum along a row (LayerNorm's and RMSNorm's moments, a softmax's
 * total, a dot product) keeps LANES partial sums, element c in sum
 * c mod LANES, added in one fixed order at the end: the loops vectorise
 * without the compiler reassociating anything, and every vector width
 * gives the same bits. Added one at a time in order instead, a row runs
 * at one addition's latency per element: the causal softmax's forward
 * took 1.9x its recompute, which has no sum (bench_attention's profile). */
#define LANES 16

static inline float KN(lanes_total)(const float *acc)
{
    float s = 0.0f;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
    return s;
}

/* How far a loop over a row of n elements runs when the row may be read
 * and written up to `width`: to the end of its last vector of LANES where
 * the row has room, else to n (a scalar tail). The causal softmax's loops
 * run that far, so its rows have no scalar tail (up to 15 elements of exp
 * had cost as much as the vectors of an average row); what they compute
 * past n is padding, harmless or overwritten. */
static inline int KN(vector_run)(int n, int width)
{
    int up = (n + LANES - 1) / LANES * LANES;
    return up <= width ? up : n;
}

/* the largest of x[0 .. n-1] times `scale` (> 0; -INFINITY for none),
 * taken per lane and then across the lanes: the same value as one at a
 * time, since a maximum does not depend on the order. Compared as
 * integers that order as the floats do (kernels_math.h): GCC leaves a
 * float `?:` maximum scalar (it may not make it MAXPS without -ffast-math),
 * which had made this pass cost more than the exp after it. A NaN wins the
 * maximum (or, negative, loses it); either way its row's sum is NaN. */
static inline float KN(row_max)(const float *x, int n, float scale)
{
    int32_t acc[LANES], mx = pt_float_order(-INFINITY);
    for (int l = 0; l < LANES; l++)
        acc[l] = mx;
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) {
            int32_t v = pt_float_order(x[j + l] * scale);
            acc[l] = v > acc[l] ? v : acc[l];
        }
    for (int l = 0; l < LANES; l++)
        mx = acc[l] > mx ? acc[l] : mx;
    for (; j < n; j++) {
        int32_t v = pt_float_order(x[j] * scale);
        mx = v > mx ? v : mx;
    }
    return pt_float_of_order(mx);
}

/* x[j] = e^(x[j] scale - mx) for j < n (the product rounded before the
 * difference, as a softmax that scaled its row first has it); returns
 * their sum */
static inline float KN(exp_sum)(float *x, int n, float scale, float mx)
{
    float acc[LANES] = {0};
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) {
            x[j + l] = fast_expf(x[j + l] * scale - mx);
            acc[l] += x[j + l];
        }
    float s = KN(lanes_total)(acc);
    for (; j < n; j++) {
        x[j] = fast_expf(x[j] * scale - mx);
        s += x[j];
    }
    return s;
}

/* sum over c of (x[c] - m)^p, p 1 or 2 (m 0 for a plain sum) */
static inline float KN(row_moment)(const ACT *x, float m, int p, int C)
{
    float acc[LANES] = {0};
    int c = 0;
    for (; c + LANES <= C; c += LANES)
        for (int l = 0; l < LANES; l++) {
            float d = LD(x[c + l]) - m;
            acc[l] += p == 2 ? d * d : d;
        }
    float s = KN(lanes_total)(acc);
    for (; c < C; c++) {
        float d = LD(x[c]) - m;
        s += p == 2 ? d * d : d;
    }
    return s;
}

/* one row: o = normalise(x) * w + b */
static inline void KN(layernorm_row)(ACT *o, float *mean, float *rstd, const ACT *x, const float *w,
                                     const float *b, int C, float eps)
{
    float m = KN(row_moment)(x, 0.0f, 1, C) / C;
    float v = KN(row_moment)(x, m, 2, C) / C;
    float s = 1.0f / sqrtf(v + eps);
    STORE_EACH(o, (size_t)C, c, (LD(x[c]) - m) * s * w[c] + b[c]);
    *mean = m;
    *rstd = s;
}

/* what a LayerNorm pass reads and writes, for its ranges of rows */
typedef struct {
    ACT *out, *sum, *dinp;
    const ACT *inp, *a, *r, *dres, *dout;
    float *mean, *rstd, *dw, *db;
    const float *cmean, *crstd, *w, *b;
    int N, C;
    float eps;
} KN(norm_pass);

static void KN(layernorm_rows)(void *arg, size_t lo, size_t hi)
{
    const KN(norm_pass) *p = arg;
    size_t C = (size_t)p->C;
    for (size_t i = lo; i < hi; i++)
        KN(layernorm_row)
    (p->out + i * C, p->mean + i, p->rstd + i, p->inp + i * C, p->w, p->b, p->C, p->eps);
}

static void KN(layernorm_forward)(void *out, float *mean, float *rstd, const void *inp,
                                  const float *w, const float *b, int N, int C, float eps)
{
    KN(norm_pass)
    p = {.out = out, .inp = inp, .mean = mean, .rstd = rstd, .w = w, .b = b, .C = C, .eps = eps};
    pt_parallel_ranges(pass_threads(), (size_t)N, least_rows((size_t)C), 1, KN(layernorm_rows), &p);
}

/* a row at a time, while it is in cache: sum = a + b, then its LayerNorm */
static void KN(residual_layernorm_rows)(void *arg, size_t lo, size_t hi)
{
    const KN(norm_pass) *p = arg;
    size_t C = (size_t)p->C;
    for (size_t i = lo; i < hi; i++) {
        size_t at = i * C;
        STORE_EACH(p->sum + at, C, c, LD(p->a[at + c]) + LD(p->r[at + c]));
        KN(layernorm_row)
        (p->out + at, p->mean + i, p->rstd + i, p->sum + at, p->w, p->b, p->C, p->eps);
    }
}

static void KN(residual_layernorm_forward)(void *sum, void *out, float *mean, float *rstd,
                                           const void *a, const void *r, const float *w,
                                           const float *b, int N, int C, float eps)
{
    KN(norm_pass)
    p = {.out = out,
         .sum = sum,
         .a = a,
         .r = r,
         .mean = mean,
         .rstd = rstd,
         .w = w,
         .b = b,
         .C = C,
         .eps = eps};
    pt_parallel_ranges(pass_threads(), (size_t)N, least_rows((size_t)C), 1,
                       KN(residual_layernorm_rows), &p);
}

/* LayerNorm's input gradient at one element, from the row's mean m, 1 / std
 * s, and the means of dxhat and dxhat xhat */
static inline float KN(layernorm_dx)(float x, float dy, float w, float m, float s, float sum_d,
                                     float sum_dx)
{
    float xhat = (x - m) * s;
    return s * (dy * w - sum_d - xhat * sum_dx);
}

static void KN(layernorm_backward_rows)(void *arg, size_t lo, size_t hi)
{
    const KN(norm_pass) *p = arg;
    ACT *dinp = p->dinp;
    const ACT *dres = p->dres, *dout = p->dout, *inp = p->inp;
    const float *w = p->w, *mean = p->cmean, *rstd = p->crstd;
    int C = p->C;
    for (size_t i = lo; i < hi; i++) {
        size_t at = i * (size_t)C;
        const ACT *x = inp + at, *dy = dout + at;
        ACT *dx = dinp + at;
        float m = mean[i], s = rstd[i];
        /* dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) */
        float acc_d[LANES] = {0}, acc_dx[LANES] = {0};
        int c = 0;
        for (; c + LANES <= C; c += LANES)
            for (int l = 0; l < LANES; l++) {
                float dxhat = LD(dy[c + l]) * w[c + l];
                acc_d[l] += dxhat;
                acc_dx[l] += dxhat * ((LD(x[c + l]) - m) * s);
            }
        float sum_d = KN(lanes_total)(acc_d), sum_dx = KN(lanes_total)(acc_dx);
        for (; c < C; c++) {
            float dxhat = LD(dy[c]) * w[c];
            sum_d += dxhat;
            sum_dx += dxhat * ((LD(x[c]) - m) * s);
        }
        sum_d /= C;
        sum_dx /= C;
        STORE_EACH(dx, (size_t)C, c,
                   dres ? LD(dres[at + c]) +
                              KN(layernorm_dx)(LD(x[c]), LD(dy[c]), w[c], m, s, sum_d, sum_dx)
                        : KN(layernorm_dx)(LD(x[c]), LD(dy[c]), w[c], m, s, sum_d, sum_dx));
    }
}

static void KN(layernorm_backward_input)(void *dinp, const void *dres, const void *dout,
                                         const void *inp, const float *w, const float *mean,
                                         const float *rstd, int N, int C)
{
    KN(norm_pass)
    p = {.dinp = dinp,
         .dres = dres,
         .dout = dout,
         .inp = inp,
         .w = w,
         .cmean = mean,
         .crstd = rstd,
         .C = C};
    pt_parallel_ranges(pass_threads(), (size_t)N, least_rows((size_t)C), 1,
                       KN(layernorm_backward_rows), &p);
}

/* columns lo .. hi-1 of dw and db, each summed over the rows in order */
static void KN(layernorm_weight_columns)(void *arg, size_t lo, size_t hi)
{
    const KN(norm_pass) *p = arg;
    size_t C = (size_t)p->C;
    for (int i = 0; i < p->N; i++) {
        const ACT *x = p->inp + (size_t)i * C, *dy = p->dout + (size_t)i * C;
        float m = p->cmean[i], s = p->crstd[i];
        for (size_t c = lo; c < hi; c++) {
            p->dw[c] += LD(dy[c]) * (LD(x[c]) - m) * s;
            p->db[c] += LD(dy[c]);
        }
    }
}

static void KN(layernorm_backward_weight)(float *dw, float *db, const void *dout, const void *inp,
                                          const float *mean, const float *rstd, int N, int C)
{
    KN(norm_pass)
    p = {
        .dw = dw, .db = db, .dout = dout, .inp = inp, .cmean = mean, .crstd = rstd, .N = N, .C = C};
    pt_parallel_ranges(pass_threads(), (size_t)C, least_rows((size_t)N), 16,
                       KN(layernorm_weight_columns), &p);
}

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */

/* u = sqrt(2/pi) (x + 0.044715 x^3); with d = 1 / (e^{2u} + 1),
 * 0.5 x (1 + tanh u) = x (1 - d) */
static inline float KN(gelu_u)(float x) { return GELU_SCALE * PT_FMA(0.044715f * x * x, x, x); }

static inline float KN(gelu)(float x) { return x - x * tanh_part(KN(gelu_u)(x)); }

static void KN(gelu_forward_serial)(void *out_, const void *inp_, size_t n)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    STORE_EACH(out, n, i, KN(gelu)(LD(inp[i])));
}

/* d/dx 0.5 x (1 + tanh u) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'
 *                         = (1 - d) (1 + 2 x d u') */
static inline float KN(gelu_grad)(float x, float dout)
{
    float d = tanh_part(KN(gelu_u)(x));
    float du = GELU_SCALE * PT_FMA(3.0f * 0.044715f * x, x, 1.0f);
    return dout * ((1.0f - d) * PT_FMA(2.0f * x * d, du, 1.0f));
}

static void KN(gelu_backward_serial)(void *dinp_, const void *inp_, const void *dout_, size_t n)
{
    ACT *dinp = dinp_;
    const ACT *inp = inp_, *dout = dout_;
    STORE_EACH(dinp, n, i, KN(gelu_grad)(LD(inp[i]), LD(dout[i])));
}

#define SQRT_HALF    0.7071067811865476f /* 1 / sqrt 2 */
#define INV_SQRT_2PI 0.3989422804014327f /* the normal density's 1 / sqrt(2 pi) */

static void KN(gelu_erf_forward_serial)(void *out_, const void *inp_, size_t n)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    for (size_t i = 0; i < n; i++) {
        float x = LD(inp[i]);
        out[i] = ST(0.5f * x * (1.0f + fast_erff(x * SQRT_HALF)));
    }
}

/* d/dx x Phi(x) = Phi(x) + x phi(x) */
static void KN(gelu_erf_backward_serial)(void *dinp_, const void *inp_, const void *dout_, size_t n)
{
    ACT *dinp = dinp_;
    const ACT *inp = inp_, *dout = dout_;
    for (size_t i = 0; i < n; i++) {
        float x = LD(inp[i]);
        float cdf = 0.5f * (1.0f + fast_erff(x * SQRT_HALF));
        float pdf = INV_SQRT_2PI * fast_expf(-0.5f * x * x);
        dinp[i] = ST(LD(dout[i]) * (cdf + x * pdf));
    }
}

static void KN(silu_forward_serial)(void *out_, const void *inp_, size_t n)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    for (size_t i = 0; i < n; i++) {
        float x = LD(inp[i]);
        out[i] = ST(x * fast_sigmoidf(x));
    }
}

/* d/dx x s(x) = s (1 + x (1 - s)) */
static void KN(silu_backward_serial)(void *dinp_, const void *inp_, const void *dout_, size_t n)
{
    ACT *dinp = dinp_;
    const ACT *inp = inp_, *dout = dout_;
    for (size_t i = 0; i < n; i++) {
        float x = LD(inp[i]), sg = fast_sigmoidf(x);
        dinp[i] = ST(LD(dout[i]) * sg * (1.0f + x * (1.0f - sg)));
    }
}

static void KN(relu_forward_serial)(void *out_, const void *inp_, size_t n)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    for (size_t i = 0; i < n; i++)
        out[i] = ST(LD(inp[i]) > 0.0f ? LD(inp[i]) : 0.0f);
}

static void KN(relu_backward_serial)(void *dinp_, const void *inp_, const void *dout_, size_t n)
{
    ACT *dinp = dinp_;
    const ACT *inp = inp_, *dout = dout_;
    for (size_t i = 0; i < n; i++)
        dinp[i] = ST(LD(inp[i]) > 0.0f ? LD(dout[i]) : 0.0f);
}

/* columns lo .. hi-1 of the bias gradient, each summed over the rows in order */
static void KN(bias_columns)(void *arg, size_t lo, size_t hi)
{
    const KN(norm_pass) *p = arg;
    for (int i = 0; i < p->N; i++) {
        const ACT *d = p->dout + (size_t)i * (size_t)p->C;
        for (size_t c = lo; c < hi; c++)
            p->db[c] += LD(d[c]);
    }
}

static void KN(bias_backward)(float *dbias, const void *dout, int N, int C)
{
    KN(norm_pass) p = {.db = dbias, .dout = dout, .N = N, .C = C};
    pt_parallel_ranges(pass_threads(), (size_t)C, least_rows((size_t)N), 16, KN(bias_columns), &p);
}

static void KN(add_serial)(void *out_, const void *a_, const void *b_, size_t n)
{
    ACT *out = out_;
    const ACT *a = a_, *b = b_;
    STORE_EACH(out, n, i, LD(a[i]) + LD(b[i]));
}

static void KN(add_floats_serial)(void *out_, const void *a_, const void *b_, size_t n)
{
    ACT *out = out_;
    const float *a = a_, *b = b_;
    STORE_EACH(out, n, i, a[i] + b[i]);
}

static void KN(accumulate_serial)(void *g_, const void *d_, size_t n)
{
    float *g = g_;
    const ACT *d = d_;
    for (size_t i = 0; i < n; i++)
        g[i] = g[i] + LD(d[i]);
}

/* an elementwise pass over n, its pointers advanced by their element sizes */
typedef struct {
    void (*one)(void *, const void *, size_t);
    void (*two)(void *, const void *, const void *, size_t);
    char *o;
    const char *x, *y;
    size_t so, sx, sy;
} KN(elementwise);

static void KN(elementwise_range)(void *arg, size_t lo, size_t hi)
{
    const KN(elementwise) *p = arg;
    if (p->two)
        p->two(p->o + lo * p->so, p->x + lo * p->sx, p->y + lo * p->sy, hi - lo);
    else
        p->one(p->o + lo * p->so, p->x + lo * p->sx, hi - lo);
}

/* (A pass too short to cut runs at once: attention's backward stores its
 * key and value gradients a row of 64 at a time, and going through the
 * cutting for each had cost more than the stores.) */
static void KN(split_elementwise)(KN(elementwise) p, size_t n)
{
    if (n < 2 * SPLIT_LEAST)
        KN(elementwise_range)(&p, 0, n);
    else
        pt_parallel_ranges(pass_threads(), n, SPLIT_LEAST, SPLIT_ALIGN, KN(elementwise_range), &p);
}

static void KN(split_one)(void (*one)(void *, const void *, size_t), void *o, size_t o_size,
                          const void *x, size_t x_size, size_t n)
{
    KN(split_elementwise)((KN(elementwise)){one, NULL, o, x, NULL, o_size, x_size, 0}, n);
}

static void KN(split_two)(void (*two)(void *, const void *, const void *, size_t), void *o,
                          size_t o_size, const void *x, size_t x_size, const void *y, size_t y_size,
                          size_t n)
{
    KN(split_elementwise)((KN(elementwise)){NULL, two, o, x, y, o_size, x_size, y_size}, n);
}

/* the table's entry `name` over KN(name_serial), with its pointers' types
 * and element sizes */
#define SPLIT_ONE(name, o_t, o_size, x_t, x_size)                  \
    static void KN(name)(o_t * o, const x_t *x, size_t n)          \
    {                                                              \
        KN(split_one)(KN(name##_serial), o, o_size, x, x_size, n); \
    }
#define SPLIT_TWO(name, o_t, o_size, x_t, x_size, y_t, y_size)                \
    static void KN(name)(o_t * o, const x_t *x, const y_t *y, size_t n)       \
    {                                                                         \
        KN(split_two)(KN(name##_serial), o, o_size, x, x_size, y, y_size, n); \
    }
#define SPLIT_ACT_ONE(name) SPLIT_ONE(name, void, sizeof(ACT), void, sizeof(ACT))
#define SPLIT_ACT_TWO(name) SPLIT_TWO(name, void, sizeof(ACT), void, sizeof(ACT), void, sizeof(ACT))

SPLIT_ACT_ONE(gelu_forward)
SPLIT_ACT_TWO(gelu_backward)
SPLIT_ACT_ONE(gelu_erf_forward)
SPLIT_ACT_TWO(gelu_erf_backward)
SPLIT_ACT_ONE(silu_forward)
SPLIT_ACT_TWO(silu_backward)
SPLIT_ACT_ONE(relu_forward)
SPLIT_ACT_TWO(relu_backward)
SPLIT_ACT_TWO(add)
SPLIT_TWO(add_floats, void, sizeof(ACT), float, sizeof(float), float, sizeof(float))
SPLIT_ONE(accumulate, float, sizeof(float), void, sizeof(ACT))

/* A band of rows r0 .. r0+n-1 of the causal (T,T) matrices: row i of the
 * band sees keys 0 .. r0+i, and the band's products read r0+n columns, so
 * the columns past the diagonal up to there are written as zeros. The
 * loops run in whole vectors (vector_run): the forward first turns the
 * scores past the diagonal, up to there, into -infinity, whose exp is 0. */
static void KN(softmax_causal_forward)(void *att_, float *scores, float *stats, int r0, int n,
                                       int ld, float scale)
{
    ACT *att = att_;
    int width = r0 + n;
    for (int i = 0; i < n; i++) {
        float *row = scores + (size_t)i * ld;
        ACT *out = att + (size_t)i * ld;
        int len = r0 + i + 1, run = KN(vector_run)(len, width);
        for (int j = len; j < run; j++)
            row[j] = -INFINITY;
        float mx = KN(row_max)(row, run, scale);
        float inv = 1.0f / KN(exp_sum)(row, run, scale, mx);
        STORE_EACH(out, (size_t)run, j, row[j] * inv);
        for (int j = run; j < width; j++)
            out[j] = ST(0.0f);
        stats[2 * i] = mx;
        stats[2 * i + 1] = inv;
    }
}

/* the forward's operations on the same scores and stats: the same bits
 * (past the diagonal it computes the exp of what is there and then
 * overwrites it with zeros) */
static void KN(softmax_causal_recompute)(void *att_, const float *scores, const float *stats,
                                         int r0, int n, int ld, float scale)
{
    ACT *att = att_;
    int width = r0 + n;
    for (int i = 0; i < n; i++) {
        const float *row = scores + (size_t)i * ld;
        ACT *out = att + (size_t)i * ld;
        int len = r0 + i + 1, run = KN(vector_run)(len, width);
        float mx = stats[2 * i], inv = stats[2 * i + 1];
        STORE_EACH(out, (size_t)run, j, fast_expf(row[j] * scale - mx) * inv);
        for (int j = len; j < width; j++)
            out[j] = ST(0.0f);
    }
}

static void KN(softmax_causal_backward)(void *datt_, const void *att_, const float *dprob, int r0,
                                        int n, int ld, float scale)
{
    ACT *datt = datt_;
    const ACT *att = att_;
    int width = r0 + n;
    for (int i = 0; i < n; i++) {
        const ACT *p = att + (size_t)i * ld;
        const float *dp = dprob + (size_t)i * ld;
        ACT *d = datt + (size_t)i * ld;
        int len = r0 + i + 1, run = KN(vector_run)(len, width);
        float acc[LANES] = {0}, dot;
        int j = 0;
        for (; j + LANES <= len; j += LANES)
            for (int l = 0; l < LANES; l++)
                acc[l] += LD(p[j + l]) * dp[j + l];
        for (dot = KN(lanes_total)(acc); j < len; j++)
            dot += LD(p[j]) * dp[j];
        STORE_EACH(d, (size_t)run, k, scale * LD(p[k]) * (dp[k] - dot));
        for (j = len; j < width; j++)
            d[j] = ST(0.0f);
    }
}

static void KN(store_floats_serial)(void *out_, const void *in_, size_t n)
{
    ACT *out = out_;
    const float *in = in_;
#ifdef ST_RUN
    ST_RUN(out, in, n);
#else
    for (size_t i = 0; i < n; i++)
        out[i] = ST(in[i]);
#endif
}

SPLIT_ONE(store_floats, void, sizeof(ACT), float, sizeof(float))

/* what the loss's passes read and write, for their ranges of rows */
typedef struct {
    float *probs;
    const int *targets;
    double *loss; /* per row, where the rows are shared out */
    int V;
    float scale;
} KN(loss_pass);

/* rows lo .. hi-1 become their softmax; the loss of row i is added to
 * *sum (sum != NULL) or stored in p->loss[i] */
static void KN(crossentropy_rows)(const KN(loss_pass) * p, size_t lo, size_t hi, double *sum)
{
    size_t V = (size_t)p->V;
    for (size_t i = lo; i < hi; i++) {
        float *row = p->probs + i * V;
        float inv = 1.0f / KN(exp_sum)(row, (int)V, 1.0f, KN(row_max)(row, (int)V, 1.0f));
        for (size_t v = 0; v < V; v++)
            row[v] *= inv;
        double l = p->targets && p->targets[i] >= 0 ? log((double)row[p->targets[i]] + 1e-30) : 0.0;
        if (sum)
            *sum -= l;
        else
            p->loss[i] = l;
    }
}

static void KN(crossentropy_range)(void *arg, size_t lo, size_t hi)
{
    KN(crossentropy_rows)(arg, lo, hi, NULL);
}

/* The rows are shared out where a per-row loss can be kept; the losses
 * are then added in row order, as the one-thread loop adds them. */
static double KN(crossentropy_forward)(float *probs, const int *targets, int N, int V)
{
    KN(loss_pass) p = {.probs = probs, .targets = targets, .V = V};
    double loss = 0.0;
    size_t least = least_rows((size_t)V);
    if (pass_threads() > 1 && (size_t)N >= 2 * least && (p.loss = malloc(sizeof(double) * N))) {
        pt_parallel_ranges(pass_threads(), (size_t)N, least, 1, KN(crossentropy_range), &p);
        for (int i = 0; i < N; i++)
            loss -= p.loss[i];
        free(p.loss);
    } else
        KN(crossentropy_rows)(&p, 0, (size_t)N, &loss);
    return loss;
}

static void KN(crossentropy_backward_rows)(void *arg, size_t lo, size_t hi)
{
    const KN(loss_pass) *p = arg;
    size_t V = (size_t)p->V;
    for (size_t i = lo; i < hi; i++) {
        float *row = p->probs + i * V;
        if (p->targets[i] < 0) {
            memset(row, 0, sizeof(float) * V);
            continue;
        }
        for (size_t v = 0; v < V; v++)
            row[v] *= p->scale;
        row[p->targets[i]] -= p->scale;
    }
}

static void KN(crossentropy_backward)(float *probs, const int *targets, int N, int V, float scale)
{
    KN(loss_pass) p = {.probs = probs, .targets = targets, .V = V, .scale = scale};
    pt_parallel_ranges(pass_threads(), (size_t)N, least_rows((size_t)V), 1,
                       KN(crossentropy_backward_rows), &p);
}

#include "tensor/kernels_layers_body.h"

/* The table's entries for everything but the product. */
#define PT_KERNELS_BODY                                                                           \
    .layernorm_forward = KN(layernorm_forward),                                                   \
    .residual_layernorm_forward = KN(residual_layernorm_forward),                                 \
    .layernorm_backward_input = KN(layernorm_backward_input),                                     \
    .layernorm_backward_weight = KN(layernorm_backward_weight), .gelu_forward = KN(gelu_forward), \
    .gelu_backward = KN(gelu_backward), .gelu_erf_forward = KN(gelu_erf_forward),                 \
    .gelu_erf_backward = KN(gelu_erf_backward), .relu_forward = KN(relu_forward),                 \
    .relu_backward = KN(relu_backward), .silu_forward = KN(silu_forward),                         \
    .silu_backward = KN(silu_backward), .bias_backward = KN(bias_backward), .add = KN(add),       \
    .add_floats = KN(add_floats), .accumulate = KN(accumulate),                                   \
    .softmax_causal_forward = KN(softmax_causal_forward),                                         \
    .softmax_causal_recompute = KN(softmax_causal_recompute), .store_floats = KN(store_floats),   \
    .softmax_causal_backward = KN(softmax_causal_backward),                                       \
    .crossentropy_forward = KN(crossentropy_forward),                                             \
    .crossentropy_backward = KN(crossentropy_backward), PT_KERNELS_LAYERS
