/* model.c: pt_model: creating a model from its config, its parameter table,
 * and running any contiguous range of its blocks forward and backward on one
 * micro-batch.
 *
 * A model may hold only some of its blocks: a pipeline stage is built with
 * the blocks of its chunks, and only those get parameters, gradients (and,
 * in the optimizer, moments). The other blocks stay descriptions: their
 * shapes, names and costs are known, their tensors are not (data and grad
 * NULL). Every parameter is initialised from its own seeded stream, so a
 * stage built alone holds the same bits as the same blocks of a whole
 * model; a tied copy (lm_head.weight) is initialised from the stream of
 * what it copies, so it starts equal to it wherever the two sit. */
#include "model/model.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"
#include "tensor/gemm.h"

/* A micro-batch's record in two parts with two lifetimes: what its forward
 * keeps (pt_activations: from forward to the weight pass) and what its
 * backward keeps for the weight pass (pt_grad_record: from backward_input
 * on), so a pipeline holds the second only for micro-batches between the
 * two passes (model.h). */
struct pt_grad_record {
    int first, last, batch;
    void **dout;  /* per block: gradient of its output */
    void **grads; /* per block: its grads_bytes area */
    pt_arena arena;
};

struct pt_activations {
    const pt_model *m;
    int first, last, batch;
    void **out;          /* per block: its output (batch x out_floats) */
    void **saved;        /* per block: what its backward needs */
    void *in0;           /* the mlp's inputs as activations, when they are not float */
    pt_grad_record *g;   /* the backward's part, when attached (NULL: none) */
    pt_grad_record *own; /* the part pt_activations_create made with it */
    bool output_apart;   /* the last block's output is attached, not in the arena */
    pt_arena arena;
};

static size_t out_bytes(const pt_model *m, const pt_block *b, int batch);
static size_t grad_bytes(const pt_model *m, const pt_block *b, int batch);
static size_t grads_area_bytes(const pt_block *b, int batch);

pt_model_config pt_model_config_gpt(void)
{
    return (pt_model_config){.kind = PT_MODEL_GPT,
                             .n_layer = 4,
                             .n_head = 4,
                             .n_embd = 128,
                             .seq_len = 128,
                             .vocab = 256,
                             .layer_norm_epsilon = 1e-5f,
                             .scale_attn_weights = 1,
                             .tie_word_embeddings = 1,
                             .seed = 1};
}

int pt_gpt_inner(const pt_model_config *c) { return c->n_inner ? c->n_inner : 4 * c->n_embd; }

int pt_gpt_positions(const pt_model_config *c)
{
    return c->n_positions ? c->n_positions : c->seq_len;
}

pt_model_config pt_model_config_mlp(int n_widths, const int *widths)
{
    pt_model_config c = {.kind = PT_MODEL_MLP, .seed = 1};
    c.n_widths = n_widths;
    for (int i = 0; i < n_widths && i < PT_MLP_MAX_WIDTHS; i++)
        c.widths[i] = widths[i];
    return c;
}

static void fill_param(float *data, size_t numel, const pt_param_decl *d, uint64_t seed)
{
    pt_rng rng;
    switch (d->init) {
    case PT_INIT_ZEROS: memset(data, 0, numel * sizeof(float)); break;
    case PT_INIT_ONES:
        for (size_t i = 0; i < numel; i++)
            data[i] = 1.0f;
        break;
    case PT_INIT_CONSTANT:
        for (size_t i = 0; i < numel; i++)
            data[i] = d->std;
        break;
    case PT_INIT_NORMAL:
        pt_rng_seed_named(&rng, seed, d->name);
        pt_rng_fill_normal(&rng, data, numel, d->std);
        break;
    }
}

/* A slice holds its part of the whole tensor's stream: the same bits as
 * the whole model's at the same offsets. false: no memory for the whole. */
static bool init_param(pt_param *p, const pt_param_decl *d, uint64_t seed)
{
    if (d->split_parts < 2) {
        fill_param(p->data, p->numel, d, seed);
        return true;
    }
    size_t whole = p->numel * (size_t)d->split_parts;
    float *all = malloc(whole * sizeof(float));
    if (!all)
        return false;
    fill_param(all, whole, d, seed);
    pt_param_slice_copy(d, p->data, all, 0);
    free(all);
    return true;
}

/* The held parameters' draws, shared a parameter at a time in table order
 * between the threads the products are given (pt_blas_threads; nothing
 * else runs yet): each is drawn from its own stream, so which thread draws
 * what changes no bit. */
typedef struct {
    pt_model *m;
    const pt_param_decl **as; /* per parameter: the declaration it is drawn as; NULL: none */
    bool *ok;
    atomic_int next;
} draws;

static void draw_part(void *arg, int part)
{
    draws *d = arg;
    (void)part;
    for (int i; (i = atomic_fetch_add(&d->next, 1)) < d->m->n_params;)
        d->ok[i] = !d->as[i] || init_param(&d->m->params[i], d->as[i], d->m->cfg.seed);
}

/* The parameter `name` if this model holds it and draws it: a tied copy
 * (GPT-2's LM head) on the same stage as its source is the same stream's
 * draw, so it is copied rather than drawn again (at GPT-2's vocabulary,
 * 38.6 million of the model's 163 million normal draws). */
static const pt_param *drawn_param(const pt_model *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].data && !m->params[i].tied_to && !strcmp(m->params[i].name, name))
            return &m->params[i];
    return NULL;
}

/* Every held parameter drawn as as[i] says, but a tied copy whose source
 * this model draws, which is copied from it. */
static int draw_params(pt_model *m, const pt_param_decl **as)
{
    for (int i = 0; i < m->n_params; i++) {
        const pt_param *p = &m->params[i], *drawn;
        if (p->tied_to && (drawn = drawn_param(m, p->tied_to)) && drawn->numel == p->numel)
            as[i] = NULL;
    }
    draws d = {
        .m = m, .as = as, .ok = calloc((size_t)(m->n_params ? m->n_params : 1), sizeof(bool))};
    if (!d.ok)
        return pt_fail(PT_ENOMEM, "cannot allocate the parameters' draws");
    atomic_init(&d.next, 0);
    pt_gemm_parallel(pt_blas_threads(), draw_part, &d);
    int rc = PT_OK;
    for (int i = 0; i < m->n_params && rc == PT_OK; i++) {
        pt_param *p = &m->params[i];
        if (!d.ok[i])
            rc = pt_fail(PT_ENOMEM, "cannot allocate %s whole to slice it", p->name);
        else if (p->data && !as[i])
            memcpy(p->data, drawn_param(m, p->tied_to)->data, p->numel * sizeof(float));
    }
    free(d.ok);
    return rc;
}

static const pt_param_decl *find_decl(const pt_model *m, const char *name)
{
    for (int b = 0; b < m->n_blocks; b++)
        for (int i = 0; i < m->blocks[b].n_params; i++)
            if (!strcmp(m->blocks[b].decl[i].name, name))
                return &m->blocks[b].decl[i];
    return NULL;
}

/* The floats a matrix's kept panels take as op(B), untransposed (t 0: K
 * is its first dimension) or transposed (t 1); 0 where none are kept. */
