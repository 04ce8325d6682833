/* attention.c: causal multi-head and grouped-query self-attention
 * (attention.h), and the attention block that wraps the first between its
 * two projections:
 *   in (B,T,C) -c_attn-> qkv (B,T,3C) -attention-> y (B,T,C) -c_proj-> out
 * with parameters <prefix>.c_attn.{weight (C,3C), bias} and
 * <prefix>.c_proj.{weight (C,C), bias}, Hugging Face's names. */
#include "nn/attention.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "nn/block.h"
#include "nn/linear.h"
#include "tensor/gemm.h"
#include "tensor/scratch.h"

/* Attention runs one band of ATT_ROWS query rows at a time against every
 * key up to the band's diagonal: the band's scores and probabilities (ATT_ROWS
 * x T) live in scratch only while the band is worked on, and what backward
 * needs of the softmax is each row's max and 1/sum (stats), from which it
 * recomputes the band's probabilities bit for bit. So no (T,T) matrix is
 * kept or even held whole, activation memory grows with T rather than T^2,
 * and the products stop at the diagonal: about 5/8 of the full square at
 * T = 256. The softmax writes zeros past the diagonal up to the band's
 * last column, which is as far as the products read. GPT-2's heads and
 * grouped-query heads (pt_gqa) run the same code: GPT-2's is KV = H. */
#define ATT_ROWS 64

static int band(int T, int r0) { return T - r0 < ATT_ROWS ? T - r0 : ATT_ROWS; }

float pt_attention_scale(const pt_block_shape *s, int layer)
{
    float scale = s->attn_unscaled ? 1.0f : 1.0f / sqrtf((float)(s->C / s->H));
    return s->attn_by_layer ? scale / (float)(layer < 0 ? 1 : layer + 1) : scale;
}

/* The scratch: a band's scores, which backward overwrites with their
 * gradient once it has the probabilities (floats), the key and value
 * gradients of one key/value head summed over bands and over the query
 * heads that read it (floats), then the band's probabilities
 * (activations). Offsets in floats. */
typedef struct {
    size_t scores, dk, dv, att, floats;
} attention_scratch;

static attention_scratch scratch_layout(int T, int hd, pt_elem_type act)
{
    size_t band_n = (size_t)band(T, 0) * T, head = (size_t)T * hd;
    attention_scratch l = {.scores = 0, .dk = band_n};
    l.dv = l.dk + head;
    l.att = l.dv + head;
    l.floats = l.att + (band_n * pt_elem_size(act) + 3) / 4;
    return l;
}

size_t pt_gqa_scratch_floats(const pt_gqa *a, pt_elem_type act)
{
    return scratch_layout(a->T, a->hd, act).floats;
}

/* GPT-2's heads as grouped-query heads: as many key/value heads as query heads */
static pt_gqa heads_of_gpt(int T, int C, int H, float scale)
{
    return (pt_gqa){.T = T, .H = H, .KV = H, .hd = C / H, .scale = scale};
}

size_t pt_attention_scratch_floats(int T, int C, int H, pt_elem_type act)
{
    pt_gqa a = heads_of_gpt(T, C, H, 1.0f);
    return pt_gqa_scratch_floats(&a, act);
}

/* an activation operand n elements into p */
#define ACT(p, n, ld) pt_mat_of(pt_elems_at(p, n, k->act), ld, k->act)
#define FLOATS(p, ld) pt_mat_of(p, ld, PT_F32)

/* A head's keys (the scores' op(B), k^T) and values (the probabilities'
 * gradient's, v^T) packed once for all its bands, in the thread's scratch:
 * each band's product reads a prefix of their columns (gemm.h), where each
 * packed its own prefix before (at T = 256, 2.5x the packing). Without
 * room, or where the products keep no panels (OpenBLAS, bf16), the panels
 * are NULL and every band packs its own. */
typedef struct {
    pt_gemm_packed keys[2], values[2]; /* [1]: read transposed, as the bands read them */
} head_panels;

