/* test_split_backward: backward_input then backward_weight equals the fused
 * backward even when the weight pass is deferred past other micro-batches'
 * work, as zero-bubble schedules defer it. For every block type with
 * parameters: micro-batches 1 and 2 run fused (F B W, F B W) and deferred
 * (F1 B1, F2 B2, W1 W2) give bit-identical gradients. */
#include "block_harness.h"

static int failures;

typedef struct {
    harness h;
    float *in2, *out2, *saved2, *din2, *grads2; /* micro-batch 2's; 1's are the harness's */
} pair;

static void run(pair *p, int deferred)
{
    harness *h = &p->h;
    pt_block *b = &h->b;
    pt_microbatch mb2 = h->mb;
    mb2.inputs = p->in2;
    for (int i = 0; i < b->n_params; i++)
        memset(b->g[i], 0, pt_param_decl_numel(&b->decl[i]) * sizeof(float));
    double ls;
    int rows;
    b->ops->forward(b, &h->mb, h->in, h->out, h->saved, &ls, &rows);
    b->grads = h->grads;
    b->ops->backward_input(b, &h->mb, h->in, h->out, h->saved, h->R, h->din, 0.5f);
    if (!deferred)
        b->ops->backward_weight(b, &h->mb, h->in, h->out, h->saved, h->R);
    b->ops->forward(b, &mb2, p->in2, p->out2, p->saved2, &ls, &rows);
    b->grads = p->grads2;
    b->ops->backward_input(b, &mb2, p->in2, p->out2, p->saved2, h->R, p->din2, 0.5f);
    if (deferred) {
        b->grads = h->grads;
        b->ops->backward_weight(b, &h->mb, h->in, h->out, h->saved, h->R);
    }
    b->grads = p->grads2;
    b->ops->backward_weight(b, &mb2, p->in2, p->out2, p->saved2, h->R);
}

static void check(const char *label, pair *p)
{
    harness *h = &p->h;
    p->in2 = harness_floats(h->n_in);
    p->out2 = harness_floats(h->n_out);
    p->saved2 = harness_floats(h->n_saved);
    p->din2 = harness_floats(h->n_in);
    p->grads2 = harness_grads(&h->b, h->B);
    for (size_t i = 0; i < h->n_in; i++)
        p->in2[i] = h->in[i] * -0.7f + 0.1f;
    int np = h->b.n_params;
    float *fused[PT_BLOCK_MAX_PARAMS];
    run(p, 0);
    for (int i = 0; i < np; i++) {
        size_t n = pt_param_decl_numel(&h->b.decl[i]);
        fused[i] = harness_floats(n);
        memcpy(fused[i], h->b.g[i], n * sizeof(float));
    }
    run(p, 1);
    int same = 1;
    double norm = 0.0;
    for (int i = 0; i < np; i++) {
        size_t n = pt_param_decl_numel(&h->b.decl[i]);
        same &= memcmp(fused[i], h->b.g[i], n * sizeof(float)) == 0;
        for (size_t j = 0; j < n; j++)
            norm += fabs(h->b.g[i][j]);
        pt_free(fused[i]);
    }
    /* a block whose weight pass did nothing would pass vacuously */
    printf("%-12s %s (gradient mass %.3g)\n", label, same && norm > 0 ? "ok" : "FAIL", norm);
    failures += !(same && norm > 0);
    pt_free(p->in2), pt_free(p->out2), pt_free(p->saved2), pt_free(p->din2), pt_free(p->grads2);
    harness_free(h);
}

int main(void)
{
    pt_block_shape gpt = {.T = 6, .C = 8, .H = 2, .V = 13, .n_layer = 2};
    pt_block_shape lin = {.in = 7, .out = 5};
    pair p;

    memset(&p, 0, sizeof p);
    pt_embedding_init(&p.h.b, &gpt);
    harness_setup(&p.h, 3, 0, gpt.T, gpt.V, 11);
    check("embedding", &p);

    memset(&p, 0, sizeof p);
    pt_layernorm_init(&p.h.b, &gpt, "ln");
    harness_setup(&p.h, 3, 0, gpt.T, gpt.V, 12);
    check("layernorm", &p);

    memset(&p, 0, sizeof p);
    pt_linear_init(&p.h.b, &lin, "fc.0");
    harness_setup(&p.h, 3, 0, 0, gpt.V, 13);
    check("linear", &p);

    memset(&p, 0, sizeof p);
    pt_attention_init(&p.h.b, &gpt, "attn");
    harness_setup(&p.h, 3, 0, gpt.T, gpt.V, 14);
    check("attention", &p);

    memset(&p, 0, sizeof p);
    pt_transformer_init(&p.h.b, &gpt, 1);
    harness_setup(&p.h, 3, 0, gpt.T, gpt.V, 15);
    check("transformer", &p);

    memset(&p, 0, sizeof p);
    pt_lm_head_init(&p.h.b, &gpt);
    harness_setup(&p.h, 3, 1, gpt.T, gpt.V, 16);
    check("lm_head", &p);

    memset(&p, 0, sizeof p);
    pt_classifier_init(&p.h.b, &lin, "fc.1");
    harness_setup(&p.h, 3, 1, 0, lin.out, 17);
    check("classifier", &p);

    return failures ? 1 : 0;
}
