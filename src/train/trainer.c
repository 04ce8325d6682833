/* trainer.c: pt_train(), the training loop the train command runs.
 *
 * One step: draw a batch of B samples and hand it to the pipeline, which cuts
 * it into M micro-batches of B/M, runs them through its stages as the
 * schedule says with loss scale 1/M (gradients add up to those of the whole
 * batch's mean loss), sums the tied embedding / LM head gradients, clips by
 * global norm and steps the optimizer at the learning rate given here. One
 * stage is the single-worker model; the pipeline tests prove every schedule
 * computes what it computes. Validation runs every eval_every steps and at the end;
 * checkpoints are written atomically every save_every steps and at the end;
 * a resumed run continues the step count, the optimizer moments and the data
 * stream exactly where the checkpoint left them.
 *
 * Under mpirun every rank runs this same loop on the same batches (they are
 * drawn from the same seed): the pipeline takes from each what its stage
 * needs. One rank, the pipeline's main one, reports and logs metrics; every
 * worker loads from a checkpoint only the tensors its stage holds, so a run
 * may resume at another stage count. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/checkpoint_format.h"
#include "io/digits.h"
#include "io/metrics.h"
#include "io/tensorboard.h"
#include "io/text_data.h"
#include "plan/partition.h"
#include "runtime/optimizer.h"
#include "text/text_tokens.h"
#include "tensor/error.h"
#include "train/stage_checkpoint.h"

pt_train_config pt_train_config_default(void)
{
    return (pt_train_config){.model = pt_model_config_gpt(),
                             .optim = pt_optim_config_default(PT_OPTIM_ADAMW),
                             .batch = 16,
                             .microbatches = 1,
                             .steps = 200,
                             .seed = 1,
                             .val_fraction = PT_VAL_FRACTION_DEFAULT,
                             .eval_batches = 8,
                             .max_skipped_steps = 3,
                             .pipeline = pt_pipeline_config_default()};
}

/* Where batches come from: token streams for a model that reads tokens
 * (gpt), the digits or synthetic regression for one that reads floats. */
typedef struct {
    int gpt; /* tokens */
    pt_data_kind kind;
    pt_model_io io; /* what the model reads and compares against */
    pt_token_data tokens;
    pt_batch_sampler sampler;
    pt_digits digits;
    pt_digits_sampler digit_sampler;
    pt_regression *regression;
    uint64_t regression_drawn;
} data_source;

typedef struct {
    const pt_train_config *cfg;
    pt_pipeline *pipe;
    data_source data;
    pt_metrics_log *metrics;
    pt_tb_writer *board; /* --tensorboard, on the main process */
    pt_trace *trace;     /* --trace: the steps traced so far */
    long trace_first, trace_last;
    double *bubbles;       /* per worker, of the last training step (threads) */
    pt_link_rate link;     /* MPI: measured at the start */
    double *step_times;    /* per worker: measured, then predicted, of the last step */
    int mbs;               /* micro-batch size */
    int *tokens, *targets; /* one batch */
    float *inputs, *values;
    pt_train_state state;
} trainer;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* What the model reads and its loss compares against. */
static int model_io(const pt_model_config *c, pt_model_io *io)
{
    pt_model *desc;
    int rc = pt_model_describe(c, &desc);
    if (rc == PT_OK)
        *io = pt_model_get_io(desc);
    pt_model_destroy(desc);
    return rc;
}

static int open_digits(const pt_train_config *c, data_source *d)
{
    int rc = pt_digits_load(c->data[0], PT_DIGITS_TEST_FRACTION_DEFAULT, c->seed, &d->digits);
    if (rc == PT_OK && (d->io.inputs != PT_DIGITS_FEATURES || d->io.labels != 1 ||
                        d->io.classes != PT_DIGITS_CLASSES))
        rc = pt_fail(PT_EINVAL,
                     "the digits have %d features and %d classes: the model must read %d "
                     "floats (an mlp's widths start with %d) and end in %d classes",
                     PT_DIGITS_FEATURES, PT_DIGITS_CLASSES, PT_DIGITS_FEATURES, PT_DIGITS_FEATURES,
                     PT_DIGITS_CLASSES);
    if (rc == PT_OK)
        rc = pt_digits_sampler_init(&d->digit_sampler, &d->digits.train, c->seed);
    return rc;
}