static head_panels panels_of(const pt_kernels *k, int T, int hs)
{
    head_panels hp = {0};
    size_t floats = k->packed_floats ? k->packed_floats(hs, T) : 0;
    float *room = floats ? pt_scratch(PT_SCRATCH_HEAD_PANELS, 2 * floats * sizeof(float)) : NULL;
    if (room) {
        hp.keys[1] = (pt_gemm_packed){.panels = room, .capacity = floats, .cols = T, .local = 1};
        hp.values[1] =
            (pt_gemm_packed){.panels = room + floats, .capacity = floats, .cols = T, .local = 1};
    }
    return hp;
}

/* m read through the kept panels of `pair` */
static pt_mat through(pt_mat m, pt_gemm_packed *pair)
{
    m.packed = pair;
    return m;
}

/* Where sample b's query head h starts in qkv and in y, and its key/value
 * head's keys and values in qkv */
typedef struct {
    size_t q, k, v, y;
} head_at;

static head_at head_of(const pt_gqa *a, int b, int h)
{
    size_t W = (size_t)pt_gqa_row(a), hd = (size_t)a->hd, row0 = (size_t)b * a->T * W;
    size_t kv = (size_t)(h / (a->H / a->KV));
    return (head_at){.q = row0 + (size_t)h * hd,
                     .k = row0 + ((size_t)a->H + kv) * hd,
                     .v = row0 + ((size_t)a->H + a->KV + kv) * hd,
                     .y = (size_t)b * a->T * a->H * hd + (size_t)h * hd};
}

/* One call's heads, shared between the worker's threads: each unit (a
 * sample's query head forward, a sample's key/value head with the query
 * heads that read it backward) is taken by whichever thread asks next and
 * computed whole there, the same operations in the same order wherever it
 * runs, so the bits do not depend on the thread count. The calling thread
 * works in the caller's scratch, each helper in scratch of its own (a
 * helper without it takes no unit). */
typedef struct heads_job heads_job;
struct heads_job {
    const pt_kernels *k;
    pt_gqa a;
    void *out;             /* y, or dqkv */
    const float *stats_in; /* backward's */
    float *stats_out;      /* forward's */
    const void *dy, *qkv;
    float *scratch;
    int units;
    void (*unit)(const heads_job *j, int n, float *scratch);
};

typedef struct {
    const heads_job *j;
    atomic_int next; /* the next unit */
} heads_run;

static void heads_part(void *arg, int i)
{
    heads_run *r = arg;
    const heads_job *j = r->j;
    float *scratch = j->scratch;
    if (i > 0 && !(scratch = pt_scratch(PT_SCRATCH_PIECE,
                                        sizeof(float) * pt_gqa_scratch_floats(&j->a, j->k->act))))
        return;
    for (int n; (n = atomic_fetch_add(&r->next, 1)) < j->units;)
        j->unit(j, n, scratch);
}

static void run_heads(const heads_job *j)
{
    int threads = pt_kernels_threads(j->k);
    heads_run r = {.j = j};
    atomic_init(&r.next, 0);
    pt_gemm_parallel(threads < j->units ? threads : j->units, heads_part, &r);
}

/* forward unit n: sample n / H's query head n % H */
static void forward_head(const heads_job *j, int n, float *scratch)
{
    const pt_kernels *k = j->k;
    const pt_gqa *a = &j->a;
    int T = a->T, hd = a->hd, W = pt_gqa_row(a), Y = a->H * hd;
    attention_scratch sl = scratch_layout(T, hd, k->act);
    float *scores = scratch + sl.scores;
    void *att = scratch + sl.att;
    head_at at = head_of(a, n / a->H, n % a->H);
    const void *qkv = j->qkv;
    float *st = j->stats_out + (size_t)n * T * 2;
    head_panels hp = panels_of(k, T, hd);
    pt_mat keys = through(ACT(qkv, at.k, W), hp.keys);
    for (int r0 = 0; r0 < T; r0 += ATT_ROWS) {
        int nb = band(T, r0);
        k->matmul(0, 1, nb, r0 + nb, hd, 1.0f, ACT(qkv, at.q + (size_t)r0 * W, W), keys, 0.0f,
                  FLOATS(scores, T), NULL);
        k->softmax_causal_forward(att, scores, st + 2 * (size_t)r0, r0, nb, T, a->scale);
        k->matmul(0, 0, nb, hd, r0 + nb, 1.0f, ACT(att, 0, T), ACT(qkv, at.v, W), 0.0f,
                  ACT(j->out, at.y + (size_t)r0 * Y, Y), NULL);
    }
}

