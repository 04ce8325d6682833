/* vocab_parallel.c: GPT-2's two ends as slice t of T, split over the
 * vocabulary (Megatron-LM's vocabulary-parallel embedding and
 * cross-entropy): the slice holds rows t V/T .. (t+1) V/T - 1 of
 * transformer.wte.weight (and of the tied lm_head.weight).
 *
 * Embedding: each slice looks up the tokens in its rows (zeros for the
 * others); the tensor group sums the partial embeddings, then every slice
 * adds the position embedding (whole on every slice). A token's row is
 * added to zeros only, so the sum is the T = 1 table's row bit for bit.
 *
 * Head: ln_f (whole), then the slice's V/T logits; no slice ever holds all
 * V. The cross-entropy needs three figures of each row from the group:
 *   piece 0  the logits; each slice's maximum in its own place of a row of
 *            T + 1 floats, and the target's logit in the last place from
 *            the slice that holds it (zeros elsewhere)           [sum]
 *   piece 1  the maximum of the T maxima; the slice's sum of exp(z - max) [sum]
 *   piece 2  its probabilities, and the loss -log p[target] of every row,
 *            the same on every slice.
 * Backward: the slice's logits' gradient, the partial input gradient of
 * its rows [sum], then ln_f. The sums are the program's TENSOR_SUM actions. */
#include <math.h>
#include <string.h>

#include "nn/block.h"
#include "tensor/kernels_math.h"

/* The first vocabulary row of the block's slice, and how many it holds. */
static int first_row(const pt_block *b)
{
    return b->shape.tensor_rank * (b->shape.V / b->shape.tensor);
}
static int own_rows(const pt_block *b) { return b->shape.V / b->shape.tensor; }

/* ---- the embedding ---- */

enum { WTE, WPE };

/* The partial embeddings the group sums, in floats: the output itself
 * under fp32, a buffer of the saved area under bf16. */
static size_t embedding_saved(const pt_block *b, int B)
{
    return b->k->act == PT_F32 ? 0 : (size_t)B * b->shape.T * b->shape.C * sizeof(float);
}

static float *embedding_sums_at(const pt_block *b, void *out, void *saved)
{
    return b->k->act == PT_F32 ? out : saved;
}

// tokens (B,T) -> out (B,T,C): piece 0 the slice's rows, piece 1 + wpe after the sum
static void embedding_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                            void *out, void *saved, double *loss_sum, int *loss_rows)
{
    (void)in, (void)loss_sum, (void)loss_rows;
    int T = b->shape.T, C = b->shape.C, lo = first_row(b), n = own_rows(b);
    float *sum = embedding_sums_at(b, out, saved);
    for (int i = 0; i < mb->batch; i++)
        for (int t = 0; t < T; t++) {
            size_t at = ((size_t)i * T + t) * C;
            float *row = sum + at;
            int tok = mb->tokens[i * T + t] - lo;
            if (piece == 0 && tok >= 0 && tok < n)
                memcpy(row, b->p[WTE] + (size_t)tok * C, sizeof(float) * (size_t)C);
            else if (piece == 0)
                memset(row, 0, sizeof(float) * (size_t)C);
            else /* stored as activations, rounded once */
                b->k->add_floats(pt_elems_at(out, at, b->k->act), row, b->p[WPE] + (size_t)t * C,
                                 C);
        }
}

static void embedding_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                              void *saved, double *loss_sum, int *loss_rows)
{
    for (int piece = 0; piece < 2; piece++)
        embedding_piece(b, piece, mb, in, out, saved, loss_sum, loss_rows);
}

// dout (B,T,C) -> the slice's rows of dwte, dwpe (T,C)
static void embedding_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                      const void *out, const void *saved, const void *dout)
{
    (void)in, (void)out, (void)saved;
    int T = b->shape.T, C = b->shape.C, lo = first_row(b), n = own_rows(b);
    for (int i = 0; i < mb->batch; i++)
        for (int t = 0; t < T; t++) {
            const void *d = pt_elems_at(dout, ((size_t)i * T + t) * C, b->k->act);
            int tok = mb->tokens[i * T + t] - lo;
            if (tok >= 0 && tok < n)
                b->k->accumulate(b->g[WTE] + (size_t)tok * C, d, C);
            b->k->accumulate(b->g[WPE] + (size_t)t * C, d, C);
        }
}

static int embedding_sums(const pt_block *b, int backward)
{
    (void)b;
    return backward ? 0 : 1;
}

static float *embedding_sum_buffer(const pt_block *b, int backward, int piece, int B, void *out,
                                   void *saved, size_t *count)
{
    (void)backward, (void)piece;
    *count = (size_t)B * b->shape.T * b->shape.C;
    return embedding_sums_at(b, out, saved);
}

