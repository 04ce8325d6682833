/* cmd_schedule.c: `pipetrain schedule`: builds a schedule (or loads one a
 * user wrote), validates it, simulates it against a cost model, and shows
 * what it will do before anyone spends machine time on it: an ASCII
 * timeline with the bubble fraction and peak activations per worker, or one
 * JSON object (--json), plus an SVG Gantt chart (--svg) and a Chrome trace
 * (--trace) on request; with --program, the schedule lowered to every
 * worker's complete program (sends, receives, collectives, step) as text;
 * with --memory, what each worker will hold for a gpt of the given shape
 * (plan/memory.c's prediction, which the pipeline allocates).
 * Scripts rely on the flag names; keep them.
 *
 * Exit status: 0 done; 1 a file that will not load or write, or a schedule
 * that fails validation; 2 a flag, value or parameter the schedule cannot
 * take (the message says which).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/model_limits.h"
#include "model/model.h"
#include "pipetrain.h"
#include "plan/partition.h"
#include "tensor/error.h"

typedef struct {
    pt_schedule_config cfg;
    pt_schedule_costs costs;
    const char *from, *svg, *trace, *costs_file, *save;
    bool json, program, generated_flags, virtual_given, replicas_given;
    bool cost_given, collective_given; /* --cost-f, -b or -w; --cost-collective */
    bool latency_given, link_latency_given, link_given, bytes_given;
    int tied[2 * 16], n_tied; /* --tied pairs */
    /* --memory: a gpt of these shapes, cut as --balance says */
    bool memory, model_given, checkpoint, spec_given, gpt_given;
    pt_model_config model;
    int batch, moments;
    int balance[PT_PARTITION_MAX_CHUNKS], n_balance;
    int tensor;    /* --tensor: --program's passes cut into the slices' pieces */
    bool sequence; /* --sequence-parallel: the pieces of sequence parallelism */
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pipetrain schedule --schedule NAME --stages P --microbatches M [FLAGS]\n"
            "       pipetrain schedule --from FILE [FLAGS]\n\n"
            "build, check, simulate and draw a pipeline schedule\n\n"
            "  --schedule NAME     gpipe 1f1b interleaved loopedbfs zbh1 zbh2 zbv zb1p zb2p\n"
            "                      pipedream 1f1b-rr (default 1f1b); zb1p and zb2p are searched\n"
            "                      for --cost-f, -b, -w (or --costs) and --latency under\n"
            "                      --memory-limit; zbh1, zbh2 and zbv order their passes for them\n"
            "  --stages P          pipeline stages (default 4; range [1, 1024])\n"
            "  --microbatches M    micro-batches (default 8; range [1, 1048576])\n"
            "  --virtual V         chunks per worker: interleaved, loopedbfs (default 2), zbv\n"
            "                      (2); range [1, 64]\n"
            "  --replicas R        data-parallel replicas of each stage: 1f1b-rr (default 2),\n"
            "                      pipedream (1F1B-RR, default 1); range [1, 1024]\n"
            "  --from FILE         load a schedule in the text format instead (docs/schedules.md)\n"
            "  --cost-f X          time of one chunk's forward (default 1)\n"
            "  --cost-b Y          time of one chunk's input gradient (default 1)\n"
            "  --cost-w Z          time of one chunk's weight gradient (default 1; BW = B + W)\n"
            "  --latency L         time of one transfer between workers (default 0)\n"
            "  --send S            time a transfer holds its sender (a runtime whose sends\n"
            "                      block; default 0)\n"
            "  --link-bandwidth R  the link between two workers, in bytes/s or with a unit:\n"
            "                      100mbit, 1gbit, 12.5MB/s; a transfer then holds its link\n"
            "                      (one direction) for its bytes / R, one after another, and\n"
            "                      every cost is in seconds (default: no limit)\n"
            "  --link-latency T    seconds (or 50us, 0.2ms) a transfer takes beyond its wire\n"
            "                      time; the same as --latency, with units\n"
            "  --transfer-bytes N  bytes of one activation or gradient between chunks\n"
            "                      (default with --memory: the gpt's, batch x seq x embd x 4)\n"
            "  --memory-limit X    zb1p, zb2p: activations a worker may hold, in micro-batches\n"
            "                      (default P for zb1p, 2P for zb2p; range [1, 1e6])\n"
            "  --w-memory X        zb1p, zb2p: share of a micro-batch's activations kept from\n"
            "                      its B to its W (default 0.5; range [0, 1])\n"
            "  --defer-w           gpipe, 1f1b, interleaved, loopedbfs, 1f1b-rr: a fused\n"
            "                      backward followed by a forward that waits for nothing from\n"
            "                      another worker runs as B, that forward, then W: the\n"
            "                      activation leaves a weight pass sooner (hides a slow\n"
            "                      link), for one more micro-batch held at the worker's peak\n"
            "  --cost-collective C time of one REDUCE, TIED or NORM, for --program (default 0)\n"
            "                      (every time, here and in --costs, is in [0, 1e9])\n"
            "  --costs FILE        per-chunk costs: one line 'F B W' per chunk, in chunk order;\n"
            "                      not with --cost-f, --cost-b, --cost-w\n"
            "  --svg FILE          write a Gantt chart\n"
            "  --trace FILE        write Chrome/Perfetto trace-event JSON\n"
            "  --save FILE         write the schedule in the text format\n"
            "  --json              print one JSON object instead of the picture (also for a\n"
            "                      --from file that does not parse: \"valid\":false)\n"
            "  --program           print the program lowered from the schedule instead: every\n"
            "                      worker's sends, receives, collectives and step, as text,\n"
            "                      then its simulated timeline and makespan (not with --json)\n"
            "  --tensor T          --program for T tensor-parallel slices of every stage of\n"
            "                      the gpt below: each pass in its pieces with the tensor\n"
            "                      group's sums between them (AF, AB), each sum taking\n"
            "                      --cost-collective plus, with --link-bandwidth, a block\n"
            "                      input's bytes (batch x seq x embd x 4) / R (default 1)\n"
            "  --sequence-parallel with --tensor: the pieces and sums of sequence\n"
            "                      parallelism (gathers and reduce-scatters around each\n"
            "                      tensor-parallel region, docs/layouts.md)\n"
            "  --tied A-B[,C-D]    chunks sharing a parameter, for --program (GPT: 0-LAST);\n"
            "                      at most 16 pairs\n"
            "  --memory            also predict what each worker holds (bytes by kind) for a\n"
            "                      gpt of the shape below (or --model-spec), as the pipeline\n"
            "                      allocates it:\n"
            "  --layers N --heads N --embd N --seq N --vocab N\n"
            "                      the gpt (defaults 4, 4, 128, 128, 256; ranges [1, 1024],\n"
            "                      [1, 1024], [1, 65536], [1, 1048576], [1, 16777216])\n"
            "  --model-spec FILE|TEXT  a model from a list of layers instead (docs/models.md)\n"
            "  --batch N           samples per micro-batch (default 1; range [1, 1048576])\n"
            "  --balance LIST      layers per chunk (a gpt's blocks; default: as even as they\n"
            "                      allow, the extra ones to the last chunks)\n"
            "  --checkpoint-activations   keep only each chunk's input (recompute)\n"
            "  --repack-weights    keep no packed panels of the matrices (pipetrain's own fp32\n"
            "                      products and bf16's portable ones keep them: twice the\n"
            "                      matrices' bytes; bf16's AMX products twice their bf16\n"
            "                      copy's; counted under params)\n"
            "  --optimizer adamw|sgd|none moments per parameter: 2, 1, 0 (default adamw)\n");
}