static int open_data(trainer *t)
{
    const pt_train_config *c = t->cfg;
    data_source *d = &t->data;
    int rc = model_io(&c->model, &d->io);
    if (rc != PT_OK)
        return rc;
    d->gpt = d->io.tokens > 0;
    pt_data_kind kind = c->data_kind;
    if (kind != PT_DATA_SYNTHETIC_REGRESSION && c->n_data < 1)
        return pt_fail(PT_EINVAL, "no training data given");
    if (kind == PT_DATA_AUTO)
        kind = d->io.values                                ? PT_DATA_SYNTHETIC_REGRESSION
               : !d->gpt                                   ? PT_DATA_DIGITS
               : pt_data_is_token_file(c->data, c->n_data) ? PT_DATA_TOKENS
                                                           : PT_DATA_TEXT;
    d->kind = kind;
    int floats = kind == PT_DATA_DIGITS || kind == PT_DATA_SYNTHETIC_REGRESSION;
    if (d->gpt == floats || (kind == PT_DATA_SYNTHETIC_REGRESSION) != (d->io.values > 0))
        return pt_fail(PT_EINVAL,
                       "%s data does not fit a model that reads %s and compares against %s",
                       kind == PT_DATA_DIGITS                 ? "digits"
                       : kind == PT_DATA_SYNTHETIC_REGRESSION ? "synthetic regression"
                                                              : "token",
                       d->gpt ? "tokens" : "floats", d->io.values ? "float values" : "labels");
    if (kind == PT_DATA_DIGITS)
        return open_digits(c, d);
    if (kind == PT_DATA_SYNTHETIC_REGRESSION)
        return pt_regression_create(d->io.inputs, d->io.values, 0.01f, c->seed, &d->regression);
    if (kind == PT_DATA_TEXT && c->tokenizer) {
        rc = pt_text_data_encode_path(c->data, c->n_data, c->val_fraction, c->tokenizer,
                                      d->io.vocab, &d->tokens);
    } else if (kind == PT_DATA_TEXT) {
        if (d->io.vocab != 256)
            return pt_fail(PT_EINVAL,
                           "text is read as bytes: the gpt's vocab must be 256 "
                           "(got %d)",
                           d->io.vocab);
        rc = pt_text_data_load(c->data, c->n_data, c->val_fraction, &d->tokens);
    } else if (c->tokenizer) {
        return pt_fail(PT_EINVAL,
                       "a tokenizer does nothing for token files: they hold ids already");
    } else {
        rc = pt_token_data_load_files(c->data[0], c->val_data, d->io.vocab, c->val_fraction,
                                      &d->tokens);
    }
    if (rc == PT_OK)
        rc = pt_batch_sampler_init(&d->sampler, d->tokens.train, d->tokens.n_train, c->batch,
                                   d->io.tokens, c->seed);
    if (rc == PT_OK && pt_eval_batch_count(d->tokens.n_val, t->mbs, d->io.tokens) < 1)
        rc = pt_fail(PT_EINVAL,
                     "the validation split holds %zu tokens, fewer than one "
                     "micro-batch of %d x %d",
                     d->tokens.n_val, t->mbs, d->io.tokens);
    return rc;
}

static void close_data(data_source *d)
{
    pt_token_data_free(&d->tokens);
    pt_regression_destroy(d->regression);
    if (d->kind == PT_DATA_DIGITS) {
        pt_digits_sampler_free(&d->digit_sampler);
        pt_digits_free(&d->digits);
    }
}

static void next_batch(trainer *t)
{
    data_source *d = &t->data;
    if (d->gpt) {
        pt_batch_next(&d->sampler, t->tokens, t->targets);
    } else if (d->regression) {
        pt_regression_batch(d->regression, 0, d->regression_drawn, t->cfg->batch, t->inputs,
                            t->values);
        d->regression_drawn += (uint64_t)t->cfg->batch;
    } else {
        pt_digits_batch_next(&d->digit_sampler, t->cfg->batch, t->inputs, t->targets);
    }
}

/* The batch held in t, whole: the pipeline cuts it into micro-batches. */
static pt_microbatch whole_batch(const trainer *t)
{
    pt_microbatch b = {.batch = t->cfg->batch, .targets = t->targets, .target_values = t->values};
    if (t->data.gpt)
        b.tokens = t->tokens;
    else
        b.inputs = t->inputs;
    return b;
}

/* gpt: mean loss over fixed validation batches of the training batch's
 * shape. mlp: loss and accuracy over the whole test set in one forward. */