static size_t panel_floats(const pt_model *m, const pt_param_decl *d, int t)
{
    if (m->cfg.repack_weights || !m->k->packed_floats || d->ndim < 2 || d->float_read ||
        d->product_a || d->shape[0] < 1)
        return 0;
    int rows = d->shape[0], cols = (int)(pt_param_decl_numel(d) / (size_t)rows);
    return pt_arena_round(t ? m->k->packed_floats(cols, rows) : m->k->packed_floats(rows, cols));
}

size_t pt_model_panel_bytes(const pt_model *m, int first, int last)
{
    size_t floats = 0;
    for (int b = first < 0 ? 0 : first; b <= last && b < m->n_blocks; b++)
        for (int i = 0; i < m->blocks[b].n_params; i++)
            for (int t = 0; t < 2; t++)
                floats += panel_floats(m, &m->blocks[b].decl[i], t);
    return floats * sizeof(float);
}

int pt_model_keep_panels(pt_model *m)
{
    if (m->packed)
        return PT_OK;
    size_t floats = 0;
    for (int b = 0; b < m->n_blocks; b++)
        if (m->held[b])
            floats += pt_model_panel_bytes(m, b, b) / sizeof(float);
    if (!floats)
        return PT_OK;
    m->packed = calloc(2 * (size_t)m->n_params, sizeof *m->packed);
    m->panel_data = pt_alloc_floats(floats);
    if (!m->packed || !m->panel_data) { /* none kept: a second call tries again */
        free(m->packed), pt_free(m->panel_data);
        m->packed = NULL, m->panel_data = NULL;
        return pt_fail(PT_ENOMEM,
                       "cannot allocate the weights' packed panels (%zu MiB; "
                       "repack_weights keeps none)",
                       floats * sizeof(float) >> 20);
    }
    m->panel_floats = floats;
    size_t at = 0;
    for (int b = 0, n = 0; b < m->n_blocks; b++)
        for (int i = 0; i < m->blocks[b].n_params; i++, n++) {
            pt_block *blk = &m->blocks[b];
            size_t f0 = panel_floats(m, &blk->decl[i], 0), f1 = panel_floats(m, &blk->decl[i], 1);
            if (!m->held[b] || !(f0 + f1))
                continue;
            pt_gemm_packed *pair = &m->packed[2 * n];
            pair[0] = (pt_gemm_packed){.panels = m->panel_data + at, .capacity = f0};
            pair[1] = (pt_gemm_packed){.panels = m->panel_data + at + f0, .capacity = f1};
            blk->packed[i] = pair;
            at += f0 + f1;
        }
    return PT_OK;
}

/* Points every held block at its slice of the two arenas and fills the
 * public parameter table (every parameter, held or not). */
static int lay_out_params(pt_model *m)
{
    size_t floats = 0;
    int n = 0;
    for (int b = 0; b < m->n_blocks; b++)
        for (int i = 0; i < m->blocks[b].n_params; i++, n++)
            if (m->held[b])
                floats += pt_arena_round(pt_param_decl_numel(&m->blocks[b].decl[i]));
    m->params = calloc((size_t)(n ? n : 1), sizeof *m->params);
    const pt_param_decl **as = calloc((size_t)(n ? n : 1), sizeof *as);
    /* pages on first write: sharded state keeps a shard of them (zero.c) */
    int rc = !m->params || !as ? pt_fail(PT_ENOMEM, "cannot allocate the parameter table")
                               : pt_arena_init_paged(&m->data, floats);
    if (rc == PT_OK)
        rc = pt_arena_init_paged(&m->grad, floats);
    if (rc == PT_OK && m->k->act == PT_BF16) {
        /* floats / 2 floats hold `floats` bf16 */
        if (!(m->low = (pt_bf16 *)pt_alloc_floats((floats + 1) / 2)))
            rc = pt_fail(PT_ENOMEM, "cannot allocate the parameters' bf16 copy");
        m->low_stale = true;
    }
    for (int b = 0; rc == PT_OK && b < m->n_blocks; b++) {
        pt_block *blk = &m->blocks[b];
        for (int i = 0; rc == PT_OK && i < blk->n_params; i++) {
            const pt_param_decl *d = &blk->decl[i];
            pt_param *p = &m->params[m->n_params++];
            p->name = d->name;
            p->numel = pt_param_decl_numel(d);
            p->ndim = d->ndim;
            memcpy(p->shape, d->shape, sizeof p->shape);
            p->block = b;
            p->tied_to = d->tied_to[0] ? d->tied_to : NULL;
            if (!m->held[b])
                continue;
            p->data = blk->p[i] = pt_arena_take(&m->data, p->numel);
            p->grad = blk->g[i] = pt_arena_take(&m->grad, p->numel);
            if (m->low && d->ndim >= 2) /* matrices: what products read */
                blk->pl[i] = m->low + (p->data - m->data.base);
            const pt_param_decl *src = p->tied_to ? find_decl(m, p->tied_to) : d;
            if (!src || pt_param_decl_numel(src) != p->numel)
                rc = pt_fail(PT_EINVAL, "parameter %s is tied to %s, which %s", p->name, p->tied_to,
                             src ? "has another shape" : "does not exist");
            as[m->n_params - 1] = src;
        }
    }
    if (rc == PT_OK)
        rc = draw_params(m, as);
    free(as);
    return rc;
}

static int create(const pt_model_config *cfg, const unsigned char *hold, int hold_all, int T, int t,
                  int sequence, pt_model **out);

/* The blocks index a sample's tensors with int: a gpt whose sample holds
 * more floats than that (seq x MLP width, seq x vocab, heads x seq x seq) is
 * refused before anything is built. */
static int check_shape(const pt_model_config *c)
{
    if (c->kind != PT_MODEL_GPT)
        return PT_OK;
    if (c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->seq_len < 1 || c->vocab < 1)
        return pt_fail(PT_EINVAL,
                       "a gpt needs layers, heads, channels, sequence and vocabulary >= 1 "
                       "(got %d, %d, %d, %d, %d)",
                       c->n_layer, c->n_head, c->n_embd, c->seq_len, c->vocab);
    double T = c->seq_len, inner = c->n_inner > 0 ? c->n_inner : 4.0 * c->n_embd;
    double worst = T * inner;
    worst = T * c->vocab > worst ? T * c->vocab : worst;
    worst = c->n_head * T * T > worst ? c->n_head * T * T : worst;
    if (worst > (double)INT_MAX)
        return pt_fail(PT_EINVAL,
                       "a sample of this gpt holds %.0f floats in one tensor (sequence %d, "
                       "MLP width %.0f, vocabulary %d, heads %d), more than the %d one tensor "
                       "may index",
                       worst, c->seq_len, inner, c->vocab, c->n_head, INT_MAX);
    return PT_OK;
}

int pt_model_create(const pt_model_config *cfg, pt_model **out)
{
    return create(cfg, NULL, 1, 1, 0, 0, out);
}

int pt_model_create_part(const pt_model_config *cfg, const unsigned char *hold, pt_model **out)
{
    return create(cfg, hold, !hold, 1, 0, 0, out);
}

