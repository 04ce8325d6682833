/* predict.c: one layout of a GPT on a cluster, predicted (pt_plan_predict,
 * pipetrain.h). The search (search.c), `pipetrain plan --cluster` and the
 * replay of published runs (replay_megatron.c) call it.
 *
 * An iteration is, on the devices of one pipeline:
 *   pipeline    the schedule played by the simulator over P x v chunks of
 *               the layers (as even as they divide; the first chunk adds the
 *               embeddings, the last the head and loss), each pass costing
 *               what transformer_cost.c says; a transfer between stages
 *               carries one micro-batch's (N, h) activation or gradient, each
 *               device of the tensor group its 1/T share over its link (then
 *               an all-gather inside the node, Megatron-LM's scatter/gather);
 *               with blocking sends it holds the sender, otherwise it only
 *               arrives later; the iteration lasts the makespan, or the
 *               longest worker's span under post-validation;
 *   reduce      the data-parallel all-reduce of the worker's gradients (ring
 *               over D, 16-bit; ZeRO-3 adds the all-gathers of the weights,
 *               half as much again), minus what overlaps the last
 *               micro-batch's backward when the runtime overlaps it; with
 *               P > 1 the tied embedding's gradient summed between the first
 *               and last stage;
 *   optimizer   AdamW over the worker's share of the weights, memory-bound:
 *               it reads the gradient, master weight and two moments and
 *               writes the last three and the 16-bit copy (34 bytes a
 *               parameter in mixed precision, 28 in fp32).
 * Memory on a worker: weights (2 bytes, 4 in fp32), gradients (as many),
 * master weights and moments (12, or 8 in fp32: the optimizer state), each
 * divided by D from its ZeRO stage on; activations from walking the
 * worker's actions: F adds its chunk's, B gives back all but what W needs,
 * W the rest (recomputing, one layer's full activations on top while its
 * backward runs). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/cost.h"
#include "sched/schedule.h"
#include "tensor/error.h"

pt_runtime pt_runtime_default(void)
{
    return (pt_runtime){.blocking_sends = 0, .post_validation = 0, .overlap_dp_reduce = 1};
}

typedef struct {
    const pt_cluster *c;
    const pt_model_config *m;
    const pt_layout *l;
    const pt_runtime *rt;
    int K, v;
    pt_block_plan layer, emb, head;
    int *layers;          /* [K] layers of each chunk */
    double *cf, *cb, *cw; /* [K] chunk pass times */
    double *act, *keep_w; /* [K] bytes kept F->B and B->W per micro-batch */
} plan;

static int check_layout(const pt_cluster *c, const pt_model_config *m, const pt_layout *l, int v)
{
    long devices = (long)c->nodes * c->devices_per_node;
    long used = (long)l->pipeline * l->tensor * l->data;
    if (m->kind != PT_MODEL_GPT)
        return pt_fail(PT_EINVAL, "the planner models gpt models only");
    if (l->pipeline < 1 || l->tensor < 1 || l->data < 1 || l->micro_batch_size < 1 ||
        l->microbatches < 1 || v < 1)
        return pt_fail(PT_EINVAL,
                       "layout P=%d T=%d D=%d v=%d, micro-batch %d x %d: every count must be at "
                       "least 1",
                       l->pipeline, l->tensor, l->data, v, l->micro_batch_size, l->microbatches);
    if (used > devices)
        return pt_fail(PT_EINVAL, "layout P=%d x T=%d x D=%d needs %ld devices; %s has %ld",
                       l->pipeline, l->tensor, l->data, used, c->name, devices);
    int f = pt_gpt_inner(m);
    if (m->n_head % l->tensor || f % l->tensor)
        return pt_fail(PT_EINVAL,
                       "tensor parallelism %d must divide the heads (%d) and the MLP (%d)",
                       l->tensor, m->n_head, f);
    if ((long)l->pipeline * v > m->n_layer)
        return pt_fail(PT_EINVAL, "%d stages x %d chunks is more chunks than the %d layers",
                       l->pipeline, v, m->n_layer);
    if (l->zero < 0 || l->zero > 3)
        return pt_fail(PT_EINVAL, "ZeRO stage %d: 0 to 3", l->zero);
    if (l->precision < 0 || l->precision >= PT_PLAN_N_PRECISIONS ||
        c->device.peak_flops[l->precision] <= 0)
        return pt_fail(PT_EINVAL, "%s does not compute in %s", c->device.name,
                       pt_plan_precision_name(l->precision));
    return PT_OK;
}

