/* executor.c: one pipeline worker running its lowered program.
 *
 * The program (sched/program.h) is the worker's whole step: compute actions
 * F, B, W, BW of (chunk, micro-batch), the sends and receives between
 * workers, the replicas' gradient sums (REDUCE), the tied copies' sums
 * (TIED), the global norm (NORM), the optimizer steps (STEP) and, with
 * sharded optimizer state, the updated shards' gather (GATHER). The
 * executor is a table from action kind to the function that runs it, and
 * walks the list. Around that walk it
 *   - posts the receives the next compute action needs before the current
 *     one starts, and waits for them only when the action needs its input;
 *   - sends at once and waits for a send only when its buffer is needed
 *     again; neighbouring chunks on one worker hand tensors over in memory;
 *   - returns each activation record and buffer to the worker's store right
 *     after its last use: the record after W (or BW), the received gradient
 *     after B; a record's backward part (the gradients W reads) is taken
 *     only at its B;
 *   - moves the replicas' gradient sums along between actions.
 * Activation checkpointing keeps only each chunk's input after F; the
 * backward first re-runs the chunk's forward into a fresh record. A compute
 * action that carries a weight version (asynchronous schedules) runs with
 * that version's weights (weight_stash.c); a STEP of one chunk updates it
 * from the micro-batch's gradient alone, clipped by the chunk's own norm.
 * Every worker runs on its own stage (w->stage, w->opt): the model's blocks
 * of its chunks and nothing else. Tags name (receiving chunk, micro-batch,
 * direction), so receives may be posted in any order. Nothing here depends
 * on which schedule, transport or model it runs.
 * Called by pipeline.c on the worker's own thread. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/pipeline_internal.h"
#include "tensor/error.h"

enum { DIR_ACT = 0, DIR_GRAD = 1 };

double pt_pipeline_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

pt_microbatch pt_pipeline_microbatch(const pt_pipeline *p, const pt_microbatch *batch, int k)
{
    pt_model_io io = pt_model_get_io(p->desc);
    size_t rows = (size_t)k * (size_t)p->mbs;
    pt_microbatch mb = {.batch = p->mbs};
    mb.tokens = batch->tokens ? batch->tokens + rows * (size_t)io.tokens : NULL;
    mb.inputs = batch->inputs ? batch->inputs + rows * (size_t)io.inputs : NULL;
    mb.targets = batch->targets ? batch->targets + rows * (size_t)io.labels : NULL;
    mb.target_values =
        batch->target_values ? batch->target_values + rows * (size_t)io.values : NULL;
    return mb;
}

static int tag_of(const pt_pipeline *p, int chunk, int mb, int dir)
{
    return (chunk * p->M + mb) * 2 + dir;
}

static pt_slot *slot_of(pt_worker *w, int chunk, int mb) { return &w->slots[chunk * w->p->M + mb]; }

static bool is_backward(pt_action_kind k) { return k == PT_ACT_B || k == PT_ACT_BW; }

/* ---- receives ---- */

/* A RECV_ACT (the input of F(chunk, mb)) or RECV_GRAD (the gradient that
 * B(chunk, mb) needs), posted into a buffer from the store; no wait. */
static int post_receive(pt_worker *w, const pt_prog_action *a)
{
    pt_pipeline *p = w->p;
    pt_slot *sl = slot_of(w, a->chunk, a->mb);
    bool grad = a->kind == PT_PROG_RECV_GRAD;
    int boundary = grad ? a->chunk + 1 : a->chunk;
    bool *posted = grad ? &sl->gin_posted : &sl->in_posted;
    bool ready = grad ? sl->gin_ready : sl->in_ready;
    void **buf = grad ? &sl->gin : &sl->in;
    if (*posted || ready)
        return PT_OK;
    int rc = pt_store_take_buffer(&w->store, boundary, buf);
    if (rc == PT_OK)
        rc = pt_transport_irecv(
            w->t, a->peer, tag_of(p, a->chunk, a->mb, grad ? DIR_GRAD : DIR_ACT), *buf,
            pt_store_buffer_bytes(&w->store, boundary), grad ? &sl->gin_req : &sl->in_req);
    if (rc == PT_OK)
        *posted = true;
    return rc;
}

/* A receive's stream: its kind and chunk. A stream's messages come from one
 * peer in the order its list posts them. */
static int stream_of(const pt_prog_action *a)
{
    return 2 * a->chunk + (a->kind == PT_PROG_RECV_GRAD);
}

/* Every stream keeps the next PT_RECEIVES_AHEAD of its receives posted
 * beyond those of the next compute action (index j): a message then moves
 * as soon as its sender sends it, on a transport whose large messages wait
 * for their receive (MPI's rendezvous), not when the list reaches it. A
 * posted receive holds a boundary buffer: PT_RECEIVES_AHEAD more per stream
 * at most. */
static int post_streams(pt_worker *w, const pt_prog_action *acts, int n, int j)
{
    int *ahead = w->stream_ahead, streams = 2 * w->p->n_chunks, full = 0;
    memset(ahead, 0, sizeof(int) * (size_t)streams);
    for (int k = j + 1; k < n && full < w->n_streams; k++) {
        if (!pt_prog_is_recv(acts[k].kind))
            continue;
        int s = stream_of(&acts[k]);
        if (ahead[s] == PT_RECEIVES_AHEAD)
            continue;
        int rc = post_receive(w, &acts[k]); /* nothing to do when already posted */
        if (rc != PT_OK)
            return rc;
        full += ++ahead[s] == PT_RECEIVES_AHEAD;
    }
    return PT_OK;
}