int pt_model_describe(const pt_model_config *cfg, pt_model **out)
{
    return create(cfg, NULL, 0, 1, 0, 0, out);
}

int pt_model_create_slice(const pt_model_config *cfg, const unsigned char *hold, int describe,
                          int T, int t, int sequence, pt_model **out)
{
    if (T < 1 || t < 0 || t >= T)
        return pt_fail(PT_EINVAL, "tensor slice %d of %d does not exist", t, T);
    return create(cfg, hold, !hold && !describe, T, t, sequence, out);
}

/* What sequence parallelism splits, and what it refuses. */
static int check_sequence(const pt_model_config *cfg, int T)
{
    if (T < 2)
        return pt_fail(PT_EINVAL, "--sequence-parallel splits the sequence over a tensor group: "
                                  "it needs --tensor 2 or more");
    if (cfg->kind != PT_MODEL_GPT)
        return pt_fail(PT_EINVAL,
                       "--sequence-parallel: only a gpt's blocks split their sequence (a "
                       "spec's column_linear and row_linear run with --tensor alone)");
    if (cfg->seq_len % T)
        return pt_fail(PT_EINVAL,
                       "--sequence-parallel: --tensor %d does not divide the sequence of %d "
                       "positions",
                       T, cfg->seq_len);
    return PT_OK;
}

static int create(const pt_model_config *cfg, const unsigned char *hold, int hold_all, int T, int t,
                  int sequence, pt_model **out)
{
    *out = NULL;
    if (sequence) {
        int rc = check_sequence(cfg, T);
        if (rc != PT_OK)
            return rc;
    }
    pt_model *m = calloc(1, sizeof *m);
    if (!m)
        return pt_fail(PT_ENOMEM, "cannot allocate a model");
    m->cfg = *cfg;
    m->tensor = T;
    m->tensor_rank = t;
    m->sequence_parallel = sequence;
    m->k = pt_kernels_for(cfg->precision);
    m->blocks = calloc(PT_MODEL_MAX_BLOCKS, sizeof *m->blocks);
    int rc = m->blocks ? PT_OK : pt_fail(PT_ENOMEM, "cannot allocate blocks");
    for (int b = 0; rc == PT_OK && b < PT_MODEL_MAX_BLOCKS; b++) {
        m->blocks[b].k = m->k;
        m->blocks[b].layer = -1;
    }
    if (rc == PT_OK && !pt_precision_name(cfg->precision))
        rc = pt_fail(PT_EINVAL, "precision %d is neither fp32 (%d) nor bf16 (%d)",
                     (int)cfg->precision, PT_PRECISION_FP32, PT_PRECISION_BF16);
    if (rc == PT_OK)
        rc = check_shape(cfg);
    if (rc == PT_OK) {
        switch (cfg->kind) {
        case PT_MODEL_GPT: rc = pt_gpt_build(m); break;
        case PT_MODEL_MLP: rc = pt_mlp_build(m); break;
        case PT_MODEL_SPEC: rc = pt_spec_build(m); break;
        default: rc = pt_fail(PT_EINVAL, "unknown model kind %d", (int)cfg->kind);
        }
    }
    for (int b = 0; rc == PT_OK && T > 1 && b < m->n_blocks; b++) {
        const pt_block *blk = &m->blocks[b];
        if (!blk->ops->tensor_sums && blk->n_params > 0)
            rc = pt_fail(PT_EINVAL,
                         "--tensor %d: layer %d (%s, parameter %s) cannot be split over a "
                         "tensor group; GPT-2's embedding, transformer blocks and LM head, and "
                         "a spec's column_linear and row_linear declare their split",
                         T, b + 1, blk->ops->kind, blk->decl[0].name);
    }
    if (rc == PT_OK && !(m->held = calloc((size_t)(m->n_blocks ? m->n_blocks : 1), 1)))
        rc = pt_fail(PT_ENOMEM, "cannot allocate the block table");
    for (int b = 0; rc == PT_OK && b < m->n_blocks; b++)
        m->held[b] = hold_all || (hold && hold[b]);
    if (rc == PT_OK)
        rc = lay_out_params(m);
    if (rc != PT_OK) {
        pt_model_destroy(m);
        return rc;
    }
    *out = m;
    return PT_OK;
}

void pt_model_destroy(pt_model *m)
{
    if (!m)
        return;
    pt_arena_free(&m->data);
    pt_arena_free(&m->grad);
    pt_free(m->low);
    pt_free(m->panel_data);
    free(m->packed);
    free(m->master_lo);
    free(m->master_hi);
    pt_free(m->work);
    free(m->params);
    free(m->blocks);
    free(m->held);
    free(m->layer_first);
    free(m);
}

const pt_model_config *pt_model_get_config(const pt_model *m) { return &m->cfg; }
int pt_model_n_blocks(const pt_model *m) { return m->n_blocks; }

const char *pt_model_block_kind(const pt_model *m, int block)
{
    return block >= 0 && block < m->n_blocks ? m->blocks[block].ops->kind : NULL;
}

pt_block_cost pt_model_block_cost(const pt_model *m, int block)
{
    pt_block_cost c = {0};
    if (block < 0 || block >= m->n_blocks)
        return c;
    const pt_block *b = &m->blocks[block];
    c = b->ops->cost(b);
    c.param_bytes = pt_block_param_bytes(b);
    c.activation_bytes = out_bytes(m, b, 1) + b->ops->saved_bytes(b, 1);
    c.grad_bytes = grad_bytes(m, b, 1) + grads_area_bytes(b, 1);
    return c;
}

int pt_model_block_input_floats(const pt_model *m, int block)
{
    return block >= 0 && block < m->n_blocks ? m->blocks[block].in_floats : 0;
}

int pt_model_block_output_floats(const pt_model *m, int block)
{
    return block >= 0 && block < m->n_blocks ? m->blocks[block].out_floats : 0;
}

int pt_model_n_layers(const pt_model *m) { return m->n_layers; }

int pt_model_layer_blocks(const pt_model *m, int layer, int *first, int *last)
{
    if (layer < 0 || layer >= m->n_layers)
        return pt_fail(PT_EINVAL, "layer %d is not within the model's %d layers", layer,
                       m->n_layers);
    *first = m->layer_first[layer];
    *last = m->layer_first[layer + 1] - 1;
    return PT_OK;
}

int pt_model_balance_blocks(const pt_model *m, const int *layers, int n, int *blocks)
{
    long sum = 0;
    for (int c = 0; c < n; c++) {
        if (layers[c] < 1)
            return pt_fail(PT_EINVAL, "balance entry %d is %d; every chunk needs a layer", c + 1,
                           layers[c]);
        sum += layers[c];
    }
    if (sum != m->n_layers) {
        int f = m->layer_first[m->n_layers - 1];
        return pt_fail(PT_EINVAL,
                       "balance sums to %ld layers, but the model has %d layers (%d blocks; "
                       "the last layer, %d, is %s)",
                       sum, m->n_layers, m->n_blocks, m->n_layers, m->blocks[f].ops->kind);
    }
    for (int c = 0, layer = 0; c < n; layer += layers[c++])
        blocks[c] = m->layer_first[layer + layers[c]] - m->layer_first[layer];
    return PT_OK;
}