static int evaluate(trainer *t, float *val_loss, float *accuracy)
{
    const pt_train_config *c = t->cfg;
    double sum = 0.0;
    int n = 0, rc = PT_OK;
    *accuracy = -1.0f;
    const data_source *d = &t->data;
    if (d->regression) { /* eval_batches batches of the held-out split */
        for (int k = 0; rc == PT_OK && k < c->eval_batches; k++) {
            pt_regression_batch(d->regression, 1, (uint64_t)k * c->batch, c->batch, t->inputs,
                                t->values);
            pt_microbatch b = whole_batch(t);
            float l;
            rc = pt_pipeline_eval(t->pipe, &b, &l);
            sum += l, n++;
        }
        *val_loss = n ? (float)(sum / n) : NAN;
        return rc;
    }
    if (t->data.gpt) {
        size_t avail = pt_eval_batch_count(t->data.tokens.n_val, c->batch, d->io.tokens);
        size_t count = avail < (size_t)c->eval_batches ? avail : (size_t)c->eval_batches;
        for (size_t k = 0; rc == PT_OK && k < count; k++) {
            pt_eval_batch(t->data.tokens.val, t->data.tokens.n_val, c->batch, d->io.tokens, k,
                          t->tokens, t->targets);
            pt_microbatch b = whole_batch(t);
            float l;
            rc = pt_pipeline_eval(t->pipe, &b, &l);
            sum += l, n++;
        }
        *val_loss = n ? (float)(sum / n) : NAN;
        return rc;
    }
    const pt_digits_split *test = &t->data.digits.test;
    int classes = d->io.classes, correct = 0;
    float *probs = malloc(sizeof(float) * (size_t)test->n * classes);
    if (!probs)
        return pt_fail(PT_ENOMEM, "cannot allocate the test set's probabilities");
    pt_microbatch mb = {.batch = test->n, .inputs = test->x, .targets = test->y};
    rc = pt_pipeline_forward_probs(t->pipe, &mb, probs);
    for (int i = 0; rc == PT_OK && i < test->n; i++) {
        const float *p = probs + (size_t)i * classes;
        int best = 0;
        for (int k = 1; k < classes; k++)
            if (p[k] > p[best])
                best = k;
        correct += best == test->y[i];
        sum -= log((double)p[test->y[i]] + 1e-30);
    }
    free(probs);
    *accuracy = (float)correct / test->n;
    *val_loss = (float)(sum / test->n);
    return rc;
}

static int save(trainer *t)
{
    if (t->data.gpt)
        t->state.data_rng = t->data.sampler.rng;
    else if (t->data.regression)
        t->state.data_drawn = t->data.regression_drawn;
    else
        t->state.data_drawn = t->data.digit_sampler.drawn;
    int rc = pt_stage_checkpoint_save(t->pipe, t->cfg->save, &t->state, t->cfg->tokenizer);
    if (rc == PT_OK && t->cfg->save_dtype == PT_PRECISION_BF16 && pt_pipeline_is_main(t->pipe))
        rc = pt_checkpoint_narrow_bf16(t->cfg->save);
    return pt_pipeline_agree(t->pipe, rc, NULL, 0);
}

static int check_config(const pt_train_config *c)
{
    if (c->batch < 1 || c->microbatches < 1)
        return pt_fail(PT_EINVAL, "batch and micro-batches must be >= 1 (got %d and %d)", c->batch,
                       c->microbatches);
    if (c->batch % c->microbatches)
        return pt_fail(PT_EINVAL,
                       "a batch of %d cannot be cut into %d equal micro-batches: "
                       "choose a batch that %d divides",
                       c->batch, c->microbatches, c->microbatches);
    if (c->steps < 0 || c->eval_every < 0 || c->eval_batches < 1 || c->save_every < 0)
        return pt_fail(PT_EINVAL, "steps, eval-every and save-every must be >= 0 and "
                                  "eval-batches >= 1");
    if (c->max_skipped_steps < 1)
        return pt_fail(PT_EINVAL, "max-skipped-steps must be >= 1 (got %d)", c->max_skipped_steps);
    if (c->init_from && c->resume)
        return pt_fail(PT_EINVAL, "init_from and resume both given: a run either starts from "
                                  "weights or continues a run");
    if ((c->trace_first || c->trace_last) &&
        (!c->trace || c->trace_first < 1 || c->trace_last < c->trace_first ||
         c->trace_last > c->steps))
        return pt_fail(PT_EINVAL,
                       "trace steps %ld:%ld: expected a trace file and 1 <= first <= last <= "
                       "steps (%ld)",
                       c->trace_first, c->trace_last, c->steps);
    if (!pt_precision_name(c->save_dtype))
        return pt_fail(PT_EINVAL, "save dtype %d is neither fp32 nor bf16", (int)c->save_dtype);
    if (c->save_dtype == PT_PRECISION_BF16 && !(c->save && pt_checkpoint_is_file(c->save)))
        return pt_fail(PT_EINVAL,
                       "bf16 weights are written to a .safetensors file of weights alone, for "
                       "inference (got %s): a checkpoint folder keeps the float master weights "
                       "a run resumes from",
                       c->save ? c->save : "no --save");
    return PT_OK;
}

