/* lm_head.c: GPT-2's output block: final LayerNorm, the LM head, and
 * softmax cross-entropy.
 *   in (B,T,C) -ln_f-> (B,T,C) -x lm_head^T-> logits (B,T,V) -> out = probabilities
 * and the mean of -log p[target] over the micro-batch's tokens.
 * Parameters transformer.ln_f.{weight,bias} and lm_head.weight (V,C). With
 * tied embeddings (GPT-2's) lm_head.weight is a copy of
 * transformer.wte.weight (tied_to says so): the two ends of the model may
 * sit on different workers, and the model sums the two gradients before the
 * optimizer step so the copies stay equal. Untied (head_untied), it is a
 * parameter of its own, initialised from its own stream.
 * backward_input turns `out` into the logits' gradient in place and
 * multiplies it for both gradients, the head's weight's too, so that `out`
 * (tokens x vocabulary floats) is kept only until then (out_to_backward):
 * under zero-bubble schedules a micro-batch waits for its W on the last
 * worker with the head's input gradient alone. */
#include <string.h>

#include "nn/block.h"

enum { LNF_W, LNF_B, HEAD };

/* byte offsets into the saved area (the normalised input and its
 * statistics) and the grads area (its gradient, from B to W); the two
 * tensors are activations */
typedef struct {
    size_t ln, mean, rstd, saved, dln, grads;
} head_layout;

static head_layout layout(const pt_block *b, int B)
{
    size_t n = (size_t)B * b->shape.T, C = b->shape.C, at = 0;
    head_layout l;
    l.ln = pt_saved_take(&at, n * C, b->k->act);
    l.mean = pt_saved_take(&at, n, PT_F32);
    l.rstd = pt_saved_take(&at, n, PT_F32);
    l.saved = at, at = 0;
    l.dln = pt_saved_take(&at, n * C, b->k->act);
    l.grads = at;
    return l;
}

static size_t head_saved(const pt_block *b, int B) { return layout(b, B).saved; }
static size_t head_grads(const pt_block *b, int B) { return layout(b, B).grads; }

static int counted_rows(const int *targets, int N)
{
    int rows = 0;
    for (int i = 0; i < N; i++)
        rows += targets[i] >= 0;
    return rows;
}

#define S(name) pt_saved_at(s, l.name)
#define F(name) pt_saved_floats(s, l.name)
#define G(name) pt_saved_at(b->grads, l.name)

// in (B,T,C) -> out (B,T,V) probabilities (float); loss over targets (B,T)
static void head_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out, void *s,
                         double *loss_sum, int *loss_rows)
{
    const pt_kernels *k = b->k;
    int N = mb->batch * b->shape.T, C = b->shape.C, V = b->shape.V;
    head_layout l = layout(b, mb->batch);
    k->layernorm_forward(S(ln), F(mean), F(rstd), in, b->p[LNF_W], b->p[LNF_B], N, C,
                         b->shape.ln_eps);
    k->matmul(0, 1, N, V, C, 1.0f, pt_block_act(b, S(ln), C), pt_block_weight(b, HEAD, C), 0.0f,
              pt_mat_of(out, V, PT_F32), NULL);
    double sum = k->crossentropy_forward(out, mb->targets, N, V);
    if (loss_sum)
        *loss_sum = sum;
    if (loss_rows)
        *loss_rows = mb->targets ? counted_rows(mb->targets, N) : 0;
}

// loss -> din (B,T,C) and the head's weight gradient; out becomes dlogits (B,T,V)
static void head_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                void *s, const void *dout, void *din, float loss_scale)
{
    (void)dout;
    const pt_kernels *k = b->k;
    int N = mb->batch * b->shape.T, C = b->shape.C, V = b->shape.V;
    head_layout l = layout(b, mb->batch);
    int rows = counted_rows(mb->targets, N);
    k->crossentropy_backward(out, mb->targets, N, V, rows ? loss_scale / rows : 0.0f);
    k->matmul(0, 0, N, C, V, 1.0f, pt_mat_of(out, V, PT_F32), pt_block_weight(b, HEAD, C), 0.0f,
              pt_block_act(b, G(dln), C), NULL);
    k->matmul(1, 0, V, C, N, 1.0f, pt_mat_of(out, V, PT_F32), pt_block_act(b, S(ln), C), 1.0f,
              pt_mat_of(b->g[HEAD], C, PT_F32), NULL);
    if (din)
        k->layernorm_backward_input(din, NULL, G(dln), in, b->p[LNF_W], F(mean), F(rstd), N, C);
}

static void head_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                 const void *out, const void *s, const void *dout)
{
    (void)out, (void)dout; /* out: not kept this long (out_to_backward) */
    int N = mb->batch * b->shape.T, C = b->shape.C;
    head_layout l = layout(b, mb->batch);
    b->k->layernorm_backward_weight(b->g[LNF_W], b->g[LNF_B], G(dln), in, F(mean), F(rstd), N, C);
}

#undef S
#undef F
#undef G

static pt_block_cost head_cost(const pt_block *b)
{
    double T = b->shape.T, C = b->shape.C, V = b->shape.V;
    return (pt_block_cost){.forward_flops = 2 * T * C * V + 5 * T * V,
                           .backward_input_flops = 4 * T * C * V + 2 * T * V,
                           .backward_weight_flops = 0};
}

static const pt_block_ops head_ops = {
    .kind = "lm_head",
    .out_is_float = 1,
    .out_to_backward = 1,
    .saved_bytes = head_saved,
    .grads_bytes = head_grads,
    .forward = head_forward,
    .backward_input = head_backward_input,
    .backward_weight = head_backward_weight,
    .cost = head_cost,
};

void pt_lm_head_init(pt_block *b, const pt_block_shape *s)
{
    b->labels = s->T;
    b->classes = s->V;
    b->ops = &head_ops;
    b->shape = pt_block_shape_gpt(s);
    b->in_floats = s->T * s->C;
    b->out_floats = s->T * s->V;
    pt_block_declare_layernorm(b, "transformer.ln_f", s->C);
    int hs[2] = {s->V, s->C};
    int i = pt_block_declare(b, "lm_head.weight", 2, hs, PT_INIT_NORMAL, 0.02f);
    if (!s->head_untied)
        strcpy(b->decl[i].tied_to, "transformer.wte.weight");
    if (s->tensor > 1)
        pt_lm_head_split(b);
}
