/* activation_store.c: a pipeline worker's memory for micro-batches in flight.
 *
 * Two kinds of things live from one action to a later one:
 *   activation records  everything a chunk's forward keeps for its backward
 *                       (pt_activations), one per (chunk, micro-batch) in
 *                       flight, or one per recomputation with checkpointing;
 *                       and their backward parts (the gradients the weight
 *                       pass reads), one per micro-batch between its B and
 *                       its W, attached to the record at B; and the LM
 *                       head's output, attached with the record and given
 *                       back at the end of B (model.h);
 *   boundary buffers    the tensor crossing the boundary into chunk c: its
 *                       input activation (kept until its last backward piece)
 *                       and the gradient going back (kept until sent).
 * Both come from free lists per chunk, filled up front by pt_store_reserve()
 * (the executor sizes them by walking its action list) and grown only if a
 * schedule needs more. The store counts the bytes taken and not yet given
 * back: its peak is the figure the memory tests and the planner read.
 * Called by executor.c; one store per worker, used by that worker only. */
#include <stdlib.h>
#include <string.h>

#include "runtime/pipeline_internal.h"
#include "tensor/arena.h"
#include "tensor/error.h"

static int grow(void ***list, int *cap, int need)
{
    if (need <= *cap)
        return PT_OK;
    int n = *cap ? *cap * 2 : 8;
    while (n < need)
        n *= 2;
    void **l = realloc(*list, sizeof(void *) * (size_t)n);
    if (!l)
        return pt_fail(PT_ENOMEM, "cannot grow a pool's free list");
    *list = l;
    *cap = n;
    return PT_OK;
}

int pt_store_init(pt_activation_store *s, pt_model *m, int n_chunks, const int *chunk_first,
                  const int *chunk_last, int batch)
{
    memset(s, 0, sizeof *s);
    s->m = m;
    s->batch = batch;
    s->n_chunks = n_chunks;
    s->acts = calloc((size_t)n_chunks, sizeof *s->acts);
    s->grads = calloc((size_t)n_chunks, sizeof *s->grads);
    s->boundary = calloc((size_t)n_chunks, sizeof *s->boundary);
    s->outputs = calloc((size_t)n_chunks, sizeof *s->outputs);
    if (!s->acts || !s->grads || !s->boundary || !s->outputs)
        return pt_fail(PT_ENOMEM, "cannot allocate an activation store");
    for (int c = 0; c < n_chunks; c++) {
        s->acts[c].first = chunk_first[c];
        s->acts[c].last = chunk_last[c];
        s->outputs[c].bytes = pt_model_output_part_bytes(m, chunk_first[c], chunk_last[c], batch);
        s->boundary[c].bytes = c == 0 ? 0
                                      : (size_t)batch *
                                            (size_t)pt_model_block_input_floats(m, chunk_first[c]) *
                                            pt_model_activation_size(m);
    }
    return PT_OK;
}

void pt_store_free(pt_activation_store *s)
{
    for (int c = 0; s->acts && c < s->n_chunks; c++) {
        for (int i = 0; i < s->acts[c].n_free; i++)
            pt_activations_destroy(s->acts[c].free[i]);
        free(s->acts[c].free);
    }
    for (int c = 0; s->grads && c < s->n_chunks; c++) {
        for (int i = 0; i < s->grads[c].n_free; i++)
            pt_grad_record_destroy(s->grads[c].free[i]);
        free(s->grads[c].free);
    }
    for (int c = 0; s->boundary && c < s->n_chunks; c++) {
        for (int i = 0; i < s->boundary[c].n_free; i++)
            pt_free(s->boundary[c].free[i]);
        free(s->boundary[c].free);
    }
    for (int c = 0; s->outputs && c < s->n_chunks; c++) {
        for (int i = 0; i < s->outputs[c].n_free; i++)
            pt_free(s->outputs[c].free[i]);
        free(s->outputs[c].free);
    }
    free(s->acts);
    free(s->grads);
    free(s->boundary);
    free(s->outputs);
    free(s->samples);
    memset(s, 0, sizeof *s);
}

