/* llama.c: the Transformer of torch.distributed.pipelining's tutorial, the
 * Llama family's shape, split by hand into two stages:
 *
 *   tok_embeddings                         tok_embedding 256 64 32
 *   layers: {"0": .., "3": ..}             llama_block 64 4 kv_heads=2 inner=128
 *            (RMSNorm, rotary positions, grouped-query attention, SwiGLU)
 *   norm                                   rmsnorm 64
 *   output                                 linear 64 256 bias=0
 *   loss: cross-entropy on every next token
 *
 * As the tutorial deletes layers 2 and 3 from stage 0's copy and the
 * embedding and layers 0 and 1 from stage 1's, balance 3,4 puts the
 * embedding and two layers on stage 0, two layers, the norm and the output
 * on stage 1 (the loss joins the output). Trained on the fortunes text as
 * bytes (/usr/share/games/fortunes/fortunes, scripts/install-deps.sh); the
 * first steps also run on one stage and must agree bit for bit.
 *
 *   llama [TEXT [STEPS]]   (default the fortunes file, 200)
 * Exits 0 when the held-out loss falls and both runs agree; 77 when the
 * text is missing. */
#include <pipetrain.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T = 32, MICRO = 4, MBS = 4, BATCH = MICRO * MBS, SAME_STEPS = 6 };

static const char *spec = "tok_embedding 256 64 32\n"
                          "llama_block 64 4 kv_heads=2 inner=128\n"
                          "llama_block 64 4 kv_heads=2 inner=128\n"
                          "llama_block 64 4 kv_heads=2 inner=128\n"
                          "llama_block 64 4 kv_heads=2 inner=128\n"
                          "rmsnorm 64\n"
                          "linear 64 256 bias=0\n"
                          "cross_entropy\n";

static pt_pipeline *create(int stages)
{
    pt_model_config model;
    pt_optim_config optim = pt_optim_config_default(PT_OPTIM_ADAMW);
    optim.lr = 3e-3f;
    pt_pipeline_config pipe = pt_pipeline_config_default();
    int balance[] = {3, 4};
    pipe.stages = stages;
    pipe.microbatches = MICRO;
    pipe.micro_batch_size = MBS;
    pipe.balance = stages == 2 ? balance : NULL;
    pipe.n_balance = stages == 2 ? 2 : 0;
    pipe.blas_threads = 1; /* one thread per worker: the sums run in one order */
    pt_pipeline *p = NULL;
    if (pt_model_config_spec(spec, &model) != PT_OK ||
        pt_pipeline_create(&model, &optim, &pipe, &p) != PT_OK)
        fprintf(stderr, "llama: %d stages: %s\n", stages, pt_last_error());
    return p;
}

/* Mean loss over the first 4 held-out batches */
static float held_out(pt_pipeline *p, const pt_token_batches *b)
{
    int tokens[BATCH * T], targets[BATCH * T];
    double sum = 0;
    size_t n = pt_token_batches_val_count(b) < 4 ? pt_token_batches_val_count(b) : 4;
    for (size_t k = 0; k < n; k++) {
        float loss = 0;
        pt_token_batches_val(b, k, tokens, targets);
        pt_microbatch mb = {.batch = BATCH, .tokens = tokens, .targets = targets};
        if (pt_pipeline_eval(p, &mb, &loss) != PT_OK)
            return fprintf(stderr, "llama: %s\n", pt_last_error()), -1.0f;
        sum += loss;
    }
    return n ? (float)(sum / (double)n) : -1.0f;
}

/* `steps` steps on the batches of a fresh reader (the same on every run) */
static int train(pt_pipeline *p, const char *text, long steps, float *losses, float *before,
                 float *after)
{
    pt_token_batches *b;
    if (pt_token_batches_open(&text, 1, NULL, 256, T, BATCH, 0.1, 5, &b) != PT_OK)
        return fprintf(stderr, "llama: %s\n", pt_last_error()), 1;
    int tokens[BATCH * T], targets[BATCH * T], rc = 0;
    *before = held_out(p, b);
    for (long s = 0; !rc && s < steps; s++) {
        pt_token_batches_next(b, tokens, targets);
        pt_microbatch mb = {.batch = BATCH, .tokens = tokens, .targets = targets};
        if ((rc = pt_pipeline_train_step(p, &mb, s, 3e-3f, &losses[s]) != PT_OK))
            fprintf(stderr, "llama: %s\n", pt_last_error());
    }
    *after = held_out(p, b);
    pt_token_batches_destroy(b);
    return rc;
}

int main(int argc, char **argv)
{
    const char *text = argc > 1 ? argv[1] : "/usr/share/games/fortunes/fortunes";
    long steps = argc > 2 ? atol(argv[2]) : 200;
    if (steps < SAME_STEPS)
        return fprintf(stderr, "usage: llama [TEXT [STEPS >= %d]]\n", SAME_STEPS), 2;
    FILE *f = fopen(text, "rb");
    if (!f)
        return printf("skipped: no %s (scripts/install-deps.sh installs the fortunes)\n", text), 77;
    fclose(f);
    float *two = calloc((size_t)steps, sizeof(float)), one[SAME_STEPS], before, after, b1, a1;
    pt_pipeline *p2 = create(2), *p1 = p2 ? create(1) : NULL;
    int rc = !two || !p1 || !p2 || train(p2, text, steps, two, &before, &after) ||
             train(p1, text, SAME_STEPS, one, &b1, &a1);
    for (long s = 0; !rc && s < steps; s += steps / 10)
        printf("step %4ld  loss %.4f\n", s + 1, two[s]);
    int same = !rc && !memcmp(one, two, sizeof one) && b1 == before;
    int falls = !rc && after < before - 1.0f;
    printf("first %d steps: two stages %s one stage bit for bit; held-out loss %.3f -> %.3f "
           "(%s)\n",
           SAME_STEPS, same ? "equal" : "DIFFER from", before, after,
           falls ? "falls" : "DOES NOT fall by 1");
    pt_pipeline_destroy(p1), pt_pipeline_destroy(p2);
    free(two);
    return same && falls ? 0 : 1;
}