static int bad_value(const char *flag, const char *value, const char *want)
{
    return num_refuse("schedule", flag, value, want);
}

/* Times are bounded so that a picture's columns and a simulation's sums
 * stay far inside what a long and a double hold exactly. */
#define COST_RANGE NUM_RANGE(0, 1e9)

/* The flags of --memory's model; true when flag is one of them (*rc then
 * says whether its value was good). */
static bool parse_model_flag(const char *flag, const char *value, options *o, int *rc)
{
    const struct {
        const char *name;
        int *field;
        num_range range;
    } ints[] = {
        {"--layers", &o->model.n_layer, LIMIT_LAYERS}, {"--heads", &o->model.n_head, LIMIT_HEADS},
        {"--embd", &o->model.n_embd, LIMIT_EMBD},      {"--seq", &o->model.seq_len, LIMIT_SEQ},
        {"--vocab", &o->model.vocab, LIMIT_VOCAB},     {"--batch", &o->batch, LIMIT_BATCH}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(flag, ints[i].name)) {
            o->gpt_given |= strcmp(flag, "--batch") != 0;
            *rc = num_int("schedule", flag, value, ints[i].range, ints[i].field);
            return true;
        }
    if (!strcmp(flag, "--model-spec")) {
        o->spec_given = true;
        *rc = pt_model_config_spec_load(value, &o->model) == PT_OK
                  ? 0
                  : (fprintf(stderr, "pipetrain schedule: --model-spec: %s\n", pt_last_error()), 2);
        return true;
    }
    if (!strcmp(flag, "--balance")) {
        *rc = num_int_list("schedule", flag, value, NUM_RANGE(1, 1 << 24), o->balance,
                           PT_PARTITION_MAX_CHUNKS, &o->n_balance);
        return true;
    }
    if (!strcmp(flag, "--optimizer")) {
        o->moments = !strcmp(value, "adamw")  ? 2
                     : !strcmp(value, "sgd")  ? 1
                     : !strcmp(value, "none") ? 0
                                              : -1;
        *rc = o->moments < 0 ? bad_value(flag, value, "adamw, sgd or none") : 0;
        return true;
    }
    return false;
}