static int chunks_per_worker(const pt_layout *l)
{
    if (l->virtual_stages > 0)
        return l->virtual_stages;
    return l->schedule && !strcmp(l->schedule, "zbv") ? 2 : 1;
}

/* Layers per chunk and each chunk's pass times and activation bytes. */
static void cut(plan *p)
{
    int L = p->m->n_layer, K = p->K, extra = L % K;
    /* the remainder goes to the middle chunks when it fits between the
     * ends, which carry the embeddings and the head */
    int first = extra <= K - 2 ? 1 : 0;
    for (int k = 0; k < K; k++) {
        p->layers[k] = L / K + (k >= first && k < first + extra);
        double n = p->layers[k];
        p->cf[k] = n * p->layer.f.seconds;
        p->cb[k] = n * p->layer.b.seconds;
        p->cw[k] = n * p->layer.w.seconds;
        p->act[k] = n * p->layer.act_bytes;
        p->keep_w[k] = n * p->layer.w_bytes;
    }
    p->cf[0] += p->emb.f.seconds, p->cb[0] += p->emb.b.seconds, p->cw[0] += p->emb.w.seconds;
    p->cf[K - 1] += p->head.f.seconds, p->cb[K - 1] += p->head.b.seconds;
    p->cw[K - 1] += p->head.w.seconds;
    p->act[K - 1] += p->head.act_bytes;
    p->keep_w[K - 1] += p->head.w_bytes;
}

/* Seconds of one stage-to-stage transfer of a micro-batch's activation. */
static double transfer_seconds(const plan *p)
{
    const pt_layout *l = p->l;
    if (l->pipeline * p->v <= 1)
        return 0;
    double bytes =
        pt_cost_element_bytes(l->precision) * l->micro_batch_size * p->m->seq_len * p->m->n_embd;
    const pt_interconnect *net = pt_cluster_link(p->c, (long)l->pipeline * l->tensor * l->data);
    double t = net->latency + bytes / l->tensor / net->bandwidth;
    if (l->tensor > 1) /* the shares gathered again inside the node */
        t += p->c->intra_node.latency +
             bytes * (l->tensor - 1) / l->tensor / p->c->intra_node.bandwidth;
    return t;
}

/* Most activation bytes worker w holds over its list. */
static double peak_activations(const plan *p, const pt_schedule *s, int w)
{
    double held = 0, most = 0, transient = p->l->recompute ? p->layer.peak_bytes : 0;
    for (int i = 0; i < s->n_actions[w]; i++) {
        const pt_action *a = &s->actions[w][i];
        int c = a->chunk;
        if (a->kind == PT_ACT_F)
            held += p->act[c];
        else if (a->kind == PT_ACT_B || a->kind == PT_ACT_BW)
            most = fmax(most, held + transient);
        if (a->kind == PT_ACT_B) /* what W needs may outgrow a recomputed chunk's input */
            held += p->keep_w[c] - p->act[c];
        else if (a->kind == PT_ACT_W)
            held -= p->keep_w[c];
        else if (a->kind == PT_ACT_BW)
            held -= p->act[c];
        most = fmax(most, held);
    }
    return most;
}

/* The worker holding chunk c: the V of zbv, else the loop of interleaving. */
static int holder(const plan *p, int c)
{
    int P = p->l->pipeline;
    if (p->l->schedule && !strcmp(p->l->schedule, "zbv"))
        return c < P ? c : 2 * P - 1 - c;
    return c % P;
}

/* What worker w holds and costs whatever the schedule's order. */
typedef struct {
    double params;   /* parameters */
    double state;    /* bytes of weights, gradients and optimizer state */
    double most_act; /* the largest chunk's activations of one micro-batch */
    double start;    /* the forwards before its first chunk: it idles at least that */
    double busy;     /* seconds of its passes over the iteration */
    double bwd;      /* one micro-batch's B and W over its chunks */
    double reduce;   /* the exposed data-parallel (ZeRO) communication */
    double optimizer;
    pt_memory_use use; /* without activations */
} worker_static;

