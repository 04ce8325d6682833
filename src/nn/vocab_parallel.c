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
#include "nn/sequence_split.h"
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
    return (pt_block_cost){.forward_flops = n, .backward_weight_flops = 2 * n};
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
    if (b->shape.sequence_parallel)
        pt_embedding_sequence(b);
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

/* The slice's logits z (N, V/T) of ln_f's output ln (N, C), and each
 * row's figures for the group: the slice's maximum in its own place of a
 * row of T + 1 floats, the target's logit in the last place from the slice
 * that holds it (zeros elsewhere). */
static void logits_and_maxima(const pt_block *b, const pt_microbatch *mb, const void *ln, float *z,
                              float *stats)
{
    int N = mb->batch * b->shape.T, C = b->shape.C, n = own_rows(b), lo = first_row(b);
    int T = b->shape.tensor, me = b->shape.tensor_rank;
    const int *targets = mb->targets;
    b->k->matmul(0, 1, N, n, C, 1.0f, pt_block_act(b, ln, C), pt_block_weight(b, HEAD, C), 0.0f,
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
}

/* z's rows as exp(z - the row's maximum over the group), and their sums */
static void exp_sums(const pt_block *b, int N, float *z, const float *stats, float *sumexp)
{
    int n = own_rows(b), T = b->shape.tensor;
    for (int i = 0; i < N; i++) {
        float *row = z + (size_t)i * n, mx = row_max(stats + i * (T + 1), T), sum = 0.0f;
        for (int v = 0; v < n; v++) {
            row[v] = fast_expf(row[v] - mx);
            sum += row[v];
        }
        sumexp[i] = sum;
    }
}

/* z's rows as probabilities (sumexp the group's sums), and the loss
 * -log p[target] of every row with a target, the same on every slice */
static void probs_and_loss(const pt_block *b, const pt_microbatch *mb, float *z, const float *stats,
                           const float *sumexp, double *loss_sum, int *loss_rows)
{
    int N = mb->batch * b->shape.T, n = own_rows(b), T = b->shape.tensor;
    double loss = 0.0;
    int rows = 0;
    for (int i = 0; i < N; i++) {
        float *row = z + (size_t)i * n, inv = 1.0f / sumexp[i];
        for (int v = 0; v < n; v++)
            row[v] *= inv;
        if (mb->targets && mb->targets[i] >= 0) {
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

// in (B,T,C) -> out (B,T,V/T) the slice's probabilities; the loss over targets (B,T)
static void head_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in, void *out,
                       void *s, double *loss_sum, int *loss_rows)
{
    int N = mb->batch * b->shape.T, C = b->shape.C;
    head_layout l = head_layout_of(b, mb->batch);
    if (piece == 0) {
        b->k->layernorm_forward(S(ln), F(mean), F(rstd), in, b->p[LNF_W], b->p[LNF_B], N, C,
                                b->shape.ln_eps);
        logits_and_maxima(b, mb, S(ln), out, F(stats));
    } else if (piece == 1) {
        exp_sums(b, N, out, F(stats), F(sumexp));
    } else {
        probs_and_loss(b, mb, out, F(stats), F(sumexp), loss_sum, loss_rows);
    }
}

/* z's probabilities become the logits' gradient (loss_scale over the rows
 * with a target), and dln (N, C) the partial gradient of ln_f's output */
static void logits_grad(const pt_block *b, const pt_microbatch *mb, float *z, float loss_scale,
                        float *dln)
{
    int N = mb->batch * b->shape.T, C = b->shape.C, n = own_rows(b), lo = first_row(b);
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
    b->k->matmul(0, 0, N, C, n, 1.0f, pt_mat_of(z, n, PT_F32), pt_block_weight(b, HEAD, C), 0.0f,
                 pt_mat_of(dln, C, PT_F32), NULL);
}

// loss -> din (B,T,C): piece 0 the partial gradient of ln_f's output, piece 1 ln_f
static void head_backward_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                                void *out, void *s, const void *dout, void *din, float loss_scale)
{
    (void)dout;
    const pt_kernels *k = b->k;
    int N = mb->batch * b->shape.T, C = b->shape.C;
    head_layout l = head_layout_of(b, mb->batch);
    if (piece == 0) {
        logits_grad(b, mb, out, loss_scale, F(dln));
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
    return (pt_block_cost){.forward_flops = 2 * TV * C + 5 * TV,
                           .backward_input_flops = 2 * TV * C + 2 * TV,
                           .backward_weight_flops = 2 * TV * C};
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
    if (b->shape.sequence_parallel)
        pt_lm_head_sequence(b);
}

/* ---- under sequence parallelism (sequence_split.h) ----
 * The embedding's input is every token, its output the slice's rows: the
 * partial embeddings of every position are reduce-scattered, then each
 * slice adds the position embedding to its rows. Its backward gathers the
 * gradient of every position, from which the slice's rows of wte and the
 * whole of wpe take theirs (the same on every slice), in the B.
 * The head's input is the slice's rows: ln_f runs on them and its output
 * is all-gathered (kept per micro-batch: the head's weight gradient reads it),
 * then as above; its backward reduce-scatters the partial gradient of
 * ln_f's output and runs ln_f on the slice's rows (ln_f's gradients are
 * their part, summed over the group before the norm). Under bf16 the
 * gathers and sums are floats, rounded once into activations. */

static size_t whole_bytes(const pt_block *b, int B)
{
    return (size_t)B * b->shape.T * b->shape.C * sizeof(float);
}

// tokens (B,L) -> out (B,L/T,C): piece 0 every position's partial rows, piece 1 + wpe
static void seq_embedding_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                                void *out, void *saved, double *loss_sum, int *loss_rows)
{
    (void)in, (void)saved, (void)loss_sum, (void)loss_rows;
    int L = b->shape.T, C = b->shape.C, lo = first_row(b), n = own_rows(b);
    float *whole = b->work;
    pt_seq_rows r = pt_seq_rows_of(b, mb->batch, C);
    for (int i = 0; i < mb->batch; i++)
        for (int t = 0; t < L; t++) {
            float *row = whole + ((size_t)i * L + t) * C;
            int tok = mb->tokens[i * L + t] - lo, j = t - r.t * r.R;
            if (piece == 0 && tok >= 0 && tok < n)
                memcpy(row, b->p[WTE] + (size_t)tok * C, sizeof(float) * (size_t)C);
            else if (piece == 0)
                memset(row, 0, sizeof(float) * (size_t)C);
            else if (j >= 0 && j < r.R)
                b->k->add_floats(pt_elems_at(out, pt_seq_own_at(r, i) + (size_t)j * C, b->k->act),
                                 row, b->p[WPE] + (size_t)t * C, C);
        }
}

static void seq_embedding_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                  void *saved, double *loss_sum, int *loss_rows)
{
    for (int piece = 0; piece < 2; piece++)
        seq_embedding_piece(b, piece, mb, in, out, saved, loss_sum, loss_rows);
}

// dout (B,L/T,C): piece 0 the slice's rows [gather], piece 1 dwte's rows and dwpe
static void seq_embedding_backward_piece(pt_block *b, int piece, const pt_microbatch *mb,
                                         const void *in, void *out, void *saved, const void *dout,
                                         void *din, float loss_scale)
{
    (void)in, (void)out, (void)saved, (void)din, (void)loss_scale;
    int L = b->shape.T, C = b->shape.C, lo = first_row(b), n = own_rows(b);
    const float *whole = b->work;
    if (piece == 0) {
        pt_seq_put(b->work, dout, b->k->act, pt_seq_rows_of(b, mb->batch, C));
        return;
    }
    for (int i = 0; i < mb->batch; i++) /* every position's gradient, in floats */
        for (int t = 0; t < L; t++) {
            const float *d = whole + ((size_t)i * L + t) * C;
            float *pe = b->g[WPE] + (size_t)t * C;
            int tok = mb->tokens[i * L + t] - lo;
            if (tok >= 0 && tok < n)
                for (int c = 0; c < C; c++)
                    b->g[WTE][(size_t)tok * C + c] += d[c];
            for (int c = 0; c < C; c++)
                pe[c] += d[c];
        }
}

static void seq_embedding_backward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                   void *saved, const void *dout, void *din, float loss_scale)
{
    for (int piece = 0; piece < 2; piece++)
        seq_embedding_backward_piece(b, piece, mb, in, out, saved, dout, din, loss_scale);
}

