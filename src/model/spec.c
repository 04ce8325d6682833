/* spec.c: the layer table and building a model from a list of layers.
 *
 * Every model is a list of layers (spec.h): a spec's text parsed by
 * spec_parse.c, or the list gpt.c and mlp.c write for their configs. This
 * file walks the list once: each layer's table entry checks that its
 * arguments fit the flow entering it (widths chain), says what flows out,
 * and initialises its block. The partitioner, schedules and stages see
 * only the blocks.
 *
 * Adding a kind of layer is one row of `table` below:
 *   1. write the block as a pt_block_ops in its own file under src/nn/,
 *      with its init (pt_block *, const pt_block_shape *, const char
 *      *prefix) declared in nn/block.h, its parameters named
 *      "<prefix>.<name>", and a loss head setting b->labels and b->classes
 *      (or b->values) to what it compares against;
 *   2. add {name, args, role, chain, init, doc} here: args names its
 *      arguments in order ("in out bias=1": a default after '='), chain
 *      checks them against the flow entering (pt_flow: a vector, a
 *      sequence (T, C) or an image (C, H, W)) and fills the block's shape
 *      and the flow leaving; reuse chain_same for elementwise layers;
 *   3. list it in docs/models.md, and add its gradient check under tests/.
 * A layer is one block; a layer that should cut into several blocks can
 * append them itself in pt_layers_build (they share its layer number, so
 * a balance still counts it once). */
#include "model/spec.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/linear.h"
#include "tensor/error.h"

int pt_flow_width(const pt_flow *f) { return f->rank ? f->dim[f->rank - 1] : 0; }

int pt_flow_rows(const pt_flow *f)
{
    int n = 1;
    for (int i = 0; i + 1 < f->rank; i++)
        n *= f->dim[i];
    return n;
}

int pt_flow_floats(const pt_flow *f) { return pt_flow_rows(f) * pt_flow_width(f); }

static void flow_text(const pt_flow *f, char *buf, size_t n)
{
    if (f->tokens)
        snprintf(buf, n, "%d tokens", f->dim[0]);
    else if (f->rank == 1)
        snprintf(buf, n, "(%d)", f->dim[0]);
    else if (f->rank == 2)
        snprintf(buf, n, "(%d, %d)", f->dim[0], f->dim[1]);
    else
        snprintf(buf, n, "(%d, %d, %d)", f->dim[0], f->dim[1], f->dim[2]);
}

static pt_flow vector(int n) { return (pt_flow){.rank = 1, .dim = {n}}; }
static pt_flow sequence(int T, int C) { return (pt_flow){.rank = 2, .dim = {T, C}}; }

/* A flow of floats whose last dimension is `width` (rank 0: any). */
static int expect_width(const pt_flow *in, int width, const char *arg, char *why, size_t n)
{
    char got[48];
    flow_text(in, got, sizeof got);
    if (in->tokens)
        return snprintf(why, n, "reads floats, but %s enter it (put an embedding first)", got), -1;
    if (in->rank && pt_flow_width(in) != width)
        return snprintf(why, n, "%s is %d, but %s enter it", arg, width, got), -1;
    if (width < 1)
        return snprintf(why, n, "%s is %d; it must be >= 1", arg, width), -1;
    return 0;
}

/* rows of the flow entering, or 1 before anything is known */
static int rows_in(const pt_flow *in) { return in->rank ? pt_flow_rows(in) : 1; }

/* A flow like `in` with its last dimension `width` */
static pt_flow with_width(const pt_flow *in, int width)
{
    pt_flow out = in->rank ? *in : vector(width);
    out.dim[out.rank - 1] = width;
    return out;
}

static int check_floats(const pt_flow *in, char *why, size_t n)
{
    if (in->tokens)
        return snprintf(why, n, "reads floats, but tokens enter it (put an embedding first)"), -1;
    if (!in->rank)
        return snprintf(why, n, "cannot say its width: give `input N` before it"), -1;
    return 0;
}

/* ---- chaining, one function per shape rule ---- */

