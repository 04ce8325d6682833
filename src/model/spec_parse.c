/* spec_parse.c: the spec grammar (docs/models.md), text -> pt_layer_list.
 *
 *   spec      := statement { (';' | newline) statement }
 *   statement := 'input' ['tokens'] N {N}    the shape entering the first layer
 *              | layer
 *              | '(' layer { ';' layer } ')'  a group: one layer for a balance
 *   layer     := NAME { NUMBER | NAME '=' NUMBER }
 * '#' starts a comment to the end of the line. Layers are numbered from 1
 * in messages (their position); their parameters are named as PyTorch's
 * nn.Sequential names its modules': "<i>.weight" for the i-th statement
 * counted from 0, "<i>.<j>.weight" for the j-th layer of a group.
 * pt_layers_build (spec.c) checks what the grammar cannot: widths, order. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/spec.h"
#include "tensor/error.h"

typedef struct {
    const char *p;
    int position; /* of the layer being read */
    const pt_model_config *cfg;
} parser;

static void skip_blanks(parser *ps)
{
    for (;;) {
        while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r')
            ps->p++;
        if (*ps->p != '#')
            return;
        while (*ps->p && *ps->p != '\n')
            ps->p++;
    }
}

static int is_separator(char c) { return c == ';' || c == '\n'; }

static void skip_separators(parser *ps)
{
    for (skip_blanks(ps); is_separator(*ps->p); skip_blanks(ps))
        ps->p++;
}

/* A name: letters, digits, '_' and '-', into buf. */
static int read_word(parser *ps, char *buf, size_t n)
{
    size_t len = 0;
    while (isalnum((unsigned char)ps->p[len]) || ps->p[len] == '_' || ps->p[len] == '-')
        len++;
    snprintf(buf, n, "%.*s", (int)len, ps->p);
    ps->p += len;
    return (int)len;
}

static int read_number(parser *ps, int *out)
{
    char *end;
    long v = strtol(ps->p, &end, 10);
    if (end == ps->p || v < -(1L << 30) || v > (1L << 30))
        return -1;
    ps->p = end;
    *out = (int)v;
    return 0;
}

static const pt_layer_type *find_user_type(const pt_model_config *c, const char *name)
{
    for (int i = 0; i < c->n_layer_types && i < PT_SPEC_MAX_TYPES; i++)
        if (c->layer_types[i] && !strcmp(c->layer_types[i]->name, name))
            return c->layer_types[i];
    return NULL;
}

static int unknown_layer(const parser *ps, const char *name)
{
    char known[1024] = "";
    for (const pt_layer_entry *e = pt_layer_table(); e->name; e++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                 e == pt_layer_table() ? "" : ", ", e->name);
    for (int i = 0; i < ps->cfg->n_layer_types; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), ", %s",
                 ps->cfg->layer_types[i]->name);
    return pt_fail(PT_EINVAL, "spec layer %d: unknown layer '%s' (known: %s)", ps->position, name,
                   known);
}

/* The arguments after a table entry's name, by position or name=value. */
static int read_args(parser *ps, pt_layer_item *it)
{
    const pt_layer_entry *e = it->entry;
    char names[PT_LAYER_MAX_ARGS][16], word[32];
    int defaults[PT_LAYER_MAX_ARGS], has_default[PT_LAYER_MAX_ARGS], given[PT_LAYER_MAX_ARGS] = {0};
    int n = pt_layer_arg_names(e, names, defaults, has_default), next = 0;
    for (skip_blanks(ps); *ps->p && !is_separator(*ps->p) && *ps->p != ')'; skip_blanks(ps)) {
        int k = next, v;
        if (isalpha((unsigned char)*ps->p)) {
            read_word(ps, word, sizeof word);
            for (k = 0; k < n && strcmp(names[k], word); k++)
                ;
            if (k == n)
                return pt_fail(PT_EINVAL, "spec layer %d (%s): no argument '%s' (it takes %s)",
                               ps->position, e->name, word, *e->args ? e->args : "none");
            if (*ps->p++ != '=')
                return pt_fail(PT_EINVAL, "spec layer %d (%s): '%s' needs '=' and a number",
                               ps->position, e->name, word);
        } else {
            next++;
        }
        if (k >= n)
            return pt_fail(PT_EINVAL, "spec layer %d (%s): too many arguments (it takes %s)",
                           ps->position, e->name, *e->args ? e->args : "none");
        if (read_number(ps, &v))
            return pt_fail(PT_EINVAL,
                           "spec layer %d (%s): argument %s is not an integer near '%.12s'",
                           ps->position, e->name, names[k], ps->p);
        it->arg[k] = v, given[k] = 1;
    }
    for (int k = 0; k < n; k++) {
        if (!given[k] && !has_default[k])
            return pt_fail(PT_EINVAL, "spec layer %d (%s): missing argument %s (it takes %s)",
                           ps->position, e->name, names[k], e->args);
        if (!given[k])
            it->arg[k] = defaults[k];
    }
    return PT_OK;
}

static int read_statement(parser *ps, pt_layer_item *it, const char *name)
{
    if (it->entry)
        return read_args(ps, it);
    if (!(it->user = find_user_type(ps->cfg, name)))
        return unknown_layer(ps, name);
    skip_blanks(ps);
    if (*ps->p && !is_separator(*ps->p) && *ps->p != ')')
        return pt_fail(PT_EINVAL, "spec layer %d (%s): a user-defined layer takes no arguments",
                       it->position, name);
    return PT_OK;
}

