/* schedule.c: the schedule object itself: building one action at a time
 * (generators, parser), the placement queries the executor relies on (who
 * holds a chunk for a micro-batch, whom an action sends to), and the public
 * entry point that picks a generator by name and checks its parameters. */
#include "sched/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/deps.h"
#include "tensor/error.h"

int pt_sched_alloc(int n_workers, int n_chunks, int n_micro, int replicas, pt_schedule **out)
{
    *out = NULL;
    if (n_workers < 1 || n_chunks < 1 || n_micro < 1 || replicas < 1 || n_workers % replicas != 0)
        return pt_fail(PT_EINVAL,
                       "schedule of %d workers, %d chunks, %d micro-batches, "
                       "%d replicas is not possible",
                       n_workers, n_chunks, n_micro, replicas);
    pt_schedule *s = calloc(1, sizeof *s);
    if (!s)
        return pt_fail(PT_ENOMEM, "out of memory for a schedule");
    s->n_workers = n_workers;
    s->n_chunks = n_chunks;
    s->n_micro = n_micro;
    s->replicas = replicas;
    s->chunk_worker = calloc((size_t)n_chunks * (size_t)replicas, sizeof(int));
    s->route = calloc((size_t)n_micro * (size_t)n_chunks, sizeof(int));
    s->n_actions = calloc((size_t)n_workers, sizeof(int));
    s->cap_actions = calloc((size_t)n_workers, sizeof(int));
    s->actions = calloc((size_t)n_workers, sizeof(pt_action *));
    if (!s->chunk_worker || !s->route || !s->n_actions || !s->cap_actions || !s->actions) {
        pt_schedule_destroy(s);
        return pt_fail(PT_ENOMEM, "out of memory for a schedule");
    }
    for (int c = 0; c < n_chunks; c++)
        for (int k = 0; k < replicas; k++)
            s->chunk_worker[c * replicas + k] = (c * replicas + k) % n_workers;
    *out = s;
    return PT_OK;
}

void pt_schedule_destroy(pt_schedule *s)
{
    if (!s)
        return;
    if (s->actions)
        for (int w = 0; w < s->n_workers; w++)
            free(s->actions[w]);
    free(s->actions);
    free(s->cap_actions);
    free(s->n_actions);
    free(s->route);
    free(s->chunk_worker);
    free(s);
}

int pt_sched_grow(void **items, int *cap, int n, size_t size)
{
    if (n < *cap)
        return PT_OK;
    int more = *cap ? 2 * *cap : 16;
    void *p = realloc(*items, (size_t)more * size);
    if (!p)
        return pt_fail(PT_ENOMEM, "out of memory for actions");
    *items = p;
    *cap = more;
    return PT_OK;
}

int pt_sched_push_async(pt_schedule *s, int w, pt_action_kind kind, int chunk, int mb, int version,
                        bool update)
{
    if (w < 0 || w >= s->n_workers)
        return pt_fail(PT_EINVAL, "worker %d out of range (0..%d)", w, s->n_workers - 1);
    int rc = pt_sched_grow((void **)&s->actions[w], &s->cap_actions[w], s->n_actions[w],
                           sizeof(pt_action));
    if (rc == PT_OK)
        s->actions[w][s->n_actions[w]++] = (pt_action){
            .kind = kind, .chunk = chunk, .mb = mb, .version = version, .update = update};
    return rc;
}

int pt_sched_push(pt_schedule *s, int w, pt_action_kind kind, int chunk, int mb)
{
    return pt_sched_push_async(s, w, kind, chunk, mb, -1, false);
}

void pt_sched_copy_placement(pt_schedule *dst, const pt_schedule *src)
{
    memcpy(dst->chunk_worker, src->chunk_worker,
           (size_t)src->n_chunks * (size_t)src->replicas * sizeof(int));
    memcpy(dst->route, src->route, (size_t)src->n_micro * (size_t)src->n_chunks * sizeof(int));
}

void pt_sched_set_name(pt_schedule *s, const char *name)
{
    snprintf(s->name, sizeof s->name, "%s", name);
}