// (.., in) -> (.., out): each row of the input
static int chain_linear(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out, char *why,
                        size_t n)
{
    if (expect_width(in, a[0], "in", why, n) || expect_width(&(pt_flow){0}, a[1], "out", why, n))
        return -1;
    int rows = rows_in(in);
    s->in = a[0], s->out = a[1], s->T = rows > 1 ? rows : 0, s->no_bias = !a[2];
    *out = with_width(in, a[1]);
    return 0;
}

// (..) -> (..): elementwise
static int chain_same(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out, char *why,
                      size_t n)
{
    (void)a;
    if (check_floats(in, why, n))
        return -1;
    s->in = pt_flow_floats(in);
    *out = *in;
    return 0;
}

// (T, C) or (C) -> the same, each row normalised (layernorm, rmsnorm)
static int chain_layernorm(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                           char *why, size_t n)
{
    if (expect_width(in, a[0], "channels", why, n))
        return -1;
    s->C = a[0], s->T = rows_in(in);
    *out = with_width(in, a[0]);
    return 0;
}

// T tokens -> (T, C)
static int chain_embedding(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                           char *why, size_t n)
{
    if (a[0] < 2 || a[1] < 1 || a[2] < 1)
        return snprintf(why, n, "needs vocab >= 2, channels and seq >= 1"), -1;
    if (in->rank && (!in->tokens || in->dim[0] != a[2]))
        return snprintf(why, n,
                        "reads %d tokens per sample; declare `input tokens %d` or drop "
                        "the input line",
                        a[2], a[2]),
               -1;
    s->V = a[0], s->C = a[1], s->T = a[2];
    *out = sequence(a[2], a[1]);
    return 0;
}

/* A sequence (T, C) entering a layer of C channels */
static int expect_sequence(const pt_flow *in, int C, char *why, size_t n)
{
    if (expect_width(in, C, "channels", why, n))
        return -1;
    if (in->rank != 2)
        return snprintf(why, n, "reads a sequence (T, %d): put an embedding before it", C), -1;
    return 0;
}

// (T, C) -> (T, C)
static int chain_gpt2_block(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                            char *why, size_t n)
{
    if (expect_sequence(in, a[0], why, n))
        return -1;
    if (a[1] < 1 || a[0] % a[1])
        return snprintf(why, n, "channels %d is not a multiple of heads %d", a[0], a[1]), -1;
    if (a[2] < 0)
        return snprintf(why, n, "inner %d must be >= 0 (0: 4 x channels)", a[2]), -1;
    s->C = a[0], s->H = a[1], s->n_inner = a[2], s->T = in->dim[0];
    *out = *in;
    return 0;
}

// (T, C) -> loss over T next tokens of a vocabulary V
static int chain_lm_head(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                         char *why, size_t n)
{
    if (expect_sequence(in, a[1], why, n))
        return -1;
    if (a[0] < 2)
        return snprintf(why, n, "vocab %d must be >= 2", a[0]), -1;
    s->V = a[0], s->C = a[1], s->T = in->dim[0], s->head_untied = !a[2];
    *out = sequence(in->dim[0], a[0]);
    return 0;
}

// (in) -> loss over classes
static int chain_classifier(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                            char *why, size_t n)
{
    if (in->rank > 1)
        return snprintf(why, n, "reads a vector, not a sequence"), -1;
    if (a[1] < 2)
        return snprintf(why, n, "classes %d must be >= 2", a[1]), -1;
    return chain_linear(a, in, s, out, why, n);
}

// (.., classes) -> loss against a label per row
static int chain_cross_entropy(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                               char *why, size_t n)
{
    (void)a;
    if (check_floats(in, why, n))
        return -1;
    if (pt_flow_width(in) < 2)
        return snprintf(why, n, "needs at least 2 classes entering it (got %d)", pt_flow_width(in)),
               -1;
    int rows = pt_flow_rows(in);
    s->in = pt_flow_width(in), s->T = rows > 1 ? rows : 0;
    *out = *in;
    return 0;
}

/* ---- images (C, H, W) ---- */

static pt_flow image(int C, int H, int W) { return (pt_flow){.rank = 3, .dim = {C, H, W}}; }

