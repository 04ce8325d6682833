/* bench_tensor: what the tensor-parallel sums cost, against their bytes
 * and the transport's bandwidth measured in the same run.
 *
 *   bench_tensor [T] [steps] [sp]        T slices on threads (default 2, 3)
 *   mpirun -np T bench_tensor [T] [steps] [sp]   the same over MPI ranks
 * sp: with sequence parallelism (the sums are all-gathers and
 * reduce-scatters).
 *
 * gpt with 4 layers, 6 heads, 384 embd, seq 256, vocab 256 (bench_pipeline's
 * model), one stage cut into T slices, 16 micro-batches of 2 samples per
 * step (8192 tokens), AdamW, one BLAS thread per slice. Every transformer
 * block's tensor group sums a block input (B x seq x embd floats) twice in
 * forward and twice in backward, the embedding and head a few more: each is
 * a TENSOR_SUM action, whose time the executor records. Printed, per step
 * and rank (the median of `steps` steps after a warm-up):
 *   - the sums: how many, their bytes, and their time inside the step;
 *   - the same sums alone: as many all-reduces, reduce-scatters and
 *     all-gathers of the same buffers, through the same transport and
 *     group, between steps;
 *   - their ratio (in the step / alone): above 1 is what the sums lose to
 *     waiting for the slowest slice and to the cores' other work;
 *   - the sums' bandwidth alone (bytes per rank / time) and the share of
 *     the step the sums take;
 *   - tokens/s of the step, and of the one-slice run on one thread, with
 *     the FMA peak of the cores used, measured in this run.
 * Built by `make bench`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_peak.h"
#include "runtime/pipeline_internal.h"

#define MBS       2
#define M         16
#define MAX_STEPS 32

typedef struct {
    int count[3];        /* per pt_group_op: sums per step */
    pt_group_how how[3]; /* per pt_group_op: one sum's buffer */
    double alone;        /* seconds for the step's sums alone */
} alone_job;

/* The floats of one sum's buffer on a group of T. */
static size_t sum_floats(const pt_group_how *h, int T)
{
    return h->op == PT_GROUP_SUM ? h->part : h->blocks * h->part * (size_t)T;
}

/* Every rank's sums of the step, alone: as many of each kind (all-reduce,
 * reduce-scatter, all-gather) on buffers of the same floats, through its
 * tensor group. */
static int sums_alone(pt_pipeline *p, int rank, void *user)
{
    alone_job *j = user;
    pt_worker *w = pt_local_worker(p, rank);
    if (!w)
        return PT_OK;
    size_t most = 0;
    for (int op = 0; op < 3; op++)
        if (j->count[op] && sum_floats(&j->how[op], p->T) > most)
            most = sum_floats(&j->how[op], p->T);
    float *buf = calloc(most + 1, sizeof(float));
    if (!buf)
        return PT_ENOMEM;
    int rc = PT_OK;
    double t0 = bench_now();
    for (int op = 0; op < 3; op++) {
        pt_parts parts = {j->how[op].blocks, j->how[op].part};
        for (int i = 0; rc == PT_OK && i < j->count[op]; i++)
            rc = op == PT_GROUP_SCATTER ? pt_transport_reduce_scatter_f32(
                                              w->tensor_t, w->tensor_group, p->T, buf, parts)
                 : op == PT_GROUP_GATHER
                     ? pt_transport_all_gather_f32(w->tensor_t, w->tensor_group, p->T, buf, parts)
                     : pt_transport_allreduce_sum_f32(w->tensor_t, w->tensor_group, p->T, buf,
                                                      parts.part);
    }
    if (rank == p->rank)
        j->alone = bench_now() - t0;
    free(buf);
    return rc;
}

static int sequence; /* sequence parallelism for the sliced run */

static double train(const pt_model_config *c, int T, int steps, const pt_microbatch *b,
                    pt_pipeline **out)
{
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = 1, pc.tensor = T, pc.microbatches = M, pc.micro_batch_size = MBS;
    pc.blas_threads = 1, pc.sequence_parallel = sequence;
    pt_pipeline *p;
    if (pt_pipeline_create(c, &oc, &pc, &p) != PT_OK)
        return fprintf(stderr, "bench_tensor: %s\n", pt_last_error()), -1;
    double t[MAX_STEPS];
    float loss;
    for (int s = 0; s <= steps; s++) {
        double t0 = bench_now();
        if (pt_pipeline_train_step(p, b, s, oc.lr, &loss) != PT_OK)
            return fprintf(stderr, "bench_tensor: %s\n", pt_last_error()), -1;
        if (s > 0)
            t[s - 1] = bench_now() - t0;
    }
    *out = p;
    return bench_median(t, steps);
}

