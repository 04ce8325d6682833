/* published_runs.c: reads the published-runs file (plan/published.h) that
 * `pipetrain plan --check` replays and the tests hold the planner to.
 *
 * The file is JSON. Each run is an object of fields; each field is a pair
 * [value, "source"] naming the paper, table and row (or script) the value
 * was read from, so no number enters the checks without its provenance:
 *   {"zero_bubble": {"rows": [{"model": "1.5B", "layers": [22, "..."], ...,
 *                              "bubble": {"1f1b": [0.2431, "..."], ...}}]},
 *    "megatron": {"rows": [{"model": "1.7B", "hidden": [2304, "..."], ...}]}}
 * A field without a source, a value of the wrong type, a missing required
 * field or an unknown schedule is refused with the row and field named. */
#include "io/published_runs.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tensor/error.h"

void pt_published_free(pt_published *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n_strings; i++)
        free(p->strings[i]);
    free(p->strings);
    free(p->zb);
    free(p->megatron);
    free(p);
}

typedef struct {
    const char *path;
    pt_published *p;
    const char *table; /* "zero_bubble" or "megatron", for messages */
    int row;
} reader;

static const char *keep(reader *r, const char *s)
{
    char **more = realloc(r->p->strings, (size_t)(r->p->n_strings + 1) * sizeof *more);
    char *copy = strdup(s);
    if (!more || !copy) {
        free(copy);
        if (more)
            r->p->strings = more;
        return NULL;
    }
    r->p->strings = more;
    r->p->strings[r->p->n_strings] = copy;
    r->p->n_strings++;
    return copy;
}

/* Words a field may hold instead of a number, and the number they stand for. */
static const struct {
    const char *word;
    double value;
} words[] = {{"full", 1}, {"none", 0}, {"overlapped", 1}, {"after backward", 0}};

/* v is [value, "source"]: fills *out. */
static int cited(reader *r, const pt_json *v, const char *key, pt_cited *out)
{
    if (!v || v->type != PT_JSON_ARRAY || v->n != 2 || v->items[1]->type != PT_JSON_STRING ||
        (v->items[0]->type != PT_JSON_NUMBER && v->items[0]->type != PT_JSON_STRING))
        return pt_fail(PT_EFORMAT,
                       "%s: %s row %d, \"%s\": expected [value, \"source\"] (the paper, table "
                       "and row the value was read from)",
                       r->path, r->table, r->row + 1, key);
    const pt_json *x = v->items[0];
    double value = x->number;
    if (x->type == PT_JSON_STRING) {
        size_t i = 0, n = sizeof words / sizeof words[0];
        while (i < n && strcmp(x->string, words[i].word))
            i++;
        if (i == n)
            return pt_fail(PT_EFORMAT, "%s: %s row %d, \"%s\": unknown value \"%s\"", r->path,
                           r->table, r->row + 1, key, x->string);
        value = words[i].value;
    }
    out->value = value;
    out->source = keep(r, v->items[1]->string);
    return out->source ? PT_OK : pt_fail(PT_ENOMEM, "%s: out of memory", r->path);
}

typedef struct {
    const char *key;
    size_t offset; /* of a pt_cited in the row struct */
    int required;
} field;

static int read_fields(reader *r, const pt_json *row, const field *f, int n, void *dst)
{
    for (int i = 0; i < n; i++) {
        const pt_json *v = pt_json_get(row, f[i].key);
        if (!v && !f[i].required)
            continue;
        if (!v)
            return pt_fail(PT_EFORMAT, "%s: %s row %d has no \"%s\"", r->path, r->table, r->row + 1,
                           f[i].key);
        int rc = cited(r, v, f[i].key, (pt_cited *)((char *)dst + f[i].offset));
        if (rc != PT_OK)
            return rc;
    }
    return PT_OK;
}

