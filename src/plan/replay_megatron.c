/* replay_megatron.c: Narayanan et al.'s Table 1 (GPT models from 1.7B to
 * 1T parameters on 32 to 3,072 A100s, published.h) replayed through the
 * planner: each row's model, layout and runtime from its configuration and
 * the authors' script for it, the cluster from their section 5, and the
 * predicted TFLOP/s per GPU beside the published one. Called by `pipetrain
 * plan --check` and tests/test_published_megatron.c.
 *
 * A row's run, as the script ran it (examples/sc21/run_table_1.sh):
 *   model      l layers, h hidden, a heads, sequence 2048, vocabulary 51,200
 *              (padded as Megatron-LM pads it), MLP 4h;
 *   layout     T and P from the table, D = GPUs / (T P), micro-batch b from
 *              the script, M = batch / (b D) micro-batches per replica;
 *              interleaved 1F1B with l / (P x layers per virtual stage)
 *              chunks where the script sets them, else 1F1B; every layer
 *              recomputed (--recompute-method uniform), fp16;
 *   runtime    Megatron-LM's p2p blocks its sender; the optimizer step is
 *              synchronized; the data-parallel reduce overlaps the backward
 *              where the script uses PyTorch's DDP, runs after it where it
 *              uses Megatron-LM's own.
 * TFLOP/s per GPU counts what the paper counts (its equation 3): 96 B s l
 * h^2 (1 + s/6h + V/16lh) FLOPs an iteration, which is the products'
 * FLOPs of transformer_cost.c with recomputation, over the predicted
 * iteration and the GPUs.
 *
 * The A100's two efficiencies are the only fitted constants, solved so that
 * two rows come out at their published figures: row 1 (1.7B on 32 GPUs,
 * neither tensor nor pipeline parallelism: the device alone) and row 9
 * (530B on 2,520 GPUs, the largest interleaved run: every mechanism at
 * once). Every other row is predicted. `pipetrain plan --check --fit-rows`
 * shows what other pairs would give (docs/planning.md lists them). */
#include "plan/published.h"

#include <math.h>
#include <stdio.h>

#include "tensor/error.h"

const int pt_megatron_fit_rows[2] = {0, 8};

int pt_megatron_cluster(const pt_published_cluster *h, int gpus, pt_cluster *out)
{
    *out = (pt_cluster){0};
    int rc = pt_device_builtin(h->device, &out->device);
    if (rc != PT_OK)
        return rc;
    int per_node = (int)h->devices_per_node.value;
    if (per_node < 1 || gpus < 1 || h->intra_node_gbs.value <= 0 || h->inter_node_gbs.value <= 0)
        return pt_fail(PT_EINVAL, "the published cluster needs devices per node and both links");
    snprintf(out->name, sizeof out->name, "published %s cluster", h->device);
    out->device.peak_flops[PT_PLAN_FP16] = h->peak_tflops.value * 1e12;
    out->devices_per_node = per_node;
    out->nodes = (gpus + per_node - 1) / per_node;
    /* the section gives bandwidths, not latencies: none are charged */
    out->intra_node = (pt_interconnect){.latency = 0, .bandwidth = h->intra_node_gbs.value * 1e9};
    out->inter_node = (pt_interconnect){.latency = 0, .bandwidth = h->inter_node_gbs.value * 1e9};
    return PT_OK;
}

int pt_megatron_layout(const pt_published_megatron *r, pt_model_config *m, pt_layout *l,
                       pt_runtime *rt)
{
    *m = pt_model_config_gpt();
    m->n_layer = (int)r->layers.value;
    m->n_head = (int)r->heads.value;
    m->n_embd = (int)r->hidden.value;
    m->seq_len = (int)r->seq.value;
    m->vocab = (int)r->vocab.value;
    int T = (int)r->tensor.value, P = (int)r->pipeline.value, gpus = (int)r->gpus.value;
    int b = (int)r->micro_batch_size.value, batch = (int)r->batch.value;
    if (T < 1 || P < 1 || b < 1 || gpus % (T * P) || batch % (b * (gpus / (T * P))))
        return pt_fail(PT_EINVAL,
                       "%s: %d GPUs, T=%d, P=%d, batch %d, micro-batch %d do not divide evenly",
                       r->model, gpus, T, P, batch, b);
    *l = (pt_layout){.pipeline = P, .tensor = T, .data = gpus / (T * P)};
    l->micro_batch_size = b;
    l->microbatches = batch / (b * l->data);
    int per_chunk = (int)r->layers_per_virtual_stage.value;
    l->virtual_stages = per_chunk > 0 ? m->n_layer / (P * per_chunk) : 1;
    l->schedule = l->virtual_stages > 1 ? "interleaved" : "1f1b";
    l->recompute = r->recompute.value != 0;
    l->precision = PT_PLAN_FP16;
    *rt = (pt_runtime){.blocking_sends = 1,
                       .post_validation = 0,
                       .overlap_dp_reduce = r->overlapped_dp_reduce.value != 0};
    return PT_OK;
}

