/* kernels_layers_body.h: the seam's kernels for images (im2col and its
 * adjoint, per-channel bias, pools, GroupNorm), for the Llama block
 * (RMSNorm, rotary positions, SwiGLU) and for the mean-squared error head.
 * Included by kernels_body.h, under the same ACT, LD, ST and KN, so each
 * exists once per activation type. Everything is computed in float (the
 * statistics of large groups in double) and an activation is rounded once,
 * where it is written: the backward passes gather what they sum instead of
 * adding into a rounded output. */

/* ---- windows over images ---- */

/* the output positions o (of n) whose window o * stride - pad + k covers
 * pixel i, for every k in 0..kernel-1: o from *lo to *hi - 1 */
static inline void window_span(int i, int kernel, int stride, int pad, int n, int *lo, int *hi)
{
    int top = i + pad - kernel + 1; /* the first window's start that still covers i */
    *lo = top <= 0 ? 0 : (top + stride - 1) / stride;
    *hi = (i + pad) / stride + 1;
    *hi = *hi > n ? n : *hi;
}

/* ceil(a / b) for b > 0 and a of either sign */
static inline int ceil_div(int a, int b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); }

/* the output positions o (of n) whose tap at o * stride + off falls inside
 * 0..size-1: o from *lo to *hi - 1 */
static inline void tap_span(int off, int stride, int size, int n, int *lo, int *hi)
{
    *lo = ceil_div(-off, stride);
    *lo = *lo < 0 ? 0 : *lo;
    *hi = ceil_div(size - off, stride);
    *hi = *hi > n ? n : *hi;
    *hi = *hi < *lo ? *lo : *hi;
}

static void KN(im2col)(void *col_, const void *img_, const pt_window *g)
{
    ACT *col = col_;
    const ACT *img = img_;
    size_t P = (size_t)g->OH * g->OW;
    for (int c = 0; c < g->C; c++)
        for (int ky = 0; ky < g->kh; ky++)
            for (int kx = 0; kx < g->kw; kx++) {
                ACT *row = col + ((size_t)(c * g->kh + ky) * g->kw + kx) * P;
                int lo, hi, off = kx - g->pad, s = g->stride;
                tap_span(off, s, g->W, g->OW, &lo, &hi);
                for (int oy = 0; oy < g->OH; oy++) {
                    int iy = oy * s - g->pad + ky;
                    ACT *o = row + (size_t)oy * g->OW;
                    if (iy < 0 || iy >= g->H) {
                        for (int ox = 0; ox < g->OW; ox++)
                            o[ox] = ST(0.0f);
                        continue;
                    }
                    const ACT *src = img + ((size_t)c * g->H + iy) * g->W + off;
                    for (int ox = 0; ox < lo; ox++)
                        o[ox] = ST(0.0f);
                    if (s == 1)
                        memcpy(o + lo, src + lo, (size_t)(hi - lo) * sizeof(ACT));
                    else
                        for (int ox = lo; ox < hi; ox++)
                            o[ox] = src[ox * s];
                    for (int ox = hi; ox < g->OW; ox++)
                        o[ox] = ST(0.0f);
                }
            }
}

/* Gathers, pixel row by pixel row, in float: each pixel's sum is rounded
 * once. ACC_W pixels of a row at a time. */
#define ACC_W 512

static void KN(col2im)(void *img_, const void *col_, const pt_window *g)
{
    ACT *img = img_;
    const ACT *col = col_;
    size_t P = (size_t)g->OH * g->OW;
    int s = g->stride;
    float acc[ACC_W];
    for (int c = 0; c < g->C; c++)
        for (int y = 0; y < g->H; y++)
            for (int x0 = 0; x0 < g->W; x0 += ACC_W) {
                int n = g->W - x0 < ACC_W ? g->W - x0 : ACC_W;
                for (int x = 0; x < n; x++)
                    acc[x] = 0.0f;
                for (int ky = 0; ky < g->kh; ky++) {
                    int oy = y + g->pad - ky;
                    if (oy < 0 || oy % s || oy / s >= g->OH)
                        continue;
                    oy /= s;
                    for (int kx = 0; kx < g->kw; kx++) {
                        const ACT *row =
                            col + ((size_t)(c * g->kh + ky) * g->kw + kx) * P + (size_t)oy * g->OW;
                        /* output ox reads pixel x0 + x, x = ox s + off */
                        int lo, hi, off = kx - g->pad - x0;
                        tap_span(off, s, n, g->OW, &lo, &hi);
                        if (s == 1)
                            for (int ox = lo; ox < hi; ox++)
                                acc[ox + off] += LD(row[ox]);
                        else
                            for (int ox = lo; ox < hi; ox++)
                                acc[ox * s + off] += LD(row[ox]);
                    }
                }
                ACT *o = img + ((size_t)c * g->H + y) * g->W + x0;
                for (int x = 0; x < n; x++)
                    o[x] = ST(acc[x]);
            }
}

