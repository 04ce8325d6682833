/* trainer.c: pt_train(), the training loop the train command runs.
 *
 * One step: draw a batch of B samples, cut it into M micro-batches of B/M,
 * run forward and backward of each with loss scale 1/M (gradients add up to
 * those of the whole batch's mean loss), sum the tied embedding / LM head
 * gradients, clip by global norm, and step the optimizer at the scheduled
 * learning rate. Validation runs every eval_every steps and at the end;
 * checkpoints are written atomically every save_every steps and at the end;
 * a resumed run continues the step count, the optimizer moments and the data
 * stream exactly where the checkpoint left them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/checkpoint.h"
#include "io/digits.h"
#include "io/metrics.h"
#include "io/text_data.h"
#include "runtime/optimizer.h"
#include "tensor/error.h"

pt_train_config pt_train_config_default(void)
{
    return (pt_train_config){.model = pt_model_config_gpt(),
                             .optim = pt_optim_config_default(PT_OPTIM_ADAMW),
                             .batch = 16,
                             .microbatches = 1,
                             .steps = 200,
                             .seed = 1,
                             .val_fraction = PT_VAL_FRACTION_DEFAULT,
                             .eval_batches = 8};
}

/* Where batches come from: token streams for gpt, the digits for mlp. */
typedef struct {
    int gpt;
    pt_token_data tokens;
    pt_batch_sampler sampler;
    pt_digits digits;
    pt_digits_sampler digit_sampler;
} data_source;

typedef struct {
    const pt_train_config *cfg;
    pt_model *m;
    pt_optimizer *opt;
    pt_activations *acts;
    data_source data;
    pt_metrics_log *metrics;
    int mbs;             /* micro-batch size */
    int *tokens, *targets; /* one batch */
    float *inputs;
    pt_train_state state;
} trainer;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int single_bin_file(const pt_train_config *c)
{
    size_t n = c->n_data == 1 ? strlen(c->data[0]) : 0;
    return n > 4 && !strcmp(c->data[0] + n - 4, ".bin");
}

static int open_data(trainer *t)
{
    const pt_train_config *c = t->cfg;
    data_source *d = &t->data;
    d->gpt = c->model.kind == PT_MODEL_GPT;
    if (c->n_data < 1)
        return pt_fail(PT_EINVAL, "no training data given");
    pt_data_kind kind = c->data_kind;
    if (kind == PT_DATA_AUTO)
        kind = !d->gpt ? PT_DATA_DIGITS : single_bin_file(c) ? PT_DATA_TOKENS : PT_DATA_TEXT;
    if (d->gpt == (kind == PT_DATA_DIGITS))
        return pt_fail(PT_EINVAL, "%s data does not fit a%s model",
                       kind == PT_DATA_DIGITS ? "digits" : "token",
                       d->gpt ? " gpt" : "n mlp");
    int rc;
    if (kind == PT_DATA_DIGITS) {
        rc = pt_digits_load(c->data[0], PT_DIGITS_TEST_FRACTION_DEFAULT, c->seed, &d->digits);
        if (rc == PT_OK && (c->model.widths[0] != PT_DIGITS_FEATURES ||
                            c->model.widths[c->model.n_widths - 1] != PT_DIGITS_CLASSES))
            rc = pt_fail(PT_EINVAL, "the digits have %d features and %d classes: the mlp's "
                         "widths must start with %d and end with %d",
                         PT_DIGITS_FEATURES, PT_DIGITS_CLASSES, PT_DIGITS_FEATURES,
                         PT_DIGITS_CLASSES);
        if (rc == PT_OK)
            rc = pt_digits_sampler_init(&d->digit_sampler, &d->digits.train, c->seed);
        return rc;
    }
    if (kind == PT_DATA_TEXT) {
        if (c->model.vocab != 256)
            return pt_fail(PT_EINVAL, "text is read as bytes: the gpt's vocab must be 256 "
                           "(got %d)", c->model.vocab);
        rc = pt_text_data_load(c->data, c->n_data, c->val_fraction, &d->tokens);
    } else {
        rc = pt_token_data_load_files(c->data[0], c->val_data, c->model.vocab, c->val_fraction,
                                      &d->tokens);
    }
    if (rc == PT_OK)
        rc = pt_batch_sampler_init(&d->sampler, d->tokens.train, d->tokens.n_train, c->batch,
                                   c->model.seq_len, c->seed);
    if (rc == PT_OK && pt_eval_batch_count(d->tokens.n_val, t->mbs, c->model.seq_len) < 1)
        rc = pt_fail(PT_EINVAL, "the validation split holds %zu tokens, fewer than one "
                     "micro-batch of %d x %d", d->tokens.n_val, t->mbs, c->model.seq_len);
    return rc;
}

static void close_data(data_source *d)
{
    pt_token_data_free(&d->tokens);
    if (!d->gpt) {
        pt_digits_sampler_free(&d->digit_sampler);
        pt_digits_free(&d->digits);
    }
}

