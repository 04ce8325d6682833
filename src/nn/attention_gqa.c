/* attention_gqa.c: causal grouped-query attention (attention_gqa.h). The
 * causal mask makes scores and probabilities lower triangular, so the
 * products run over bands of GQA_ROWS rows that stop at the diagonal; the
 * softmax kernels read only j <= i. The (T,T) probabilities are kept for
 * backward (the GPT-2 attention recomputes them instead: attention.c). A key/value head's gradient
 * sums over the query heads of its group: the first writes it, the others add. */
#include "nn/attention_gqa.h"

#define GQA_ROWS 64

static int band(int T, int r0) { return T - r0 < GQA_ROWS ? T - r0 : GQA_ROWS; }

/* an activation operand n elements into p */
#define ACT(p, n, ld) pt_mat_of(pt_elems_at(p, n, k->act), ld, k->act)

/* where sample b's head h of q, and its kv head's k and v, start in qkv */
typedef struct {
    size_t q, k, v, y, att;
} head_at;

static head_at heads(const pt_gqa *a, int b, int h)
{
    size_t W = pt_gqa_row(a), row0 = (size_t)b * a->T * W, hd = a->hd;
    int kv = h / (a->H / a->KV);
    head_at at;
    at.q = row0 + h * hd;
    at.k = row0 + ((size_t)a->H + kv) * hd;
    at.v = row0 + ((size_t)a->H + a->KV + kv) * hd;
    at.y = (size_t)b * a->T * a->H * hd + h * hd;
    at.att = ((size_t)b * a->H + h) * a->T * a->T;
    return at;
}

// qkv (B,T,(H+2KV)hd) -> y (B,T,H hd)
void pt_gqa_forward(const pt_kernels *k, const pt_gqa *a, void *y, void *att, float *scratch,
                    const void *qkv, int B)
{
    int T = a->T, hd = a->hd, W = pt_gqa_row(a), Y = a->H * hd;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < a->H; h++) {
            head_at at = heads(a, b, h);
            for (int r0 = 0; r0 < T; r0 += GQA_ROWS) /* q k^T up to the diagonal */
                k->matmul(0, 1, band(T, r0), r0 + band(T, r0), hd, 1.0f,
                          ACT(qkv, at.q + (size_t)r0 * W, W), ACT(qkv, at.k, W), 0.0f,
                          pt_mat_of(scratch + (size_t)r0 * T, T, PT_F32), NULL);
            k->softmax_causal_forward(pt_elems_at(att, at.att, k->act), scratch,
                                      scratch + (size_t)T * T, 0, T, T, a->scale);
            for (int r0 = 0; r0 < T; r0 += GQA_ROWS) /* att v */
                k->matmul(0, 0, band(T, r0), hd, r0 + band(T, r0), 1.0f,
                          ACT(att, at.att + (size_t)r0 * T, T), ACT(qkv, at.v, W), 0.0f,
                          ACT(y, at.y + (size_t)r0 * Y, Y), NULL);
        }
}

// dy (B,T,H hd) -> dqkv (B,T,(H+2KV)hd)
void pt_gqa_backward(const pt_kernels *k, const pt_gqa *a, void *dqkv, void *att, float *scratch,
                     const void *dy, const void *qkv, int B)
{
    int T = a->T, hd = a->hd, W = pt_gqa_row(a), Y = a->H * hd, group = a->H / a->KV;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < a->H; h++) {
            head_at at = heads(a, b, h); /* dqkv is laid out as qkv */
            float kv_beta = h % group ? 1.0f : 0.0f;
            for (int r0 = 0; r0 < T; r0 += GQA_ROWS) { /* dP = dy v^T, and dv (+)= att^T dy */
                int n = band(T, r0);
                k->matmul(0, 1, n, r0 + n, hd, 1.0f, ACT(dy, at.y + (size_t)r0 * Y, Y),
                          ACT(qkv, at.v, W), 0.0f, pt_mat_of(scratch + (size_t)r0 * T, T, PT_F32),
                          NULL);
                k->matmul(1, 0, n, hd, T - r0, 1.0f, ACT(att, at.att + (size_t)r0 * T + r0, T),
                          ACT(dy, at.y + (size_t)r0 * Y, Y), kv_beta,
                          ACT(dqkv, at.v + (size_t)r0 * W, W), NULL);
            }
            void *ah = pt_elems_at(att, at.att, k->act);
            k->softmax_causal_backward(ah, ah, scratch, 0, T, T, a->scale); /* dS, in place */
            for (int r0 = 0; r0 < T; r0 += GQA_ROWS) { /* dq = dS k, and dk (+)= dS^T q */
                int n = band(T, r0);
                k->matmul(0, 0, n, hd, r0 + n, 1.0f, ACT(att, at.att + (size_t)r0 * T, T),
                          ACT(qkv, at.k, W), 0.0f, ACT(dqkv, at.q + (size_t)r0 * W, W), NULL);
                k->matmul(1, 0, n, hd, T - r0, 1.0f, ACT(att, at.att + (size_t)r0 * T + r0, T),
                          ACT(qkv, at.q + (size_t)r0 * W, W), kv_beta,
                          ACT(dqkv, at.k + (size_t)r0 * W, W), NULL);
            }
        }
}