static void KN(channel_bias_forward)(void *out_, const float *bias, int C, int P)
{
    ACT *out = out_;
    for (int c = 0; c < C; c++) {
        ACT *o = out + (size_t)c * P;
        for (int p = 0; p < P; p++)
            o[p] = ST(LD(o[p]) + bias[c]);
    }
}

static void KN(channel_bias_backward)(float *dbias, const void *dout_, int C, int P)
{
    const ACT *dout = dout_;
    for (int c = 0; c < C; c++) {
        const ACT *d = dout + (size_t)c * P;
        float s = 0.0f;
        for (int p = 0; p < P; p++)
            s += LD(d[p]);
        dbias[c] += s;
    }
}

static void KN(maxpool_forward)(void *out_, int *argmax, const void *inp_, const pt_window *g)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    for (int c = 0; c < g->C; c++) {
        const ACT *x = inp + (size_t)c * g->H * g->W;
        for (int oy = 0; oy < g->OH; oy++)
            for (int ox = 0; ox < g->OW; ox++) {
                float best = -INFINITY;
                int at = -1;
                for (int ky = 0; ky < g->kh; ky++) {
                    int iy = oy * g->stride - g->pad + ky;
                    for (int kx = 0; iy >= 0 && iy < g->H && kx < g->kw; kx++) {
                        int ix = ox * g->stride - g->pad + kx;
                        if (ix >= 0 && ix < g->W && (at < 0 || LD(x[iy * g->W + ix]) > best))
                            best = LD(x[iy * g->W + ix]), at = iy * g->W + ix;
                    }
                }
                size_t o = ((size_t)c * g->OH + oy) * g->OW + ox;
                out[o] = ST(best);
                argmax[o] = at;
            }
    }
}

/* dinp (C,H,W) = scale times the sum of dout over the windows covering each
 * pixel (all of them, or with argmax those the pixel won) */
static void KN(pool_gather)(void *dinp_, const int *argmax, const void *dout_, const pt_window *g,
                            float scale)
{
    ACT *dinp = dinp_;
    const ACT *dout = dout_;
    for (int c = 0; c < g->C; c++)
        for (int y = 0; y < g->H; y++) {
            int oy0, oy1;
            window_span(y, g->kh, g->stride, g->pad, g->OH, &oy0, &oy1);
            for (int x = 0; x < g->W; x++) {
                int ox0, ox1;
                window_span(x, g->kw, g->stride, g->pad, g->OW, &ox0, &ox1);
                float s = 0.0f;
                for (int oy = oy0; oy < oy1; oy++)
                    for (int ox = ox0; ox < ox1; ox++) {
                        size_t o = ((size_t)c * g->OH + oy) * g->OW + ox;
                        if (!argmax || argmax[o] == y * g->W + x)
                            s += LD(dout[o]);
                    }
                dinp[((size_t)c * g->H + y) * g->W + x] = ST(s * scale);
            }
        }
}

static void KN(maxpool_backward)(void *dinp, const int *argmax, const void *dout,
                                 const pt_window *g)
{
    KN(pool_gather)(dinp, argmax, dout, g, 1.0f);
}