int pt_sched_stages(const pt_schedule *s) { return s->n_workers / s->replicas; }

int pt_sched_virtual(const pt_schedule *s)
{
    int stages = pt_sched_stages(s);
    if (s->n_chunks % stages != 0)
        return 0;
    int v = s->n_chunks / stages;
    /* every worker must hold exactly v chunks (counting replicas) */
    int *held = calloc((size_t)s->n_workers, sizeof(int));
    if (!held)
        return 0;
    for (int i = 0; i < s->n_chunks * s->replicas; i++)
        if (s->chunk_worker[i] >= 0 && s->chunk_worker[i] < s->n_workers)
            held[s->chunk_worker[i]]++;
        else
            v = 0; /* placed on no worker: the validator says so */
    for (int w = 0; w < s->n_workers; w++)
        if (held[w] != v)
            v = 0;
    free(held);
    return v;
}

int pt_sched_worker_of(const pt_schedule *s, int chunk, int mb)
{
    if (chunk < 0 || chunk >= s->n_chunks || mb < 0 || mb >= s->n_micro)
        return -1;
    int k = s->route[mb * s->n_chunks + chunk];
    return s->chunk_worker[chunk * s->replicas + k];
}

bool pt_sched_holds(const pt_schedule *s, int w, int chunk, int *replica)
{
    for (int k = 0; chunk >= 0 && chunk < s->n_chunks && k < s->replicas; k++)
        if (s->chunk_worker[chunk * s->replicas + k] == w) {
            if (replica)
                *replica = k;
            return true;
        }
    return false;
}

int pt_sched_send_to(const pt_schedule *s, const pt_action *a)
{
    pt_need to;
    return pt_sched_feeds(s->n_chunks, a, &to) ? pt_sched_worker_of(s, to.chunk, to.mb) : -1;
}

int pt_sched_recv_from(const pt_schedule *s, const pt_action *a)
{
    pt_need need[PT_NEEDS_MAX];
    int n = pt_sched_needs(s->n_chunks, a, need);
    for (int i = 0; i < n; i++)
        if (need[i].relation != PT_NEED_OWN)
            return pt_sched_worker_of(s, need[i].chunk, need[i].mb);
    return -1;
}

bool pt_sched_is_async(const pt_schedule *s)
{
    for (int w = 0; w < s->n_workers; w++)
        for (int i = 0; i < s->n_actions[w]; i++)
            if (s->actions[w][i].update || s->actions[w][i].version >= 0)
                return true;
    return false;
}

const char *pt_sched_action_str(const pt_action *a, char *buf, size_t n)
{
    static const char *const kinds[] = {"F", "B", "W", "BW"};
    int len = snprintf(buf, n, "%s%d.%d", kinds[a->kind & 3], a->chunk, a->mb);
    if (a->version >= 0 && len >= 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, "@%d", a->version);
    if (a->update && len >= 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, "!");
    return buf;
}

bool pt_sched_equal(const pt_schedule *a, const pt_schedule *b)
{
    if (strcmp(a->name, b->name) || a->n_workers != b->n_workers || a->n_chunks != b->n_chunks ||
        a->n_micro != b->n_micro || a->replicas != b->replicas)
        return false;
    if (memcmp(a->chunk_worker, b->chunk_worker,
               (size_t)a->n_chunks * (size_t)a->replicas * sizeof(int)) ||
        memcmp(a->route, b->route, (size_t)a->n_micro * (size_t)a->n_chunks * sizeof(int)))
        return false;
    for (int w = 0; w < a->n_workers; w++) {
        if (a->n_actions[w] != b->n_actions[w])
            return false;
        for (int i = 0; i < a->n_actions[w]; i++) {
            const pt_action *x = &a->actions[w][i], *y = &b->actions[w][i];
            if (x->kind != y->kind || x->chunk != y->chunk || x->mb != y->mb ||
                x->version != y->version || x->update != y->update)
                return false;
        }
    }
    return true;
}

/* ---- the public entry points ---- */

static const char *const names[] = {"gpipe", "1f1b", "interleaved", "loopedbfs", "zbh1",    "zbh2",
                                    "zbv",   "zb1p", "zb2p",        "pipedream", "1f1b-rr", NULL};