/* An image of `channels` channels enters (channels 0: any) */
static int expect_image(const pt_flow *in, int channels, char *why, size_t n)
{
    char got[48];
    flow_text(in, got, sizeof got);
    if (in->tokens || in->rank != 3)
        return snprintf(why, n, "reads an image (C, H, W), but %s enter it%s", got,
                        in->rank ? "" : " (give `input C H W` first)"),
               -1;
    if (channels && in->dim[0] != channels)
        return snprintf(why, n, "reads %d channels, but %s enter it", channels, got), -1;
    return 0;
}

static void image_shape(const pt_flow *in, pt_block_shape *s)
{
    s->channels = in->dim[0], s->height = in->dim[1], s->width = in->dim[2];
}

/* A kernel x kernel window at a stride with padding, leaving (oh, ow) */
static int expect_window(const pt_flow *in, int kernel, int stride, int padding, int *oh, int *ow,
                         char *why, size_t n)
{
    if (kernel < 1 || stride < 1 || padding < 0)
        return snprintf(why, n, "needs kernel and stride >= 1, padding >= 0 (got %d, %d, %d)",
                        kernel, stride, padding),
               -1;
    pt_window g =
        pt_window_make(in->dim[0], in->dim[1], in->dim[2], kernel, kernel, stride, padding);
    if (in->dim[1] + 2 * padding < kernel || in->dim[2] + 2 * padding < kernel)
        return snprintf(why, n, "kernel %d is larger than the padded %dx%d image", kernel,
                        in->dim[1] + 2 * padding, in->dim[2] + 2 * padding),
               -1;
    *oh = g.OH, *ow = g.OW;
    return 0;
}

// (Cin, H, W) -> (Cout, OH, OW)
static int chain_conv2d(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out, char *why,
                        size_t n)
{
    int oh, ow;
    if (expect_image(in, a[0], why, n) || expect_window(in, a[2], a[3], a[4], &oh, &ow, why, n))
        return -1;
    if (a[1] < 1)
        return snprintf(why, n, "out_channels %d must be >= 1", a[1]), -1;
    image_shape(in, s);
    s->out_channels = a[1], s->kernel = a[2], s->stride = a[3], s->padding = a[4];
    s->no_bias = !a[5];
    *out = image(a[1], oh, ow);
    return 0;
}

// (C, H, W) -> (C, OH, OW); stride 0: the kernel
static int chain_pool(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out, char *why,
                      size_t n)
{
    int oh, ow, stride = a[1] ? a[1] : a[0];
    if (expect_image(in, 0, why, n) || expect_window(in, a[0], stride, a[2], &oh, &ow, why, n))
        return -1;
    if (2 * a[2] > a[0])
        return snprintf(why, n, "padding %d is more than half the kernel %d", a[2], a[0]), -1;
    image_shape(in, s);
    s->kernel = a[0], s->stride = stride, s->padding = a[2];
    *out = image(in->dim[0], oh, ow);
    return 0;
}

/* An image leaves as a vector of `width` */
static int image_to_vector(const pt_flow *in, int width, pt_block_shape *s, pt_flow *out, char *why,
                           size_t n)
{
    if (expect_image(in, 0, why, n))
        return -1;
    image_shape(in, s);
    *out = vector(width);
    return 0;
}

// (C, H, W) -> (C)
static int chain_global_avgpool(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                                char *why, size_t n)
{
    (void)a;
    return image_to_vector(in, in->dim[0], s, out, why, n);
}

// (C, H, W) -> (C H W)
static int chain_flatten(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                         char *why, size_t n)
{
    (void)a;
    return image_to_vector(in, pt_flow_floats(in), s, out, why, n);
}

/* groups channels divide into groups; 0: one LayerNorm over (C, H, W) */
static int expect_groups(int groups, int channels, char *why, size_t n)
{
    if (groups < 0 || (groups && channels % groups))
        return snprintf(why, n, "%d channels do not divide into %d groups", channels, groups), -1;
    return 0;
}

