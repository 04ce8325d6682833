/* cmd_train.c: `pipetrain train`: reads the flags into a pt_train_config,
 * runs pt_train() and shows its progress: a one-line bar on a terminal,
 * plain log lines otherwise. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/model_limits.h"
#include "cli/model_source.h"
#include "io/text_data.h"
#include "comm/transport.h"
#include "pipetrain.h"

typedef struct {
    int tty, quiet;
    long log_every;
    int drawn; /* characters of the line on the terminal now (tty) */
} progress;

/* 42s, 3m05s, 2h07m */
static void duration(double s, char *buf, size_t n)
{
    long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
    if (t < 60)
        snprintf(buf, n, "%lds", t);
    else if (t < 3600)
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
}

/* A terminal gets one line redrawn in place (\r, blanks over what is left
 * of a longer one), ended by a newline at every validation, the last step's
 * included; anything else gets plain lines: the first step, every
 * log_every-th and every validation. */
/* What the reporting process prints when it is ended by SIGTERM or SIGINT:
 * mpirun sends SIGTERM to every rank when it loses a host, and a run killed
 * that way should still say where it can resume. on_report rewrites the line
 * after every step; the handler only writes it. */
static char stop_note[4352];
static volatile sig_atomic_t stop_len;
static const char *stop_save;