/* Before compute action i runs: the receives of the next compute action go
 * out, so its inputs travel while action i computes, and every stream's
 * next ones after them. */
static int post_ahead(pt_worker *w, const pt_prog_action *acts, int n, int i)
{
    int j = i + 1;
    while (j < n && !pt_prog_is_compute(acts[j].kind))
        j++; /* the receives of the compute action after i come right before it */
    for (int k = i + 1; k < n && k <= j; k++)
        if (pt_prog_is_recv(acts[k].kind)) {
            int rc = post_receive(w, &acts[k]);
            if (rc != PT_OK)
                return rc;
        }
    return post_streams(w, acts, n, j);
}

/* How many streams the list receives on (post_streams stops once each has
 * its receives ahead). */
static int count_streams(pt_worker *w, const pt_prog_action *acts, int n)
{
    int *seen = w->stream_ahead, streams = 2 * w->p->n_chunks, count = 0;
    memset(seen, 0, sizeof(int) * (size_t)streams);
    for (int k = 0; k < n; k++)
        if (pt_prog_is_recv(acts[k].kind) && !seen[stream_of(&acts[k])]++)
            count++;
    return count;
}

/* The step's gradients zeroed, where that is still to do */
static void zero_grads(pt_worker *w)
{
    if (w->zero_grads)
        pt_model_zero_grads(w->stage);
    w->zero_grads = false;
}

/* Waits for a request, first doing what the step's start left to the
 * worker's first wait where the request is not done yet: the gradients
 * zeroed, and the stage's weights packed again (their first products of a
 * step would pack them on the pipeline's path, one stage after another;
 * this packs them while the worker would wait anyway: all of them, the
 * products before having packed what they read). */
static int wait_input(pt_worker *w, pt_request *req)
{
    int done = 0;
    if (w->prepare || w->zero_grads) {
        int rc = pt_transport_test(w->t, req, &done); /* done: the request ended */
        if (rc != PT_OK || done)
            return rc;
        zero_grads(w);
        if (w->prepare)
            pt_model_prepare_products(w->stage);
        w->prepare = false;
    }
    return pt_transport_wait(w->t, req);
}

static int await_input(pt_worker *w, const pt_action *a)
{
    pt_pipeline *p = w->p;
    pt_slot *sl = slot_of(w, a->chunk, a->mb);
    char name[32];
    if (a->kind == PT_ACT_F && a->chunk > 0) {
        if (sl->in_posted) {
            int rc = wait_input(w, &sl->in_req);
            sl->in_posted = false;
            if (rc != PT_OK)
                return rc;
            sl->in_ready = true;
        }
        if (!sl->in_ready)
            return pt_fail(PT_EDEADLOCK, "worker %d: %s runs before its input exists", w->rank,
                           pt_sched_action_str(a, name, sizeof name));
    }
    if (is_backward(a->kind) && !pt_sched_is_last_chunk(p->s, a->chunk)) {
        if (sl->gin_posted) {
            int rc = wait_input(w, &sl->gin_req);
            sl->gin_posted = false;
            if (rc != PT_OK)
                return rc;
            sl->gin_ready = true;
        }
        if (!sl->gin_ready)
            return pt_fail(PT_EDEADLOCK,
                           "worker %d: %s runs before its output's gradient "
                           "exists",
                           w->rank, pt_sched_action_str(a, name, sizeof name));
    }
    return PT_OK;
}

/* ---- sends ---- */

/* Frees the buffers of finished sends; with `all`, waits for every send. */
static int settle_sends(pt_worker *w, bool all)
{
    int first_rc = PT_OK;
    for (int i = 0; i < w->n_sends; i++) {
        pt_pending_send *ps = &w->sends[i];
        if (!ps->active)
            continue;
        int done = 0, rc;
        if (all) {
            rc = pt_transport_wait(w->t, &ps->req);
            done = 1;
        } else {
            rc = pt_transport_test(w->t, &ps->req, &done);
        }
        if (rc != PT_OK && first_rc == PT_OK)
            first_rc = rc;
        if (done || rc != PT_OK) {
            pt_store_give_buffer(&w->store, ps->boundary, ps->buf);
            ps->active = false;
        }
    }
    while (w->n_sends > 0 && !w->sends[w->n_sends - 1].active)
        w->n_sends--;
    return first_rc;
}

/* Sends buf (owned by the store when give_back) to `peer`; the buffer returns to
 * the store once the send is done. */
static int send_async(pt_worker *w, int peer, int tag, void *buf, int boundary, bool give_back)
{
    int i = 0;
    while (i < w->n_sends && w->sends[i].active)
        i++;
    int cap = w->p->n_chunks * w->p->M * 2 + 4;
    if (i >= cap)
        return pt_fail(PT_ENOMEM, "worker %d: more than %d sends in flight", w->rank, cap);
    pt_pending_send *ps = &w->sends[i];
    int rc = pt_transport_isend(w->t, peer, tag, buf, pt_store_buffer_bytes(&w->store, boundary),
                                &ps->req);
    if (rc != PT_OK)
        return rc;
    ps->buf = give_back ? buf : NULL;
    ps->boundary = boundary;
    ps->active = true;
    if (i == w->n_sends)
        w->n_sends++;
    return PT_OK;
}

/* ---- compute ---- */

static void chunk_range(const pt_pipeline *p, int c, int *first, int *last)
{
    *first = p->chunk_first[c];
    *last = p->chunk_last[c];
}

