/* test_mpi_spec_models: models from specs take over MPI ranks the steps
 * they take on one worker, bit for bit.
 *
 * mpi-ranks: 2 4
 *
 * Every rank trains, in this process, the one-worker pipeline (threads)
 * and then the pipeline over the world's ranks (P = the world size), on
 * every synchronous schedule (interleaved, loopedbfs and zbv with v = 2),
 * and compares every micro-batch's loss and the parameters this rank
 * holds with memcmp. Two ranks: the MSE regression MLP, the conv net, the
 * Llama-style transformer and GPT-2 with a last-token head
 * (tests/spec_run.h); four ranks: the conv net and the Llama transformer. */
#include "check.h"
#include "spec_run.h"

static int rank_;

/* The world's size, from the refusal of a pipeline that does not fill it */
static int world_size(const pt_model_config *c)
{
    pt_optim_config o = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pt_pipeline *p;
    pc.transport = PT_PIPELINE_MPI;
    int rc = pt_pipeline_create(c, &o, &pc, &p);
    if (rc == PT_OK) {
        pt_pipeline_destroy(p);
        return 1;
    }
    if (rc == PT_EUNSUPPORTED)
        return 0;
    const char *at = strstr(pt_last_error(), "started ");
    return at ? atoi(at + 8) : -1;
}

static void matches_one_worker(const char *spec, int P)
{
    pt_model_config c;
    pt_model *m;
    if (pt_model_config_spec(spec, &c) != PT_OK || pt_model_describe(&c, &m) != PT_OK) {
        CHECK(0, "%s: %s", spec, pt_last_error());
        return;
    }
    int n = pt_model_n_params(m), *held = calloc((size_t)n, sizeof(int));
    float **ref = spec_param_buffers(m), **got = spec_param_buffers(m);
    float ref_loss[SPEC_STEPS * SPEC_M], loss[SPEC_STEPS * SPEC_M];
    CHECK(spec_run(&c, "gpipe", 1, 1, PT_PIPELINE_THREADS, ref_loss, ref, NULL) == 0,
          "%s: one worker", spec);
    int ran = 0, compared = 0;
    for (int si = 0; si < SPEC_N_SCHEDULES; si++) {
        const char *sched = spec_schedules[si];
        int v = spec_virtual(sched);
        if (P * v > pt_model_n_layers(m))
            continue;
        if (spec_run(&c, sched, P, v, PT_PIPELINE_MPI, loss, got, held)) {
            CHECK(0, "%s: %s P=%d did not run", spec, sched, P);
            continue;
        }
        ran++;
        CHECK(!memcmp(loss, ref_loss, sizeof loss), "%s: %s P=%d: losses differ", spec, sched, P);
        for (int i = 0; i < n; i++) {
            compared += held[i];
            CHECK(!held[i] || !memcmp(got[i], ref[i], sizeof(float) * pt_model_param(m, i)->numel),
                  "%s: %s P=%d: %s differs", spec, sched, P, pt_model_param(m, i)->name);
        }
    }
    CHECK(ran == SPEC_N_SCHEDULES && compared > 0, "%s: %d schedules ran, %d parameters compared",
          spec, ran, compared);
    if (rank_ == 0)
        printf("%s: %d MPI pipelines of %d ranks matched one worker bit for bit\n", spec, ran, P);
    spec_param_buffers_free(ref, n), spec_param_buffers_free(got, n);
    free(held);
    pt_model_destroy(m);
}

int main(void)
{
    pt_model_config c;
    pt_model_config_spec(spec_mse_mlp, &c);
    int size = world_size(&c);
    if (size == 0)
        return printf("skipped: %s\n", pt_last_error()), 77;
    if (size != 2 && size != 4)
        return printf("FAIL: run under mpirun -np 2 or 4 (world size %d: %s)\n", size,
                      pt_last_error()),
               1;
    /* this rank's number, from a pipeline over the world */
    pt_pipeline_config pc = pt_pipeline_config_default();
    pt_optim_config o = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline *p;
    pc.transport = PT_PIPELINE_MPI, pc.stages = size;
    if (pt_pipeline_create(&c, &o, &pc, &p) != PT_OK)
        return printf("FAIL: %s\n", pt_last_error()), 1;
    rank_ = check_rank = pt_pipeline_rank(p);
    pt_pipeline_destroy(p);
    if (size == 2) {
        matches_one_worker(spec_mse_mlp, 2);
        matches_one_worker(spec_gpt2_classify, 2);
    }
    matches_one_worker(spec_conv_net, size);
    matches_one_worker(spec_llama, size);
    if (rank_ == 0)
        printf("%s\n", failures ? "FAILED" : "spec models over MPI ok");
    return failures != 0;
}