/* A combination of flags that makes no sense: says why, exit status 2. */
static int refuse(const char *why, ...) __attribute__((format(printf, 1, 2)));
static int refuse(const char *why, ...)
{
    va_list ap;
    va_start(ap, why);
    fputs("pipetrain schedule: ", stderr);
    vfprintf(stderr, why, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

static int parse_args(int argc, char **argv, options *o)
{
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(flag, "--json")) {
            o->json = true;
            continue;
        }
        if (!strcmp(flag, "--program")) {
            o->program = true;
            continue;
        }
        if (!strcmp(flag, "--sequence-parallel")) {
            o->sequence = true;
            continue;
        }
        if (!strcmp(flag, "--defer-w")) {
            o->cfg.defer_w = 1, o->generated_flags = true;
            continue;
        }
        if (!strcmp(flag, "--memory") || !strcmp(flag, "--checkpoint-activations")) {
            *(flag[2] == 'm' ? &o->memory : &o->checkpoint) = true;
            o->model_given |= flag[2] == 'c';
            continue;
        }
        if (!strcmp(flag, "--repack-weights")) {
            o->model.repack_weights = 1, o->model_given = true;
            continue;
        }
        char name[32];
        const char *value, *eq = strchr(flag, '=');
        if (eq && eq - flag < (long)sizeof name) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - flag), flag);
            flag = name;
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            fprintf(stderr, "pipetrain schedule: %s needs a value (see --help)\n", flag);
            return 2;
        }
        int rc = 0;
        if (!strcmp(flag, "--schedule"))
            o->cfg.name = value, o->generated_flags = true;
        else if (!strcmp(flag, "--stages"))
            rc = num_int("schedule", flag, value, LIMIT_STAGES, &o->cfg.stages),
            o->generated_flags = true;
        else if (!strcmp(flag, "--microbatches"))
            rc = num_int("schedule", flag, value, LIMIT_MICROBATCHES, &o->cfg.microbatches),
            o->generated_flags = true;
        else if (!strcmp(flag, "--virtual"))
            rc = num_int("schedule", flag, value, LIMIT_VIRTUAL, &o->cfg.virtual_stages),
            o->virtual_given = true;
        else if (!strcmp(flag, "--replicas"))
            rc = num_int("schedule", flag, value, LIMIT_REPLICAS, &o->cfg.replicas),
            o->replicas_given = true;
        else if (!strcmp(flag, "--cost-f"))
            rc = num_double("schedule", flag, value, COST_RANGE, &o->costs.f), o->cost_given = true;
        else if (!strcmp(flag, "--cost-b"))
            rc = num_double("schedule", flag, value, COST_RANGE, &o->costs.b), o->cost_given = true;
        else if (!strcmp(flag, "--cost-w"))
            rc = num_double("schedule", flag, value, COST_RANGE, &o->costs.w), o->cost_given = true;
        else if (!strcmp(flag, "--latency"))
            rc = num_double("schedule", flag, value, COST_RANGE, &o->costs.latency),
            o->latency_given = true;
        else if (!strcmp(flag, "--link-latency"))
            rc = num_seconds("schedule", flag, value, &o->costs.latency),
            o->link_latency_given = true;
        else if (!strcmp(flag, "--link-bandwidth"))
            rc = num_rate("schedule", flag, value, &o->costs.bandwidth), o->link_given = true;
        else if (!strcmp(flag, "--transfer-bytes"))
            rc = num_double("schedule", flag, value, NUM_RANGE(0, 1e15), &o->costs.transfer_bytes),
            o->bytes_given = true;
        else if (!strcmp(flag, "--tensor"))
            rc = num_int("schedule", flag, value, NUM_RANGE(1, 1024), &o->tensor);
        else if (!strcmp(flag, "--send"))
            rc = num_double("schedule", flag, value, COST_RANGE, &o->costs.send);
        else if (!strcmp(flag, "--memory-limit"))
            rc = num_double("schedule", flag, value, NUM_RANGE(1, 1e6), &o->cfg.memory_limit);
        else if (!strcmp(flag, "--w-memory"))
            rc = num_double("schedule", flag, value, NUM_RANGE(0, 1), &o->cfg.w_memory);
        else if (!strcmp(flag, "--cost-collective"))
            rc = num_double("schedule", flag, value, COST_RANGE, &o->costs.collective),
            o->collective_given = true;
        else if (!strcmp(flag, "--costs"))
            o->costs_file = value;
        else if (!strcmp(flag, "--from"))
            o->from = value;
        else if (!strcmp(flag, "--svg"))
            o->svg = value;
        else if (!strcmp(flag, "--trace"))
            o->trace = value;
        else if (!strcmp(flag, "--save"))
            o->save = value;
        else if (!strcmp(flag, "--tied"))
            rc = num_int_pairs("schedule", flag, value, NUM_RANGE(0, 1 << 20), o->tied, 16,
                               &o->n_tied);
        else if (parse_model_flag(flag, value, o, &rc))
            o->model_given = true;
        else {
            fprintf(stderr, "pipetrain schedule: unknown flag '%s' (see --help)\n", flag);
            return 2;
        }
        if (rc)
            return rc;
    }
    o->generated_flags |= o->virtual_given || o->replicas_given;
    if (o->memory && o->json)
        return refuse("--memory prints a table; it does not go with --json");
    if (o->tensor > 1 && !o->program)
        return refuse("--tensor cuts the program's passes; add --program or drop it");
    if (o->sequence && o->tensor <= 1)
        return refuse("--sequence-parallel cuts a tensor group's passes; add --tensor T (2 or "
                      "more) and --program");
    if (o->model_given && !o->memory && o->tensor <= 1)
        return refuse("the model flags describe what --memory predicts or --tensor cuts; add "
                      "--memory or --tensor, or drop them");
    if (o->from && o->generated_flags)
        return refuse("--from takes the schedule from the file; drop --schedule, --stages, "
                      "--microbatches, --virtual, --replicas and --defer-w");
    if (o->costs_file && o->cost_given)
        return refuse("--cost-f, --cost-b and --cost-w do nothing with --costs (the file gives "
                      "every chunk's)");
    if (!o->program && (o->n_tied || o->collective_given))
        return refuse("--%s does nothing without --program",
                      o->n_tied ? "tied" : "cost-collective");
    if (o->program && o->json)
        return refuse("--program prints the program as text; it does not go with --json");
    if (o->latency_given && o->link_latency_given)
        return refuse("--latency and --link-latency say the same; give one");
    if (o->bytes_given && !o->link_given)
        return refuse("--transfer-bytes does nothing without --link-bandwidth");
    if (o->spec_given && o->gpt_given)
        return refuse("--layers, --heads, --embd, --seq and --vocab shape a gpt; the spec "
                      "(--model-spec) gives every layer's shape");
    bool gpt = (o->memory || o->tensor > 1) && !o->spec_given;
    if (o->link_given && !o->bytes_given && !gpt)
        return refuse("--link-bandwidth needs the bytes of a transfer: --transfer-bytes N, or "
                      "--memory or --tensor with the gpt's shape");
    if (o->memory || o->tensor > 1) {
        int rc = model_limits_shape("schedule", &o->model, o->batch);
        double bytes = (double)o->batch * o->model.seq_len * o->model.n_embd * sizeof(float);
        if (rc == 0 && o->link_given && !o->bytes_given)
            o->costs.transfer_bytes = bytes;
        if (rc == 0 && o->link_given && o->tensor > 1)
            o->costs.tensor_sum_bytes = bytes;
        return rc;
    }
    return 0;
}