static bool mixed_precision(pt_plan_precision p) { return p != PT_PLAN_FP32 && p != PT_PLAN_TF32; }

/* The exposed data-parallel communication of a worker whose gradients are
 * `bytes` and whose last micro-batch's backward takes bwd. Only the one
 * reduce of an iteration overlaps the backward (when the runtime overlaps
 * it); ZeRO-2's and ZeRO-3's per-micro-batch collectives are charged in
 * full, a conservative choice (docs/planning.md). */
static double exposed_reduce(const plan *p, int zero, double bytes, double bwd)
{
    const pt_layout *l = p->l;
    double all = pt_cluster_allreduce_seconds(p->c, bytes, l->data, l->tensor), half = all / 2;
    double M = l->microbatches;
    if (zero <= 1) /* one all-reduce (ZeRO-1: reduce-scatter, then all-gather) */
        return p->rt->overlap_dp_reduce ? fmax(0, all - bwd) : all;
    if (zero == 2) /* a reduce-scatter after every micro-batch, one all-gather */
        return M * half + half;
    /* ZeRO-3: the weights gathered for every F and every B, the gradients scattered */
    return M * 3 * half;
}

/* Every worker's static figures at ZeRO stage `zero` into ws[P]. */
static void workers_of(const plan *p, int zero, worker_static *ws)
{
    const pt_layout *l = p->l;
    int P = l->pipeline;
    bool mixed = mixed_precision(l->precision);
    double wbytes = mixed ? 2 : 4, obytes = mixed ? 12 : 8, D = l->data, before = 0;
    for (int w = 0; w < P; w++)
        ws[w] = (worker_static){.start = -1};
    for (int c = 0; c < p->K; c++) {
        worker_static *x = &ws[holder(p, c)];
        x->params += p->layers[c] * p->layer.params + (c == 0 ? p->emb.params : 0) +
                     (c == p->K - 1 ? p->head.params : 0);
        x->most_act = fmax(x->most_act, p->act[c]);
        x->busy += p->cf[c] + p->cb[c] + p->cw[c];
        if (x->start < 0)
            x->start = before;
        before += p->cf[c];
        x->bwd += p->cb[c] + p->cw[c];
    }
    for (int w = 0; w < P; w++) {
        worker_static *x = &ws[w];
        double n = x->params;
        x->busy *= l->microbatches;
        x->use.params = (size_t)(n * wbytes / (zero >= 3 ? D : 1));
        x->use.grads = (size_t)(n * wbytes / (zero >= 2 ? D : 1));
        x->use.moments = (size_t)(n * obytes / (zero >= 1 ? D : 1));
        x->state = (double)pt_memory_total(&x->use);
        /* gradients reduced in their 16-bit (or 32-bit) storage */
        x->reduce = exposed_reduce(p, zero, n * wbytes, x->bwd);
        double shard = n / (zero >= 1 ? D : 1);
        x->optimizer = pt_device_memory_seconds(&p->c->device, shard * (mixed ? 34 : 28));
    }
}

/* The tied embedding's gradient summed between the first and last stage. */
static double tied_reduce(const plan *p)
{
    const pt_layout *l = p->l;
    double wbytes = mixed_precision(l->precision) ? 2 : 4;
    return l->pipeline > 1 ? pt_cluster_allreduce_seconds(p->c, p->emb.params * wbytes, 2,
                                                          l->tensor * l->data * (l->pipeline - 1))
                           : 0;
}

/* The layout's schedule, the zero-bubble ones ordered for the chunks' costs
 * as the simulator will play them. */
static int make_schedule(const plan *p, const pt_schedule_costs *costs, pt_schedule **s)
{
    const pt_layout *l = p->l;
    pt_schedule_config cfg = pt_schedule_config_default();
    cfg.name = l->schedule ? l->schedule : "1f1b";
    cfg.stages = l->pipeline, cfg.microbatches = l->microbatches, cfg.virtual_stages = p->v;
    cfg.costs = costs;
    double full = p->layer.act_bytes > 0 ? p->layer.w_bytes / p->layer.act_bytes : 0.5;
    cfg.w_memory = p->l->recompute ? 0 : fmin(1, full);
    return pt_schedule_create(&cfg, s);
}

/* The prediction at one ZeRO stage from the played schedule, each worker's
 * peak activations and static figures. */
