/* cmd_train.c: `pipetrain train`: reads the flags into a pt_train_config,
 * runs pt_train() and shows its progress: a one-line bar on a terminal,
 * plain log lines otherwise. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "comm/transport.h"
#include "pipetrain.h"

typedef struct {
    int tty;
    long log_every;
} progress;

static void on_report(const pt_train_report *r, void *user)
{
    progress *p = user;
    if (p->tty) {
        int width = 30, done = (int)(width * r->step / (r->steps ? r->steps : 1));
        printf("\r[%.*s%*s] step %ld/%ld  loss %.4f  %6.0f tok/s  ETA %4.0fs", done,
               "==============================", width - done, "", r->step, r->steps, r->loss,
               r->tokens_per_s, r->eta_s);
        if (r->has_val) {
            printf("  val %.4f", r->val_loss);
            if (r->val_accuracy >= 0)
                printf(" (acc %.1f%%)", 100.0 * r->val_accuracy);
            printf("\n");
        }
        fflush(stdout);
        return;
    }
    if (r->step % p->log_every && !r->has_val && r->step != 1)
        return;
    printf("step %ld/%ld  loss %.4f  lr %.2e  %.0f tok/s  %.0f ms/step", r->step, r->steps, r->loss,
           r->lr, r->tokens_per_s, r->step_ms);
    if (r->has_val) {
        printf("  val_loss %.4f", r->val_loss);
        if (r->val_accuracy >= 0)
            printf("  val_accuracy %.1f%%", 100.0 * r->val_accuracy);
    }
    printf("\n");
    fflush(stdout);
}

static const char summary[] =
    "Trains a gpt on text (or token files) or an mlp on the digits data set.\n"
    "To resume, repeat the command that saved the checkpoint and add --resume PATH:\n"
    "the model flags must match the checkpoint's (a mismatch is refused), and the\n"
    "run continues its parameters, optimizer moments and data position. --steps\n"
    "counts from 0 also when resuming: a run saved at step 200 and resumed with\n"
    "--steps 400 trains 200 more steps.";

int cmd_train(int argc, char **argv)
{
    pt_train_config cfg = pt_train_config_default();
    const char *model = "gpt", *widths = "64,256,10", *optimizer = "adamw", *data_format = "auto";
    flag_list data = {.n = 0};
    float min_lr = -1.0f, weight_decay = -1.0f;
    long decay_steps = -1;
    int threads = 0;
    const char *balance = NULL;
    long max_stage_memory = 0;
    int balance_list[1024];
    flag flags[] = {
        {"model", FLAG_STRING, &model, "gpt|mlp", "model family (default gpt)"},
        {"layers", FLAG_INT, &cfg.model.n_layer, "N", "gpt transformer blocks (default 4)"},
        {"heads", FLAG_INT, &cfg.model.n_head, "N", "gpt attention heads (default 4)"},
        {"embd", FLAG_INT, &cfg.model.n_embd, "N", "gpt channels (default 128)"},
        {"seq", FLAG_INT, &cfg.model.seq_len, "N", "gpt tokens per sample (default 128)"},
        {"vocab", FLAG_INT, &cfg.model.vocab, "N", "gpt vocabulary; text is bytes (default 256)"},
        {"widths", FLAG_STRING, &widths, "W0,W1,..", "mlp layer widths (default 64,256,10)"},
        {"batch", FLAG_INT, &cfg.batch, "B", "samples per optimizer step (default 16)"},
        {"microbatches", FLAG_INT, &cfg.microbatches, "M",
         "cut each batch into M micro-batches of B/M; M must divide B (default 1)"},
        {"steps", FLAG_LONG, &cfg.steps, "N", "total optimizer steps (default 200)"},
        {"optimizer", FLAG_STRING, &optimizer, "adamw|sgd", "optimizer (default adamw)"},
        {"lr", FLAG_FLOAT, &cfg.optim.lr, "X", "peak learning rate (default 3e-4)"},
        {"min-lr", FLAG_FLOAT, &min_lr, "X",
         "learning rate at the end of the decay (default lr/10)"},
        {"warmup", FLAG_LONG, &cfg.optim.warmup_steps, "N", "linear warm-up steps (default 0)"},
        {"decay-steps", FLAG_LONG, &decay_steps, "N",
         "cosine decay reaches min-lr at this step (default: --steps)"},
        {"weight-decay", FLAG_FLOAT, &weight_decay, "X",
         "decoupled weight decay on matrices (default 0.1 adamw, 0 sgd)"},
        {"beta1", FLAG_FLOAT, &cfg.optim.beta1, "X", "AdamW first moment (default 0.9)"},
        {"beta2", FLAG_FLOAT, &cfg.optim.beta2, "X", "AdamW second moment (default 0.95)"},
        {"momentum", FLAG_FLOAT, &cfg.optim.momentum, "X", "SGD momentum (default 0.9)"},
        {"grad-clip", FLAG_FLOAT, &cfg.optim.grad_clip, "X",
         "clip the global gradient norm to X; 0 disables (default 1.0)"},
        {"seed", FLAG_U64, &cfg.seed, "N", "initialisation and data order (default 1)"},
        {"data", FLAG_LIST, &data, "PATH",
         "text file or directory, token file (*.bin), or digits.csv.gz; repeatable"},
        {"data-format", FLAG_STRING, &data_format, "auto|text|tokens|digits",
         "how to read --data (default auto: mlp digits, *.bin tokens, else text)"},
        {"val-data", FLAG_STRING, &cfg.val_data, "FILE",
         "validation token file (default: the last 10% of the data)"},
        {"eval-every", FLAG_INT, &cfg.eval_every, "K",
         "validation every K steps and at the end; 0: at the end (default 0)"},
        {"eval-batches", FLAG_INT, &cfg.eval_batches, "N", "batches per validation (default 8)"},
        {"save", FLAG_STRING, &cfg.save, "PATH",
         "write a checkpoint at the end: a folder in Hugging Face's sharded layout, each "
         "stage writing its own shard (one model.safetensors for one stage), or one file "
         "when PATH ends in .safetensors"},
        {"save-every", FLAG_LONG, &cfg.save_every, "N", "also every N steps (default 0: off)"},
        {"resume", FLAG_STRING, &cfg.resume, "PATH",
         "continue the run saved in PATH (a file or a folder, saved under any stages, "
         "replicas, partition or schedule)"},
        {"max-skipped-steps", FLAG_INT, &cfg.max_skipped_steps, "K",
         "a step whose gradient is not finite is skipped and reported; K in a row end the "
         "run with an error (default 3)"},
        {"fresh-optimizer", FLAG_BOOL, &cfg.resume_fresh_optimizer, NULL,
         "with --resume: accept a checkpoint of weights alone and start the optimizer's "
         "moments from zero"},
        {"metrics", FLAG_STRING, &cfg.metrics, "FILE", "JSONL log, one line per step"},
        {"stages", FLAG_INT, &cfg.pipeline.stages, "P",
         "pipeline stages: threads, or MPI ranks under mpirun (default 1)"},
        {"replicas", FLAG_INT, &cfg.pipeline.replicas, "D",
         "data-parallel copies of every stage, under mpirun -np P*D; with pipedream, "
         "PipeDream's round-robin 1F1B-RR (default 1)"},
        {"schedule", FLAG_STRING, &cfg.pipeline.schedule, "NAME",
         "gpipe, 1f1b, interleaved, loopedbfs, zbh1, zbv or pipedream (default 1f1b)"},
        {"schedule-file", FLAG_STRING, &cfg.pipeline.schedule_file, "FILE",
         "a schedule in the text format (docs/schedules.md); overrides --schedule"},
        {"virtual", FLAG_INT, &cfg.pipeline.virtual_stages, "V",
         "chunks per worker for interleaved and loopedbfs (default: the schedule's own)"},
        {"balance", FLAG_STRING, &balance, "N1,N2,..",
         "blocks per chunk, summing to the model's block count (default: profile and "
         "choose)"},
        {"max-stage-memory", FLAG_LONG, &max_stage_memory, "BYTES",
         "memory cap per chunk for the automatic partition (default 0: none)"},
        {"checkpoint-activations", FLAG_BOOL, &cfg.pipeline.checkpoint_activations, NULL,
         "keep only each chunk's input per micro-batch; recompute before backward"},
        {"threads", FLAG_INT, &threads, "N",
         "BLAS threads per worker (default: cores / stages, at least 1)"},
        {"trace", FLAG_STRING, &cfg.trace, "FILE",
         "Chrome/Perfetto trace of the last step, one track per worker (under "
         "mpirun: FILE.rank<N> per rank)"},
    };
    int n = (int)(sizeof flags / sizeof flags[0]);
    int rc = flags_parse("train", summary, flags, n, argc, argv);
    if (rc)
        return rc == 1 ? 0 : 2;

    uint64_t seed = cfg.seed;
    if (!strcmp(model, "mlp")) {
        int w[PT_MLP_MAX_WIDTHS];
        int nw = flags_int_list("train", "widths", widths, w, PT_MLP_MAX_WIDTHS);
        if (nw < 0)
            return 2;
        cfg.model = pt_model_config_mlp(nw, w);
    } else if (strcmp(model, "gpt")) {
        fprintf(stderr, "pipetrain train: --model '%s': expected gpt or mlp\n", model);
        return 2;
    }
    cfg.model.seed = seed;
    const char *kinds[] = {"auto", "text", "tokens", "digits"};
    int k = 0;
    while (k < 4 && strcmp(data_format, kinds[k]))
        k++;
    if (k == 4) {
        fprintf(stderr,
                "pipetrain train: --data-format '%s': expected auto, text, tokens or "
                "digits\n",
                data_format);
        return 2;
    }
    cfg.data_kind = (pt_data_kind)k;
    if (!strcmp(optimizer, "sgd")) {
        pt_optim_config o = pt_optim_config_default(PT_OPTIM_SGD);
        o.lr = cfg.optim.lr, o.warmup_steps = cfg.optim.warmup_steps;
        o.momentum = cfg.optim.momentum, o.grad_clip = cfg.optim.grad_clip;
        cfg.optim = o;
    } else if (strcmp(optimizer, "adamw")) {
        fprintf(stderr, "pipetrain train: --optimizer '%s': expected adamw or sgd\n", optimizer);
        return 2;
    }
    cfg.optim.min_lr = min_lr >= 0 ? min_lr : cfg.optim.lr / 10;
    cfg.optim.decay_steps = decay_steps >= 0 ? decay_steps : cfg.steps;
    if (weight_decay >= 0)
        cfg.optim.weight_decay = weight_decay;
    if (data.n == 0) {
        fprintf(stderr, "pipetrain train: --data is required (see pipetrain train --help)\n");
        return 2;
    }
    cfg.data = data.items;
    cfg.n_data = data.n;
    if (threads < 0 || max_stage_memory < 0) {
        fprintf(stderr, "pipetrain train: --threads and --max-stage-memory must be >= 0\n");
        return 2;
    }
    cfg.pipeline.blas_threads = threads;
    cfg.pipeline.max_stage_memory = (size_t)max_stage_memory;
    if (balance) {
        int nb = flags_int_list("train", "balance", balance, balance_list, 1024);
        if (nb < 0)
            return 2;
        cfg.pipeline.balance = balance_list;
        cfg.pipeline.n_balance = nb;
    }

    /* mpirun hands ranks a pseudo-terminal even when its own output is a
     * file: print log lines there */
    progress p = {.tty = isatty(fileno(stdout)) && !pt_transport_launched_by_mpirun(),
                  .log_every = cfg.steps >= 20 ? cfg.steps / 20 : 1};
    cfg.on_report = on_report;
    cfg.user = &p;
    pt_train_result result;
    rc = pt_train(&cfg, &result);
    if (rc != PT_OK) {
        if (p.tty)
            printf("\n");
        fprintf(stderr, "pipetrain train: %s\n", pt_last_error());
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
    if (cfg.save)
        printf("saved %s\n", cfg.save);
    if (cfg.pipeline.stages > 1 && result.bubbles[0])
        printf("bubble per worker in the last step, measured vs simulated:\n%s", result.bubbles);
    if (result.memory[0])
        printf("memory per worker:\n%s", result.memory);
    return 0;
}
