/* replay_zero_bubble.c: Qi et al.'s published runs (published.h) replayed
 * through pipetrain's schedules and simulator: from each row's profiled
 * T_F, T_B, T_W and T_comm, the bubble rate of 1F1B, interleaved 1F1B,
 * ZB-H1, ZB-H2, ZB-1p and ZB-2p, and their throughput relative to 1F1B.
 * Called by `pipetrain plan --check` and tests/test_published_zero_bubble.c.
 *
 * Two cost models, both from the paper's inputs alone:
 *   bubble rate   the paper's own (section 5.3): transfers overlap compute
 *                 and arrive T_comm after they leave; the rate is measured
 *                 on the longest stage's span;
 *   throughput    the runtime the paper measured (section 5.1: Megatron-LM
 *                 underneath every schedule): a send holds its sender for
 *                 T_comm; 1F1B and interleaved 1F1B all-reduce before the
 *                 optimizer step, so an iteration lasts the whole makespan,
 *                 while the zero-bubble runs post-validate it (section 4),
 *                 so consecutive iterations overlap and one lasts the
 *                 longest stage's span.
 * ZB-H1 and ZB-H2 are replayed as the paper draws them, the orders for
 * F = B = W (the generators given the times would order for them and beat
 * the paper's ZB-H2). Interleaved 1F1B takes one layer per chunk (section 5.1), so each of its
 * chunks costs T / v for v chunks per worker. The memory ZB-1p and ZB-2p
 * are searched under, P and 2P micro-batches of M_B, counts a W's share by
 * the paper's Table 1: M_W / M_B = 32 s b h / (s b (34 h + 5 a s)). */
#include "plan/published.h"

#include <stdbool.h>

#include "tensor/error.h"

const char *const pt_zb_schedule_names[PT_ZB_N_SCHEDULES] = {"1f1b", "interleaved", "zbh1",
                                                             "zbh2", "zb1p",        "zb2p"};

int pt_zb_interleaved_chunks(const pt_published_zb *r)
{
    int layers = (int)r->layers.value, P = (int)r->stages.value;
    return P > 0 && (layers + 2) % P == 0 ? (layers + 2) / P : 1;
}

static double w_memory(const pt_published_zb *r)
{
    double h = r->hidden.value, a = r->heads.value, s = r->seq.value;
    return 32 * h / (34 * h + 5 * a * s);
}

/* Plays schedule k of row r; *span and *makespan receive the times. */
static int play(const pt_published_zb *r, int k, int blocking, double *span, double *makespan)
{
    int v = k == PT_ZB_INTERLEAVED ? pt_zb_interleaved_chunks(r) : 1;
    pt_schedule_costs c = pt_schedule_costs_default();
    c.f = r->t_f.value / v, c.b = r->t_b.value / v, c.w = r->t_w.value / v;
    c.latency = blocking ? 0 : r->t_comm.value;
    c.send = blocking ? r->t_comm.value : 0;
    pt_schedule_config cfg = pt_schedule_config_default();
    cfg.name = pt_zb_schedule_names[k];
    cfg.stages = (int)r->stages.value;
    cfg.microbatches = (int)r->microbatches.value;
    cfg.virtual_stages = v;
    /* ZB-H1 and ZB-H2 are the paper's drawn patterns (unit costs), played
     * under the profiled times; the generators would order for the times */
    cfg.costs = k == PT_ZB_H1 || k == PT_ZB_H2 ? NULL : &c;
    cfg.w_memory = w_memory(r);
    pt_schedule *s = NULL;
    pt_schedule_sim *sim = NULL;
    int rc = pt_schedule_create(&cfg, &s);
    if (rc == PT_OK)
        rc = pt_schedule_simulate(s, &c, &sim);
    if (rc == PT_OK)
        *span = sim->span, *makespan = sim->makespan;
    else
        pt_fail_within(rc, "%s (%s, %d micro-batches)", r->model, cfg.name, cfg.microbatches);
    pt_schedule_sim_destroy(sim);
    pt_schedule_destroy(s);
    return rc;
}

int pt_replay_zb_bubbles(const pt_published_zb *r, double bubble[PT_ZB_N_SCHEDULES])
{
    double busy = r->microbatches.value * (r->t_f.value + r->t_b.value + r->t_w.value);
    for (int k = 0; k < PT_ZB_N_SCHEDULES; k++) {
        double span, makespan;
        int rc = play(r, k, 0, &span, &makespan);
        if (rc != PT_OK)
            return rc;
        bubble[k] = span > 0 ? (span - busy) / span : 0;
    }
    return PT_OK;
}

int pt_replay_zb_speedups(const pt_published_zb *r, double speedup[PT_ZB_N_SCHEDULES])
{
    double iteration[PT_ZB_N_SCHEDULES];
    for (int k = 0; k < PT_ZB_N_SCHEDULES; k++) {
        double span, makespan;
        int rc = play(r, k, 1, &span, &makespan);
        if (rc != PT_OK)
            return rc;
        bool post_validated = k != PT_ZB_1F1B && k != PT_ZB_INTERLEAVED;
        iteration[k] = post_validated ? span : makespan;
    }
    for (int k = 0; k < PT_ZB_N_SCHEDULES; k++)
        speedup[k] = iteration[k] > 0 ? iteration[PT_ZB_1F1B] / iteration[k] : 0;
    return PT_OK;
}
