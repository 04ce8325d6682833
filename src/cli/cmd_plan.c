/* cmd_plan.c: `pipetrain plan`: before a pipelined run, measures the model's
 * blocks on this machine (forward, backward-input, backward-weight time and
 * activation bytes per micro-batch), chooses the partition the pipeline
 * would choose (src/plan/), prints each stage's time and memory, then plays
 * every synchronous schedule through the simulator for a range of
 * micro-batch counts and recommends the fastest (the least memory among
 * those within 2% of it).
 *
 * Exit status: 0 done; 1 the model or the profile failed; 2 a bad flag or
 * value (the message says which). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/model_limits.h"
#include "pipetrain.h"
#include "plan/partition.h"

#define MAX_MS 16

typedef struct {
    int stages, virtual_stages, batch, reps;
    int ms[MAX_MS], n_ms;
    size_t max_memory;
    int tensor, replicas, zero, ranks, ms_given; /* layouts (cmd_plan_layouts.c) */
    int sequence;                                /* --sequence-parallel */
    double memory_limit;
    double link_bandwidth, link_latency; /* bytes/s (0: no limit), seconds */
    int balance[PT_PARTITION_MAX_CHUNKS], n_balance;
    pt_model_config model;
} options;

static void usage(FILE *f)
{
    fprintf(f, "usage: pipetrain plan --stages P [--microbatches M,...] [model flags]\n"
               "       pipetrain plan --stages P --tensor T --replicas D [--zero Z] [...]\n"
               "       pipetrain plan --ranks N [--zero Z] [--memory-limit B] [...]\n"
               "       pipetrain plan --cluster FILE --model NAME|FILE --global-batch B [...]\n"
               "       pipetrain plan --check FILE\n\n"
               "profile the model, choose a partition and compare schedules by simulation;\n"
               "with --cluster, rank layouts for a cluster described in FILE, and with\n"
               "--check, replay published runs ('pipetrain plan --cluster x --help' lists\n"
               "their flags)\n\n"
               "  --stages P            pipeline stages (default 2; range [1, 1024])\n"
               "  --microbatches LIST   micro-batch counts to compare, like 4,8,16, up to 16\n"
               "                        counts in [1, 1048576] (default P, 2P, 4P, 8P)\n"
               "  --virtual V           chunks per worker for interleaved (default 2; range\n"
               "                        [1, 64])\n"
               "  --balance LIST        layers per stage instead of the partitioner's choice (a\n"
               "                        gpt's or mlp's blocks, a spec's layers)\n"
               "  --max-stage-memory B  bytes per stage the partition must fit (default 0: no\n"
               "                        cap; range [0, 1e15])\n"
               "  --reps N              profiling repetitions per block; blocks that do the\n"
               "                        same work are timed once, up to 3N times (default\n"
               "                        3; range [1, 1000])\n"
               "  --model gpt|mlp       (default gpt)\n"
               "  --model-spec FILE|TEXT  a model from a list of layers instead\n"
               "                        (docs/models.md)\n"
               "  --layers N            gpt transformer blocks (default 4; range [1, 1024])\n"
               "  --heads N             gpt attention heads (default 4; range [1, 1024])\n"
               "  --embd N              gpt channels (default 128; range [1, 65536])\n"
               "  --seq N               gpt tokens per sample (default 128; range [1, 1048576])\n"
               "  --vocab N             gpt vocabulary (default 256; range [1, 16777216])\n"
               "  --widths LIST         mlp layer widths, each in [1, 16777216] (default\n"
               "                        784,256,256,10)\n"
               "  (a model whose largest block and one micro-batch's activations exceed this\n"
               "  machine's memory is refused before profiling)\n"
               "  --batch N             samples per micro-batch (default 1; range [1, 1048576])\n"
               "  --link-bandwidth R    the link between two workers (100mbit, 1gbit, 12.5MB/s or\n"
               "                        bytes/s): each activation and gradient between stages\n"
               "                        holds it for its bytes / R, one after another per\n"
               "                        direction (default: no limit)\n"
               "  --link-latency T      seconds (or 50us, 0.2ms) a transfer takes beyond its wire\n"
               "                        time (default 0)\n\n"
               "layouts of stages x tensor slices x replicas (1f1b, AdamW; docs/layouts.md):\n"
               "  --tensor T            tensor-parallel slices of every stage (gpt, or a spec's\n"
               "                        column_linear and row_linear; default 1)\n"
               "  --replicas D          data-parallel replicas of every stage (default 1)\n"
               "  --zero Z              0, 1 or 2: the optimizer state sharded over the replicas\n"
               "                        (default 0); with --tensor, --replicas or --zero: the\n"
               "                        memory and step time per rank of that layout\n"
               "  --sequence-parallel   with --tensor T >= 2 (or --ranks: where T >= 2):\n"
               "                        Megatron's sequence parallelism (gpt)\n"
               "  --ranks N             instead, every P x T x D = N the model allows (--zero\n"
               "                        where D > 1), sorted by predicted step time\n"
               "  --memory-limit B      bytes a rank may hold: layouts above it are marked\n"
               "                        (default 0: no cap; range [0, 1e15])\n"
               "  (the micro-batches per step are the first of --microbatches, default 8)\n");
}