int pt_replay_megatron(const pt_cluster *c, const pt_published_megatron *r, pt_prediction *out,
                       double *tflops)
{
    pt_model_config m;
    pt_layout l;
    pt_runtime rt;
    int rc = pt_megatron_layout(r, &m, &l, &rt);
    if (rc == PT_OK)
        rc = pt_plan_predict(c, &m, &l, &rt, out);
    if (rc != PT_OK)
        return pt_fail_within(rc, "%s", r->model);
    *tflops = out->flops_per_device / 1e12;
    return PT_OK;
}

/* log(predicted / published) of the two fitted rows under efficiencies x. */
static int residuals(const pt_published *p, const int rows[2], const double x[2], double res[2])
{
    for (int i = 0; i < 2; i++) {
        const pt_published_megatron *r = &p->megatron[rows[i]];
        pt_cluster c;
        int rc = pt_megatron_cluster(&p->megatron_cluster, (int)r->gpus.value, &c);
        if (rc != PT_OK)
            return rc;
        c.device.gemm_efficiency = x[0], c.device.memory_efficiency = x[1];
        pt_prediction pred;
        double tflops = 0;
        rc = pt_replay_megatron(&c, r, &pred, &tflops);
        if (rc != PT_OK)
            return rc;
        res[i] = log(tflops / r->tflops_per_gpu.value);
    }
    return PT_OK;
}

int pt_fit_megatron(const pt_published *p, const int rows[2], pt_device *fitted)
{
    if (!rows)
        rows = pt_megatron_fit_rows;
    if (rows[0] < 0 || rows[1] < 0 || rows[0] >= p->n_megatron || rows[1] >= p->n_megatron ||
        rows[0] == rows[1])
        return pt_fail(PT_EINVAL,
                       "fitting needs two different rows of Table 1 (1 to %d), not %d and %d",
                       p->n_megatron, rows[0] + 1, rows[1] + 1);
    /* Newton's method on the two residuals, a finite-difference Jacobian */
    double x[2] = {0.7, 0.7}, r[2];
    int rc = residuals(p, rows, x, r);
    for (int it = 0; rc == PT_OK && it < 50 && fabs(r[0]) + fabs(r[1]) > 1e-9; it++) {
        double J[2][2], h = 1e-6;
        for (int j = 0; j < 2 && rc == PT_OK; j++) {
            double y[2] = {x[0], x[1]}, ry[2];
            y[j] += h;
            rc = residuals(p, rows, y, ry);
            J[0][j] = (ry[0] - r[0]) / h, J[1][j] = (ry[1] - r[1]) / h;
        }
        double det = J[0][0] * J[1][1] - J[0][1] * J[1][0];
        if (rc != PT_OK || fabs(det) < 1e-12)
            break;
        double dx0 = (J[1][1] * r[0] - J[0][1] * r[1]) / det;
        double dx1 = (J[0][0] * r[1] - J[1][0] * r[0]) / det;
        x[0] = fmin(1, fmax(0.05, x[0] - dx0));
        x[1] = fmin(1, fmax(0.05, x[1] - dx1));
        rc = residuals(p, rows, x, r);
    }
    if (rc != PT_OK)
        return rc;
    if (fabs(r[0]) + fabs(r[1]) > 1e-6)
        return pt_fail(PT_EINVAL,
                       "no efficiencies in (0, 1] reproduce rows %d and %d of Table 1 (off by "
                       "%.2g and %.2g)",
                       rows[0] + 1, rows[1] + 1, r[0], r[1]);
    pt_cluster c;
    rc = pt_megatron_cluster(&p->megatron_cluster, 8, &c);
    if (rc == PT_OK) {
        *fitted = c.device;
        fitted->gemm_efficiency = x[0], fitted->memory_efficiency = x[1];
    }
    return rc;
}
