/* spec_run.h: training a model from a spec a few steps on a pipeline and
 * reading back its losses and parameters, for the tests that compare
 * pipelines with one worker (test_spec_models.c on threads,
 * test_mpi_spec_models.c over MPI ranks). Header-only: each test is one
 * program. The models are tiny, and each has at least 8 layers so that
 * P = 4 with v = 2 splits it. */
#ifndef PT_TESTS_SPEC_RUN_H
#define PT_TESTS_SPEC_RUN_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"

enum { SPEC_M = 4, SPEC_MBS = 2, SPEC_STEPS = 3, SPEC_N_SCHEDULES = 8 };

/* the MSE regression MLP */
static const char *const spec_mse_mlp = "linear 12 16; relu; linear 16 16; tanh; linear 16 16; "
                                        "silu; linear 16 16; gelu; linear 16 6 bias=0; mse";
/* a conv net: stem, residual blocks (GroupNorm and LayerNorm), pools */
static const char *const spec_conv_net =
    "input 1 8 8; conv2d 1 4 3 padding=1; groupnorm 2 4; relu; residual 4 4 groups=2; "
    "residual 4 8 stride=2 groups=0; maxpool 2; global_avgpool; linear 8 3; cross_entropy";
/* Llama: token table, decoder layers (GQA, rotary, SwiGLU), final RMSNorm,
 * output projection per token */
static const char *const spec_llama =
    "tok_embedding 17 8 6; llama_block 8 2 kv_heads=1 inner=16; llama_block 8 2; "
    "llama_block 8 2 kv_heads=1; llama_block 8 2; llama_block 8 2 kv_heads=1; rmsnorm 8; "
    "linear 8 17 bias=0; cross_entropy";
/* GPT-2 for sequence classification: a score head on the last token */
static const char *const spec_gpt2_classify =
    "embedding 17 16 6; gpt2_block 16 2; gpt2_block 16 2; gpt2_block 16 2; gpt2_block 16 2; "
    "gpt2_block 16 2; layernorm 16; last_token_classifier 16 3";

/* every synchronous schedule */
static const char *const spec_schedules[SPEC_N_SCHEDULES] = {
    "gpipe", "1f1b", "interleaved", "loopedbfs", "zbh1", "zbh2", "zbv", "zb2p"};

/* chunks per worker the schedule runs with here */
static inline int spec_virtual(const char *sched)
{
    return !strcmp(sched, "interleaved") || !strcmp(sched, "loopedbfs") || !strcmp(sched, "zbv")
               ? 2
               : 1;
}

static inline void spec_fill_batch(const pt_model_io *io, int *tokens, float *x, int *labels,
                                   float *y)
{
    int n = SPEC_M * SPEC_MBS;
    for (int i = 0; i < n * io->tokens; i++)
        tokens[i] = (i * 7 + 3) % io->vocab;
    for (int i = 0; i < n * io->inputs; i++)
        x[i] = sinf(0.37f * (float)i);
    for (int i = 0; i < n * io->labels; i++)
        labels[i] = (i * 5 + 1) % io->classes;
    for (int i = 0; i < n * io->values; i++)
        y[i] = cosf(0.11f * (float)i);
}

/* Room for every parameter of m, one buffer each; and freeing it */
static inline float **spec_param_buffers(const pt_model *m)
{
    int n = pt_model_n_params(m);
    float **b = calloc((size_t)n, sizeof *b);
    for (int i = 0; b && i < n; i++)
        b[i] = malloc(sizeof(float) * pt_model_param(m, i)->numel);
    return b;
}

static inline void spec_param_buffers_free(float **b, int n)
{
    for (int i = 0; b && i < n; i++)
        free(b[i]);
    free(b);
}

/* Trains spec c SPEC_STEPS steps on P workers with v chunks each (the
 * layers dealt evenly, the extra ones to the first chunks) over the
 * transport; losses (SPEC_STEPS x SPEC_M) and the parameters, in the
 * model's order, into params. held NULL: every parameter must be in this
 * process; else held[i] says whether parameter i was. Returns 0 or 1. */
static inline int spec_run(const pt_model_config *c, const char *sched, int P, int v,
                           pt_pipeline_transport transport, float *losses, float **params,
                           int *held)
{
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = P, pc.microbatches = SPEC_M, pc.micro_batch_size = SPEC_MBS, pc.schedule = sched;
    pc.virtual_stages = v, pc.blas_threads = 1, pc.record_trace = 0, pc.transport = transport;
    pt_optim_config o = pt_optim_config_default(PT_OPTIM_ADAMW);
    o.lr = 1e-2f;
    pt_pipeline *p;
    pt_model *desc;
    if (pt_model_describe(c, &desc) != PT_OK)
        return printf("describe: %s\n", pt_last_error()), 1;
    int n_layers = pt_model_n_layers(desc), K = P * v, n_params = pt_model_n_params(desc);
    pt_model_io io = pt_model_get_io(desc);
    pt_model_destroy(desc);
    int balance[64];
    for (int k = 0; k < K && k < 64; k++)
        balance[k] = n_layers / K + (k < n_layers % K);
    pc.balance = P > 1 ? balance : NULL, pc.n_balance = P > 1 ? K : 0;
    if (pt_pipeline_create(c, &o, &pc, &p) != PT_OK)
        return printf("%s P=%d: %s\n", sched, P, pt_last_error()), 1;
    size_t n = SPEC_M * SPEC_MBS;
    int *tokens = calloc(n * io.tokens + 1, sizeof(int));
    int *labels = calloc(n * io.labels + 1, sizeof(int));
    float *x = calloc(n * io.inputs + 1, sizeof(float));
    float *y = calloc(n * io.values + 1, sizeof(float));
    spec_fill_batch(&io, tokens, x, labels, y);
    pt_microbatch b = {.batch = (int)n,
                       .tokens = io.tokens ? tokens : NULL,
                       .inputs = io.tokens ? NULL : x,
                       .targets = labels,
                       .target_values = y};
    int rc = 0;
    for (int s = 0; !rc && s < SPEC_STEPS; s++) {
        float mean;
        rc = pt_pipeline_train_step(p, &b, s, o.lr, &mean) != PT_OK;
        if (!rc)
            memcpy(losses + s * SPEC_M, pt_pipeline_losses(p), sizeof(float) * SPEC_M);
    }
    const pt_model *d = pt_pipeline_description(p);
    for (int i = 0; !rc && i < n_params; i++) {
        int got = pt_pipeline_read_param(p, pt_model_param(d, i)->name, -1, params[i]) == PT_OK;
        if (held)
            held[i] = got;
        rc = !held && !got;
    }
    if (rc)
        printf("%s P=%d: %s\n", sched, P, pt_last_error());
    free(tokens), free(labels), free(x), free(y);
    pt_pipeline_destroy(p);
    return rc;
}

#endif