static void note_time(pt_worker *w, int chunk, int piece, double secs)
{
    w->chunk_time[chunk * 3 + piece] += secs;
    w->chunk_count[chunk * 3 + piece]++;
}

static int forward_done(pt_worker *w, const pt_action *a, bool forward_only);

static int run_forward(pt_worker *w, const pt_action *a, const pt_microbatch *batch,
                       bool forward_only)
{
    pt_pipeline *p = w->p;
    pt_slot *sl = slot_of(w, a->chunk, a->mb);
    pt_microbatch mb = pt_pipeline_microbatch(p, batch, a->mb);
    int first, last;
    chunk_range(p, a->chunk, &first, &last);
    bool is_last = pt_sched_is_last_chunk(p->s, a->chunk);
    int rc = pt_store_take_acts(&w->store, a->chunk, &sl->acts);
    if (rc != PT_OK)
        return rc;
    if (a->version >= 0) {
        sl->version = a->version;
        if ((rc = pt_stash_forward(&w->stash[a->chunk], a->version)) != PT_OK)
            return rc;
    }
    if (pt_model_tensor_pieces(w->stage, first, last, 0) > 1) /* the rest after the sums */
        return pt_model_forward_piece(w->stage, first, last, 0, &mb, sl->in, sl->acts, NULL);
    float loss = 0.0f;
    rc = pt_model_forward(w->stage, first, last, &mb, sl->in, sl->acts, is_last ? &loss : NULL);
    if (rc != PT_OK)
        return rc;
    if (is_last)
        w->losses[a->mb] = loss;
    return forward_done(w, a, forward_only);
}

/* After a forward's last piece: its output handed to the next chunk when
 * that is here, its record dropped when nothing keeps it. */
static int forward_done(pt_worker *w, const pt_action *a, bool forward_only)
{
    pt_pipeline *p = w->p;
    pt_slot *sl = slot_of(w, a->chunk, a->mb);
    int rc;
    if (p->job_outputs && pt_sched_is_last_chunk(p->s, a->chunk)) {
        /* a prediction keeps what the last block wrote */
        size_t n = pt_activations_output_floats(sl->acts);
        memcpy(p->job_outputs + (size_t)a->mb * n, pt_activations_output(sl->acts),
               n * sizeof(float));
    }
    int dst = pt_sched_send_to(p->s, a);
    bool drop = forward_only || p->checkpoint; /* the record is not kept */
    if (dst == w->rank) {
        pt_slot *next = slot_of(w, a->chunk + 1, a->mb);
        if ((rc = pt_store_take_buffer(&w->store, a->chunk + 1, &next->in)) != PT_OK)
            return rc;
        memcpy(next->in, pt_activations_output(sl->acts),
               pt_store_buffer_bytes(&w->store, a->chunk + 1));
        next->in_ready = true;
    }
    if (drop && dst >= 0 && dst != w->rank) {
        sl->drop_after_send = true; /* SEND_ACT sends the output, then drops the record */
    } else if (drop) {
        pt_store_give_acts(&w->store, a->chunk, sl->acts);
        sl->acts = NULL;
    }
    if (forward_only && a->chunk > 0) {
        pt_store_give_buffer(&w->store, a->chunk, sl->in);
        sl->in = NULL;
        sl->in_ready = false;
    }
    return PT_OK;
}

/* SEND_ACT: F's output to the holder of the next chunk; SEND_GRAD: B's
 * input gradient to the holder of the previous one. */
static int run_send(pt_worker *w, const pt_prog_action *a)
{
    pt_pipeline *p = w->p;
    pt_slot *sl = slot_of(w, a->chunk, a->mb);
    char name[32];
    if (a->kind == PT_PROG_SEND_GRAD) {
        if (!sl->din)
            return pt_fail(PT_EDEADLOCK, "worker %d: %s before its backward", w->rank,
                           pt_prog_action_str(a, name, sizeof name));
        int rc = send_async(w, a->peer, tag_of(p, a->chunk - 1, a->mb, DIR_GRAD), sl->din, a->chunk,
                            true);
        if (rc != PT_OK)
            pt_store_give_buffer(&w->store, a->chunk, sl->din);
        sl->din = NULL;
        return rc;
    }
    if (!sl->acts)
        return pt_fail(PT_EDEADLOCK, "worker %d: %s before its forward", w->rank,
                       pt_prog_action_str(a, name, sizeof name));
    const void *out = pt_activations_output(sl->acts);
    int tag = tag_of(p, a->chunk + 1, a->mb, DIR_ACT);
    size_t bytes = pt_store_buffer_bytes(&w->store, a->chunk + 1);
    if (!sl->drop_after_send)
        return send_async(w, a->peer, tag, (void *)out, a->chunk + 1, false);
    /* the record goes back to the pool now, so the send must be done */
    pt_request req;
    int rc = pt_transport_isend(w->t, a->peer, tag, out, bytes, &req);
    if (rc == PT_OK)
        rc = pt_transport_wait(w->t, &req);
    pt_store_give_acts(&w->store, a->chunk, sl->acts);
    sl->acts = NULL;
    sl->drop_after_send = false;
    return rc;
}

/* The end of a micro-batch's backward on a chunk: the record and the input
 * go back to the store. */
static void release_micro_batch(pt_worker *w, int chunk, pt_slot *sl)
{
    pt_store_give_acts(&w->store, chunk, sl->acts);
    sl->acts = NULL;
    if (chunk > 0) {
        pt_store_give_buffer(&w->store, chunk, sl->in);
        sl->in = NULL;
        sl->in_ready = false;
    }
}