const char *const *pt_schedule_names(void) { return names; }

bool pt_schedule_takes_costs(const char *name)
{
    static const char *const timed[] = {"zbh1", "zbh2", "zbv", "zb1p", "zb2p"};
    for (size_t i = 0; i < sizeof timed / sizeof *timed; i++)
        if (!strcmp(name, timed[i]))
            return true;
    return false;
}

pt_schedule_config pt_schedule_config_default(void)
{
    return (pt_schedule_config){.name = "1f1b",
                                .stages = 4,
                                .microbatches = 8,
                                .virtual_stages = 0,
                                .replicas = 0,
                                .costs = NULL,
                                .memory_limit = 0,
                                .w_memory = 0.5,
                                .defer_w = 0};
}

/* zb1p and zb2p: the automatic scheduler on the config's times. */
static int gen_zb_auto(const pt_schedule_config *cfg, pt_schedule **out)
{
    int P = cfg->stages;
    pt_schedule_costs unit = pt_schedule_costs_default();
    const pt_schedule_costs *c = cfg->costs ? cfg->costs : &unit;
    int rc = pt_sched_check_costs(P, c);
    if (rc != PT_OK)
        return rc;
    double *t = malloc(3 * (size_t)P * sizeof(double));
    if (!t)
        return pt_fail(PT_ENOMEM, "out of memory generating a schedule");
    for (int j = 0; j < P; j++) {
        pt_action a = {.chunk = j};
        a.kind = PT_ACT_F, t[j] = pt_sched_duration(c, &a);
        a.kind = PT_ACT_B, t[P + j] = pt_sched_duration(c, &a);
        a.kind = PT_ACT_W, t[2 * P + j] = pt_sched_duration(c, &a);
    }
    double limit = cfg->memory_limit > 0        ? cfg->memory_limit
                   : !strcmp(cfg->name, "zb1p") ? (double)P
                                                : 2.0 * P;
    pt_zb_problem pb = {.stages = P,
                        .micro = cfg->microbatches,
                        .f = t,
                        .b = t + P,
                        .w = t + 2 * P,
                        .comm = c->latency + c->send, /* a blocking send delays its data too */
                        .mem_limit = limit,
                        .mem_w = cfg->w_memory};
    rc = pt_sched_gen_zb_auto(&pb, out, NULL);
    free(t);
    return rc;
}

