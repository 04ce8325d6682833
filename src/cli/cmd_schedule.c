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
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "pipetrain.h"
#include "plan/partition.h"

typedef struct {
    pt_schedule_config cfg;
    pt_schedule_costs costs;
    const char *from, *svg, *trace, *costs_file, *save;
    bool json, program, generated_flags, virtual_given, replicas_given;
    int tied[2 * 16], n_tied; /* --tied pairs */
    /* --memory: a gpt of these shapes, cut as --balance says */
    bool memory, model_given, checkpoint;
    pt_model_config model;
    int batch, moments;
    int balance[PT_PARTITION_MAX_CHUNKS], n_balance;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pipetrain schedule --schedule NAME --stages P --microbatches M [FLAGS]\n"
            "       pipetrain schedule --from FILE [FLAGS]\n\n"
            "build, check, simulate and draw a pipeline schedule\n\n"
            "  --schedule NAME     gpipe 1f1b interleaved loopedbfs zbh1 zbv pipedream 1f1b-rr\n"
            "                      (default 1f1b)\n"
            "  --stages P          pipeline stages (default 4)\n"
            "  --microbatches M    micro-batches per mini-batch (default 8)\n"
            "  --virtual V         chunks per worker: interleaved, loopedbfs (default 2), zbv (2)\n"
            "  --replicas R        data-parallel replicas of each stage: 1f1b-rr (default 2),\n"
            "                      pipedream (1F1B-RR, default 1)\n"
            "  --from FILE         load a schedule in the text format instead (docs/schedules.md)\n"
            "  --cost-f X          time of one chunk's forward (default 1)\n"
            "  --cost-b Y          time of one chunk's input gradient (default 1)\n"
            "  --cost-w Z          time of one chunk's weight gradient (default 1; BW = B + W)\n"
            "  --latency L         time of one transfer between workers (default 0)\n"
            "  --cost-collective C time of one REDUCE, TIED or NORM, for --program (default 0)\n"
            "  --costs FILE        per-chunk costs: one line 'F B W' per chunk, in chunk order\n"
            "  --svg FILE          write a Gantt chart\n"
            "  --trace FILE        write Chrome/Perfetto trace-event JSON\n"
            "  --save FILE         write the schedule in the text format\n"
            "  --json              print one JSON object instead of the picture\n"
            "  --program           print the program lowered from the schedule instead: every\n"
            "                      worker's sends, receives, collectives and step, as text,\n"
            "                      then its simulated timeline and makespan\n"
            "  --tied A-B[,C-D]    chunks sharing a parameter, for --program (GPT: 0-LAST)\n"
            "  --memory            also predict what each worker holds (bytes by kind) for a\n"
            "                      gpt of the shape below, as the pipeline allocates it:\n"
            "  --layers N --heads N --embd N --seq N --vocab N\n"
            "                      the gpt (defaults 4, 4, 128, 128, 256)\n"
            "  --batch N           samples per micro-batch (default 1)\n"
            "  --balance LIST      blocks per chunk (default: as even as the blocks allow)\n"
            "  --checkpoint-activations   keep only each chunk's input (recompute)\n"
            "  --optimizer adamw|sgd|none moments per parameter: 2, 1, 0 (default adamw)\n");
}

static int bad_value(const char *flag, const char *value, const char *want)
{
    fprintf(stderr, "pipetrain schedule: %s '%s': expected %s\n", flag, value, want);
    return 2;
}

static int parse_int(const char *flag, const char *value, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (!*value || *end || errno || v < -1000000000L || v > 1000000000L)
        return bad_value(flag, value, "an integer");
    *out = (int)v;
    return 0;
}

static int parse_cost(const char *flag, const char *value, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (!*value || *end || errno || !isfinite(v) || v < 0)
        return bad_value(flag, value, "a number >= 0");
    *out = v;
    return 0;
}

/* A-B[,C-D...]: pairs of chunks that share a parameter */
static int parse_tied(const char *flag, const char *value, options *o)
{
    const char *p = value;
    o->n_tied = 0;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = -1;
        if (end != p && *end == '-' && end[1] >= '0' && end[1] <= '9')
            b = strtol(end + 1, &end, 10);
        if (b < 0 || a < 0 || a > 1000000 || b > 1000000 || (*end && *end != ',') ||
            o->n_tied == (int)(sizeof o->tied / sizeof o->tied[0]) / 2)
            return bad_value(flag, value, "pairs of chunks A-B, comma-separated (at most 16)");
        o->tied[2 * o->n_tied] = (int)a;
        o->tied[2 * o->n_tied + 1] = (int)b;
        o->n_tied++;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* The flags of --memory's model; true when flag is one of them (*rc then
 * says whether its value was good). */