static void backward_input_done(pt_worker *w, const pt_action *a, void *din);

/* zero 2: the weight pass runs in pieces, a SCATTER after each (the
 * program's); this is its first. */
static bool weight_in_pieces(const pt_worker *w) { return w->scatter_req != NULL; }

/* Weight piece `piece` of (chunk, mb) at zero 2, its gradient's pages
 * written first (pt_zero_prepare_piece). */
static int weight_piece(pt_worker *w, int chunk, int piece, const pt_microbatch *mb, pt_slot *sl)
{
    int first = w->p->chunk_first[chunk], last = w->p->chunk_last[chunk];
    size_t from, to;
    pt_model_weight_piece_grads(w->stage, first, last, piece, &from, &to);
    pt_zero_prepare_piece(w, from, to);
    return pt_model_backward_weight_piece(w->stage, first, last, piece, mb, sl->in, sl->acts);
}

/* The weight pass of a W or BW: whole, after which the micro-batch's record
 * goes back; or (zero 2) its first piece, the SCATTERs running the rest. */
static int weight_pass(pt_worker *w, int chunk, const pt_microbatch *mb, pt_slot *sl)
{
    int first = w->p->chunk_first[chunk], last = w->p->chunk_last[chunk];
    if (weight_in_pieces(w))
        return weight_piece(w, chunk, 0, mb, sl);
    int rc = pt_model_backward_weight(w->stage, first, last, mb, sl->in, sl->acts);
    release_micro_batch(w, chunk, sl);
    return rc;
}

/* Activation checkpointing with tensor slices: a backward re-runs the
 * chunk's forward piece by piece, the sums between its pieces the first of
 * the backward's (pipeline.c lowers them so); 0 without checkpointing. */
static int recompute_sums(const pt_worker *w, int chunk)
{
    const pt_pipeline *p = w->p;
    return p->checkpoint
               ? pt_model_tensor_pieces(w->stage, p->chunk_first[chunk], p->chunk_last[chunk], 0) -
                     1
               : 0;
}

/* The first piece of a backward over its record (recomputed or kept). */
static int backward_first_piece(pt_worker *w, const pt_action *a, const pt_microbatch *mb)
{
    pt_pipeline *p = w->p;
    pt_slot *sl = slot_of(w, a->chunk, a->mb);
    int first = p->chunk_first[a->chunk], last = p->chunk_last[a->chunk];
    bool is_last = pt_sched_is_last_chunk(p->s, a->chunk);
    return pt_model_backward_input_piece(w->stage, first, last, 0, mb, sl->in, sl->acts,
                                         is_last ? NULL : sl->gin, sl->din, p->loss_scale);
}

static int run_backward(pt_worker *w, const pt_action *a, const pt_microbatch *batch,
                        pt_trace_event *ev)
{
    pt_pipeline *p = w->p;
    pt_slot *sl = slot_of(w, a->chunk, a->mb);
    pt_microbatch mb = pt_pipeline_microbatch(p, batch, a->mb);
    int first, last, rc;
    chunk_range(p, a->chunk, &first, &last);
    bool is_last = pt_sched_is_last_chunk(p->s, a->chunk);
    bool fused = a->kind == PT_ACT_BW, swapped = false;
    pt_weight_stash *st = a->version >= 0 ? &w->stash[a->chunk] : NULL;
    if (st && (rc = pt_stash_enter(st, sl->version, &swapped)) != PT_OK)
        return rc;
    bool pieces =
        pt_model_tensor_pieces(w->stage, first, last, 1) > 1 || recompute_sums(w, a->chunk) > 0;
    if (p->checkpoint) {
        if ((rc = pt_store_take_acts(&w->store, a->chunk, &sl->acts)) != PT_OK)
            return rc;
        rc = recompute_sums(w, a->chunk) > 0 /* its sums follow: TENSOR_SUM runs the rest */
                 ? pt_model_forward_piece(w->stage, first, last, 0, &mb, sl->in, sl->acts, NULL)
                 : pt_model_forward(w->stage, first, last, &mb, sl->in, sl->acts, NULL);
        if (rc != PT_OK)
            return rc;
    }
    if (!sl->acts) {
        char name[32];
        return pt_fail(PT_EDEADLOCK, "worker %d: %s runs before its forward", w->rank,
                       pt_sched_action_str(a, name, sizeof name));
    }
    /* the gradients the weight pass reads: held from here to the W */
    if ((rc = pt_store_attach_grads(&w->store, a->chunk, sl->acts)) != PT_OK)
        return rc;
    void *din = NULL;
    if (a->chunk > 0 && (rc = pt_store_take_buffer(&w->store, a->chunk, &din)) != PT_OK)
        return rc;
    if (pieces) {
        sl->din = din; /* the last piece writes it */
        return recompute_sums(w, a->chunk) > 0 ? PT_OK : backward_first_piece(w, a, &mb);
    }
    rc = pt_model_backward_input(w->stage, first, last, &mb, sl->in, sl->acts,
                                 is_last ? NULL : sl->gin, din, p->loss_scale);
    if (rc != PT_OK) {
        pt_store_give_buffer(&w->store, a->chunk, din);
        return rc;
    }
    backward_input_done(w, a, din);
    ev->tb = pt_pipeline_now() - p->step_t0;
    if (fused)
        rc = weight_pass(w, a->chunk, &mb, sl);
    if (st)
        pt_stash_leave(st, sl->version, swapped, fused);
    return rc;
}

