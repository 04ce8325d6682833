/* defer_weight.c: weight passes put off past the next forward
 * (pt_schedule_config.defer_w, `--defer-w`).
 *
 * A schedule with fused backwards keeps a transfer on the path that paces
 * its step when the link is slow. At P = 2, 1F1B's first worker runs BW(i)
 * and then F(i+2); the activation of i+2 leaves only after i's weight
 * pass, and even with the input gradient sent before the weight pass
 * (split_sent_backward) each micro-batch costs F + B + W + max(0, wire -
 * W/2) (tests/test_sched_link_transfers). Here, wherever a worker's fused
 * backward is followed by a forward that waits for nothing from another
 * worker (chunk 0's, or one whose input chunk the same worker holds), the
 * backward is split into B, then that forward, then W: the forward's
 * activation leaves a weight pass sooner, and at P = 2 a micro-batch costs
 * F + B + max(W, wire). The arithmetic is the same (W accumulates the
 * weight gradients in the same order), so the bits are too. The price is
 * memory: the worker keeps the micro-batch's activations past that forward
 * until its W, one micro-batch more at its peak; the simulator, the memory
 * prediction and the runtime all see the split actions and count it.
 * Synchronous schedules only: an asynchronous backward and its update stay
 * one BW. Called by pt_schedule_create(). */
#include "sched/schedule.h"
#include "tensor/error.h"

/* Whether forward a on worker w waits for nothing from another worker. */
static bool forward_is_local(const pt_schedule *s, int w, const pt_action *a)
{
    return a->kind == PT_ACT_F &&
           (a->chunk == 0 || pt_sched_worker_of(s, a->chunk - 1, a->mb) == w);
}

int pt_sched_defer_weight(pt_schedule **sp)
{
    pt_schedule *s = *sp, *d;
    if (pt_sched_is_async(s))
        return pt_fail(PT_EINVAL,
                       "%s is asynchronous: its backwards carry their weight updates, so their "
                       "weight passes cannot be deferred",
                       s->name);
    int rc = pt_sched_alloc(s->n_workers, s->n_chunks, s->n_micro, s->replicas, &d);
    if (rc != PT_OK)
        return rc;
    pt_sched_set_name(d, s->name);
    pt_sched_copy_placement(d, s);
    for (int w = 0; w < s->n_workers && rc == PT_OK; w++) {
        const pt_action *a = s->actions[w];
        int n = s->n_actions[w];
        for (int i = 0; i < n && rc == PT_OK; i++) {
            if (a[i].kind == PT_ACT_BW && i + 1 < n && forward_is_local(s, w, &a[i + 1])) {
                rc = pt_sched_push(d, w, PT_ACT_B, a[i].chunk, a[i].mb);
                if (rc == PT_OK)
                    rc = pt_sched_push(d, w, PT_ACT_F, a[i + 1].chunk, a[i + 1].mb);
                if (rc == PT_OK)
                    rc = pt_sched_push(d, w, PT_ACT_W, a[i].chunk, a[i].mb);
                i++;
            } else {
                rc = pt_sched_push(d, w, a[i].kind, a[i].chunk, a[i].mb);
            }
        }
    }
    if (rc != PT_OK) {
        pt_schedule_destroy(d);
        return rc;
    }
    pt_schedule_destroy(s);
    *sp = d;
    return PT_OK;
}
