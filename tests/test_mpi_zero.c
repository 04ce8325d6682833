/* test_mpi_zero: sharded optimizer state under MPI takes bit for bit the
 * steps it takes on threads, and those of the unsharded run (zero 2: close
 * to them).
 *
 * mpi-ranks: 4
 *
 * A small GPT with tied embedding and LM head, 4 AdamW steps with a clip
 * that bites, on 2 stages x 2 replicas and 1 stage x 4 replicas, 1f1b and
 * interleaved (v = 2), with zero 0, 1 and 2, with the default buckets and
 * buckets of 7 floats. Every rank runs each layout over MPI (one worker per
 * rank) and the same layout on threads in its own process:
 *   - the MPI run's losses, and the parameters and (gathered) moments its
 *     rank holds, are bit-identical to the threads run's;
 *   - zero 1 over MPI is bit-identical to zero 0 over MPI, and zero 2
 *     (its gradients reduce-scattered after every micro-batch) within
 *     zero_runs.h's tolerances of it;
 *   - each rank's moments at zero 1 are 1/D of zero 0's (allocated). */
#include <stdio.h>
#include <string.h>

#include "zero_runs.h"

static int rank_ = -1;

static int layout(const char *schedule, int P, int D, size_t bucket)
{
    zr_run base, mpi, threads;
    for (int zero = 0; zero <= 2; zero++) {
        zr_layout l = {schedule, P, D, zero, bucket, PT_PIPELINE_MPI};
        REQUIRE(zr_start(&l, &mpi) == PT_OK, "%s %dx%d zero %d over MPI: %s", schedule, P, D, zero,
                pt_last_error());
        rank_ = check_rank = pt_pipeline_rank(mpi.p);
        l.transport = PT_PIPELINE_THREADS;
        REQUIRE(zr_start(&l, &threads) == PT_OK, "%s %dx%d zero %d on threads: %s", schedule, P, D,
                zero, pt_last_error());
        if (zr_train(&mpi) || zr_train(&threads))
            return 1;
        char what[128];
        snprintf(what, sizeof what, "%s P=%d D=%d zero %d bucket %zu: MPI against threads",
                 schedule, P, D, zero, bucket);
        if (zr_same(&mpi, &threads, what))
            return 1;
        zr_end(&threads);
        if (zero == 0) {
            base = mpi;
            continue;
        }
        snprintf(what, sizeof what, "%s P=%d D=%d bucket %zu: zero %d against 0 over MPI", schedule,
                 P, D, bucket, zero);
        double worst[2];
        if (zero == 1 ? zr_same(&mpi, &base, what) : zr_close(&mpi, &base, what, worst))
            return 1;
        size_t want = base.moment_bytes / (size_t)D, slack = 2 * 64 * 2 * 2;
        CHECK(mpi.moment_bytes <= want + slack && mpi.moment_bytes + slack >= want,
              "%s: this rank's moments %zu bytes, expected about %zu (1/%d of %zu)", what,
              mpi.moment_bytes, want, D, base.moment_bytes);
        zr_end(&mpi);
    }
    zr_end(&base);
    if (rank_ == 0) {
        printf("ok %-11s P=%d D=%d buckets of %zu floats: zero 0, 1, 2 over MPI bit-identical to "
               "threads, zero 1 to zero 0, zero 2 close to it\n",
               schedule, P, D, bucket ? bucket : PT_BUCKET_FLOATS);
        fflush(stdout);
    }
    return 0;
}

int main(void)
{
    zr_layout probe_l = {"1f1b", 2, 2, 1, 0, PT_PIPELINE_MPI};
    zr_run probe;
    int rc = zr_start(&probe_l, &probe);
    if (rc == PT_EUNSUPPORTED) {
        printf("skip: %s\n", pt_last_error());
        return 77;
    }
    if (rc != PT_OK) {
        printf("FAIL: 2 stages x 2 replicas, zero 1, over MPI: %s\n", pt_last_error());
        return 1;
    }
    zr_end(&probe);
    int fail = 0;
    const char *schedules[] = {"1f1b", "interleaved"};
    for (int s = 0; s < 2; s++) {
        fail |= layout(schedules[s], 2, 2, 0);
        fail |= layout(schedules[s], 2, 2, 7);
        fail |= layout(schedules[s], 1, 4, 0);
        fail |= layout(schedules[s], 1, 4, 7);
    }
    if (!fail && !failures && rank_ == 0)
        printf("all ok\n");
    return fail || failures;
}