// (C, H, W) -> (C, H, W)
static int chain_groupnorm(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                           char *why, size_t n)
{
    if (a[0] < 1)
        return snprintf(why, n, "groups %d must be >= 1", a[0]), -1;
    if (expect_image(in, a[1], why, n) || expect_groups(a[0], a[1], why, n))
        return -1;
    image_shape(in, s);
    s->groups = a[0];
    *out = *in;
    return 0;
}

// (C, H, W) -> (C, H, W)
static int chain_layernorm_image(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                                 char *why, size_t n)
{
    if (expect_image(in, a[0], why, n))
        return -1;
    image_shape(in, s);
    *out = *in;
    return 0;
}

// (Cin, H, W) -> (Cout, (H - 1) / stride + 1, (W - 1) / stride + 1)
static int chain_residual(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                          char *why, size_t n)
{
    if (expect_image(in, a[0], why, n) || expect_groups(a[3], a[1], why, n))
        return -1;
    if (a[1] < 1 || a[2] < 1)
        return snprintf(why, n, "needs out_channels and stride >= 1 (got %d, %d)", a[1], a[2]), -1;
    image_shape(in, s);
    s->out_channels = a[1], s->stride = a[2], s->groups = a[3];
    *out = image(a[1], (in->dim[1] - 1) / a[2] + 1, (in->dim[2] - 1) / a[2] + 1);
    return 0;
}

/* ---- the Llama family ---- */

// (T, C) -> (T, C)
static int chain_llama_block(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                             char *why, size_t n)
{
    if (expect_sequence(in, a[0], why, n))
        return -1;
    int kv = a[2] ? a[2] : a[1];
    if (a[1] < 1 || a[0] % a[1] || (a[0] / a[1]) % 2)
        return snprintf(why, n, "channels %d is not heads %d times an even head size", a[0], a[1]),
               -1;
    if (kv < 1 || a[1] % kv)
        return snprintf(why, n, "kv_heads %d does not divide heads %d", kv, a[1]), -1;
    if (a[3] < 0)
        return snprintf(why, n, "inner %d must be >= 0 (0: 4 x channels)", a[3]), -1;
    s->C = a[0], s->H = a[1], s->n_kv_heads = kv, s->n_inner = a[3], s->T = in->dim[0];
    *out = *in;
    return 0;
}

// (T, C) -> loss over classes, scored on the last token
static int chain_last_token(const int *a, const pt_flow *in, pt_block_shape *s, pt_flow *out,
                            char *why, size_t n)
{
    if (expect_sequence(in, a[0], why, n))
        return -1;
    if (a[1] < 2)
        return snprintf(why, n, "classes %d must be >= 2", a[1]), -1;
    s->C = a[0], s->out = a[1], s->T = in->dim[0];
    *out = vector(a[1]);
    return 0;
}

/* GPT-2's blocks name their parameters as GPT2LMHeadModel does; in a spec
 * they are named under the layer's prefix instead ("transformer.h.0.ln_1"
 * becomes "<prefix>.ln_1"). An empty prefix keeps GPT-2's names (gpt.c). */
static void rename_params(pt_block *b, const char *gpt_stem, const char *prefix)
{
    size_t len = strlen(gpt_stem);
    for (int i = 0; prefix[0] && i < b->n_params; i++) {
        char *name = b->decl[i].name, full[256];
        const char *rest = strncmp(name, gpt_stem, len) ? name : name + len;
        snprintf(full, sizeof full, "%s.%s", prefix, rest);
        snprintf(name, sizeof b->decl[i].name, "%.95s", full);
    }
}

static void init_embedding(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    pt_embedding_init(b, s);
    rename_params(b, "transformer.", prefix);
}

static void init_gpt2_block(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    char stem[48];
    pt_transformer_init(b, s, s->index);
    snprintf(stem, sizeof stem, "transformer.h.%d.", s->index);
    rename_params(b, stem, prefix);
}

/* tied=1: the projection is the embedding's table, which a spec's first
 * layer holds under "0." */
static void init_lm_head(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    pt_lm_head_init(b, s);
    rename_params(b, "transformer.", prefix);
    for (int i = 0; prefix[0] && i < b->n_params; i++)
        if (b->decl[i].tied_to[0])
            snprintf(b->decl[i].tied_to, sizeof b->decl[i].tied_to, "0.wte.weight");
}

