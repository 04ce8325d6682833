/* bench_mpi: does the pipeline run as fast on MPI ranks as on threads?
 *
 *   mpirun -np 2 build/bench/bench_mpi [steps]     (default 3)
 *
 * gpt with 4 layers, 6 heads, 384 embd, seq 256, vocab 256 (bench_pipeline's
 * model), 1f1b, P = 2, 16 micro-batches of 2 samples per step (8192
 * tokens), AdamW, one BLAS thread per worker, measured in one run:
 *   1. rank 0 alone runs the threads pipeline on both cores while rank 1
 *      waits in the transport's barrier (which sleeps between polls);
 *   2. both ranks run the MPI pipeline, one worker each, with the partition
 *      the threads pipeline chose;
 *   3. ping-pong between the ranks through the MPI transport and through raw
 *      MPI_Send/MPI_Recv, at 8 bytes and at this model's boundary tensor.
 * Prints tokens/s of both pipelines, their ratio (MPI / threads), and the
 * transport's latency and bandwidth beside raw MPI's. Each step figure is
 * the median of `steps` steps after a warm-up step. Built by `make bench`. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_pingpong.h"
#include "runtime/optimizer.h"

#define MBS 2
#define M   16

#ifndef PT_HAVE_MPI
int main(void)
{
    printf("bench_mpi: this build has no MPI\n");
    return 0;
}
#else

static int fail(const char *what)
{
    fprintf(stderr, "bench_mpi: %s: %s\n", what, pt_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

/* Median seconds per step; balance in/out (n_balance 0: profile, and
 * report the partition chosen). */
static int run(pt_pipeline_transport tr, const pt_microbatch *b, int steps, int *balance,
               int *n_balance, double *step_s)
{
    pt_model_config c = bench_gpt_small();
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = 2, pc.microbatches = M, pc.micro_batch_size = MBS, pc.schedule = "1f1b";
    pc.blas_threads = 1, pc.transport = tr;
    pc.balance = *n_balance ? balance : NULL, pc.n_balance = *n_balance;
    pt_pipeline *p;
    if (pt_pipeline_create(&c, &oc, &pc, &p))
        return fail("pipeline");
    if (!*n_balance) {
        for (int ch = 0; ch < 2; ch++) {
            int first, last;
            pt_pipeline_chunk_blocks(p, ch, &first, &last);
            balance[ch] = last - first + 1;
        }
        *n_balance = 2;
    }
    double t[32] = {0};
    for (int s = 0; s <= steps; s++) {
        double t0 = bench_now();
        if (pt_pipeline_train_step(p, b, s, oc.lr, NULL) != PT_OK)
            return fail("train_step");
        if (s > 0)
            t[s - 1] = bench_now() - t0;
    }
    *step_s = bench_median(t, steps);
    pt_pipeline_destroy(p);
    return 0;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n != 2) {
        if (me == 0)
            fprintf(stderr, "bench_mpi: run it as mpirun -np 2 bench_mpi [steps]\n");
        MPI_Finalize();
        return 1;
    }
    int steps = argc > 1 ? atoi(argv[1]) : 3;
    if (steps < 1 || steps > 32)
        steps = 3;
    pt_transport *t;
    if (pt_transport_mpi_create(NULL, &t) != PT_OK)
        return fail("transport");
    t->timeout_s = 3600.0; /* rank 1 waits out the threads measurement */

    pt_model_config c = bench_gpt_small();
    int rows = M * MBS * c.seq_len;
    int *tok = malloc(sizeof(int) * (size_t)(rows + 1));
    pt_rng r;
    pt_rng_seed(&r, 7);
    for (int i = 0; i <= rows; i++)
        tok[i] = (int)pt_rng_below(&r, (uint64_t)c.vocab);
    pt_microbatch b = {.batch = M * MBS, .tokens = tok, .targets = tok + 1};

    /* 1. threads on rank 0, with both cores (mpirun bound it to one) */
    int balance[2] = {0, 0}, n_balance = 0;
    double threads_s = 0, mpi_s = 0;
    if (me == 0) {
        cpu_set_t mine, all;
        sched_getaffinity(0, sizeof mine, &mine);
        CPU_ZERO(&all);
        for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN) && cpu < CPU_SETSIZE; cpu++)
            CPU_SET((int)cpu, &all);
        sched_setaffinity(0, sizeof all, &all);
        if (run(PT_PIPELINE_THREADS, &b, steps, balance, &n_balance, &threads_s))
            return 1;
        sched_setaffinity(0, sizeof mine, &mine);
    }
    if (pt_transport_barrier(t) != PT_OK)
        return fail("barrier");
    MPI_Bcast(balance, 2, MPI_INT, 0, MPI_COMM_WORLD);
    n_balance = 2;

    /* 2. the MPI pipeline, one worker per rank */
    if (run(PT_PIPELINE_MPI, &b, steps, balance, &n_balance, &mpi_s))
        return 1;

    /* 3. ping-pong: 8 bytes and one boundary tensor (MBS x seq x embd floats) */
    size_t sizes[2] = {8, (size_t)MBS * (size_t)c.seq_len * (size_t)c.n_embd * sizeof(float)};
    double tr[2], raw[2];
    void *buf = calloc(1, sizes[1]);
    for (int k = 0; k < 2; k++) {
        int rounds = pingpong_rounds(sizes[k]);
        tr[k] = pingpong_transport(t, buf, sizes[k], rounds);
        MPI_Barrier(MPI_COMM_WORLD);
        raw[k] = pingpong_raw_mpi(MPI_COMM_WORLD, buf, sizes[k], rounds);
    }
    free(buf);

    if (me == 0) {
        double tokens = (double)M * MBS * c.seq_len;
        printf("gpt 4 layers, 6 heads, 384 embd, seq 256, vocab 256; 1f1b, P = 2, balance "
               "%d,%d; %d micro-batches of %d (%.0f tokens per step); median of %d steps\n",
               balance[0], balance[1], M, MBS, tokens, steps);
        printf("%-24s %12s %12s %10s\n", "pipeline", "step (ms)", "tokens/s", "vs threads");
        printf("%-24s %12.1f %12.0f %10.2f\n", "threads (1 process)", threads_s * 1e3,
               tokens / threads_s, 1.0);
        printf("%-24s %12.1f %12.0f %10.2f\n", "mpi (2 ranks)", mpi_s * 1e3, tokens / mpi_s,
               threads_s / mpi_s);
        printf("\npoint-to-point ping-pong between the ranks, one-way time\n");
        printf("%-24s %12s %12s %12s\n", "", "bytes", "time (us)", "GB/s");
        for (int k = 0; k < 2; k++) {
            printf("%-24s %12zu %12.2f %12.2f\n", "mpi transport", sizes[k], tr[k] * 1e6,
                   (double)sizes[k] / tr[k] / 1e9);
            printf("%-24s %12zu %12.2f %12.2f\n", "raw MPI_Send/Recv", sizes[k], raw[k] * 1e6,
                   (double)sizes[k] / raw[k] / 1e9);
        }
    }
    pt_transport_barrier(t);
    pt_transport_destroy(t);
    free(tok);
    MPI_Finalize();
    return 0;
}
#endif
