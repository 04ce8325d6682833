/* test_softmax_causal: attention's causal softmax kernels against their
 * definition, in double.
 *
 * A head of T query rows runs in bands of 64 rows (attention.c): a band's
 * scores hold r0 + n columns, row i sees keys 0 .. r0 + i. For each table
 * (fp32, and bf16, whose probabilities are rounded once) and each T (5, 16,
 * 64, 100, 150: rows whose last vector of 16 has room in the band and rows
 * where it has not), on scores with a spread of 4 and every band:
 *   forward     p[j] = e^(s[j] scale - max) / sum over j <= r0 + i, within
 *               2e-6 relative (fp32) or a bf16 rounding (2^-8), zeros past
 *               the diagonal up to the band's last column; the row's stats
 *               are its max and 1/sum;
 *   recompute   from the scores and stats: the forward's bits;
 *   backward    d[j] = scale p[j] (dp[j] - sum_k p[k] dp[k]) on the
 *               forward's p, within 1e-5 of the row's largest |d| (fp32)
 *               or a bf16 rounding, zeros past the diagonal.
 * A loop that stopped short of a row's last elements, or ran past them
 * into its sums, keeps forward and backward consistent with each other
 * (so a gradient check passes), but not with this definition. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "tensor/bf16.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

#define ROWS 64

static float widen(const pt_kernels *k, const void *p, size_t i)
{
    return k->act == PT_BF16 ? pt_bf16_widen(((const pt_bf16 *)p)[i]) : ((const float *)p)[i];
}

static void check_band(const pt_kernels *k, int T, int r0, int n, const float *scores0,
                       const float *dprob, float scale)
{
    size_t cells = (size_t)n * T;
    float *scores = calloc(cells, sizeof(float)), *stats = calloc(2 * (size_t)n, sizeof(float));
    void *att = calloc(cells, sizeof(float)), *again = calloc(cells, sizeof(float));
    void *datt = calloc(cells, sizeof(float));
    memcpy(scores, scores0, cells * sizeof(float));
    k->softmax_causal_forward(att, scores, stats, r0, n, T, scale);
    k->softmax_causal_recompute(again, scores0, stats, r0, n, T, scale);
    k->softmax_causal_backward(datt, att, dprob, r0, n, T, scale);
    int bf16 = k->act == PT_BF16, width = r0 + n;
    double tol = bf16 ? ldexp(1.0, -8) : 2e-6;
    for (int i = 0; i < n; i++) {
        const float *s = scores0 + (size_t)i * T, *dp = dprob + (size_t)i * T;
        size_t row = (size_t)i * T;
        int last = r0 + i;
        double mx = -INFINITY, sum = 0.0, dot = 0.0, dmax = 0.0;
        for (int j = 0; j <= last; j++)
            mx = fmax(mx, (double)(s[j] * scale));
        for (int j = 0; j <= last; j++)
            sum += exp((double)(s[j] * scale) - mx);
        CHECK(fabs(stats[2 * i] - mx) <= 1e-6 * fabs(mx) &&
                  fabs(stats[2 * i + 1] * sum - 1.0) < 1e-5,
              "%s T %d row %d: stats %g %g, want %g %g", k->name, T, r0 + i, stats[2 * i],
              stats[2 * i + 1], mx, 1.0 / sum);
        for (int j = 0; j <= last; j++) {
            double p = exp((double)(s[j] * scale) - mx) / sum, got = widen(k, att, row + j);
            CHECK(fabs(got - p) <= tol * p + 1e-30, "%s T %d row %d col %d: p %.9g, want %.9g",
                  k->name, T, r0 + i, j, got, p);
            dot += (double)got * dp[j];
        }
        for (int j = last + 1; j < width; j++)
            CHECK(widen(k, att, row + j) == 0.0f, "%s T %d row %d col %d: %g past the diagonal",
                  k->name, T, r0 + i, j, widen(k, att, row + j));
        CHECK(!memcmp((char *)att + row * pt_elem_size(k->act),
                      (char *)again + row * pt_elem_size(k->act), width * pt_elem_size(k->act)),
              "%s T %d row %d: the recompute's bits differ from the forward's", k->name, T, r0 + i);
        for (int j = 0; j <= last; j++)
            dmax = fmax(dmax, fabs(scale * widen(k, att, row + j) * (dp[j] - dot)));
        for (int j = 0; j <= last; j++) {
            double want = scale * widen(k, att, row + j) * (dp[j] - dot);
            double got = widen(k, datt, row + j);
            CHECK(fabs(got - want) <= (bf16 ? tol * fabs(want) + 1e-6 * dmax : 1e-5 * dmax),
                  "%s T %d row %d col %d: d %.9g, want %.9g", k->name, T, r0 + i, j, got, want);
        }
        for (int j = last + 1; j < width; j++)
            CHECK(widen(k, datt, row + j) == 0.0f, "%s T %d row %d col %d: d %g past the diagonal",
                  k->name, T, r0 + i, j, widen(k, datt, row + j));
    }
    free(scores), free(stats), free(att), free(again), free(datt);
}

int main(void)
{
    const pt_kernels *tables[] = {pt_kernels_cpu(), pt_kernels_bf16_portable()};
    static const int Ts[] = {5, 16, 64, 100, 150};
    pt_rng rng;
    pt_rng_seed(&rng, 7);
    for (int t = 0; t < 2; t++)
        for (size_t a = 0; a < sizeof Ts / sizeof Ts[0]; a++) {
            int T = Ts[a];
            for (int r0 = 0; r0 < T; r0 += ROWS) {
                int n = T - r0 < ROWS ? T - r0 : ROWS;
                size_t cells = (size_t)n * T;
                float *scores = malloc(cells * sizeof(float)),
                      *dprob = malloc(cells * sizeof(float));
                pt_rng_fill_normal(&rng, scores, cells, 4.0f);
                pt_rng_fill_normal(&rng, dprob, cells, 1.0f);
                check_band(tables[t], T, r0, n, scores, dprob, 0.125f);
                free(scores), free(dprob);
            }
        }
    printf("causal softmax: forward, recompute and backward of %s and %s against their "
           "definition at T 5, 16, 64, 100, 150\n",
           tables[0]->name, tables[1]->name);
    return failures != 0;
}
