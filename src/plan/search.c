/* search.c: every layout of a model on a cluster, ranked (pt_plan_search,
 * pipetrain.h). `pipetrain plan --cluster` and bench/bench_plan_search.c
 * call it.
 *
 * The layouts: a tensor group T dividing the node (and the heads and the MLP
 * width), a pipeline depth P dividing the rest, D = devices / (T P) replicas
 * dividing the batch, a micro-batch size b (powers of two) dividing each
 * replica's share into M micro-batches, a schedule (1f1b, zbh1, zbh2, zb1p,
 * zb2p, zbv when each worker gets two chunks, interleaved with v chunks when
 * M is a multiple of P as Megatron-LM needs), with and without
 * recomputation, ZeRO stages 0 to 3 when there are replicas.
 *
 * Branch and bound: every layout gets a cheap lower bound on its iteration
 * (its busiest worker's passes with no bubble, its reduce and optimizer
 * step: pt_plan_bound_of) and on its memory; those that cannot fit are
 * dropped, the rest sorted by bound and predicted in full (the schedule
 * generated and played) until the next bound is no better than the top-th
 * best prediction: nothing after it can enter the list. The ranking is the
 * one a full prediction of every layout would give. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "plan/cost.h"
#include "tensor/error.h"

pt_search_config pt_search_config_default(void)
{
    return (pt_search_config){.global_batch = 0,
                              .devices = 0,
                              .max_micro_batch_size = 8,
                              .max_virtual_stages = 8,
                              .include_zero = 1,
                              .include_no_recompute = 1,
                              .precision = PT_PLAN_BF16};
}

/* Layouts that differ in their ZeRO stage alone run the same passes: one
 * option, one play of the schedule, l.zero to zero_last accounted. */
typedef struct {
    pt_layout l;
    int zero_last;
    double bound; /* the least bound of its stages that can fit */
} option;

typedef struct {
    const pt_cluster *c;
    const pt_model_config *m;
    const pt_search_config *cfg;
    const pt_runtime *rt;
    option *options;
    long n, cap;
    double nearest_memory; /* the least memory any layout needs at least */
    long weighed;          /* layouts bounded */
} searcher;

static int add(searcher *s, const pt_layout *l, int zero_last)
{
    pt_plan_bound b[4];
    if (pt_plan_bounds(s->c, s->m, l, s->rt, zero_last, b) != PT_OK)
        return PT_OK; /* a layout the model cannot take (chunks beyond the layers, ...) */
    double bound = INFINITY;
    s->weighed += zero_last - l->zero + 1;
    for (int z = 0; z <= zero_last - l->zero; z++) {
        s->nearest_memory = fmin(s->nearest_memory, b[z].memory_bytes);
        if (b[z].memory_bytes <= s->c->device.memory_bytes)
            bound = fmin(bound, b[z].iteration_s);
    }
    if (isinf(bound))
        return PT_OK;
    if (s->n == s->cap) {
        long more = s->cap ? 2 * s->cap : 1024;
        option *o = realloc(s->options, (size_t)more * sizeof *o);
        if (!o)
            return pt_fail(PT_ENOMEM, "out of memory searching layouts");
        s->options = o, s->cap = more;
    }
    s->options[s->n++] = (option){*l, zero_last, bound};
    return PT_OK;
}

/* The schedules (and chunk counts) a layout of P stages and M micro-batches
 * can run, with recomputation and ZeRO stages around each. */
static int add_schedules(searcher *s, pt_layout l)
{
    static const char *const flat[] = {"1f1b", "zbh1", "zbh2", "zb1p", "zb2p"};
    int P = l.pipeline, L = s->m->n_layer, rc = PT_OK;
    pt_layout variants[64];
    int n = 0;
    for (int i = 0; i < (P > 1 ? 5 : 1); i++) {
        variants[n] = l, variants[n].schedule = flat[i], variants[n++].virtual_stages = 1;
    }
    if (P > 1 && 2 * P <= L)
        variants[n] = l, variants[n].schedule = "zbv", variants[n++].virtual_stages = 2;
    for (int v = 2; P > 1 && v <= s->cfg->max_virtual_stages && P * v <= L && n < 64; v++)
        if (l.microbatches % P == 0)
            variants[n] = l, variants[n].schedule = "interleaved", variants[n++].virtual_stages = v;
    int zero_last = l.data > 1 && s->cfg->include_zero ? 3 : 0;
    for (int i = 0; i < n && rc == PT_OK; i++)
        for (int recompute = s->cfg->include_no_recompute ? 0 : 1; recompute <= 1; recompute++) {
            pt_layout x = variants[i];
            x.recompute = recompute, x.zero = 0;
            rc = add(s, &x, zero_last);
        }
    return rc;
}

