/* kernels_body.h: the elementwise kernels of the seam, written once for
 * every activation type. A backend includes it after defining
 *   ACT      the type activations are stored in (float, pt_bf16);
 *   LD(x)    an ACT widened to float;
 *   ST(x)    a float rounded to ACT;
 *   KN(name) the backend's name for a kernel;
 * and gets static functions KN(layernorm_forward) ... KN(crossentropy_backward)
 * to put in its table (kernels_cpu.c, kernels_bf16.c). Everything is
 * computed in float; an activation is rounded once, where it is written.
 * With ACT float, LD and ST are the identity and the arithmetic is exactly
 * fp32's. */
#include "tensor/kernels_math.h"

/* The row sums of LayerNorm keep LANES partial sums, element c in sum
 * c mod LANES, added in one fixed order at the end: the loops vectorise
 * without the compiler reassociating anything, and every vector width
 * gives the same bits. */
#define LANES 16

static inline float KN(lanes_total)(const float *acc)
{
    float s = 0.0f;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
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
    for (int c = 0; c < C; c++)
        o[c] = ST((LD(x[c]) - m) * s * w[c] + b[c]);
    *mean = m;
    *rstd = s;
}

static void KN(layernorm_forward)(void *out_, float *mean, float *rstd, const void *inp_,
                                  const float *w, const float *b, int N, int C, float eps)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    for (int i = 0; i < N; i++)
        KN(layernorm_row)
    (out + (size_t)i * C, mean + i, rstd + i, inp + (size_t)i * C, w, b, C, eps);
}

/* a row at a time, while it is in cache: sum = a + b, then its LayerNorm */
static void KN(residual_layernorm_forward)(void *sum_, void *out_, float *mean, float *rstd,
                                           const void *a_, const void *b_, const float *w,
                                           const float *b, int N, int C, float eps)
{
    ACT *sum = sum_, *out = out_;
    const ACT *a = a_, *r = b_;
    for (int i = 0; i < N; i++) {
        size_t at = (size_t)i * C;
        for (int c = 0; c < C; c++)
            sum[at + c] = ST(LD(a[at + c]) + LD(r[at + c]));
        KN(layernorm_row)(out + at, mean + i, rstd + i, sum + at, w, b, C, eps);
    }
}

static void KN(layernorm_backward_input)(void *dinp_, const void *dres_, const void *dout_,
                                         const void *inp_, const float *w, const float *mean,
                                         const float *rstd, int N, int C)
{
    ACT *dinp = dinp_;
    const ACT *dres = dres_, *dout = dout_, *inp = inp_;
    for (int i = 0; i < N; i++) {
        size_t at = (size_t)i * C;
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
        for (c = 0; c < C; c++) {
            float xhat = (LD(x[c]) - m) * s;
            float g = s * (LD(dy[c]) * w[c] - sum_d - xhat * sum_dx);
            dx[c] = ST(dres ? LD(dres[at + c]) + g : g);
        }
    }
}

static void KN(layernorm_backward_weight)(float *dw, float *db, const void *dout_, const void *inp_,
                                          const float *mean, const float *rstd, int N, int C)
{
    const ACT *dout = dout_, *inp = inp_;
    for (int i = 0; i < N; i++) {
        const ACT *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
        float m = mean[i], s = rstd[i];
        for (int c = 0; c < C; c++) {
            dw[c] += LD(dy[c]) * (LD(x[c]) - m) * s;
            db[c] += LD(dy[c]);
        }
    }
}

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */

static void KN(gelu_forward)(void *out_, const void *inp_, size_t n)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    for (size_t i = 0; i < n; i++) {
        float x = LD(inp[i]);
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        out[i] = ST(0.5f * x * (1.0f + fast_tanhf(u)));
    }
}

static void KN(gelu_backward)(void *dinp_, const void *inp_, const void *dout_, size_t n)
{
    ACT *dinp = dinp_;
    const ACT *inp = inp_, *dout = dout_;
    for (size_t i = 0; i < n; i++) {
        float x = LD(inp[i]);
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float t = fast_tanhf(u);
        float sech2 = 1.0f - t * t;
        float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = ST(LD(dout[i]) * (0.5f * (1.0f + t) + 0.5f * x * sech2 * du));
    }
}

#define SQRT_HALF    0.7071067811865476f /* 1 / sqrt 2 */
#define INV_SQRT_2PI 0.3989422804014327f /* the normal density's 1 / sqrt(2 pi) */

static void KN(gelu_erf_forward)(void *out_, const void *inp_, size_t n)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    for (size_t i = 0; i < n; i++) {
        float x = LD(inp[i]);
        out[i] = ST(0.5f * x * (1.0f + fast_erff(x * SQRT_HALF)));
    }
}

/* d/dx x Phi(x) = Phi(x) + x phi(x) */
static void KN(gelu_erf_backward)(void *dinp_, const void *inp_, const void *dout_, size_t n)
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

static void KN(silu_forward)(void *out_, const void *inp_, size_t n)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    for (size_t i = 0; i < n; i++) {
        float x = LD(inp[i]);
        out[i] = ST(x * fast_sigmoidf(x));
    }
}

/* d/dx x s(x) = s (1 + x (1 - s)) */
static void KN(silu_backward)(void *dinp_, const void *inp_, const void *dout_, size_t n)
{
    ACT *dinp = dinp_;
    const ACT *inp = inp_, *dout = dout_;
    for (size_t i = 0; i < n; i++) {
        float x = LD(inp[i]), sg = fast_sigmoidf(x);
        dinp[i] = ST(LD(dout[i]) * sg * (1.0f + x * (1.0f - sg)));
    }
}

