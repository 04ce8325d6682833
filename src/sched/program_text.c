/* program_text.c: the text form of a program (program.h): the schedule
 * text format (text.c, docs/schedules.md) with a `program train` or
 * `program eval` header line and the program's tokens (SF0.3>1, RF1.3<0,
 * SB1.3>0, RB0.3<1, R2, T0-3, TM0-3, AF0.3/1, AB0.3/1, L, N, S, S2, G0) on
 * its worker lines.
 * `pipetrain schedule --program` prints it; users may write programs by hand
 * and read them with pt_program_parse(). Printing then parsing gives back
 * the same program (tests/test_program_text.c).
 */
#include <stdlib.h>

#include "sched/program.h"
#include "sched/text.h"
#include "tensor/error.h"

int pt_program_format(const pt_program *p, char **text)
{
    pt_textbuf b = {0};
    char tok[48];
    *text = NULL;
    pt_text_write_header(&b, p->shape->name, p->forward_only ? "eval" : "train",
                         p->shape->n_workers, p->shape->n_chunks, p->shape->n_micro,
                         p->shape->replicas, p->shape->chunk_worker);
    for (int w = 0; w < p->shape->n_workers; w++) {
        pt_textbuf_printf(&b, "%d:", w);
        for (int i = 0; i < p->n_actions[w]; i++)
            pt_textbuf_printf(&b, " %s", pt_prog_action_str(&p->actions[w][i], tok, sizeof tok));
        pt_textbuf_puts(&b, "\n");
    }
    return pt_textbuf_finish(&b, text);
}

int pt_program_parse(const char *text, pt_program **out)
{
    *out = NULL;
    pt_text t;
    int W, C, M, R;
    int rc = pt_text_read(text, &t);
    if (rc == PT_OK)
        rc = pt_text_shape(&t, &W, &C, &M, &R);
    if (rc == PT_OK)
        rc = pt_prog_alloc(W, C, M, R, out);
    if (rc != PT_OK) {
        pt_text_free(&t);
        return rc;
    }
    pt_program *p = *out;
    pt_sched_set_name(p->shape, t.h.name[0] ? t.h.name : "custom");
    p->forward_only = t.h.forward_only;
    pt_text_placement(&t, C, R, p->shape->chunk_worker, p->shape->route);
    for (int i = 0; i < t.n && rc == PT_OK; i++)
        rc = pt_prog_push(p, t.acts[i].worker, t.acts[i].a);
    pt_text_free(&t);
    if (rc != PT_OK) {
        pt_program_destroy(p);
        *out = NULL;
    }
    return rc;
}