int pt_schedule_create(const pt_schedule_config *cfg, pt_schedule **out)
{
    *out = NULL;
    const char *name = cfg->name ? cfg->name : "1f1b";
    int P = cfg->stages, M = cfg->microbatches, v = cfg->virtual_stages, R = cfg->replicas;
    int known = 0;
    for (int i = 0; names[i]; i++)
        known |= !strcmp(name, names[i]);
    if (!known)
        return pt_fail(PT_EINVAL,
                       "unknown schedule '%s' (gpipe, 1f1b, interleaved, loopedbfs, "
                       "zbh1, zbh2, zbv, zb1p, zb2p, pipedream, 1f1b-rr)",
                       name);
    if (P < 1)
        return pt_fail(PT_EINVAL, "%s: stages must be at least 1 (got %d)", name, P);
    if (M < 1)
        return pt_fail(PT_EINVAL, "%s: micro-batches must be at least 1 (got %d)", name, M);
    if (v < 0)
        return pt_fail(PT_EINVAL, "%s: virtual stages must be at least 1 (got %d)", name, v);
    if (R < 0)
        return pt_fail(PT_EINVAL, "%s: replicas must be at least 1 (got %d)", name, R);
    bool chunked = !strcmp(name, "interleaved") || !strcmp(name, "loopedbfs");
    bool is_zbv = !strcmp(name, "zbv");
    if (v == 0)
        v = chunked || is_zbv ? 2 : 1;
    if (is_zbv && v != 2)
        return pt_fail(PT_EINVAL,
                       "zbv: holds exactly 2 chunks per worker (a V); "
                       "virtual stages %d is not possible",
                       v);
    if (!chunked && !is_zbv && v != 1)
        return pt_fail(PT_EINVAL, "%s: has no chunks; virtual stages must be 1 (got %d)", name, v);
    bool is_rr = !strcmp(name, "1f1b-rr"), takes_replicas = is_rr || !strcmp(name, "pipedream");
    if (R == 0)
        R = is_rr ? 2 : 1;
    if (!takes_replicas && R != 1)
        return pt_fail(PT_EINVAL, "%s: has no replicas; replicas must be 1 (got %d)", name, R);
    if ((long)P * v > 4096 || (long)P * R > 4096 || M > 1000000)
        return pt_fail(PT_EINVAL,
                       "%s: %d stages x %d chunks x %d replicas, %d micro-batches "
                       "is too large",
                       name, P, v, R, M);

    bool takes_costs = !strcmp(name, "zbh1") || !strcmp(name, "zbh2") || is_zbv;
    bool fused = !takes_costs && strcmp(name, "zb1p") && strcmp(name, "zb2p");
    if (cfg->defer_w && (!fused || !strcmp(name, "pipedream")))
        return pt_fail(PT_EINVAL,
                       "%s: deferring weight passes applies to schedules with fused, synchronous "
                       "backwards (gpipe, 1f1b, interleaved, loopedbfs, 1f1b-rr); %s",
                       name,
                       fused ? "pipedream's backwards carry their weight updates"
                             : "this one splits them and orders its weight passes itself");
    int rc = takes_costs && cfg->costs ? pt_sched_check_costs(P * v, cfg->costs) : PT_OK;
    if (rc != PT_OK)
        return rc;
    if (!strcmp(name, "gpipe"))
        rc = pt_sched_gen_gpipe(P, M, out);
    else if (!strcmp(name, "1f1b"))
        rc = pt_sched_gen_1f1b(P, M, out);
    else if (!strcmp(name, "interleaved"))
        rc = pt_sched_gen_interleaved(P, M, v, out);
    else if (!strcmp(name, "loopedbfs"))
        rc = pt_sched_gen_loopedbfs(P, M, v, out);
    else if (!strcmp(name, "zbh1"))
        rc = pt_sched_gen_zbh1(P, M, cfg->costs, out);
    else if (!strcmp(name, "zbh2"))
        rc = pt_sched_gen_zbh2(P, M, cfg->costs, out);
    else if (!strcmp(name, "zb1p") || !strcmp(name, "zb2p")) {
        pt_schedule_config named = *cfg;
        named.name = name;
        rc = gen_zb_auto(&named, out);
    } else if (is_zbv)
        rc = pt_sched_gen_zbv(P, M, cfg->costs, out);
    else if (!strcmp(name, "pipedream"))
        rc = pt_sched_gen_pipedream(P, M, R, out);
    else
        rc = pt_sched_gen_1f1b_rr(P, M, R, out);
    if (rc == PT_OK)
        pt_sched_set_name(*out, name);
    if (rc == PT_OK && cfg->defer_w && (rc = pt_sched_defer_weight(out)) != PT_OK) {
        pt_schedule_destroy(*out);
        *out = NULL;
    }
    return rc;
}

int pt_schedule_generate(const char *name, int stages, int microbatches, int virtual_stages,
                         pt_schedule **out)
{
    pt_schedule_config cfg = pt_schedule_config_default();
    cfg.name = name;
    cfg.stages = stages;
    cfg.microbatches = microbatches;
    cfg.virtual_stages = virtual_stages;
    return pt_schedule_create(&cfg, out);
}

const char *pt_schedule_name(const pt_schedule *s) { return s->name; }
int pt_schedule_workers(const pt_schedule *s) { return s->n_workers; }
int pt_schedule_stages(const pt_schedule *s) { return pt_sched_stages(s); }
int pt_schedule_chunks(const pt_schedule *s) { return s->n_chunks; }
int pt_schedule_virtual_stages(const pt_schedule *s) { return pt_sched_virtual(s); }
int pt_schedule_microbatches(const pt_schedule *s) { return s->n_micro; }
int pt_schedule_replicas(const pt_schedule *s) { return s->replicas; }