static void KN(relu_forward)(void *out_, const void *inp_, size_t n)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    for (size_t i = 0; i < n; i++)
        out[i] = ST(LD(inp[i]) > 0.0f ? LD(inp[i]) : 0.0f);
}

static void KN(relu_backward)(void *dinp_, const void *inp_, const void *dout_, size_t n)
{
    ACT *dinp = dinp_;
    const ACT *inp = inp_, *dout = dout_;
    for (size_t i = 0; i < n; i++)
        dinp[i] = ST(LD(inp[i]) > 0.0f ? LD(dout[i]) : 0.0f);
}

static void KN(bias_backward)(float *dbias, const void *dout_, int N, int C)
{
    const ACT *dout = dout_;
    for (int i = 0; i < N; i++) {
        const ACT *d = dout + (size_t)i * C;
        for (int c = 0; c < C; c++)
            dbias[c] += LD(d[c]);
    }
}

static void KN(add)(void *out_, const void *a_, const void *b_, size_t n)
{
    ACT *out = out_;
    const ACT *a = a_, *b = b_;
    for (size_t i = 0; i < n; i++)
        out[i] = ST(LD(a[i]) + LD(b[i]));
}

static void KN(add_floats)(void *out_, const float *a, const float *b, size_t n)
{
    ACT *out = out_;
    for (size_t i = 0; i < n; i++)
        out[i] = ST(a[i] + b[i]);
}

static void KN(accumulate)(float *g, const void *d_, size_t n)
{
    const ACT *d = d_;
    for (size_t i = 0; i < n; i++)
        g[i] = g[i] + LD(d[i]);
}

/* A band of rows r0 .. r0+n-1 of the causal (T,T) matrices: row i of the
 * band sees keys 0 .. r0+i, and the band's products read r0+n columns, so
 * the columns past the diagonal up to there are written as zeros. */
static void KN(softmax_causal_forward)(void *att_, float *scores, float *stats, int r0, int n,
                                       int ld, float scale)
{
    ACT *att = att_;
    for (int i = 0; i < n; i++) {
        float *row = scores + (size_t)i * ld;
        ACT *out = att + (size_t)i * ld;
        int last = r0 + i;
        float mx = -INFINITY;
        for (int j = 0; j <= last; j++) {
            row[j] *= scale;
            if (row[j] > mx)
                mx = row[j];
        }
        float sum = 0.0f;
        for (int j = 0; j <= last; j++) {
            row[j] = fast_expf(row[j] - mx);
            sum += row[j];
        }
        float inv = 1.0f / sum;
        for (int j = 0; j <= last; j++)
            out[j] = ST(row[j] * inv);
        for (int j = last + 1; j < r0 + n; j++)
            out[j] = ST(0.0f);
        stats[2 * i] = mx;
        stats[2 * i + 1] = inv;
    }
}

/* the forward's operations on the same scores and stats: the same bits */
static void KN(softmax_causal_recompute)(void *att_, const float *scores, const float *stats,
                                         int r0, int n, int ld, float scale)
{
    ACT *att = att_;
    for (int i = 0; i < n; i++) {
        const float *row = scores + (size_t)i * ld;
        ACT *out = att + (size_t)i * ld;
        int last = r0 + i;
        float mx = stats[2 * i], inv = stats[2 * i + 1];
        for (int j = 0; j <= last; j++)
            out[j] = ST(fast_expf(row[j] * scale - mx) * inv);
        for (int j = last + 1; j < r0 + n; j++)
            out[j] = ST(0.0f);
    }
}

static void KN(softmax_causal_backward)(void *datt_, const void *att_, const float *dprob, int r0,
                                        int n, int ld, float scale)
{
    ACT *datt = datt_;
    const ACT *att = att_;
    for (int i = 0; i < n; i++) {
        const ACT *p = att + (size_t)i * ld;
        const float *dp = dprob + (size_t)i * ld;
        ACT *d = datt + (size_t)i * ld;
        int last = r0 + i;
        float dot = 0.0f;
        for (int j = 0; j <= last; j++)
            dot += LD(p[j]) * dp[j];
        for (int j = 0; j <= last; j++)
            d[j] = ST(scale * LD(p[j]) * (dp[j] - dot));
        for (int j = last + 1; j < r0 + n; j++)
            d[j] = ST(0.0f);
    }
}

static void KN(store_floats)(void *out_, const float *in, size_t n)
{
    ACT *out = out_;
    for (size_t i = 0; i < n; i++)
        out[i] = ST(in[i]);
}

static double KN(crossentropy_forward)(float *probs, const int *targets, int N, int V)
{
    double loss = 0.0;
    for (int i = 0; i < N; i++) {
        float *row = probs + (size_t)i * V;
        float mx = -INFINITY;
        for (int v = 0; v < V; v++)
            if (row[v] > mx)
                mx = row[v];
        float sum = 0.0f;
        for (int v = 0; v < V; v++) {
            row[v] = fast_expf(row[v] - mx);
            sum += row[v];
        }
        float inv = 1.0f / sum;
        for (int v = 0; v < V; v++)
            row[v] *= inv;
        if (targets && targets[i] >= 0)
            loss -= log((double)row[targets[i]] + 1e-30);
    }
    return loss;
}

static void KN(crossentropy_backward)(float *probs, const int *targets, int N, int V, float scale)
{
    for (int i = 0; i < N; i++) {
        float *row = probs + (size_t)i * V;
        if (targets[i] < 0) {
            memset(row, 0, sizeof(float) * V);
            continue;
        }
        for (int v = 0; v < V; v++)
            row[v] *= scale;
        row[targets[i]] -= scale;
    }
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
