/* test_plan_search: the layout search (src/plan/search.c) prunes with a
 * lower bound; this checks that the pruning loses nothing. On small
 * clusters every layout is enumerated here independently (T dividing the
 * node and the heads, P and D the rest, micro-batches of 1, 2, 4, 8
 * samples, each schedule and chunk count, recomputation, ZeRO), predicted
 * in full, and the best of each set of passes ranked; the search's list must
 * be the same iteration times in the same order, every entry must fit, and
 * it must have played fewer layouts than it ranked. A model no layout can
 * hold is refused with a message. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"

#include "check.h"

#define MAX_LAYOUTS 20000

static pt_plan_candidate all[MAX_LAYOUTS];
static int n_all;

static bool same_passes(const pt_layout *a, const pt_layout *b)
{
    return a->pipeline == b->pipeline && a->tensor == b->tensor && a->data == b->data &&
           a->virtual_stages == b->virtual_stages && a->micro_batch_size == b->micro_batch_size &&
           a->recompute == b->recompute && !strcmp(a->schedule, b->schedule);
}

static int faster(const void *x, const void *y)
{
    const pt_prediction *a = &((const pt_plan_candidate *)x)->prediction;
    const pt_prediction *b = &((const pt_plan_candidate *)y)->prediction;
    if (a->iteration_s != b->iteration_s)
        return a->iteration_s < b->iteration_s ? -1 : 1;
    return (a->memory_bytes > b->memory_bytes) - (a->memory_bytes < b->memory_bytes);
}

/* Keeps the candidate if it fits and is the best of its passes so far. */
static void keep(const pt_plan_candidate *c)
{
    if (!c->prediction.fits)
        return;
    for (int i = 0; i < n_all; i++)
        if (same_passes(&all[i].layout, &c->layout)) {
            if (faster(c, &all[i]) < 0)
                all[i] = *c;
            return;
        }
    if (n_all < MAX_LAYOUTS)
        all[n_all++] = *c;
}

static void brute_force(const pt_cluster *c, const pt_model_config *m, int batch)
{
    static const char *const flat[] = {"1f1b", "zbh1", "zbh2", "zb1p", "zb2p"};
    int devices = c->nodes * c->devices_per_node;
    n_all = 0;
    for (int T = 1; T <= c->devices_per_node; T++)
        for (int P = 1; P <= devices; P++)
            for (int b = 1; b <= 8; b *= 2) {
                if (c->devices_per_node % T || m->n_head % T || devices % (T * P))
                    continue;
                int D = devices / (T * P);
                if (batch % (D * b))
                    continue;
                int M = batch / (D * b);
                pt_layout base = {.pipeline = P,
                                  .tensor = T,
                                  .data = D,
                                  .micro_batch_size = b,
                                  .microbatches = M,
                                  .precision = PT_PLAN_BF16};
                pt_layout v[32];
                int n = 0;
                for (int i = 0; i < (P > 1 ? 5 : 1); i++)
                    v[n] = base, v[n].schedule = flat[i], v[n++].virtual_stages = 1;
                if (P > 1 && 2 * P <= m->n_layer)
                    v[n] = base, v[n].schedule = "zbv", v[n++].virtual_stages = 2;
                for (int k = 2; P > 1 && k <= 8 && P * k <= m->n_layer; k++)
                    if (M % P == 0)
                        v[n] = base, v[n].schedule = "interleaved", v[n++].virtual_stages = k;
                for (int i = 0; i < n; i++)
                    for (int rec = 0; rec <= 1; rec++)
                        for (int z = 0; z <= (D > 1 ? 3 : 0); z++) {
                            pt_plan_candidate cand = {.layout = v[i]};
                            cand.layout.recompute = rec, cand.layout.zero = z;
                            if (pt_plan_predict(c, m, &cand.layout, NULL, &cand.prediction) ==
                                PT_OK)
                                keep(&cand);
                        }
            }
    qsort(all, (size_t)n_all, sizeof all[0], faster);
}

static void check_case(const char *what, const pt_cluster *c, const pt_model_config *m, int batch)
{
    brute_force(c, m, batch);
    pt_search_config cfg = pt_search_config_default();
    cfg.global_batch = batch;
    pt_plan_candidate best[6];
    int n;
    pt_search_stats stats;
    if (pt_plan_search(c, m, &cfg, NULL, best, 6, &n, &stats) != PT_OK) {
        CHECK(0, "%s: %s", what, pt_last_error());
        return;
    }
    CHECK(n == (n_all < 6 ? n_all : 6), "%s: %d ranked, %d layouts fit", what, n, n_all);
    for (int i = 0; i < n && i < n_all; i++) {
        CHECK(best[i].prediction.fits, "%s: rank %d does not fit", what, i + 1);
        CHECK(fabs(best[i].prediction.iteration_s - all[i].prediction.iteration_s) <=
                  1e-12 * all[i].prediction.iteration_s,
              "%s rank %d: the search found %.9g s (%s P=%d T=%d), every layout's best is %.9g "
              "s (%s P=%d T=%d)",
              what, i + 1, best[i].prediction.iteration_s, best[i].layout.schedule,
              best[i].layout.pipeline, best[i].layout.tensor, all[i].prediction.iteration_s,
              all[i].layout.schedule, all[i].layout.pipeline, all[i].layout.tensor);
    }
    CHECK(stats.played < n_all && stats.layouts > n_all,
          "%s: played %ld of %ld layouts (%d fit): nothing pruned", what, stats.played,
          stats.layouts, n_all);
    printf("%s: %ld layouts, %d sets of passes fit, %ld played, best %s P=%d T=%d D=%d in %.4g "
           "s\n",
           what, stats.layouts, n_all, stats.played, best[0].layout.schedule,
           best[0].layout.pipeline, best[0].layout.tensor, best[0].layout.data,
           best[0].prediction.iteration_s);
}

int main(void)
{
    pt_cluster c = {.name = "test", .nodes = 2, .devices_per_node = 4};
    REQUIRE(pt_device_builtin("a100-40gb", &c.device) == PT_OK, "%s", pt_last_error());
    c.intra_node = (pt_interconnect){.latency = 3e-6, .bandwidth = 300e9};
    c.inter_node = (pt_interconnect){.latency = 8e-6, .bandwidth = 12.5e9};
    pt_model_config m;
    REQUIRE(pt_model_config_named("gpt2-xl", &m) == PT_OK, "%s", pt_last_error());
    check_case("gpt2-xl on 8 A100-40GB, batch 32", &c, &m, 32);
    m.n_layer = 16, m.n_embd = 4096, m.n_head = 32, m.seq_len = 2048;
    check_case("a 3.3B gpt, batch 16", &c, &m, 16);

    /* a model that fits nowhere */
    REQUIRE(pt_model_config_named("megatron-1t", &m) == PT_OK, "%s", pt_last_error());
    pt_search_config cfg = pt_search_config_default();
    cfg.global_batch = 8;
    pt_plan_candidate best[1];
    int n;
    CHECK(pt_plan_search(&c, &m, &cfg, NULL, best, 1, &n, NULL) == PT_EINVAL &&
              strstr(pt_last_error(), "no layout") && n == 0,
          "1T on 8 GPUs: %s", pt_last_error());
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
