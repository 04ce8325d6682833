/* test_tensor_split_blocks: GPT-2 cut into T tensor-parallel slices
 * (transformer_split.c, vocab_parallel.c) computes what the whole model
 * computes, on one process, the tensor group's sums done here in slice
 * order between the pieces:
 * - every slice's parameters are its part of the whole model's, by offset
 *   (QKV's columns per head, the projections' rows, the vocabulary's rows),
 *   and the whole tensors are put back together from the slices exactly;
 * - the loss of a micro-batch equals the whole model's within 1e-5
 *   relative, at T = 2 and 4;
 * - every gradient (the split blocks' backward) equals the whole model's
 *   (whose backward test_block_gradients checks against finite
 *   differences) within 1e-4 of the tensor's largest, and the whole
 *   tensors (LayerNorms, the row-parallel biases, wpe) get the same
 *   gradient on every slice;
 * - the same with sequence parallelism (transformer_sequence.c: each slice
 *   holds its positions between the tensor-parallel regions, the group's
 *   all-gathers and reduce-scatters done here too, the LayerNorms'
 *   gradients summed over the slices as the norm's step does);
 * - layouts that do not divide are refused with a message: heads,
 *   the MLP's width, the vocabulary, and a model with a layer that cannot
 *   be split (the mlp). (bf16 slices: tests/test_tensor_pipeline.c.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"

#include "check.h"
#include "model/model.h"

#define MAXT 4

static pt_model_config small_gpt(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 2, c.n_head = 4, c.n_embd = 32, c.seq_len = 8, c.vocab = 64, c.seed = 7;
    return c;
}

static double largest(const float *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* fold [lo, lo + n) of every slice's buffer in slice order, into every
 * slice's (only < 0) or slice only's */
static void fold(float **bufs, int T, size_t lo, size_t n, int only)
{
    for (size_t i = lo; i < lo + n; i++) {
        float s = bufs[0][i];
        for (int t = 1; t < T; t++)
            s += bufs[t][i];
        for (int t = 0; t < T; t++)
            if (only < 0 || t == only)
                bufs[t][i] = s;
    }
}

/* the group's sum, reduce-scatter or all-gather of one buffer */
static void group_op(float **bufs, int T, size_t n, pt_group_how how)
{
    if (how.op == PT_GROUP_SUM) {
        fold(bufs, T, 0, n, -1);
        return;
    }
    for (size_t b = 0; b < how.blocks; b++)
        for (int k = 0; k < T; k++) {
            size_t lo = (b * (size_t)T + (size_t)k) * how.part;
            if (how.op == PT_GROUP_SCATTER)
                fold(bufs, T, lo, how.part, k);
            else
                for (int t = 0; t < T; t++)
                    if (t != k)
                        memcpy(bufs[t] + lo, bufs[k] + lo, how.part * sizeof(float));
        }
}

static int run_pass(pt_model **s, pt_activations **a, int T, int last, int backward,
                    const pt_microbatch *mb, float *loss)
{
    int n = pt_model_tensor_pieces(s[0], 0, last, backward);
    for (int piece = 0; piece < n; piece++) {
        float *bufs[MAXT];
        size_t count = 0;
        for (int t = 0; t < T; t++) {
            int rc = backward ? pt_model_backward_input_piece(s[t], 0, last, piece, mb, NULL, a[t],
                                                              NULL, NULL, 1.0f)
                              : pt_model_forward_piece(s[t], 0, last, piece, mb, NULL, a[t], loss);
            REQUIRE(rc == PT_OK, "piece %d: %s", piece, pt_last_error());
            if (piece + 1 < n)
                bufs[t] = pt_model_tensor_sum_buffer(s[t], 0, last, backward, piece, a[t], &count);
        }
        if (piece + 1 < n)
            group_op(bufs, T, count,
                     pt_model_tensor_sum_how(s[0], 0, last, backward, piece, mb->batch));
    }
    return 0;
}

/* Sequence parallelism: the LayerNorms' gradients, each slice's positions'
 * part, summed over the slices in slice order. */
static void sum_sequence_partial(pt_model **s, int T)
{
    for (int i = 0; i < pt_model_n_params(s[0]); i++) {
        if (!pt_model_param_decl(s[0], i)->sequence_partial)
            continue;
        float *g[MAXT];
        for (int t = 0; t < T; t++)
            g[t] = pt_model_param(s[t], i)->grad;
        fold(g, T, 0, pt_model_param(s[0], i)->numel, -1);
    }
}

