/* transformer_cost.c: what one micro-batch costs a GPT's blocks on one
 * device of a tensor group, pass by pass (cost.h), from the model's
 * description alone. predict.c sums blocks into a pipeline's chunks.
 *
 * Names: b samples of s tokens (N = b s), hidden h, a heads of h/a, MLP
 * width f (n_inner, 4h by default), vocabulary V, tensor group T (Megatron-
 * LM's split: QKV and fc1 by columns, proj and fc2 by rows, heads and the
 * vocabulary divided by T), E bytes per activation element.
 *
 * A layer's products per device (m x k)(k x n), batch count last:
 *   F   QKV (N, 3h/T, h); scores (s, s, h/a) x b a/T; context (s, h/a, s)
 *       x b a/T; proj (N, h, h/T); fc1 (N, f/T, h); fc2 (N, h, f/T)
 *   B   the input gradient of each: the same four linear shapes with n and
 *       k swapped, and four attention products (dP, dV, dQ, dK)
 *   W   the weight gradient of each linear layer: (h, 3h/T, N),
 *       (h/T, h, N), (h, f/T, N), (f/T, h, N)
 * so F = (24 N h^2 + 4 N s h) / T FLOPs at f = 4h, B = (24 N h^2 + 8 N s h)
 * / T, W = 24 N h^2 / T (Qi et al. Table 1; with recomputation B repeats F,
 * and F + B + W + F = Narayanan et al.'s 96 N h^2 (1 + s / 6h) per layer).
 * Elementwise work per layer in F moves E (11 N h + 2 N f/T + 4.5 b (a/T)
 * s^2) bytes: two layer norms (read, write), two bias-dropout-residual adds
 * (three tensors and a one-byte mask), the bias-GeLU, the scaled masked
 * softmax and the attention dropout over the scores; B moves twice that.
 * Each of F and B all-reduces two (N, h) tensors across the tensor group.
 *
 * Activations kept from F to B (Korthikanti et al. 2022, "Reducing
 * Activation Recomputation in Large Transformer Models", without sequence
 * parallelism; 16-bit): s b (h (10 + 8/T) + 4 f/T + 5 a s/T) bytes, at
 * f = 4h their s b h (10 + 24/T + 5 a s/(h T)). Recomputing, a layer keeps
 * its input, 2 s b h, and rebuilds the rest for its backward. From B to W a
 * layer keeps the inputs and output gradients of its four linear layers,
 * s b (4h + 4h/T + 2f/T) elements (Qi et al.'s 32 s b h at T = 1). */
#include <math.h>

#include "plan/cost.h"

double pt_cost_element_bytes(pt_plan_precision p)
{
    return p == PT_PLAN_FP32 || p == PT_PLAN_TF32 ? 4 : 2;
}

static void gemm(const pt_cost_shape *s, pt_pass_cost *p, double m, double n, double k,
                 double batch)
{
    p->flops += 2 * m * n * k * batch;
    p->seconds += pt_device_gemm_seconds(&s->cluster->device, s->precision, m, n, k, batch);
}

static void elementwise(const pt_cost_shape *s, pt_pass_cost *p, double bytes)
{
    p->bytes += bytes;
    p->seconds += pt_device_memory_seconds(&s->cluster->device, bytes);
}

/* `count` all-reduces of `bytes` across the tensor group. */
static void tensor_allreduce(const pt_cost_shape *s, pt_pass_cost *p, int count, double bytes)
{
    double t = count * pt_cluster_allreduce_seconds(s->cluster, bytes, s->tensor, 1);
    p->seconds += t;
    p->tp_seconds += t;
}

static void add_pass(pt_pass_cost *to, const pt_pass_cost *from)
{
    to->flops += from->flops;
    to->bytes += from->bytes;
    to->seconds += from->seconds;
    to->tp_seconds += from->tp_seconds;
}

