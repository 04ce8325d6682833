/* residual.c: ResNet's basic block, with per-sample norms:
 *   a1 = conv1(x)              3x3, stride s, padding 1, Cin -> Cout
 *   h1 = relu(bn1(a1))
 *   a2 = conv2(h1)             3x3, stride 1, padding 1, Cout -> Cout
 *   skip = x, or bn_d(conv_d(x)) (1x1, stride s) when s != 1 or Cin != Cout
 *   out = relu(bn2(a2) + skip)
 *   in (Cin, H, W) -> out (Cout, OH, OW), OH = (H - 1) / s + 1
 * The norms are GroupNorm(groups, Cout) or LayerNorm over (Cout, OH, OW)
 * (groups = 0), not batch norm: batch statistics would differ with the
 * micro-batch size (image_norm.h). The convolutions have no bias, as
 * ResNet's. Parameters carry torchvision's BasicBlock names under the
 * prefix ("layer2.0"): conv1, bn1, conv2, bn2, downsample.0 (the 1x1
 * convolution) and downsample.1 (its norm).
 * backward_input leaves in `saved` the gradient at each convolution's
 * output and at each norm's output, so backward_weight is products and sums
 * only. */
#include <stdio.h>
#include <string.h>

#include "nn/conv.h"
#include "nn/image_norm.h"

enum { CONV1 = 0, BN1 = 1, CONV2 = 3, BN2 = 4, CONVD = 6, BND = 7 };

typedef struct {
    pt_conv c1, c2, cd;
    pt_image_norm n; /* every norm's: (Cout, OH, OW) */
    int projection;  /* the skip is conv_d and bn_d */
} residual_geometry;

static residual_geometry geometry_of(const pt_block *b)
{
    const pt_block_shape *s = &b->shape;
    int st = s->stride ? s->stride : 1, C = s->channels, O = s->out_channels;
    residual_geometry r;
    r.c1 = pt_conv_make(C, s->height, s->width, O, 3, st, 1);
    r.c2 = pt_conv_make(O, r.c1.g.OH, r.c1.g.OW, O, 3, 1, 1);
    r.cd = pt_conv_make(C, s->height, s->width, O, 1, st, 0);
    r.n =
        (pt_image_norm){O, r.c1.g.OH, r.c1.g.OW, s->groups, s->ln_eps != 0.0f ? s->ln_eps : 1e-5f};
    r.projection = st != 1 || C != O;
    return r;
}

/* Byte offsets for B samples into the saved area (what forward keeps), the
 * grads area (what backward_input leaves for backward_weight, from B to W
 * only) and the stage's workspace (what one pass needs and nothing after
 * it). */
typedef struct {
    size_t col1, a1, st1, h1, r1, col2, a2, st2, cold, ad, std, sum, saved;
    size_t dsum, da2, dh1, da1, dad, grads;
    size_t dskip, dcol, work;
} residual_layout;

static residual_layout layout(const pt_block *b, int B)
{
    residual_geometry r = geometry_of(b);
    pt_elem_type t = b->k->act;
    size_t N = (size_t)B * pt_conv_out_elems(&r.c1), stats = pt_image_norm_stats(&r.n, B);
    size_t skip = r.projection ? N : 0, at = 0;
    size_t dcol = pt_conv_col_elems(&r.c1);
    if (pt_conv_col_elems(&r.c2) > dcol)
        dcol = pt_conv_col_elems(&r.c2);
    if (pt_conv_col_elems(&r.cd) > dcol)
        dcol = pt_conv_col_elems(&r.cd);
    residual_layout l;
    l.col1 = pt_saved_take(&at, (size_t)B * pt_conv_col_elems(&r.c1), t);
    l.a1 = pt_saved_take(&at, N, t);
    l.st1 = pt_saved_take(&at, stats, PT_F32);
    l.h1 = pt_saved_take(&at, N, t);
    l.r1 = pt_saved_take(&at, N, t);
    l.col2 = pt_saved_take(&at, (size_t)B * pt_conv_col_elems(&r.c2), t);
    l.a2 = pt_saved_take(&at, N, t);
    l.st2 = pt_saved_take(&at, stats, PT_F32);
    l.cold = pt_saved_take(&at, r.projection ? (size_t)B * pt_conv_col_elems(&r.cd) : 0, t);
    l.ad = pt_saved_take(&at, skip, t);
    l.std = pt_saved_take(&at, r.projection ? stats : 0, PT_F32);
    l.sum = pt_saved_take(&at, N, t);
    l.saved = at, at = 0;
    l.dsum = pt_saved_take(&at, N, t);
    l.da2 = pt_saved_take(&at, N, t);
    l.dh1 = pt_saved_take(&at, N, t);
    l.da1 = pt_saved_take(&at, N, t);
    l.dad = pt_saved_take(&at, skip, t);
    l.grads = at, at = 0;
    l.dskip = pt_saved_take(&at, r.projection ? (size_t)B * pt_conv_in_elems(&r.c1) : 0, t);
    l.dcol = pt_saved_take(&at, dcol, t);
    l.work = at;
    return l;
}

static size_t residual_saved(const pt_block *b, int B) { return layout(b, B).saved; }
static size_t residual_grads(const pt_block *b, int B) { return layout(b, B).grads; }
static size_t residual_work(const pt_block *b, int B) { return layout(b, B).work; }

#define S(name)  pt_saved_at(s, l.name)
#define F(name)  pt_saved_floats(s, l.name)
#define G(name)  pt_saved_at(b->grads, l.name)
#define WK(name) pt_saved_at(b->work, l.name)

