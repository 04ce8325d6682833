/* block.c: what every block shares: declaring parameters and counting them.
 * The blocks themselves live one kind per file beside this one. */
#include "nn/block.h"

#include <stdio.h>
#include <string.h>

int pt_block_declare(pt_block *b, const char *name, int ndim, const int *shape, pt_init_kind init,
                     float std)
{
    int i = b->n_params++;
    pt_param_decl *d = &b->decl[i];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->ndim = ndim;
    for (int k = 0; k < ndim; k++)
        d->shape[k] = shape[k];
    d->init = init;
    d->std = std;
    return i;
}

pt_block_shape pt_block_shape_gpt(const pt_block_shape *s)
{
    pt_block_shape r = *s;
    r.n_inner = r.n_inner ? r.n_inner : 4 * r.C;
    r.n_positions = r.n_positions ? r.n_positions : r.T;
    r.ln_eps = r.ln_eps != 0.0f ? r.ln_eps : 1e-5f;
    return r;
}

size_t pt_param_decl_numel(const pt_param_decl *d)
{
    size_t n = 1;
    for (int k = 0; k < d->ndim; k++)
        n *= (size_t)d->shape[k];
    return n;
}

size_t pt_block_param_bytes(const pt_block *b)
{
    size_t n = 0;
    for (int i = 0; i < b->n_params; i++)
        n += pt_param_decl_numel(&b->decl[i]);
    return n * sizeof(float);
}

void pt_block_declare_linear(pt_block *b, const char *prefix, int in, int out, float std)
{
    char name[96];
    int ws[2] = {in, out}, bs[1] = {out};
    snprintf(name, sizeof name, "%s.weight", prefix);
    pt_block_declare(b, name, 2, ws, PT_INIT_NORMAL, std);
    snprintf(name, sizeof name, "%s.bias", prefix);
    pt_block_declare(b, name, 1, bs, PT_INIT_ZEROS, 0.0f);
}

void pt_block_declare_layernorm(pt_block *b, const char *prefix, int C)
{
    char name[96];
    int cs[1] = {C};
    snprintf(name, sizeof name, "%s.weight", prefix);
    pt_block_declare(b, name, 1, cs, PT_INIT_ONES, 0.0f);
    snprintf(name, sizeof name, "%s.bias", prefix);
    pt_block_declare(b, name, 1, cs, PT_INIT_ZEROS, 0.0f);
}

void pt_block_split_param(pt_block *b, int i, int dim, int groups, int parts, int part)
{
    pt_param_decl *d = &b->decl[i];
    d->shape[dim] /= parts;
    d->split_dim = dim;
    d->split_groups = groups;
    d->split_parts = parts;
    d->split_part = part;
}

void pt_param_slice_copy(const pt_param_decl *d, float *slice, const float *whole, int to_whole)
{
    /* the tensor as (outer, along, inner) around the split dimension */
    size_t outer = 1, inner = 1;
    for (int k = 0; k < d->split_dim; k++)
        outer *= (size_t)d->shape[k];
    for (int k = d->split_dim + 1; k < d->ndim; k++)
        inner *= (size_t)d->shape[k];
    size_t local = (size_t)d->shape[d->split_dim], parts = (size_t)d->split_parts;
    size_t groups = (size_t)d->split_groups, run = local / groups * inner;
    size_t whole_row = local * parts * inner, local_row = local * inner;
    for (size_t o = 0; o < outer; o++)
        for (size_t g = 0; g < groups; g++) {
            const size_t at = o * whole_row + g * run * parts + (size_t)d->split_part * run;
            float *mine = slice + o * local_row + g * run;
            if (to_whole)
                memcpy((float *)whole + at, mine, run * sizeof(float));
            else
                memcpy(mine, whole + at, run * sizeof(float));
        }
}

size_t pt_block_saves_nothing(const pt_block *b, int B)
{
    (void)b, (void)B;
    return 0;
}

void pt_block_no_input_grad(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                            void *saved, const void *dout, void *din, float loss_scale)
{
    (void)b, (void)mb, (void)in, (void)out, (void)saved, (void)dout, (void)din, (void)loss_scale;
}

void pt_block_no_weights(pt_block *b, const pt_microbatch *mb, const void *in, const void *out,
                         const void *saved, const void *dout)
{
    (void)b, (void)mb, (void)in, (void)out, (void)saved, (void)dout;
}
