/* test_published_megatron: the planner against Narayanan et al.'s Table 1
 * (GPT 1.7B to 1T on 32 to 3,072 A100s; tests/data/published_runs.json,
 * every figure with its table, row or script line):
 *   - fitting the A100's two efficiencies on the two named rows
 *     (pt_megatron_fit_rows) gives the constants the built-in a100-80gb
 *     carries, so the table and the fit cannot drift apart;
 *   - with those, every row's predicted TFLOP/s per GPU, from the row's
 *     configuration alone, is within 8% of the published one;
 *   - the predicted memory of every row fits the A100's 80 GB (the runs
 *     ran), and the iteration is more than its compute alone;
 *   - a model change that breaks the model shows: with the gemm efficiency
 *     halved the predictions miss by far more than 8%. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/published_runs.h"
#include "pipetrain.h"
#include "plan/published.h"

#include "check.h"
#include "published_data.h"

/* Worst relative error over the rows with the device's efficiencies. */
static double worst_error(const pt_published *p, const pt_device *d, int print)
{
    double worst = 0;
    for (int i = 0; i < p->n_megatron; i++) {
        const pt_published_megatron *r = &p->megatron[i];
        pt_cluster c;
        if (pt_megatron_cluster(&p->megatron_cluster, (int)r->gpus.value, &c) != PT_OK) {
            CHECK(0, "%s", pt_last_error());
            return 1;
        }
        c.device.gemm_efficiency = d->gemm_efficiency;
        c.device.memory_efficiency = d->memory_efficiency;
        pt_prediction pred;
        double tflops;
        if (pt_replay_megatron(&c, r, &pred, &tflops) != PT_OK) {
            CHECK(0, "%s", pt_last_error());
            return 1;
        }
        double err = tflops / r->tflops_per_gpu.value - 1;
        worst = fabs(err) > worst ? fabs(err) : worst;
        bool fitted = i == pt_megatron_fit_rows[0] || i == pt_megatron_fit_rows[1];
        if (print) {
            printf("%-3d %-8s %5g %5g %5g %9.1f %9g %+6.1f%% %s\n", i + 1, r->model,
                   r->tensor.value, r->pipeline.value, r->gpus.value, tflops,
                   r->tflops_per_gpu.value, 100 * err, fitted ? "(fitted)" : "");
            CHECK(fabs(err) <= 0.08, "%s: predicted %.1f TFLOP/s per GPU, published %g", r->model,
                  tflops, r->tflops_per_gpu.value);
            CHECK(r->tflops_per_gpu.source && strstr(r->tflops_per_gpu.source, "Table 1"),
                  "%s: the published figure has no Table 1 source", r->model);
            CHECK(pred.fits, "%s: predicted %.1f GB per GPU does not fit 80 GB", r->model,
                  pred.memory_bytes / 1e9);
            CHECK(pred.iteration_s > pred.pipeline_s * (1 - 1e-12) && pred.optimizer_s > 0,
                  "%s: iteration %g s below its pipeline's %g s", r->model, pred.iteration_s,
                  pred.pipeline_s);
        }
    }
    return worst;
}

int main(void)
{
    pt_published *p = load_published();
    REQUIRE(p, "no published runs to check");
    REQUIRE(p->n_megatron == 10, "%d Megatron-LM rows, want Table 1's 10", p->n_megatron);

    pt_device fitted, builtin;
    REQUIRE(pt_fit_megatron(p, NULL, &fitted) == PT_OK, "fit: %s", pt_last_error());
    REQUIRE(pt_device_builtin("a100-80gb", &builtin) == PT_OK, "%s", pt_last_error());
    printf("fitted on rows %d and %d: gemm efficiency %.4f, memory efficiency %.4f\n",
           pt_megatron_fit_rows[0] + 1, pt_megatron_fit_rows[1] + 1, fitted.gemm_efficiency,
           fitted.memory_efficiency);
    CHECK(fabs(fitted.gemm_efficiency - builtin.gemm_efficiency) < 1e-3 &&
              fabs(fitted.memory_efficiency - builtin.memory_efficiency) < 1e-3,
          "the built-in a100-80gb carries %.4f and %.4f; the fit gives %.4f and %.4f",
          builtin.gemm_efficiency, builtin.memory_efficiency, fitted.gemm_efficiency,
          fitted.memory_efficiency);

    printf("%-3s %-8s %5s %5s %5s %9s %9s %7s\n", "row", "model", "T", "P", "GPUs", "predicted",
           "published", "error");
    double worst = worst_error(p, &fitted, 1);
    printf("worst error %.1f%% (limit 8%%)\n", 100 * worst);

    pt_device broken = fitted;
    broken.gemm_efficiency /= 2;
    CHECK(worst_error(p, &broken, 0) > 0.3, "halving the gemm efficiency went unnoticed");

    int bad[2] = {3, 3};
    CHECK(pt_fit_megatron(p, bad, &broken) == PT_EINVAL, "one row twice is refused");
    pt_published_free(p);
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