int pt_model_balance_layers(const pt_model *m, const int *blocks, int n, int *layers)
{
    int l = 0, end = -1;
    for (int c = 0; c < n; c++) {
        end += blocks[c];
        layers[c] = 0;
        int first, last;
        while (l < m->n_layers && pt_model_layer_blocks(m, l, &first, &last) == PT_OK &&
               last <= end)
            layers[c]++, l++;
        if (l < m->n_layers && pt_model_layer_blocks(m, l, &first, &last) == PT_OK && first <= end)
            return 0; /* layer l straddles the boundary */
    }
    return 1;
}

pt_model_io pt_model_get_io(const pt_model *m) { return m->io; }

int pt_model_n_params(const pt_model *m) { return m->n_params; }

const pt_param *pt_model_param(const pt_model *m, int i)
{
    return i >= 0 && i < m->n_params ? &m->params[i] : NULL;
}

const pt_param *pt_model_find_param(const pt_model *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name))
            return &m->params[i];
    return NULL;
}

int pt_model_block_first_param(const pt_model *m, int block)
{
    int i = 0;
    while (i < m->n_params && m->params[i].block < block)
        i++;
    return i;
}

size_t pt_model_param_count(const pt_model *m)
{
    size_t n = 0;
    for (int i = 0; i < m->n_params; i++)
        if (!m->params[i].tied_to)
            n += m->params[i].numel;
    return n;
}

void pt_model_zero_grads(pt_model *m) { pt_zero_floats(m->grad.base, m->grad.capacity); }

int pt_model_holds_block(const pt_model *m, int block)
{
    return block >= 0 && block < m->n_blocks && m->held[block];
}

size_t pt_model_held_bytes(const pt_model *m)
{
    return (m->data.used - m->released) * sizeof(float) +
           (m->low ? m->data.used * sizeof(pt_bf16) : 0) + m->panel_floats * sizeof(float);
}

void pt_model_params_changed(pt_model *m)
{
    m->low_stale = m->low != NULL;
    for (int i = 0; m->packed && i < 2 * m->n_params; i++)
        m->packed[i].filled = 0; /* packed again by the next product that reads them */
}

size_t pt_model_activation_size(const pt_model *m) { return pt_elem_size(m->k->act); }

const char *pt_precision_name(pt_precision p)
{
    switch (p) {
    case PT_PRECISION_FP32: return "fp32";
    case PT_PRECISION_BF16: return "bf16";
    }
    return NULL;
}

int pt_precision_parse(const char *s, pt_precision *out)
{
    for (int p = PT_PRECISION_FP32; p <= PT_PRECISION_BF16; p++)
        if (s && !strcmp(s, pt_precision_name((pt_precision)p))) {
            *out = (pt_precision)p;
            return PT_OK;
        }
    return pt_fail(PT_EINVAL, "precision '%s' is neither fp32 nor bf16", s ? s : "(null)");
}

bool pt_model_master_shards(const pt_model *m, int i)
{
    return m->params[i].ndim >= 2 && !pt_model_param_decl(m, i)->float_read;
}

/* Floats [a, b) of the data arena into the bf16 copy, by the bf16 table's
 * store (the worker's threads, AVX512_BF16's conversion where the CPU has
 * it: the copy was 1% of a bf16 step at P = 2) */
static void round_range(pt_model *m, size_t a, size_t b)
{
    if (b > a)
        m->k->store_floats(m->low + a, m->data.base + a, b - a);
}

/* The products read the bf16 copy: bring it up to the float parameters
 * (with a sharded master, the kept ranges of the matrices). */
static void refresh_low(pt_model *m)
{
    if (!m->low_stale)
        return;
    for (int i = 0; i < m->n_params; i++) {
        const pt_param *p = &m->params[i];
        if (!p->data)
            continue;
        size_t a = (size_t)(p->data - m->data.base), b = a + p->numel;
        bool sharded = m->n_master && pt_model_master_shards(m, i);
        if (!sharded)
            round_range(m, a, b);
        for (int k = 0; sharded && k < m->n_master; k++)
            round_range(m, a > m->master_lo[k] ? a : m->master_lo[k],
                        b < m->master_hi[k] ? b : m->master_hi[k]);
    }
    m->low_stale = false;
}

void pt_model_refresh_low(pt_model *m) { refresh_low(m); }

/* Part i of n: every n-th kept panel from the i-th */
static void refill_part(void *arg, int i)
{
    pt_model *m = arg;
    int n = pt_blas_threads();
    for (int j = i; j < 2 * m->n_params; j += n)
        pt_gemm_packed_refill(&m->packed[j]);
}

void pt_model_prepare_products(pt_model *m)
{
    refresh_low(m);
    if (m->packed)
        pt_gemm_parallel(pt_blas_threads(), refill_part, m);
}

int pt_model_shard_master(pt_model *m, const size_t *lo, const size_t *hi, int n)
{
    if (!m->low)
        return PT_OK;
    m->n_master = 0, m->released = 0;
    m->low_stale = true;
    refresh_low(m); /* from every float, all current */
    free(m->master_lo);
    free(m->master_hi);
    m->master_lo = m->master_hi = NULL;
    if (n <= 0)
        return PT_OK;
    m->master_lo = malloc((size_t)n * sizeof(size_t));
    m->master_hi = malloc((size_t)n * sizeof(size_t));
    if (!m->master_lo || !m->master_hi)
        return pt_fail(PT_ENOMEM, "cannot allocate the master's ranges");
    memcpy(m->master_lo, lo, (size_t)n * sizeof(size_t));
    memcpy(m->master_hi, hi, (size_t)n * sizeof(size_t));
    m->n_master = n;
    pt_model_release_master(m);
    return PT_OK;
}

void pt_model_release_master(pt_model *m)
{
    const size_t *lo = m->master_lo, *hi = m->master_hi;
    int n = m->n_master;
    m->released = 0;
    for (int i = 0; n && i < m->n_params; i++) {
        const pt_param *p = &m->params[i];
        if (!p->data || !pt_model_master_shards(m, i))
            continue;
        /* the gaps between the kept ranges, within the matrix */
        size_t a = (size_t)(p->data - m->data.base), b = a + p->numel, at = a;
        for (int k = 0; k <= n && at < b; k++) {
            size_t end = k < n ? lo[k] : b, next = k < n ? hi[k] : b;
            end = end < b ? end : b;
            if (end > at) {
                pt_arena_clear(&m->data, at, end);
                m->released += end - at;
            }
            at = next > at ? next : at;
        }
    }
}

void pt_model_sum_tied_grads(pt_model *m)
{
    for (int i = 0; i < m->n_params; i++) {
        pt_param *p = &m->params[i];
        if (!p->tied_to || !p->grad)
            continue;
        const pt_param *src = pt_model_find_param(m, p->tied_to);
        if (!src->grad)
            continue;
        for (size_t j = 0; j < p->numel; j++) {
            float s = src->grad[j] + p->grad[j];
            src->grad[j] = s;
            p->grad[j] = s;
        }
    }
}