static void on_stop(int sig)
{
    if (stop_len > 0 && write(2, stop_note, (size_t)stop_len) < 0)
        stop_len = 0;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void note_stop_point(const pt_train_report *r)
{
    if (!stop_save)
        return;
    stop_len = 0;
    int n = r->saved_step < 0
                ? snprintf(stop_note, sizeof stop_note,
                           "pipetrain train: stopped after step %ld; no checkpoint was saved "
                           "in this run\n",
                           r->step)
                : snprintf(stop_note, sizeof stop_note,
                           "pipetrain train: stopped after step %ld; the last checkpoint saved "
                           "is %s at step %ld; add --resume %s to continue\n",
                           r->step, stop_save, r->saved_step, stop_save);
    stop_len = n < (int)sizeof stop_note ? n : (int)sizeof stop_note - 1;
}

static void on_report(const pt_train_report *r, void *user)
{
    progress *p = user;
    note_stop_point(r);
    if (p->quiet || (!p->tty && r->step % p->log_every && !r->has_val && r->step != 1))
        return;
    char elapsed[48], eta[48], line[256];
    duration(r->elapsed_s, elapsed, sizeof elapsed);
    duration(r->eta_s, eta, sizeof eta);
    int n;
    if (p->tty) {
        int width = 30, done = (int)(width * r->step / (r->steps ? r->steps : 1));
        n = snprintf(line, sizeof line,
                     "[%.*s%*s] step %ld/%ld  loss %.4f  %.0f tok/s  elapsed %s  ETA %s", done,
                     "==============================", width - done, "", r->step, r->steps, r->loss,
                     r->tokens_per_s, elapsed, eta);
    } else {
        n = snprintf(line, sizeof line,
                     "step %ld/%ld  loss %.4f  lr %.2e  %.0f tok/s  %.0f ms/step  elapsed %s  "
                     "ETA %s",
                     r->step, r->steps, r->loss, r->lr, r->tokens_per_s, r->step_ms, elapsed, eta);
    }
    if (r->has_val && r->val_accuracy >= 0)
        n += snprintf(line + n, sizeof line - (size_t)n, "  val_loss %.4f  val_accuracy %.1f%%",
                      r->val_loss, 100.0 * r->val_accuracy);
    else if (r->has_val)
        n += snprintf(line + n, sizeof line - (size_t)n, "  val_loss %.4f", r->val_loss);
    if (p->tty) {
        printf("\r%s%*s", line, p->drawn > n ? p->drawn - n : 0, "");
        p->drawn = r->has_val ? 0 : n;
        if (r->has_val)
            printf("\n");
    } else {
        printf("%s\n", line);
    }
    fflush(stdout);
}

/* As pt_train reads --data: auto takes one *.bin file of a gpt as tokens. */
static int reads_tokens(const char *data_format, int gpt, const flag_list *data)
{
    return !strcmp(data_format, "tokens") ||
           (!strcmp(data_format, "auto") && gpt && pt_data_is_token_file(data->items, data->n));
}

/* Flags that would do nothing in the mode the others chose are refused:
 * a run that silently ignores one is not the run its user asked for. */
static int check_modes(const flag *flags, int n, const char *model, const char *optimizer,
                       const char *data_format, const flag_list *data)
{
    static const char *const gpt_only[] = {"layers", "heads",        "embd",      "seq",
                                           "vocab",  "eval-batches", "tokenizer", NULL};
    static const char *const mlp_only[] = {"widths", NULL};
    static const char *const adamw_only[] = {"beta1", "beta2", NULL};
    static const char *const sgd_only[] = {"momentum", NULL};
    static const char *const resume_only[] = {"fresh-optimizer", NULL};
    static const char *const save_only[] = {"save-every", NULL};
    static const char *const not_with_file[] = {"schedule", "virtual", "defer-w", NULL};
    static const char *const not_with_balance[] = {"max-stage-memory", NULL};
    static const char *const tokens_only[] = {"val-data", NULL};
    static const char *const trace_only[] = {"trace-steps", NULL};
    static const char *const text_only[] = {"tokenizer", NULL};
    static const char *const shape_flags[] = {"layers", "heads",  "embd", "seq",
                                              "vocab",  "widths", NULL};
    int gpt = !strcmp(model, "gpt"), spec = !strcmp(model, "spec");
    if (!gpt && !spec && strcmp(model, "mlp")) {
        fprintf(stderr, "pipetrain train: --model '%s': expected gpt, mlp or spec\n", model);
        return 2;
    }
    if (spec != !!flags_given(flags, n, "model-spec")) {
        fprintf(stderr, "pipetrain train: --model spec and --model-spec go together (the spec "
                        "names the layers)\n");
        return 2;
    }
    if (spec && flags_refuse_given("train", flags, n, shape_flags,
                                   "with --model-spec (the spec gives every layer's shape)"))
        return 2;
    int synthetic = !strcmp(data_format, "synthetic-regression");
    if (strcmp(optimizer, "adamw") && strcmp(optimizer, "sgd")) {
        fprintf(stderr, "pipetrain train: --optimizer '%s': expected adamw or sgd\n", optimizer);
        return 2;
    }
    if (strcmp(data_format, "auto") && strcmp(data_format, "text") &&
        strcmp(data_format, "tokens") && strcmp(data_format, "digits") && !synthetic) {
        fprintf(stderr,
                "pipetrain train: --data-format '%s': expected auto, text, tokens, digits or "
                "synthetic-regression\n",
                data_format);
        return 2;
    }
    if (data->n == 0 && !synthetic) {
        fprintf(stderr, "pipetrain train: --data is required (see pipetrain train --help)\n");
        return 2;
    }
    int tokens = reads_tokens(data_format, gpt, data);
    if (gpt && tokens &&
        flags_refuse_given("train", flags, n, text_only,
                           "for token data (*.bin or --data-format tokens): it holds ids already"))
        return 2;
    if (spec)
        ;
    else if (gpt ? flags_refuse_given("train", flags, n, mlp_only,
                                      "for a gpt: it sets an mlp's widths (add --model mlp)")
                 : flags_refuse_given("train", flags, n, gpt_only,
                                      "for an mlp: it shapes or validates a gpt (the mlp's shape "
                                      "is --widths; its validation is the whole test set)"))
        return 2;
    if (!strcmp(optimizer, "adamw") ? flags_refuse_given("train", flags, n, sgd_only,
                                                         "with --optimizer adamw (it is SGD's)")
                                    : flags_refuse_given("train", flags, n, adamw_only,
                                                         "with --optimizer sgd (it is AdamW's)"))
        return 2;
    if (!flags_given(flags, n, "resume") &&
        flags_refuse_given("train", flags, n, resume_only, "without --resume"))
        return 2;
    if (!flags_given(flags, n, "save") &&
        flags_refuse_given("train", flags, n, save_only, "without --save"))
        return 2;
    if (!flags_given(flags, n, "trace") &&
        flags_refuse_given("train", flags, n, trace_only, "without --trace"))
        return 2;
    if (flags_given(flags, n, "schedule-file") &&
        flags_refuse_given("train", flags, n, not_with_file,
                           "with --schedule-file (the file sets the schedule and its chunks)"))
        return 2;
    if (flags_given(flags, n, "balance") &&
        flags_refuse_given("train", flags, n, not_with_balance,
                           "with --balance (it bounds the automatic partition)"))
        return 2;
    if (!tokens && flags_refuse_given("train", flags, n, tokens_only,
                                      "unless --data is token data (*.bin or --data-format "
                                      "tokens): text and digits hold out their own validation "
                                      "split"))
        return 2;
    return 0;
}

/* --min-lr, once --lr and --decay-steps are known. */
static int check_optim(const flag *flags, int n, float min_lr, float lr, long decay_steps)
{
    static const char *const decay_only[] = {"min-lr", NULL};
    const char *text = flags_given(flags, n, "min-lr");
    if (text && min_lr > lr) {
        char want[96];
        snprintf(want, sizeof want, "a finite number in [0, %g] (at most --lr)", lr);
        return num_refuse("train", "min-lr", text, want);
    }
    if (decay_steps == 0)
        return flags_refuse_given("train", flags, n, decay_only,
                                  "with --decay-steps 0 (the rate stays at --lr)");
    return 0;
}

/* With --tokenizer, the gpt's vocabulary is the tokenizer's size: --vocab
 * may only repeat it. Returns 0, or the exit status after saying why not:
 * 1 when the tokenizer does not load, 2 for a contradicting --vocab. */
static int tokenizer_vocab(const flag *flags, int n, pt_train_config *cfg)
{
    pt_tokenizer *tok;
    if (pt_tokenizer_load(cfg->tokenizer, &tok) != PT_OK) {
        fprintf(stderr, "pipetrain train: --tokenizer: %s\n", pt_last_error());
        return 1;
    }
    int size = pt_tokenizer_vocab_size(tok);
    pt_tokenizer_destroy(tok);
    if (cfg->init_from && cfg->model.vocab != size) {
        fprintf(stderr,
                "pipetrain train: the tokenizer %s has %d tokens but %s's vocab_size is %d\n",
                cfg->tokenizer, size, cfg->init_from, cfg->model.vocab);
        return 2;
    }
    if (flags_given(flags, n, "vocab") && cfg->model.vocab != size) {
        fprintf(stderr,
                "pipetrain train: --vocab %d contradicts --tokenizer %s, which has %d tokens\n",
                cfg->model.vocab, cfg->tokenizer, size);
        return 2;
    }
    cfg->model.vocab = size;
    return 0;
}

static const char summary[] =
    "Trains a gpt on text (or token files) or an mlp on the digits data set, or any\n"
    "list of layers (--model-spec) on the data its first layer and loss read. Text is\n"
    "bytes, or with --tokenizer the ids of a BPE tokenizer (each file's head and tail\n"
    "encoded after its <|endoftext|>, as pipetrain tokenize joins documents).\n"
    "To resume, repeat the command that saved the checkpoint and add --resume PATH:\n"
    "the model flags must match the checkpoint's (a mismatch is refused), and the\n"
    "run continues its parameters, optimizer moments and data position. --steps\n"
    "counts from 0 also when resuming: a run saved at step 200 and resumed with\n"
    "--steps 400 trains 200 more steps.";

int cmd_train(int argc, char **argv)
{
    pt_train_config cfg = pt_train_config_default();
    const char *model_spec = NULL;
    const char *model = "gpt", *widths = "64,256,10", *optimizer = "adamw", *data_format = "auto";
    flag_list data = {.n = 0};
    float min_lr = -1.0f, weight_decay = -1.0f;
    long decay_steps = -1;
    int threads = 0, quiet = 0, no_lend = 0;
    const char *balance = NULL, *trace_steps = NULL, *precision = "fp32", *bf16_kernel = "auto",
               *fp32_kernel = "auto", *save_dtype = "fp32";
    long max_stage_memory = 0;
    int balance_list[1024];
    flag flags[] = {
        FLAG("model", FLAG_STRING, &model, "gpt|mlp|spec",
             "model family (default gpt; spec: --model-spec)"),
        FLAG("model-spec", FLAG_STRING, &model_spec, "FILE|TEXT",
             "the layers, as a file or as text: 'linear 64 128; relu; linear 128 10; "
             "cross_entropy' (docs/models.md); implies --model spec"),
        FLAG_RANGED("layers", FLAG_INT, &cfg.model.n_layer, "N",
                    "gpt transformer blocks (default 4)", LIMIT_LAYERS),
        FLAG_RANGED("heads", FLAG_INT, &cfg.model.n_head, "N", "gpt attention heads (default 4)",
                    LIMIT_HEADS),
        FLAG_RANGED("embd", FLAG_INT, &cfg.model.n_embd, "N", "gpt channels (default 128)",
                    LIMIT_EMBD),
        FLAG_RANGED("seq", FLAG_INT, &cfg.model.seq_len, "N", "gpt tokens per sample (default 128)",
                    LIMIT_SEQ),
        FLAG_RANGED("vocab", FLAG_INT, &cfg.model.vocab, "N",
                    "gpt vocabulary (default 256: text is bytes; with --tokenizer its size)",
                    LIMIT_VOCAB),
        FLAG("widths", FLAG_STRING, &widths, "W0,W1,..",
             "mlp layer widths, 2 to 16, each in [1, 16777216] (default 64,256,10)"),
        FLAG_RANGED("batch", FLAG_INT, &cfg.batch, "B", "samples per optimizer step (default 16)",
                    LIMIT_BATCH),
        FLAG_RANGED("microbatches", FLAG_INT, &cfg.microbatches, "M",
                    "cut each batch into M micro-batches of B/M; M must divide B (default 1)",
                    LIMIT_MICROBATCHES),
        FLAG_RANGED("steps", FLAG_LONG, &cfg.steps, "N", "total optimizer steps (default 200)",
                    LIMIT_STEPS),
        FLAG("optimizer", FLAG_STRING, &optimizer, "adamw|sgd", "optimizer (default adamw)"),
        FLAG_RANGED("lr", FLAG_FLOAT, &cfg.optim.lr, "X", "peak learning rate (default 3e-4)",
                    NUM_ABOVE(0, 10)),
        FLAG_RANGED("min-lr", FLAG_FLOAT, &min_lr, "X",
                    "learning rate at the end of the decay, at most --lr (default lr/10)",
                    NUM_RANGE(0, 10)),
        FLAG_RANGED("warmup", FLAG_LONG, &cfg.optim.warmup_steps, "N",
                    "linear warm-up steps (default 0)", LIMIT_COUNT0),
        FLAG_RANGED("decay-steps", FLAG_LONG, &decay_steps, "N",
                    "cosine decay reaches min-lr at this step; 0: constant lr (default: --steps)",
                    LIMIT_COUNT0),
        FLAG_RANGED("weight-decay", FLAG_FLOAT, &weight_decay, "X",
                    "decoupled weight decay on matrices (default 0.1 adamw, 0 sgd)",
                    NUM_RANGE(0, 10)),
        FLAG_RANGED("beta1", FLAG_FLOAT, &cfg.optim.beta1, "X", "AdamW first moment (default 0.9)",
                    NUM_BELOW(0, 1)),
        FLAG_RANGED("beta2", FLAG_FLOAT, &cfg.optim.beta2, "X",
                    "AdamW second moment (default 0.95)", NUM_BELOW(0, 1)),
        FLAG_RANGED("momentum", FLAG_FLOAT, &cfg.optim.momentum, "X", "SGD momentum (default 0.9)",
                    NUM_BELOW(0, 1)),
        FLAG_RANGED("grad-clip", FLAG_FLOAT, &cfg.optim.grad_clip, "X",
                    "clip the global gradient norm to X; 0 disables (default 1.0)",
                    NUM_RANGE(0, 1e6)),
        FLAG("seed", FLAG_U64, &cfg.seed, "N", "initialisation and data order (default 1)"),
        FLAG("precision", FLAG_STRING, &precision, "fp32|bf16",
             "arithmetic: bf16 multiplies bf16 operands with float sums and stores activations "
             "as bf16, keeping float master weights, LayerNorm, softmax, loss and optimizer "
             "(default fp32; docs/bf16.md)"),
        FLAG(
            "bf16-kernel", FLAG_STRING, &bf16_kernel, "auto|amx|avx512bf16|portable",
            "bf16's products: AMX tiles, AVX512_BF16's VDPBF16PS, or operands rounded to bf16 "
            "and multiplied by the fp32 product (--kernel) on any CPU (default auto: AMX where the "
            "CPU has it, else portable; avx512bf16 only when named)"),
        FLAG("kernel", FLAG_STRING, &fp32_kernel, "auto|avx512|avx2|generic|openblas",
             "fp32 products (and bf16's portable ones): pipetrain's blocked product for AVX-512, "
             "for AVX2+FMA, in plain C, or OpenBLAS's sgemm (default auto: avx512 where the CPU "
             "has AVX-512F, else avx2, else openblas, whatever OPENBLAS_CORETYPE says; each is "
             "checked against a reference product first; docs/performance.md)"),
        FLAG("data", FLAG_LIST, &data, "PATH",
             "text file or directory, token file (*.bin), or digits.csv.gz; repeatable"),
        FLAG("tokenizer", FLAG_STRING, &cfg.tokenizer, "PATH",
             "encode the text with this BPE tokenizer: tokenizer.json, or a folder holding it or "
             "vocab.json and merges.txt (default: text is bytes)"),
        FLAG("data-format", FLAG_STRING, &data_format,
             "auto|text|tokens|digits|synthetic-regression",
             "how to read --data (default auto: a model reading floats the digits, or "
             "synthetic-regression for an mse loss: y = x A + noise, seeded, no --data; "
             "*.bin tokens, else text)"),
        FLAG("val-data", FLAG_STRING, &cfg.val_data, "FILE",
             "validation token file (default: the last 10% of the data)"),
        FLAG_RANGED("eval-every", FLAG_INT, &cfg.eval_every, "K",
                    "validation every K steps and at the end; 0: at the end (default 0)",
                    LIMIT_COUNT0),
        FLAG_RANGED("eval-batches", FLAG_INT, &cfg.eval_batches, "N",
                    "gpt batches per validation (default 8)", LIMIT_BATCH),
        FLAG("save", FLAG_STRING, &cfg.save, "PATH",
             "write a checkpoint at the end: a folder (the whole run's state, which --resume "
             "continues exactly, and a model folder transformers loads; each stage writes its "
             "own shard) or, when PATH ends in .safetensors, one file of the weights alone"),
        FLAG("save-dtype", FLAG_STRING, &save_dtype, "fp32|bf16",
             "with --save FILE.safetensors: bf16 writes the weights as BF16 for inference and "
             "Hugging Face (checkpoint folders keep float master weights; default fp32)"),
        FLAG_RANGED("save-every", FLAG_LONG, &cfg.save_every, "N",
                    "with --save: also every N steps (default 0: off)", LIMIT_COUNT0),
        FLAG("resume", FLAG_STRING, &cfg.resume, "PATH",
             "continue the run saved in PATH (a file or a folder, saved under any stages, "
             "replicas, partition or schedule)"),
        FLAG("init-from", FLAG_STRING, &cfg.init_from, "PATH",
             "start from these weights with a fresh optimizer, at step 0: a checkpoint or a "
             "Hugging Face GPT-2 (a folder with config.json, or a .safetensors file); the "
             "model is its config, so model flags may only repeat it (--seq may be shorter)"),
        FLAG_RANGED("max-skipped-steps", FLAG_INT, &cfg.max_skipped_steps, "K",
                    "a step whose gradient is not finite is skipped and reported; K in a row "
                    "end the run with an error (default 3)",
                    NUM_RANGE(1, 1000000)),
        FLAG("fresh-optimizer", FLAG_BOOL, &cfg.resume_fresh_optimizer, NULL,
             "with --resume: accept a checkpoint of weights alone and start the optimizer's "
             "moments from zero"),
        FLAG("metrics", FLAG_STRING, &cfg.metrics, "FILE", "JSONL log, one line per step"),
        FLAG("tensorboard", FLAG_STRING, &cfg.tensorboard, "DIR",
             "TensorBoard event files in DIR (made if missing): the curves of every step and "
             "the configuration; a resumed run continues them (tensorboard --logdir DIR)"),
        FLAG_RANGED("stages", FLAG_INT, &cfg.pipeline.stages, "P",
                    "pipeline stages: threads, or MPI ranks under mpirun (default 1)",
                    LIMIT_STAGES),
        FLAG_RANGED("replicas", FLAG_INT, &cfg.pipeline.replicas, "D",
                    "data-parallel copies of every stage, under mpirun -np P*D; with pipedream, "
                    "PipeDream's round-robin 1F1B-RR (default 1)",
                    LIMIT_REPLICAS),
        FLAG_RANGED("zero", FLAG_INT, &cfg.pipeline.zero, "Z",
                    "shard the optimizer state across each stage's replicas (ZeRO): 1 each of "
                    "the D replicas keeps 1/D of the moments, sums only its shard's gradients "
                    "and updates it, then the shards are gathered (losses bit-identical to 0); 2 "
                    "also keeps only the owned shard of the gradients: each block's weight "
                    "gradient is reduce-scattered right after every backward (the replicas' "
                    "traffic times the micro-batches per replica; losses equal to 0's within "
                    "rounding); in bf16 runs each replica keeps the float master weights of "
                    "its shards alone; needs --replicas 2 or more and a synchronous schedule "
                    "(default 0; docs/layouts.md)",
                    LIMIT_ZERO),
        FLAG_RANGED("tensor", FLAG_INT, &cfg.pipeline.tensor, "T",
                    "tensor-parallel slices of every stage (gpt: Megatron's split of heads, MLP "
                    "and vocabulary; a spec: its column_linear and row_linear), under mpirun "
                    "-np P*T*D; rank = (stage x D + replica) x T + slice (default 1; "
                    "docs/layouts.md)",
                    LIMIT_REPLICAS),
        FLAG("sequence-parallel", FLAG_BOOL, &cfg.pipeline.sequence_parallel, NULL,
             "with --tensor T: each slice holds 1/T of every sample's positions between the "
             "tensor-parallel regions (Megatron's sequence parallelism: the LayerNorms, "
             "residuals and stage boundaries); all-reduces become all-gathers and "
             "reduce-scatters; gpt (fp32 or bf16), T dividing the sequence (docs/layouts.md)"),
        FLAG("schedule", FLAG_STRING, &cfg.pipeline.schedule, "NAME",
             "gpipe, 1f1b, interleaved, loopedbfs, zbh1, zbh2, zbv, zb2p or pipedream (default "
             "1f1b)"),
        FLAG("schedule-file", FLAG_STRING, &cfg.pipeline.schedule_file, "FILE",
             "a schedule in the text format (docs/schedules.md); overrides --schedule"),
        FLAG("defer-w", FLAG_BOOL, &cfg.pipeline.defer_w, NULL,
             "gpipe, 1f1b, interleaved, loopedbfs: a backward followed by a forward that waits "
             "for nothing from another worker (the first stage's) runs as B, that forward, then "
             "W, so its activation leaves a weight pass sooner: hides a slow link's transfers, "
             "for one more micro-batch's activations held on that worker (docs/multi-host.md)"),
        FLAG_RANGED("virtual", FLAG_INT, &cfg.pipeline.virtual_stages, "V",
                    "chunks per worker for interleaved and loopedbfs (default: the schedule's own)",
                    LIMIT_VIRTUAL),
        FLAG("balance", FLAG_STRING, &balance, "N1,N2,..",
             "blocks per chunk, each in [1, 16777216], summing to the model's block count "
             "(default: profile and choose)"),
        FLAG_RANGED("max-stage-memory", FLAG_LONG, &max_stage_memory, "BYTES",
                    "memory cap per chunk for the automatic partition (default 0: none)",
                    NUM_RANGE(0, 1e15)),
        FLAG("checkpoint-activations", FLAG_BOOL, &cfg.pipeline.checkpoint_activations, NULL,
             "keep only each chunk's input per micro-batch; recompute before backward"),
        FLAG("repack-weights", FLAG_BOOL, &cfg.model.repack_weights, NULL,
             "pack each weight matrix for every product that reads it instead of once per "
             "optimizer step (pipetrain's own fp32 products, and bf16's portable ones on them, "
             "keep it packed for the forward and the backward, twice the matrices' bytes per "
             "stage, and bf16's AMX products twice their bf16 copy's bytes; this keeps "
             "nothing)"),
        FLAG_RANGED("threads", FLAG_INT, &threads, "N",
                    "BLAS threads per worker; 0: cores / stages, at least 1 (default 0)",
                    NUM_RANGE(0, 1024)),
        FLAG("bind-cores", FLAG_BOOL, &cfg.pipeline.bind_cores, NULL,
             "on threads: bind each worker and its --threads to CPUs of its own (refused where "
             "the process may use fewer CPUs than stages x replicas x tensor slices x threads; "
             "under mpirun use mpirun's --bind-to core)"),
        FLAG("no-lend", FLAG_BOOL, &no_lend, NULL,
             "on threads, each worker on one thread and a core of its own: a worker waiting "
             "for a message never runs a part of another worker's products and passes (by "
             "default it does, which fills the pipeline's bubbles and changes no bit)"),
        FLAG("quiet", FLAG_BOOL, &quiet, NULL,
             "no progress while training: only the summary at the end and errors"),
        FLAG("trace", FLAG_STRING, &cfg.trace, "FILE",
             "Chrome/Perfetto trace of the last step (or of --trace-steps): a track per "
             "worker, its activation bytes, micro-batches and transport bytes in flight "
             "(under mpirun: FILE.rank<N> per rank)"),
        FLAG("trace-steps", FLAG_STRING, &trace_steps, "A:B",
             "with --trace: steps A to B on one time axis, counted from 1 as the progress "
             "line and --metrics count them (N alone: step N; default: the last step)"),
    };
    int n = (int)(sizeof flags / sizeof flags[0]);
    int rc = flags_parse("train", summary, flags, n, argc, argv);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (model_spec && !flags_given(flags, n, "model"))
        model = "spec";
    if (check_modes(flags, n, model, optimizer, data_format, &data) ||
        check_optim(flags, n, min_lr, cfg.optim.lr, decay_steps))
        return 2;
    if (trace_steps &&
        num_long_span("train", "trace-steps", trace_steps, NUM_RANGE(1, (double)cfg.steps),
                      &cfg.trace_first, &cfg.trace_last))
        return 2;

    uint64_t seed = cfg.seed;
    if (model_spec && pt_model_config_spec_load(model_spec, &cfg.model) != PT_OK) {
        fprintf(stderr, "pipetrain train: --model-spec: %s\n", pt_last_error());
        return 2;
    }
    if (!strcmp(model, "mlp")) {
        int w[PT_MLP_MAX_WIDTHS], nw;
        if (num_int_list("train", "widths", widths, LIMIT_WIDTH, w, PT_MLP_MAX_WIDTHS, &nw))
            return 2;
        cfg.model = pt_model_config_mlp(nw, w);
    }
    cfg.model.seed = seed;
    if (pt_precision_parse(precision, &cfg.model.precision) != PT_OK ||
        pt_precision_parse(save_dtype, &cfg.save_dtype) != PT_OK ||
        pt_bf16_set_kernel(bf16_kernel) != PT_OK || pt_fp32_set_kernel(fp32_kernel) != PT_OK) {
        fprintf(stderr, "pipetrain train: %s\n", pt_last_error());
        return 2;
    }
    if (cfg.init_from && cfg.resume) {
        fprintf(stderr, "pipetrain train: --init-from and --resume both given: a run starts "
                        "from weights or continues a run, not both\n");
        return 2;
    }
    if (cfg.init_from) {
        /* how to train, not what the file holds */
        pt_precision keep = cfg.model.precision;
        int repack = cfg.model.repack_weights;
        if ((rc = model_from_checkpoint("train", cfg.init_from, flags, n, &cfg.model)) != 0)
            return rc;
        cfg.model.precision = keep, cfg.model.repack_weights = repack;
        model_note_dropout("train", cfg.init_from);
    }
    const char *kinds[] = {"auto", "text", "tokens", "digits", "synthetic-regression"};
    int k = 0;
    while (k < 5 && strcmp(data_format, kinds[k]))
        k++;
    cfg.data_kind = (pt_data_kind)k;
    int moments = 2;
    if (!strcmp(optimizer, "sgd")) {
        pt_optim_config o = pt_optim_config_default(PT_OPTIM_SGD);
        o.lr = cfg.optim.lr, o.warmup_steps = cfg.optim.warmup_steps;
        o.momentum = cfg.optim.momentum, o.grad_clip = cfg.optim.grad_clip;
        cfg.optim = o;
        moments = 1;
    }
    cfg.optim.min_lr = min_lr >= 0 ? min_lr : cfg.optim.lr / 10;
    cfg.optim.decay_steps = decay_steps >= 0 ? decay_steps : cfg.steps;
    if (weight_decay >= 0)
        cfg.optim.weight_decay = weight_decay;
    cfg.data = data.items;
    cfg.n_data = data.n;
    cfg.pipeline.blas_threads = threads;
    cfg.pipeline.lend_idle = !no_lend;
    cfg.pipeline.max_stage_memory = (size_t)max_stage_memory;
    if (balance) {
        int nb;
        if (num_int_list("train", "balance", balance, NUM_RANGE(1, 1 << 24), balance_list, 1024,
                         &nb))
            return 2;
        cfg.pipeline.balance = balance_list;
        cfg.pipeline.n_balance = nb;
    }
    /* text goes through the tokenizer of the model folder it starts from */
    const char *from = cfg.init_from ? cfg.init_from : cfg.resume;
    char folder_tokenizer[4096];
    if (!cfg.tokenizer && from && cfg.model.kind == PT_MODEL_GPT &&
        !reads_tokens(data_format, 1, &data) &&
        (cfg.tokenizer = model_tokenizer(from, folder_tokenizer, sizeof folder_tokenizer)))
        fprintf(stderr, "pipetrain train: the text is encoded with the tokenizer in %s\n",
                cfg.tokenizer);
    if (cfg.tokenizer && (rc = tokenizer_vocab(flags, n, &cfg)) != 0)
        return rc;
    /* the sizes the flags ask for, before anything is allocated; a batch
     * that the micro-batches do not divide is pt_train's to refuse */
    if (model_limits_shape("train", &cfg.model, cfg.batch) ||
        (cfg.batch % cfg.microbatches == 0 &&
         model_limits_memory("train", &cfg.model, cfg.batch / cfg.microbatches,
                             "--batch/--microbatches", moments,
                             !pt_transport_launched_by_mpirun())))
        return 2;

    /* mpirun hands ranks a pseudo-terminal even when its own output is a
     * file: print log lines there */
    progress p = {.tty = isatty(fileno(stdout)) && !pt_transport_launched_by_mpirun(),
                  .quiet = quiet,
                  .log_every = cfg.steps >= 20 ? cfg.steps / 20 : 1};
    cfg.on_report = on_report;
    cfg.user = &p;
    if (!quiet && !pt_transport_launched_by_mpirun())
        printf("products: fp32 on %s%s%s\n", pt_fp32_kernel(),
               cfg.model.precision == PT_PRECISION_BF16 ? ", bf16 on " : "",
               cfg.model.precision == PT_PRECISION_BF16 ? pt_bf16_kernel() : "");
    if ((stop_save = cfg.save)) {
        signal(SIGTERM, on_stop);
        signal(SIGINT, on_stop);
    }
    pt_train_result result;
    rc = pt_train(&cfg, &result);
    if (rc != PT_OK) {
        if (p.drawn)
            printf("\n");
        fprintf(stderr, "pipetrain train: %s\n", pt_last_error());
        if (rc == PT_ETRANSPORT && cfg.save && result.saved_step >= 0)
            fprintf(stderr,
                    "pipetrain train: the last checkpoint saved is %s at step %ld; add "
                    "--resume %s to continue\n",
                    cfg.save, result.saved_step, cfg.save);
        else if (rc == PT_ETRANSPORT)
            fprintf(stderr, "pipetrain train: no checkpoint was saved in this run\n");
        return rc == PT_EINVAL ? 2 : 1;
    }
    if (!result.is_main)
        return 0;
    printf("done: %ld steps, loss %.4f", result.steps, result.loss);
    if (!isnan(result.val_loss))
        printf(", val_loss %.4f", result.val_loss);
    if (result.val_accuracy >= 0)
        printf(", held-out accuracy %.1f%%", 100.0 * result.val_accuracy);
    printf(", %.0f %s/s\n", result.tokens_per_s,
           cfg.model.kind == PT_MODEL_GPT ? "tokens" : "samples");
    if (cfg.model.precision == PT_PRECISION_BF16)
        printf("precision bf16: products on %s\n", pt_bf16_kernel());
    if (cfg.save)
        printf("saved %s\n", cfg.save);
    if (strchr(result.partition, ','))
        printf("partition: %s\n", result.partition);
    if (cfg.pipeline.stages > 1 && result.bubbles[0])
        printf("bubble per worker in the last step, measured vs simulated:\n%s", result.bubbles);
    if (result.step_times[0])
        printf("last step per worker, measured vs simulated with the link:\n%s", result.step_times);
    if (result.memory[0])
        printf("memory per rank:\n%s", result.memory);
    return 0;
}