// qkv (B,T,(H+2KV)hd) -> y (B,T,H hd); stats (B,H,T,2)
void pt_gqa_forward(const pt_kernels *k, const pt_gqa *a, void *y, float *stats, float *scratch,
                    const void *qkv, int B)
{
    heads_job j = {.k = k,
                   .a = *a,
                   .out = y,
                   .stats_out = stats,
                   .qkv = qkv,
                   .scratch = scratch,
                   .units = B * a->H,
                   .unit = forward_head};
    run_heads(&j);
}

/* Query head h's backward over its bands: dq written, dk and dv added to
 * the sums in scratch */
static void backward_head(const heads_job *j, int b, int h, float *scratch, head_panels *hp)
{
    const pt_kernels *k = j->k;
    const pt_gqa *a = &j->a;
    int T = a->T, hd = a->hd, W = pt_gqa_row(a), Y = a->H * hd;
    attention_scratch sl = scratch_layout(T, hd, k->act);
    float *scores = scratch + sl.scores, *dprob = scores; /* scores die once att has them */
    float *dk_sum = scratch + sl.dk, *dv_sum = scratch + sl.dv;
    void *att = scratch + sl.att;
    const void *qkv = j->qkv, *dy = j->dy;
    head_at at = head_of(a, b, h); /* dqkv is laid out as qkv */
    const float *st = j->stats_in + ((size_t)b * a->H + h) * T * 2;
    pt_mat keys = through(ACT(qkv, at.k, W), hp->keys);
    pt_mat values = through(ACT(qkv, at.v, W), hp->values);
    for (int r0 = 0; r0 < T; r0 += ATT_ROWS) {
        int n = band(T, r0);
        pt_mat qb = ACT(qkv, at.q + (size_t)r0 * W, W), dyb = ACT(dy, at.y + (size_t)r0 * Y, Y);
        /* the forward's probabilities; dP = dy v^T; dv += P^T dy */
        k->matmul(0, 1, n, r0 + n, hd, 1.0f, qb, keys, 0.0f, FLOATS(scores, T), NULL);
        k->softmax_causal_recompute(att, scores, st + 2 * (size_t)r0, r0, n, T, a->scale);
        k->matmul(0, 1, n, r0 + n, hd, 1.0f, dyb, values, 0.0f, FLOATS(dprob, T), NULL);
        k->matmul(1, 0, r0 + n, hd, n, 1.0f, ACT(att, 0, T), dyb, 1.0f, FLOATS(dv_sum, hd), NULL);
        /* dS, in place; dq = dS k; dk += dS^T q */
        k->softmax_causal_backward(att, att, dprob, r0, n, T, a->scale);
        k->matmul(0, 0, n, hd, r0 + n, 1.0f, ACT(att, 0, T), ACT(qkv, at.k, W), 0.0f,
                  ACT(j->out, at.q + (size_t)r0 * W, W), NULL);
        k->matmul(1, 0, r0 + n, hd, n, 1.0f, ACT(att, 0, T), qb, 1.0f, FLOATS(dk_sum, hd), NULL);
    }
}

/* backward unit n: sample n / KV's key/value head n % KV, and the query
 * heads that read it in order; its key and value gradients are summed in
 * float over them and stored once */
