/* link_report.c: what the link between workers does to a step. At the
 * start of an MPI training the trainer calls pt_pipeline_probe_link():
 * neighbouring ranks (r and r+1: the stages a pipeline's transfers join)
 * time pipetrain's own ping-pong through the transport at a small size, at
 * the size of one transfer between chunks (512 KiB at least), and at four
 * times that; the
 * line through the last two gives the bandwidth, what is left at the
 * transfer's size the latency, and the slowest pair stands for the link.
 * After a step pt_pipeline_step_times() sets, per rank, when it finished
 * its last compute action against when the program simulator
 * (sched/program_simulate.c), playing the program the workers ran, has it
 * finish for the measured F, B, W times of every chunk, each boundary's
 * bytes, and that link. Every rank of an MPI pipeline calls both
 * (each knows only its own worker; the figures are summed across ranks). On
 * threads there is no link to measure: transfers are copies in memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/pipeline_internal.h"
#include "tensor/error.h"

#define PROBE_TAG PT_TAG_MAX /* no executor message is in flight at the start */
#define SMALL     1024
/* Timed sizes are at least this: a shaped link (tc's tbf) lets a burst of
 * a few hundred KiB through at the line's own speed, and the line through
 * two sizes above the burst has the shaped rate for its slope. */
#define LEAST (512 << 10)

/* Seconds one way for `bytes`, the fastest of `rounds` round trips. */
static int ping_pong(pt_transport *t, int peer, bool first, void *buf, size_t bytes, int rounds,
                     double *best)
{
    *best = 1e300;
    for (int i = 0; i < rounds; i++) {
        pt_request s, r;
        double t0 = pt_pipeline_now();
        int rc;
        if (first) {
            rc = pt_transport_isend(t, peer, PROBE_TAG, buf, bytes, &s);
            if (rc == PT_OK)
                rc = pt_transport_irecv(t, peer, PROBE_TAG, buf, bytes, &r);
            if (rc == PT_OK)
                rc = pt_transport_wait(t, &s);
            if (rc == PT_OK)
                rc = pt_transport_wait(t, &r);
        } else {
            rc = pt_transport_irecv(t, peer, PROBE_TAG, buf, bytes, &r);
            if (rc == PT_OK)
                rc = pt_transport_wait(t, &r);
            if (rc == PT_OK)
                rc = pt_transport_isend(t, peer, PROBE_TAG, buf, bytes, &s);
            if (rc == PT_OK)
                rc = pt_transport_wait(t, &s);
        }
        if (rc != PT_OK)
            return rc;
        double one_way = (pt_pipeline_now() - t0) / 2;
        *best = one_way < *best ? one_way : *best;
    }
    return PT_OK;
}

/* This rank's link to `peer`: bandwidth and latency. */
static int probe_pair(pt_transport *t, int peer, size_t bytes, pt_link_rate *out)
{
    bool first = t->rank < peer;
    void *buf = calloc(1, 4 * bytes);
    if (!buf)
        return pt_fail(PT_ENOMEM, "cannot allocate %zu bytes to time the link", 4 * bytes);
    double small, one, four;
    int rc = ping_pong(t, peer, first, buf, SMALL, 10, &small);
    if (rc == PT_OK)
        rc = ping_pong(t, peer, first, buf, bytes, 2, &one);
    if (rc == PT_OK)
        rc = ping_pong(t, peer, first, buf, 4 * bytes, 2, &four);
    free(buf);
    if (rc != PT_OK)
        return rc;
    /* the line through (bytes, one) and (4 bytes, four); a link too fast
     * for the difference to show is taken at its average rate */
    out->bandwidth = four > one ? (double)(3 * bytes) / (four - one) : (double)(4 * bytes) / four;
    double left = one - (double)bytes / out->bandwidth;
    out->latency = left > small ? left : small;
    return PT_OK;
}