/* The activation entries share one init: the table's variant is the kind */
static void init_activation(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    (void)prefix;
    pt_activation_init(b, s, s->act);
}

/* linear's bias argument picks the block */
static void init_linear(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    if (s->no_bias)
        pt_linear_init_no_bias(b, s, prefix);
    else
        pt_linear_init(b, s, prefix);
}

/* Megatron's parallel linears: a Linear, cut when the model is a slice */
static void init_column_linear(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    init_linear(b, s, prefix);
    if (s->tensor > 1)
        pt_linear_split(b, 0);
}

static void init_row_linear(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    init_linear(b, s, prefix);
    if (s->tensor > 1)
        pt_linear_split(b, 1);
}

static const pt_layer_entry table[] = {
    {"linear", "in out bias=1", PT_ROLE_BODY, chain_linear, init_linear,
     "(.., in) -> (.., out): x W + b on each row; bias=0 drops b", 0},
    {"column_linear", "in out bias=1", PT_ROLE_BODY, chain_linear, init_column_linear,
     "linear; with --tensor T each slice holds out/T columns (Megatron's ColumnParallelLinear)", 0},
    {"row_linear", "in out bias=1", PT_ROLE_BODY, chain_linear, init_row_linear,
     "linear; with --tensor T each slice holds in/T rows, reading a column_linear's columns, "
     "and the slices' products are summed (RowParallelLinear)",
     0},
    {"relu", "", PT_ROLE_BODY, chain_same, init_activation, "(..) -> (..)", PT_ACT_RELU},
    {"gelu", "", PT_ROLE_BODY, chain_same, init_activation, "(..) -> (..): exact, with erf",
     PT_ACT_GELU},
    {"gelu_new", "", PT_ROLE_BODY, chain_same, init_activation, "(..) -> (..): GPT-2's tanh form",
     PT_ACT_GELU_NEW},
    {"silu", "", PT_ROLE_BODY, chain_same, init_activation, "(..) -> (..): x sigmoid(x)",
     PT_ACT_SILU},
    {"tanh", "", PT_ROLE_BODY, chain_same, pt_tanh_init, "(..) -> (..)", 0},
    {"layernorm", "channels", PT_ROLE_BODY, chain_layernorm, pt_layernorm_init,
     "(.., C) -> (.., C): each row normalised, times weight plus bias", 0},
    {"embedding", "vocab channels seq", PT_ROLE_INPUT, chain_embedding, init_embedding,
     "T tokens -> (T, C): token plus learned position embedding (GPT-2's wte, wpe)", 0},
    {"gpt2_block", "channels heads inner=0", PT_ROLE_BODY, chain_gpt2_block, init_gpt2_block,
     "(T, C) -> (T, C): GPT-2's pre-norm causal attention and GELU MLP (inner 0: 4C)", 0},
    {"lm_head", "vocab channels tied=0", PT_ROLE_LOSS, chain_lm_head, init_lm_head,
     "(T, C) -> loss: final LayerNorm, projection to the vocabulary, cross-entropy "
     "against T labels; tied=1 projects with the embedding's table",
     0},
    {"classifier", "in classes", PT_ROLE_LOSS, chain_classifier, pt_classifier_init,
     "(in) -> loss: linear to class scores, cross-entropy against one label", 0},
    {"cross_entropy", "", PT_ROLE_LOSS, chain_cross_entropy, pt_cross_entropy_init,
     "(.., classes) -> loss: softmax cross-entropy against a label per row", 0},
    {"mse", "", PT_ROLE_LOSS, chain_same, pt_mse_init,
     "(..) -> loss: mean squared error against as many float targets", 0},
    {"conv2d", "in_channels out_channels kernel stride=1 padding=0 bias=1", PT_ROLE_BODY,
     chain_conv2d, pt_conv2d_init,
     "(Cin, H, W) -> (Cout, OH, OW), OH = (H + 2 padding - kernel) / stride + 1: "
     "torch.nn.Conv2d; bias=0 drops the bias",
     0},
    {"maxpool", "kernel stride=0 padding=0", PT_ROLE_BODY, chain_pool, pt_maxpool_init,
     "(C, H, W) -> (C, OH, OW): each window's maximum (stride 0: the kernel)", 0},
    {"avgpool", "kernel stride=0 padding=0", PT_ROLE_BODY, chain_pool, pt_avgpool_init,
     "(C, H, W) -> (C, OH, OW): each window's mean, padding counted as zeros", 0},
    {"global_avgpool", "", PT_ROLE_BODY, chain_global_avgpool, pt_global_avgpool_init,
     "(C, H, W) -> (C): each channel's mean (AdaptiveAvgPool2d(1) and flatten)", 0},
    {"flatten", "", PT_ROLE_BODY, chain_flatten, pt_flatten_init, "(C, H, W) -> (C H W)", 0},
    {"groupnorm", "groups channels", PT_ROLE_BODY, chain_groupnorm, pt_groupnorm_init,
     "(C, H, W) -> (C, H, W): each sample's groups of C / groups channels normalised "
     "(torch.nn.GroupNorm)",
     0},
    {"layernorm_image", "channels", PT_ROLE_BODY, chain_layernorm_image, pt_layernorm_image_init,
     "(C, H, W) -> (C, H, W): each sample normalised whole, weight and bias (C, H, W) "
     "(torch.nn.LayerNorm([C, H, W]))",
     0},
    {"residual", "in_channels out_channels stride=1 groups=1", PT_ROLE_BODY, chain_residual,
     pt_residual_init,
     "(Cin, H, W) -> (Cout, (H-1)/stride+1, ..): ResNet's basic block, conv3x3-norm-relu-"
     "conv3x3-norm plus the skip (a 1x1 conv and norm when the shape changes), relu; "
     "GroupNorm of `groups` groups, 0: LayerNorm over (C, H, W)",
     0},
    {"tok_embedding", "vocab channels seq", PT_ROLE_INPUT, chain_embedding, pt_tok_embedding_init,
     "T tokens -> (T, C): the token table alone, positions left to the layers "
     "(Llama's embed_tokens)",
     0},
    {"llama_block", "channels heads kv_heads=0 inner=0", PT_ROLE_BODY, chain_llama_block,
     pt_llama_init,
     "(T, C) -> (T, C): Llama's decoder layer: RMSNorm, causal attention with rotary "
     "positions and kv_heads key/value heads (0: heads), RMSNorm, SwiGLU MLP (inner 0: 4C)",
     0},
    {"rmsnorm", "channels", PT_ROLE_BODY, chain_layernorm, pt_rmsnorm_init,
     "(.., C) -> (.., C): each row over its root mean square, times weight", 0},
    {"last_token_classifier", "channels classes", PT_ROLE_LOSS, chain_last_token,
     pt_last_token_classifier_init,
     "(T, C) -> loss: the last token's row projected to class scores (no bias), "
     "cross-entropy against one label (GPT2ForSequenceClassification's score)",
     0},
    {NULL, NULL, PT_ROLE_BODY, NULL, NULL, NULL, 0},
};

