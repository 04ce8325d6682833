/* test_user_layer: a layer pipetrain has never seen, written against
 * include/pipetrain.h alone (no internal header): y = scale * tanh(x), one
 * learned scale per feature. Registered in a config, named in its spec,
 * trained on two pipeline stages (the user layer on the first, on the
 * second) and on one: the losses and every parameter agree bit for bit,
 * and the loss falls. Its gradients are checked by finite differences
 * through the model (pt_model_step_microbatch), input and weight apart. A
 * bad layer type (no backward) is refused naming the layer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"

#include "check.h"

enum { N = 6 };

// in (B,N) -> out (B,N) = scale * tanh(in)
static void scaled_tanh_forward(const pt_layer_call *c)
{
    for (int b = 0; b < c->batch; b++)
        for (int i = 0; i < N; i++)
            c->out[b * N + i] = c->params[0][i] * tanhf(c->in[b * N + i]);
}

// dout -> din = dout * scale * (1 - tanh^2)
static void scaled_tanh_backward_input(const pt_layer_call *c)
{
    for (int b = 0; c->din && b < c->batch; b++)
        for (int i = 0; i < N; i++) {
            float t = tanhf(c->in[b * N + i]);
            c->din[b * N + i] = c->dout[b * N + i] * c->params[0][i] * (1.0f - t * t);
        }
}

// dscale += sum over the batch of dout * tanh(in)
static void scaled_tanh_backward_weight(const pt_layer_call *c)
{
    for (int b = 0; b < c->batch; b++)
        for (int i = 0; i < N; i++)
            c->grads[0][i] += c->dout[b * N + i] * tanhf(c->in[b * N + i]);
}

static const pt_layer_type scaled_tanh = {
    .name = "scaled_tanh",
    .in_floats = N,
    .n_params = 1,
    .params = {{.name = "scale", .ndim = 1, .shape = {N}, .value = 0.5f}},
    .forward_flops = 12 * N,
    .backward_input_flops = 14 * N,
    .backward_weight_flops = 12 * N,
    .forward = scaled_tanh_forward,
    .backward_input = scaled_tanh_backward_input,
    .backward_weight = scaled_tanh_backward_weight,
};

static const char *spec = "linear 4 6; scaled_tanh; linear 6 3; scaled_tanh_3; mse";

/* a second type: no parameters, its width (3) whatever enters it */
static void tanh3_forward(const pt_layer_call *c)
{
    for (int i = 0; i < c->batch * 3; i++)
        c->out[i] = tanhf(c->in[i]);
}
static void tanh3_backward_input(const pt_layer_call *c)
{
    for (int i = 0; c->din && i < c->batch * 3; i++) {
        float t = tanhf(c->in[i]);
        c->din[i] = c->dout[i] * (1.0f - t * t);
    }
}
static void no_weights(const pt_layer_call *c) { (void)c; }
static const pt_layer_type tanh3 = {.name = "scaled_tanh_3",
                                    .forward = tanh3_forward,
                                    .backward_input = tanh3_backward_input,
                                    .backward_weight = no_weights};

static int config(pt_model_config *c)
{
    REQUIRE(pt_model_config_spec(spec, c) == PT_OK &&
                pt_model_config_add_layer_type(c, &scaled_tanh) == PT_OK &&
                pt_model_config_add_layer_type(c, &tanh3) == PT_OK,
            "%s", pt_last_error());
    return 0;
}

enum { M = 2, MBS = 3, STEPS = 8 };

static int train(int stages, float *losses, float *params)
{
    pt_model_config c;
    if (config(&c))
        return 1;
    pt_pipeline_config pc = pt_pipeline_config_default();
    int balance[] = {2, 2}; /* linear, scaled_tanh | linear, scaled_tanh_3 + mse */
    pc.stages = stages, pc.microbatches = M, pc.micro_batch_size = MBS, pc.blas_threads = 1;
    pc.balance = stages == 2 ? balance : NULL, pc.n_balance = stages == 2 ? 2 : 0;
    pt_optim_config o = pt_optim_config_default(PT_OPTIM_ADAMW);
    o.lr = 0.02f;
    pt_pipeline *p;
    REQUIRE(pt_pipeline_create(&c, &o, &pc, &p) == PT_OK, "%s", pt_last_error());
    float x[M * MBS * 4], y[M * MBS * 3];
    for (int i = 0; i < M * MBS * 4; i++)
        x[i] = sinf(0.7f * (float)i);
    for (int i = 0; i < M * MBS * 3; i++)
        y[i] = 0.5f * cosf(0.3f * (float)i);
    pt_microbatch b = {.batch = M * MBS, .inputs = x, .target_values = y};
    for (int s = 0; s < STEPS; s++)
        REQUIRE(pt_pipeline_train_step(p, &b, s, o.lr, &losses[s]) == PT_OK, "%s", pt_last_error());
    REQUIRE(pt_pipeline_read_param(p, "1.scale", -1, params) == PT_OK, "%s", pt_last_error());
    pt_pipeline_destroy(p);
    return 0;
}

