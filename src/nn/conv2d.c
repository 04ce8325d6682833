/* conv2d.c: the convolution pieces of conv.h and the conv2d block on them:
 *   in (Cin, H, W) -> out (Cout, OH, OW), OH = (H + 2 pad - k) / stride + 1
 * parameters <prefix>.weight (Cout, Cin, k, k) and, unless no_bias,
 * <prefix>.bias (Cout): torch.nn.Conv2d's names and layout.
 * Saved: every sample's col (what backward_weight multiplies), and one
 * sample's room for the col gradient that backward_input folds back. */
#include "nn/conv.h"

#include <math.h>
#include <stdio.h>

pt_conv pt_conv_make(int in_c, int H, int W, int out_c, int kernel, int stride, int pad)
{
    return (pt_conv){pt_window_make(in_c, H, W, kernel, kernel, stride, pad), out_c};
}

size_t pt_conv_in_elems(const pt_conv *c) { return (size_t)c->g.C * c->g.H * c->g.W; }
size_t pt_conv_out_elems(const pt_conv *c) { return (size_t)c->out_c * c->g.OH * c->g.OW; }

static int pointwise(const pt_conv *c)
{
    return c->g.kh == 1 && c->g.kw == 1 && c->g.stride == 1 && c->g.pad == 0;
}

static int col_rows(const pt_conv *c) { return c->g.C * c->g.kh * c->g.kw; }
static int positions(const pt_conv *c) { return c->g.OH * c->g.OW; }

size_t pt_conv_col_elems(const pt_conv *c)
{
    return pointwise(c) ? 0 : (size_t)col_rows(c) * positions(c);
}

int pt_conv_declare(pt_block *b, const char *prefix, const pt_conv *c, int no_bias)
{
    char name[96];
    int ws[4] = {c->out_c, c->g.C, c->g.kh, c->g.kw}, bs[1] = {c->out_c};
    snprintf(name, sizeof name, "%s.weight", prefix);
    int w = pt_block_declare(b, name, 4, ws, PT_INIT_NORMAL, sqrtf(2.0f / (float)col_rows(c)));
    if (w >= 0)
        b->decl[w].product_a = 1; /* out (Cout, P) = W (Cout, K) col (K, P) */
    if (!no_bias) {
        snprintf(name, sizeof name, "%s.bias", prefix);
        pt_block_declare(b, name, 1, bs, PT_INIT_ZEROS, 0.0f);
    }
    return w;
}

/* sample i's col: the input itself for a pointwise convolution */
static const void *col_of(const pt_block *b, const pt_conv *c, const void *col, const void *in,
                          int i)
{
    return pointwise(c) ? pt_elems_at(in, i * pt_conv_in_elems(c), b->k->act)
                        : pt_elems_at(col, i * pt_conv_col_elems(c), b->k->act);
}

void pt_conv_forward(const pt_block *b, int w, int bias, const pt_conv *c, void *out, void *col,
                     const void *in, int B)
{
    const pt_kernels *k = b->k;
    int K = col_rows(c), P = positions(c);
    for (int i = 0; i < B; i++) {
        void *o = pt_elems_at(out, i * pt_conv_out_elems(c), k->act);
        if (!pointwise(c))
            k->im2col(pt_elems_at(col, i * pt_conv_col_elems(c), k->act),
                      pt_elems_at(in, i * pt_conv_in_elems(c), k->act), &c->g);
        k->matmul(0, 0, c->out_c, P, K, 1.0f, pt_block_weight(b, w, K),
                  pt_block_act(b, col_of(b, c, col, in, i), P), 0.0f, pt_block_act(b, o, P), NULL);
        if (bias >= 0)
            k->channel_bias_forward(o, b->p[bias], c->out_c, P);
    }
}

void pt_conv_backward_input(const pt_block *b, int w, const pt_conv *c, void *din, void *dcol,
                            const void *dout, int B)
{
    const pt_kernels *k = b->k;
    int K = col_rows(c), P = positions(c);
    for (int i = 0; i < B; i++) {
        void *di = pt_elems_at(din, i * pt_conv_in_elems(c), k->act);
        const void *d = pt_elems_at(dout, i * pt_conv_out_elems(c), k->act);
        k->matmul(1, 0, K, P, c->out_c, 1.0f, pt_block_weight(b, w, K), pt_block_act(b, d, P), 0.0f,
                  pt_block_act(b, pointwise(c) ? di : dcol, P), NULL);
        if (!pointwise(c))
            k->col2im(di, dcol, &c->g);
    }
}