static int enumerate(searcher *s, int devices)
{
    const pt_model_config *m = s->m;
    int f = pt_gpt_inner(m), B = s->cfg->global_batch, rc = PT_OK;
    for (int T = 1; T <= s->c->devices_per_node && rc == PT_OK; T++) {
        if (s->c->devices_per_node % T || devices % T || m->n_head % T || f % T)
            continue;
        for (int P = 1; P <= devices / T && P <= m->n_layer && rc == PT_OK; P++) {
            if ((devices / T) % P)
                continue;
            int D = devices / (T * P);
            if (B % D)
                continue;
            for (int b = 1; b <= s->cfg->max_micro_batch_size && rc == PT_OK; b *= 2) {
                if ((B / D) % b)
                    continue;
                pt_layout l = {.pipeline = P,
                               .tensor = T,
                               .data = D,
                               .micro_batch_size = b,
                               .microbatches = B / (D * b),
                               .precision = s->cfg->precision};
                rc = add_schedules(s, l);
            }
        }
    }
    return rc;
}

static int by_bound(const void *a, const void *b)
{
    double x = ((const option *)a)->bound, y = ((const option *)b)->bound;
    return (x > y) - (x < y);
}

/* Layouts that differ in the ZeRO stage alone run the same passes. */
static bool same_passes(const pt_layout *a, const pt_layout *b)
{
    return a->pipeline == b->pipeline && a->tensor == b->tensor && a->data == b->data &&
           a->virtual_stages == b->virtual_stages && a->micro_batch_size == b->micro_batch_size &&
           a->recompute == b->recompute && !strcmp(a->schedule, b->schedule);
}

static bool better(const pt_prediction *x, const pt_prediction *y)
{
    return x->iteration_s < y->iteration_s * (1 - 1e-9) ||
           (x->iteration_s <= y->iteration_s * (1 + 1e-9) && x->memory_bytes < y->memory_bytes);
}

/* Puts a candidate into the ranked list best[0..*n) of at most top: faster
 * first, then leaner; of layouts differing only in ZeRO stage, the better. */
static void rank(pt_plan_candidate *best, int top, int *n, const pt_plan_candidate *c)
{
    int i = 0;
    while (i < *n && !same_passes(&best[i].layout, &c->layout))
        i++;
    if (i < *n) {
        if (!better(&c->prediction, &best[i].prediction))
            return;
        for (; i + 1 < *n; i++) /* take it out; it goes back in below */
            best[i] = best[i + 1];
        (*n)--;
    }
    if (*n == top && !better(&c->prediction, &best[top - 1].prediction))
        return;
    i = *n < top ? (*n)++ : top - 1;
    while (i > 0 && better(&c->prediction, &best[i - 1].prediction)) {
        best[i] = best[i - 1];
        i--;
    }
    best[i] = *c;
}

int pt_plan_search(const pt_cluster *c, const pt_model_config *m, const pt_search_config *cfg,
                   const pt_runtime *rt, pt_plan_candidate *best, int top, int *n_best,
                   pt_search_stats *stats)
{
    pt_search_stats none;
    if (!stats)
        stats = &none;
    *n_best = 0;
    *stats = (pt_search_stats){0};
    long devices = cfg->devices > 0 ? cfg->devices : (long)c->nodes * c->devices_per_node;
    if (cfg->global_batch < 1 || top < 1 || devices < 1 ||
        devices > (long)c->nodes * c->devices_per_node)
        return pt_fail(PT_EINVAL,
                       "a search needs a batch >= 1, a list >= 1 and 1 to %ld devices (got "
                       "batch %d, %d, %ld devices)",
                       (long)c->nodes * c->devices_per_node, cfg->global_batch, top, devices);
    pt_runtime dflt = pt_runtime_default();
    searcher s = {.c = c, .m = m, .cfg = cfg, .rt = rt ? rt : &dflt, .nearest_memory = INFINITY};
    int rc = enumerate(&s, (int)devices);
    stats->layouts = s.weighed;
    if (rc == PT_OK && s.n > 0)
        qsort(s.options, (size_t)s.n, sizeof *s.options, by_bound);
    for (long i = 0; rc == PT_OK && i < s.n; i++) {
        if (*n_best == top && s.options[i].bound >= best[top - 1].prediction.iteration_s)
            break; /* no later layout can do better than the list's last */
        const option *o = &s.options[i];
        pt_prediction pred[4];
        stats->played++;
        if (pt_plan_predict_stages(c, m, &o->l, s.rt, o->zero_last, pred) != PT_OK)
            continue; /* a schedule that cannot take this P and M */
        for (int z = o->l.zero; z <= o->zero_last; z++) {
            pt_plan_candidate cand = {.layout = o->l, .prediction = pred[z - o->l.zero]};
            cand.layout.zero = z;
            s.nearest_memory = fmin(s.nearest_memory, (double)cand.prediction.memory_bytes);
            if (cand.prediction.fits)
                rank(best, top, n_best, &cand);
        }
    }
    free(s.options);
    if (rc == PT_OK && *n_best == 0)
        rc = pt_fail(PT_EINVAL,
                     "no layout of %ld devices fits %.1f GB each; the leanest needs %.1f GB "
                     "(more devices, recomputation, ZeRO or a smaller batch may help)",
                     devices, c->device.memory_bytes / 1e9, s.nearest_memory / 1e9);
    return rc;
}