/* the whole block's: every slice writes and scatters (T,C) */
static pt_block_cost embedding_cost(const pt_block *b)
{
    double n = (double)b->shape.T * b->shape.C;
    return (pt_block_cost){n, 0, 2 * n, 0, 0};
}

static const pt_block_ops embedding_ops = {
    .kind = "embedding",
    .reads_tokens = 1,
    .saved_bytes = embedding_saved,
    .forward = embedding_forward,
    .backward_input = pt_block_no_input_grad,
    .backward_weight = embedding_backward_weight,
    .tensor_sums = embedding_sums,
    .forward_piece = embedding_piece,
    .tensor_sum_buffer = embedding_sum_buffer,
    .cost = embedding_cost,
};

void pt_embedding_split(pt_block *b)
{
    b->ops = &embedding_ops;
    pt_block_split_param(b, WTE, 0, 1, b->shape.tensor, b->shape.tensor_rank);
}

/* ---- the head ---- */

enum { LNF_W, LNF_B, HEAD };

typedef struct {
    size_t ln, mean, rstd, dln, stats, sumexp;
    size_t dln_act; /* dln stored as activations after the sum (dln itself under fp32) */
    size_t total;
} head_layout;

static head_layout head_layout_of(const pt_block *b, int B)
{
    size_t n = (size_t)B * b->shape.T, C = b->shape.C, at = 0;
    head_layout l;
    pt_elem_type t = b->k->act;
    l.ln = pt_saved_take(&at, n * C, t);
    l.mean = pt_saved_take(&at, n, PT_F32);
    l.rstd = pt_saved_take(&at, n, PT_F32);
    l.dln = pt_saved_take(&at, n * C, PT_F32);
    l.stats = pt_saved_take(&at, n * (size_t)(b->shape.tensor + 1), PT_F32);
    l.sumexp = pt_saved_take(&at, n, PT_F32);
    l.dln_act = t == PT_F32 ? l.dln : pt_saved_take(&at, n * C, t);
    l.total = at;
    return l;
}

static size_t head_saved(const pt_block *b, int B) { return head_layout_of(b, B).total; }

#define F(name) pt_saved_floats(s, l.name)
#define S(name) pt_saved_at(s, l.name)

/* the row's largest logit over the whole vocabulary, from the group's maxima */
static float row_max(const float *stats, int T)
{
    float mx = -INFINITY;
    for (int t = 0; t < T; t++)
        mx = stats[t] > mx ? stats[t] : mx;
    return mx;
}

// in (B,T,C) -> out (B,T,V/T) the slice's probabilities; the loss over targets (B,T)
static void head_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in, void *out,
                       void *s, double *loss_sum, int *loss_rows)
{
    const pt_kernels *k = b->k;
    int N = mb->batch * b->shape.T, C = b->shape.C, n = own_rows(b), lo = first_row(b);
    int T = b->shape.tensor, me = b->shape.tensor_rank;
    head_layout l = head_layout_of(b, mb->batch);
    float *z = out, *stats = F(stats), *sumexp = F(sumexp);
    const int *targets = mb->targets;
    if (piece == 0) {
        k->layernorm_forward(S(ln), F(mean), F(rstd), in, b->p[LNF_W], b->p[LNF_B], N, C,
                             b->shape.ln_eps);
        k->matmul(0, 1, N, n, C, 1.0f, pt_block_act(b, S(ln), C), pt_block_weight(b, HEAD, C), 0.0f,
                  pt_mat_of(z, n, PT_F32), NULL);
        memset(stats, 0, sizeof(float) * (size_t)N * (T + 1));
        for (int i = 0; i < N; i++) {
            const float *row = z + (size_t)i * n;
            float mx = -INFINITY;
            for (int v = 0; v < n; v++)
                mx = row[v] > mx ? row[v] : mx;
            stats[i * (T + 1) + me] = mx;
            int tv = targets ? targets[i] - lo : -1;
            if (tv >= 0 && tv < n)
                stats[i * (T + 1) + T] = row[tv];
        }
    } else if (piece == 1) {
        for (int i = 0; i < N; i++) {
            float *row = z + (size_t)i * n, mx = row_max(stats + i * (T + 1), T), sum = 0.0f;
            for (int v = 0; v < n; v++) {
                row[v] = fast_expf(row[v] - mx);
                sum += row[v];
            }
            sumexp[i] = sum;
        }
    } else {
        double loss = 0.0;
        int rows = 0;
        for (int i = 0; i < N; i++) {
            float *row = z + (size_t)i * n, inv = 1.0f / sumexp[i];
            for (int v = 0; v < n; v++)
                row[v] *= inv;
            if (targets && targets[i] >= 0) {
                const float *st = stats + i * (T + 1);
                float p = fast_expf(st[T] - row_max(st, T)) * inv;
                loss -= log((double)p + 1e-30);
                rows++;
            }
        }
        if (loss_sum)
            *loss_sum = loss;
        if (loss_rows)
            *loss_rows = rows;
    }
}