/* Per-chunk costs: one line "F B W" per chunk; '#' starts a comment. */
static int load_chunk_costs(const char *path, int n_chunks, double **f, double **b, double **w)
{
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "pipetrain schedule: cannot open costs file '%s': %s\n", path,
                strerror(errno));
        return 1;
    }
    *f = calloc((size_t)n_chunks, sizeof(double));
    *b = calloc((size_t)n_chunks, sizeof(double));
    *w = calloc((size_t)n_chunks, sizeof(double));
    char line[512];
    int n = 0, lineno = 0, rc = 0;
    while (!rc && *f && *b && *w && fgets(line, sizeof line, in)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        double x, y, z;
        char extra;
        int got = sscanf(line, " %lf %lf %lf %c", &x, &y, &z, &extra);
        if (got <= 0)
            continue;
        num_range r = COST_RANGE;
        if (got != 3 || !(x >= r.lo && x <= r.hi) || !(y >= r.lo && y <= r.hi) ||
            !(z >= r.lo && z <= r.hi)) {
            fprintf(stderr, "pipetrain schedule: %s:%d: expected three costs in [0, %g]: F B W\n",
                    path, lineno, r.hi);
            rc = 1;
        } else if (n >= n_chunks) {
            fprintf(stderr,
                    "pipetrain schedule: %s: more than %d lines of costs; the schedule "
                    "has %d chunks\n",
                    path, n_chunks, n_chunks);
            rc = 1;
        } else {
            (*f)[n] = x, (*b)[n] = y, (*w)[n] = z;
            n++;
        }
    }
    fclose(in);
    if (!rc && (!*f || !*b || !*w)) {
        fprintf(stderr, "pipetrain schedule: out of memory\n");
        rc = 1;
    }
    if (!rc && n != n_chunks) {
        fprintf(stderr, "pipetrain schedule: %s: %d lines of costs; the schedule has %d chunks\n",
                path, n, n_chunks);
        rc = 1;
    }
    return rc;
}