static void account(const plan *p, const pt_schedule_sim *sim, const double *acts,
                    const worker_static *ws, pt_prediction *out)
{
    const pt_layout *l = p->l;
    const pt_device *d = &p->c->device;
    double D = l->data;
    /* the fullest worker decides memory; the slowest reduce decides time */
    double worst_mem = -1, dp = 0, opt = 0;
    for (int w = 0; w < l->pipeline; w++) {
        pt_memory_use u = ws[w].use;
        u.activations = (size_t)acts[w];
        if ((double)pt_memory_total(&u) > worst_mem) {
            worst_mem = (double)pt_memory_total(&u);
            out->memory = u;
        }
        dp = fmax(dp, ws[w].reduce);
        opt = fmax(opt, ws[w].optimizer);
    }
    dp += tied_reduce(p);
    out->memory_bytes = pt_memory_total(&out->memory);
    out->fits = (double)out->memory_bytes <= d->memory_bytes;
    out->pipeline_s = p->rt->post_validation ? sim->span : sim->makespan;
    out->dp_comm_s = dp;
    out->optimizer_s = opt;
    out->iteration_s = out->pipeline_s + dp + opt;
    double busiest = 0;
    for (int w = 0; w < sim->workers; w++)
        busiest = fmax(busiest, sim->busy[w]);
    out->bubble = out->pipeline_s > 0 ? fmax(0, 1 - busiest / out->pipeline_s) : 0;

    /* FLOPs of one micro-batch through the whole model, all devices */
    double L = p->m->n_layer, T = l->tensor;
    const pt_block_plan *ly = &p->layer, *hd = &p->head;
    double executed = T * (L * (ly->f.flops + ly->b.flops + ly->w.flops) + hd->f.flops +
                           hd->b.flops + hd->w.flops);
    double model = executed - (l->recompute ? T * L * ly->f.flops : 0);
    double mb_total = (double)l->microbatches * D, devices = (double)l->pipeline * T * D;
    out->tokens_per_s = mb_total * l->micro_batch_size * p->m->seq_len / out->iteration_s;
    out->flops_per_device = executed * mb_total / (out->iteration_s * devices);
    out->mfu = model * mb_total / (out->iteration_s * devices * d->peak_flops[l->precision]);
    double fb = ly->f.seconds + ly->b.seconds;
    out->tp_share = fb > 0 ? (ly->f.tp_seconds + ly->b.tp_seconds) / fb : 0;
}

/* Checks the layout and models its blocks and chunks into *p; undo with
 * release(). */
static int prepare(plan *p, const pt_cluster *c, const pt_model_config *m, const pt_layout *l,
                   const pt_runtime *rt)
{
    int v = chunks_per_worker(l);
    int rc = check_layout(c, m, l, v);
    if (rc != PT_OK)
        return rc;
    *p = (plan){.c = c, .m = m, .l = l, .rt = rt, .v = v, .K = l->pipeline * v};
    pt_cost_shape shape = {.model = m,
                           .cluster = c,
                           .tensor = l->tensor,
                           .micro_batch_size = l->micro_batch_size,
                           .recompute = l->recompute,
                           .precision = l->precision};
    pt_cost_layer(&shape, &p->layer);
    pt_cost_embedding(&shape, &p->emb);
    pt_cost_head(&shape, &p->head);
    size_t K = (size_t)p->K;
    p->layers = malloc(K * sizeof(int));
    p->cf = malloc(5 * K * sizeof(double));
    if (!p->layers || !p->cf) {
        free(p->layers), free(p->cf);
        return pt_fail(PT_ENOMEM, "out of memory predicting a layout");
    }
    p->cb = p->cf + K, p->cw = p->cf + 2 * K, p->act = p->cf + 3 * K, p->keep_w = p->cf + 4 * K;
    cut(p);
    return PT_OK;
}

static void release(plan *p)
{
    free(p->layers);
    free(p->cf);
}

