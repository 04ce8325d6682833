/* embedding.c: the input blocks that read tokens.
 *   embedding      GPT-2's: tokens (B,T) -> out (B,T,C) = wte[token] + wpe[t]
 *                  Parameters transformer.wte.weight (V,C) and
 *                  transformer.wpe.weight (n_positions,C), of which a sample
 *                  uses rows 0..T-1. With tied embeddings the LM head keeps
 *                  a copy of wte (lm_head.c).
 *   tok_embedding  the token table alone, for models whose positions come
 *                  later (Llama's rotary ones; Hugging Face's
 *                  model.embed_tokens): out (B,T,C) = weight[token],
 *                  parameter <prefix>.weight (V,C) as torch.nn.Embedding.
 * Tokens have no gradient; backward_weight scatters dout into the tables. */
#include <stdio.h>
#include <string.h>

#include "nn/block.h"

enum { WTE, WPE };

// tokens (B,T) -> out (B,T,C)
static void embedding_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                              void *saved, double *loss_sum, int *loss_rows)
{
    (void)in, (void)saved, (void)loss_sum, (void)loss_rows;
    int T = b->shape.T, C = b->shape.C;
    for (int i = 0; i < mb->batch; i++)
        for (int t = 0; t < T; t++) {
            const float *te = b->p[WTE] + (size_t)mb->tokens[i * T + t] * C;
            const float *pe = b->p[WPE] + (size_t)t * C;
            b->k->add_floats(pt_elems_at(out, ((size_t)i * T + t) * C, b->k->act), te, pe, C);
        }
}

// dout (B,T,C) -> dwte (V,C), dwpe (T,C)
static void embedding_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                      const void *out, const void *saved, const void *dout)
{
    (void)in, (void)out, (void)saved;
    int T = b->shape.T, C = b->shape.C;
    for (int i = 0; i < mb->batch; i++)
        for (int t = 0; t < T; t++) {
            const void *d = pt_elems_at(dout, ((size_t)i * T + t) * C, b->k->act);
            float *te = b->g[WTE] + (size_t)mb->tokens[i * T + t] * C;
            float *pe = b->g[WPE] + (size_t)t * C;
            b->k->accumulate(te, d, C);
            b->k->accumulate(pe, d, C);
        }
}

static pt_block_cost embedding_cost(const pt_block *b)
{
    double n = (double)b->shape.T * b->shape.C;
    return (pt_block_cost){.forward_flops = n, .backward_weight_flops = 2 * n};
}

static const pt_block_ops embedding_ops = {
    .kind = "embedding",
    .reads_tokens = 1,
    .saved_bytes = pt_block_saves_nothing,
    .forward = embedding_forward,
    .backward_input = pt_block_no_input_grad,
    .backward_weight = embedding_backward_weight,
    .cost = embedding_cost,
};

/* ---- the token table alone ---- */

// tokens (B,T) -> out (B,T,C)
static void tok_embedding_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                  void *saved, double *loss_sum, int *loss_rows)
{
    (void)in, (void)saved, (void)loss_sum, (void)loss_rows;
    int T = b->shape.T, C = b->shape.C;
    for (size_t r = 0; r < (size_t)mb->batch * T; r++) {
        const float *te = b->p[WTE] + (size_t)mb->tokens[r] * C;
        for (int c = 0; c < C; c++)
            pt_act_store(b, out, r * C + c, te[c]);
    }
}

// dout (B,T,C) -> dweight (V,C)
static void tok_embedding_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                          const void *out, const void *saved, const void *dout)
{
    (void)in, (void)out, (void)saved;
    int T = b->shape.T, C = b->shape.C;
    for (size_t r = 0; r < (size_t)mb->batch * T; r++)
        b->k->accumulate(b->g[WTE] + (size_t)mb->tokens[r] * C, pt_elems_at(dout, r * C, b->k->act),
                         C);
}

static pt_block_cost tok_embedding_cost(const pt_block *b)
{
    double n = (double)b->shape.T * b->shape.C;
    return (pt_block_cost){.backward_weight_flops = n};
}

static const pt_block_ops tok_embedding_ops = {
    .kind = "tok_embedding",
    .reads_tokens = 1,
    .saved_bytes = pt_block_saves_nothing,
    .forward = tok_embedding_forward,
    .backward_input = pt_block_no_input_grad,
    .backward_weight = tok_embedding_backward_weight,
    .cost = tok_embedding_cost,
};

void pt_tok_embedding_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    char name[96];
    b->ops = &tok_embedding_ops;
    b->shape = *s;
    b->in_floats = 0;
    b->out_floats = s->T * s->C;
    int te[2] = {s->V, s->C};
    snprintf(name, sizeof name, "%s.weight", prefix);
    pt_block_declare(b, name, 2, te, PT_INIT_NORMAL, 0.02f);
    b->decl[0].float_read = 1; /* rows looked up, not multiplied */
}

void pt_embedding_init(pt_block *b, const pt_block_shape *s)
{
    b->ops = &embedding_ops;
    b->shape = pt_block_shape_gpt(s);
    b->in_floats = 0;
    b->out_floats = s->T * s->C;
    int te[2] = {s->V, s->C}, pe[2] = {b->shape.n_positions, s->C};
    pt_block_declare(b, "transformer.wte.weight", 2, te, PT_INIT_NORMAL, 0.02f);
    pt_block_declare(b, "transformer.wpe.weight", 2, pe, PT_INIT_NORMAL, 0.02f);
    b->decl[0].float_read = b->decl[1].float_read = 1; /* rows looked up, not multiplied */
    if (s->tensor > 1)
        pt_embedding_split(b);
}