/* After a backward's last input piece: the received gradient goes back,
 * and the output where it is kept only until here; the input gradient goes
 * to the previous chunk here or to SEND_GRAD. */
static void backward_input_done(pt_worker *w, const pt_action *a, void *din)
{
    pt_pipeline *p = w->p;
    pt_slot *sl = slot_of(w, a->chunk, a->mb);
    bool is_last = pt_sched_is_last_chunk(p->s, a->chunk);
    pt_store_release_output(&w->store, a->chunk, sl->acts); /* the LM head's probabilities */
    if (!is_last) {
        pt_store_give_buffer(&w->store, a->chunk + 1, sl->gin);
        sl->gin = NULL;
        sl->gin_ready = false;
    }
    if (din) {
        int dst = pt_sched_send_to(p->s, a);
        if (dst == w->rank) {
            pt_slot *prev = slot_of(w, a->chunk - 1, a->mb);
            prev->gin = din;
            prev->gin_ready = true;
        } else {
            sl->din = din; /* SEND_GRAD sends it */
        }
    }
}

static int run_weight(pt_worker *w, const pt_action *a, const pt_microbatch *batch)
{
    pt_pipeline *p = w->p;
    pt_slot *sl = slot_of(w, a->chunk, a->mb);
    pt_microbatch mb = pt_pipeline_microbatch(p, batch, a->mb);
    int first, last, rc;
    chunk_range(p, a->chunk, &first, &last);
    if (!sl->acts) {
        char name[32];
        return pt_fail(PT_EDEADLOCK, "worker %d: %s runs before its backward", w->rank,
                       pt_sched_action_str(a, name, sizeof name));
    }
    bool swapped = false;
    pt_weight_stash *st = a->version >= 0 ? &w->stash[a->chunk] : NULL;
    if (st && (rc = pt_stash_enter(st, sl->version, &swapped)) != PT_OK)
        return rc;
    rc = weight_pass(w, a->chunk, &mb, sl);
    if (st)
        pt_stash_leave(st, sl->version, swapped, true);
    return rc;
}

/* SCATTER (zero 2): the replicas reduce-scatter what weight piece `peer`
 * of (chunk, mb) wrote, then the next piece runs; after the last the
 * micro-batch's record goes back. The SCATTER and its piece are one event
 * of the trace, their time the W's. */
static int run_scatter(pt_worker *w, const pt_prog_action *a, const pt_microbatch *batch)
{
    pt_pipeline *p = w->p;
    int first = p->chunk_first[a->chunk], last = p->chunk_last[a->chunk];
    pt_slot *sl = slot_of(w, a->chunk, a->mb);
    pt_microbatch mb = pt_pipeline_microbatch(p, batch, a->mb);
    char name[32];
    if (!sl->acts)
        return pt_fail(PT_EDEADLOCK, "worker %d: %s runs before its weight pass", w->rank,
                       pt_prog_action_str(a, name, sizeof name));
    pt_trace_event *ev = &w->events[w->n_events++];
    *ev = (pt_trace_event){
        .kind = PT_ACT_W, .chunk = a->chunk, .mb = a->mb, .piece = a->peer + 1, .tb = -1};
    ev->t0 = ev->ts = pt_pipeline_now() - p->step_t0;
    size_t from, to;
    pt_model_weight_piece_grads(w->stage, first, last, a->peer, &from, &to);
    bool more = a->peer + 1 < pt_model_weight_pieces(w->stage, first, last);
    int rc = pt_zero_scatter(w, a->chunk, from, to, !more);
    ev->ts = pt_pipeline_now() - p->step_t0;
    if (rc == PT_OK && more)
        rc = weight_piece(w, a->chunk, a->peer + 1, &mb, sl);
    else
        release_micro_batch(w, a->chunk, sl);
    ev->t1 = pt_pipeline_now() - p->step_t0;
    w->chunk_time[a->chunk * 3 + 2] += ev->t1 - ev->t0;
    return rc;
}

/* ---- collectives and steps ---- */

/* REDUCE: the chunk's gradient is final here: its sum over the replicas
 * starts (overlapped with what follows), or runs at once when this worker
 * has no overlapped reduction (asynchronous updates, or the blocking
 * reference the tests compare with). */
static int run_reduce(pt_worker *w, const pt_prog_action *a)
{
    if (pt_reduce_active(&w->reduce))
        return pt_reduce_start(&w->reduce, a->chunk);
    return pt_coll_sum_replicas(w, a->chunk);
}

/* The replicas' sums begun in the list must be done before what reads the
 * gradients: the tied sums and the norm. */
static int finish_reduce(pt_worker *w)
{
    return pt_reduce_active(&w->reduce) ? pt_reduce_finish(&w->reduce) : PT_OK;
}

static int run_tied(pt_worker *w, const pt_prog_action *a)
{
    int rc = finish_reduce(w);
    if (rc == PT_OK && w->p->zero && !a->mean)
        return pt_zero_tied(w, a->chunk, a->peer);
    return rc == PT_OK ? pt_coll_tied(w, a->chunk, a->peer, a->mean) : rc;
}

/* GATHER: the chunk's updated shards to every replica. */
static int run_gather(pt_worker *w, const pt_prog_action *a) { return pt_zero_gather(w, a->chunk); }

/* SEQUENCE_SUM: once the replicas' sums are in, the LayerNorms' gradients
 * over the tensor group. */