void pt_cost_layer(const pt_cost_shape *s, pt_block_plan *out)
{
    const pt_model_config *m = s->model;
    double T = s->tensor, b = s->micro_batch_size, seq = m->seq_len, h = m->n_embd;
    double heads = m->n_head / T, dh = h / m->n_head, f = pt_gpt_inner(m), N = b * seq;
    double E = pt_cost_element_bytes(s->precision);
    *out = (pt_block_plan){0};

    pt_pass_cost *F = &out->f, *B = &out->b, *W = &out->w;
    gemm(s, F, N, 3 * h / T, h, 1);
    gemm(s, F, seq, seq, dh, b * heads);
    gemm(s, F, seq, dh, seq, b * heads);
    gemm(s, F, N, h, h / T, 1);
    gemm(s, F, N, f / T, h, 1);
    gemm(s, F, N, h, f / T, 1);
    double f_elements = 11 * N * h + 2 * N * f / T + 4.5 * b * heads * seq * seq;
    elementwise(s, F, E * f_elements);
    tensor_allreduce(s, F, 2, E * N * h);

    gemm(s, B, N, h, 3 * h / T, 1);
    gemm(s, B, seq, seq, dh, b * heads); /* dP = dC V^T */
    gemm(s, B, seq, dh, seq, b * heads); /* dV = P^T dC */
    gemm(s, B, seq, dh, seq, b * heads); /* dQ = dS K */
    gemm(s, B, seq, dh, seq, b * heads); /* dK = dS^T Q */
    gemm(s, B, N, h / T, h, 1);
    gemm(s, B, N, h, f / T, 1);
    gemm(s, B, N, f / T, h, 1);
    elementwise(s, B, 2 * E * f_elements);
    tensor_allreduce(s, B, 2, E * N * h);

    gemm(s, W, h, 3 * h / T, N, 1);
    gemm(s, W, h / T, h, N, 1);
    gemm(s, W, h, f / T, N, 1);
    gemm(s, W, f / T, h, N, 1);
    elementwise(s, W, E * N * (2 * h + (3 * h + f) / T)); /* bias and norm gradients */

    double full = E / 2 * seq * b * (h * (10 + 8 / T) + 4 * f / T + 5 * heads * seq);
    out->w_bytes = E * N * (4 * h + (4 * h + 2 * f) / T);
    if (s->recompute) {
        pt_pass_cost again = *F;
        add_pass(B, &again);
        out->act_bytes = E * N * h;
        out->peak_bytes = full;
    } else {
        out->act_bytes = full;
    }
    out->params = (4 * h * h + 2 * h * f + 3 * h + f) / T + 6 * h;
}

void pt_cost_embedding(const pt_cost_shape *s, pt_block_plan *out)
{
    const pt_model_config *m = s->model;
    double T = s->tensor, h = m->n_embd, N = (double)s->micro_batch_size * m->seq_len;
    double E = pt_cost_element_bytes(s->precision);
    *out = (pt_block_plan){0};
    /* token rows of this device's slice of the vocabulary, position rows, the sum */
    elementwise(s, &out->f, 3 * E * N * h);
    tensor_allreduce(s, &out->f, 1, E * N * h);
    /* the weight gradient: scatter-add of the output gradient into both tables */
    elementwise(s, &out->w, 3 * E * N * h);
    out->params = (double)m->vocab * h / T + (double)m->seq_len * h;
}

void pt_cost_head(const pt_cost_shape *s, pt_block_plan *out)
{
    const pt_model_config *m = s->model;
    double T = s->tensor, h = m->n_embd, V = m->vocab, N = (double)s->micro_batch_size * m->seq_len;
    double E = pt_cost_element_bytes(s->precision);
    *out = (pt_block_plan){0};
    pt_pass_cost *F = &out->f, *B = &out->b, *W = &out->w;
    elementwise(s, F, 2 * E * N * h); /* final layer norm */
    gemm(s, F, N, V / T, h, 1);
    /* cross-entropy over this device's logits in fp32: read, exponentiate, sum */
    elementwise(s, F, N * V / T * (E + 8));
    elementwise(s, B, N * V / T * (4 + E) + 4 * E * N * h);
    gemm(s, B, N, h, V / T, 1);
    tensor_allreduce(s, B, 1, E * N * h);
    gemm(s, W, h, V / T, N, 1);
    out->act_bytes = 4 * N * V / T + E * N * h;
    out->w_bytes = E * N * (h + V / T);
    out->params = V * h / T + 2 * h; /* the tied copy of the token embedding, the norm */
}