/* ---- activations ---- */

static int check_range(const pt_model *m, int first, int last)
{
    if (first < 0 || last >= m->n_blocks || first > last)
        return pt_fail(PT_EINVAL, "block range %d..%d is not within the model's %d blocks", first,
                       last, m->n_blocks);
    return PT_OK;
}

/* Running blocks needs their parameters: a stage runs only what it holds. */
static int check_held(const pt_model *m, int first, int last)
{
    for (int b = first; b <= last; b++)
        if (!m->held[b])
            return pt_fail(PT_EINVAL, "block %d (%s) is not held by this stage", b,
                           m->blocks[b].ops->kind);
    return PT_OK;
}

/* Bytes of a block's output (or of its gradient) for a micro-batch: loss
 * heads write float probabilities, every other block activations. */
static size_t out_bytes(const pt_model *m, const pt_block *b, int batch)
{
    size_t size = b->ops->out_is_float ? sizeof(float) : pt_elem_size(m->k->act);
    return (size_t)batch * (size_t)b->out_floats * size;
}

/* Bytes of the gradient of a block's output for a micro-batch: none for a
 * loss head, whose backward starts from its own loss (GPT-2's LM head
 * would otherwise hold tokens x vocabulary floats that nothing reads, per
 * micro-batch in flight). */
static size_t grad_bytes(const pt_model *m, const pt_block *b, int batch)
{
    return b->ops->out_is_float ? 0 : out_bytes(m, b, batch);
}

/* The mlp's first block reads the micro-batch's float inputs: under bf16 a
 * record keeps them rounded, as the block's input activation. */
static size_t in0_bytes(const pt_model *m, int first, int batch)
{
    if (first != 0 || m->io.tokens || m->k->act == PT_F32)
        return 0;
    return (size_t)batch * (size_t)m->blocks[0].in_floats * pt_elem_size(m->k->act);
}

static size_t grads_area_bytes(const pt_block *b, int batch)
{
    return b->ops->grads_bytes ? b->ops->grads_bytes(b, batch) : 0;
}

/* Bytes of the range's last output when it is kept only until the
 * backward (out_to_backward), apart from the record; 0 otherwise */
static size_t output_apart_bytes(const pt_model *m, int last, int batch)
{
    const pt_block *b = &m->blocks[last];
    return b->ops->out_to_backward ? out_bytes(m, b, batch) : 0;
}

/* Floats of arena for each block's output (but the last's, kept apart) and
 * saved activations. */
static size_t forward_floats(const pt_model *m, int first, int last, int batch, bool apart)
{
    size_t floats = pt_arena_floats_for(in0_bytes(m, first, batch));
    for (int i = first; i <= last; i++) {
        const pt_block *b = &m->blocks[i];
        size_t out =
            apart && i == last && output_apart_bytes(m, last, batch) ? 0 : out_bytes(m, b, batch);
        floats += pt_arena_floats_for(out) + pt_arena_floats_for(b->ops->saved_bytes(b, batch));
    }
    return floats;
}

/* Floats of arena for each block's output gradient and grads area. */
static size_t backward_floats(const pt_model *m, int first, int last, int batch)
{
    size_t floats = 0;
    for (int i = first; i <= last; i++) {
        const pt_block *b = &m->blocks[i];
        floats += pt_arena_floats_for(grad_bytes(m, b, batch)) +
                  pt_arena_floats_for(grads_area_bytes(b, batch));
    }
    return floats;
}

size_t pt_model_forward_record_bytes(const pt_model *m, int first, int last, int batch)
{
    if (check_range(m, first, last) != PT_OK || batch < 1)
        return 0;
    return pt_arena_round(forward_floats(m, first, last, batch, true)) * sizeof(float);
}

size_t pt_model_output_part_bytes(const pt_model *m, int first, int last, int batch)
{
    if (check_range(m, first, last) != PT_OK || batch < 1)
        return 0;
    return pt_arena_floats_for(output_apart_bytes(m, last, batch)) * sizeof(float);
}

size_t pt_model_grad_record_bytes(const pt_model *m, int first, int last, int batch)
{
    if (check_range(m, first, last) != PT_OK || batch < 1)
        return 0;
    return pt_arena_round(backward_floats(m, first, last, batch)) * sizeof(float);
}

size_t pt_model_activation_bytes(const pt_model *m, int first, int last, int batch)
{
    return pt_model_forward_record_bytes(m, first, last, batch) +
           pt_model_output_part_bytes(m, first, last, batch) +
           pt_model_grad_record_bytes(m, first, last, batch);
}

size_t pt_model_param_bytes(const pt_model *m, int first, int last)
{
    size_t floats = 0;
    for (int b = first; b <= last && b < m->n_blocks; b++)
        for (int i = 0; b >= 0 && i < m->blocks[b].n_params; i++)
            floats += pt_arena_round(pt_param_decl_numel(&m->blocks[b].decl[i]));
    return floats * sizeof(float);
}

/* A message naming what could not be allocated, and how to need less. */
static int cannot_allocate(const pt_model *m, int rc, const char *what, int first, int last,
                           int batch, size_t floats)
{
    char per[48] = "";
    if (m->io.tokens)
        snprintf(per, sizeof per, " of %d tokens", m->io.tokens);
    return pt_fail(rc,
                   "the %s of blocks %d..%d for a micro-batch of %d sample%s%s "
                   "need %.0f bytes, which cannot be allocated: a smaller micro-batch, "
                   "sequence or model, or activation checkpointing, needs less",
                   what, first, last, batch, batch == 1 ? "" : "s", per,
                   (double)floats * sizeof(float));
}

static int check_batch(const pt_model *m, int first, int last, int batch)
{
    int rc = check_range(m, first, last);
    if (rc != PT_OK)
        return rc;
    if (batch < 1)
        return pt_fail(PT_EINVAL, "micro-batch size must be >= 1 (got %d)", batch);
    for (int i = first; i <= last; i++)
        if ((double)batch * m->blocks[i].out_floats > (double)INT_MAX)
            return pt_fail(PT_EINVAL,
                           "a micro-batch of %d samples gives block %d an output of %.0f "
                           "floats, more than one tensor may index",
                           batch, i, (double)batch * m->blocks[i].out_floats);
    return PT_OK;
}

