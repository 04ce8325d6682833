/* text.h: the reader and writer shared by the schedule text format (text.c)
 * and the program text format (program_text.c), which is the same format
 * with more tokens and a `program` header line. The reader takes every
 * token either may hold; each parser refuses what is not its own. */
#ifndef PT_SCHED_TEXT_H
#define PT_SCHED_TEXT_H

#include <stdbool.h>

#include "sched/program.h"
#include "sched/textbuf.h"

/* What the header says, before anything can be allocated. */
typedef struct {
    char name[32];
    int workers, chunks, micro, replicas; /* 0 when not given */
    int *place;                           /* as written, n_place entries */
    int n_place, cap_place;
    int place_line;
    int program_line;  /* the `program` line, 0 when absent */
    bool forward_only; /* program eval */
} pt_text_header;

typedef struct {
    int worker, line;
    pt_prog_action a;
} pt_text_action;

typedef struct {
    pt_text_header h;
    pt_text_action *acts; /* every token of the worker lines, in order */
    int n, cap;
    int worker_lines; /* lines of the form WORKER: ... */
} pt_text;

/* The longest text the reader takes: it keeps every count in an int. */
#define PT_TEXT_MAX_BYTES (1 << 28)

/* Reads text into t (pt_text_free() it either way); PT_EFORMAT names the
 * line at fault. */
int pt_text_read(const char *text, pt_text *t);
void pt_text_free(pt_text *t);
/* The sizes the header gives, or the worker lines imply; refuses an action
 * outside them, a place line of the wrong length or naming a worker that
 * does not exist, and sizes beyond what the file can describe: micro-batches
 * x chunks more than its actions (each needs its forward), workers or
 * chunks x replicas more than its actions, place entries and worker lines
 * together. Every size a text implies is so bounded by its length. */
int pt_text_shape(const pt_text *t, int *workers, int *chunks, int *micro, int *replicas);
/* Placement from the place line (as pt_sched_alloc() when absent) and each
 * micro-batch's replica from the worker its compute actions sit on: of the
 * chunk's holders with such an action, the lowest-numbered, so the route
 * does not depend on the order of the lines (printing keeps it). */
void pt_text_placement(const pt_text *t, int chunks, int replicas, int *chunk_worker, int *route);
/* The header lines; program is NULL for a schedule, else "train" or "eval". */
void pt_text_write_header(pt_textbuf *b, const char *name, const char *program, int workers,
                          int chunks, int micro, int replicas, const int *chunk_worker);

#endif
