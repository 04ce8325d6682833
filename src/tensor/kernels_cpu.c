/* kernels_cpu.c: the fp32 CPU backend of the kernel seam (kernels.h).
 *
 * Products go to OpenBLAS's cblas_sgemm; everything memory-bound (layernorm,
 * the activations, softmax, residuals, the loss) is one pass over its rows,
 * so the time of a step is dominated by the products. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "tensor/kernels.h"

/* exp(x) without a libm call, so loops over it vectorise: x = n ln2 + r with
 * |r| <= ln2/2, e^r by its degree-6 Taylor polynomial (relative error below
 * 2e-7), and 2^n put into the exponent bits. Inputs are clamped to where
 * float exp is finite and normal. */
static inline float fast_expf(float x)
{
    float given = x;
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    x = x == x ? x : 0.0f; /* NaN: no integer of it below; the result is NaN again */
    /* round to nearest by adding and taking away 1.5 * 2^23: no libm call */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f; /* ln2 in two parts */
    float p =
        1.0f +
        r * (1.0f +
             r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    int bits = ((int)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return given == given ? p * scale : given; /* selects: the loop still vectorises */
}

/* tanh(u) = 1 - 2 / (e^{2u} + 1): absolute error about 1e-7, which is what
 * GELU's 0.5 x (1 + tanh) needs. */
static inline float fast_tanhf(float u) { return 1.0f - 2.0f / (fast_expf(2.0f * u) + 1.0f); }

/* erf(x) by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7) on
 * |x|, the sign put back after: no libm call, so the loops over it
 * vectorise and give the same bits everywhere. */
static inline float fast_erff(float x)
{
    float a = fabsf(x), t = 1.0f / (1.0f + 0.3275911f * a);
    float p =
        t * (0.254829592f +
             t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    return copysignf(1.0f - p * fast_expf(-a * a), x);
}

static inline float fast_sigmoidf(float x) { return 1.0f / (1.0f + fast_expf(-x)); }

static void cpu_matmul(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                  const float *w, const float *b, int N, int C, float eps)
{
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float *o = out + (size_t)i * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++)
            m += x[c];
        m /= C;
        float v = 0.0f;
        for (int c = 0; c < C; c++) {
            float d = x[c] - m;
            v += d * d;
        }
        v /= C;
        float s = 1.0f / sqrtf(v + eps);
        for (int c = 0; c < C; c++)
            o[c] = (x[c] - m) * s * w[c] + b[c];
        mean[i] = m;
        rstd[i] = s;
    }
}

static void cpu_layernorm_backward_input(float *dinp, const float *dout, const float *inp,
                                         const float *w, const float *mean, const float *rstd,
                                         int N, int C)
{
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
        float *dx = dinp + (size_t)i * C;
        float m = mean[i], s = rstd[i];
        /* dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) */
        float sum_d = 0.0f, sum_dx = 0.0f;
        for (int c = 0; c < C; c++) {
            float dxhat = dy[c] * w[c];
            sum_d += dxhat;
            sum_dx += dxhat * (x[c] - m) * s;
        }
        sum_d /= C;
        sum_dx /= C;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s;
            dx[c] += s * (dy[c] * w[c] - sum_d - xhat * sum_dx);
        }
    }
}

static void cpu_layernorm_backward_weight(float *dw, float *db, const float *dout, const float *inp,
                                          const float *mean, const float *rstd, int N, int C)
{
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
        float m = mean[i], s = rstd[i];
        for (int c = 0; c < C; c++) {
            dw[c] += dy[c] * (x[c] - m) * s;
            db[c] += dy[c];
        }
    }
}

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */

static void cpu_gelu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + fast_tanhf(u));
    }
}

static void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float t = fast_tanhf(u);
        float sech2 = 1.0f - t * t;
        float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = dout[i] * (0.5f * (1.0f + t) + 0.5f * x * sech2 * du);
    }
}

#define SQRT_HALF    0.7071067811865476f /* 1 / sqrt 2 */
#define INV_SQRT_2PI 0.3989422804014327f /* the normal density's 1 / sqrt(2 pi) */

static void cpu_gelu_erf_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + fast_erff(x * SQRT_HALF));
    }
}

/* d/dx x Phi(x) = Phi(x) + x phi(x) */
static void cpu_gelu_erf_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float cdf = 0.5f * (1.0f + fast_erff(x * SQRT_HALF));
        float pdf = INV_SQRT_2PI * fast_expf(-0.5f * x * x);
        dinp[i] = dout[i] * (cdf + x * pdf);
    }
}

static void cpu_silu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = inp[i] * fast_sigmoidf(inp[i]);
}

/* d/dx x s(x) = s (1 + x (1 - s)) */
static void cpu_silu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i], sg = fast_sigmoidf(x);
        dinp[i] = dout[i] * sg * (1.0f + x * (1.0f - sg));
    }
}

static void cpu_relu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

static void cpu_relu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dinp[i] = inp[i] > 0.0f ? dout[i] : 0.0f;
}

static void cpu_bias_add(float *out, const float *bias, int N, int C)
{
    for (int i = 0; i < N; i++) {
        float *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++)
            o[c] += bias[c];
    }
}

static void cpu_bias_backward(float *dbias, const float *dout, int N, int C)
{
    for (int i = 0; i < N; i++) {
        const float *d = dout + (size_t)i * C;
        for (int c = 0; c < C; c++)
            dbias[c] += d[c];
    }
}

static void cpu_add(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

static void cpu_softmax_causal_forward(float *att, int T, float scale)
{
    for (int i = 0; i < T; i++) {
        float *row = att + (size_t)i * T;
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
            row[j] *= inv;
        for (int j = i + 1; j < T; j++)
            row[j] = 0.0f;
    }
}

static void cpu_softmax_causal_backward(float *datt, const float *att, const float *dprob, int T,
                                        float scale)
{
    for (int i = 0; i < T; i++) {
        const float *p = att + (size_t)i * T, *dp = dprob + (size_t)i * T;
        float *d = datt + (size_t)i * T;
        float dot = 0.0f;
        for (int j = 0; j <= i; j++)
            dot += p[j] * dp[j];
        for (int j = 0; j <= i; j++)
            d[j] = scale * p[j] * (dp[j] - dot);
        for (int j = i + 1; j < T; j++)
            d[j] = 0.0f;
    }
}

static double cpu_crossentropy_forward(float *probs, const int *targets, int N, int V)
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

static void cpu_crossentropy_backward(float *probs, const int *targets, int N, int V, float scale)
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

static const pt_kernels cpu_kernels = {
    .name = "cpu-fp32",
    .matmul = cpu_matmul,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward_input = cpu_layernorm_backward_input,
    .layernorm_backward_weight = cpu_layernorm_backward_weight,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .gelu_erf_forward = cpu_gelu_erf_forward,
    .gelu_erf_backward = cpu_gelu_erf_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .silu_forward = cpu_silu_forward,
    .silu_backward = cpu_silu_backward,
    .bias_add = cpu_bias_add,
    .bias_backward = cpu_bias_backward,
    .add = cpu_add,
    .softmax_causal_forward = cpu_softmax_causal_forward,
    .softmax_causal_backward = cpu_softmax_causal_backward,
    .crossentropy_forward = cpu_crossentropy_forward,
    .crossentropy_backward = cpu_crossentropy_backward,
};

const pt_kernels *pt_kernels_cpu(void) { return &cpu_kernels; }