const pt_layer_entry *pt_layer_table(void) { return table; }

const pt_layer_entry *pt_layer_find(const char *name)
{
    for (const pt_layer_entry *e = table; e->name; e++)
        if (!strcmp(e->name, name))
            return e;
    return NULL;
}

int pt_layer_arg_names(const pt_layer_entry *e, char names[][16], int *defaults, int *has_default)
{
    int n = 0;
    for (const char *p = e->args; *p && n < PT_LAYER_MAX_ARGS;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        size_t len = strcspn(p, " =");
        snprintf(names[n], 16, "%.*s", (int)len, p);
        p += len;
        has_default[n] = *p == '=';
        defaults[n] = has_default[n] ? (int)strtol(p + 1, (char **)&p, 10) : 0;
        n++;
    }
    return n;
}

/* ---- lists ---- */

int pt_layer_list_init(pt_layer_list *l)
{
    memset(l, 0, sizeof *l);
    l->item = calloc(PT_MODEL_MAX_BLOCKS, sizeof *l->item);
    return l->item ? PT_OK : pt_fail(PT_ENOMEM, "cannot allocate a layer list");
}

void pt_layer_list_free(pt_layer_list *l)
{
    free(l->item);
    l->item = NULL;
}

pt_layer_item *pt_layer_list_add(pt_layer_list *l, const char *name, const char *prefix)
{
    if (l->n == PT_MODEL_MAX_BLOCKS)
        return NULL;
    pt_layer_item *it = &l->item[l->n];
    memset(it, 0, sizeof *it);
    it->entry = pt_layer_find(name);
    it->position = l->n + 1;
    it->layer = l->n;
    snprintf(it->prefix, sizeof it->prefix, "%s", prefix);
    l->n++;
    return it;
}