static int read_layer(parser *ps, pt_layer_list *l, int layer, const char *prefix)
{
    char name[48];
    if (!read_word(ps, name, sizeof name))
        return pt_fail(PT_EINVAL, "spec layer %d: expected a layer name near '%.12s'", ps->position,
                       ps->p);
    pt_layer_item *it = pt_layer_list_add(l, name, prefix);
    if (!it)
        return pt_fail(PT_EINVAL, "spec layer %d: more than %d layers", ps->position,
                       PT_MODEL_MAX_BLOCKS);
    it->position = ps->position;
    it->layer = layer;
    int rc = read_statement(ps, it, name);
    ps->position++;
    return rc;
}

static int read_input(parser *ps, pt_layer_list *l)
{
    pt_flow *f = &l->input;
    char word[16];
    skip_blanks(ps);
    if (!strncmp(ps->p, "tokens", 6)) {
        read_word(ps, word, sizeof word);
        f->tokens = 1;
    }
    for (skip_blanks(ps); *ps->p && !is_separator(*ps->p); skip_blanks(ps)) {
        if (f->rank == 3 || read_number(ps, &f->dim[f->rank]) || f->dim[f->rank] < 1)
            return pt_fail(PT_EINVAL,
                           "spec: `input` takes 1 to 3 sizes >= 1 (N, T C or C H W), "
                           "near '%.12s'",
                           ps->p);
        f->rank++;
    }
    if (!f->rank || (f->tokens && f->rank != 1))
        return pt_fail(PT_EINVAL, "spec: `input` needs sizes: N, T C, C H W or tokens T");
    return PT_OK;
}

/* A parenthesised group: its layers share the statement's layer number. */
static int read_group(parser *ps, pt_layer_list *l, int layer)
{
    char prefix[64];
    ps->p++; /* '(' */
    for (int j = 0;; j++) {
        skip_separators(ps);
        if (*ps->p == ')')
            break;
        snprintf(prefix, sizeof prefix, "%d.%d", layer, j);
        int rc = read_layer(ps, l, layer, prefix);
        if (rc != PT_OK)
            return rc;
        skip_blanks(ps);
        if (!*ps->p)
            return pt_fail(PT_EINVAL, "spec: group of layer %d has no ')'", ps->position - 1);
    }
    ps->p++;
    return PT_OK;
}

int pt_spec_parse(const pt_model_config *c, pt_layer_list *l)
{
    parser ps = {.p = c->spec, .position = 1, .cfg = c};
    int rc = pt_layer_list_init(l), layer = 0;
    for (skip_separators(&ps); rc == PT_OK && *ps.p; skip_separators(&ps)) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "%d", layer);
        if (!strncmp(ps.p, "input", 5) && !isalnum((unsigned char)ps.p[5])) {
            ps.p += 5;
            rc = l->n || l->input.rank
                     ? pt_fail(PT_EINVAL, "spec: `input` must come once, before the layers")
                     : read_input(&ps, l);
            continue;
        }
        rc = *ps.p == '(' ? read_group(&ps, l, layer) : read_layer(&ps, l, layer, prefix);
        layer++;
        skip_blanks(&ps);
        if (rc == PT_OK && *ps.p && !is_separator(*ps.p))
            rc = pt_fail(PT_EINVAL, "spec layer %d: unexpected '%c'", ps.position - 1, *ps.p);
    }
    if (rc != PT_OK)
        pt_layer_list_free(l);
    return rc;
}

int pt_spec_build(pt_model *m)
{
    pt_layer_list l;
    int rc = pt_spec_parse(&m->cfg, &l);
    if (rc == PT_OK) {
        rc = pt_layers_build(m, &l);
        pt_layer_list_free(&l);
    }
    return rc;
}

/* ---- configs ---- */

int pt_model_config_spec(const char *text, pt_model_config *out)
{
    pt_model_config c = {.kind = PT_MODEL_SPEC, .seed = 1};
    if (!text || strlen(text) >= sizeof c.spec)
        return pt_fail(PT_EINVAL, "a spec holds at most %zu bytes (got %zu)", sizeof c.spec - 1,
                       text ? strlen(text) : 0);
    memcpy(c.spec, text, strlen(text) + 1);
    *out = c;
    return PT_OK;
}

int pt_model_config_spec_load(const char *path_or_text, pt_model_config *out)
{
    FILE *f = path_or_text ? fopen(path_or_text, "rb") : NULL;
    if (!f)
        return pt_model_config_spec(path_or_text, out);
    char text[PT_SPEC_MAX_TEXT];
    size_t n = fread(text, 1, sizeof text, f);
    int err = ferror(f);
    fclose(f);
    if (err)
        return pt_fail(PT_EIO, "cannot read the spec file %s", path_or_text);
    if (n == sizeof text)
        return pt_fail(PT_EINVAL, "the spec file %s holds more than %zu bytes", path_or_text,
                       sizeof text - 1);
    text[n] = '\0';
    return pt_model_config_spec(text, out);
}

int pt_model_config_add_layer_type(pt_model_config *c, const pt_layer_type *type)
{
    if (!type || !type->name || !isalpha((unsigned char)type->name[0]))
        return pt_fail(PT_EINVAL, "a layer type needs a name starting with a letter");
    if (pt_layer_find(type->name))
        return pt_fail(PT_EINVAL, "layer type '%s' is a built-in layer's name", type->name);
    for (int i = 0; i < c->n_layer_types; i++)
        if (!strcmp(c->layer_types[i]->name, type->name))
            return pt_fail(PT_EINVAL, "layer type '%s' is added twice", type->name);
    if (c->n_layer_types == PT_SPEC_MAX_TYPES)
        return pt_fail(PT_EINVAL, "a config takes at most %d layer types", PT_SPEC_MAX_TYPES);
    c->layer_types[c->n_layer_types++] = type;
    return PT_OK;
}