static int run_sequence_sum(pt_worker *w)
{
    int rc = finish_reduce(w);
    return rc == PT_OK ? pt_coll_sequence_sum(w) : rc;
}

static int run_norm(pt_worker *w)
{
    int rc = finish_reduce(w);
    return rc == PT_OK ? pt_coll_norm(w) : rc;
}

/* STEP: every chunk of the worker with the global norm's clip (unless the
 * norm was not finite: then nothing changes anywhere); STEP CHUNK: that
 * chunk alone, from the gradient since its last update, clipped by the
 * chunk's own norm (a global norm would need every worker at once, which
 * per-micro-batch updates never have); its gradient then starts again from
 * zero. */
static int run_step(pt_worker *w, const pt_prog_action *a)
{
    pt_pipeline *p = w->p;
    if (a->chunk < 0) {
        int rc = finish_reduce(w);
        for (int c = 0; rc == PT_OK && !w->skip && c < p->n_chunks; c++)
            if (pt_sched_holds(p->s, w->rank, c, NULL)) {
                size_t lo = 0, hi = SIZE_MAX; /* sharded: the worker's own shard */
                if (p->zero)
                    pt_zero_own(w, c, &lo, &hi);
                pt_optimizer_step_range(w->opt, w->stage, p->chunk_first[c], p->chunk_last[c], lo,
                                        hi, p->job_step, p->job_lr, w->clip);
            }
        return rc;
    }
    int c = a->chunk, first = p->chunk_first[c], last = p->chunk_last[c];
    pt_weight_stash *st = &w->stash[c];
    double norm = sqrt(pt_optimizer_grad_sq(w->stage, first, last));
    float clip = pt_optimizer_clip_factor(&p->optim, norm);
    pt_optimizer_step(w->opt, w->stage, first, last, w->chunk_updates[c], p->job_lr, clip);
    w->chunk_updates[c]++;
    st->version++;
    memset(st->grad, 0, st->floats * sizeof(float));
    return PT_OK;
}

/* TENSOR_SUM: the tensor group sums what the piece before left (the fold
 * in slice order, the same bits on threads and MPI; under sequence
 * parallelism a reduce-scatter or all-gather of the slices' positions, as
 * the block says), then the next piece
 * of the forward or backward runs; after the last, what follows the whole
 * pass. `ev->ts` is where the sum ends and the piece begins. */
static int sum_then_piece(pt_worker *w, const pt_prog_action *a, const pt_microbatch *batch,
                          bool forward_only, pt_trace_event *ev)
{
    pt_pipeline *p = w->p;
    pt_slot *sl = slot_of(w, a->chunk, a->mb);
    pt_microbatch mb = pt_pipeline_microbatch(p, batch, a->mb);
    pt_action c = {.kind = a->backward ? PT_ACT_B : PT_ACT_F, .chunk = a->chunk, .mb = a->mb};
    int first = p->chunk_first[a->chunk], last = p->chunk_last[a->chunk], piece = a->peer + 1;
    bool is_last = pt_sched_is_last_chunk(p->s, a->chunk);
    if (!sl->acts) {
        char name[32];
        return pt_fail(PT_EDEADLOCK, "worker %d: %s before its compute action", w->rank,
                       pt_prog_action_str(a, name, sizeof name));
    }
    /* under checkpointing a backward's first sums are its recompute's */
    int redo = a->backward ? recompute_sums(w, a->chunk) : 0;
    bool again = a->peer < redo;
    int pass = a->backward && !again, at = again ? a->peer : a->peer - redo;
    piece = at + 1;
    size_t count;
    float *buf = pt_model_tensor_sum_buffer(w->stage, first, last, pass, at, sl->acts, &count);
    pt_group_how how = pt_model_tensor_sum_how(w->stage, first, last, pass, at, mb.batch);
    pt_parts parts = {how.blocks, how.part};
    double t0 = pt_pipeline_now();
    int rc = how.op == PT_GROUP_SCATTER
                 ? pt_transport_reduce_scatter_f32(w->tensor_t, w->tensor_group, p->T, buf, parts)
             : how.op == PT_GROUP_GATHER
                 ? pt_transport_all_gather_f32(w->tensor_t, w->tensor_group, p->T, buf, parts)
                 : pt_transport_allreduce_sum_f32(w->tensor_t, w->tensor_group, p->T, buf, count);
    ev->ts = pt_pipeline_now() - p->step_t0;
    w->tensor_sum_time += pt_pipeline_now() - t0;
    w->tensor_sum_bytes += count * sizeof(float);
    w->tensor_sums[how.op]++;
    w->tensor_how[how.op] = how.op == PT_GROUP_SUM ? (pt_group_how){how.op, 1, count} : how;
    if (rc != PT_OK)
        return rc;
    bool done = piece + 1 == pt_model_tensor_pieces(w->stage, first, last, pass);
    if (again) { /* the recompute's next piece; after its last, the backward's first */
        rc = pt_model_forward_piece(w->stage, first, last, piece, &mb, sl->in, sl->acts, NULL);
        return rc == PT_OK && done ? backward_first_piece(w, &c, &mb) : rc;
    }
    if (!a->backward) {
        float loss = 0.0f;
        rc = pt_model_forward_piece(w->stage, first, last, piece, &mb, sl->in, sl->acts,
                                    is_last && done ? &loss : NULL);
        if (rc == PT_OK && done && is_last)
            w->losses[a->mb] = loss;
        return rc == PT_OK && done ? forward_done(w, &c, forward_only) : rc;
    }
    void *din = sl->din;
    rc = pt_model_backward_input_piece(w->stage, first, last, piece, &mb, sl->in, sl->acts,
                                       is_last ? NULL : sl->gin, din, p->loss_scale);
    if (rc == PT_OK && done) {
        sl->din = NULL;
        backward_input_done(w, &c, din);
    }
    return rc;
}

