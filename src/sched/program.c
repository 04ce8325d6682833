/* program.c: the program object itself (program.h): building one action at
 * a time (lower.c, the text parser), the placement queries the validator,
 * the simulator and the executor ask (who holds a chunk, who belongs to a
 * collective), the text token of each action, and deep equality for the
 * round-trip tests.
 */
#include "sched/program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"

int pt_prog_alloc(int n_workers, int n_chunks, int n_micro, int replicas, pt_program **out)
{
    *out = NULL;
    pt_program *p = calloc(1, sizeof *p);
    if (!p)
        return pt_fail(PT_ENOMEM, "out of memory for a program");
    int rc = pt_sched_alloc(n_workers, n_chunks, n_micro, replicas, &p->shape);
    if (rc != PT_OK) {
        free(p);
        return rc;
    }
    p->n_actions = calloc((size_t)n_workers, sizeof(int));
    p->cap_actions = calloc((size_t)n_workers, sizeof(int));
    p->actions = calloc((size_t)n_workers, sizeof(pt_prog_action *));
    if (!p->n_actions || !p->cap_actions || !p->actions) {
        pt_program_destroy(p);
        return pt_fail(PT_ENOMEM, "out of memory for a program");
    }
    *out = p;
    return PT_OK;
}

void pt_program_destroy(pt_program *p)
{
    if (!p)
        return;
    if (p->actions)
        for (int w = 0; w < p->shape->n_workers; w++)
            free(p->actions[w]);
    free(p->actions);
    free(p->cap_actions);
    free(p->n_actions);
    pt_schedule_destroy(p->shape);
    free(p);
}

int pt_prog_push(pt_program *p, int w, pt_prog_action a)
{
    if (w < 0 || w >= p->shape->n_workers)
        return pt_fail(PT_EINVAL, "worker %d out of range (0..%d)", w, p->shape->n_workers - 1);
    int rc = pt_sched_grow((void **)&p->actions[w], &p->cap_actions[w], p->n_actions[w], sizeof a);
    if (rc == PT_OK)
        p->actions[w][p->n_actions[w]++] = a;
    return rc;
}

bool pt_prog_is_async(const pt_program *p)
{
    for (int w = 0; w < p->shape->n_workers; w++)
        for (int i = 0; i < p->n_actions[w]; i++) {
            const pt_prog_action *a = &p->actions[w][i];
            if (pt_prog_is_compute(a->kind) && (a->update || a->version >= 0))
                return true;
        }
    return false;
}

/* Adds w to the ascending set members[0..n) unless it is there. */
static int add_member(int *members, int n, int w)
{
    int i = n;
    while (i > 0 && members[i - 1] > w)
        i--;
    if (i > 0 && members[i - 1] == w)
        return n;
    memmove(&members[i + 1], &members[i], (size_t)(n - i) * sizeof(int));
    members[i] = w;
    return n + 1;
}

int pt_prog_group(const pt_program *p, int w, const pt_prog_action *a, int *members)
{
    int n = 0, k = 0;
    switch (a->kind) {
    case PT_PROG_NORM:
        for (int v = 0; v < p->shape->n_workers; v++)
            members[n++] = v;
        return n;
    case PT_PROG_REDUCE:
    case PT_PROG_GATHER:
    case PT_PROG_SCATTER:
        for (k = 0; k < p->shape->replicas && a->chunk >= 0 && a->chunk < p->shape->n_chunks; k++)
            n = add_member(members, n, p->shape->chunk_worker[a->chunk * p->shape->replicas + k]);
        return n;
    case PT_PROG_TIED:
        /* the holders of both chunks in the replica through which w holds one */
        if (!pt_sched_holds(p->shape, w, a->chunk, &k) && !pt_sched_holds(p->shape, w, a->peer, &k))
            return 0;
        n = add_member(members, n, p->shape->chunk_worker[a->chunk * p->shape->replicas + k]);
        return add_member(members, n, p->shape->chunk_worker[a->peer * p->shape->replicas + k]);
    default: return 0;
    }
}

const char *pt_prog_action_str(const pt_prog_action *a, char *buf, size_t n)
{
    if (pt_prog_is_compute(a->kind)) {
        pt_action c = pt_prog_compute(a);
        return pt_sched_action_str(&c, buf, n);
    }
    switch (a->kind) {
    case PT_PROG_SEND_ACT: snprintf(buf, n, "SF%d.%d>%d", a->chunk, a->mb, a->peer); break;
    case PT_PROG_RECV_ACT: snprintf(buf, n, "RF%d.%d<%d", a->chunk, a->mb, a->peer); break;
    case PT_PROG_SEND_GRAD: snprintf(buf, n, "SB%d.%d>%d", a->chunk, a->mb, a->peer); break;
    case PT_PROG_RECV_GRAD: snprintf(buf, n, "RB%d.%d<%d", a->chunk, a->mb, a->peer); break;
    case PT_PROG_REDUCE: snprintf(buf, n, "R%d", a->chunk); break;
    case PT_PROG_TIED: snprintf(buf, n, "T%s%d-%d", a->mean ? "M" : "", a->chunk, a->peer); break;
    case PT_PROG_NORM: snprintf(buf, n, "N"); break;
    case PT_PROG_SEQUENCE_SUM: snprintf(buf, n, "L"); break;
    case PT_PROG_GATHER: snprintf(buf, n, "G%d", a->chunk); break;
    case PT_PROG_SCATTER: snprintf(buf, n, "X%d.%d/%d", a->chunk, a->mb, a->peer); break;
    case PT_PROG_TENSOR_SUM:
        snprintf(buf, n, "A%s%d.%d/%d", a->backward ? "B" : "F", a->chunk, a->mb, a->peer);
        break;
    case PT_PROG_STEP:
        if (a->chunk < 0)
            snprintf(buf, n, "S");
        else
            snprintf(buf, n, "S%d", a->chunk);
        break;
    default: snprintf(buf, n, "?%d", (int)a->kind); break;
    }
    return buf;
}

bool pt_prog_same_collective(const pt_prog_action *x, const pt_prog_action *y)
{
    return x->kind == y->kind && x->chunk == y->chunk && x->peer == y->peer && x->mean == y->mean;
}

static bool same_action(const pt_prog_action *x, const pt_prog_action *y)
{
    return x->kind == y->kind && x->chunk == y->chunk && x->mb == y->mb && x->peer == y->peer &&
           x->version == y->version && x->update == y->update && x->mean == y->mean &&
           x->backward == y->backward;
}

bool pt_prog_equal(const pt_program *a, const pt_program *b)
{
    if (a->forward_only != b->forward_only || !pt_sched_equal(a->shape, b->shape))
        return false;
    for (int w = 0; w < a->shape->n_workers; w++) {
        if (a->n_actions[w] != b->n_actions[w])
            return false;
        for (int i = 0; i < a->n_actions[w]; i++)
            if (!same_action(&a->actions[w][i], &b->actions[w][i]))
                return false;
    }
    return true;
}
