/* test_zero_matches_unsharded: sharded optimizer state takes the steps of
 * the unsharded run (zero 0), on threads: zero 1 bit for bit, zero 2
 * (gradients reduce-scattered after every micro-batch, so summed in
 * another order) within zero_runs.h's tolerances.
 *
 * A small GPT with tied embedding and LM head, 4 AdamW steps with a clip
 * that bites, for P = 1 and 2 stages x D = 2 and 4 replicas under 1f1b,
 * interleaved (v = 2) and zbh1, with the replicas' sums in buckets of 4 MiB
 * and of 7 floats (every shard many buckets, bucket edges off the shard
 * edges):
 *   - every loss, parameter and (gathered) moment of zero 1 is
 *     bit-identical to zero 0's; of zero 2 the losses within ZR_LOSS_TOL
 *     and the tensors within ZR_TENSOR_TOL of their largest value; zero 1
 *     and 2 each run twice give the same bits;
 *   - the optimizer's moments allocated per worker at zero 1 are 1/D of
 *     zero 0's (within the shards' rounding);
 *   - zero without replicas, zero 3 and zero under pipedream are refused
 *     with messages naming the problem. */
#include <stdio.h>
#include <string.h>

#include "zero_runs.h"

static int compare(const char *schedule, int P, int D, size_t bucket)
{
    zr_layout l = {schedule, P, D, 0, bucket, PT_PIPELINE_THREADS};
    zr_run base, again, z;
    REQUIRE(zr_start(&l, &base) == PT_OK, "%s %dx%d zero 0: %s", schedule, P, D, pt_last_error());
    if (zr_train(&base))
        return 1;
    for (int zero = 1; zero <= 2; zero++) {
        l.zero = zero;
        REQUIRE(zr_start(&l, &z) == PT_OK, "%s %dx%d zero %d: %s", schedule, P, D, zero,
                pt_last_error());
        if (zr_train(&z))
            return 1;
        char what[96];
        snprintf(what, sizeof what, "%s P=%d D=%d bucket %zu: zero %d against 0", schedule, P, D,
                 bucket, zero);
        double worst[2];
        if (zero == 1 ? zr_same(&z, &base, what) : zr_close(&z, &base, what, worst))
            return 1;
        if (zero == 2)
            printf("   %s: losses within %.2g, tensors within %.2g of their largest value\n", what,
                   worst[0], worst[1]);
        /* 2 moments x 4 bytes x params / D, give or take each shard's
         * rounding to the arena's alignment (64 bytes per moment buffer) */
        size_t want = base.moment_bytes / (size_t)D, slack = 2 * 64 * (size_t)(D * P * 2);
        CHECK(z.moment_bytes <= want + slack && z.moment_bytes + slack >= want,
              "%s: moments %zu bytes over all workers, expected about %zu (1/%d of %zu)", what,
              z.moment_bytes, want, D, base.moment_bytes);
        if (!strcmp(schedule, "1f1b") && !bucket) {
            REQUIRE(zr_start(&l, &again) == PT_OK, "again: %s", pt_last_error());
            if (zr_train(&again) || zr_same(&again, &z, "the same layout run twice"))
                return 1;
            zr_end(&again);
        }
        zr_end(&z);
    }
    zr_end(&base);
    printf("ok %-11s P=%d D=%d buckets of %zu floats: zero 1 bit-identical to zero 0, zero 2 "
           "close to it\n",
           schedule, P, D, bucket ? bucket : PT_BUCKET_FLOATS);
    return 0;
}

static void refused(zr_layout l, const char *needle)
{
    zr_run r;
    int rc = zr_start(&l, &r);
    CHECK(rc == PT_EINVAL && strstr(pt_last_error(), needle),
          "%s stages %d replicas %d zero %d: rc %d, message '%s' (expected one naming '%s')",
          l.schedule, l.stages, l.replicas, l.zero, rc, pt_last_error(), needle);
    zr_end(&r);
}

int main(void)
{
    const char *schedules[] = {"1f1b", "interleaved", "zbh1"};
    int fail = 0;
    for (int s = 0; s < 3; s++)
        for (int P = 1; P <= 2; P++)
            for (int D = 2; D <= 4; D += 2) {
                if (P * D > 4 && s > 0)
                    continue; /* the largest layout once is enough */
                fail |= compare(schedules[s], P, D, 0);
                fail |= compare(schedules[s], P, D, 7);
            }
    refused((zr_layout){"1f1b", 2, 1, 1, 0, PT_PIPELINE_THREADS}, "replica");
    refused((zr_layout){"1f1b", 1, 2, 3, 0, PT_PIPELINE_THREADS}, "zero 3");
    refused((zr_layout){"pipedream", 2, 2, 1, 0, PT_PIPELINE_THREADS}, "asynchronous");
    return fail || failures;
}