static bool parse_model_flag(const char *flag, const char *value, options *o, int *rc)
{
    const struct {
        const char *name;
        int *field;
    } ints[] = {{"--layers", &o->model.n_layer}, {"--heads", &o->model.n_head},
                {"--embd", &o->model.n_embd},    {"--seq", &o->model.seq_len},
                {"--vocab", &o->model.vocab},    {"--batch", &o->batch}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(flag, ints[i].name)) {
            *rc = parse_int(flag, value, ints[i].field);
            if (!*rc && *ints[i].field < 1)
                *rc = bad_value(flag, value, "a number >= 1");
            return true;
        }
    if (!strcmp(flag, "--balance")) {
        *rc = pt_partition_parse_balance(value, o->balance, PT_PARTITION_MAX_CHUNKS,
                                         &o->n_balance) == PT_OK
                  ? 0
                  : bad_value(flag, value, "a comma-separated list of block counts");
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
        if (!strcmp(flag, "--memory") || !strcmp(flag, "--checkpoint-activations")) {
            *(flag[2] == 'm' ? &o->memory : &o->checkpoint) = true;
            o->model_given |= flag[2] == 'c';
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
            rc = parse_int(flag, value, &o->cfg.stages), o->generated_flags = true;
        else if (!strcmp(flag, "--microbatches"))
            rc = parse_int(flag, value, &o->cfg.microbatches), o->generated_flags = true;
        else if (!strcmp(flag, "--virtual"))
            rc = parse_int(flag, value, &o->cfg.virtual_stages), o->virtual_given = true;
        else if (!strcmp(flag, "--replicas"))
            rc = parse_int(flag, value, &o->cfg.replicas), o->replicas_given = true;
        else if (!strcmp(flag, "--cost-f"))
            rc = parse_cost(flag, value, &o->costs.f);
        else if (!strcmp(flag, "--cost-b"))
            rc = parse_cost(flag, value, &o->costs.b);
        else if (!strcmp(flag, "--cost-w"))
            rc = parse_cost(flag, value, &o->costs.w);
        else if (!strcmp(flag, "--latency"))
            rc = parse_cost(flag, value, &o->costs.latency);
        else if (!strcmp(flag, "--cost-collective"))
            rc = parse_cost(flag, value, &o->costs.collective);
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
            rc = parse_tied(flag, value, o);
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
    if (o->memory && o->json) {
        fprintf(stderr,
                "pipetrain schedule: --memory prints a table; it does not go with --json\n");
        return 2;
    }
    if (o->model_given && !o->memory) {
        fprintf(stderr, "pipetrain schedule: the model flags describe what --memory predicts; "
                        "add --memory or drop them\n");
        return 2;
    }
    if (o->from && o->generated_flags) {
        fprintf(stderr, "pipetrain schedule: --from takes the schedule from the file; drop "
                        "--schedule, --stages, --microbatches, --virtual and --replicas\n");
        return 2;
    }
    if (o->virtual_given && o->cfg.virtual_stages < 1) {
        fprintf(stderr, "pipetrain schedule: --virtual takes a number >= 1 (got %d)\n",
                o->cfg.virtual_stages);
        return 2;
    }
    if (o->replicas_given && o->cfg.replicas < 1) {
        fprintf(stderr, "pipetrain schedule: --replicas takes a number >= 1 (got %d)\n",
                o->cfg.replicas);
        return 2;
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
        if (got != 3 || !isfinite(x) || !isfinite(y) || !isfinite(z) || x < 0 || y < 0 || z < 0) {
            fprintf(stderr, "pipetrain schedule: %s:%d: expected three costs >= 0: F B W\n", path,
                    lineno);
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

static void print_json(const pt_schedule *s, const pt_schedule_sim *sim, const char *error)
{
    printf("{\"schedule\":\"%s\",\"stages\":%d,\"microbatches\":%d,\"virtual\":%d,"
           "\"workers\":%d,\"replicas\":%d",
           pt_schedule_name(s), pt_schedule_stages(s), pt_schedule_microbatches(s),
           pt_schedule_virtual_stages(s), pt_schedule_workers(s), pt_schedule_replicas(s));
    if (sim) {
        printf(",\"makespan\":%.10g,\"bubble_fraction\":%.10g,\"peak_activations\":[",
               sim->makespan, sim->bubble_fraction);
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
    printf(",\"valid\":false,\"error\":\"");
    for (const char *p = error ? error : ""; *p; p++)
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if ((unsigned char)*p >= 0x20)
            putchar(*p);
    printf("\"}\n");
}

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
        printf("costs: per chunk from file, latency %g\n\n", c->latency);
    else
        printf("costs: F %g, B %g, W %g (BW %g), latency %g\n\n", c->f, c->b, c->w, c->b + c->w,
               c->latency);
    fputs(ascii, stdout);
    free(ascii);
    printf("\nmakespan %g, bubble fraction %.4f\n", sim->makespan, sim->bubble_fraction);
    for (int w = 0; w < sim->workers; w++)
        printf("worker %d: busy %g, idle %g, peak activations %d\n", w, sim->busy[w], sim->idle[w],
               sim->peak_activations[w]);
    return 0;
}

/* --memory: each worker's predicted bytes by kind. */
static int print_memory(const pt_schedule *s, const options *o)
{
    pt_model *desc = NULL;
    int K = pt_schedule_chunks(s), W = pt_schedule_workers(s);
    int *balance = calloc((size_t)K, sizeof(int));
    pt_memory_use *u = calloc((size_t)W, sizeof *u);
    int rc = balance && u ? pt_model_describe(&o->model, &desc) : PT_ENOMEM;
    if (rc == PT_OK && o->n_balance) {
        rc = pt_partition_check_balance(o->balance, o->n_balance, K, pt_model_n_blocks(desc));
        if (rc == PT_OK)
            memcpy(balance, o->balance, sizeof(int) * (size_t)K);
    } else if (rc == PT_OK) {
        int n = pt_model_n_blocks(desc);
        if (K > n) {
            fprintf(stderr,
                    "pipetrain schedule: --memory: the schedule's %d chunks need at least %d "
                    "blocks; the gpt has %d (--layers + 2)\n",
                    K, K, n);
            pt_model_destroy(desc);
            free(balance);
            free(u);
            return 2;
        }
        for (int c = 0; c < K; c++)
            balance[c] = n / K + (c >= K - n % K); /* the extra blocks go to the last chunks */
    }
    if (rc == PT_OK)
        rc = pt_schedule_predict_memory(s, desc, balance, o->batch, o->checkpoint, o->moments, u);
    if (rc == PT_OK) {
        printf("\nmemory per worker (MiB; gpt %d layers x %d, micro-batches of %d, --balance ",
               o->model.n_layer, o->model.n_embd, o->batch);
        for (int c = 0; c < K; c++)
            printf("%s%d", c ? "," : "", balance[c]);
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
    free(balance);
    free(u);
    return rc == PT_OK ? 0 : 2;
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
    int rc = pt_program_lower(s, &lo, &p);
    if (rc == PT_OK)
        rc = pt_program_validate(p);
    if (rc == PT_OK)
        rc = pt_program_format(p, &text);
    if (rc == PT_OK)
        rc = pt_program_simulate(p, &o->costs, &sim);
    if (rc == PT_OK)
        rc = pt_program_draw_ascii(p, sim, &picture);
    if (rc == PT_OK)
        printf("%s\n%smakespan %g with collectives of %g, bubble fraction %.4f\n", text, picture,
               sim->makespan, o->costs.collective, sim->bubble_fraction);
    else
        fprintf(stderr, "pipetrain schedule: --program: %s\n", pt_last_error());
    free(text);
    free(picture);
    pt_schedule_sim_destroy(sim);
    pt_program_destroy(p);
    return rc == PT_OK ? 0 : rc == PT_EINVAL ? 2 : 1;
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
            fprintf(stderr, "pipetrain schedule: %s\n", pt_last_error());
            return 1;
        }
    } else if (pt_schedule_create(&o.cfg, &s) != PT_OK) {
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
