/* cmd_plan_cluster.c: `pipetrain plan --cluster FILE --model NAME|FILE`
 * and `pipetrain plan --check FILE`, the planning of a run on a cluster
 * this machine is not (src/plan/search.c, predict.c):
 *
 *   --cluster   searches every layout of the model on the cluster's devices
 *               (pipeline, tensor and data parallelism, chunks per worker,
 *               micro-batch size and count, schedule, recomputation, ZeRO
 *               stage) that fits their memory and prints the best few with
 *               their predicted iteration time, tokens/s, TFLOP/s per device,
 *               MFU, bubble and memory per device; --draw pictures the best
 *               one's schedule;
 *   --check     replays the published runs of a file (tests/data/
 *               published_runs.json) and prints each prediction beside the
 *               published figure, with the error and whether the figure was
 *               fitted.
 * cmd_plan.c hands the arguments here when either flag is among them.
 *
 * Exit status: 0 done; 1 a file that will not load, no layout that fits, a
 * check outside its limits; 2 a bad flag or value (the message says which). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/model_limits.h"
#include "io/hf_config.h"
#include "io/json.h"
#include "io/published_runs.h"
#include "pipetrain.h"
#include "plan/cost.h"
#include "plan/published.h"

#define MAX_TOP 50

typedef struct {
    const char *cluster, *model, *check;
    pt_model_config m;
    int shape_given[5]; /* --layers --heads --embd --seq --vocab given */
    int shape[5];
    pt_search_config search;
    pt_runtime rt;
    int top, draw;
    int fit_rows[2], n_fit_rows;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pipetrain plan --cluster FILE --model NAME|FILE --global-batch B [FLAGS]\n"
            "       pipetrain plan --check FILE [--fit-rows A,B]\n\n"
            "plan a run on a cluster: rank the layouts that fit, predict their speed and "
            "memory\n\n"
            "  --cluster FILE       the cluster (JSON: devices, nodes, links; docs/planning.md)\n"
            "  --model NAME|FILE    a published model (gpt2, gpt2-medium, gpt2-large, gpt2-xl,\n"
            "                       gpt3-175b, megatron-1.7b ... megatron-1t) or a Hugging\n"
            "                       Face config.json of a GPT-2\n"
            "  --layers --heads --embd --seq --vocab N   change the model's shape\n"
            "  --global-batch B     samples per iteration (required; range [1, 1e8])\n"
            "  --devices N          devices to use (default: every device of the cluster)\n"
            "  --precision P        fp32 tf32 fp16 bf16 fp8 (default bf16)\n"
            "  --top K              layouts to print (default 5; range [1, %d])\n"
            "  --max-micro-batch N  largest micro-batch tried, powers of two (default 8)\n"
            "  --max-virtual V      most chunks per worker tried (default 8; range [1, 64])\n"
            "  --no-zero            do not try ZeRO stages 1 to 3\n"
            "  --recompute-only     do not try keeping every activation\n"
            "  --blocking-sends     the runtime's sends hold their sender (Megatron-LM's p2p)\n"
            "  --post-validation    no synchronized optimizer step (zero-bubble runtimes)\n"
            "  --no-overlap-reduce  the data-parallel reduce waits for the backward\n"
            "  --draw               picture the best layout's schedule (its first micro-batches)\n"
            "  --check FILE         replay published runs and print prediction beside figure\n"
            "  --fit-rows A,B       Table 1 rows the device's efficiencies are fitted on\n"
            "                       (default 1,9)\n",
            MAX_TOP);
}

static const char *const shape_flags[5] = {"--layers", "--heads", "--embd", "--seq", "--vocab"};
static const num_range shape_ranges[5] = {LIMIT_LAYERS, LIMIT_HEADS, LIMIT_EMBD, LIMIT_SEQ,
                                          LIMIT_VOCAB};