// loss -> din (B,T,C): piece 0 the partial gradient of ln_f's output, piece 1 ln_f
static void head_backward_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                                void *out, void *s, const void *dout, void *din, float loss_scale)
{
    (void)dout;
    const pt_kernels *k = b->k;
    int N = mb->batch * b->shape.T, C = b->shape.C, n = own_rows(b), lo = first_row(b);
    head_layout l = head_layout_of(b, mb->batch);
    float *z = out;
    if (piece == 0) {
        int rows = 0;
        for (int i = 0; i < N; i++)
            rows += mb->targets[i] >= 0;
        float scale = rows ? loss_scale / rows : 0.0f;
        for (int i = 0; i < N; i++) {
            float *row = z + (size_t)i * n;
            int tv = mb->targets[i] - lo;
            if (mb->targets[i] < 0) {
                memset(row, 0, sizeof(float) * (size_t)n);
                continue;
            }
            for (int v = 0; v < n; v++)
                row[v] *= scale;
            if (tv >= 0 && tv < n)
                row[tv] -= scale;
        }
        k->matmul(0, 0, N, C, n, 1.0f, pt_mat_of(z, n, PT_F32), pt_block_weight(b, HEAD, C), 0.0f,
                  pt_mat_of(F(dln), C, PT_F32), NULL);
    } else {
        if (l.dln_act != l.dln)
            k->store_floats(S(dln_act), F(dln), (size_t)N * C);
        if (din)
            k->layernorm_backward_input(din, NULL, S(dln_act), in, b->p[LNF_W], F(mean), F(rstd), N,
                                        C);
    }
}

static void head_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                 const void *out, const void *s, const void *dout)
{
    (void)dout;
    const pt_kernels *k = b->k;
    int N = mb->batch * b->shape.T, C = b->shape.C, n = own_rows(b);
    head_layout l = head_layout_of(b, mb->batch);
    k->matmul(1, 0, n, C, N, 1.0f, pt_mat_of(out, n, PT_F32), pt_block_act(b, S(ln), C), 1.0f,
              pt_mat_of(b->g[HEAD], C, PT_F32), NULL);
    k->layernorm_backward_weight(b->g[LNF_W], b->g[LNF_B], S(dln_act), in, F(mean), F(rstd), N, C);
}

static float *head_sum_buffer(const pt_block *b, int backward, int piece, int B, void *out, void *s,
                              size_t *count)
{
    (void)out;
    head_layout l = head_layout_of(b, B);
    size_t N = (size_t)B * b->shape.T;
    if (backward) {
        *count = N * b->shape.C;
        return F(dln);
    }
    *count = piece == 0 ? N * (size_t)(b->shape.tensor + 1) : N;
    return piece == 0 ? F(stats) : F(sumexp);
}

#undef F
#undef S

static int head_sums(const pt_block *b, int backward)
{
    (void)b;
    return backward ? 1 : 2;
}

static void head_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out, void *s,
                         double *loss_sum, int *loss_rows)
{
    for (int piece = 0; piece < 3; piece++)
        head_piece(b, piece, mb, in, out, s, loss_sum, loss_rows);
}

static void head_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                void *s, const void *dout, void *din, float loss_scale)
{
    for (int piece = 0; piece < 2; piece++)
        head_backward_piece(b, piece, mb, in, out, s, dout, din, loss_scale);
}

/* the whole head's over V/T rows */
static pt_block_cost head_cost(const pt_block *b)
{
    double TV = (double)b->shape.T * own_rows(b), C = b->shape.C;
    return (pt_block_cost){2 * TV * C + 5 * TV, 2 * TV * C + 2 * TV, 2 * TV * C, 0, 0};
}

static const pt_block_ops head_ops = {
    .kind = "lm_head",
    .out_is_float = 1,
    .saved_bytes = head_saved,
    .forward = head_forward,
    .backward_input = head_backward_input,
    .backward_weight = head_backward_weight,
    .tensor_sums = head_sums,
    .forward_piece = head_piece,
    .backward_input_piece = head_backward_piece,
    .tensor_sum_buffer = head_sum_buffer,
    .cost = head_cost,
};

void pt_lm_head_split(pt_block *b)
{
    b->ops = &head_ops;
    b->out_floats = b->shape.T * own_rows(b);
    pt_block_split_param(b, HEAD, 0, 1, b->shape.tensor, b->shape.tensor_rank);
}