/* ---- building ---- */

static const char *item_name(const pt_layer_item *it)
{
    return it->entry ? it->entry->name : it->user->name;
}

static int refuse(const pt_layer_item *it, const char *why)
{
    return pt_fail(PT_EINVAL, "spec layer %d (%s): %s", it->position, item_name(it), why);
}

static int chain_user(const pt_layer_item *it, const pt_flow *in, pt_flow *out, char *why, size_t n)
{
    const pt_layer_type *t = it->user;
    if (in->tokens || (!in->rank && !t->in_floats))
        return snprintf(why, n, "%s",
                        in->tokens ? "reads floats, not tokens"
                                   : "cannot say its width: give `input N`"),
               -1;
    int width = in->rank ? pt_flow_floats(in) : t->in_floats;
    if (t->in_floats && t->in_floats != width)
        return snprintf(why, n, "reads %d floats, but %d enter it", t->in_floats, width), -1;
    if (!t->forward || !t->backward_input || !t->backward_weight)
        return snprintf(why, n, "needs forward, backward_input and backward_weight"), -1;
    if (t->n_params < 0 || t->n_params > PT_LAYER_MAX_PARAMS || t->saved_floats < 0)
        return snprintf(why, n, "declares %d parameters (at most %d) and %d saved floats",
                        t->n_params, PT_LAYER_MAX_PARAMS, t->saved_floats),
               -1;
    for (int i = 0; i < t->n_params; i++)
        if (!t->params[i].name || t->params[i].ndim < 1 || t->params[i].ndim > 4)
            return snprintf(why, n, "parameter %d needs a name and 1 to 4 dimensions", i), -1;
    *out = t->out_floats ? vector(t->out_floats) : (in->rank ? *in : vector(width));
    return 0;
}

/* Role: where in the list a layer may stand. */
static int check_role(const pt_layer_list *l, int i)
{
    const pt_layer_item *it = &l->item[i];
    pt_layer_role role = it->entry ? it->entry->role : PT_ROLE_BODY;
    int last = i == l->n - 1;
    if (role == PT_ROLE_LOSS && !last)
        return refuse(it, "a loss must be the last layer");
    if (role == PT_ROLE_INPUT && i > 0)
        return refuse(it, "reads tokens, so it must be the first layer");
    if (last && role != PT_ROLE_LOSS)
        return refuse(it, "the last layer must be a loss (mse, cross_entropy, classifier, "
                          "lm_head or last_token_classifier)");
    return PT_OK;
}

/* Tensor slices (m->tensor > 1): a column_linear opens a region of cut
 * columns (*split), which only activations may cross, and a row_linear
 * closes it. */
static int check_split(const pt_model *m, const pt_layer_item *it, int *split)
{
    int T = m->tensor;
    bool column = it->entry && it->entry->init == init_column_linear,
         row = it->entry && it->entry->init == init_row_linear,
         elementwise =
             it->entry && (it->entry->init == init_activation || it->entry->init == pt_tanh_init);
    char why[160];
    if (T < 2)
        return PT_OK;
    if (column && *split)
        return refuse(it, "a column_linear reads whole rows, but the columns of the "
                          "column_linear before it are still cut: put a row_linear between");
    if (column && it->arg[1] % T) {
        snprintf(why, sizeof why, "--tensor %d does not divide its %d outputs", T, it->arg[1]);
        return refuse(it, why);
    }
    if (row && !*split)
        return refuse(it, "a row_linear reads the columns a column_linear cut; none is open "
                          "before it");
    if (*split && !column && !row && !elementwise)
        return refuse(it, "it runs on whole rows, but a column_linear's columns are cut here: "
                          "close them with a row_linear first");
    *split = column ? 1 : row ? 0 : *split;
    return PT_OK;
}