static void backward_group(const heads_job *j, int n, float *scratch)
{
    const pt_kernels *k = j->k;
    const pt_gqa *a = &j->a;
    int T = a->T, hd = a->hd, W = pt_gqa_row(a), group = a->H / a->KV;
    int b = n / a->KV, h0 = n % a->KV * group;
    attention_scratch sl = scratch_layout(T, hd, k->act);
    float *dk_sum = scratch + sl.dk, *dv_sum = scratch + sl.dv;
    memset(dk_sum, 0, sizeof(float) * T * hd);
    memset(dv_sum, 0, sizeof(float) * T * hd);
    head_panels hp = panels_of(k, T, hd); /* the group's keys and values, packed once */
    for (int h = h0; h < h0 + group; h++)
        backward_head(j, b, h, scratch, &hp);
    head_at at = head_of(a, b, h0);
    for (int t = 0; t < T; t++) {
        k->store_floats(pt_elems_at(j->out, at.k + (size_t)t * W, k->act), dk_sum + t * hd, hd);
        k->store_floats(pt_elems_at(j->out, at.v + (size_t)t * W, k->act), dv_sum + t * hd, hd);
    }
}

// dy (B,T,H hd) -> dqkv (B,T,(H+2KV)hd)
void pt_gqa_backward(const pt_kernels *k, const pt_gqa *a, void *dqkv, const float *stats,
                     float *scratch, const void *dy, const void *qkv, int B)
{
    heads_job j = {.k = k,
                   .a = *a,
                   .out = dqkv,
                   .stats_in = stats,
                   .dy = dy,
                   .qkv = qkv,
                   .scratch = scratch,
                   .units = B * a->KV,
                   .unit = backward_group};
    run_heads(&j);
}

// qkv (B,T,3C) -> y (B,T,C)
void pt_attention_forward(const pt_kernels *k, void *y, float *stats, float *scratch,
                          const void *qkv, int B, int T, int C, int H, float scale)
{
    pt_gqa a = heads_of_gpt(T, C, H, scale);
    pt_gqa_forward(k, &a, y, stats, scratch, qkv, B);
}

// dy (B,T,C) -> dqkv (B,T,3C)
void pt_attention_backward(const pt_kernels *k, void *dqkv, const float *stats, float *scratch,
                           const void *dy, const void *qkv, int B, int T, int C, int H, float scale)
{
    pt_gqa a = heads_of_gpt(T, C, H, scale);
    pt_gqa_backward(k, &a, dqkv, stats, scratch, dy, qkv, B);
}

double pt_attention_forward_flops(int T, int C) { return 4.0 * T * T * C; }
double pt_attention_backward_flops(int T, int C) { return 8.0 * T * T * C; }

/* ---- the attention block ---- */

/* Byte offsets into the saved area (qkv, stats, y: forward to W), the
 * grads area (dqkv: backward_input to W) and the stage's workspace (dy and
 * the scratch: one pass) */
typedef struct {
    size_t qkv, stats, y, saved, dqkv, grads, dy, scratch, work;
} attention_layout;

static attention_layout layout(const pt_block *b, int B)
{
    size_t n = (size_t)B * b->shape.T, C = b->shape.C, T = b->shape.T, at = 0;
    pt_elem_type t = b->k->act;
    attention_layout l;
    l.qkv = pt_saved_take(&at, n * 3 * C, t);
    l.stats = pt_saved_take(&at, (size_t)B * b->shape.H * T * 2, PT_F32);
    l.y = pt_saved_take(&at, n * C, t);
    l.saved = at, at = 0;
    l.dqkv = pt_saved_take(&at, n * 3 * C, t);
    l.grads = at, at = 0;
    l.dy = pt_saved_take(&at, n * C, t);
    l.scratch = pt_saved_take(&at, pt_attention_scratch_floats(T, C, b->shape.H, t), PT_F32);
    l.work = at;
    return l;
}