int main(int argc, char **argv)
{
    int T = argc > 1 ? atoi(argv[1]) : 2, steps = argc > 2 ? atoi(argv[2]) : 3;
    if (T < 2 || T > 16)
        T = 2;
    if (steps < 1 || steps > MAX_STEPS)
        steps = 3;
    sequence = argc > 3 && !strcmp(argv[3], "sp");
    pt_model_config c = bench_gpt_small();
    int *tokens;
    pt_microbatch b = bench_random_batch(&c, M * MBS, &tokens);
    pt_pipeline *p = NULL, *one = NULL;
    double step = train(&c, T, steps, &b, &p);
    if (step < 0)
        return 1;
    bool mpi = !strcmp(pt_pipeline_transport_name(p), "mpi");
    /* the last step's sums, per rank of this process */
    pt_worker *w = pt_local_worker(p, p->rank);
    int count = 0;
    for (int i = 0; i < w->n_events; i++)
        count += w->events[i].piece > 0;
    alone_job j = {0};
    memcpy(j.count, w->tensor_sums, sizeof j.count);
    memcpy(j.how, w->tensor_how, sizeof j.how);
    double in_step = w->tensor_sum_time, bytes = (double)w->tensor_sum_bytes;
    double alone[MAX_STEPS];
    for (int s = 0; s < steps; s++) {
        if (pt_pipeline_run(p, sums_alone, &j) != PT_OK)
            return fprintf(stderr, "bench_tensor: %s\n", pt_last_error()), 1;
        alone[s] = j.alone;
    }
    double alone_s = bench_median(alone, steps);
    int main_rank = pt_pipeline_is_main(p);
    pt_pipeline_destroy(p);
    double one_step = 0;
    if (!mpi) { /* one slice, one thread: the baseline the slices divide */
        pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
        pt_pipeline_config pc = pt_pipeline_config_default();
        pc.stages = 1, pc.microbatches = M, pc.micro_batch_size = MBS, pc.blas_threads = 1;
        pc.transport = PT_PIPELINE_THREADS;
        float loss;
        double t[MAX_STEPS];
        if (pt_pipeline_create(&c, &oc, &pc, &one) != PT_OK)
            return fprintf(stderr, "bench_tensor: %s\n", pt_last_error()), 1;
        for (int s = 0; s <= steps; s++) {
            double t0 = bench_now();
            if (pt_pipeline_train_step(one, &b, s, oc.lr, &loss) != PT_OK)
                return fprintf(stderr, "bench_tensor: %s\n", pt_last_error()), 1;
            if (s > 0)
                t[s - 1] = bench_now() - t0;
        }
        one_step = bench_median(t, steps);
        pt_pipeline_destroy(one);
    }
    /* the cores this run used: under MPI every rank measures its own at once */
    double fma = mpi ? T * bench_fma_peak_cores(1) : bench_fma_peak_cores(2);
    if (main_rank) {
        double tokens_per_step = (double)M * MBS * c.seq_len;
        printf("gpt 4 layers, 6 heads, 384 embd, seq 256, vocab 256; %d micro-batches of %d; "
               "1 stage x %d tensor slices%s on %s, one BLAS thread each\n",
               M, MBS, T, sequence ? " with sequence parallelism" : "",
               mpi ? "MPI ranks" : "threads");
        printf("fp32 products on %s; %d-bit FMA peak of the %d cores used %.1f GFLOP/s\n\n",
               pt_fp32_kernel(), bench_fma_bits(), mpi ? T : 2, fma);
        printf("step: %.3f s, %.0f tokens/s", step, tokens_per_step / step);
        if (one_step > 0)
            printf(" (one slice on one thread: %.3f s, %.0f tokens/s; %.2fx)", one_step,
                   tokens_per_step / one_step, one_step / step);
        printf("\nsums per step (rank 0): %d of %.0f KiB each, %.1f MiB in all\n", count,
               bytes / (count ? count : 1) / 1024, bytes / 1048576);
        printf("  in the step: %8.2f ms (%.1f%% of the step)\n", 1e3 * in_step,
               100 * in_step / step);
        printf("  alone:       %8.2f ms (%d all-reduces, %d reduce-scatters, %d all-gathers "
               "of the same buffers: %.2f GB/s per rank)\n",
               1e3 * alone_s, j.count[PT_GROUP_SUM], j.count[PT_GROUP_SCATTER],
               j.count[PT_GROUP_GATHER], alone_s > 0 ? bytes / alone_s / 1e9 : 0.0);
        printf("  in the step / alone: %.2f\n", alone_s > 0 ? in_step / alone_s : 0.0);
    }
    free(tokens);
    return 0;
}
