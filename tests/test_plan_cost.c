/* test_plan_cost: the planner's cost model (src/plan/transformer_cost.c,
 * device.c, cluster.c, predict.c) against the formulas of the field,
 * computed here independently from the model's shape:
 *   - a layer's product FLOPs per device: F = (24 N h^2 + 4 N s h) / T,
 *     B = (24 N h^2 + 8 N s h) / T, W = 24 N h^2 / T (Qi et al. Table 1);
 *     recomputing, B repeats F, and F + B + W summed over the tensor group
 *     is Narayanan et al.'s 96 N h^2 (1 + s / 6h) per layer; the head
 *     6 N h V;
 *   - activations kept per layer: s b h (10 + 24/T + 5 a s / (h T)) bytes
 *     (Korthikanti et al.), 2 s b h recomputing; from B to W 32 s b h at T=1
 *     (Qi et al.);
 *   - parameters per layer over the group: 12 h^2 + 13 h (Narayanan et al.
 *     equation 2's per-layer term);
 *   - the roofline: a large product runs at peak x gemm efficiency, a thin
 *     one at bandwidth x memory efficiency; a ring all-reduce moves
 *     2 (n-1)/n of the bytes, inside a node while the group fits in one;
 *   - a prediction's weights, gradients and optimizer state per device are
 *     2, 2 and 12 bytes a parameter, divided by D from their ZeRO stage on,
 *     and more micro-batches in flight hold more activations. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "pipetrain.h"
#include "plan/cost.h"

#include "check.h"

static bool near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b) + 1e-9; }

static pt_cluster cluster(void)
{
    pt_cluster c = {.name = "test", .nodes = 4, .devices_per_node = 8};
    pt_device_builtin("a100-80gb", &c.device);
    c.intra_node = (pt_interconnect){.latency = 2e-6, .bandwidth = 300e9};
    c.inter_node = (pt_interconnect){.latency = 5e-6, .bandwidth = 25e9};
    return c;
}

static void check_layer(const pt_cluster *c, int h, int a, int s, int b, int T, int V)
{
    pt_model_config m = pt_model_config_gpt();
    m.n_layer = 8, m.n_head = a, m.n_embd = h, m.seq_len = s, m.vocab = V;
    pt_cost_shape shape = {.model = &m,
                           .cluster = c,
                           .tensor = T,
                           .micro_batch_size = b,
                           .recompute = 0,
                           .precision = PT_PLAN_BF16};
    pt_block_plan l, r, head;
    pt_cost_layer(&shape, &l);
    shape.recompute = 1;
    pt_cost_layer(&shape, &r);
    pt_cost_head(&shape, &head);
    double N = (double)b * s, H = h;
    CHECK(near(l.f.flops, (24 * N * H * H + 4 * N * s * H) / T, 1e-12), "h=%d T=%d F %g", h, T,
          l.f.flops);
    CHECK(near(l.b.flops, (24 * N * H * H + 8 * N * s * H) / T, 1e-12), "h=%d T=%d B %g", h, T,
          l.b.flops);
    CHECK(near(l.w.flops, 24 * N * H * H / T, 1e-12), "h=%d T=%d W %g", h, T, l.w.flops);
    CHECK(near(r.b.flops, l.b.flops + l.f.flops, 1e-12), "recomputing, B repeats F");
    double eq3 = 96 * N * H * H * (1 + s / (6 * H));
    CHECK(near(T * (r.f.flops + r.b.flops + r.w.flops), eq3, 1e-12),
          "h=%d T=%d: the layer's %g FLOPs are not Narayanan's %g", h, T,
          T * (r.f.flops + r.b.flops + r.w.flops), eq3);
    CHECK(near(T * (head.f.flops + head.b.flops + head.w.flops), 6 * N * H * V, 1e-12),
          "the head's FLOPs");
    double korthikanti = s * (double)b * H * (10 + 24.0 / T + 5.0 * a * s / (H * T));
    CHECK(near(l.act_bytes, korthikanti, 1e-12), "h=%d T=%d: activations %g, want %g", h, T,
          l.act_bytes, korthikanti);
    CHECK(near(r.act_bytes, 2 * s * (double)b * H, 1e-12), "recomputing keeps the input");
    if (T == 1)
        CHECK(near(l.w_bytes, 32 * s * (double)b * H, 1e-12), "B to W keeps %g, want 32sbh",
              l.w_bytes);
    CHECK(near(T * l.params - 6 * (T - 1) * H, 12 * H * H + 13 * H, 1e-12),
          "parameters per layer %g", T * l.params);
    if (T > 1)
        CHECK(l.f.tp_seconds > 0 && l.b.tp_seconds > 0 && l.w.tp_seconds == 0,
              "T=%d: F and B all-reduce, W does not", T);
    else
        CHECK(l.f.tp_seconds == 0, "T=1 has no tensor-parallel all-reduce");
}

int main(void)
{
    pt_cluster c = cluster();
    int shapes[][6] = {{2304, 24, 1024, 6, 1, 50257},
                       {4096, 32, 2048, 2, 4, 51200},
                       {25600, 160, 2048, 1, 8, 51200},
                       {768, 12, 512, 8, 2, 50304}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_layer(&c, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4],
                    shapes[i][5]);

    /* the roofline */
    const pt_device *d = &c.device;
    double big = pt_device_gemm_seconds(d, PT_PLAN_BF16, 8192, 8192, 8192, 1);
    CHECK(near(big, 2.0 * 8192 * 8192 * 8192 / (312e12 * d->gemm_efficiency), 1e-12),
          "a large product %g s", big);
    double thin = pt_device_gemm_seconds(d, PT_PLAN_BF16, 65536, 65536, 1, 1);
    CHECK(near(thin, 2.0 * (65536.0 * 65536 + 2 * 65536) / (2039e9 * d->memory_efficiency), 1e-9),
          "an outer product is memory-bound: %g s", thin);
    /* the ring */
    double inside = pt_cluster_allreduce_seconds(&c, 1e9, 8, 1);
    CHECK(near(inside, 2 * 7.0 / 8 * 1e9 / 300e9 + 14 * 2e-6, 1e-12), "all-reduce in a node %g",
          inside);
    double across = pt_cluster_allreduce_seconds(&c, 1e9, 4, 8);
    CHECK(near(across, 2 * 3.0 / 4 * 1e9 / 25e9 + 6 * 5e-6, 1e-12), "all-reduce across nodes %g",
          across);
    CHECK(pt_cluster_allreduce_seconds(&c, 1e9, 1, 1) == 0, "one device reduces nothing");

    /* a prediction's memory */
    pt_model_config m = pt_model_config_gpt();
    m.n_layer = 24, m.n_head = 16, m.n_embd = 2048, m.seq_len = 2048, m.vocab = 51200;
    pt_layout l = {.pipeline = 4,
                   .tensor = 2,
                   .data = 4,
                   .virtual_stages = 1,
                   .micro_batch_size = 2,
                   .microbatches = 8,
                   .schedule = "1f1b",
                   .recompute = 0,
                   .zero = 0,
                   .precision = PT_PLAN_BF16};
    pt_prediction p[4];
    REQUIRE(pt_plan_predict_stages(&c, &m, &l, NULL, 3, p) == PT_OK, "%s", pt_last_error());
    double params = p[0].memory.params / 2.0;
    CHECK(p[0].memory.grads == p[0].memory.params && near(p[0].memory.moments, 12 * params, 1e-6),
          "weights, gradients, optimizer state: 2, 2, 12 bytes a parameter");
    CHECK(near(p[1].memory.moments, p[0].memory.moments / 4.0, 1e-6) &&
              p[1].memory.grads == p[0].memory.grads,
          "ZeRO-1 divides the optimizer state by D");
    CHECK(near(p[2].memory.grads, p[0].memory.grads / 4.0, 1e-6), "ZeRO-2 the gradients too");
    CHECK(near(p[3].memory.params, p[0].memory.params / 4.0, 1e-6), "ZeRO-3 the weights too");
    CHECK(p[3].iteration_s > p[0].iteration_s, "ZeRO-3's gathers cost time");
    pt_prediction one, gpipe;
    REQUIRE(pt_plan_predict(&c, &m, &l, NULL, &one) == PT_OK, "%s", pt_last_error());
    CHECK(near(one.iteration_s, p[0].iteration_s, 1e-12), "one stage alone is the same");
    l.schedule = "gpipe";
    REQUIRE(pt_plan_predict(&c, &m, &l, NULL, &gpipe) == PT_OK, "%s", pt_last_error());
    CHECK(gpipe.memory.activations > 1.5 * one.memory.activations,
          "gpipe holds all 8 micro-batches (%zu bytes), 1f1b at most 4 (%zu)",
          gpipe.memory.activations, one.memory.activations);
    CHECK(one.mfu > 0 && one.mfu < 1 && one.tokens_per_s > 0 && one.bubble > 0 && one.bubble < 0.5,
          "mfu %g, tokens/s %g, bubble %g", one.mfu, one.tokens_per_s, one.bubble);
    /* refusals name what is wrong */
    l.schedule = "1f1b", l.tensor = 3, l.data = 2;
    CHECK(pt_plan_predict(&c, &m, &l, NULL, &one) == PT_EINVAL &&
              strstr(pt_last_error(), "tensor parallelism 3"),
          "T=3 of 16 heads: %s", pt_last_error());
    l.tensor = 2, l.data = 8;
    CHECK(pt_plan_predict(&c, &m, &l, NULL, &one) == PT_EINVAL &&
              strstr(pt_last_error(), "64 devices"),
          "64 of 32 devices: %s", pt_last_error());
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