/* ---- the TensorBoard log (--tensorboard) ------------------------------
 * Written by the main process: per step the tags of docs/training.md, the
 * configuration as text at the first step of the run, and a SessionLog
 * START at the step a resumed run continues from, so TensorBoard drops what
 * an interrupted run wrote past its checkpoint and no step shows twice. */

enum { BOARD_FLUSH_EVERY = 10 }; /* steps between flushes, for a live view */

/* The run's configuration as a markdown table, the flags' names. */
static void config_text(const pt_train_config *c, char *buf, size_t n)
{
    const pt_model_config *m = &c->model;
    const pt_optim_config *o = &c->optim;
    size_t at = 0;
#define ROW(name, ...)                                                             \
    do {                                                                           \
        if (at < n)                                                                \
            at += (size_t)snprintf(buf + at, n - at, "| " name " | " __VA_ARGS__); \
        if (at < n)                                                                \
            at += (size_t)snprintf(buf + at, n - at, " |\n");                      \
    } while (0)
    ROW("flag", "value");
    ROW("---", "---");
    if (m->kind == PT_MODEL_GPT) {
        ROW("model", "gpt");
        ROW("layers", "%d", m->n_layer);
        ROW("heads", "%d", m->n_head);
        ROW("embd", "%d", m->n_embd);
        ROW("seq", "%d", m->seq_len);
        ROW("vocab", "%d", m->vocab);
    } else if (m->kind == PT_MODEL_SPEC) {
        char line[PT_SPEC_MAX_TEXT];
        pt_ckpt_spec_line(m->spec, line, sizeof line);
        ROW("model", "spec");
        ROW("spec", "%s", line);
    } else {
        char w[256] = "";
        for (int i = 0, k = 0; i < m->n_widths && k < (int)sizeof w; i++)
            k += snprintf(w + k, sizeof w - (size_t)k, "%s%d", i ? "," : "", m->widths[i]);
        ROW("model", "mlp");
        ROW("widths", "%s", w);
    }
    ROW("batch", "%d", c->batch);
    ROW("microbatches", "%d", c->microbatches);
    ROW("steps", "%ld", c->steps);
    ROW("optimizer", "%s", o->kind == PT_OPTIM_SGD ? "sgd" : "adamw");
    ROW("lr", "%g", o->lr);
    ROW("min-lr", "%g", o->min_lr);
    ROW("warmup", "%ld", o->warmup_steps);
    ROW("decay-steps", "%ld", o->decay_steps);
    ROW("weight-decay", "%g", o->weight_decay);
    ROW("grad-clip", "%g", o->grad_clip);
    ROW("seed", "%llu", (unsigned long long)c->seed);
    ROW("precision", "%s", pt_precision_name(m->precision));
    ROW("kernel", "%s", pt_fp32_kernel());
    if (m->precision == PT_PRECISION_BF16)
        ROW("bf16-kernel", "%s", pt_bf16_kernel());
    ROW("stages", "%d", c->pipeline.stages);
    ROW("replicas", "%d", c->pipeline.replicas);
    ROW("zero", "%d", c->pipeline.zero);
    ROW("tensor", "%d", c->pipeline.tensor ? c->pipeline.tensor : 1);
    ROW("schedule", "%s",
        c->pipeline.schedule_file ? c->pipeline.schedule_file
                                  : (c->pipeline.schedule ? c->pipeline.schedule : "1f1b"));
    ROW("checkpoint-activations", "%s", c->pipeline.checkpoint_activations ? "yes" : "no");
    for (int i = 0; i < c->n_data; i++)
        ROW("data", "%s", c->data[i]);
    if (c->tokenizer)
        ROW("tokenizer", "%s", c->tokenizer);
    if (c->resume)
        ROW("resume", "%s", c->resume);
    if (c->init_from)
        ROW("init-from", "%s", c->init_from);
#undef ROW
}

static int board_open(trainer *t)
{
    int rc = pt_tb_open(t->cfg->tensorboard, &t->board);
    if (rc == PT_OK && t->cfg->resume)
        rc = pt_tb_restart(t->board, t->state.step + 1);
    char text[8192];
    config_text(t->cfg, text, sizeof text);
    if (rc == PT_OK)
        rc = pt_tb_text(t->board, "config", t->state.step, text);
    return rc == PT_OK ? pt_tb_flush(t->board) : rc;
}

/* The scalars of one counted step: its metrics row, field by field; the
 * fields of the last row are worker<r>_bubble, shown as bubble/worker<r>,
 * the link (link_<what>, shown as link/<what>), each worker's step time and
 * its prediction (worker<r>_step_s and worker<r>_predicted_step_s, shown
 * under step_time/), and the memory figures, shown as memory/<field>. */