/* A TENSOR_SUM and the piece after it are one event of the trace, and
 * their time joins the pass's (F or B) without counting a pass. */
static int run_tensor_sum(pt_worker *w, const pt_prog_action *a, const pt_microbatch *batch,
                          bool forward_only)
{
    pt_trace_event *ev = &w->events[w->n_events++];
    *ev = (pt_trace_event){.kind = a->backward ? PT_ACT_B : PT_ACT_F,
                           .chunk = a->chunk,
                           .mb = a->mb,
                           .piece = a->peer + 1,
                           .tb = -1};
    ev->t0 = ev->ts = pt_pipeline_now() - w->p->step_t0;
    int rc = sum_then_piece(w, a, batch, forward_only, ev);
    ev->t1 = pt_pipeline_now() - w->p->step_t0;
    w->chunk_time[a->chunk * 3 + (a->backward ? 1 : 0)] += ev->t1 - ev->t0;
    return rc;
}

/* Returns whatever a failed or forward-only walk left in the slots. */
static void clear_slots(pt_worker *w)
{
    pt_pipeline *p = w->p;
    for (int c = 0; c < p->n_chunks; c++)
        for (int m = 0; m < p->M; m++) {
            pt_slot *sl = slot_of(w, c, m);
            if (sl->in_posted)
                pt_transport_wait(w->t, &sl->in_req);
            if (sl->gin_posted)
                pt_transport_wait(w->t, &sl->gin_req);
            pt_store_give_acts(&w->store, c, sl->acts);
            if (c > 0)
                pt_store_give_buffer(&w->store, c, sl->in);
            if (c + 1 < p->n_chunks)
                pt_store_give_buffer(&w->store, c + 1, sl->gin);
            if (c > 0)
                pt_store_give_buffer(&w->store, c, sl->din);
            memset(sl, 0, sizeof *sl);
        }
}

static int run_compute(pt_worker *w, const pt_prog_action *pa, const pt_microbatch *batch,
                       bool forward_only)
{
    pt_pipeline *p = w->p;
    pt_action a = pt_prog_compute(pa);
    int rc = await_input(w, &a);
    if (rc != PT_OK)
        return rc;
    pt_trace_event *ev = &w->events[w->n_events++];
    *ev = (pt_trace_event){.kind = a.kind, .chunk = a.chunk, .mb = a.mb, .tb = -1};
    ev->t0 = pt_pipeline_now() - p->step_t0;
    switch (a.kind) {
    case PT_ACT_F: rc = run_forward(w, &a, batch, forward_only); break;
    case PT_ACT_B:
    case PT_ACT_BW: rc = run_backward(w, &a, batch, ev); break;
    case PT_ACT_W: rc = run_weight(w, &a, batch); break;
    }
    ev->t1 = pt_pipeline_now() - p->step_t0;
    switch (a.kind) {
    case PT_ACT_F: note_time(w, a.chunk, 0, ev->t1 - ev->t0); break;
    case PT_ACT_B: note_time(w, a.chunk, 1, ev->t1 - ev->t0); break;
    case PT_ACT_W: note_time(w, a.chunk, 2, ev->t1 - ev->t0); break;
    case PT_ACT_BW:
        note_time(w, a.chunk, 1, ev->tb - ev->t0);
        note_time(w, a.chunk, 2, ev->t1 - ev->tb);
        break;
    }
    return rc;
}

/* One row per action kind: what runs it. */
static int dispatch(pt_worker *w, const pt_prog_action *a, const pt_microbatch *batch,
                    bool forward_only)
{
    /* all but a forward and the transfers may write or read the gradients */
    if (w->zero_grads && a->kind != PT_PROG_F && !pt_prog_is_send(a->kind) &&
        !pt_prog_is_recv(a->kind))
        zero_grads(w);
    switch (a->kind) {
    case PT_PROG_F:
    case PT_PROG_B:
    case PT_PROG_W:
    case PT_PROG_BW: return run_compute(w, a, batch, forward_only);
    case PT_PROG_SEND_ACT:
    case PT_PROG_SEND_GRAD: return run_send(w, a);
    case PT_PROG_RECV_ACT:
    case PT_PROG_RECV_GRAD: return post_receive(w, a);
    case PT_PROG_REDUCE: return run_reduce(w, a);
    case PT_PROG_TIED: return run_tied(w, a);
    case PT_PROG_NORM: return run_norm(w);
    case PT_PROG_STEP: return run_step(w, a);
    case PT_PROG_GATHER: return run_gather(w, a);
    case PT_PROG_TENSOR_SUM: return run_tensor_sum(w, a, batch, forward_only);
    case PT_PROG_SEQUENCE_SUM: return run_sequence_sum(w);
    case PT_PROG_SCATTER: return run_scatter(w, a, batch);
    case PT_PROG_N_KINDS: break;
    }
    return pt_fail(PT_EINVAL, "worker %d: an action of unknown kind %d", w->rank, (int)a->kind);
}

/* The actions the trace shows after the compute: what closes a synchronous
 * step. */