static int parse(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->stages = 2, o->virtual_stages = 2, o->batch = 1, o->reps = 3;
    o->tensor = 1, o->replicas = 1;
    o->model = pt_model_config_gpt();
    int widths[PT_MLP_MAX_WIDTHS] = {784, 256, 256, 10}, n_widths = 4;
    int mlp = 0, gpt_flag = 0, widths_given = 0, spec = 0, model_given = 0;
    long max_memory = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(f, "--sequence-parallel")) {
            o->sequence = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "pipetrain plan: %s needs a value (see --help)\n", f);
            return 2;
        }
        const char *v = argv[++i];
        const struct {
            const char *name;
            int *field;
            num_range range;
            int gpt; /* shapes the gpt */
        } ints[] = {{"--stages", &o->stages, LIMIT_STAGES, 0},
                    {"--virtual", &o->virtual_stages, LIMIT_VIRTUAL, 0},
                    {"--reps", &o->reps, NUM_RANGE(1, 1000), 0},
                    {"--batch", &o->batch, LIMIT_BATCH, 0},
                    {"--layers", &o->model.n_layer, LIMIT_LAYERS, 1},
                    {"--heads", &o->model.n_head, LIMIT_HEADS, 1},
                    {"--embd", &o->model.n_embd, LIMIT_EMBD, 1},
                    {"--seq", &o->model.seq_len, LIMIT_SEQ, 1},
                    {"--vocab", &o->model.vocab, LIMIT_VOCAB, 1},
                    {"--tensor", &o->tensor, NUM_RANGE(1, 1024), 0},
                    {"--replicas", &o->replicas, NUM_RANGE(1, 1024), 0},
                    {"--zero", &o->zero, NUM_RANGE(0, 2), 0},
                    {"--ranks", &o->ranks, NUM_RANGE(1, 4096), 0}};
        size_t k = 0, n_ints = sizeof ints / sizeof ints[0];
        while (k < n_ints && strcmp(f, ints[k].name))
            k++;
        int rc = 0;
        if (k < n_ints) {
            rc = num_int("plan", f, v, ints[k].range, ints[k].field);
            gpt_flag |= ints[k].gpt;
        } else if (!strcmp(f, "--microbatches"))
            rc = num_int_list("plan", f, v, LIMIT_MICROBATCHES, o->ms, MAX_MS, &o->n_ms);
        else if (!strcmp(f, "--balance"))
            rc = num_int_list("plan", f, v, NUM_RANGE(1, 1 << 24), o->balance,
                              PT_PARTITION_MAX_CHUNKS, &o->n_balance);
        else if (!strcmp(f, "--link-bandwidth"))
            rc = num_rate("plan", f, v, &o->link_bandwidth);
        else if (!strcmp(f, "--link-latency"))
            rc = num_seconds("plan", f, v, &o->link_latency);
        else if (!strcmp(f, "--max-stage-memory"))
            rc = num_long("plan", f, v, NUM_RANGE(0, 1e15), &max_memory);
        else if (!strcmp(f, "--memory-limit")) {
            long cap = 0;
            rc = num_long("plan", f, v, NUM_RANGE(0, 1e15), &cap);
            o->memory_limit = (double)cap;
        } else if (!strcmp(f, "--model-spec")) {
            uint64_t seed = o->model.seed;
            if (pt_model_config_spec_load(v, &o->model) != PT_OK) {
                fprintf(stderr, "pipetrain plan: --model-spec: %s\n", pt_last_error());
                return 2;
            }
            o->model.seed = seed;
            spec = 1;
        } else if (!strcmp(f, "--model")) {
            model_given = 1;
            if (strcmp(v, "gpt") && strcmp(v, "mlp"))
                return num_refuse("plan", f, v, "gpt or mlp");
            mlp = !strcmp(v, "mlp");
        } else if (!strcmp(f, "--widths")) {
            rc = num_int_list("plan", f, v, LIMIT_WIDTH, widths, PT_MLP_MAX_WIDTHS, &n_widths);
            widths_given = 1;
        } else {
            fprintf(stderr, "pipetrain plan: unknown flag '%s' (see --help)\n", f);
            return 2;
        }
        if (rc)
            return rc;
    }
    if (spec && (gpt_flag || widths_given || model_given)) {
        fprintf(stderr, "pipetrain plan: --model, --layers, --heads, --embd, --seq, --vocab and "
                        "--widths shape a gpt or an mlp; the spec (--model-spec) gives every "
                        "layer's shape\n");
        return 2;
    }
    if (!spec && (mlp ? gpt_flag : widths_given)) {
        fprintf(stderr, "pipetrain plan: %s\n",
                mlp ? "--layers, --heads, --embd, --seq and --vocab do nothing for an mlp (its "
                      "shape is --widths)"
                    : "--widths does nothing for a gpt (add --model mlp)");
        return 2;
    }
    o->max_memory = (size_t)max_memory;
    o->ms_given = o->n_ms ? o->ms[0] : 0;
    if (mlp) {
        pt_model_config g = o->model;
        o->model = pt_model_config_mlp(n_widths, widths);
        o->model.seed = g.seed;
    }
    if (!o->n_ms) {
        for (int k = 1; k <= 8; k *= 2)
            o->ms[o->n_ms++] = k * o->stages;
    }
    /* profiling runs one block at a time on a micro-batch */
    if (model_limits_shape("plan", &o->model, o->batch) ||
        model_limits_memory("plan", &o->model, o->batch, "--batch", 0, 0))
        return 2;
    return 0;
}