static int add_block(pt_model *m, const pt_layer_item *it, pt_flow *flow, int n_layer,
                     int *transformers, int *split)
{
    char why[256];
    pt_flow out = {0};
    pt_block *b = &m->blocks[m->n_blocks];
    int rc = check_split(m, it, split);
    if (rc != PT_OK)
        return rc;
    if (it->user) {
        if (m->k->act != PT_F32)
            return refuse(it, "user-defined layers run under fp32 only");
        if (chain_user(it, flow, &out, why, sizeof why))
            return refuse(it, why);
        pt_user_layer_init(b, it->user, flow->rank ? pt_flow_floats(flow) : it->user->in_floats,
                           it->prefix);
    } else {
        pt_block_shape s = it->base;
        s.n_layer = n_layer;
        s.index = *transformers;
        s.tensor = m->tensor, s.tensor_rank = m->tensor_rank;
        if (it->entry->init == init_activation)
            s.act = (pt_activation)it->entry->variant;
        if (it->entry->chain(it->arg, flow, &s, &out, why, sizeof why))
            return refuse(it, why);
        bool cut =
            *split && it->entry->init != init_column_linear; /* runs on the slice's columns */
        if (cut)
            s.in /= m->tensor;
        it->entry->init(b, &s, it->prefix);
        *transformers += it->entry->init == init_gpt2_block;
    }
    *flow = out;
    m->n_blocks++;
    return PT_OK;
}

/* A loss without parameters joins the layer before it: a balance counts
 * what holds weights, as a PyTorch user counts modules without the loss. */
static int record_layers(pt_model *m, const pt_layer_list *l)
{
    m->layer_first = calloc((size_t)l->n + 1, sizeof(int));
    if (!m->layer_first)
        return pt_fail(PT_ENOMEM, "cannot allocate the layer table");
    int layer = -1, prev = -1;
    for (int i = 0; i < l->n; i++) {
        const pt_layer_item *it = &l->item[i];
        int joins =
            i > 0 && it->entry && it->entry->role == PT_ROLE_LOSS && m->blocks[i].n_params == 0;
        if (it->layer != prev && !joins)
            m->layer_first[++layer] = i;
        prev = it->layer;
    }
    m->n_layers = layer + 1;
    m->layer_first[m->n_layers] = m->n_blocks;
    return PT_OK;
}

static void record_io(pt_model *m)
{
    const pt_block *first = &m->blocks[0], *last = &m->blocks[m->n_blocks - 1];
    pt_model_io io = {0};
    if (first->ops->reads_tokens)
        io.tokens = first->shape.T, io.vocab = first->shape.V;
    else
        io.inputs = first->in_floats;
    io.labels = last->labels;
    io.classes = last->classes;
    io.values = last->values;
    m->io = io;
}

int pt_layers_build(pt_model *m, const pt_layer_list *l)
{
    if (l->n < 1)
        return pt_fail(PT_EINVAL, "the spec has no layers");
    int n_layer = 0, transformers = 0;
    for (int i = 0; i < l->n; i++)
        n_layer += l->item[i].entry && l->item[i].entry->init == init_gpt2_block;
    pt_flow flow = l->input;
    int split = 0;
    for (int i = 0; i < l->n; i++) {
        int rc = check_role(l, i);
        if (rc == PT_OK)
            rc = add_block(m, &l->item[i], &flow, n_layer, &transformers, &split);
        if (rc != PT_OK)
            return rc;
    }
    if (split)
        return pt_fail(PT_EINVAL,
                       "--tensor %d: the spec ends with a column_linear's columns "
                       "cut; close them with a row_linear",
                       m->tensor);
    record_io(m);
    return record_layers(m, l);
}