static int new_record(pt_activation_store *s, int c)
{
    pt_acts_pool *ap = &s->acts[c];
    int rc = grow((void ***)&ap->free, &ap->cap, ap->n_alloc + 1);
    pt_activations *a;
    if (rc == PT_OK)
        rc = pt_activations_create_forward(s->m, ap->first, ap->last, s->batch, &a);
    if (rc != PT_OK)
        return rc;
    ap->bytes = pt_activations_bytes(a);
    ap->free[ap->n_free++] = a;
    ap->n_alloc++;
    return PT_OK;
}

static int new_grads(pt_activation_store *s, int c)
{
    pt_grads_pool *gp = &s->grads[c];
    int rc = grow((void ***)&gp->free, &gp->cap, gp->n_alloc + 1);
    pt_grad_record *g;
    if (rc == PT_OK)
        rc = pt_grad_record_create(s->m, s->acts[c].first, s->acts[c].last, s->batch, &g);
    if (rc != PT_OK)
        return rc;
    gp->bytes = pt_grad_record_bytes(g);
    gp->free[gp->n_free++] = g;
    gp->n_alloc++;
    return PT_OK;
}

static void count(pt_activation_store *s, size_t bytes, int sign, int records);

static int new_buffer(pt_buffer_pool *fp)
{
    int rc = grow(&fp->free, &fp->cap, fp->n_alloc + 1);
    if (rc != PT_OK)
        return rc;
    void *b = pt_alloc_floats(pt_arena_floats_for(fp->bytes));
    if (!b)
        return pt_fail(PT_ENOMEM, "cannot allocate a %zu-byte buffer", fp->bytes);
    fp->free[fp->n_free++] = b;
    fp->n_alloc++;
    return PT_OK;
}

static int reserve_buffers(pt_buffer_pool *fp, int n)
{
    int rc = PT_OK;
    while (rc == PT_OK && fp->n_alloc < n)
        rc = new_buffer(fp);
    return rc;
}

static int take_buffer(pt_activation_store *s, pt_buffer_pool *fp, void **out)
{
    if (fp->n_free == 0) {
        int rc = new_buffer(fp);
        if (rc != PT_OK)
            return rc;
    }
    *out = fp->free[--fp->n_free];
    count(s, fp->bytes, +1, 0);
    return PT_OK;
}

static void give_buffer(pt_activation_store *s, pt_buffer_pool *fp, void *buf)
{
    if (!buf)
        return;
    fp->free[fp->n_free++] = buf;
    count(s, fp->bytes, -1, 0);
}

int pt_store_reserve(pt_activation_store *s, const bool *own, const int *records,
                     const int *grad_records, const int *outputs, int buffers)
{
    for (int c = 0; c < s->n_chunks; c++) {
        if (!own[c])
            continue;
        while (s->acts[c].n_alloc < records[c]) {
            int rc = new_record(s, c);
            if (rc != PT_OK)
                return rc;
        }
        while (s->grads[c].n_alloc < grad_records[c]) {
            int rc = new_grads(s, c);
            if (rc != PT_OK)
                return rc;
        }
        if (s->outputs[c].bytes) {
            int rc = reserve_buffers(&s->outputs[c], outputs[c]);
            if (rc != PT_OK)
                return rc;
        }
        for (int k = 0; k < 2; k++) { /* the input of c and the boundary after it */
            int b = c + k;
            int rc = b < 1 || b >= s->n_chunks ? PT_OK : reserve_buffers(&s->boundary[b], buffers);
            if (rc != PT_OK)
                return rc;
        }
    }
    return PT_OK;
}

static void count(pt_activation_store *s, size_t bytes, int sign, int records)
{
    if (sign > 0) {
        s->live_bytes += bytes;
        if (s->live_bytes > s->peak_bytes)
            s->peak_bytes = s->live_bytes;
    } else {
        s->live_bytes -= bytes;
    }
    s->live_records += sign * records;
    if (s->samples && s->n_samples < s->cap_samples)
        s->samples[s->n_samples++] =
            (pt_store_sample){pt_pipeline_now(), s->live_bytes, s->live_records};
}