static int board_step(trainer *t, const pt_metrics_row *row, bool last)
{
    pt_tb_writer *w = t->board;
    int64_t step = row->step;
    int rc = pt_tb_scalar(w, "train/loss", step, (float)row->loss);
    rc = rc ? rc : pt_tb_scalar(w, "train/lr", step, (float)row->lr);
    rc = rc ? rc : pt_tb_scalar(w, "train/tokens_per_s", step, (float)row->tokens_per_s);
    rc = rc ? rc : pt_tb_scalar(w, "train/step_ms", step, (float)row->step_ms);
    if (row->has_grad_norm)
        rc = rc ? rc : pt_tb_scalar(w, "train/grad_norm", step, (float)row->grad_norm);
    if (row->has_val_loss)
        rc = rc ? rc : pt_tb_scalar(w, "val/loss", step, (float)row->val_loss);
    if (row->has_val_accuracy)
        rc = rc ? rc : pt_tb_scalar(w, "val/accuracy", step, (float)row->val_accuracy);
    char tag[96];
    for (int i = 0; i < row->n_extra; i++) {
        const char *key = row->extra[i].key, *bubble = strstr(key, "_bubble");
        size_t n = strlen(key);
        if (bubble && !bubble[7])
            snprintf(tag, sizeof tag, "bubble/%.*s", (int)(bubble - key), key);
        else if (!strncmp(key, "link_", 5))
            snprintf(tag, sizeof tag, "link/%s", key + 5);
        else if (n > 7 && !strcmp(key + n - 7, "_step_s"))
            snprintf(tag, sizeof tag, "step_time/%s", key);
        else
            snprintf(tag, sizeof tag, "memory/%s", key);
        rc = rc ? rc : pt_tb_scalar(w, tag, step, (float)row->extra[i].value);
    }
    if (rc == PT_OK && (step % BOARD_FLUSH_EVERY == 0 || last))
        rc = pt_tb_flush(w);
    return rc;
}

/* The layout's rank mapping (docs/layouts.md): tensor groups innermost, so
 * a stage's slices share a machine under mpirun's default placement. */
static void print_rank_map(const pt_pipeline_config *pc)
{
    int D = pc->replicas ? pc->replicas : 1, T = pc->tensor;
    fprintf(stderr, "pipetrain: %d ranks = %d stages x %d tensor slices x %d replicas\n",
            pc->stages * T * D, pc->stages, T, D);
    for (int r = 0; r < pc->stages * T * D; r++)
        fprintf(stderr, "pipetrain: rank %d: stage %d, tensor slice %d, replica %d\n", r, r / T / D,
                r % T, r / T % D);
}

static int setup(trainer *t, const pt_train_config *c)
{
    int rc = check_config(c);
    if (rc != PT_OK)
        return rc;
    t->cfg = c;
    t->mbs = c->batch / c->microbatches;
    const pt_model_config mc = c->model;
    if ((rc = open_data(t)) != PT_OK)
        return rc;
    pt_pipeline_config pc = c->pipeline;
    pc.microbatches = c->microbatches;
    pc.micro_batch_size = t->mbs;
    if ((rc = pt_pipeline_create(&mc, &c->optim, &pc, &t->pipe)) != PT_OK)
        return rc;
    if (pc.tensor > 1 && pt_pipeline_is_main(t->pipe))
        print_rank_map(&pc);
    if (c->init_from && (rc = pt_stage_checkpoint_load(t->pipe, c->init_from, NULL, NULL)) != PT_OK)
        return rc;
    if (c->resume) {
        pt_checkpoint_load_options lo = {.allow_fresh_optimizer = c->resume_fresh_optimizer};
        if ((rc = pt_stage_checkpoint_load(t->pipe, c->resume, &t->state, &lo)) != PT_OK)
            return rc;
        if (t->data.gpt) {
            t->data.sampler.rng = t->state.data_rng;
        } else if (t->data.regression) {
            t->data.regression_drawn = t->state.data_drawn;
        } else {
            /* the digits sampler's state is the count drawn: replay it */
            float *x = malloc(sizeof(float) * PT_DIGITS_FEATURES);
            int y;
            for (uint64_t i = 0; x && i < t->state.data_drawn; i++)
                pt_digits_batch_next(&t->data.digit_sampler, 1, x, &y);
            free(x);
        }
    }
    const pt_model_io *io = &t->data.io;
    size_t n = (size_t)c->batch;
    t->tokens = malloc(sizeof(int) * (n * io->tokens + 1));
    t->targets = malloc(sizeof(int) * (n * io->labels + 1));
    t->inputs = malloc(sizeof(float) * (n * io->inputs + 1));
    t->values = malloc(sizeof(float) * (n * io->values + 1));
    if (!t->tokens || !t->targets || !t->inputs || !t->values)
        return pt_fail(PT_ENOMEM, "cannot allocate a batch");
    t->trace_first = c->trace_first ? c->trace_first : c->steps;
    t->trace_last = c->trace_last ? c->trace_last : c->steps;
    if (c->trace && c->trace_first && t->trace_first <= t->state.step)
        return pt_fail(PT_EINVAL,
                       "trace steps %ld:%ld: the run resumes after step %ld, so it trains steps "
                       "%ld to %ld only",
                       t->trace_first, t->trace_last, (long)t->state.step, (long)t->state.step + 1,
                       c->steps);
    if (c->trace && (rc = pt_trace_create(&t->trace)) != PT_OK)
        return rc;
    if ((rc = pt_pipeline_probe_link(t->pipe, &t->link)) != PT_OK)
        return rc;
    if (c->metrics && pt_pipeline_is_main(t->pipe))
        rc = pt_metrics_open(c->metrics, c->resume ? t->state.step : -1, &t->metrics);
    if (rc == PT_OK && c->tensorboard && pt_pipeline_is_main(t->pipe))
        rc = board_open(t);
    return rc;
}