static uint64_t bits_of(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static double double_of(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The largest transfer between two chunks, in bytes, `least` at least. */
static size_t largest_transfer(const pt_pipeline *p, size_t least)
{
    const pt_activation_store *st = &p->workers[p->rank].store;
    size_t most = least;
    for (int c = 1; c < p->n_chunks; c++) {
        size_t b = pt_store_buffer_bytes(st, c);
        most = b > most ? b : most;
    }
    return most;
}

int pt_pipeline_probe_link(pt_pipeline *p, pt_link_rate *out)
{
    *out = (pt_link_rate){0, 0};
    if (!p->mpi || p->n_ranks < 2)
        return PT_OK;
    pt_transport *t = p->mpi_t;
    int r = p->rank;
    size_t bytes = largest_transfer(p, LEAST);
    pt_link_rate mine = {0, 0};
    /* two rounds, so that each rank times one pair at a time: (0,1), (2,3),
     * ... then (1,2), (3,4), ...; rank r leads the pair (r, r+1) */
    for (int round = 0; round < 2; round++) {
        int rc = PT_OK;
        if ((r - round) % 2 == 0 && r + 1 < p->n_ranks)
            rc = probe_pair(t, r + 1, bytes, &mine);
        else if ((r - 1 - round) % 2 == 0 && r >= 1) {
            pt_link_rate theirs;
            rc = probe_pair(t, r - 1, bytes, &theirs);
        }
        if (rc != PT_OK)
            return pt_ranks_abort(p, rc);
    }
    uint64_t *v = calloc((size_t)p->n_ranks * 2, sizeof *v);
    if (!v)
        return pt_fail(PT_ENOMEM, "cannot allocate the link's figures");
    v[2 * r] = bits_of(mine.bandwidth), v[2 * r + 1] = bits_of(mine.latency);
    int rc = pt_coll_sum_counts(p, v, (size_t)p->n_ranks * 2);
    for (int k = 0; rc == PT_OK && k + 1 < p->n_ranks; k++) {
        double bw = double_of(v[2 * k]), lat = double_of(v[2 * k + 1]);
        if (out->bandwidth == 0 || bw < out->bandwidth)
            out->bandwidth = bw;
        out->latency = lat > out->latency ? lat : out->latency;
    }
    free(v);
    return rc;
}

/* Every chunk's mean F, B, W seconds of the last step, from the worker that
 * holds its first replica (under MPI summed from the rank that ran it). */
static int chunk_costs(pt_pipeline *p, double *cost)
{
    int K = p->n_chunks;
    uint64_t *v = calloc((size_t)K * 3, sizeof *v);
    if (!v)
        return pt_fail(PT_ENOMEM, "cannot allocate chunk costs");
    for (int c = 0; c < K; c++) {
        const pt_worker *w = &p->workers[pt_sched_worker_of(p->s, c, 0) * p->T]; /* slice 0 */
        for (int k = 0; w->local && k < 3; k++)
            v[k * K + c] = bits_of(w->chunk_count[c * 3 + k]
                                       ? w->chunk_time[c * 3 + k] / w->chunk_count[c * 3 + k]
                                       : 0.0);
    }
    int rc = pt_coll_sum_counts(p, v, (size_t)K * 3);
    for (int i = 0; rc == PT_OK && i < K * 3; i++)
        cost[i] = double_of(v[i]);
    free(v);
    return rc;
}

/* When worker w's last compute action ends in the simulation of its
 * program (the collectives after it wait for the other workers). */
static double last_compute_end(const pt_program *prog, const pt_schedule_sim *sim, int w)
{
    for (int i = prog->n_actions[w] - 1; i >= 0; i--)
        if (pt_prog_is_compute(prog->actions[w][i].kind))
            return sim->end[w][i];
    return 0.0;
}

int pt_pipeline_step_times(pt_pipeline *p, const pt_link_rate *link, double *measured,
                           double *predicted)
{
    int K = p->n_chunks, P = p->n_ranks;
    double *cost = calloc((size_t)K * 4, sizeof(double));
    uint64_t *v = calloc((size_t)P, sizeof *v);
    if (!cost || !v) {
        free(cost);
        free(v);
        return pt_fail(PT_ENOMEM, "cannot allocate the step times");
    }
    for (int r = 0; r < P; r++) {
        const pt_worker *w = &p->workers[r];
        if (w->local && w->n_events > 0)
            v[r] = bits_of(w->events[w->n_events - 1].t1);
    }
    int rc = pt_coll_sum_counts(p, v, (size_t)P);
    if (rc == PT_OK)
        rc = chunk_costs(p, cost);
    for (int r = 0; rc == PT_OK && measured && r < P; r++)
        measured[r] = double_of(v[r]);
    double *bytes = cost + 3 * K;
    for (int c = 1; c < K; c++)
        bytes[c] = (double)pt_store_buffer_bytes(&p->workers[p->rank].store, c);
    pt_schedule_costs sc = pt_schedule_costs_default();
    sc.n_chunk_costs = K;
    sc.chunk_f = cost, sc.chunk_b = cost + K, sc.chunk_w = cost + 2 * K;
    sc.boundary_bytes = bytes;
    if (link)
        sc.bandwidth = link->bandwidth, sc.latency = link->latency;
    pt_schedule_sim *sim = NULL;
    if (rc == PT_OK && predicted)
        rc = pt_program_simulate(p->train_program, &sc, &sim);
    for (int r = 0; rc == PT_OK && predicted && r < P; r++)
        predicted[r] = last_compute_end(p->train_program, sim, r / p->T);
    pt_schedule_sim_destroy(sim);
    free(cost);
    free(v);
    return rc;
}

int pt_pipeline_step_time_report(const pt_pipeline *p, const pt_link_rate *link,
                                 const double *measured, const double *predicted, char *buf,
                                 size_t n)
{
    if (!measured || !predicted || !buf || n == 0)
        return pt_fail(PT_EINVAL, "the step time report needs the figures and a buffer");
    size_t at = 0;
    if (link && link->bandwidth > 0)
        at += (size_t)snprintf(buf, n,
                               "link (ping-pong): %.4g Mbit/s, latency %.3g ms; messages "
                               "between stages up to %zu bytes\n",
                               link->bandwidth * 8 / 1e6, 1e3 * link->latency,
                               largest_transfer(p, 0));
    else
        at += (size_t)snprintf(buf, n, "link: none (transfers in memory)\n");
    if (at < n)
        at += (size_t)snprintf(buf + at, n - at, "%-10s %12s %12s %8s\n", pt_rank_heading(p),
                               "step ms", "predicted", "ratio");
    char label[32];
    for (int r = 0; r < p->n_ranks && at < n; r++) {
        pt_rank_label(p, r, label, sizeof label);
        at += (size_t)snprintf(buf + at, n - at, "%-10s %12.1f %12.1f %8.2f\n", label,
                               1e3 * measured[r], 1e3 * predicted[r],
                               predicted[r] > 0 ? measured[r] / predicted[r] : 0.0);
    }
    return PT_OK;
}