int pt_store_keep_samples(pt_activation_store *s, int cap)
{
    free(s->samples);
    s->samples = calloc((size_t)(cap > 0 ? cap : 1), sizeof *s->samples);
    s->cap_samples = s->samples ? cap : 0;
    s->n_samples = 0;
    return s->samples ? PT_OK : pt_fail(PT_ENOMEM, "cannot allocate the store's counters");
}

void pt_store_restart_samples(pt_activation_store *s)
{
    s->n_samples = 0;
    if (s->samples && s->cap_samples > 0) /* where the step starts */
        s->samples[s->n_samples++] =
            (pt_store_sample){pt_pipeline_now(), s->live_bytes, s->live_records};
}

int pt_store_take_acts(pt_activation_store *s, int c, pt_activations **out)
{
    pt_acts_pool *ap = &s->acts[c];
    if (ap->n_free == 0) {
        int rc = new_record(s, c);
        if (rc != PT_OK)
            return rc;
    }
    pt_activations *a = ap->free[--ap->n_free];
    void *output = NULL;
    if (s->outputs[c].bytes) {
        int rc = take_buffer(s, &s->outputs[c], &output);
        if (rc != PT_OK) {
            ap->n_free++;
            return rc;
        }
        pt_activations_attach_output(a, output);
    }
    count(s, ap->bytes, +1, 1);
    *out = a;
    return PT_OK;
}

void pt_store_release_output(pt_activation_store *s, int c, pt_activations *a)
{
    give_buffer(s, &s->outputs[c], pt_activations_detach_output(a));
}

void pt_store_give_acts(pt_activation_store *s, int c, pt_activations *a)
{
    if (!a)
        return;
    pt_store_release_output(s, c, a);
    pt_grad_record *g = pt_activations_detach_grads(a);
    if (g) {
        pt_grads_pool *gp = &s->grads[c];
        gp->free[gp->n_free++] = g;
        count(s, gp->bytes, -1, 0);
    }
    pt_acts_pool *ap = &s->acts[c];
    ap->free[ap->n_free++] = a; /* never more than n_alloc: the list has room */
    count(s, ap->bytes, -1, 1);
}

int pt_store_attach_grads(pt_activation_store *s, int c, pt_activations *a)
{
    if (pt_activations_grads(a))
        return PT_OK;
    pt_grads_pool *gp = &s->grads[c];
    if (gp->n_free == 0) {
        int rc = new_grads(s, c);
        if (rc != PT_OK)
            return rc;
    }
    pt_activations_attach_grads(a, gp->free[--gp->n_free]);
    count(s, gp->bytes, +1, 0);
    return PT_OK;
}

int pt_store_take_buffer(pt_activation_store *s, int b, void **out)
{
    return take_buffer(s, &s->boundary[b], out);
}

void pt_store_give_buffer(pt_activation_store *s, int b, void *buf)
{
    give_buffer(s, &s->boundary[b], buf);
}

size_t pt_store_buffer_bytes(const pt_activation_store *s, int b) { return s->boundary[b].bytes; }

size_t pt_store_allocated_bytes(const pt_activation_store *s)
{
    size_t bytes = 0;
    for (int c = 0; s->acts && c < s->n_chunks; c++)
        bytes += (size_t)s->acts[c].n_alloc * s->acts[c].bytes +
                 (size_t)s->grads[c].n_alloc * s->grads[c].bytes;
    for (int c = 0; s->boundary && c < s->n_chunks; c++)
        bytes += ((size_t)s->boundary[c].n_alloc * pt_arena_floats_for(s->boundary[c].bytes) +
                  (size_t)s->outputs[c].n_alloc * pt_arena_floats_for(s->outputs[c].bytes)) *
                 sizeof(float);
    return bytes;
}
