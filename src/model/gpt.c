/* gpt.c: GPT-2 as a list of blocks: the embedding, n_layer transformer
 * blocks, then final LayerNorm + tied LM head + cross-entropy. A stage
 * boundary may fall between any two of them. */
#include "model/model.h"
#include "tensor/error.h"

int pt_gpt_build(pt_model *m)
{
    const pt_model_config *c = &m->cfg;
    if (c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->seq_len < 1 || c->vocab < 2)
        return pt_fail(PT_EINVAL,
                       "gpt needs layers, heads, embd, seq >= 1 and vocab >= 2 "
                       "(got layers %d, heads %d, embd %d, seq %d, vocab %d)",
                       c->n_layer, c->n_head, c->n_embd, c->seq_len, c->vocab);
    if (c->n_embd % c->n_head)
        return pt_fail(PT_EINVAL, "gpt: embd %d is not a multiple of heads %d", c->n_embd,
                       c->n_head);
    if (c->n_layer + 2 > PT_MODEL_MAX_BLOCKS)
        return pt_fail(PT_EINVAL, "gpt: at most %d layers", PT_MODEL_MAX_BLOCKS - 2);
    pt_block_shape s = {
        .T = c->seq_len, .C = c->n_embd, .H = c->n_head, .V = c->vocab, .n_layer = c->n_layer};
    pt_embedding_init(&m->blocks[m->n_blocks++], &s);
    for (int l = 0; l < c->n_layer; l++)
        pt_transformer_init(&m->blocks[m->n_blocks++], &s, l);
    pt_lm_head_init(&m->blocks[m->n_blocks++], &s);
    return PT_OK;
}