static void KN(avgpool_forward)(void *out_, const void *inp_, const pt_window *g)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    float inv = 1.0f / (float)(g->kh * g->kw);
    for (int c = 0; c < g->C; c++) {
        const ACT *x = inp + (size_t)c * g->H * g->W;
        for (int oy = 0; oy < g->OH; oy++)
            for (int ox = 0; ox < g->OW; ox++) {
                float s = 0.0f;
                for (int ky = 0; ky < g->kh; ky++) {
                    int iy = oy * g->stride - g->pad + ky;
                    for (int kx = 0; iy >= 0 && iy < g->H && kx < g->kw; kx++) {
                        int ix = ox * g->stride - g->pad + kx;
                        if (ix >= 0 && ix < g->W)
                            s += LD(x[iy * g->W + ix]);
                    }
                }
                out[((size_t)c * g->OH + oy) * g->OW + ox] = ST(s * inv);
            }
    }
}

static void KN(avgpool_backward)(void *dinp, const void *dout, const pt_window *g)
{
    KN(pool_gather)(dinp, NULL, dout, g, 1.0f / (float)(g->kh * g->kw));
}

/* ---- GroupNorm: a group of a sample is C/G channels of HW, contiguous ---- */

static void KN(groupnorm_forward)(void *out_, float *mean, float *rstd, const void *inp_,
                                  const float *w, const float *b, int N, int C, int HW, int G,
                                  float eps)
{
    ACT *out = out_;
    const ACT *inp = inp_;
    int Cg = C / G;
    size_t n = (size_t)Cg * HW;
    for (int i = 0; i < N * G; i++) {
        const ACT *x = inp + (size_t)i * n;
        ACT *o = out + (size_t)i * n;
        double sum = 0.0, sq = 0.0;
        for (size_t j = 0; j < n; j++)
            sum += LD(x[j]);
        float m = (float)(sum / (double)n);
        for (size_t j = 0; j < n; j++) {
            float d = LD(x[j]) - m;
            sq += (double)d * d;
        }
        float s = 1.0f / sqrtf((float)(sq / (double)n) + eps);
        for (int c = 0; c < Cg; c++) {
            int ch = (i % G) * Cg + c;
            for (int p = 0; p < HW; p++) {
                size_t j = (size_t)c * HW + p;
                o[j] = ST((LD(x[j]) - m) * s * w[ch] + b[ch]);
            }
        }
        mean[i] = m;
        rstd[i] = s;
    }
}

static void KN(groupnorm_backward_input)(void *dinp_, const void *dout_, const void *inp_,
                                         const float *w, const float *mean, const float *rstd,
                                         int N, int C, int HW, int G)
{
    ACT *dinp = dinp_;
    const ACT *dout = dout_, *inp = inp_;
    int Cg = C / G;
    size_t n = (size_t)Cg * HW;
    for (int i = 0; i < N * G; i++) {
        const ACT *x = inp + (size_t)i * n, *dy = dout + (size_t)i * n;
        ACT *dx = dinp + (size_t)i * n;
        float m = mean[i], s = rstd[i];
        double sum_d = 0.0, sum_dx = 0.0;
        for (int c = 0; c < Cg; c++) {
            float wc = w[(i % G) * Cg + c];
            for (int p = 0; p < HW; p++) {
                size_t j = (size_t)c * HW + p;
                float dxhat = LD(dy[j]) * wc;
                sum_d += dxhat;
                sum_dx += dxhat * (LD(x[j]) - m) * s;
            }
        }
        float md = (float)(sum_d / (double)n), mdx = (float)(sum_dx / (double)n);
        for (int c = 0; c < Cg; c++) {
            float wc = w[(i % G) * Cg + c];
            for (int p = 0; p < HW; p++) {
                size_t j = (size_t)c * HW + p;
                float xhat = (LD(x[j]) - m) * s;
                dx[j] = ST(s * (LD(dy[j]) * wc - md - xhat * mdx));
            }
        }
    }
}

static void KN(groupnorm_backward_weight)(float *dw, float *db, const void *dout_, const void *inp_,
                                          const float *mean, const float *rstd, int N, int C,
                                          int HW, int G)
{
    const ACT *dout = dout_, *inp = inp_;
    int Cg = C / G;
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) {
            size_t at = ((size_t)i * C + c) * HW;
            const ACT *x = inp + at, *dy = dout + at;
            float m = mean[i * G + c / Cg], s = rstd[i * G + c / Cg], sw = 0.0f, sb = 0.0f;
            for (int p = 0; p < HW; p++) {
                sw += LD(dy[p]) * (LD(x[p]) - m) * s;
                sb += LD(dy[p]);
            }
            dw[c] += sw;
            db[c] += sb;
        }
}