static void teardown(trainer *t)
{
    if (t->metrics)
        pt_metrics_close(t->metrics);
    pt_tb_close(t->board);
    pt_trace_destroy(t->trace);
    free(t->bubbles);
    free(t->step_times);
    pt_pipeline_destroy(t->pipe);
    free(t->tokens), free(t->targets), free(t->inputs), free(t->values);
    close_data(&t->data);
}

/* Each worker's time in the last step against the simulator's for the
 * link: a table for the result and figures for the last metrics line. Every
 * rank takes part under MPI. */
static void report_step_times(trainer *t, pt_train_result *result)
{
    int P = pt_pipeline_ranks(t->pipe);
    result->link = t->link;
    if (P < 2 || !(t->step_times = malloc(sizeof(double) * 2 * (size_t)P)))
        return;
    if (pt_pipeline_step_times(t->pipe, &t->link, t->step_times, t->step_times + P) != PT_OK ||
        pt_pipeline_step_time_report(t->pipe, &t->link, t->step_times, t->step_times + P,
                                     result->step_times, sizeof result->step_times) != PT_OK) {
        free(t->step_times);
        t->step_times = NULL;
    }
}

/* The link and the step times on the last metrics line. */
static void log_step_times(trainer *t, pt_metrics_row *row)
{
    static char keys[PT_METRICS_MAX_EXTRA][40];
    int P = pt_pipeline_ranks(t->pipe);
    if (!t->step_times || row->n_extra + 2 + 2 * P > PT_METRICS_MAX_EXTRA)
        return;
    row->extra[row->n_extra].key = "link_bytes_per_s";
    row->extra[row->n_extra++].value = t->link.bandwidth;
    row->extra[row->n_extra].key = "link_latency_s";
    row->extra[row->n_extra++].value = t->link.latency;
    for (int r = 0; r < P; r++)
        for (int k = 0; k < 2; k++) {
            snprintf(keys[row->n_extra], sizeof keys[0], "worker%d_%s", r,
                     k ? "predicted_step_s" : "step_s");
            row->extra[row->n_extra].key = keys[row->n_extra];
            row->extra[row->n_extra++].value = t->step_times[k * P + r];
        }
}

/* The bubbles of the last training step, taken before the final validation
 * replaces its times with a forward-only pass. A rank of an MPI pipeline
 * knows only its own worker: the per-worker bubble table, which needs every
 * worker's times, is left out. */
static void report_last_step(trainer *t, pt_train_result *result)
{
    report_step_times(t, result);
    if (!strcmp(pt_pipeline_transport_name(t->pipe), "mpi"))
        return;
    pt_pipeline_bubble_report(t->pipe, result->bubbles, sizeof result->bubbles);
    if ((t->bubbles = malloc(sizeof(double) * pt_pipeline_ranks(t->pipe))) &&
        pt_pipeline_bubbles(t->pipe, t->bubbles, NULL) != PT_OK) {
        free(t->bubbles);
        t->bubbles = NULL;
    }
}

/* --trace: each step of trace_first..trace_last joins the trace right after
 * it ran (a validation would replace what the pipeline recorded), a skipped
 * attempt too (it ran, and its retry has the same number); the file is
 * written once the last of them counts. A rank of an MPI pipeline knows
 * only its own worker: each writes its tracks to FILE.rank<N> (load them
 * together). */