int pt_grad_record_create(const pt_model *m, int first, int last, int batch, pt_grad_record **out)
{
    *out = NULL;
    int rc = check_batch(m, first, last, batch);
    if (rc != PT_OK)
        return rc;
    pt_grad_record *g = calloc(1, sizeof *g);
    int n = last - first + 1;
    if (!g || !(g->dout = calloc((size_t)n, sizeof(void *))) ||
        !(g->grads = calloc((size_t)n, sizeof(void *)))) {
        pt_grad_record_destroy(g);
        return pt_fail(PT_ENOMEM, "cannot allocate a gradient record");
    }
    g->first = first, g->last = last, g->batch = batch;
    size_t floats = backward_floats(m, first, last, batch);
    if (floats && (rc = pt_arena_init(&g->arena, floats)) != PT_OK) {
        pt_grad_record_destroy(g);
        return cannot_allocate(m, rc, "gradients", first, last, batch, floats);
    }
    for (int i = first; i <= last; i++) {
        const pt_block *b = &m->blocks[i];
        size_t dout = grad_bytes(m, b, batch), area = grads_area_bytes(b, batch);
        g->dout[i - first] = dout ? pt_arena_take(&g->arena, pt_arena_floats_for(dout)) : NULL;
        g->grads[i - first] = area ? pt_arena_take(&g->arena, pt_arena_floats_for(area)) : NULL;
    }
    *out = g;
    return PT_OK;
}

void pt_grad_record_destroy(pt_grad_record *g)
{
    if (!g)
        return;
    pt_arena_free(&g->arena);
    free(g->dout);
    free(g->grads);
    free(g);
}

size_t pt_grad_record_bytes(const pt_grad_record *g) { return g->arena.capacity * sizeof(float); }

/* A record's forward part; with `apart`, the last block's output (when it
 * is kept only until the backward) left for pt_activations_attach_output */
static int create_forward(const pt_model *m, int first, int last, int batch, bool apart,
                          pt_activations **out)
{
    *out = NULL;
    int rc = check_batch(m, first, last, batch);
    if (rc != PT_OK)
        return rc;
    pt_activations *a = calloc(1, sizeof *a);
    int n = last - first + 1;
    if (!a || !(a->out = calloc((size_t)n, sizeof(void *))) ||
        !(a->saved = calloc((size_t)n, sizeof(void *)))) {
        pt_activations_destroy(a);
        return pt_fail(PT_ENOMEM, "cannot allocate activations");
    }
    a->m = m, a->first = first, a->last = last, a->batch = batch;
    a->output_apart = apart && output_apart_bytes(m, last, batch);
    size_t floats = forward_floats(m, first, last, batch, apart);
    if ((rc = pt_arena_init(&a->arena, floats)) != PT_OK) {
        pt_activations_destroy(a);
        return cannot_allocate(m, rc, "activations", first, last, batch, floats);
    }
    size_t in0 = in0_bytes(m, first, batch);
    a->in0 = in0 ? pt_arena_take(&a->arena, pt_arena_floats_for(in0)) : NULL;
    for (int i = first; i <= last; i++) {
        const pt_block *b = &m->blocks[i];
        if (!(a->output_apart && i == last))
            a->out[i - first] =
                pt_arena_take(&a->arena, pt_arena_floats_for(out_bytes(m, b, batch)));
        a->saved[i - first] =
            pt_arena_take(&a->arena, pt_arena_floats_for(b->ops->saved_bytes(b, batch)));
    }
    *out = a;
    return PT_OK;
}

int pt_activations_create_forward(const pt_model *m, int first, int last, int batch,
                                  pt_activations **out)
{
    return create_forward(m, first, last, batch, true, out);
}

int pt_activations_create(const pt_model *m, int first, int last, int batch, pt_activations **out)
{
    int rc = create_forward(m, first, last, batch, false, out);
    if (rc == PT_OK && (rc = pt_grad_record_create(m, first, last, batch, &(*out)->own)) != PT_OK) {
        pt_activations_destroy(*out);
        *out = NULL;
    }
    if (rc == PT_OK)
        (*out)->g = (*out)->own;
    return rc;
}

void pt_activations_destroy(pt_activations *a)
{
    if (!a)
        return;
    pt_grad_record_destroy(a->own);
    pt_arena_free(&a->arena);
    free(a->out);
    free(a->saved);
    free(a);
}

void pt_activations_attach_grads(pt_activations *a, pt_grad_record *g) { a->g = g; }

pt_grad_record *pt_activations_detach_grads(pt_activations *a)
{
    pt_grad_record *g = a->g;
    a->g = NULL;
    return g;
}

pt_grad_record *pt_activations_grads(const pt_activations *a) { return a->g; }

void pt_activations_attach_output(pt_activations *a, void *buf)
{
    if (a->output_apart)
        a->out[a->last - a->first] = buf;
}

void *pt_activations_detach_output(pt_activations *a)
{
    if (!a->output_apart)
        return NULL;
    void *buf = a->out[a->last - a->first];
    a->out[a->last - a->first] = NULL;
    return buf;
}

size_t pt_activations_bytes(const pt_activations *a)
{
    return (a->arena.capacity * sizeof(float)) + (a->own ? pt_grad_record_bytes(a->own) : 0);
}

const void *pt_activations_output(const pt_activations *a) { return a->out[a->last - a->first]; }

size_t pt_activations_output_floats(const pt_activations *a)
{
    return (size_t)a->batch * a->m->blocks[a->last].out_floats;
}

size_t pt_activations_output_bytes(const pt_activations *a)
{
    return out_bytes(a->m, &a->m->blocks[a->last], a->batch);
}

/* ---- running a range ---- */

size_t pt_model_work_bytes(const pt_model *m, int first, int last, int batch)
{
    size_t most = 0;
    for (int i = first < 0 ? 0 : first; i <= last && i < m->n_blocks; i++) {
        const pt_block *b = &m->blocks[i];
        size_t n = b->ops->work_bytes ? b->ops->work_bytes(b, batch) : 0;
        most = n > most ? n : most;
    }
    return most;
}

/* The workspace blocks first..last need for micro-batches of `batch`:
 * grown, never shrunk. */
static int ensure_work(pt_model *m, int first, int last, int batch)
{
    size_t need = pt_model_work_bytes(m, first, last, batch);
    if (need <= m->work_bytes)
        return PT_OK;
    float *w = pt_alloc_floats(pt_arena_floats_for(need));
    if (!w)
        return pt_fail(PT_ENOMEM, "cannot allocate a stage's workspace of %zu bytes", need);
    pt_free(m->work);
    m->work = w;
    m->work_bytes = need;
    for (int i = 0; i < m->n_blocks; i++)
        m->blocks[i].work = w;
    return PT_OK;
}

/* forward and backward_input write or read the last block's output */
static int check_output(const pt_activations *acts)
{
    if (!acts->out[acts->last - acts->first])
        return pt_fail(PT_EINVAL, "block %d's output is kept apart and none is attached",
                       acts->last);
    return PT_OK;
}

static int check_call(const pt_model *m, int first, int last, const pt_microbatch *mb,
                      const void *in, const pt_activations *acts)
{
    int rc = check_range(m, first, last);
    if (rc == PT_OK)
        rc = check_held(m, first, last);
    if (rc != PT_OK)
        return rc;
    if (acts->first != first || acts->last != last || mb->batch != acts->batch)
        return pt_fail(PT_EINVAL,
                       "activations for blocks %d..%d, batch %d, used for blocks %d..%d, "
                       "batch %d",
                       acts->first, acts->last, acts->batch, first, last, mb->batch);
    if (first > 0 && !in)
        return pt_fail(PT_EINVAL, "block %d needs an input", first);
    return PT_OK;
}