static void next_batch(trainer *t)
{
    if (t->data.gpt)
        pt_batch_next(&t->data.sampler, t->tokens, t->targets);
    else
        pt_digits_batch_next(&t->data.digit_sampler, t->cfg->batch, t->inputs, t->targets);
}

/* Micro-batch k of the batch held in t. */
static pt_microbatch micro_batch(const trainer *t, int k)
{
    const pt_model_config *mc = &t->cfg->model;
    int rows = t->data.gpt ? mc->seq_len : 1;
    size_t off = (size_t)k * t->mbs * rows;
    pt_microbatch mb = {.batch = t->mbs, .targets = t->targets + off};
    if (t->data.gpt)
        mb.tokens = t->tokens + off;
    else
        mb.inputs = t->inputs + off * mc->widths[0];
    return mb;
}

static int train_step(trainer *t, float lr, float *loss)
{
    int M = t->cfg->microbatches, last = pt_model_n_blocks(t->m) - 1;
    double sum = 0.0;
    pt_model_zero_grads(t->m);
    for (int k = 0; k < M; k++) {
        pt_microbatch mb = micro_batch(t, k);
        float l;
        int rc = pt_model_step_microbatch(t->m, &mb, 1.0f / M, t->acts, &l);
        if (rc != PT_OK)
            return rc;
        sum += l;
    }
    pt_model_sum_tied_grads(t->m);
    const pt_optim_config *oc = pt_optimizer_config(t->opt);
    float clip = pt_optimizer_clip_factor(oc, sqrt(pt_optimizer_grad_sq(t->m, 0, last)));
    pt_optimizer_step(t->opt, t->m, 0, last, t->state.step, lr, clip);
    *loss = (float)(sum / M);
    return PT_OK;
}

/* Mean validation loss (and accuracy for the mlp) over fixed batches. */
static int evaluate(trainer *t, float *val_loss, float *accuracy)
{
    const pt_train_config *c = t->cfg;
    int last = pt_model_n_blocks(t->m) - 1, n = 0, correct = 0, total = 0;
    double sum = 0.0;
    *accuracy = -1.0f;
    if (t->data.gpt) {
        int T = c->model.seq_len;
        size_t avail = pt_eval_batch_count(t->data.tokens.n_val, t->mbs, T);
        size_t count = avail < (size_t)c->eval_batches * c->microbatches
                           ? avail
                           : (size_t)c->eval_batches * c->microbatches;
        for (size_t k = 0; k < count; k++) {
            pt_eval_batch(t->data.tokens.val, t->data.tokens.n_val, t->mbs, T, k, t->tokens,
                          t->targets);
            pt_microbatch mb = {.batch = t->mbs, .tokens = t->tokens, .targets = t->targets};
            float l;
            int rc = pt_model_forward(t->m, 0, last, &mb, NULL, t->acts, &l);
            if (rc != PT_OK)
                return rc;
            sum += l, n++;
        }
    } else {
        const pt_digits_split *test = &t->data.digits.test;
        int classes = c->model.widths[c->model.n_widths - 1], F = c->model.widths[0];
        for (int start = 0; start + t->mbs <= test->n; start += t->mbs) {
            pt_microbatch mb = {.batch = t->mbs, .inputs = test->x + (size_t)start * F,
                                .targets = test->y + start};
            float l;
            int rc = pt_model_forward(t->m, 0, last, &mb, NULL, t->acts, &l);
            if (rc != PT_OK)
                return rc;
            const float *probs = pt_activations_output(t->acts);
            for (int i = 0; i < t->mbs; i++) {
                int best = 0;
                for (int k = 1; k < classes; k++)
                    if (probs[i * classes + k] > probs[i * classes + best])
                        best = k;
                correct += best == mb.targets[i];
                total++;
            }
            sum += l, n++;
        }
        *accuracy = total ? (float)correct / total : 0.0f;
    }
    *val_loss = n ? (float)(sum / n) : NAN;
    return PT_OK;
}

static int save(trainer *t)
{
    if (t->data.gpt)
        t->state.data_rng = t->data.sampler.rng;
    else
        t->state.data_drawn = t->data.digit_sampler.drawn;
    return pt_checkpoint_save(t->cfg->save, t->m, t->opt, &t->state);
}

static int check_config(const pt_train_config *c)
{
    if (c->batch < 1 || c->microbatches < 1)
        return pt_fail(PT_EINVAL, "batch and micro-batches must be >= 1 (got %d and %d)",
                       c->batch, c->microbatches);
    if (c->batch % c->microbatches)
        return pt_fail(PT_EINVAL, "a batch of %d cannot be cut into %d equal micro-batches: "
                       "choose a batch that %d divides", c->batch, c->microbatches,
                       c->microbatches);
    if (c->steps < 0 || c->eval_every < 0 || c->eval_batches < 1 || c->save_every < 0)
        return pt_fail(PT_EINVAL, "steps, eval-every and save-every must be >= 0 and "
                       "eval-batches >= 1");
    return PT_OK;
}