typedef struct {
    const char *name;
    int defer_w; /* the schedule with --defer-w */
    int M;
    double makespan, bubble;
    int peak;
} plan_row;

/* Chunk costs from the profile for a cut into K chunks, and (bytes not
 * NULL) the bytes of a transfer into each chunk. */
static int chunk_costs(const options *o, const pt_model *m, const pt_block_profile *prof,
                       int n_blocks, int K, int *balance, double *f, double *b, double *w,
                       double *bytes)
{
    if (o->n_balance && o->n_balance == K) {
        if (pt_partition_check_balance(o->balance, o->n_balance, K, n_blocks) != PT_OK)
            return PT_EINVAL;
        memcpy(balance, o->balance, sizeof(int) * (size_t)K);
    } else if (pt_partition_solve(prof, n_blocks, K, o->max_memory, o->stages, balance, NULL) !=
               PT_OK) {
        return PT_EINVAL;
    }
    for (int c = 0, first = 0; c < K; first += balance[c++]) {
        if (bytes) /* what crosses into chunk c: its first block's input */
            bytes[c] = c == 0 ? 0.0
                              : (double)pt_model_block_input_floats(m, first) * o->batch *
                                    (double)sizeof(float);
        f[c] = b[c] = w[c] = 0;
        for (int i = first; i < first + balance[c]; i++)
            f[c] += prof[i].f, b[c] += prof[i].b, w[c] += prof[i].w;
    }
    return PT_OK;
}

/* blocks per stage as layers per stage (what --balance counts); false when
 * a stage boundary falls inside a layer */
static double mib(size_t b) { return (double)b / (1 << 20); }

/* Chunks per worker of a schedule: --virtual for interleaved, zbv's two. */
static int chunks_of(const options *o, const char *name)
{
    return !strcmp(name, "interleaved") ? o->virtual_stages : !strcmp(name, "zbv") ? 2 : 1;
}

/* The schedule, given the chunks' profiled times (its weight passes
 * deferred where defer_w). */
static int make_schedule(const char *name, int defer_w, int P, int M, int v,
                         const pt_schedule_costs *costs, pt_schedule **s)
{
    pt_schedule_config cfg = pt_schedule_config_default();
    cfg.name = name, cfg.stages = P, cfg.microbatches = M, cfg.virtual_stages = v;
    cfg.costs = costs, cfg.defer_w = defer_w;
    return pt_schedule_create(&cfg, s);
}

/* What each worker of the recommended run will hold (AdamW), as the
 * pipeline will allocate it. */