/* ---- the Llama block's pieces ---- */

static void KN(rmsnorm_rows)(void *arg, size_t lo, size_t hi)
{
    const KN(norm_pass) *p = arg;
    size_t C = (size_t)p->C;
    for (size_t i = lo; i < hi; i++) {
        const ACT *x = p->inp + i * C;
        ACT *o = p->out + i * C;
        float sq = KN(row_moment)(x, 0.0f, 2, (int)C);
        float s = 1.0f / sqrtf(sq / (float)C + p->eps);
        for (size_t c = 0; c < C; c++)
            o[c] = ST(p->w[c] * (LD(x[c]) * s));
        p->rstd[i] = s;
    }
}

static void KN(rmsnorm_forward)(void *out, float *rstd, const void *inp, const float *w, int N,
                                int C, float eps)
{
    KN(norm_pass) p = {.out = out, .rstd = rstd, .inp = inp, .w = w, .C = C, .eps = eps};
    pt_parallel_ranges(pass_threads(), (size_t)N, least_rows((size_t)C), 1, KN(rmsnorm_rows), &p);
}

/* dx = s (dxhat - xhat mean(dxhat xhat)), dxhat = dy w, xhat = x s */
static void KN(rmsnorm_backward_rows)(void *arg, size_t lo, size_t hi)
{
    const KN(norm_pass) *p = arg;
    size_t C = (size_t)p->C;
    const float *w = p->w;
    for (size_t i = lo; i < hi; i++) {
        const ACT *x = p->inp + i * C, *dy = p->dout + i * C;
        ACT *dx = p->dinp + i * C;
        float s = p->crstd[i], acc[LANES] = {0}, dot;
        size_t c = 0;
        for (; c + LANES <= C; c += LANES)
            for (int l = 0; l < LANES; l++)
                acc[l] += LD(dy[c + l]) * w[c + l] * LD(x[c + l]) * s;
        for (dot = KN(lanes_total)(acc); c < C; c++)
            dot += LD(dy[c]) * w[c] * LD(x[c]) * s;
        dot /= (float)C;
        for (c = 0; c < C; c++)
            dx[c] = ST(LD(dx[c]) + s * (LD(dy[c]) * w[c] - LD(x[c]) * s * dot));
    }
}

static void KN(rmsnorm_backward_input)(void *dinp, const void *dout, const void *inp,
                                       const float *w, const float *rstd, int N, int C)
{
    KN(norm_pass) p = {.dinp = dinp, .dout = dout, .inp = inp, .w = w, .crstd = rstd, .C = C};
    pt_parallel_ranges(pass_threads(), (size_t)N, least_rows((size_t)C), 1,
                       KN(rmsnorm_backward_rows), &p);
}

/* columns lo .. hi-1 of dw, each summed over the rows in order */
static void KN(rmsnorm_weight_columns)(void *arg, size_t lo, size_t hi)
{
    const KN(norm_pass) *p = arg;
    size_t C = (size_t)p->C;
    for (int i = 0; i < p->N; i++) {
        const ACT *x = p->inp + (size_t)i * C, *dy = p->dout + (size_t)i * C;
        for (size_t c = lo; c < hi; c++)
            p->dw[c] += LD(dy[c]) * (LD(x[c]) * p->crstd[i]);
    }
}

static void KN(rmsnorm_backward_weight)(float *dw, const void *dout, const void *inp,
                                        const float *rstd, int N, int C)
{
    KN(norm_pass) p = {.dw = dw, .dout = dout, .inp = inp, .crstd = rstd, .N = N, .C = C};
    pt_parallel_ranges(pass_threads(), (size_t)C, least_rows((size_t)N), 16,
                       KN(rmsnorm_weight_columns), &p);
}