/* d loss / d (one scale) and d loss / d (one input) by central differences */
static int finite_differences(void)
{
    pt_model_config c;
    pt_model *m;
    pt_activations *a;
    if (config(&c))
        return 1;
    REQUIRE(pt_model_create(&c, &m) == PT_OK && pt_activations_create(m, 1, 4, 2, &a) == PT_OK,
            "%s", pt_last_error());
    float in[2 * 6], din[2 * 6], y[2 * 3];
    for (int i = 0; i < 12; i++)
        in[i] = 0.3f * sinf((float)i + 1.0f);
    for (int i = 0; i < 6; i++)
        y[i] = 0.2f * (float)i - 0.4f;
    pt_microbatch mb = {.batch = 2, .target_values = y};
    const pt_param *scale = pt_model_find_param(m, "1.scale");
    REQUIRE(scale && scale->block == 1, "no parameter 1.scale in block 1");
    pt_model_zero_grads(m);
    float loss;
    REQUIRE(pt_model_forward(m, 1, 4, &mb, in, a, &loss) == PT_OK &&
                pt_model_backward_input(m, 1, 4, &mb, in, a, NULL, din, 1.0f) == PT_OK &&
                pt_model_backward_weight(m, 1, 4, &mb, in, a) == PT_OK,
            "%s", pt_last_error());
    const float h = 1e-2f;
    for (int k = 0; k < 2; k++) {
        float *x = k ? &scale->data[2] : &in[5];
        float analytic = k ? scale->grad[2] : din[5], keep = *x, up, down;
        *x = keep + h;
        pt_model_forward(m, 1, 4, &mb, in, a, &up);
        *x = keep - h;
        pt_model_forward(m, 1, 4, &mb, in, a, &down);
        *x = keep;
        double numeric = ((double)up - down) / (2.0 * h);
        CHECK(fabs(numeric - analytic) < 1e-3 * fmax(1.0, fabs(numeric)),
              "%s gradient %g, finite differences %g", k ? "weight" : "input", analytic, numeric);
    }
    pt_activations_destroy(a);
    pt_model_destroy(m);
    return 0;
}

int main(void)
{
    float one[STEPS], two[STEPS], p1[N], p2[N];
    if (train(1, one, p1) || train(2, two, p2) || finite_differences())
        return 1;
    CHECK(!memcmp(one, two, sizeof one), "two stages' losses differ from one stage's");
    CHECK(!memcmp(p1, p2, sizeof p1), "two stages' scales differ from one stage's");
    CHECK(two[STEPS - 1] < two[0], "the loss does not fall: %g -> %g", two[0], two[STEPS - 1]);
    CHECK(p1[0] != 0.5f, "the scale was not trained");

    pt_model_config c;
    pt_model *m = NULL;
    pt_layer_type broken = scaled_tanh;
    broken.backward_weight = NULL;
    broken.name = "broken";
    int rc = pt_model_config_spec("linear 4 6; broken; linear 6 3; mse", &c);
    if (rc == PT_OK)
        rc = pt_model_config_add_layer_type(&c, &broken);
    if (rc == PT_OK)
        rc = pt_model_describe(&c, &m);
    CHECK(rc == PT_EINVAL && strstr(pt_last_error(), "layer 2 (broken)"),
          "a layer without backward_weight: %d %s", rc, pt_last_error());
    pt_model_destroy(m);
    CHECK(pt_model_config_add_layer_type(&c, &(pt_layer_type){.name = "relu"}) == PT_EINVAL,
          "a type named as a built-in layer was added");
    printf("losses %.5f -> %.5f; %s\n", two[0], two[STEPS - 1],
           failures ? "FAILED" : "user-defined layer ok");
    return failures != 0;
}
