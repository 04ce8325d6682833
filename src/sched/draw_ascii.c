/* draw_ascii.c: the text picture of a simulated schedule that `pipetrain
 * schedule` prints: one row per worker, one column per time unit, each
 * action's label in the column where it starts and "--" over the rest of its
 * length, ".." where the worker idles:
 *
 *   worker 0: F0 F1 F2 F3 .. .. .. .. .. .. B0 -- B1 -- B2 -- B3 --
 *
 * A label is the kind (F, B for a B or fused BW, W) and the micro-batch; when
 * some worker holds several chunks the chunk comes first: F1.3 is chunk 1's
 * forward of micro-batch 3. The time unit is the shortest action's length,
 * so unit costs give one column per action; other costs are rounded to it.
 * A simulated program draws the same way, with its collectives (R2, T0-3,
 * N) where they take time (`pipetrain schedule --program --cost-collective`).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/program.h"
#include "sched/schedule.h"
#include "sched/textbuf.h"
#include "tensor/error.h"

/* Labels action i of worker w into buf; false for an action not drawn. */
typedef bool (*label_fn)(const void *src, int w, int i, char *buf, size_t n);

static void compute_label(const pt_action *a, bool chunked, char *buf, size_t n)
{
    const char *kind = a->kind == PT_ACT_F ? "F" : a->kind == PT_ACT_W ? "W" : "B";
    if (chunked)
        snprintf(buf, n, "%s%d.%d", kind, a->chunk, a->mb);
    else
        snprintf(buf, n, "%s%d", kind, a->mb);
}

/* The rows: one per worker, each action with a duration in the columns of
 * its time, its label where it starts. */
static int draw_rows(const void *src, int n_workers, const int *n_actions, label_fn label,
                     const pt_schedule_sim *sim, char **text)
{
    *text = NULL;
    double unit = 0;
    int width = 2;
    char buf[48];
    for (int w = 0; w < n_workers; w++)
        for (int i = 0; i < n_actions[w]; i++) {
            double d = sim->end[w][i] - sim->start[w][i];
            if (d <= 0 || !label(src, w, i, buf, sizeof buf))
                continue; /* what takes no time is not drawn */
            if (unit == 0 || d < unit)
                unit = d;
            int len = (int)strlen(buf);
            width = len > width ? len : width;
        }
    if (unit == 0)
        unit = 1;
    /* in double first: a makespan of 1e20 units does not fit a long */
    double cells = ceil(sim->makespan / unit - 1e-9);
    if (!(cells <= 100000))
        return pt_fail(PT_EINVAL,
                       "the timeline has %.3g columns of the shortest action's length; too "
                       "long to draw",
                       cells);
    long n_cells = (long)cells;
    int wdigits = snprintf(buf, sizeof buf, "%d", n_workers - 1);
    /* cells: 0 idle, 1 continuation, 2 + index of the action whose label starts there */
    long *cell = malloc((size_t)(n_cells > 0 ? n_cells : 1) * sizeof(long));
    if (!cell)
        return pt_fail(PT_ENOMEM, "out of memory drawing a schedule");
    pt_textbuf b = {0};
    for (int w = 0; w < n_workers; w++) {
        for (long j = 0; j < n_cells; j++)
            cell[j] = 0;
        long next_free = 0;
        for (int i = 0; i < n_actions[w]; i++) {
            if (sim->end[w][i] <= sim->start[w][i] || !label(src, w, i, buf, sizeof buf))
                continue;
            long c0 = lround(sim->start[w][i] / unit), c1 = lround(sim->end[w][i] / unit);
            if (c0 < next_free)
                c0 = next_free;
            if (c1 <= c0)
                c1 = c0 + 1;
            for (long j = c0; j < c1 && j < n_cells; j++)
                cell[j] = j == c0 ? 2 + i : 1;
            next_free = c1;
        }
        pt_textbuf_printf(&b, "worker %*d:", wdigits, w);
        long last = n_cells - 1;
        while (last >= 0 && cell[last] == 0)
            last--;
        for (long j = 0; j <= last; j++) {
            pt_textbuf_puts(&b, " ");
            if (cell[j] >= 2) {
                label(src, w, (int)(cell[j] - 2), buf, sizeof buf);
                pt_textbuf_printf(&b, "%-*s", width, buf);
            } else {
                pt_textbuf_repeat(&b, cell[j] ? '-' : '.', width);
            }
        }
        pt_textbuf_puts(&b, "\n");
    }
    free(cell);
    return pt_textbuf_finish(&b, text);
}

static bool schedule_label(const void *src, int w, int i, char *buf, size_t n)
{
    const pt_schedule *s = src;
    compute_label(&s->actions[w][i], s->n_chunks > pt_sched_stages(s), buf, n);
    return true;
}

int pt_schedule_draw_ascii(const pt_schedule *s, const pt_schedule_sim *sim, char **text)
{
    return draw_rows(s, s->n_workers, s->n_actions, schedule_label, sim, text);
}

/* A program's compute actions as a schedule's, its collectives (REDUCE,
 * TIED, NORM, GATHER) and SEQUENCE_SUM by their tokens, tensor sums as AF
 * or AB; sends,
 * receives and steps take no time. */
static bool program_label(const void *src, int w, int i, char *buf, size_t n)
{
    const pt_program *p = src;
    const pt_prog_action *a = &p->actions[w][i];
    if (pt_prog_is_compute(a->kind)) {
        pt_action c = pt_prog_compute(a);
        compute_label(&c, p->shape->n_chunks > pt_sched_stages(p->shape), buf, n);
        return true;
    }
    if (a->kind == PT_PROG_TENSOR_SUM) { /* short: a pass has one after each piece */
        snprintf(buf, n, "A%s", a->backward ? "B" : "F");
        return true;
    }
    if (a->kind == PT_PROG_SCATTER) { /* short: a weight pass has one after each piece */
        snprintf(buf, n, "X");
        return true;
    }
    if (!pt_prog_is_collective(a->kind) && a->kind != PT_PROG_SEQUENCE_SUM)
        return false;
    pt_prog_action_str(a, buf, n);
    return true;
}

int pt_program_draw_ascii(const pt_program *p, const pt_schedule_sim *sim, char **text)
{
    return draw_rows(p, p->shape->n_workers, p->n_actions, program_label, sim, text);
}