static void KN(rope)(void *x_, int ld, int T, int heads, int hd, const float *cos, const float *sin,
                     int inverse)
{
    ACT *x = x_;
    int half = hd / 2;
    float sign = inverse ? -1.0f : 1.0f;
    for (int t = 0; t < T; t++) {
        const float *c = cos + (size_t)t * half, *s = sin + (size_t)t * half;
        for (int h = 0; h < heads; h++) {
            ACT *v = x + (size_t)t * ld + (size_t)h * hd;
            for (int j = 0; j < half; j++) {
                float a = LD(v[j]), b = LD(v[j + half]), sn = sign * s[j];
                v[j] = ST(a * c[j] - b * sn);
                v[j + half] = ST(b * c[j] + a * sn);
            }
        }
    }
}

static void KN(swiglu_forward_serial)(void *out_, const void *gate_, const void *up_, size_t n)
{
    ACT *out = out_;
    const ACT *gate = gate_, *up = up_;
    for (size_t i = 0; i < n; i++) {
        float g = LD(gate[i]);
        out[i] = ST(g * fast_sigmoidf(g) * LD(up[i]));
    }
}

SPLIT_TWO(swiglu_forward, void, sizeof(ACT), void, sizeof(ACT), void, sizeof(ACT))

typedef struct {
    ACT *dgate, *dup;
    const ACT *gate, *up, *dout;
} KN(swiglu_pass);

static void KN(swiglu_backward_range)(void *arg, size_t lo, size_t hi)
{
    const KN(swiglu_pass) *p = arg;
    for (size_t i = lo; i < hi; i++) {
        float g = LD(p->gate[i]), sg = fast_sigmoidf(g), d = LD(p->dout[i]);
        p->dup[i] = ST(d * g * sg);
        p->dgate[i] = ST(d * LD(p->up[i]) * sg * (1.0f + g * (1.0f - sg)));
    }
}

static void KN(swiglu_backward)(void *dgate, void *dup, const void *gate, const void *up,
                                const void *dout, size_t n)
{
    KN(swiglu_pass) p = {dgate, dup, gate, up, dout};
    pt_parallel_ranges(pass_threads(), n, SPLIT_LEAST, SPLIT_ALIGN, KN(swiglu_backward_range), &p);
}

/* ---- the mean-squared error head ---- */

static double KN(mse_forward)(float *pred, const void *inp_, const float *targets, int N, int n)
{
    const ACT *inp = inp_;
    double loss = 0.0;
    for (int i = 0; i < N; i++) {
        double row = 0.0;
        for (int j = 0; j < n; j++) {
            size_t at = (size_t)i * n + j;
            pred[at] = LD(inp[at]);
            if (targets) {
                double d = (double)pred[at] - targets[at];
                row += d * d;
            }
        }
        loss += row / n;
    }
    return loss;
}

static void KN(mse_backward)(void *dinp_, const float *pred, const float *targets, int N, int n,
                             float scale)
{
    ACT *dinp = dinp_;
    for (size_t i = 0; i < (size_t)N * n; i++)
        dinp[i] = ST(scale * (pred[i] - targets[i]));
}

#define PT_KERNELS_LAYERS                                                                         \
    .im2col = KN(im2col), .col2im = KN(col2im), .channel_bias_forward = KN(channel_bias_forward), \
    .channel_bias_backward = KN(channel_bias_backward), .maxpool_forward = KN(maxpool_forward),   \
    .maxpool_backward = KN(maxpool_backward), .avgpool_forward = KN(avgpool_forward),             \
    .avgpool_backward = KN(avgpool_backward), .groupnorm_forward = KN(groupnorm_forward),         \
    .groupnorm_backward_input = KN(groupnorm_backward_input),                                     \
    .groupnorm_backward_weight = KN(groupnorm_backward_weight),                                   \
    .rmsnorm_forward = KN(rmsnorm_forward), .rmsnorm_backward_input = KN(rmsnorm_backward_input), \
    .rmsnorm_backward_weight = KN(rmsnorm_backward_weight), .rope = KN(rope),                     \
    .swiglu_forward = KN(swiglu_forward), .swiglu_backward = KN(swiglu_backward),                 \
    .mse_forward = KN(mse_forward), .mse_backward = KN(mse_backward)