int pt_plan_bounds(const pt_cluster *c, const pt_model_config *m, const pt_layout *l,
                   const pt_runtime *rt, int zero_last, pt_plan_bound *out)
{
    pt_runtime dflt = pt_runtime_default();
    plan p;
    int rc = prepare(&p, c, m, l, rt ? rt : &dflt);
    if (rc != PT_OK)
        return rc;
    worker_static *ws = malloc((size_t)l->pipeline * sizeof *ws);
    if (!ws) {
        release(&p);
        return pt_fail(PT_ENOMEM, "out of memory bounding a layout");
    }
    for (int z = l->zero; z <= zero_last; z++) {
        workers_of(&p, z, ws);
        double busy = 0, dp = 0, opt = 0, mem = 0;
        for (int w = 0; w < l->pipeline; w++) {
            /* a worker idles before its first input arrives, unless the
             * iteration is counted from each worker's own start */
            double idle = p.rt->post_validation ? 0 : ws[w].start;
            busy = fmax(busy, idle + ws[w].busy);
            dp = fmax(dp, ws[w].reduce);
            opt = fmax(opt, ws[w].optimizer);
            mem = fmax(mem, ws[w].state + ws[w].most_act);
        }
        out[z - l->zero].iteration_s = busy + dp + tied_reduce(&p) + opt;
        out[z - l->zero].memory_bytes = mem;
    }
    free(ws);
    release(&p);
    return PT_OK;
}

/* Generates the layout's schedule and plays it with its chunks' costs. */
static int play(const plan *p, pt_schedule **s, pt_schedule_sim **sim)
{
    double transfer = transfer_seconds(p);
    pt_schedule_costs costs = pt_schedule_costs_default();
    costs.n_chunk_costs = p->K, costs.chunk_f = p->cf, costs.chunk_b = p->cb, costs.chunk_w = p->cw;
    costs.latency = p->rt->blocking_sends ? 0 : transfer;
    costs.send = p->rt->blocking_sends ? transfer : 0;
    int rc = make_schedule(p, &costs, s);
    if (rc == PT_OK)
        rc = pt_schedule_simulate(*s, &costs, sim);
    return rc;
}

int pt_plan_schedule(const pt_cluster *c, const pt_model_config *m, const pt_layout *l,
                     const pt_runtime *rt, pt_schedule **s, pt_schedule_sim **sim)
{
    *s = NULL, *sim = NULL;
    pt_runtime dflt = pt_runtime_default();
    plan p;
    int rc = prepare(&p, c, m, l, rt ? rt : &dflt);
    if (rc != PT_OK)
        return rc;
    rc = play(&p, s, sim);
    release(&p);
    if (rc != PT_OK) {
        pt_schedule_sim_destroy(*sim);
        pt_schedule_destroy(*s);
        *s = NULL, *sim = NULL;
    }
    return rc;
}

int pt_plan_predict_stages(const pt_cluster *c, const pt_model_config *m, const pt_layout *l,
                           const pt_runtime *rt, int zero_last, pt_prediction *out)
{
    int n = zero_last - l->zero + 1;
    memset(out, 0, (size_t)(n > 0 ? n : 0) * sizeof *out);
    pt_runtime dflt = pt_runtime_default();
    plan p;
    int rc = prepare(&p, c, m, l, rt ? rt : &dflt);
    if (rc != PT_OK)
        return rc;
    pt_schedule *s = NULL;
    pt_schedule_sim *sim = NULL;
    rc = play(&p, &s, &sim);
    int P = l->pipeline;
    worker_static *ws = rc == PT_OK ? malloc((size_t)P * sizeof *ws) : NULL;
    double *acts = rc == PT_OK ? malloc((size_t)P * sizeof *acts) : NULL;
    if (rc == PT_OK && (!ws || !acts))
        rc = pt_fail(PT_ENOMEM, "out of memory predicting a layout");
    for (int w = 0; rc == PT_OK && w < P; w++)
        acts[w] = peak_activations(&p, s, w);
    for (int z = l->zero; rc == PT_OK && z <= zero_last; z++) {
        workers_of(&p, z, ws);
        account(&p, sim, acts, ws, &out[z - l->zero]);
    }
    free(ws);
    free(acts);
    pt_schedule_sim_destroy(sim);
    pt_schedule_destroy(s);
    release(&p);
    return rc;
}

int pt_plan_predict(const pt_cluster *c, const pt_model_config *m, const pt_layout *l,
                    const pt_runtime *rt, pt_prediction *out)
{
    return pt_plan_predict_stages(c, m, l, rt, l->zero, out);
}