static int setup(trainer *t, const pt_train_config *c)
{
    int rc = check_config(c);
    if (rc != PT_OK)
        return rc;
    t->cfg = c;
    t->mbs = c->batch / c->microbatches;
    const pt_model_config mc = c->model;
    if ((rc = pt_model_create(&mc, &t->m)) != PT_OK)
        return rc;
    if ((rc = pt_optimizer_create(t->m, &c->optim, &t->opt)) != PT_OK)
        return rc;
    if ((rc = open_data(t)) != PT_OK)
        return rc;
    if (c->resume) {
        if ((rc = pt_checkpoint_load(c->resume, t->m, t->opt, &t->state)) != PT_OK)
            return rc;
        if (t->data.gpt) {
            t->data.sampler.rng = t->state.data_rng;
        } else {
            /* the digits sampler's state is the count drawn: replay it */
            float *x = malloc(sizeof(float) * PT_DIGITS_FEATURES);
            int y;
            for (uint64_t i = 0; x && i < t->state.data_drawn; i++)
                pt_digits_batch_next(&t->data.digit_sampler, 1, x, &y);
            free(x);
        }
    }
    int rows = t->data.gpt ? mc.seq_len : 1;
    size_t n = (size_t)c->batch * rows;
    t->tokens = malloc(sizeof(int) * n);
    t->targets = malloc(sizeof(int) * n);
    t->inputs = t->data.gpt ? NULL : malloc(sizeof(float) * n * mc.widths[0]);
    if (!t->tokens || !t->targets || (!t->data.gpt && !t->inputs))
        return pt_fail(PT_ENOMEM, "cannot allocate a batch");
    rc = pt_activations_create(t->m, 0, pt_model_n_blocks(t->m) - 1, t->mbs, &t->acts);
    if (rc == PT_OK && c->metrics)
        rc = pt_metrics_open(c->metrics, c->resume ? t->state.step : -1, &t->metrics);
    return rc;
}

static void teardown(trainer *t)
{
    if (t->metrics)
        pt_metrics_close(t->metrics);
    pt_activations_destroy(t->acts);
    free(t->tokens), free(t->targets), free(t->inputs);
    close_data(&t->data);
    pt_optimizer_destroy(t->opt);
    pt_model_destroy(t->m);
}

static int run(trainer *t, pt_train_result *result)
{
    const pt_train_config *c = t->cfg;
    double samples = (double)c->batch * (t->data.gpt ? c->model.seq_len : 1);
    double started = now();
    long first = t->state.step;
    int rc = PT_OK;
    while (rc == PT_OK && t->state.step < c->steps) {
        pt_train_report r = {.steps = c->steps};
        double t0 = now();
        next_batch(t);
        r.lr = pt_optimizer_lr(&c->optim, t->state.step);
        if ((rc = train_step(t, r.lr, &r.loss)) != PT_OK)
            break;
        t->state.step++;
        r.step = t->state.step;
        r.step_ms = (now() - t0) * 1e3;
        r.tokens_per_s = samples / (r.step_ms / 1e3);
        r.eta_s = (now() - started) / (r.step - first) * (c->steps - r.step);
        if ((c->eval_every && r.step % c->eval_every == 0) || r.step == c->steps) {
            r.has_val = 1;
            if ((rc = evaluate(t, &r.val_loss, &r.val_accuracy)) != PT_OK)
                break;
            result->val_loss = r.val_loss;
            result->val_accuracy = r.val_accuracy;
        }
        if (t->metrics) {
            pt_metrics_row row = {.step = r.step, .loss = r.loss, .lr = r.lr,
                                  .tokens_per_s = r.tokens_per_s, .step_ms = r.step_ms,
                                  .has_val_loss = r.has_val, .val_loss = r.val_loss};
            if ((rc = pt_metrics_write(t->metrics, &row)) != PT_OK)
                break;
        }
        if (c->save && c->save_every && r.step % c->save_every == 0 && r.step < c->steps &&
            (rc = save(t)) != PT_OK)
            break;
        result->loss = r.loss;
        result->tokens_per_s = r.tokens_per_s;
        if (c->on_report)
            c->on_report(&r, c->user);
    }
    result->steps = t->state.step;
    if (rc == PT_OK && c->save)
        rc = save(t);
    return rc;
}

int pt_train(const pt_train_config *cfg, pt_train_result *result)
{
    trainer t;
    memset(&t, 0, sizeof t);
    memset(result, 0, sizeof *result);
    result->val_loss = NAN;
    result->val_accuracy = -1.0f;
    int rc = setup(&t, cfg);
    if (rc == PT_OK)
        rc = run(&t, result);
    teardown(&t);
    return rc;
}