void pt_conv_backward_weight(pt_block *b, int w, int bias, const pt_conv *c, const void *dout,
                             const void *col, const void *in, int B)
{
    const pt_kernels *k = b->k;
    int K = col_rows(c), P = positions(c);
    for (int i = 0; i < B; i++) {
        const void *d = pt_elems_at(dout, i * pt_conv_out_elems(c), k->act);
        k->matmul(0, 1, c->out_c, K, P, 1.0f, pt_block_act(b, d, P),
                  pt_block_act(b, col_of(b, c, col, in, i), P), 1.0f, pt_mat_of(b->g[w], K, PT_F32),
                  NULL);
        if (bias >= 0)
            k->channel_bias_backward(b->g[bias], d, c->out_c, P);
    }
}

double pt_conv_flops(const pt_conv *c) { return 2.0 * c->out_c * col_rows(c) * positions(c); }

/* ---- the conv2d block ---- */

static pt_conv conv_of(const pt_block *b)
{
    const pt_block_shape *s = &b->shape;
    return pt_conv_make(s->channels, s->height, s->width, s->out_channels, s->kernel,
                        s->stride ? s->stride : 1, s->padding);
}

/* byte offsets into the saved area (the im2col columns, forward to W) and
 * the stage's workspace (one sample's column gradient, within a backward) */
typedef struct {
    size_t col, saved, dcol, work;
} conv2d_layout;

static conv2d_layout layout(const pt_block *b, int B)
{
    pt_conv c = conv_of(b);
    size_t at = 0;
    conv2d_layout l;
    l.col = pt_saved_take(&at, (size_t)B * pt_conv_col_elems(&c), b->k->act);
    l.saved = at, at = 0;
    l.dcol = pt_saved_take(&at, pt_conv_col_elems(&c), b->k->act);
    l.work = at;
    return l;
}

static size_t conv2d_saved(const pt_block *b, int B) { return layout(b, B).saved; }
static size_t conv2d_work(const pt_block *b, int B) { return layout(b, B).work; }

static int bias_index(const pt_block *b) { return b->shape.no_bias ? -1 : 1; }

// in (B,Cin,H,W) -> out (B,Cout,OH,OW)
static void conv2d_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out, void *s,
                           double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    pt_conv c = conv_of(b);
    pt_conv_forward(b, 0, bias_index(b), &c, out, pt_saved_at(s, layout(b, mb->batch).col), in,
                    mb->batch);
}

// dout (B,Cout,OH,OW) -> din (B,Cin,H,W)
static void conv2d_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                  void *s, const void *dout, void *din, float loss_scale)
{
    (void)in, (void)out, (void)s, (void)loss_scale;
    pt_conv c = conv_of(b);
    if (din)
        pt_conv_backward_input(b, 0, &c, din, pt_saved_at(b->work, layout(b, mb->batch).dcol), dout,
                               mb->batch);
}

static void conv2d_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                   const void *out, const void *s, const void *dout)
{
    (void)out;
    pt_conv c = conv_of(b);
    pt_conv_backward_weight(b, 0, bias_index(b), &c, dout, pt_saved_at(s, layout(b, mb->batch).col),
                            in, mb->batch);
}

static pt_block_cost conv2d_cost(const pt_block *b)
{
    pt_conv c = conv_of(b);
    double f = pt_conv_flops(&c), bias = b->shape.no_bias ? 0.0 : (double)pt_conv_out_elems(&c);
    return (pt_block_cost){
        .forward_flops = f + bias, .backward_input_flops = f, .backward_weight_flops = f + bias};
}

static const pt_block_ops conv2d_ops = {
    .kind = "conv2d",
    .saved_bytes = conv2d_saved,
    .work_bytes = conv2d_work,
    .forward = conv2d_forward,
    .backward_input = conv2d_backward_input,
    .backward_weight = conv2d_backward_weight,
    .cost = conv2d_cost,
};

void pt_conv2d_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    b->ops = &conv2d_ops;
    b->shape = *s;
    pt_conv c = conv_of(b);
    b->in_floats = (int)pt_conv_in_elems(&c);
    b->out_floats = (int)pt_conv_out_elems(&c);
    pt_conv_declare(b, prefix, &c, s->no_bias);
}