static int parse(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->search = pt_search_config_default();
    o->rt = pt_runtime_default();
    o->top = 5;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return -1;
        }
        const struct {
            const char *name;
            int *set;
        } switches[] = {{"--draw", &o->draw},
                        {"--blocking-sends", &o->rt.blocking_sends},
                        {"--post-validation", &o->rt.post_validation}};
        size_t k = 0, n_switches = sizeof switches / sizeof switches[0];
        while (k < n_switches && strcmp(f, switches[k].name))
            k++;
        if (k < n_switches) {
            *switches[k].set = 1;
            continue;
        }
        if (!strcmp(f, "--no-zero") || !strcmp(f, "--recompute-only") ||
            !strcmp(f, "--no-overlap-reduce")) {
            *(!strcmp(f, "--no-zero")          ? &o->search.include_zero
              : !strcmp(f, "--recompute-only") ? &o->search.include_no_recompute
                                               : &o->rt.overlap_dp_reduce) = 0;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "pipetrain plan: %s needs a value (see --help)\n", f);
            return 2;
        }
        const char *v = argv[++i];
        int rc = 0, s = 0;
        while (s < 5 && strcmp(f, shape_flags[s]))
            s++;
        if (s < 5) {
            rc = num_int("plan", f, v, shape_ranges[s], &o->shape[s]);
            o->shape_given[s] = 1;
        } else if (!strcmp(f, "--cluster"))
            o->cluster = v;
        else if (!strcmp(f, "--model"))
            o->model = v;
        else if (!strcmp(f, "--check"))
            o->check = v;
        else if (!strcmp(f, "--global-batch"))
            rc = num_int("plan", f, v, NUM_RANGE(1, 1e8), &o->search.global_batch);
        else if (!strcmp(f, "--devices"))
            rc = num_int("plan", f, v, NUM_RANGE(1, 1e8), &o->search.devices);
        else if (!strcmp(f, "--top"))
            rc = num_int("plan", f, v, NUM_RANGE(1, MAX_TOP), &o->top);
        else if (!strcmp(f, "--max-micro-batch"))
            rc = num_int("plan", f, v, NUM_RANGE(1, 1 << 20), &o->search.max_micro_batch_size);
        else if (!strcmp(f, "--max-virtual"))
            rc = num_int("plan", f, v, LIMIT_VIRTUAL, &o->search.max_virtual_stages);
        else if (!strcmp(f, "--fit-rows"))
            rc = num_int_list("plan", f, v, NUM_RANGE(1, 1000), o->fit_rows, 2, &o->n_fit_rows);
        else if (!strcmp(f, "--precision")) {
            int p = pt_plan_precision_parse(v);
            if (p < 0)
                return num_refuse("plan", f, v, "fp32, tf32, fp16, bf16 or fp8");
            o->search.precision = (pt_plan_precision)p;
        } else {
            fprintf(stderr, "pipetrain plan: unknown flag '%s' (see --help)\n", f);
            return 2;
        }
        if (rc)
            return rc;
    }
    if (o->check && o->cluster) {
        fprintf(stderr, "pipetrain plan: --check replays published runs; it takes no --cluster\n");
        return 2;
    }
    if (o->n_fit_rows && (o->n_fit_rows != 2 || !o->check)) {
        fprintf(stderr, "pipetrain plan: --fit-rows takes two rows, with --check\n");
        return 2;
    }
    if (o->cluster && (!o->model || !o->search.global_batch)) {
        fprintf(stderr, "pipetrain plan: --cluster needs --model and --global-batch\n");
        return 2;
    }
    return 0;
}

/* The model: a name, or a Hugging Face config.json; then the shape flags. */
static int load_model(options *o)
{
    const char *dot = strrchr(o->model, '.');
    int rc;
    if (dot && !strcmp(dot, ".json")) {
        pt_json *root;
        rc = pt_json_load(o->model, 0, &root);
        if (rc == PT_OK) {
            rc = pt_hf_config_read(root, o->model, &o->m);
            pt_json_free(root);
        }
    } else {
        rc = pt_model_config_named(o->model, &o->m);
    }
    if (rc != PT_OK) {
        fprintf(stderr, "pipetrain plan: --model: %s\n", pt_last_error());
        return rc == PT_EINVAL ? 2 : 1;
    }
    int *field[5] = {&o->m.n_layer, &o->m.n_head, &o->m.n_embd, &o->m.seq_len, &o->m.vocab};
    for (int s = 0; s < 5; s++)
        if (o->shape_given[s])
            *field[s] = o->shape[s];
    if (o->m.n_embd % o->m.n_head) {
        fprintf(stderr, "pipetrain plan: the width %d is not a multiple of the %d heads\n",
                o->m.n_embd, o->m.n_head);
        return 2;
    }
    return 0;
}