static int print_memory(const options *o, const pt_model *m, const pt_block_profile *prof,
                        const plan_row *row, int *balance, double *cost)
{
    const char *name = row->name;
    int M = row->M;
    int v = chunks_of(o, name), K = o->stages * v;
    int rc = chunk_costs(o, m, prof, pt_model_n_blocks(m), K, balance, cost, cost + K, cost + 2 * K,
                         NULL);
    pt_schedule_costs sc = pt_schedule_costs_default();
    sc.n_chunk_costs = K, sc.chunk_f = cost, sc.chunk_b = cost + K, sc.chunk_w = cost + 2 * K;
    pt_schedule *s = NULL;
    if (rc == PT_OK)
        rc = make_schedule(name, row->defer_w, o->stages, M, v, &sc, &s);
    int W = rc == PT_OK ? pt_schedule_workers(s) : 0;
    pt_memory_use *u = rc == PT_OK ? calloc((size_t)W, sizeof *u) : NULL;
    if (rc == PT_OK && !u)
        rc = PT_ENOMEM;
    if (rc == PT_OK)
        rc = pt_schedule_predict_memory(s, m, balance, o->batch, 0, 2, u);
    if (rc == PT_OK) {
        printf("\nmemory per worker (MiB, AdamW) for it:\n%-7s %9s %9s %9s %9s %9s\n", "worker",
               "params", "grads", "moments", "activ", "total");
        for (int w = 0; w < W; w++)
            printf("%-7d %9.2f %9.2f %9.2f %9.2f %9.2f\n", w, mib(u[w].params), mib(u[w].grads),
                   mib(u[w].moments), mib(u[w].activations), mib(pt_memory_total(&u[w])));
    }
    free(u);
    pt_schedule_destroy(s);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--cluster") || !strcmp(argv[i], "--check"))
            return cmd_plan_cluster(argc, argv);
    options o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    pt_model *m;
    if (pt_model_describe(&o.model, &m) != PT_OK) {
        fprintf(stderr, "pipetrain plan: %s\n", pt_last_error());
        return 2;
    }
    int n = pt_model_n_blocks(m), P = o.stages;
    if (o.n_balance && o.n_balance != P) {
        fprintf(stderr, "pipetrain plan: --balance has %d entries for %d stages\n", o.n_balance, P);
        pt_model_destroy(m);
        return 2;
    }
    int blocks[PT_PARTITION_MAX_CHUNKS];
    if (o.n_balance && pt_model_balance_blocks(m, o.balance, P, blocks) != PT_OK) {
        fprintf(stderr, "pipetrain plan: %s\n", pt_last_error());
        pt_model_destroy(m);
        return 2;
    }
    if (o.n_balance) /* from here on, blocks per stage */
        memcpy(o.balance, blocks, sizeof(int) * (size_t)P);
    pt_blas_set_threads(1);
    pt_block_profile *prof = calloc((size_t)n, sizeof *prof);
    int K2 = P * o.virtual_stages;
    int *balance = calloc((size_t)(K2 > P ? K2 : P), sizeof(int));
    double *cost = calloc((size_t)(K2 > P ? K2 : P) * 4, sizeof(double));
    int status = 0;
    if (!prof || !balance || !cost ||
        pt_profile_blocks(pt_model_get_config(m), o.batch, o.reps, prof) != PT_OK) {
        fprintf(stderr, "pipetrain plan: profiling failed: %s\n", pt_last_error());
        status = 1;
        goto done;
    }
    if (o.ranks || o.tensor > 1 || o.replicas > 1 || o.zero || o.sequence) {
        status = cmd_plan_layouts(&o.model, prof, P, o.tensor, o.sequence, o.replicas, o.zero,
                                  o.ranks, o.ms_given ? o.ms_given : 8, o.batch, o.memory_limit,
                                  o.link_bandwidth, o.link_latency);
        goto done;
    }
    printf("model: %d blocks, micro-batch of %d sample%s, %d stages (profiled on one thread)\n\n",
           n, o.batch, o.batch == 1 ? "" : "s", P);
    int Kmax = K2 > P ? K2 : P;
    double *f = cost, *b = cost + Kmax, *w = cost + 2 * Kmax, *bytes = cost + 3 * Kmax;
    if (chunk_costs(&o, m, prof, n, P, balance, f, b, w, NULL) != PT_OK) {
        fprintf(stderr, "pipetrain plan: %s\n", pt_last_error());
        status = 2;
        goto done;
    }
    int layers[PT_PARTITION_MAX_CHUNKS];
    bool whole = pt_model_balance_layers(m, balance, P, layers);
    printf("partition (%s", whole ? "--balance " : "blocks per stage ");
    for (int s = 0; s < P; s++)
        printf("%s%d", s ? "," : "", whole ? layers[s] : balance[s]);
    printf("%s):\n%-6s %-8s %9s %9s %9s %9s %12s\n",
           whole ? "" : "; a cut inside a layer, which --balance cannot give", "stage", "blocks",
           "F ms", "B ms", "W ms", "F+B+W ms", "memory MiB");
    for (int s = 0, first = 0; s < P; first += balance[s++]) {
        size_t mem = pt_partition_chunk_memory(prof, first, first + balance[s] - 1, P - s);
        printf("%-6d %3d..%-3d %9.3f %9.3f %9.3f %9.3f %12.2f\n", s, first, first + balance[s] - 1,
               1e3 * f[s], 1e3 * b[s], 1e3 * w[s], 1e3 * (f[s] + b[s] + w[s]),
               (double)mem / (1 << 20));
    }
    printf("(memory: parameters, gradients and AdamW moments, plus the activations of the "
           "micro-batches 1f1b keeps in flight)\n\n");

    /* zb1p and zb2p are left out: a run given their names searches them for
     * unit times, not for these profiled ones */
    /* and the fused-backward ones with their weight passes deferred, which
     * pays on a slow link for memory */
    static const struct {
        const char *name;
        int defer_w;
    } scheds[] = {{"gpipe", 0},       {"1f1b", 0}, {"1f1b", 1}, {"interleaved", 0},
                  {"interleaved", 1}, {"zbh1", 0}, {"zbh2", 0}, {"zbv", 0}};
    int n_scheds = (int)(sizeof scheds / sizeof scheds[0]);
    plan_row rows[sizeof scheds / sizeof scheds[0] * MAX_MS];
    int n_rows = 0;
    if (o.link_bandwidth > 0 || o.link_latency > 0)
        printf("link between workers: %.4g Mbit/s, latency %.3g ms; each transfer on the wire "
               "for its bytes over the bandwidth, one after another per direction\n\n",
               o.link_bandwidth * 8 / 1e6, 1e3 * o.link_latency);
    printf("%-22s %4s %10s %10s %12s %10s\n", "schedule", "M", "bubble", "step ms", "ms per mb",
           "peak acts");
    for (int si = 0; si < n_scheds; si++)
        for (int mi = 0; mi < o.n_ms; mi++) {
            int v = chunks_of(&o, scheds[si].name), K = P * v;
            if (K > n || chunk_costs(&o, m, prof, n, K, balance, f, b, w, bytes) != PT_OK)
                continue;
            pt_schedule_costs sc = pt_schedule_costs_default();
            sc.n_chunk_costs = K, sc.chunk_f = f, sc.chunk_b = b, sc.chunk_w = w;
            sc.bandwidth = o.link_bandwidth, sc.latency = o.link_latency;
            sc.boundary_bytes = bytes;
            pt_schedule *s;
            if (make_schedule(scheds[si].name, scheds[si].defer_w, P, o.ms[mi], v, &sc, &s) !=
                PT_OK)
                continue; /* the schedule cannot take this P, M */
            pt_schedule_sim *sim;
            if (pt_schedule_simulate_run(s, &sc, &sim) == PT_OK) {
                int peak = 0;
                for (int r = 0; r < sim->workers; r++)
                    peak = sim->peak_activations[r] > peak ? sim->peak_activations[r] : peak;
                plan_row *row = &rows[n_rows++];
                *row = (plan_row){scheds[si].name, scheds[si].defer_w,   o.ms[mi],
                                  sim->makespan,   sim->bubble_fraction, peak};
                char label[32];
                snprintf(label, sizeof label, "%s%s", row->name, row->defer_w ? " --defer-w" : "");
                printf("%-22s %4d %9.1f%% %10.3f %12.4f %10d\n", label, row->M, 100 * row->bubble,
                       1e3 * row->makespan, 1e3 * row->makespan / row->M, row->peak);
                pt_schedule_sim_destroy(sim);
            }
            pt_schedule_destroy(s);
        }
    if (n_rows) {
        int best = 0;
        for (int i = 1; i < n_rows; i++)
            if (rows[i].makespan / rows[i].M < rows[best].makespan / rows[best].M)
                best = i;
        double limit = 1.02 * rows[best].makespan / rows[best].M;
        int pick = best;
        for (int i = 0; i < n_rows; i++)
            if (rows[i].makespan / rows[i].M <= limit && rows[i].peak < rows[pick].peak)
                pick = i;
        printf("\nrecommended: --schedule %s%s --microbatches %d (%.1f%% bubble; the least "
               "activation memory within 2%% of the fastest time per micro-batch)\n",
               rows[pick].name, rows[pick].defer_w ? " --defer-w" : "", rows[pick].M,
               100 * rows[pick].bubble);
        if (print_memory(&o, m, prof, &rows[pick], balance, cost) != PT_OK) {
            fprintf(stderr, "pipetrain plan: %s\n", pt_last_error());
            status = 1;
        }
    }
done:
    free(prof);
    free(balance);
    free(cost);
    pt_model_destroy(m);
    return status;
}