static int write_file(const char *path, const char *text, const char *what)
{
    FILE *out = fopen(path, "w");
    if (!out || fputs(text, out) < 0 || fclose(out) != 0) {
        fprintf(stderr, "pipetrain schedule: cannot write %s to '%s': %s\n", what, path,
                strerror(errno));
        return 1;
    }
    return 0;
}

/* Writes a picture made by draw() to path. */
static int draw_to(const char *path, const char *what, const pt_schedule *s,
                   const pt_schedule_sim *sim,
                   int (*draw)(const pt_schedule *, const pt_schedule_sim *, char **))
{
    char *text;
    if (draw(s, sim, &text) != PT_OK) {
        fprintf(stderr, "pipetrain schedule: %s: %s\n", what, pt_last_error());
        return 1;
    }
    int rc = write_file(path, text, what);
    free(text);
    return rc;
}

static void print_json_string(const char *text)
{
    putchar('"');
    for (const char *p = text; *p; p++)
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if ((unsigned char)*p >= 0x20)
            putchar(*p);
    putchar('"');
}

/* A file that does not parse: scripts reading --json still get an object. */
static void print_json_unparsed(const char *from, const char *error)
{
    printf("{\"from\":");
    print_json_string(from);
    printf(",\"valid\":false,\"error\":");
    print_json_string(error);
    printf("}\n");
}