/* An object {schedule name: [value, "source"]} into by_schedule[]. */
static int read_by_schedule(reader *r, const pt_json *row, const char *key, pt_cited *by_schedule)
{
    const pt_json *o = pt_json_get(row, key);
    if (!o)
        return PT_OK;
    if (o->type != PT_JSON_OBJECT)
        return pt_fail(PT_EFORMAT, "%s: %s row %d, \"%s\": expected an object of schedules",
                       r->path, r->table, r->row + 1, key);
    for (size_t i = 0; i < o->n; i++) {
        int k = 0;
        while (k < PT_ZB_N_SCHEDULES && strcmp(o->keys[i], pt_zb_schedule_names[k]))
            k++;
        if (k == PT_ZB_N_SCHEDULES)
            return pt_fail(PT_EFORMAT, "%s: %s row %d, \"%s\": unknown schedule \"%s\"", r->path,
                           r->table, r->row + 1, key, o->keys[i]);
        int rc = cited(r, o->items[i], o->keys[i], &by_schedule[k]);
        if (rc != PT_OK)
            return rc;
    }
    return PT_OK;
}

static void read_name(const pt_json *row, char *name, size_t n)
{
    const pt_json *m = pt_json_get(row, "model");
    snprintf(name, n, "%s", m && m->type == PT_JSON_STRING ? m->string : "?");
}

#define ZB(f, req)                            \
    {                                         \
#f, offsetof(pt_published_zb, f), req \
    }
static const field zb_fields[] = {
    ZB(layers, 1),           ZB(heads, 1),        ZB(hidden, 1), ZB(seq, 1), ZB(stages, 1),
    ZB(micro_batch_size, 1), ZB(microbatches, 1), ZB(t_f, 1),    ZB(t_b, 1), ZB(t_w, 1),
    ZB(t_comm, 1),
};
#undef ZB

#define MG(f, key, req)                              \
    {                                                \
        key, offsetof(pt_published_megatron, f), req \
    }
static const field megatron_fields[] = {
    MG(params_billion, "params_billion", 0),
    MG(heads, "heads", 1),
    MG(hidden, "hidden", 1),
    MG(layers, "layers", 1),
    MG(tensor, "tensor", 1),
    MG(pipeline, "pipeline", 1),
    MG(gpus, "gpus", 1),
    MG(batch, "batch", 1),
    MG(tflops_per_gpu, "tflops_per_gpu", 1),
    MG(peak_percent, "peak_percent", 0),
    MG(micro_batch_size, "micro_batch_size", 1),
    MG(layers_per_virtual_stage, "layers_per_virtual_stage", 0),
    MG(seq, "seq", 1),
    MG(vocab, "vocab", 1),
    MG(recompute, "recompute", 1),
    MG(overlapped_dp_reduce, "data_parallel_reduce", 1),
};
#undef MG

/* One row of a table into rows[i]. */
typedef int (*row_reader)(reader *r, const pt_json *row, void *rows, int i);

static int zb_row(reader *r, const pt_json *row, void *rows, int i)
{
    pt_published_zb *z = (pt_published_zb *)rows + i;
    read_name(row, z->model, sizeof z->model);
    int rc = read_fields(r, row, zb_fields, sizeof zb_fields / sizeof zb_fields[0], z);
    if (rc == PT_OK)
        rc = read_by_schedule(r, row, "bubble", z->bubble);
    if (rc == PT_OK)
        rc = read_by_schedule(r, row, "samples_per_gpu_per_s", z->samples_per_gpu_s);
    if (rc == PT_OK)
        rc = read_by_schedule(r, row, "memory_gb", z->memory_gb);
    if (rc == PT_OK && (z->stages.value < 1 || z->microbatches.value < 1 || z->t_f.value <= 0 ||
                        z->t_b.value <= 0 || z->t_w.value < 0 || z->t_comm.value < 0))
        rc = pt_fail(PT_EFORMAT,
                     "%s: zero_bubble row %d: stages and micro-batches must be at least 1 and "
                     "the times positive",
                     r->path, i + 1);
    return rc;
}

