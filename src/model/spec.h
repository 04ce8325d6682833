/* spec.h: a model as a list of layers, the one description every model is
 * built from. The spec grammar (spec_parse.c) and the gpt and mlp builders
 * (gpt.c, mlp.c) fill a pt_layer_list; pt_layers_build (spec.c) checks that
 * each layer's widths chain into the next and appends its block to the
 * model, reading the layer table: one entry per kind of layer. */
#ifndef PT_MODEL_SPEC_H
#define PT_MODEL_SPEC_H

#include "model/model.h"

#define PT_LAYER_MAX_ARGS 8

/* What flows between two layers, per sample: a tensor of rank 1 (a vector
 * (n)), 2 (a sequence (T, C)) or 3 (an image (C, H, W)), or, when tokens is
 * set, dim[0] token ids (what an embedding reads). Rank 0: not known yet
 * (no `input` line: the first layer's arguments say). */
typedef struct {
    int tokens;
    int rank;
    int dim[3];
} pt_flow;

/* Floats per sample; the last dimension; the product of the others. */
int pt_flow_floats(const pt_flow *f);
int pt_flow_width(const pt_flow *f);
int pt_flow_rows(const pt_flow *f);

typedef enum {
    PT_ROLE_BODY,  /* anywhere but last */
    PT_ROLE_INPUT, /* reads the micro-batch's tokens: first only */
    PT_ROLE_LOSS   /* a head that computes the loss: last only, and last there */
} pt_layer_role;

typedef struct pt_layer_entry pt_layer_entry;

/* One layer of a list: a table entry (or a user-defined type) and its
 * arguments, where it stood in the text, and the names of its parameters. */
typedef struct {
    const pt_layer_entry *entry; /* NULL for a user-defined type */
    const pt_layer_type *user;
    int arg[PT_LAYER_MAX_ARGS];
    pt_block_shape base; /* fields a builder sets beyond the arguments (gpt.c) */
    int position;        /* its statement's number in the text, from 1 (messages) */
    int layer;           /* the user's layer it counts as for a balance */
    char prefix[64];     /* stem of its parameters' names */
} pt_layer_item;

typedef struct {
    int n;
    pt_layer_item *item; /* PT_MODEL_MAX_BLOCKS of them */
    pt_flow input;       /* declared by `input`, or rank 0 to take the first layer's */
} pt_layer_list;

/* A kind of layer: one row of the table in spec.c.
 *   args: the argument names in order, a default after '=' ("in out bias=1");
 *         a spec gives them by position or as name=value.
 *   chain: checks the arguments against the flow entering, fills the
 *         block's shape and the flow leaving; returns 0, or -1 with what
 *         does not fit in why (the caller names the layer and position).
 *   init: fills the block (pt_block_ops, shape, parameter declarations),
 *         its parameters named under prefix. */
struct pt_layer_entry {
    const char *name;
    const char *args;
    pt_layer_role role;
    int (*chain)(const int *arg, const pt_flow *in, pt_block_shape *s, pt_flow *out, char *why,
                 size_t n);
    void (*init)(pt_block *b, const pt_block_shape *s, const char *prefix);
    const char *doc; /* shapes, for `pipetrain train --help` and docs/models.md */
    int variant;     /* the activation entries: their pt_activation */
};

const pt_layer_entry *pt_layer_find(const char *name);
/* The table, NULL-name-terminated. */
const pt_layer_entry *pt_layer_table(void);
/* The names and defaults of an entry's arguments (has_default[i] 0: must
 * be given); returns their count. */
int pt_layer_arg_names(const pt_layer_entry *e, char names[][16], int *defaults, int *has_default);

int pt_layer_list_init(pt_layer_list *l);
void pt_layer_list_free(pt_layer_list *l);
/* Appends a layer of a table entry by name (gpt.c, mlp.c); NULL when full. */
pt_layer_item *pt_layer_list_add(pt_layer_list *l, const char *name, const char *prefix);

/* Parses spec text into l (spec_parse.c), the config's user-defined types
 * resolving names the table does not know. Messages name the layer and its
 * position. */
int pt_spec_parse(const pt_model_config *c, pt_layer_list *l);

/* Appends each layer's block to m after checking the chain; records the
 * user's layers and what the model reads and compares against. */
int pt_layers_build(pt_model *m, const pt_layer_list *l);

#endif
