/* gen_interleaved.c: generators for looped placements, where worker r of P
 * holds v chunks r, r+P, r+2P, ... so a micro-batch loops v times through
 * the workers:
 *
 *   interleaved  Megatron-LM's interleaved 1F1B (Narayanan et al. SC'21).
 *                Micro-batches go through in groups of P: a worker runs the
 *                forwards of a group on its first chunk, then on its second,
 *                and so on; backwards mirror that from the last chunk. Worker
 *                r warms up with (P-r-1)*2 + (v-1)*P forwards, then alternates,
 *                then drains. Needs M a multiple of P when v > 1, as Megatron
 *                does. Bubble (P-1)/(v*M+P-1) with equal costs.
 *   loopedbfs    breadth-first looped schedule (Lamy-Poirier 2023): every
 *                micro-batch through a worker's first chunk, then its second,
 *                ...; then every backward, last chunk first. GPipe per chunk.
 *
 * Backwards are fused (BW). Called by pt_schedule_create() in schedule.c,
 * which has already checked the parameters it does not check here.
 */
#include "sched/schedule.h"
#include "tensor/error.h"

static int fail_cleanup(pt_schedule **out, int rc)
{
    pt_schedule_destroy(*out);
    *out = NULL;
    return rc;
}

/* The k-th forward (or backward) of worker r in Megatron's order. */
static void interleaved_step(int P, int v, int r, int k, bool forward, int *chunk, int *mb)
{
    int in_group = k % (P * v);
    int local = in_group / P;
    if (!forward)
        local = v - 1 - local;
    *chunk = local * P + r;
    *mb = (k / (P * v)) * P + k % P;
}

int pt_sched_gen_interleaved(int P, int M, int v, pt_schedule **out)
{
    if (v == 1)
        return pt_sched_gen_1f1b(P, M, out);
    if (M % P != 0)
        return pt_fail(PT_EINVAL,
                       "interleaved: micro-batches (%d) must be a multiple of "
                       "stages (%d) when virtual stages > 1",
                       M, P);
    int rc = pt_sched_alloc(P, P * v, M, 1, out);
    if (rc != PT_OK)
        return rc;
    int total = M * v;
    for (int r = 0; r < P; r++) {
        int warmup = (P - r - 1) * 2 + (v - 1) * P;
        if (warmup > total)
            warmup = total;
        int f = 0, b = 0, chunk, mb;
        while (f < warmup) {
            interleaved_step(P, v, r, f++, true, &chunk, &mb);
            if ((rc = pt_sched_push(*out, r, PT_ACT_F, chunk, mb)) != PT_OK)
                return fail_cleanup(out, rc);
        }
        while (f < total) {
            interleaved_step(P, v, r, f++, true, &chunk, &mb);
            if ((rc = pt_sched_push(*out, r, PT_ACT_F, chunk, mb)) != PT_OK)
                return fail_cleanup(out, rc);
            interleaved_step(P, v, r, b++, false, &chunk, &mb);
            if ((rc = pt_sched_push(*out, r, PT_ACT_BW, chunk, mb)) != PT_OK)
                return fail_cleanup(out, rc);
        }
        while (b < total) {
            interleaved_step(P, v, r, b++, false, &chunk, &mb);
            if ((rc = pt_sched_push(*out, r, PT_ACT_BW, chunk, mb)) != PT_OK)
                return fail_cleanup(out, rc);
        }
    }
    return PT_OK;
}

int pt_sched_gen_loopedbfs(int P, int M, int v, pt_schedule **out)
{
    int rc = pt_sched_alloc(P, P * v, M, 1, out);
    if (rc != PT_OK)
        return rc;
    for (int r = 0; r < P; r++) {
        for (int i = 0; i < v; i++)
            for (int m = 0; m < M; m++)
                if ((rc = pt_sched_push(*out, r, PT_ACT_F, i * P + r, m)) != PT_OK)
                    return fail_cleanup(out, rc);
        for (int i = v - 1; i >= 0; i--)
            for (int m = 0; m < M; m++)
                if ((rc = pt_sched_push(*out, r, PT_ACT_BW, i * P + r, m)) != PT_OK)
                    return fail_cleanup(out, rc);
    }
    return PT_OK;
}