static pt_group_how seq_embedding_how(const pt_block *b, int backward, int piece, int B)
{
    (void)piece;
    pt_seq_rows r = pt_seq_rows_of(b, B, b->shape.C);
    return pt_seq_how(backward ? PT_GROUP_GATHER : PT_GROUP_SCATTER, r, 1);
}

static int seq_embedding_sums(const pt_block *b, int backward)
{
    (void)b, (void)backward;
    return 1;
}

static float *seq_embedding_sum_buffer(const pt_block *b, int backward, int piece, int B, void *out,
                                       void *saved, size_t *count)
{
    (void)backward, (void)piece, (void)out, (void)saved;
    *count = whole_bytes(b, B) / sizeof(float);
    return b->work;
}

/* the embedding's cost, its weight gradient's moved into the B */
static pt_block_cost seq_embedding_cost(const pt_block *b)
{
    pt_block_cost c = embedding_cost(b);
    c.backward_input_flops += c.backward_weight_flops;
    c.backward_weight_flops = 0;
    return c;
}

static const pt_block_ops seq_embedding_ops = {
    .kind = "embedding",
    .reads_tokens = 1,
    .saved_bytes = pt_block_saves_nothing,
    .forward = seq_embedding_forward,
    .backward_input = seq_embedding_backward,
    .backward_weight = pt_block_no_weights,
    .tensor_sums = seq_embedding_sums,
    .forward_piece = seq_embedding_piece,
    .backward_input_piece = seq_embedding_backward_piece,
    .tensor_sum_buffer = seq_embedding_sum_buffer,
    .tensor_sum_how = seq_embedding_how,
    .cost = seq_embedding_cost,
    .work_bytes = whole_bytes,
};

