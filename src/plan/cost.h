/* cost.h: the planner's cost model, from the model's description alone
 * (docs/planning.md writes out every formula):
 *   transformer_cost.c   per block and per pass (F, B, W) of one micro-batch
 *                        on one device of a tensor group: the products with
 *                        their shapes and FLOPs, the bytes of the
 *                        elementwise work, the tensor-parallel all-reduces,
 *                        their time on the device and cluster; the
 *                        activations a micro-batch keeps, with and without
 *                        recomputation; the parameters each device holds;
 *   cluster.c            which link a group of devices talks over.
 * predict.c assembles these into a pipeline's chunks, plays the schedule and
 * adds the data-parallel reduce and the optimizer step. */
#ifndef PT_PLAN_COST_H
#define PT_PLAN_COST_H

#include "pipetrain.h"

/* The link a group spanning `span` consecutive devices talks over. */
const pt_interconnect *pt_cluster_link(const pt_cluster *c, long span);

/* One pass of one block for one micro-batch on one device. */
typedef struct {
    double flops;   /* of its products (what FLOP counts in the field count) */
    double bytes;   /* moved by its elementwise work */
    double seconds; /* on the device, its tensor-parallel all-reduces included */
    double tp_seconds;
} pt_pass_cost;

/* A block's three passes and what it holds. */
typedef struct {
    pt_pass_cost f, b, w; /* b: input gradients (and, recomputing, the forward again) */
    double act_bytes;     /* kept from F to B per micro-batch (recomputing: the input) */
    double w_bytes;       /* kept from B to W */
    double peak_bytes;    /* held while its backward runs, on top (recomputing: the
                             activations the recomputed forward makes) */
    double params;        /* parameters on this device */
} pt_block_plan;

/* The shape of the work: the model, the tensor group and the micro-batch. */
typedef struct {
    const pt_model_config *model;
    const pt_cluster *cluster;
    int tensor;           /* T */
    int micro_batch_size; /* b */
    int recompute;
    pt_plan_precision precision;
} pt_cost_shape;

/* One transformer layer. */
void pt_cost_layer(const pt_cost_shape *s, pt_block_plan *out);
/* The token and position embeddings (the first chunk's extra). */
void pt_cost_embedding(const pt_cost_shape *s, pt_block_plan *out);
/* The final layer norm, the LM head (tied to the token embedding) and the
 * cross-entropy (the last chunk's extra). */
void pt_cost_head(const pt_cost_shape *s, pt_block_plan *out);
/* Bytes of one 16-bit (or 32-bit) activation element in this precision. */
double pt_cost_element_bytes(pt_plan_precision p);

/* predict.c: what a layout costs at least, without playing its schedule:
 * its workers' passes after the forwards each waits for before its first
 * input (none under post-validation), the reduce and the optimizer step, and
 * the weights, gradients and optimizer state with one micro-batch's
 * activations of the largest chunk. The search (search.c) ranks layouts by
 * it and plays only those that can still win. One entry per ZeRO stage from
 * l->zero to zero_last. */
typedef struct {
    double iteration_s;
    double memory_bytes;
} pt_plan_bound;
int pt_plan_bounds(const pt_cluster *c, const pt_model_config *m, const pt_layout *l,
                   const pt_runtime *rt, int zero_last, pt_plan_bound *out);
/* pt_plan_predict at every ZeRO stage from l->zero to zero_last from one
 * play of the schedule (the stages differ in memory and communication,
 * not in passes). */
int pt_plan_predict_stages(const pt_cluster *c, const pt_model_config *m, const pt_layout *l,
                           const pt_runtime *rt, int zero_last, pt_prediction *out);
/* The layout's schedule and its play, in seconds, for drawing. */
int pt_plan_schedule(const pt_cluster *c, const pt_model_config *m, const pt_layout *l,
                     const pt_runtime *rt, pt_schedule **s, pt_schedule_sim **sim);

#endif
