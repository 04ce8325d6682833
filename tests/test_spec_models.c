/* test_spec_models: models from a layer list (src/model/spec.c).
 *   - bad specs are refused with the layer's name and position: an unknown
 *     layer, widths that do not chain, a loss that is not last, a missing
 *     argument, an embedding after the first layer, a balance that does not
 *     sum to the layer count;
 *   - parameters are named as nn.Sequential names them (groups "g.j"),
 *     a group and a loss without weights count as one layer;
 *   - an MSE regression MLP, a GPT-2-shaped token model, a conv net with
 *     residual blocks, a Llama-style transformer and GPT-2 with a
 *     last-token classification head, built from specs, train on every
 *     synchronous schedule at P = 2 and 4 (interleaved,
 *     loopedbfs and zbv with v = 2) to the same losses and parameters as one
 *     worker, bit for bit, with one BLAS thread per worker;
 *   - a spec saved and loaded through the public checkpoint API comes back
 *     with its weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipetrain.h"

#include "check.h"
#include "spec_run.h"

/* create fails and the message holds each of the words */
static void refused(const char *spec, const char *w1, const char *w2)
{
    pt_model_config c;
    pt_model *m = NULL;
    int rc = pt_model_config_spec(spec, &c);
    if (rc == PT_OK)
        rc = pt_model_describe(&c, &m);
    pt_model_destroy(m);
    const char *e = pt_last_error();
    CHECK(rc == PT_EINVAL && strstr(e, w1) && strstr(e, w2), "'%s' gave %d: %s", spec, rc, e);
}

static void bad_specs(void)
{
    refused("linear 4 8; lineer; linear 8 2; mse", "layer 2", "lineer");
    refused("linear 4 8; relu; linear 9 2; mse", "layer 3 (linear)", "in is 9");
    refused("input 5; linear 4 8; mse", "layer 1 (linear)", "(5)");
    refused("linear 4 8; mse; relu", "layer 2 (mse)", "last");
    refused("linear 4 8; relu", "layer 2 (relu)", "must be a loss");
    refused("linear 4; mse", "layer 1 (linear)", "missing argument out");
    refused("linear 4 8 bogus=2; mse", "layer 1 (linear)", "bogus");
    refused("linear 4 8; embedding 10 8 4; mse", "layer 2 (embedding)", "first");
    refused("embedding 10 8 4; gpt2_block 8 3; cross_entropy", "layer 2 (gpt2_block)", "heads 3");
    refused("linear 4 8; (relu; linear 8 2; mse", "group", "')'");
    refused("input 3 8 8; conv2d 1 4 3; flatten; mse", "layer 1 (conv2d)", "reads 1 channels");
    refused("linear 4 8; conv2d 8 4 3; flatten; mse", "layer 2 (conv2d)", "reads an image");
    refused("input 2 4 4; conv2d 2 4 5; flatten; mse", "layer 1 (conv2d)", "kernel 5");
    refused("input 2 4 4; groupnorm 3 2; flatten; mse", "layer 1 (groupnorm)", "3 groups");
    refused("input 2 4 4; residual 2 6 groups=4; flatten; mse", "layer 1 (residual)", "4 groups");
    refused("input 2 4 4; maxpool 2; linear 8 3; mse", "layer 2 (linear)", "(2, 2, 2)");
    refused("tok_embedding 9 8 4; llama_block 8 4 kv_heads=3; rmsnorm 8; "
            "last_token_classifier 8 2",
            "layer 2 (llama_block)", "kv_heads 3");
    refused("tok_embedding 9 8 4; llama_block 8 8; last_token_classifier 8 2",
            "layer 2 (llama_block)", "even head size");
    refused("tok_embedding 9 8 4; last_token_classifier 8 2; rmsnorm 8", "layer 2", "last");
    refused("linear 4 8; last_token_classifier 8 2", "layer 2 (last_token_classifier)", "sequence");
}

static int names_and_layers(void)
{
    pt_model_config c;
    pt_model *m;
    REQUIRE(pt_model_config_spec("input 4\n(linear 4 8; relu)  # one module\n"
                                 "linear 8 3 bias=0; cross_entropy",
                                 &c) == PT_OK,
            "%s", pt_last_error());
    REQUIRE(pt_model_create(&c, &m) == PT_OK, "%s", pt_last_error());
    CHECK(pt_model_n_blocks(m) == 4 && pt_model_n_layers(m) == 2, "%d blocks, %d layers",
          pt_model_n_blocks(m), pt_model_n_layers(m));
    const char *want[] = {"0.0.weight", "0.0.bias", "1.weight"};
    CHECK(pt_model_n_params(m) == 3, "%d parameters", pt_model_n_params(m));
    for (int i = 0; i < 3 && i < pt_model_n_params(m); i++)
        CHECK(!strcmp(pt_model_param(m, i)->name, want[i]), "parameter %d is %s, not %s", i,
              pt_model_param(m, i)->name, want[i]);
    int f, l;
    CHECK(pt_model_layer_blocks(m, 1, &f, &l) == PT_OK && f == 2 && l == 3,
          "layer 1 is blocks %d..%d, not 2..3 (the loss joins it)", f, l);
    pt_model_io io = pt_model_get_io(m);
    CHECK(io.inputs == 4 && io.labels == 1 && io.classes == 3 && !io.values && !io.tokens,
          "io: inputs %d labels %d classes %d", io.inputs, io.labels, io.classes);
    int blocks[2];
    CHECK(pt_model_balance_blocks(m, (int[]){1, 1}, 2, blocks) == PT_OK && blocks[0] == 2 &&
              blocks[1] == 2,
          "balance 1,1 in layers is %d,%d blocks", blocks[0], blocks[1]);
    CHECK(pt_model_balance_blocks(m, (int[]){1, 2}, 2, blocks) == PT_EINVAL &&
              strstr(pt_last_error(), "sums to 3 layers") && strstr(pt_last_error(), "2 layers"),
          "balance 1,2: %s", pt_last_error());
    pt_model_destroy(m);
    return 0;
}

