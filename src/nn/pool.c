/* pool.c: the blocks that reshape images without parameters:
 *   maxpool         in (C,H,W) -> out (C,OH,OW), each window's maximum
 *                   (torch.nn.MaxPool2d: padding never wins);
 *   avgpool         in (C,H,W) -> out (C,OH,OW), each window's mean
 *                   (torch.nn.AvgPool2d, padding counted as zeros);
 *   global_avgpool  in (C,H,W) -> out (C), each channel's mean
 *                   (torch.nn.AdaptiveAvgPool2d(1) then flatten);
 *   flatten         in (C,H,W) -> out (C H W), the same floats.
 * Windows are kernel x kernel, stride (0: the kernel) and padding as the
 * shape says. Saved: the max pool's winners. */
#include <string.h>

#include "nn/block.h"

static pt_window window_of(const pt_block *b)
{
    const pt_block_shape *s = &b->shape;
    return pt_window_make(s->channels, s->height, s->width, s->kernel, s->kernel,
                          s->stride ? s->stride : s->kernel, s->padding);
}

static pt_window global_window(const pt_block *b)
{
    const pt_block_shape *s = &b->shape;
    return pt_window_make(s->channels, s->height, s->width, s->height, s->width, 1, 0);
}

/* one sample's input or output, i samples into p */
static void *sample(const pt_block *b, const void *p, int i, int floats)
{
    return pt_elems_at(p, (size_t)i * floats, b->k->act);
}

/* ---- max pool ---- */

static size_t maxpool_saved(const pt_block *b, int B)
{
    return (size_t)B * b->out_floats * sizeof(int);
}

// in (B,C,H,W) -> out (B,C,OH,OW); saved: argmax (B,C,OH,OW)
static void maxpool_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                            void *saved, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    pt_window g = window_of(b);
    for (int i = 0; i < mb->batch; i++)
        b->k->maxpool_forward(sample(b, out, i, b->out_floats), (int *)saved + i * b->out_floats,
                              sample(b, in, i, b->in_floats), &g);
}

// dout (B,C,OH,OW) -> din (B,C,H,W)
static void maxpool_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                   void *saved, const void *dout, void *din, float loss_scale)
{
    (void)in, (void)out, (void)loss_scale;
    pt_window g = window_of(b);
    for (int i = 0; din && i < mb->batch; i++)
        b->k->maxpool_backward(sample(b, din, i, b->in_floats),
                               (const int *)saved + i * b->out_floats,
                               sample(b, dout, i, b->out_floats), &g);
}

static pt_block_cost maxpool_cost(const pt_block *b)
{
    pt_window g = window_of(b);
    return (pt_block_cost){.forward_flops = (double)b->out_floats * g.kh * g.kw,
                           .backward_input_flops = b->in_floats};
}

/* ---- average pools: the global one is a window the size of the image ---- */

typedef pt_window (*window_fn)(const pt_block *b);

static window_fn avg_window(const pt_block *b)
{
    return strcmp(b->ops->kind, "global_avgpool") ? window_of : global_window;
}

// in (B,C,H,W) -> out (B,C,OH,OW)
static void avgpool_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                            void *saved, double *loss_sum, int *loss_rows)
{
    (void)saved, (void)loss_sum, (void)loss_rows;
    pt_window g = avg_window(b)(b);
    for (int i = 0; i < mb->batch; i++)
        b->k->avgpool_forward(sample(b, out, i, b->out_floats), sample(b, in, i, b->in_floats), &g);
}

// dout (B,C,OH,OW) -> din (B,C,H,W)
static void avgpool_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                   void *saved, const void *dout, void *din, float loss_scale)
{
    (void)in, (void)out, (void)saved, (void)loss_scale;
    pt_window g = avg_window(b)(b);
    for (int i = 0; din && i < mb->batch; i++)
        b->k->avgpool_backward(sample(b, din, i, b->in_floats), sample(b, dout, i, b->out_floats),
                               &g);
}

static pt_block_cost avgpool_cost(const pt_block *b)
{
    pt_window g = avg_window(b)(b);
    return (pt_block_cost){.forward_flops = (double)b->out_floats * g.kh * g.kw,
                           .backward_input_flops = (double)b->out_floats * g.kh * g.kw};
}

/* ---- flatten: (C,H,W) and (C H W) are the same floats ---- */

static void flatten_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                            void *saved, double *loss_sum, int *loss_rows)
{
    (void)saved, (void)loss_sum, (void)loss_rows;
    memcpy(out, in, (size_t)mb->batch * b->in_floats * pt_elem_size(b->k->act));
}

static void flatten_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                   void *saved, const void *dout, void *din, float loss_scale)
{
    (void)in, (void)out, (void)saved, (void)loss_scale;
    if (din)
        memcpy(din, dout, (size_t)mb->batch * b->in_floats * pt_elem_size(b->k->act));
}

static pt_block_cost flatten_cost(const pt_block *b)
{
    (void)b;
    return (pt_block_cost){0};
}

static const pt_block_ops maxpool_ops = {.kind = "maxpool",
                                         .saved_bytes = maxpool_saved,
                                         .forward = maxpool_forward,
                                         .backward_input = maxpool_backward_input,
                                         .backward_weight = pt_block_no_weights,
                                         .cost = maxpool_cost};

#define AVGPOOL_OPS(kind_name)                                                                \
    {                                                                                         \
        .kind = kind_name, .saved_bytes = pt_block_saves_nothing, .forward = avgpool_forward, \
        .backward_input = avgpool_backward_input, .backward_weight = pt_block_no_weights,     \
        .cost = avgpool_cost                                                                  \
    }

static const pt_block_ops avgpool_ops = AVGPOOL_OPS("avgpool");
static const pt_block_ops global_avgpool_ops = AVGPOOL_OPS("global_avgpool");

static const pt_block_ops flatten_ops = {.kind = "flatten",
                                         .saved_bytes = pt_block_saves_nothing,
                                         .forward = flatten_forward,
                                         .backward_input = flatten_backward_input,
                                         .backward_weight = pt_block_no_weights,
                                         .cost = flatten_cost};

static void image_init(pt_block *b, const pt_block_shape *s, const pt_block_ops *ops)
{
    b->ops = ops;
    b->shape = *s;
    b->in_floats = s->channels * s->height * s->width;
    pt_window g = ops == &global_avgpool_ops ? global_window(b) : window_of(b);
    b->out_floats = ops == &flatten_ops ? b->in_floats : g.C * g.OH * g.OW;
}

/* prefix: unused, these hold no parameters; it keeps every init's shape */
void pt_maxpool_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    (void)prefix;
    image_init(b, s, &maxpool_ops);
}

void pt_avgpool_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    (void)prefix;
    image_init(b, s, &avgpool_ops);
}

void pt_global_avgpool_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    (void)prefix;
    image_init(b, s, &global_avgpool_ops);
}

void pt_flatten_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    (void)prefix;
    image_init(b, s, &flatten_ops);
}