static int check_split(int T, int sequence)
{
    pt_model_config c = small_gpt();
    pt_model *whole, *s[MAXT];
    pt_activations *wa, *a[MAXT];
    int B = 2, N = B * c.seq_len;
    int *tokens = malloc(sizeof(int) * N), *targets = malloc(sizeof(int) * N);
    REQUIRE(tokens && targets, "allocation");
    for (int i = 0; i < N; i++)
        tokens[i] = (i * 37 + 11) % c.vocab, targets[i] = (i * 53 + 5) % c.vocab;
    targets[3] = -1; /* a position without a loss */
    pt_microbatch mb = {.batch = B, .tokens = tokens, .targets = targets};
    REQUIRE(pt_model_create(&c, &whole) == PT_OK, "whole: %s", pt_last_error());
    int last = pt_model_n_blocks(whole) - 1;
    REQUIRE(pt_activations_create(whole, 0, last, B, &wa) == PT_OK, "%s", pt_last_error());
    float whole_loss = 0, loss = 0;
    REQUIRE(pt_model_step_microbatch(whole, &mb, 1.0f, wa, &whole_loss) == PT_OK, "%s",
            pt_last_error());
    for (int t = 0; t < T; t++) {
        REQUIRE(pt_model_create_slice(&c, NULL, 0, T, t, sequence, &s[t]) == PT_OK, "slice %d: %s",
                t, pt_last_error());
        REQUIRE(pt_activations_create(s[t], 0, last, B, &a[t]) == PT_OK, "%s", pt_last_error());
    }
    /* the slices' parameters are the whole model's, by offset */
    for (int i = 0; i < pt_model_n_params(whole); i++) {
        const pt_param *w = pt_model_param(whole, i);
        const pt_param_decl *d =
            &s[0]->blocks[w->block].decl[i - pt_model_block_first_param(s[0], w->block)];
        float *put = calloc(w->numel, sizeof(float));
        REQUIRE(put, "allocation");
        for (int t = 0; t < T; t++) {
            const pt_param *q = pt_model_param(s[t], i);
            if (d->split_parts < 2) {
                CHECK(q->numel == w->numel && !memcmp(q->data, w->data, w->numel * sizeof(float)),
                      "T %d: %s on slice %d is not the whole model's", T, w->name, t);
                continue;
            }
            CHECK(q->numel * T == w->numel, "T %d: %s slice of %zu of %zu", T, w->name, q->numel,
                  w->numel);
            pt_param_slice_copy(&s[t]->blocks[w->block].decl[d - s[0]->blocks[w->block].decl],
                                q->data, put, 1);
        }
        if (d->split_parts >= 2)
            CHECK(!memcmp(put, w->data, w->numel * sizeof(float)),
                  "T %d: the slices of %s do not make the whole tensor", T, w->name);
        free(put);
    }
    if (run_pass(s, a, T, last, 0, &mb, &loss) || run_pass(s, a, T, last, 1, &mb, NULL))
        return 1;
    const char *sp = sequence ? " (sequence-parallel)" : "";
    CHECK(fabs(loss - whole_loss) <= 1e-5 * fabs(whole_loss), "T %d%s: loss %.9g, whole %.9g", T,
          sp, loss, whole_loss);
    for (int t = 0; t < T; t++)
        REQUIRE(pt_model_backward_weight(s[t], 0, last, &mb, NULL, a[t]) == PT_OK, "%s",
                pt_last_error());
    if (sequence)
        sum_sequence_partial(s, T);
    /* the gradients: each slice's part of the whole model's */
    for (int i = 0; i < pt_model_n_params(whole); i++) {
        const pt_param *w = pt_model_param(whole, i);
        double tol = 1e-4 * largest(w->grad, w->numel) + 1e-9, worst = 0;
        float *part = malloc(w->numel * sizeof(float));
        REQUIRE(part, "allocation");
        for (int t = 0; t < T; t++) {
            const pt_param *q = pt_model_param(s[t], i);
            const pt_param_decl *d =
                &s[t]->blocks[w->block].decl[i - pt_model_block_first_param(s[t], w->block)];
            if (d->split_parts >= 2)
                pt_param_slice_copy(d, part, w->grad, 0);
            else
                memcpy(part, w->grad, w->numel * sizeof(float));
            for (size_t j = 0; j < q->numel; j++)
                worst = fmax(worst, fabs((double)q->grad[j] - part[j]));
            if (d->split_parts < 2 && t > 0)
                CHECK(!memcmp(q->grad, pt_model_param(s[0], i)->grad, q->numel * sizeof(float)),
                      "T %d%s: the whole tensor %s has another gradient on slice %d", T, sp,
                      w->name, t);
        }
        CHECK(worst <= tol, "T %d%s: gradient of %s off by %g (tolerance %g)", T, sp, w->name,
              worst, tol);
        free(part);
    }
    for (int t = 0; t < T; t++) {
        pt_activations_destroy(a[t]);
        pt_model_destroy(s[t]);
    }
    pt_activations_destroy(wa);
    pt_model_destroy(whole);
    free(tokens);
    free(targets);
    return 0;
}

static void refused(const pt_model_config *c, int T, const char *says)
{
    pt_model *m = NULL;
    int rc = pt_model_create_slice(c, NULL, 1, T, 0, 0, &m);
    CHECK(rc != PT_OK && strstr(pt_last_error(), says), "T %d: not refused with '%s' (%s)", T, says,
          rc == PT_OK ? "built" : pt_last_error());
    pt_model_destroy(m);
}

int main(void)
{
    for (int sequence = 0; sequence < 2; sequence++) {
        check_split(2, sequence);
        check_split(4, sequence);
    }
    pt_model_config c = small_gpt();
    refused(&c, 3, "heads");
    c.n_head = 8, c.n_inner = 36;
    refused(&c, 8, "MLP width");
    c = small_gpt();
    c.vocab = 66;
    refused(&c, 4, "vocabulary");
    int widths[3] = {8, 16, 4};
    pt_model_config mlp = pt_model_config_mlp(3, widths);
    refused(&mlp, 2, "cannot be split");
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