// in (B,Cin,H,W) -> out (B,Cout,OH,OW)
static void residual_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                             void *s, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    const pt_kernels *k = b->k;
    int B = mb->batch;
    residual_geometry r = geometry_of(b);
    residual_layout l = layout(b, B);
    size_t N = (size_t)B * pt_conv_out_elems(&r.c1);

    pt_conv_forward(b, CONV1, -1, &r.c1, S(a1), S(col1), in, B);
    pt_image_norm_forward(b, BN1, &r.n, S(h1), F(st1), S(a1), B);
    k->relu_forward(S(r1), S(h1), N);
    pt_conv_forward(b, CONV2, -1, &r.c2, S(a2), S(col2), S(r1), B);
    pt_image_norm_forward(b, BN2, &r.n, S(sum), F(st2), S(a2), B);
    if (r.projection) {
        pt_conv_forward(b, CONVD, -1, &r.cd, S(ad), S(cold), in, B);
        pt_image_norm_forward(b, BND, &r.n, out, F(std), S(ad), B);
        k->add(S(sum), S(sum), out, N);
    } else {
        k->add(S(sum), S(sum), in, N);
    }
    k->relu_forward(out, S(sum), N);
}

// dout (B,Cout,OH,OW) -> din (B,Cin,H,W)
static void residual_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                    void *s, const void *dout, void *din, float loss_scale)
{
    (void)in, (void)out, (void)loss_scale; /* the skip needs no input */
    const pt_kernels *k = b->k;
    int B = mb->batch;
    residual_geometry r = geometry_of(b);
    residual_layout l = layout(b, B);
    size_t N = (size_t)B * pt_conv_out_elems(&r.c1), n_in = (size_t)B * pt_conv_in_elems(&r.c1);

    k->relu_backward(G(dsum), S(sum), dout, N);
    pt_image_norm_backward_input(b, BN2, &r.n, G(da2), G(dsum), S(a2), F(st2), B);
    pt_conv_backward_input(b, CONV2, &r.c2, G(dh1), WK(dcol), G(da2), B);
    k->relu_backward(G(dh1), S(h1), G(dh1), N); /* elementwise: in place */
    pt_image_norm_backward_input(b, BN1, &r.n, G(da1), G(dh1), S(a1), F(st1), B);
    if (r.projection)
        pt_image_norm_backward_input(b, BND, &r.n, G(dad), G(dsum), S(ad), F(std), B);
    if (!din)
        return;
    pt_conv_backward_input(b, CONV1, &r.c1, din, WK(dcol), G(da1), B);
    if (r.projection) {
        pt_conv_backward_input(b, CONVD, &r.cd, WK(dskip), WK(dcol), G(dad), B);
        k->add(din, din, WK(dskip), n_in);
    } else {
        k->add(din, din, G(dsum), n_in);
    }
}

static void residual_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                     const void *out, const void *s, const void *dout)
{
    (void)out, (void)dout;
    int B = mb->batch;
    residual_geometry r = geometry_of(b);
    residual_layout l = layout(b, B);

    pt_conv_backward_weight(b, CONV2, -1, &r.c2, G(da2), S(col2), S(r1), B);
    pt_image_norm_backward_weight(b, BN2, &r.n, G(dsum), S(a2), F(st2), B);
    pt_conv_backward_weight(b, CONV1, -1, &r.c1, G(da1), S(col1), in, B);
    pt_image_norm_backward_weight(b, BN1, &r.n, G(dh1), S(a1), F(st1), B);
    if (r.projection) {
        pt_conv_backward_weight(b, CONVD, -1, &r.cd, G(dad), S(cold), in, B);
        pt_image_norm_backward_weight(b, BND, &r.n, G(dsum), S(ad), F(std), B);
    }
}

#undef S
#undef F
#undef G
#undef WK

static pt_block_cost residual_cost(const pt_block *b)
{
    residual_geometry r = geometry_of(b);
    pt_block_cost n = pt_image_norm_cost(&r.n);
    double conv = pt_conv_flops(&r.c1) + pt_conv_flops(&r.c2), e = pt_conv_out_elems(&r.c1);
    int norms = 2;
    if (r.projection)
        conv += pt_conv_flops(&r.cd), norms = 3;
    return (pt_block_cost){
        .forward_flops = conv + norms * n.forward_flops + 3 * e,
        .backward_input_flops = conv + norms * n.backward_input_flops + 3 * e,
        .backward_weight_flops = conv + norms * n.backward_weight_flops,
    };
}

static const pt_block_ops residual_ops = {
    .kind = "residual",
    .saved_bytes = residual_saved,
    .grads_bytes = residual_grads,
    .work_bytes = residual_work,
    .forward = residual_forward,
    .backward_input = residual_backward_input,
    .backward_weight = residual_backward_weight,
    .cost = residual_cost,
};

void pt_residual_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    char name[96];
    b->ops = &residual_ops;
    b->shape = *s;
    residual_geometry r = geometry_of(b);
    b->in_floats = (int)pt_conv_in_elems(&r.c1);
    b->out_floats = (int)pt_conv_out_elems(&r.c1);
#define DECLARE(part, call) (snprintf(name, sizeof name, "%s." part, prefix), call)
    DECLARE("conv1", pt_conv_declare(b, name, &r.c1, 1));
    DECLARE("bn1", pt_image_norm_declare(b, name, &r.n));
    DECLARE("conv2", pt_conv_declare(b, name, &r.c2, 1));
    DECLARE("bn2", pt_image_norm_declare(b, name, &r.n));
    if (r.projection) {
        DECLARE("downsample.0", pt_conv_declare(b, name, &r.cd, 1));
        DECLARE("downsample.1", pt_image_norm_declare(b, name, &r.n));
    }
#undef DECLARE
}