static double parameters(const pt_model_config *m)
{
    double h = m->n_embd, f = m->n_inner ? m->n_inner : 4 * h;
    return m->n_layer * (4 * h * h + 2 * h * f + 9 * h + f) + (double)m->vocab * h +
           (double)m->seq_len * h + 2 * h;
}

static void print_cluster(const pt_cluster *c)
{
    const pt_device *d = &c->device;
    printf("cluster %s: %d nodes x %d %s (%.0f GB, %.0f GB/s", c->name, c->nodes,
           c->devices_per_node, d->name, d->memory_bytes / 1e9, d->memory_bandwidth / 1e9);
    for (int p = 0; p < PT_PLAN_N_PRECISIONS; p++)
        if (d->peak_flops[p] > 0)
            printf(", %s %.4g TFLOP/s", pt_plan_precision_name((pt_plan_precision)p),
                   d->peak_flops[p] / 1e12);
    printf(")\n  within a node %.4g GB/s, %.3g us; between nodes %.4g GB/s per device, %.3g us\n",
           c->intra_node.bandwidth / 1e9, c->intra_node.latency * 1e6,
           c->inter_node.bandwidth / 1e9, c->inter_node.latency * 1e6);
}

static void print_rank(int i, const pt_plan_candidate *c)
{
    const pt_layout *l = &c->layout;
    const pt_prediction *p = &c->prediction;
    printf("%-4d %4d %3d %5d %3d %4d %5d %-12s %-4s %4d %9.3f %11.0f %8.1f %5.1f%% %5.1f%% %7.1f\n",
           i + 1, l->pipeline, l->tensor, l->data, l->virtual_stages, l->micro_batch_size,
           l->microbatches, l->schedule, l->recompute ? "yes" : "no", l->zero, p->iteration_s,
           p->tokens_per_s, p->flops_per_device / 1e12, 100 * p->mfu, 100 * p->bubble,
           p->memory_bytes / 1e9);
}

