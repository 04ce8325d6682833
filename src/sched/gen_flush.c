/* gen_flush.c: generators for the schedules with one chunk per worker:
 *
 *   gpipe      fill-drain (Huang et al. 2019): every forward, then every
 *              backward, micro-batches in order.
 *   1f1b       PipeDream-Flush (Narayanan et al. 2021): worker r runs
 *              P-1-r warm-up forwards, then alternates one forward and one
 *              backward, then drains; at most P-r micro-batches in flight.
 *   1f1b-rr    1f1b over data-parallel replicas of every stage; micro-batch
 *              m goes round-robin to replica m % R of every stage (PipeDream's
 *              1F1B-RR), so its forward and backward run on the same replica.
 *              Worker s*R+k is replica k of stage s. Synchronous: replicas'
 *              gradients are all-reduced at the flush.
 *   pipedream  PipeDream's asynchronous 1F1B (Narayanan et al. SOSP'19): the
 *              input stage admits NOAM = ceil(workers / input replicas)
 *              micro-batches before its first backward, then 1F1B without a
 *              flush; every backward is followed by the stage's weight update,
 *              every forward records the weight version it used (weight
 *              stashing), and its backward repeats it. With R replicas it is
 *              PipeDream's 1F1B-RR: micro-batch m goes to replica m % R of
 *              every stage, as in 1f1b-rr, and every replica walks the same
 *              1F1B order over its own micro-batches, so the j-th update of
 *              every replica of a stage follows its j-th backward and the
 *              forwards of one round (micro-batches jR .. jR+R-1) use the same
 *              version on every replica; the runtime combines the replicas'
 *              gradients at each update (docs/pipeline.md).
 *
 * Backwards are fused (BW). Called by pt_schedule_create() in schedule.c,
 * which has already checked the parameters.
 */
#include <stdlib.h>

#include "sched/schedule.h"
#include "tensor/error.h"

int pt_sched_gen_gpipe(int stages, int micro, pt_schedule **out)
{
    int rc = pt_sched_alloc(stages, stages, micro, 1, out);
    for (int w = 0; rc == PT_OK && w < stages; w++) {
        for (int m = 0; rc == PT_OK && m < micro; m++)
            rc = pt_sched_push(*out, w, PT_ACT_F, w, m);
        for (int m = 0; rc == PT_OK && m < micro; m++)
            rc = pt_sched_push(*out, w, PT_ACT_BW, w, m);
    }
    if (rc != PT_OK) {
        pt_schedule_destroy(*out);
        *out = NULL;
    }
    return rc;
}

/* One worker's walk through its micro-batches in 1F1B order. */
typedef struct {
    pt_schedule *s;
    int w, chunk;
    const int *mbs; /* the worker's micro-batches, in order */
    bool async;
    int version; /* weight updates applied so far (async) */
    int next_f, next_b;
    int *f_version; /* [i]: the version mbs[i]'s forward used */
} walk;

static int forward(walk *k)
{
    k->f_version[k->next_f] = k->version;
    int mb = k->mbs[k->next_f++];
    return pt_sched_push_async(k->s, k->w, PT_ACT_F, k->chunk, mb, k->async ? k->version : -1,
                               false);
}

static int backward(walk *k)
{
    int i = k->next_b++;
    k->version += k->async;
    return pt_sched_push_async(k->s, k->w, PT_ACT_BW, k->chunk, k->mbs[i],
                               k->async ? k->f_version[i] : -1, k->async);
}

/* The 1F1B order of one worker holding `chunk`, over the micro-batches mbs[]
 * in order: `warmup` forwards, then forward/backward pairs, then the
 * remaining backwards. With `async`, each backward carries the weight update
 * and each forward the number of updates before it. */
static int one_f_one_b(pt_schedule *s, int w, int chunk, const int *mbs, int n, int warmup,
                       bool async)
{
    if (warmup > n)
        warmup = n;
    walk k = {.s = s, .w = w, .chunk = chunk, .mbs = mbs, .async = async};
    k.f_version = calloc((size_t)(n > 0 ? n : 1), sizeof(int));
    if (!k.f_version)
        return pt_fail(PT_ENOMEM, "out of memory generating a schedule");
    int rc = PT_OK;
    while (rc == PT_OK && k.next_f < warmup)
        rc = forward(&k);
    while (rc == PT_OK && k.next_f < n) {
        rc = forward(&k);
        if (rc == PT_OK)
            rc = backward(&k);
    }
    while (rc == PT_OK && k.next_b < n)
        rc = backward(&k);
    free(k.f_version);
    return rc;
}

/* 1F1B over R replicas of P stages; NOAM micro-batches admitted by each
 * replica of the input stage before its first backward. */
static int gen_replicated(int stages, int micro, int replicas, bool async, pt_schedule **out)
{
    int rc = pt_sched_alloc(stages * replicas, stages, micro, replicas, out);
    if (rc != PT_OK)
        return rc;
    pt_schedule *s = *out;
    int *mbs = malloc((size_t)micro * sizeof(int));
    if (!mbs)
        rc = pt_fail(PT_ENOMEM, "out of memory generating a schedule");
    for (int m = 0; m < micro; m++)
        for (int c = 0; c < stages; c++)
            s->route[m * stages + c] = m % replicas;
    /* NOAM = ceil(workers / replicas of the input stage) */
    int noam = (stages * replicas + replicas - 1) / replicas;
    for (int st = 0; rc == PT_OK && st < stages; st++)
        for (int k = 0; rc == PT_OK && k < replicas; k++) {
            int n = 0;
            for (int m = k; m < micro; m += replicas)
                mbs[n++] = m;
            /* stage st is st hops behind the input stage: it sees its first
             * gradient after admitting noam - st micro-batches */
            rc = one_f_one_b(s, st * replicas + k, st, mbs, n, noam - 1 - st, async);
        }
    free(mbs);
    if (rc != PT_OK) {
        pt_schedule_destroy(s);
        *out = NULL;
    }
    return rc;
}

int pt_sched_gen_1f1b(int stages, int micro, pt_schedule **out)
{
    return gen_replicated(stages, micro, 1, false, out);
}

int pt_sched_gen_1f1b_rr(int stages, int micro, int replicas, pt_schedule **out)
{
    return gen_replicated(stages, micro, replicas, false, out);
}

int pt_sched_gen_pipedream(int stages, int micro, int replicas, pt_schedule **out)
{
    return gen_replicated(stages, micro, replicas, true, out);
}
