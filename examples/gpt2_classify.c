/* gpt2_classify.c: GPT-2 for sequence classification
 * (GPT2ForSequenceClassification) split over four pipeline stages: GPT-2's
 * embedding and blocks, the final LayerNorm, and a score head on the last
 * token (last_token_classifier) with cross-entropy.
 *
 * The task (synthetic, seeded): does a sequence of 16 tokens over an
 * alphabet of 8 hold the pattern "1 2" somewhere? Half the samples do
 * (the pattern at a random place), half do not (every accidental one
 * broken), so a model that does not look at pairs of tokens scores 50%.
 *
 * Four stages: threads in this process, or, under `mpirun -np 4`, one rank
 * each (the transport is chosen by how the program is started). The same
 * steps on one worker (threads, in every process) must give the same
 * losses bit for bit. balance 2,2,2,1 counts the layers.
 *
 *   gpt2_classify [STEPS]   (default 1000)
 * Exits 0 when the loss falls, both runs agree and the pattern is found in
 * at least 90% of fresh sequences. */
#include <pipetrain.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T = 16, VOCAB = 8, MICRO = 4, MBS = 8, BATCH = MICRO * MBS, SAME_STEPS = 6 };

static const char *spec = "embedding 8 32 16\n"
                          "gpt2_block 32 4; gpt2_block 32 4; gpt2_block 32 4; gpt2_block 32 4\n"
                          "layernorm 32\n"
                          "last_token_classifier 32 2\n";

/* xorshift: the data's own generator, the same on every rank */
static unsigned draw(unsigned long long *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (unsigned)(*s >> 11);
}

/* Batch `index`: tokens (BATCH, T) and whether each holds "1 2" */
static void batch_of(long index, int *tokens, int *labels)
{
    unsigned long long s = 0x9e3779b97f4a7c15ull ^ (unsigned long long)(index + 1) * 2654435761ull;
    for (int b = 0; b < BATCH; b++) {
        int *x = tokens + b * T;
        labels[b] = draw(&s) % 2;
        for (int t = 0; t < T; t++)
            x[t] = (int)(draw(&s) % VOCAB);
        for (int t = 1; t < T; t++)
            if (x[t - 1] == 1 && x[t] == 2)
                x[t] = 3;
        if (labels[b]) {
            int at = (int)(draw(&s) % (T - 1));
            x[at] = 1, x[at + 1] = 2;
        }
    }
}

static pt_pipeline *create(int stages)
{
    pt_model_config model;
    pt_optim_config optim = pt_optim_config_default(PT_OPTIM_ADAMW);
    optim.lr = 1e-3f;
    pt_pipeline_config pipe = pt_pipeline_config_default();
    int balance[] = {2, 2, 2, 1};
    pipe.stages = stages;
    pipe.microbatches = MICRO;
    pipe.micro_batch_size = MBS;
    pipe.balance = stages == 4 ? balance : NULL;
    pipe.n_balance = stages == 4 ? 4 : 0;
    pipe.blas_threads = 1; /* one thread per worker: the sums run in one order */
    pipe.transport = stages == 1 ? PT_PIPELINE_THREADS : PT_PIPELINE_AUTO;
    pt_pipeline *p = NULL;
    if (pt_model_config_spec(spec, &model) != PT_OK ||
        pt_pipeline_create(&model, &optim, &pipe, &p) != PT_OK)
        fprintf(stderr, "gpt2_classify: %d stages: %s\n", stages, pt_last_error());
    return p;
}

static int train(pt_pipeline *p, long steps, float *losses)
{
    int tokens[BATCH * T], labels[BATCH];
    for (long s = 0; s < steps; s++) {
        batch_of(s, tokens, labels);
        pt_microbatch mb = {.batch = BATCH, .tokens = tokens, .targets = labels};
        if (pt_pipeline_train_step(p, &mb, s, 1e-3f, &losses[s]) != PT_OK)
            return fprintf(stderr, "gpt2_classify: %s\n", pt_last_error()), 1;
    }
    return 0;
}

/* Share of 8 fresh batches classified right, by pipelined inference */
static double accuracy(pt_pipeline *p)
{
    int tokens[BATCH * T], labels[BATCH], right = 0;
    float probs[BATCH * 2];
    for (long k = 0; k < 8; k++) {
        batch_of(1000000 + k, tokens, labels);
        pt_microbatch mb = {.batch = BATCH, .tokens = tokens};
        if (pt_pipeline_predict(p, &mb, probs, NULL) != PT_OK)
            return fprintf(stderr, "gpt2_classify: %s\n", pt_last_error()), -1.0;
        for (int b = 0; b < BATCH; b++)
            right += (probs[2 * b + 1] > probs[2 * b]) == labels[b];
    }
    return 100.0 * right / (8 * BATCH);
}

int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 1000;
    if (steps < SAME_STEPS)
        return fprintf(stderr, "usage: gpt2_classify [STEPS >= %d]\n", SAME_STEPS), 2;
    float *four = calloc((size_t)steps, sizeof(float)), one[SAME_STEPS];
    pt_pipeline *p4 = create(4), *p1 = p4 ? create(1) : NULL;
    int rc = !four || !p1 || !p4 || train(p4, steps, four) || train(p1, SAME_STEPS, one);
    double acc = rc ? -1.0 : accuracy(p4);
    int same = !rc && !memcmp(one, four, sizeof one), falls = !rc && four[steps - 1] < four[0];
    if (p4 && pt_pipeline_is_main(p4)) {
        for (long s = 0; !rc && s < steps; s += steps / 10)
            printf("step %4ld  loss %.6f\n", s + 1, four[s]);
        printf("%s: first %d steps: four stages %s one worker bit for bit; the loss %s; "
               "pattern found in %.1f%% of fresh sequences\n",
               p4 ? pt_pipeline_transport_name(p4) : "?", SAME_STEPS,
               same ? "equal" : "DIFFER from", falls ? "falls" : "DOES NOT fall", acc);
    }
    pt_pipeline_destroy(p1), pt_pipeline_destroy(p4);
    free(four);
    return !rc && same && falls && acc >= 90.0 ? 0 : 1;
}
