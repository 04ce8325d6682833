/* transport_slice.c: one tensor slice's view of a world of P x T ranks
 * (tensor parallelism, docs/layouts.md). Rank r of the world is slice
 * r mod T of pipeline worker r / T (tensor groups innermost), so the T
 * slices of a worker run the same lowered program against T views: in
 * view t, worker w is world rank w T + t. The executor talks to its view
 * as to any transport and never learns about the slices; the tensor
 * group's own sums go to the world endpoint underneath (the executor's
 * TENSOR_SUM actions). Called by the pipeline (pipeline.c) when it builds
 * a worker's endpoints. */
#include <stdlib.h>

#include "comm/transport.h"
#include "tensor/error.h"

typedef struct {
    pt_transport *base;
    int T, t;
    int *group; /* scratch: a collective's group in world ranks */
} slice_view;

static slice_view *view_of(pt_transport *t) { return t->impl; }

static int world_rank(const slice_view *v, int worker) { return worker * v->T + v->t; }

/* the view's count of bytes in flight is the world endpoint's */
static pt_transport *base_of(pt_transport *t)
{
    slice_view *v = view_of(t);
    v->base->watch = t->watch;
    v->base->timeout_s = t->timeout_s;
    return v->base;
}

static int slice_isend(pt_transport *t, int peer, int tag, const void *buf, size_t bytes,
                       pt_request *req)
{
    return pt_transport_isend(base_of(t), world_rank(view_of(t), peer), tag, buf, bytes, req);
}

static int slice_irecv(pt_transport *t, int peer, int tag, void *buf, size_t bytes, pt_request *req)
{
    return pt_transport_irecv(base_of(t), world_rank(view_of(t), peer), tag, buf, bytes, req);
}

static int slice_wait(pt_transport *t, pt_request *req)
{
    return pt_transport_wait(base_of(t), req);
}

static int slice_test(pt_transport *t, pt_request *req, int *done)
{
    return pt_transport_test(base_of(t), req, done);
}

/* The group in world ranks, in v->group. */
static int world_group(pt_transport *t, const int *group, int n)
{
    slice_view *v = view_of(t);
    if (n > t->size)
        return pt_fail(PT_EINVAL, "a group of %d in a view of %d workers", n, t->size);
    for (int i = 0; i < n; i++)
        v->group[i] = world_rank(v, group[i]);
    return PT_OK;
}

static int slice_allreduce(pt_transport *t, const int *group, int n, float *buf, size_t count)
{
    int rc = world_group(t, group, n);
    return rc ? rc : pt_transport_allreduce_sum_f32(base_of(t), view_of(t)->group, n, buf, count);
}

static int slice_reduce_scatter(pt_transport *t, const int *group, int n, float *buf,
                                pt_parts parts)
{
    int rc = world_group(t, group, n);
    return rc ? rc : pt_transport_reduce_scatter_f32(base_of(t), view_of(t)->group, n, buf, parts);
}

static int slice_all_gather(pt_transport *t, const int *group, int n, float *buf, pt_parts parts)
{
    int rc = world_group(t, group, n);
    return rc ? rc : pt_transport_all_gather_f32(base_of(t), view_of(t)->group, n, buf, parts);
}

static int slice_barrier(pt_transport *t) { return pt_transport_barrier(base_of(t)); }

static void slice_abort(pt_transport *t, const char *reason)
{
    pt_transport_abort(base_of(t), reason);
}

static void slice_destroy(pt_transport *t)
{
    slice_view *v = view_of(t);
    free(v->group);
    free(v);
    free((void *)t->ops);
    free(t);
}

static const pt_transport_ops slice_ops = {
    .name = NULL, /* set from the world's below: "threads" or "mpi" */
    .isend = slice_isend,
    .irecv = slice_irecv,
    .wait = slice_wait,
    .test = slice_test,
    .allreduce_sum_f32 = slice_allreduce,
    .reduce_scatter_f32 = slice_reduce_scatter,
    .all_gather_f32 = slice_all_gather,
    .barrier = slice_barrier,
    .abort = slice_abort,
    .destroy = slice_destroy,
};

int pt_transport_slice_create(pt_transport *base, int T, pt_transport **out)
{
    *out = NULL;
    if (T < 1 || base->size % T)
        return pt_fail(PT_EINVAL, "a world of %d ranks has no slices of %d", base->size, T);
    pt_transport *t = calloc(1, sizeof *t);
    slice_view *v = calloc(1, sizeof *v);
    pt_transport_ops *ops = calloc(1, sizeof *ops);
    if (v)
        v->group = calloc((size_t)(base->size / T), sizeof(int));
    if (!t || !v || !ops || !v->group) {
        free(v ? v->group : NULL);
        free(t), free(v), free(ops);
        return pt_fail(PT_ENOMEM, "cannot allocate a tensor slice's endpoint");
    }
    *ops = slice_ops;
    ops->name = base->ops->name;
    v->base = base, v->T = T, v->t = base->rank % T;
    t->ops = ops;
    t->rank = base->rank / T;
    t->size = base->size / T;
    t->timeout_s = base->timeout_s;
    t->impl = v;
    *out = t;
    return PT_OK;
}