static void print_json(const pt_schedule *s, const pt_schedule_sim *sim, const char *error)
{
    printf("{\"schedule\":\"%s\",\"stages\":%d,\"microbatches\":%d,\"virtual\":%d,"
           "\"workers\":%d,\"replicas\":%d",
           pt_schedule_name(s), pt_schedule_stages(s), pt_schedule_microbatches(s),
           pt_schedule_virtual_stages(s), pt_schedule_workers(s), pt_schedule_replicas(s));
    if (sim) {
        printf(",\"makespan\":%.10g,\"span\":%.10g,\"bubble_fraction\":%.10g,"
               "\"peak_activations\":[",
               sim->makespan, sim->span, sim->bubble_fraction);
        for (int w = 0; w < sim->workers; w++)
            printf("%s%d", w ? "," : "", sim->peak_activations[w]);
        printf("],\"busy\":[");
        for (int w = 0; w < sim->workers; w++)
            printf("%s%.10g", w ? "," : "", sim->busy[w]);
        printf("],\"idle\":[");
        for (int w = 0; w < sim->workers; w++)
            printf("%s%.10g", w ? "," : "", sim->idle[w]);
        printf("],\"valid\":true}\n");
        return;
    }
    printf(",\"valid\":false,\"error\":");
    print_json_string(error ? error : "");
    printf("}\n");
}

/* The ASCII drawers give a column the shortest action's time and count the
 * columns in a long: a timeline far too long to draw is refused here, before
 * that count could overflow (costs of 1e-300 and 1 would). */
static int print_picture(const pt_schedule *s, const pt_schedule_sim *sim,
                         const pt_schedule_costs *c)
{
    char *ascii;
    if (pt_schedule_draw_ascii(s, sim, &ascii) != PT_OK) {
        fprintf(stderr, "pipetrain schedule: %s\n", pt_last_error());
        return 1;
    }
    int v = pt_schedule_virtual_stages(s);
    printf("schedule %s: %d stages, %d micro-batches, ", pt_schedule_name(s), pt_schedule_stages(s),
           pt_schedule_microbatches(s));
    if (v)
        printf("%d chunk%s per worker", v, v == 1 ? "" : "s");
    else
        printf("%d chunks", pt_schedule_chunks(s));
    if (pt_schedule_replicas(s) > 1)
        printf(", %d replicas per stage", pt_schedule_replicas(s));
    printf(" (%d workers)\n", pt_schedule_workers(s));
    if (c->n_chunk_costs)
        printf("costs: per chunk from file, latency %g\n", c->latency);
    else
        printf("costs: F %g, B %g, W %g (BW %g), latency %g\n", c->f, c->b, c->w, c->b + c->w,
               c->latency);
    if (c->bandwidth > 0)
        printf("link: %.4g MB/s (%.4g Mbit/s), a transfer of %.0f bytes %.4g s on the wire\n",
               c->bandwidth / 1e6, c->bandwidth * 8 / 1e6, c->transfer_bytes,
               c->transfer_bytes / c->bandwidth);
    putchar('\n');
    fputs(ascii, stdout);
    free(ascii);
    printf("\nmakespan %g, bubble fraction %.4f\n", sim->makespan, sim->bubble_fraction);
    for (int w = 0; w < sim->workers; w++)
        printf("worker %d: busy %g, idle %g, peak activations %d\n", w, sim->busy[w], sim->idle[w],
               sim->peak_activations[w]);
    return 0;
}

/* The model's name in --memory's heading */
static void model_words(const pt_model_config *m, const pt_model *desc, char *buf, size_t n)
{
    if (m->kind == PT_MODEL_SPEC)
        snprintf(buf, n, "spec of %d layers", pt_model_n_layers(desc));
    else
        snprintf(buf, n, "gpt %d layers x %d", m->n_layer, m->n_embd);
}

/* The model's layers per chunk (--balance, or as even as they allow, the
 * extra ones to the last chunks) into layers[K], and the blocks per chunk
 * they make into balance[K]. */
static int chunk_blocks(const pt_schedule *s, const options *o, const pt_model *desc, int *layers,
                        int *balance)
{
    int K = pt_schedule_chunks(s), n = pt_model_n_layers(desc);
    bool spec = o->model.kind == PT_MODEL_SPEC;
    if (o->n_balance && o->n_balance != K)
        return pt_fail(PT_EINVAL, "--balance has %d entries, but the schedule has %d chunks",
                       o->n_balance, K);
    if (o->n_balance)
        memcpy(layers, o->balance, sizeof(int) * (size_t)K);
    else if (K > n)
        return pt_fail(PT_EINVAL,
                       "the schedule's %d chunks need at least %d %s; the model has %d%s", K, K,
                       spec ? "layers" : "blocks", n, spec ? "" : " (--layers + 2)");
    for (int c = 0; !o->n_balance && c < K; c++)
        layers[c] = n / K + (c >= K - n % K);
    return pt_model_balance_blocks(desc, layers, K, balance);
}

