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

static void KN(layernorm_forward)(void *out_, float *mean, float *rstd, const void *inp_,
                                  const float *w, const float *b, int N, int C, float eps)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    for (int i = 0; i < N; i++) {
        const ACT *x = inp + (size_t)i * C;
        ACT *o = out + (size_t)i * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++)
            m += LD(x[c]);
        m /= C;
        float v = 0.0f;
        for (int c = 0; c < C; c++) {
            float d = LD(x[c]) - m;
            v += d * d;
        }
        v /= C;
        float s = 1.0f / sqrtf(v + eps);
        for (int c = 0; c < C; c++)
            o[c] = ST((LD(x[c]) - m) * s * w[c] + b[c]);
        mean[i] = m;
        rstd[i] = s;
    }
}

static void KN(layernorm_backward_input)(void *dinp_, const void *dout_, const void *inp_,
                                         const float *w, const float *mean, const float *rstd,
                                         int N, int C)
{
    ACT *dinp = dinp_;
    const ACT *dout = dout_, *inp = inp_;
    for (int i = 0; i < N; i++) {
        const ACT *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
        ACT *dx = dinp + (size_t)i * C;
        float m = mean[i], s = rstd[i];
        /* dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) */
        float sum_d = 0.0f, sum_dx = 0.0f;
        for (int c = 0; c < C; c++) {
            float dxhat = LD(dy[c]) * w[c];
            sum_d += dxhat;
            sum_dx += dxhat * (LD(x[c]) - m) * s;
        }
        sum_d /= C;
        sum_dx /= C;
        for (int c = 0; c < C; c++) {
            float xhat = (LD(x[c]) - m) * s;
            dx[c] = ST(LD(dx[c]) + s * (LD(dy[c]) * w[c] - sum_d - xhat * sum_dx));
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

static void KN(softmax_causal_forward)(void *att_, float *scores, int T, float scale)
{
    ACT *att = att_;
    for (int i = 0; i < T; i++) {
        float *row = scores + (size_t)i * T;
        ACT *out = att + (size_t)i * T;
        float mx = -INFINITY;
        for (int j = 0; j <= i; j++) {
            row[j] *= scale;
            if (row[j] > mx)
                mx = row[j];
        }
        float sum = 0.0f;
        for (int j = 0; j <= i; j++) {
            row[j] = fast_expf(row[j] - mx);
            sum += row[j];
        }
        float inv = 1.0f / sum;
        for (int j = 0; j <= i; j++)
            out[j] = ST(row[j] * inv);
        for (int j = i + 1; j < T; j++)
            out[j] = ST(0.0f);
    }
}

static void KN(softmax_causal_backward)(void *datt_, const void *att_, const float *dprob, int T,
                                        float scale)
{
    ACT *datt = datt_;
    const ACT *att = att_;
    for (int i = 0; i < T; i++) {
        const ACT *p = att + (size_t)i * T;
        const float *dp = dprob + (size_t)i * T;
        ACT *d = datt + (size_t)i * T;
        float dot = 0.0f;
        for (int j = 0; j <= i; j++)
            dot += LD(p[j]) * dp[j];
        for (int j = 0; j <= i; j++)
            d[j] = ST(scale * LD(p[j]) * (dp[j] - dot));
        for (int j = i + 1; j < T; j++)
            d[j] = ST(0.0f);
    }
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
    .layernorm_backward_input = KN(layernorm_backward_input),                                     \
    .layernorm_backward_weight = KN(layernorm_backward_weight), .gelu_forward = KN(gelu_forward), \
    .gelu_backward = KN(gelu_backward), .gelu_erf_forward = KN(gelu_erf_forward),                 \
    .gelu_erf_backward = KN(gelu_erf_backward), .relu_forward = KN(relu_forward),                 \
    .relu_backward = KN(relu_backward), .silu_forward = KN(silu_forward),                         \
    .silu_backward = KN(silu_backward), .bias_backward = KN(bias_backward), .add = KN(add),       \
    .add_floats = KN(add_floats), .accumulate = KN(accumulate),                                   \
    .softmax_causal_forward = KN(softmax_causal_forward),                                         \
    .softmax_causal_backward = KN(softmax_causal_backward),                                       \
    .crossentropy_forward = KN(crossentropy_forward),                                             \
    .crossentropy_backward = KN(crossentropy_backward), PT_KERNELS_LAYERS