void pt_embedding_sequence(pt_block *b)
{
    b->ops = &seq_embedding_ops;
    b->out_floats = b->shape.T / b->shape.tensor * b->shape.C;
}

/* the head's: lnw, ln_f's output gathered (lna: as activations, rounded
 * once under bf16); dln the partial gradient of it */
typedef struct {
    size_t lnw, lna, mean, rstd, dln, stats, sumexp, total;
} seq_head_layout;

static seq_head_layout seq_head_layout_of(const pt_block *b, int B)
{
    size_t n = (size_t)B * b->shape.T, own = n / b->shape.tensor, C = b->shape.C, at = 0;
    seq_head_layout l;
    l.lnw = pt_saved_take(&at, n * C, PT_F32);
    l.lna = b->k->act == PT_F32 ? l.lnw : pt_saved_take(&at, n * C, b->k->act);
    l.mean = pt_saved_take(&at, own, PT_F32);
    l.rstd = pt_saved_take(&at, own, PT_F32);
    l.dln = pt_saved_take(&at, n * C, PT_F32);
    l.stats = pt_saved_take(&at, n * (size_t)(b->shape.tensor + 1), PT_F32);
    l.sumexp = pt_saved_take(&at, n, PT_F32);
    l.total = at;
    return l;
}

static size_t seq_head_saved(const pt_block *b, int B) { return seq_head_layout_of(b, B).total; }

/* ln_f's output, then its gradient, on the slice's rows */
static size_t seq_head_work(const pt_block *b, int B)
{
    return whole_bytes(b, B) / (size_t)b->shape.tensor;
}

#define F(name) pt_saved_floats(s, l.name)
#define S(name) pt_saved_at(s, l.name)

// in (B,L/T,C) -> out (B,L,V/T): piece 0 ln_f [gather], then as head_piece
static void seq_head_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                           void *out, void *s, double *loss_sum, int *loss_rows)
{
    int N = mb->batch * b->shape.T, C = b->shape.C;
    pt_seq_rows r = pt_seq_rows_of(b, mb->batch, C);
    seq_head_layout l = seq_head_layout_of(b, mb->batch);
    if (piece == 0) {
        b->k->layernorm_forward(b->work, F(mean), F(rstd), in, b->p[LNF_W], b->p[LNF_B],
                                mb->batch * r.R, C, b->shape.ln_eps);
        pt_seq_put(F(lnw), b->work, b->k->act, r);
    } else if (piece == 1) {
        if (l.lna != l.lnw)
            b->k->store_floats(S(lna), F(lnw), (size_t)N * C);
        logits_and_maxima(b, mb, S(lna), out, F(stats));
    } else if (piece == 2) {
        exp_sums(b, N, out, F(stats), F(sumexp));
    } else {
        probs_and_loss(b, mb, out, F(stats), F(sumexp), loss_sum, loss_rows);
    }
}

