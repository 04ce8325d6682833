/* draw_trace.c: a simulated schedule as Chrome/Perfetto trace-event JSON
 * (load it in chrome://tracing or ui.perfetto.dev), written by `pipetrain
 * schedule --trace FILE`. One process, one track (thread) per worker, one
 * complete ("X") event per action, named like the text format (F1.3, B0.2,
 * W0.2, BW2.0). The executor's own traces use the same shape, so a planned
 * and a measured run can be opened side by side. One simulated time unit is
 * written as one millisecond.
 */
#include <stdio.h>

#include "sched/schedule.h"
#include "sched/textbuf.h"

int pt_schedule_draw_trace(const pt_schedule *s, const pt_schedule_sim *sim, char **text)
{
    static const char *const cat[] = {"forward", "backward_input", "backward_weight", "backward"};
    pt_textbuf b = {0};
    char name[48];
    *text = NULL;
    pt_textbuf_printf(&b, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    pt_textbuf_printf(&b,
                      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,"
                      "\"args\":{\"name\":\"schedule %s\"}}",
                      s->name);
    for (int w = 0; w < s->n_workers; w++)
        pt_textbuf_printf(&b,
                          ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                          "\"args\":{\"name\":\"worker %d\"}}",
                          w, w);
    for (int w = 0; w < s->n_workers; w++)
        for (int i = 0; i < s->n_actions[w]; i++) {
            const pt_action *a = &s->actions[w][i];
            pt_textbuf_printf(&b,
                              ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":0,"
                              "\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"chunk\":%d,"
                              "\"microbatch\":%d}}",
                              pt_sched_action_str(a, name, sizeof name), cat[a->kind & 3], w,
                              sim->start[w][i] * 1000.0,
                              (sim->end[w][i] - sim->start[w][i]) * 1000.0, a->chunk, a->mb);
        }
    pt_textbuf_puts(&b, "\n]}\n");
    return pt_textbuf_finish(&b, text);
}