static bool closes_step(const pt_prog_action *a)
{
    return a->kind == PT_PROG_TIED || a->kind == PT_PROG_SEQUENCE_SUM || a->kind == PT_PROG_NORM ||
           (a->kind == PT_PROG_STEP && a->chunk < 0) || a->kind == PT_PROG_GATHER;
}

int pt_executor_run(pt_worker *w, const pt_program *prog, const pt_microbatch *batch)
{
    pt_pipeline *p = w->p;
    int n = prog->n_actions[w->rank];
    const pt_prog_action *acts = prog->actions[w->rank];
    bool forward_only = prog->forward_only;
    w->n_events = 0;
    w->n_closing = 0;
    w->tensor_sum_time = 0;
    w->tensor_sum_bytes = 0;
    memset(w->tensor_sums, 0, sizeof w->tensor_sums);
    w->skip = false;
    w->prepare = !forward_only;
    w->zero_grads = false;
    pt_store_restart_samples(&w->store);
    pt_transport_watch(w->t, &w->flight);
    pt_flight_restart(&w->flight);
    memset(w->chunk_time, 0, sizeof(double) * 3 * (size_t)p->n_chunks);
    memset(w->chunk_count, 0, sizeof(int) * 3 * (size_t)p->n_chunks);
    int rc = PT_OK;
    if (!forward_only) {
        if (weight_in_pieces(w))
            pt_zero_clear_grads(w);
        else
            w->zero_grads = true; /* at the first wait, or before what reads them */
        for (int c = 0; w->stash && c < p->n_chunks; c++)
            w->stash[c].version = 0;
        rc = pt_reduce_begin(&w->reduce, w->t);
    }
    w->n_streams = count_streams(w, acts, n);
    if (rc == PT_OK)
        rc = post_ahead(w, acts, n, -1);
    for (int i = 0; rc == PT_OK && i < n; i++) {
        if (pt_prog_is_compute(acts[i].kind) && (rc = post_ahead(w, acts, n, i)) != PT_OK)
            break;
        double t0 = pt_pipeline_now() - p->step_t0;
        rc = dispatch(w, &acts[i], batch, forward_only);
        if (closes_step(&acts[i]))
            w->closing[w->n_closing++] =
                (pt_trace_closing){acts[i], t0, pt_pipeline_now() - p->step_t0};
        if (rc == PT_OK)
            rc = settle_sends(w, false);
        if (rc == PT_OK)
            rc = pt_reduce_progress(&w->reduce);
    }
    if (rc != PT_OK)
        return rc; /* the pipeline aborts the world, then calls pt_executor_reset() */
    return pt_executor_reset(w);
}

int pt_executor_reset(pt_worker *w)
{
    int rc = settle_sends(w, true), r2 = pt_zero_scatter_settle(w);
    rc = rc == PT_OK ? r2 : rc;
    clear_slots(w);
    return rc;
}

/* ---- one micro-batch forward across the stages (generation) ---- */

int pt_executor_probs(pt_worker *w, const pt_microbatch *mb, float *probs)
{
    pt_pipeline *p = w->p;
    int rc = PT_OK;
    if (w->probe_batch != mb->batch) {
        pt_store_free(&w->probe);
        w->probe_batch = 0;
        if ((rc = pt_store_init(&w->probe, w->stage, p->n_chunks, p->chunk_first, p->chunk_last,
                                mb->batch)) != PT_OK)
            return rc;
        w->probe_batch = mb->batch;
    }
    pt_activation_store *st = &w->probe;
    void *in = NULL; /* the input of the chunk about to run, when it is local */
    for (int c = 0; rc == PT_OK && c < p->n_chunks; c++) {
        if (pt_sched_worker_of(p->s, c, 0) != w->rank)
            continue;
        if (c > 0 && !in) {
            int src = pt_sched_worker_of(p->s, c - 1, 0);
            pt_request req;
            if ((rc = pt_store_take_buffer(st, c, &in)) != PT_OK)
                break;
            rc = pt_transport_irecv(w->t, src, tag_of(p, c, 0, DIR_ACT), in,
                                    pt_store_buffer_bytes(st, c), &req);
            if (rc == PT_OK)
                rc = pt_transport_wait(w->t, &req);
            if (rc != PT_OK)
                break;
        }
        pt_activations *acts;
        if ((rc = pt_store_take_acts(st, c, &acts)) != PT_OK)
            break;
        float loss;
        rc = pt_model_forward(w->stage, p->chunk_first[c], p->chunk_last[c], mb, in, acts, &loss);
        if (c > 0)
            pt_store_give_buffer(st, c, in);
        in = NULL;
        const void *out = pt_activations_output(acts);
        if (rc == PT_OK && c == p->n_chunks - 1) {
            w->probs_floats = pt_activations_output_floats(acts);
            memcpy(probs, out, w->probs_floats * sizeof(float));
        } else if (rc == PT_OK) {
            int dst = pt_sched_worker_of(p->s, c + 1, 0);
            if (dst == w->rank) {
                if ((rc = pt_store_take_buffer(st, c + 1, &in)) == PT_OK)
                    memcpy(in, out, pt_store_buffer_bytes(st, c + 1));
            } else {
                pt_request req;
                rc = pt_transport_isend(w->t, dst, tag_of(p, c + 1, 0, DIR_ACT), out,
                                        pt_store_buffer_bytes(st, c + 1), &req);
                if (rc == PT_OK)
                    rc = pt_transport_wait(w->t, &req);
            }
        }
        pt_store_give_acts(st, c, acts);
    }
    return rc;
}