static int trace_step(trainer *t, long step, bool counted)
{
    if (!t->trace || step < t->trace_first || step > t->trace_last)
        return PT_OK;
    int rc = pt_trace_add_step(t->trace, t->pipe, step);
    if (rc != PT_OK || !counted || step != t->trace_last)
        return rc;
    const char *path = t->cfg->trace;
    char ranked[4096];
    if (!strcmp(pt_pipeline_transport_name(t->pipe), "mpi")) {
        snprintf(ranked, sizeof ranked, "%s.rank%d", path, pt_pipeline_rank(t->pipe));
        path = ranked;
    }
    return pt_trace_write(t->trace, path);
}

/* A step whose gradient was not finite: said on stderr and in the metrics
 * log (a line for the step with "skipped": 1 and the stage that went
 * non-finite first); the run ends after max_skipped_steps in a row. */
static int report_skipped(trainer *t, float lr, float loss, double norm, int stage, int in_a_row)
{
    const pt_train_config *c = t->cfg;
    long step = t->state.step + 1;
    if (pt_pipeline_is_main(t->pipe))
        fprintf(stderr,
                "pipetrain: step %ld: the gradient norm is %g (first non-finite in stage %d, "
                "loss %g): the step was skipped on every worker, %d in a row\n",
                step, norm, stage, loss, in_a_row);
    if (t->metrics) {
        pt_metrics_row row = {.step = step, .loss = loss, .lr = lr, .n_extra = 2};
        row.extra[0].key = "skipped", row.extra[0].value = 1;
        row.extra[1].key = "nonfinite_stage", row.extra[1].value = stage;
        int rc = pt_metrics_write(t->metrics, &row);
        if (rc != PT_OK)
            return rc;
    }
    if (t->board) {
        int rc = pt_tb_scalar(t->board, "train/skipped", step, 1.0f);
        if (rc != PT_OK)
            return rc;
    }
    if (in_a_row >= c->max_skipped_steps)
        return pt_fail(PT_EINVAL,
                       "%d steps in a row had a non-finite gradient (the last at step %ld, "
                       "first in stage %d): the run diverged; lower the learning rate or clip "
                       "harder (--max-skipped-steps)",
                       in_a_row, step, stage);
    return PT_OK;
}

/* The memory each rank holds, at the end: the table for the result and,
 * on the last metrics line, each rank's measured and predicted bytes
 * (worker<rank>_...), its process's peak RSS and (threads) its worker's
 * bubble in the last step. Every rank
 * takes part (the figures are summed across ranks). */
static int report_memory(trainer *t, pt_train_result *result, pt_metrics_row *row)
{
    int P = pt_pipeline_ranks(t->pipe);
    pt_memory_use *m = calloc((size_t)P * 2, sizeof *m);
    size_t *rss = calloc((size_t)P, sizeof *rss);
    int rc = m && rss ? pt_pipeline_memory(t->pipe, m, m + P, rss)
                      : pt_fail(PT_ENOMEM, "cannot allocate the memory figures");
    if (rc == PT_OK)
        rc = pt_pipeline_memory_report(t->pipe, m, m + P, rss, result->memory,
                                       sizeof result->memory);
    static char keys[PT_METRICS_MAX_EXTRA][40];
    int n = t->bubbles ? 4 : 3;
    for (int r = 0; rc == PT_OK && r < P && row->n_extra + n <= PT_METRICS_MAX_EXTRA; r++) {
        const char *what[4] = {"bytes", "predicted_bytes", "peak_rss_bytes", "bubble"};
        double value[4] = {(double)pt_memory_total(&m[r]), (double)pt_memory_total(&m[P + r]),
                           (double)rss[r], t->bubbles ? t->bubbles[r] : 0.0};
        for (int k = 0; k < n; k++) {
            snprintf(keys[row->n_extra], sizeof keys[0], "worker%d_%s", r, what[k]);
            row->extra[row->n_extra].key = keys[row->n_extra];
            row->extra[row->n_extra++].value = value[k];
        }
    }
    free(m);
    free(rss);
    return rc;
}

static int save_step(trainer *t, pt_train_result *result)
{
    int rc = save(t);
    if (rc == PT_OK)
        result->saved_step = t->state.step;
    return rc;
}