static int megatron_row(reader *r, const pt_json *row, void *rows, int i)
{
    pt_published_megatron *m = (pt_published_megatron *)rows + i;
    read_name(row, m->model, sizeof m->model);
    return read_fields(r, row, megatron_fields, sizeof megatron_fields / sizeof megatron_fields[0],
                       m);
}

/* The "megatron" table's cluster: its device and links. */
static int read_cluster(reader *r, const pt_json *root)
{
    const pt_json *t = pt_json_get(root, "megatron");
    if (!t)
        return PT_OK;
    static const field fields[] = {
        {"peak_tflops", offsetof(pt_published_cluster, peak_tflops), 1},
        {"devices_per_node", offsetof(pt_published_cluster, devices_per_node), 1},
        {"intra_node_gbs", offsetof(pt_published_cluster, intra_node_gbs), 1},
        {"inter_node_gbs", offsetof(pt_published_cluster, inter_node_gbs), 1},
    };
    pt_published_cluster *c = &r->p->megatron_cluster;
    r->table = "megatron";
    r->row = -1;
    const pt_json *d = pt_json_get(t, "device");
    if (!d || d->type != PT_JSON_ARRAY || d->n != 2 || d->items[0]->type != PT_JSON_STRING)
        return pt_fail(PT_EFORMAT, "%s: \"megatron\" needs \"device\": [\"name\", \"source\"]",
                       r->path);
    snprintf(c->device, sizeof c->device, "%s", d->items[0]->string);
    return read_fields(r, t, fields, sizeof fields / sizeof fields[0], c);
}

/* Table `name`'s rows (none when the file has no such table) into *out, an
 * array of *n rows of `size` bytes each that the caller frees. */
static int read_table(reader *r, const pt_json *root, const char *name, size_t size,
                      row_reader each, void **out, int *n)
{
    const pt_json *t = pt_json_get(root, name);
    *out = NULL, *n = 0;
    if (!t)
        return PT_OK;
    const pt_json *list = pt_json_get(t, "rows");
    if (!list || list->type != PT_JSON_ARRAY)
        return pt_fail(PT_EFORMAT, "%s: \"%s\" needs an array \"rows\"", r->path, name);
    r->table = name;
    void *rows = calloc(list->n ? list->n : 1, size);
    if (!rows)
        return pt_fail(PT_ENOMEM, "%s: out of memory", r->path);
    int rc = PT_OK;
    for (size_t i = 0; i < list->n && rc == PT_OK; i++) {
        r->row = (int)i;
        rc = each(r, list->items[i], rows, (int)i);
    }
    *out = rows, *n = (int)list->n;
    return rc;
}

int pt_published_load(const char *path, pt_published **out)
{
    *out = NULL;
    pt_json *root;
    int rc = pt_json_load(path, 0, &root);
    if (rc != PT_OK)
        return rc;
    reader r = {.path = path, .p = calloc(1, sizeof(pt_published))};
    if (!r.p)
        rc = pt_fail(PT_ENOMEM, "%s: out of memory", path);
    void *rows;
    if (rc == PT_OK)
        rc = read_cluster(&r, root);
    if (rc == PT_OK) {
        rc =
            read_table(&r, root, "zero_bubble", sizeof(pt_published_zb), zb_row, &rows, &r.p->n_zb);
        r.p->zb = rows;
    }
    if (rc == PT_OK) {
        rc = read_table(&r, root, "megatron", sizeof(pt_published_megatron), megatron_row, &rows,
                        &r.p->n_megatron);
        r.p->megatron = rows;
    }
    if (rc == PT_OK && r.p->n_zb + r.p->n_megatron == 0)
        rc = pt_fail(PT_EFORMAT, "%s: no runs (no \"zero_bubble\" or \"megatron\" rows)", path);
    pt_json_free(root);
    if (rc != PT_OK) {
        pt_published_free(r.p);
        return rc;
    }
    *out = r.p;
    return PT_OK;
}