/* --memory: each worker's predicted bytes by kind. --balance counts the
 * model's layers (a gpt's blocks); the blocks per chunk follow. */
static int print_memory(const pt_schedule *s, const options *o)
{
    pt_model *desc = NULL;
    int K = pt_schedule_chunks(s), W = pt_schedule_workers(s);
    int *balance = calloc((size_t)K, sizeof(int)), *layers = calloc((size_t)K, sizeof(int));
    pt_memory_use *u = calloc((size_t)W, sizeof *u);
    int rc = balance && layers && u ? pt_model_describe(&o->model, &desc) : PT_ENOMEM;
    if (rc == PT_OK)
        rc = chunk_blocks(s, o, desc, layers, balance);
    if (rc == PT_OK)
        rc = pt_schedule_predict_memory(s, desc, balance, o->batch, o->checkpoint, o->moments, u);
    if (rc == PT_OK) {
        char words[64];
        model_words(&o->model, desc, words, sizeof words);
        printf("\nmemory per worker (MiB; %s, micro-batches of %d, --balance ", words, o->batch);
        for (int c = 0; c < K; c++)
            printf("%s%d", c ? "," : "", layers[c]);
        printf("):\n%-7s %9s %9s %9s %9s %9s %9s %9s\n", "worker", "params", "grads", "moments",
               "stash", "activ", "comm", "total");
        for (int w = 0; w < W; w++)
            printf("%-7d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", w, u[w].params / 1048576.0,
                   u[w].grads / 1048576.0, u[w].moments / 1048576.0, u[w].stash / 1048576.0,
                   u[w].activations / 1048576.0, u[w].comm / 1048576.0,
                   pt_memory_total(&u[w]) / 1048576.0);
    } else {
        fprintf(stderr, "pipetrain schedule: --memory: %s\n",
                rc == PT_ENOMEM ? "out of memory" : pt_last_error());
    }
    pt_model_destroy(desc);
    free(balance), free(layers), free(u);
    return rc == PT_OK ? 0 : 2;
}

/* --tensor: the pieces of each chunk's forward and backward (pieces[K]
 * and pieces[K + c]) for slice 0 of T of the gpt, cut as --balance says. */
static int tensor_pieces(const pt_schedule *s, const options *o, int **out)
{
    int K = pt_schedule_chunks(s);
    int *pieces = calloc(4 * (size_t)K, sizeof(int)), *layers = pieces + 2 * K;
    pt_model *desc = NULL;
    int rc = pieces ? pt_model_create_slice(&o->model, NULL, 1, o->tensor, 0, o->sequence, &desc)
                    : PT_ENOMEM;
    if (rc == PT_OK)
        rc = chunk_blocks(s, o, desc, layers, pieces); /* blocks per chunk, for now */
    for (int c = 0, first = 0; rc == PT_OK && c < K; c++) {
        int last = first + pieces[c] - 1;
        for (int back = 0; back < 2; back++)
            layers[back * K + c] = pt_model_tensor_pieces(desc, first, last, back);
        first = last + 1;
    }
    for (int c = 0; rc == PT_OK && o->checkpoint && c < K; c++) /* the recompute's sums first */
        layers[K + c] += layers[c] - 1;
    if (rc == PT_OK)
        memcpy(pieces, layers, 2 * sizeof(int) * (size_t)K);
    pt_model_destroy(desc);
    if (rc != PT_OK)
        free(pieces), pieces = NULL;
    *out = pieces;
    return rc;
}

/* --program: the schedule lowered, validated and printed as text, then
 * played against the costs and drawn, collectives included. */