static int run(trainer *t, pt_train_result *result)
{
    const pt_train_config *c = t->cfg;
    double samples = (double)c->batch * (t->data.gpt ? t->data.io.tokens : 1);
    double started = now();
    long first = t->state.step;
    int rc = PT_OK, skipped = 0;
    while (rc == PT_OK && t->state.step < c->steps) {
        pt_train_report r = {.steps = c->steps};
        double t0 = now();
        next_batch(t);
        r.lr = pt_optimizer_lr(&c->optim, t->state.step);
        pt_microbatch batch = whole_batch(t);
        if ((rc = pt_pipeline_train_step(t->pipe, &batch, t->state.step, r.lr, &r.loss)) != PT_OK)
            break;
        double norm;
        int stage;
        bool skipped_now = pt_pipeline_last_step_skipped(t->pipe, &norm, &stage);
        if ((rc = trace_step(t, t->state.step + 1, !skipped_now)) != PT_OK)
            break;
        if (skipped_now) {
            /* no worker changed anything: the step is not counted */
            if ((rc = report_skipped(t, r.lr, r.loss, norm, stage, ++skipped)) != PT_OK)
                break;
            continue;
        }
        skipped = 0;
        t->state.step++;
        if (t->state.step == c->steps)
            report_last_step(t, result);
        r.step = t->state.step;
        r.step_ms = (now() - t0) * 1e3;
        r.tokens_per_s = samples / (r.step_ms / 1e3);
        r.elapsed_s = now() - started;
        r.eta_s = r.elapsed_s / (double)(r.step - first) * (double)(c->steps - r.step);
        if ((c->eval_every && r.step % c->eval_every == 0) || r.step == c->steps) {
            r.has_val = 1;
            if ((rc = evaluate(t, &r.val_loss, &r.val_accuracy)) != PT_OK)
                break;
            result->val_loss = r.val_loss;
            result->val_accuracy = r.val_accuracy;
        }
        pt_metrics_row row = {.step = r.step,
                              .loss = r.loss,
                              .lr = r.lr,
                              .tokens_per_s = r.tokens_per_s,
                              .step_ms = r.step_ms,
                              /* pipedream updates per micro-batch: no global norm */
                              .has_grad_norm = norm > 0,
                              .grad_norm = norm,
                              .has_val_loss = r.has_val,
                              .val_loss = r.val_loss,
                              .has_val_accuracy = r.has_val && r.val_accuracy >= 0,
                              .val_accuracy = r.val_accuracy};
        if (r.step == c->steps && (rc = report_memory(t, result, &row)) != PT_OK)
            break;
        if (r.step == c->steps)
            log_step_times(t, &row);
        if (t->metrics && (rc = pt_metrics_write(t->metrics, &row)) != PT_OK)
            break;
        if (t->board && (rc = board_step(t, &row, r.step == c->steps)) != PT_OK)
            break;
        if (c->save && c->save_every && r.step % c->save_every == 0 && r.step < c->steps &&
            (rc = save_step(t, result)) != PT_OK)
            break;
        result->loss = r.loss;
        result->tokens_per_s = r.tokens_per_s;
        r.saved_step = result->saved_step;
        if (c->on_report && pt_pipeline_is_main(t->pipe))
            c->on_report(&r, c->user);
    }
    result->steps = t->state.step;
    if (rc == PT_OK && c->save)
        rc = save_step(t, result);
    return rc;
}

/* The cut the run trained with, as --balance takes it: a run that must
 * give the same bits repeats it (the partitioner follows measured times). */
static void report_partition(const pt_pipeline *p, pt_train_result *result)
{
    int blocks[PT_PARTITION_MAX_CHUNKS], layers[PT_PARTITION_MAX_CHUNKS], n = 0;
    for (int first, last;
         n < PT_PARTITION_MAX_CHUNKS && pt_pipeline_chunk_blocks(p, n, &first, &last) == PT_OK; n++)
        blocks[n] = last - first + 1;
    int whole = pt_model_balance_layers(pt_pipeline_description(p), blocks, n, layers);
    size_t at = (size_t)snprintf(result->partition, sizeof result->partition, "%s",
                                 whole ? "--balance " : "blocks per chunk ");
    for (int c = 0; c < n && at < sizeof result->partition; c++)
        at += (size_t)snprintf(result->partition + at, sizeof result->partition - at, "%s%d",
                               c ? "," : "", whole ? layers[c] : blocks[c]);
}

int pt_train(const pt_train_config *cfg, pt_train_result *result)
{
    trainer t;
    memset(&t, 0, sizeof t);
    memset(result, 0, sizeof *result);
    result->saved_step = -1;
    result->val_loss = NAN;
    result->val_accuracy = -1.0f;
    int rc = setup(&t, cfg);
    if (rc == PT_OK)
        report_partition(t.pipe, result);
    if (rc == PT_OK)
        rc = run(&t, result);
    result->is_main = !t.pipe || pt_pipeline_is_main(t.pipe);
    teardown(&t);
    return rc;
}
