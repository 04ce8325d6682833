/* generate.c: pt_generate(), sampling text from a gpt one token at a time.
 *
 * Each new token runs the model forward on the last seq_len tokens (no key /
 * value cache: the model is small and this keeps the blocks as they are)
 * across a pipeline's stages (one stage for one worker), and
 * samples from the probabilities at the last position, sharpened or
 * flattened by the temperature. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"
#include "tensor/rng.h"

static int sample(const float *probs, int V, float temperature, pt_rng *rng)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (probs[v] > probs[best])
            best = v;
    if (temperature <= 0.0f)
        return best;
    /* p^(1/temperature), renormalised: softmax(logits / temperature) */
    double total = 0.0;
    for (int v = 0; v < V; v++)
        total += pow((double)probs[v], 1.0 / temperature);
    double u = pt_rng_uniform(rng) * total, acc = 0.0;
    for (int v = 0; v < V; v++) {
        acc += pow((double)probs[v], 1.0 / temperature);
        if (u < acc)
            return v;
    }
    return best;
}

int pt_generate(pt_pipeline *pipe, const int *prompt, int n_prompt, int n_new, float temperature,
                uint64_t seed, int *out, void (*on_token)(int token, void *user), void *user)
{
    const pt_model_config *c = pt_pipeline_model_config(pipe);
    if (c->kind != PT_MODEL_GPT)
        return pt_fail(PT_EINVAL, "only a gpt generates text");
    if (n_prompt < 1 || n_new < 0)
        return pt_fail(PT_EINVAL, "generation needs a prompt of at least one token");
    int T = c->seq_len, V = c->vocab;
    int *context = malloc(sizeof(int) * (size_t)(n_prompt + n_new));
    int *window = calloc((size_t)T, sizeof(int));
    float *probs = malloc(sizeof(float) * (size_t)T * V);
    int rc =
        !context || !window || !probs ? pt_fail(PT_ENOMEM, "cannot allocate the context") : PT_OK;
    pt_rng rng;
    pt_rng_seed(&rng, seed);
    if (rc == PT_OK)
        memcpy(context, prompt, sizeof(int) * (size_t)n_prompt);
    int len = n_prompt;
    for (int i = 0; rc == PT_OK && i < n_new; i++) {
        int start = len > T ? len - T : 0, n = len - start;
        memset(window, 0, sizeof(int) * (size_t)T); /* positions past n are masked out */
        memcpy(window, context + start, sizeof(int) * (size_t)n);
        pt_microbatch mb = {.batch = 1, .tokens = window};
        if ((rc = pt_pipeline_forward_probs(pipe, &mb, probs)) != PT_OK)
            break;
        const float *last = probs + (size_t)(n - 1) * V;
        for (int v = 0; v < V; v++)
            if (!isfinite(last[v])) {
                rc = pt_fail(PT_EFORMAT,
                             "the model's probabilities are not finite (token %d: %g): its "
                             "parameters hold values that are not finite",
                             v, last[v]);
                break;
            }
        if (rc != PT_OK)
            break;
        int token = sample(last, V, temperature, &rng);
        context[len++] = token;
        out[i] = token;
        if (on_token)
            on_token(token, user);
    }
    free(probs);
    free(window);
    free(context);
    return rc;
}