static int print_program(const pt_schedule *s, const options *o)
{
    pt_lower_options lo = pt_lower_options_default();
    lo.tied = o->tied;
    lo.n_tied = o->n_tied;
    pt_program *p = NULL;
    pt_schedule_sim *sim = NULL;
    char *text = NULL, *picture = NULL;
    int *pieces = NULL;
    int rc = o->tensor > 1 ? tensor_pieces(s, o, &pieces) : PT_OK;
    lo.tensor_pieces = pieces;
    lo.split_sent_backward = 1; /* as the pipeline lowers */
    lo.sequence_sum = o->tensor > 1 && o->sequence;
    if (rc == PT_OK)
        rc = pt_program_lower(s, &lo, &p);
    if (rc == PT_OK)
        rc = pt_program_validate(p);
    if (rc == PT_OK)
        rc = pt_program_format(p, &text);
    if (rc == PT_OK)
        rc = pt_program_simulate(p, &o->costs, &sim);
    int status = rc == PT_OK ? 0 : rc == PT_EINVAL ? 2 : 1;
    if (rc == PT_OK && pt_program_draw_ascii(p, sim, &picture) != PT_OK)
        status = 1; /* a timeline too long to draw, as for the schedule's picture */
    if (status == 0)
        printf("%s\n%smakespan %g with collectives of %g, bubble fraction %.4f\n", text, picture,
               sim->makespan, o->costs.collective, sim->bubble_fraction);
    else
        fprintf(stderr, "pipetrain schedule: --program: %s\n", pt_last_error());
    free(text);
    free(picture);
    free(pieces);
    pt_schedule_sim_destroy(sim);
    pt_program_destroy(p);
    return status;
}

int cmd_schedule(int argc, char **argv)
{
    options o = {.cfg = pt_schedule_config_default(),
                 .costs = pt_schedule_costs_default(),
                 .model = pt_model_config_gpt(),
                 .batch = 1,
                 .moments = 2};
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;

    pt_schedule *s = NULL;
    if (o.from) {
        if (pt_schedule_load(o.from, &s) != PT_OK) {
            if (o.json)
                print_json_unparsed(o.from, pt_last_error());
            fprintf(stderr, "pipetrain schedule: %s\n", pt_last_error());
            return 1;
        }
    } else if ((o.cfg.costs = &o.costs, pt_schedule_create(&o.cfg, &s)) != PT_OK) {
        fprintf(stderr, "pipetrain schedule: %s\n", pt_last_error());
        return 2;
    }

    double *cf = NULL, *cb = NULL, *cw = NULL;
    pt_schedule_sim *sim = NULL;
    if (o.costs_file) {
        rc = load_chunk_costs(o.costs_file, pt_schedule_chunks(s), &cf, &cb, &cw);
        o.costs.n_chunk_costs = pt_schedule_chunks(s);
        o.costs.chunk_f = cf, o.costs.chunk_b = cb, o.costs.chunk_w = cw;
    }
    if (!rc && o.costs_file && !o.from) { /* the generator orders for the chunks' costs */
        pt_schedule_destroy(s);
        if (pt_schedule_create(&o.cfg, &s) != PT_OK) {
            fprintf(stderr, "pipetrain schedule: %s\n", pt_last_error());
            rc = 2;
        }
    }
    if (!rc && pt_schedule_simulate(s, &o.costs, &sim) != PT_OK) {
        /* the simulator validates first: a refusal here is the schedule's fault */
        if (o.json)
            print_json(s, NULL, pt_last_error());
        fprintf(stderr, "pipetrain schedule: %s\n", pt_last_error());
        rc = 1;
    }
    if (!rc && o.program)
        rc = print_program(s, &o);
    else if (!rc)
        rc = o.json ? (print_json(s, sim, NULL), 0) : print_picture(s, sim, &o.costs);
    if (!rc && o.memory)
        rc = print_memory(s, &o);
    if (!rc && o.svg)
        rc = draw_to(o.svg, "SVG chart", s, sim, pt_schedule_draw_svg);
    if (!rc && o.trace)
        rc = draw_to(o.trace, "trace", s, sim, pt_schedule_draw_trace);
    if (!rc && o.save) {
        char *text;
        if (pt_schedule_format(s, &text) != PT_OK) {
            fprintf(stderr, "pipetrain schedule: %s\n", pt_last_error());
            rc = 1;
        } else {
            rc = write_file(o.save, text, "schedule");
            free(text);
        }
    }
    pt_schedule_sim_destroy(sim);
    pt_schedule_destroy(s);
    free(cf);
    free(cb);
    free(cw);
    return rc;
}
