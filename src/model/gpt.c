/* gpt.c: GPT-2 as a list of blocks: the embedding, n_layer transformer
 * blocks, then final LayerNorm + LM head + cross-entropy. A stage boundary
 * may fall between any two of them. The config's GPT2Config fields (MLP
 * width, position table, activation, LayerNorm epsilon, attention scaling,
 * tied embeddings) are checked here and handed to every block in its shape;
 * docs/model.md says what each one computes. */
#include <math.h>

#include "model/spec.h"
#include "tensor/error.h"

static int check_flag(const char *name, int value)
{
    if (value != 0 && value != 1)
        return pt_fail(PT_EINVAL, "gpt: %s is %d; it is a flag, 0 or 1", name, value);
    return PT_OK;
}

/* The GPT2Config fields, each refused with its name and value. */
static int check_arithmetic(const pt_model_config *c)
{
    long long inner = c->n_inner ? c->n_inner : 4LL * c->n_embd;
    if (inner < 1)
        return pt_fail(PT_EINVAL, "gpt: n_inner %d: the MLP width must be >= 1 (0: 4 n_embd)",
                       c->n_inner);
    if (c->n_positions < 0 || (c->n_positions && c->n_positions < c->seq_len))
        return pt_fail(PT_EINVAL,
                       "gpt: n_positions %d is less than seq_len %d: the position table needs "
                       "a row for every position of a sample (0: seq_len)",
                       c->n_positions, c->seq_len);
    if (!isfinite(c->layer_norm_epsilon) || c->layer_norm_epsilon <= 0.0f)
        return pt_fail(PT_EINVAL, "gpt: layer_norm_epsilon %g must be finite and > 0",
                       (double)c->layer_norm_epsilon);
    if ((unsigned)c->activation > PT_ACT_SILU)
        return pt_fail(PT_EINVAL,
                       "gpt: activation %d is none of gelu_new (%d), gelu (%d), relu (%d), "
                       "silu (%d)",
                       (int)c->activation, PT_ACT_GELU_NEW, PT_ACT_GELU, PT_ACT_RELU, PT_ACT_SILU);
    int rc = check_flag("scale_attn_weights", c->scale_attn_weights);
    if (rc == PT_OK)
        rc = check_flag("scale_attn_by_inverse_layer_idx", c->scale_attn_by_inverse_layer_idx);
    if (rc == PT_OK)
        rc = check_flag("tie_word_embeddings", c->tie_word_embeddings);
    return rc;
}

/* Megatron's split: the heads, the channels, the MLP's width and the
 * vocabulary each cut into T equal slices. */
static int check_tensor(const pt_model_config *c, int T)
{
    int inner = c->n_inner ? c->n_inner : 4 * c->n_embd;
    if (T <= 1)
        return PT_OK;
    if (c->n_head % T)
        return pt_fail(PT_EINVAL,
                       "--tensor %d does not divide the %d attention heads: each slice holds "
                       "whole heads",
                       T, c->n_head);
    if (c->n_embd % T)
        return pt_fail(PT_EINVAL, "--tensor %d does not divide the %d channels (n_embd)", T,
                       c->n_embd);
    if (inner % T)
        return pt_fail(PT_EINVAL, "--tensor %d does not divide the MLP width %d (n_inner)", T,
                       inner);
    if (c->vocab % T)
        return pt_fail(PT_EINVAL,
                       "--tensor %d does not divide the vocabulary of %d: the embedding and "
                       "the LM head are split over it",
                       T, c->vocab);
    return PT_OK;
}

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
    int rc = check_arithmetic(c);
    if (rc == PT_OK)
        rc = check_tensor(c, m->tensor);
    if (rc != PT_OK)
        return rc;
    pt_block_shape s = {.T = c->seq_len,
                        .C = c->n_embd,
                        .H = c->n_head,
                        .V = c->vocab,
                        .n_layer = c->n_layer,
                        .n_inner = c->n_inner,
                        .n_positions = c->n_positions,
                        .act = c->activation,
                        .ln_eps = c->layer_norm_epsilon,
                        .attn_unscaled = !c->scale_attn_weights,
                        .attn_by_layer = c->scale_attn_by_inverse_layer_idx,
                        .head_untied = !c->tie_word_embeddings,
                        .tensor = m->tensor,
                        .tensor_rank = m->tensor_rank,
                        .sequence_parallel = m->sequence_parallel};
    pt_layer_list l;
    if ((rc = pt_layer_list_init(&l)) != PT_OK)
        return rc;
    /* empty prefixes: the blocks keep GPT2LMHeadModel's names */
    pt_layer_item *it = pt_layer_list_add(&l, "embedding", "");
    *it = (pt_layer_item){it->entry, NULL, {c->vocab, c->n_embd, c->seq_len}, s, 1, 0, ""};
    for (int i = 0; i < c->n_layer; i++) {
        it = pt_layer_list_add(&l, "gpt2_block", "");
        *it = (pt_layer_item){it->entry, NULL, {c->n_embd, c->n_head, c->n_inner}, s, i + 2,
                              i + 1,     ""};
    }
    it = pt_layer_list_add(&l, "lm_head", "");
    *it = (pt_layer_item){it->entry, NULL,           {c->vocab, c->n_embd, c->tie_word_embeddings},
                          s,         c->n_layer + 2, c->n_layer + 1,
                          ""};
    rc = pt_layers_build(m, &l);
    pt_layer_list_free(&l);
    return rc;
}