static size_t attention_saved(const pt_block *b, int B) { return layout(b, B).saved; }
static size_t attention_grads(const pt_block *b, int B) { return layout(b, B).grads; }
static size_t attention_work(const pt_block *b, int B) { return layout(b, B).work; }

// in (B,T,C) -> out (B,T,C)
static void attention_forward(pt_block *b, const pt_microbatch *mb, const void *in, void *out,
                              void *s, double *loss_sum, int *loss_rows)
{
    (void)loss_sum, (void)loss_rows;
    int B = mb->batch, T = b->shape.T, C = b->shape.C, N = B * T;
    attention_layout l = layout(b, B);
    pt_linear_forward(b, 0, pt_saved_at(s, l.qkv), in, N, C, 3 * C);
    pt_attention_forward(b->k, pt_saved_at(s, l.y), pt_saved_floats(s, l.stats),
                         pt_saved_floats(b->work, l.scratch), pt_saved_at(s, l.qkv), B, T, C,
                         b->shape.H, pt_attention_scale(&b->shape, b->layer));
    pt_linear_forward(b, 2, out, pt_saved_at(s, l.y), N, C, C);
}

// dout (B,T,C) -> din (B,T,C)
static void attention_backward_input(pt_block *b, const pt_microbatch *mb, const void *in,
                                     void *out, void *s, const void *dout, void *din,
                                     float loss_scale)
{
    (void)in, (void)out, (void)loss_scale;
    int B = mb->batch, T = b->shape.T, C = b->shape.C, N = B * T;
    attention_layout l = layout(b, B);
    void *dy = pt_saved_at(b->work, l.dy), *dqkv = pt_saved_at(b->grads, l.dqkv);
    pt_linear_backward_input(b, 2, dy, dout, N, C, C);
    pt_attention_backward(b->k, dqkv, pt_saved_floats(s, l.stats),
                          pt_saved_floats(b->work, l.scratch), dy, pt_saved_at(s, l.qkv), B, T, C,
                          b->shape.H, pt_attention_scale(&b->shape, b->layer));
    if (din)
        pt_linear_backward_input(b, 0, din, dqkv, N, C, 3 * C);
}

static void attention_backward_weight(pt_block *b, const pt_microbatch *mb, const void *in,
                                      const void *out, const void *s, const void *dout)
{
    (void)out;
    int B = mb->batch, C = b->shape.C, N = B * b->shape.T;
    attention_layout l = layout(b, B);
    pt_linear_backward_weight(b, 2, dout, pt_saved_at(s, l.y), N, C, C);
    pt_linear_backward_weight(b, 0, pt_saved_at(b->grads, l.dqkv), in, N, C, 3 * C);
}

static pt_block_cost attention_cost(const pt_block *b)
{
    double T = b->shape.T, C = b->shape.C, proj = 2 * T * C * 4 * C;
    return (pt_block_cost){
        .forward_flops = proj + pt_attention_forward_flops(b->shape.T, b->shape.C),
        .backward_input_flops = proj + pt_attention_backward_flops(b->shape.T, b->shape.C),
        .backward_weight_flops = proj};
}

static const pt_block_ops attention_ops = {
    .kind = "attention",
    .saved_bytes = attention_saved,
    .grads_bytes = attention_grads,
    .work_bytes = attention_work,
    .forward = attention_forward,
    .backward_input = attention_backward_input,
    .backward_weight = attention_backward_weight,
    .cost = attention_cost,
};

void pt_attention_init(pt_block *b, const pt_block_shape *s, const char *prefix)
{
    char name[96];
    b->ops = &attention_ops;
    b->layer = -1;
    b->shape = *s;
    b->in_floats = b->out_floats = s->T * s->C;
    snprintf(name, sizeof name, "%s.c_attn", prefix);
    pt_block_declare_linear(b, name, s->C, 3 * s->C, 0.02f);
    snprintf(name, sizeof name, "%s.c_proj", prefix);
    pt_block_declare_linear(b, name, s->C, s->C, 0.02f);
}