/* A backward needs the record's backward part (pt_activations_attach_grads) */
static int check_backward(pt_model *m, int first, int last, const pt_microbatch *mb, const void *in,
                          const pt_activations *acts)
{
    int rc = check_call(m, first, last, mb, in, acts);
    const pt_grad_record *g = acts->g;
    if (rc == PT_OK && !g)
        rc = pt_fail(PT_EINVAL, "a backward over blocks %d..%d without its gradient record", first,
                     last);
    else if (rc == PT_OK && (g->first != first || g->last != last || g->batch != acts->batch))
        rc = pt_fail(PT_EINVAL,
                     "a gradient record for blocks %d..%d, batch %d, attached to activations "
                     "for blocks %d..%d, batch %d",
                     g->first, g->last, g->batch, first, last, acts->batch);
    if (rc == PT_OK)
        rc = ensure_work(m, first, last, mb->batch);
    return rc;
}

/* Refuses tokens and targets outside the vocabulary (or class count) before
 * any block indexes a table with them. */
static int check_labels(const pt_model *m, int first, int last, const pt_microbatch *mb)
{
    const pt_model_io *io = &m->io;
    if (first == 0 && io->tokens) {
        if (!mb->tokens)
            return pt_fail(PT_EINVAL, "the micro-batch has no tokens");
        size_t n = (size_t)mb->batch * io->tokens;
        for (size_t i = 0; i < n; i++)
            if (mb->tokens[i] < 0 || mb->tokens[i] >= io->vocab)
                return pt_fail(PT_EINVAL,
                               "token %d at position %zu is outside the vocabulary "
                               "of %d",
                               mb->tokens[i], i, io->vocab);
    }
    if (first == 0 && !io->tokens && !mb->inputs)
        return pt_fail(PT_EINVAL, "the micro-batch has no inputs");
    if (last == m->n_blocks - 1 && mb->targets && io->labels) {
        /* a token model may skip a position's loss with -1 */
        size_t n = (size_t)mb->batch * io->labels;
        int lowest = io->tokens ? -1 : 0;
        for (size_t i = 0; i < n; i++)
            if (mb->targets[i] < lowest || mb->targets[i] >= io->classes)
                return pt_fail(PT_EINVAL, "target %d at position %zu is outside 0..%d",
                               mb->targets[i], i, io->classes - 1);
    }
    return PT_OK;
}

/* What the loss compares against: labels or float values. */
static const void *targets_of(const pt_model *m, const pt_microbatch *mb)
{
    return m->io.values ? (const void *)mb->target_values : (const void *)mb->targets;
}

static const void *block_input(const pt_model *m, int i, const pt_microbatch *mb, const void *in,
                               const pt_activations *a)
{
    if (i > a->first)
        return a->out[i - 1 - a->first];
    if (i == 0 && !m->io.tokens)
        return a->in0 ? a->in0 : mb->inputs;
    return in;
}

int pt_model_forward(pt_model *m, int first, int last, const pt_microbatch *mb, const void *in,
                     pt_activations *acts, float *loss)
{
    int rc = check_call(m, first, last, mb, in, acts);
    if (rc == PT_OK)
        rc = check_output(acts);
    if (rc == PT_OK)
        rc = ensure_work(m, first, last, mb->batch);
    if (rc == PT_OK)
        rc = check_labels(m, first, last, mb);
    if (rc != PT_OK)
        return rc;
    refresh_low(m);
    if (acts->in0)
        pt_bf16_from_floats(acts->in0, mb->inputs, (size_t)mb->batch * m->blocks[0].in_floats);
    double loss_sum = 0.0;
    int loss_rows = 0;
    for (int i = first; i <= last; i++) {
        pt_block *b = &m->blocks[i];
        b->ops->forward(b, mb, block_input(m, i, mb, in, acts), acts->out[i - first],
                        acts->saved[i - first], &loss_sum, &loss_rows);
    }
    if (loss)
        *loss = loss_rows ? (float)(loss_sum / loss_rows) : 0.0f;
    return PT_OK;
}

int pt_model_backward_input(pt_model *m, int first, int last, const pt_microbatch *mb,
                            const void *in, pt_activations *acts, const void *dout, void *din,
                            float loss_scale)
{
    int rc = check_backward(m, first, last, mb, in, acts);
    if (rc == PT_OK)
        rc = check_output(acts);
    if (rc != PT_OK)
        return rc;
    refresh_low(m);
    int ends_in_loss = last == m->n_blocks - 1;
    if (ends_in_loss && !targets_of(m, mb))
        return pt_fail(PT_EINVAL, "backward through the loss needs %s",
                       m->io.values ? "target values" : "targets");
    if (!ends_in_loss) {
        if (!dout)
            return pt_fail(PT_EINVAL, "block %d needs the gradient of its output", last);
        /* kept: backward_weight may run long after the caller reuses dout */
        memcpy(acts->g->dout[last - first], dout, out_bytes(m, &m->blocks[last], mb->batch));
    }
    for (int i = last; i >= first; i--) {
        pt_block *b = &m->blocks[i];
        void *d = i > first ? acts->g->dout[i - 1 - first] : din;
        b->grads = acts->g->grads[i - first];
        b->ops->backward_input(b, mb, block_input(m, i, mb, in, acts), acts->out[i - first],
                               acts->saved[i - first], acts->g->dout[i - first], d, loss_scale);
    }
    return PT_OK;
}

int pt_model_backward_weight(pt_model *m, int first, int last, const pt_microbatch *mb,
                             const void *in, pt_activations *acts)
{
    int rc = check_backward(m, first, last, mb, in, acts);
    if (rc != PT_OK)
        return rc;
    for (int i = last; i >= first; i--) {
        pt_block *b = &m->blocks[i];
        b->grads = acts->g->grads[i - first];
        b->ops->backward_weight(b, mb, block_input(m, i, mb, in, acts), acts->out[i - first],
                                acts->saved[i - first], acts->g->dout[i - first]);
    }
    return PT_OK;
}

/* ---- the weight pass in pieces (zero 2) ---- */

static bool has_params(const pt_model *m, int b) { return m->blocks[b].n_params > 0; }

int pt_model_weight_pieces(const pt_model *m, int first, int last)
{
    int n = 0;
    for (int b = first; b <= last && b < m->n_blocks; b++)
        n += b >= 0 && has_params(m, b);
    return n > 0 ? n : 1;
}

/* Blocks *lo..*hi of weight piece `piece`; the block with parameters among
 * them, or -1 (a range with none is one piece). */
static int weight_piece_blocks(const pt_model *m, int first, int last, int piece, int *lo, int *hi)
{
    int seen = 0, below = last + 1, owner = -1;
    *hi = last, *lo = first;
    for (int b = last; b >= first; b--) {
        if (!has_params(m, b))
            continue;
        if (seen == piece)
            *hi = below - 1, owner = b;
        else if (seen == piece + 1)
            *lo = below;
        below = b;
        seen++;
    }
    return owner; /* the last piece keeps the blocks without parameters below it */
}