/* The best layout's schedule on its first micro-batches, in milliseconds. */
static int draw(const options *o, const pt_cluster *c, const pt_plan_candidate *best)
{
    pt_layout l = best->layout;
    int keep = 2 * l.pipeline;
    if (l.microbatches > keep)
        l.microbatches = keep;
    pt_schedule *s;
    pt_schedule_sim *sim;
    char *text = NULL;
    int rc = pt_plan_schedule(c, &o->m, &l, &o->rt, &s, &sim);
    if (rc == PT_OK)
        rc = pt_schedule_draw_ascii(s, sim, &text);
    double shortest = INFINITY;
    for (int w = 0; rc == PT_OK && w < sim->workers; w++)
        for (int i = 0; i < sim->n_actions[w]; i++)
            if (sim->end[w][i] > sim->start[w][i])
                shortest = fmin(shortest, sim->end[w][i] - sim->start[w][i]);
    if (rc == PT_OK)
        printf("\nthe best layout's schedule (%s, %d micro-batches of its %d drawn; a column is "
               "its shortest pass, %.3g ms):\n%s",
               l.schedule, l.microbatches, best->layout.microbatches, 1e3 * shortest, text);
    else
        fprintf(stderr, "pipetrain plan: --draw: %s\n", pt_last_error());
    free(text);
    if (rc == PT_OK) {
        pt_schedule_sim_destroy(sim);
        pt_schedule_destroy(s);
    }
    return rc == PT_OK ? 0 : 1;
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int plan_cluster(options *o)
{
    pt_cluster c;
    if (pt_cluster_load(o->cluster, &c) != PT_OK) {
        fprintf(stderr, "pipetrain plan: %s\n", pt_last_error());
        return 1;
    }
    int rc = load_model(o);
    if (rc)
        return rc;
    print_cluster(&c);
    printf("model: gpt, %d layers, %d heads, width %d, sequence %d, vocabulary %d (%.4g billion "
           "parameters)\n",
           o->m.n_layer, o->m.n_head, o->m.n_embd, o->m.seq_len, o->m.vocab,
           parameters(&o->m) / 1e9);
    printf("batch %d samples (%.4g million tokens) an iteration, %s; runtime: sends %s, "
           "optimizer step %s, data-parallel reduce %s\n",
           o->search.global_batch, o->search.global_batch * (double)o->m.seq_len / 1e6,
           pt_plan_precision_name(o->search.precision),
           o->rt.blocking_sends ? "block" : "overlap compute",
           o->rt.post_validation ? "post-validated" : "synchronized",
           o->rt.overlap_dp_reduce ? "overlaps the backward" : "after the backward");
    pt_plan_candidate best[MAX_TOP];
    int n;
    pt_search_stats stats;
    double t0 = seconds_now();
    if (pt_plan_search(&c, &o->m, &o->search, &o->rt, best, o->top, &n, &stats) != PT_OK) {
        fprintf(stderr, "pipetrain plan: %s\n", pt_last_error());
        return 1;
    }
    printf("%ld layouts weighed, %ld of them played in full, in %.2f s; the best %d:\n\n",
           stats.layouts, stats.played, seconds_now() - t0, n);
    printf("%-4s %4s %3s %5s %3s %4s %5s %-12s %-4s %4s %9s %11s %8s %6s %6s %7s\n", "rank", "P",
           "T", "D", "v", "mbs", "M", "schedule", "rec", "zero", "iter s", "tokens/s", "TFLOP/s",
           "MFU", "bubble", "mem GB");
    for (int i = 0; i < n; i++)
        print_rank(i, &best[i]);
    printf("\n(P pipeline stages, T tensor-parallel devices, D replicas, v chunks per worker, "
           "mbs samples per micro-batch, M micro-batches per replica; TFLOP/s and MFU per "
           "device, memory on the fullest device of %.0f GB)\n",
           c.device.memory_bytes / 1e9);
    const pt_prediction *p = &best[0].prediction;
    const pt_memory_use *u = &p->memory;
    printf("\nthe best: an iteration of %.3f s = pipeline %.3f + data-parallel %.3f + optimizer "
           "%.3f; tensor-parallel all-reduces %.1f%% of a pass; %.1f GB on the fullest device = "
           "weights %.1f + gradients %.1f + optimizer state %.1f + activations %.1f\n",
           p->iteration_s, p->pipeline_s, p->dp_comm_s, p->optimizer_s, 100 * p->tp_share,
           p->memory_bytes / 1e9, u->params / 1e9, u->grads / 1e9, u->moments / 1e9,
           u->activations / 1e9);
    return o->draw ? draw(o, &c, &best[0]) : 0;
}

/* ---- --check ---- */

static int check_zero_bubble(const pt_published *p)
{
    if (!p->n_zb)
        return 0;
    int bad = 0;
    double worst_b = 0, worst_s = 0;
    printf("Qi et al., zero bubble: bubble rate from the profiled times (Table 9) beside Table "
           "5; throughput over 1F1B's beside Table 4's measured ratio\n");
    printf("%-6s %4s %-12s %8s %8s %8s %9s %9s %7s\n", "model", "m", "schedule", "bubble", "paper",
           "diff", "speedup", "measured", "error");
    for (int i = 0; i < p->n_zb; i++) {
        const pt_published_zb *r = &p->zb[i];
        double bubble[PT_ZB_N_SCHEDULES], speedup[PT_ZB_N_SCHEDULES];
        if (pt_replay_zb_bubbles(r, bubble) != PT_OK || pt_replay_zb_speedups(r, speedup)) {
            fprintf(stderr, "pipetrain plan: %s\n", pt_last_error());
            return 1;
        }
        for (int k = 0; k < PT_ZB_N_SCHEDULES; k++) {
            double diff = bubble[k] - r->bubble[k].value;
            printf("%-6s %4g %-12s %8.4f %8.4f %+8.4f", r->model, r->microbatches.value,
                   pt_zb_schedule_names[k], bubble[k], r->bubble[k].value, diff);
            worst_b = fmax(worst_b, fabs(diff));
            bad |= fabs(diff) > 0.01;
            const pt_cited *t = &r->samples_per_gpu_s[k], *base = &r->samples_per_gpu_s[0];
            if (k && t->source && base->value > 0) {
                double measured = t->value / base->value, err = speedup[k] / measured - 1;
                printf(" %9.3f %9.3f %+6.1f%%", speedup[k], measured, 100 * err);
                worst_s = fmax(worst_s, fabs(err));
                bad |= fabs(err) > 0.05;
            }
            printf("\n");
        }
    }
    printf("worst bubble difference %.4f (limit 0.01); worst speedup error %.1f%% (limit 5%%)\n\n",
           worst_b, 100 * worst_s);
    return bad;
}

static int check_megatron(const pt_published *p, const options *o)
{
    if (!p->n_megatron)
        return 0;
    int rows[2] = {pt_megatron_fit_rows[0], pt_megatron_fit_rows[1]};
    if (o->n_fit_rows)
        rows[0] = o->fit_rows[0] - 1, rows[1] = o->fit_rows[1] - 1;
    pt_device fitted;
    if (pt_fit_megatron(p, rows, &fitted) != PT_OK) {
        fprintf(stderr, "pipetrain plan: %s\n", pt_last_error());
        return 1;
    }
    printf("Narayanan et al., Megatron-LM Table 1: TFLOP/s per GPU predicted from each row's "
           "configuration; the %s's efficiencies fitted on rows %d and %d: products %.4f of "
           "peak, memory-bound work %.4f of bandwidth\n",
           fitted.name, rows[0] + 1, rows[1] + 1, fitted.gemm_efficiency, fitted.memory_efficiency);
    printf("%-3s %-9s %3s %3s %5s %5s %4s %3s %9s %9s %7s %8s %8s\n", "row", "model", "T", "P",
           "GPUs", "batch", "mbs", "v", "predicted", "published", "error", "iter s", "mem GB");
    double worst = 0;
    int bad = 0;
    for (int i = 0; i < p->n_megatron; i++) {
        const pt_published_megatron *r = &p->megatron[i];
        pt_cluster c;
        pt_prediction pred;
        pt_model_config m;
        pt_layout l;
        pt_runtime rt;
        double tflops;
        if (pt_megatron_cluster(&p->megatron_cluster, (int)r->gpus.value, &c) != PT_OK ||
            pt_megatron_layout(r, &m, &l, &rt) != PT_OK) {
            fprintf(stderr, "pipetrain plan: %s\n", pt_last_error());
            return 1;
        }
        c.device.gemm_efficiency = fitted.gemm_efficiency;
        c.device.memory_efficiency = fitted.memory_efficiency;
        if (pt_replay_megatron(&c, r, &pred, &tflops) != PT_OK) {
            fprintf(stderr, "pipetrain plan: %s\n", pt_last_error());
            return 1;
        }
        double err = tflops / r->tflops_per_gpu.value - 1;
        bool fitted_row = i == rows[0] || i == rows[1];
        printf("%-3d %-9s %3d %3d %5g %5g %4d %3d %9.1f %9g %+6.1f%% %8.2f %8.1f%s\n", i + 1,
               r->model, l.tensor, l.pipeline, r->gpus.value, r->batch.value, l.micro_batch_size,
               l.virtual_stages, tflops, r->tflops_per_gpu.value, 100 * err, pred.iteration_s,
               pred.memory_bytes / 1e9, fitted_row ? "  (fitted)" : "");
        if (!fitted_row) {
            worst = fmax(worst, fabs(err));
            bad |= fabs(err) > 0.08;
        }
    }
    printf("worst error of the predicted rows %.1f%% (limit 8%%)\n", 100 * worst);
    return bad;
}

static int check(const options *o)
{
    pt_published *p;
    if (pt_published_load(o->check, &p) != PT_OK) {
        fprintf(stderr, "pipetrain plan: %s\n", pt_last_error());
        return 1;
    }
    int bad = check_zero_bubble(p);
    bad |= check_megatron(p, o);
    pt_published_free(p);
    return bad ? 1 : 0;
}

int cmd_plan_cluster(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    return o.check ? check(&o) : plan_cluster(&o);
}