static int matches_sequential(const char *spec, int want_runs)
{
    pt_model_config c;
    pt_model *m;
    REQUIRE(pt_model_config_spec(spec, &c) == PT_OK && pt_model_describe(&c, &m) == PT_OK, "%s",
            pt_last_error());
    int n = pt_model_n_params(m);
    float **ref = spec_param_buffers(m), **got = spec_param_buffers(m);
    float ref_loss[SPEC_STEPS * SPEC_M], loss[SPEC_STEPS * SPEC_M];
    CHECK(spec_run(&c, "gpipe", 1, 1, PT_PIPELINE_THREADS, ref_loss, ref, NULL) == 0,
          "%s: one worker", spec);
    CHECK(ref_loss[(SPEC_STEPS - 1) * SPEC_M] < ref_loss[0],
          "%s: the loss does not fall (%g -> %g)", spec, ref_loss[0],
          ref_loss[(SPEC_STEPS - 1) * SPEC_M]);
    int ran = 0;
    for (int si = 0; si < SPEC_N_SCHEDULES; si++)
        for (int P = 2; P <= 4; P += 2) {
            int v = spec_virtual(spec_schedules[si]);
            if (P * v > pt_model_n_layers(m))
                continue;
            if (spec_run(&c, spec_schedules[si], P, v, PT_PIPELINE_THREADS, loss, got, NULL)) {
                CHECK(0, "%s: %s P=%d did not run", spec, spec_schedules[si], P);
                continue;
            }
            ran++;
            CHECK(!memcmp(loss, ref_loss, sizeof loss), "%s: %s P=%d: losses differ", spec,
                  spec_schedules[si], P);
            for (int i = 0; i < n; i++)
                CHECK(!memcmp(got[i], ref[i], sizeof(float) * pt_model_param(m, i)->numel),
                      "%s: %s P=%d: %s differs", spec, spec_schedules[si], P,
                      pt_model_param(m, i)->name);
        }
    printf("%s: %d pipelines matched one worker bit for bit\n", spec, ran);
    CHECK(ran >= want_runs, "only %d pipelines ran", ran);
    spec_param_buffers_free(ref, n), spec_param_buffers_free(got, n);
    pt_model_destroy(m);
    return 0;
}

static int save_and_load(void)
{
    pt_model_config c;
    pt_model *a, *b;
    char dir[] = "/tmp/pt_spec_ckptXXXXXX", path[64];
    REQUIRE(mkdtemp(dir) != NULL, "%s", pt_last_error());
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    REQUIRE(pt_model_config_spec("linear 3 5; tanh; linear 5 2; mse", &c) == PT_OK, "%s",
            pt_last_error());
    REQUIRE(pt_model_create(&c, &a) == PT_OK, "%s", pt_last_error());
    pt_model_config other = c;
    other.seed = 99; /* other weights, the same spec */
    REQUIRE(pt_model_create(&other, &b) == PT_OK, "%s", pt_last_error());
    CHECK(pt_model_save(a, NULL, 0, path) == PT_OK, "save: %s", pt_last_error());
    CHECK(pt_model_load(b, NULL, NULL, path) == PT_OK, "load: %s", pt_last_error());
    for (int i = 0; i < pt_model_n_params(a); i++)
        CHECK(!memcmp(pt_model_param(a, i)->data, pt_model_param(b, i)->data,
                      sizeof(float) * pt_model_param(a, i)->numel),
              "%s differs after the load", pt_model_param(a, i)->name);
    pt_model_config read;
    CHECK(pt_model_read_config(path, &read) == PT_OK && read.kind == PT_MODEL_SPEC &&
              !strcmp(read.spec, "linear 3 5; tanh; linear 5 2; mse"),
          "the file's spec: '%s' (%s)", read.spec, pt_last_error());
    pt_model_config wider;
    pt_model *w;
    REQUIRE(pt_model_config_spec("linear 3 6; tanh; linear 6 2; mse", &wider) == PT_OK &&
                pt_model_create(&wider, &w) == PT_OK,
            "%s", pt_last_error());
    CHECK(pt_model_load(w, NULL, NULL, path) != PT_OK && strstr(pt_last_error(), "spec"),
          "another spec loaded: %s", pt_last_error());
    pt_model_destroy(w);
    unlink(path);
    rmdir(dir);
    pt_model_destroy(a);
    pt_model_destroy(b);
    return 0;
}

int main(void)
{
    bad_specs();
    names_and_layers();
    save_and_load();
    /* 16 runs: 8 schedules at P = 2 and 4, v = 2 where it applies; 13 when
     * the model has fewer than 8 layers */
    matches_sequential(spec_mse_mlp, 16);
    matches_sequential("embedding 17 16 6; gpt2_block 16 2; gpt2_block 16 4 inner=24; "
                       "layernorm 16; linear 16 17 bias=0; cross_entropy",
                       13);
    matches_sequential(spec_conv_net, 16);
    matches_sequential(spec_llama, 16);
    matches_sequential(spec_gpt2_classify, 16);
    printf("%s\n", failures ? "FAILED" : "spec models ok");
    return failures != 0;
}