// loss -> din (B,L/T,C): piece 0 the partial dln [reduce-scatter], piece 1 ln_f's rows
static void seq_head_backward_piece(pt_block *b, int piece, const pt_microbatch *mb, const void *in,
                                    void *out, void *s, const void *dout, void *din,
                                    float loss_scale)
{
    (void)dout;
    const pt_kernels *k = b->k;
    int C = b->shape.C;
    pt_seq_rows r = pt_seq_rows_of(b, mb->batch, C);
    int own = mb->batch * r.R;
    seq_head_layout l = seq_head_layout_of(b, mb->batch);
    if (piece == 0) {
        logits_grad(b, mb, out, loss_scale, F(dln));
        return;
    }
    void *dln = b->work;
    pt_seq_take(k, dln, F(dln), r);
    k->layernorm_backward_weight(b->g[LNF_W], b->g[LNF_B], dln, in, F(mean), F(rstd), own, C);
    if (din)
        k->layernorm_backward_input(din, NULL, dln, in, b->p[LNF_W], F(mean), F(rstd), own, C);
}

static void seq_head_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                     const void *out, const void *s, const void *dout)
{
    (void)in, (void)dout;
    int N = mb->batch * b->shape.T, C = b->shape.C, n = own_rows(b);
    seq_head_layout l = seq_head_layout_of(b, mb->batch);
    b->k->matmul(1, 0, n, C, N, 1.0f, pt_mat_of(out, n, PT_F32), pt_mat_of(F(lnw), C, PT_F32), 1.0f,
                 pt_mat_of(b->g[HEAD], C, PT_F32), NULL);
}

static float *seq_head_sum_buffer(const pt_block *b, int backward, int piece, int B, void *out,
                                  void *s, size_t *count)
{
    (void)out;
    seq_head_layout l = seq_head_layout_of(b, B);
    size_t N = (size_t)B * b->shape.T, whole = N * b->shape.C;
    if (backward) {
        *count = whole;
        return F(dln);
    }
    *count = piece == 0 ? whole : piece == 1 ? N * (size_t)(b->shape.tensor + 1) : N;
    return piece == 0 ? F(lnw) : piece == 1 ? F(stats) : F(sumexp);
}

#undef F
#undef S

/* forward: ln_f's output gathered, then the cross-entropy's two sums;
 * backward: dln reduce-scattered */
static pt_group_how seq_head_how(const pt_block *b, int backward, int piece, int B)
{
    pt_seq_rows r = pt_seq_rows_of(b, B, b->shape.C);
    if (backward)
        return pt_seq_how(PT_GROUP_SCATTER, r, 1);
    return piece == 0 ? pt_seq_how(PT_GROUP_GATHER, r, 1) : (pt_group_how){PT_GROUP_SUM, 0, 0};
}

static int seq_head_sums(const pt_block *b, int backward)
{
    (void)b;
    return backward ? 1 : 3;
}

static void seq_head_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                             void *s, double *loss_sum, int *loss_rows)
{
    for (int piece = 0; piece < 4; piece++)
        seq_head_piece(b, piece, mb, in, out, s, loss_sum, loss_rows);
}

static void seq_head_backward_input(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                                    void *s, const void *dout, void *din, float loss_scale)
{
    for (int piece = 0; piece < 2; piece++)
        seq_head_backward_piece(b, piece, mb, in, out, s, dout, din, loss_scale);
}

static const pt_block_ops seq_head_ops = {
    .kind = "lm_head",
    .out_is_float = 1,
    .saved_bytes = seq_head_saved,
    .forward = seq_head_forward,
    .backward_input = seq_head_backward_input,
    .backward_weight = seq_head_backward_weight,
    .tensor_sums = seq_head_sums,
    .forward_piece = seq_head_piece,
    .backward_input_piece = seq_head_backward_piece,
    .tensor_sum_buffer = seq_head_sum_buffer,
    .tensor_sum_how = seq_head_how,
    .cost = head_cost,
    .work_bytes = seq_head_work,
};

void pt_lm_head_sequence(pt_block *b)
{
    b->ops = &seq_head_ops;
    b->in_floats = b->shape.T / b->shape.tensor * b->shape.C;
    b->decl[LNF_W].sequence_partial = 1;
    b->decl[LNF_B].sequence_partial = 1;
}