int pt_model_backward_weight_piece(pt_model *m, int first, int last, int piece,
                                   const pt_microbatch *mb, const void *in, pt_activations *acts)
{
    int rc = check_backward(m, first, last, mb, in, acts);
    if (rc == PT_OK && (piece < 0 || piece >= pt_model_weight_pieces(m, first, last)))
        rc = pt_fail(PT_EINVAL, "blocks %d..%d have no weight piece %d", first, last, piece);
    if (rc != PT_OK)
        return rc;
    int lo, hi;
    weight_piece_blocks(m, first, last, piece, &lo, &hi);
    for (int i = hi; i >= lo; i--) {
        pt_block *b = &m->blocks[i];
        b->grads = acts->g->grads[i - first];
        b->ops->backward_weight(b, mb, block_input(m, i, mb, in, acts), acts->out[i - first],
                                acts->saved[i - first], acts->g->dout[i - first]);
    }
    return PT_OK;
}

void pt_model_weight_piece_grads(const pt_model *m, int first, int last, int piece, size_t *from,
                                 size_t *to)
{
    int lo, hi, b = weight_piece_blocks(m, first, last, piece, &lo, &hi);
    *from = *to = 0;
    if (b < 0 || !m->held[b])
        return;
    const pt_block *blk = &m->blocks[b];
    *from = (size_t)(blk->g[0] - m->grad.base);
    *to = (size_t)(blk->g[blk->n_params - 1] - m->grad.base) +
          pt_param_decl_numel(&blk->decl[blk->n_params - 1]);
}

/* ---- tensor-parallel pieces ---- */

static int block_sums(const pt_block *b, int backward)
{
    return b->ops->tensor_sums ? b->ops->tensor_sums(b, backward) : 0;
}

const pt_param_decl *pt_model_param_decl(const pt_model *m, int i)
{
    int b = m->params[i].block;
    return &m->blocks[b].decl[i - pt_model_block_first_param(m, b)];
}

int pt_model_tensor_pieces(const pt_model *m, int first, int last, int backward)
{
    int n = 1;
    for (int i = first; i <= last && i < m->n_blocks; i++)
        n += block_sums(&m->blocks[i], backward);
    return n;
}

/* Which block and which of its pieces the pass's sum point `piece` ends
 * (forward: blocks in order; backward: from the last block down). */
static int locate_sum(const pt_model *m, int first, int last, int backward, int piece, int *sub)
{
    int seen = 0;
    for (int k = 0; k <= last - first; k++) {
        int i = backward ? last - k : first + k, n = block_sums(&m->blocks[i], backward);
        if (piece < seen + n) {
            *sub = piece - seen;
            return i;
        }
        seen += n;
    }
    return -1;
}

int pt_model_forward_piece(pt_model *m, int first, int last, int piece, const pt_microbatch *mb,
                           const void *in, pt_activations *acts, float *loss)
{
    int rc = check_call(m, first, last, mb, in, acts);
    if (rc == PT_OK)
        rc = check_output(acts);
    if (rc == PT_OK)
        rc = ensure_work(m, first, last, mb->batch);
    if (rc == PT_OK && piece == 0)
        rc = check_labels(m, first, last, mb);
    if (rc != PT_OK)
        return rc;
    refresh_low(m);
    if (piece == 0 && acts->in0)
        pt_bf16_from_floats(acts->in0, mb->inputs, (size_t)mb->batch * m->blocks[0].in_floats);
    double loss_sum = 0.0;
    int loss_rows = 0, at = 0; /* sum points before the block */
    for (int i = first; i <= last; i++) {
        pt_block *b = &m->blocks[i];
        int n = block_sums(b, 0);
        const void *x = block_input(m, i, mb, in, acts);
        void *out = acts->out[i - first], *saved = acts->saved[i - first];
        if (n == 0 && at == piece)
            b->ops->forward(b, mb, x, out, saved, &loss_sum, &loss_rows);
        else if (n > 0 && piece >= at && piece <= at + n)
            b->ops->forward_piece(b, piece - at, mb, x, out, saved, &loss_sum, &loss_rows);
        at += n;
    }
    if (loss && piece == at)
        *loss = loss_rows ? (float)(loss_sum / loss_rows) : 0.0f;
    return PT_OK;
}

int pt_model_backward_input_piece(pt_model *m, int first, int last, int piece,
                                  const pt_microbatch *mb, const void *in, pt_activations *acts,
                                  const void *dout, void *din, float loss_scale)
{
    int rc = check_backward(m, first, last, mb, in, acts);
    if (rc == PT_OK)
        rc = check_output(acts);
    if (rc != PT_OK)
        return rc;
    refresh_low(m);
    if (piece == 0 && last != m->n_blocks - 1) {
        if (!dout)
            return pt_fail(PT_EINVAL, "block %d needs the gradient of its output", last);
        memcpy(acts->g->dout[last - first], dout, out_bytes(m, &m->blocks[last], mb->batch));
    }
    for (int i = last, at = 0; i >= first; i--) {
        pt_block *b = &m->blocks[i];
        int n = block_sums(b, 1);
        void *d = i > first ? acts->g->dout[i - 1 - first] : din;
        const void *x = block_input(m, i, mb, in, acts);
        void *out = acts->out[i - first], *saved = acts->saved[i - first];
        b->grads = acts->g->grads[i - first];
        if (n == 0 && at == piece)
            b->ops->backward_input(b, mb, x, out, saved, acts->g->dout[i - first], d, loss_scale);
        else if (n > 0 && piece >= at && piece <= at + n)
            b->ops->backward_input_piece(b, piece - at, mb, x, out, saved, acts->g->dout[i - first],
                                         d, loss_scale);
        at += n;
    }
    return PT_OK;
}

float *pt_model_tensor_sum_buffer(const pt_model *m, int first, int last, int backward, int piece,
                                  const pt_activations *acts, size_t *count)
{
    int sub, i = locate_sum(m, first, last, backward, piece, &sub);
    *count = 0;
    if (i < 0)
        return NULL;
    const pt_block *b = &m->blocks[i];
    return b->ops->tensor_sum_buffer(b, backward, sub, acts->batch, acts->out[i - first],
                                     acts->saved[i - first], count);
}

pt_group_how pt_model_tensor_sum_how(const pt_model *m, int first, int last, int backward,
                                     int piece, int batch)
{
    int sub, i = locate_sum(m, first, last, backward, piece, &sub);
    const pt_block *b = i >= 0 ? &m->blocks[i] : NULL;
    if (!b || !b->ops->tensor_sum_how)
        return (pt_group_how){PT_GROUP_SUM, 0, 0};
    return b->ops->tensor_sum_how(b, backward, sub, batch);
}

int pt_model_step_microbatch(pt_model *m, const pt_microbatch *mb, float loss_scale,
                             pt_activations *acts, float *loss)
{
    int last = m->n_blocks - 1;
    int rc = pt_model_forward(m, 0, last, mb, NULL, acts, loss);
    if (rc == PT_OK)
        rc = pt_model_backward_input(m, 0, last, mb, NULL, acts, NULL, NULL, loss_scale);
    if (rc == PT_OK)
        rc = pt_model_backward_weight(m, 0, last, mb, NULL, acts);
    return rc;
}
