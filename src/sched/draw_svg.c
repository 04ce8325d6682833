/* draw_svg.c: a simulated schedule as an SVG Gantt chart, written by
 * `pipetrain schedule --svg FILE`: one lane per worker, one bar per action
 * from its start to its end, coloured by kind (F, B, W, fused BW), the
 * micro-batch number on each bar wide enough to hold it (chunk.micro-batch
 * when workers hold several chunks), a time axis with ticks underneath, and
 * a legend. Self-contained: no scripts, no external styles.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sched/schedule.h"
#include "sched/textbuf.h"

enum { LEFT = 80, TOP = 40, LANE = 28, BAR = 22, AXIS = 36, LEGEND = 30 };

static const char *const fill[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759"};
static const char *const kind_name[] = {"F forward", "B input gradient", "W weight gradient",
                                        "BW fused backward"};

/* A tick step of 1, 2 or 5 times a power of ten giving about 10 ticks. */
static double tick_step(double span)
{
    double raw = span / 10.0, p = pow(10.0, floor(log10(raw > 0 ? raw : 1)));
    return raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
}

int pt_schedule_draw_svg(const pt_schedule *s, const pt_schedule_sim *sim, char **text)
{
    *text = NULL;
    double span = sim->makespan > 0 ? sim->makespan : 1;
    double scale = 1000.0 / span; /* px per time unit */
    if (scale > 40)
        scale = 40;
    int width = LEFT + (int)ceil(span * scale) + 40;
    if (width < 560)
        width = 560;
    int lanes_h = s->n_workers * LANE;
    int height = TOP + lanes_h + AXIS + LEGEND + 10;
    bool chunked = s->n_chunks > pt_sched_stages(s);
    pt_textbuf b = {0};
    pt_textbuf_printf(&b,
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                      "viewBox=\"0 0 %d %d\" font-family=\"monospace\" font-size=\"11\">\n",
                      width, height, width, height);
    pt_textbuf_printf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    pt_textbuf_printf(&b,
                      "<text x=\"%d\" y=\"22\" font-size=\"14\">%s: %d workers, %d chunks, %d "
                      "micro-batches; makespan %g, bubble %.4f</text>\n",
                      LEFT, s->name, s->n_workers, s->n_chunks, s->n_micro, sim->makespan,
                      sim->bubble_fraction);
    bool used[4] = {false, false, false, false};
    for (int w = 0; w < s->n_workers; w++) {
        int y = TOP + w * LANE;
        pt_textbuf_printf(&b, "<text x=\"8\" y=\"%d\">worker %d</text>\n", y + BAR / 2 + 4, w);
        pt_textbuf_printf(&b,
                          "<rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                          "fill=\"#eeeeee\"/>\n",
                          LEFT, y, span * scale, BAR);
        for (int i = 0; i < s->n_actions[w]; i++) {
            const pt_action *a = &s->actions[w][i];
            double x = LEFT + sim->start[w][i] * scale;
            double len = (sim->end[w][i] - sim->start[w][i]) * scale;
            if (len <= 0)
                continue;
            used[a->kind & 3] = true;
            pt_textbuf_printf(&b,
                              "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                              "fill=\"%s\" stroke=\"white\" stroke-width=\"1\"/>\n",
                              x, y, len, BAR, fill[a->kind & 3]);
            char lab[32];
            if (chunked)
                snprintf(lab, sizeof lab, "%d.%d", a->chunk, a->mb);
            else
                snprintf(lab, sizeof lab, "%d", a->mb);
            if (len >= 7.0 * (double)strlen(lab) + 2)
                pt_textbuf_printf(&b,
                                  "<text x=\"%.2f\" y=\"%d\" fill=\"white\" "
                                  "text-anchor=\"middle\">%s</text>\n",
                                  x + len / 2, y + BAR / 2 + 4, lab);
        }
    }
    int axis_y = TOP + lanes_h + 4;
    pt_textbuf_printf(&b, "<line x1=\"%d\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"black\"/>\n",
                      LEFT, axis_y, LEFT + span * scale, axis_y);
    double step = tick_step(span);
    for (double t = 0; t <= span + 1e-9; t += step) {
        double x = LEFT + t * scale;
        pt_textbuf_printf(&b,
                          "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"black\"/>"
                          "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
                          x, axis_y, x, axis_y + 5, x, axis_y + 17, t);
    }
    pt_textbuf_printf(&b, "<text x=\"8\" y=\"%d\">time</text>\n", axis_y + 17);
    int lx = LEFT, ly = axis_y + AXIS;
    for (int k = 0; k < 4; k++) {
        if (!used[k])
            continue;
        pt_textbuf_printf(&b,
                          "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\"/>"
                          "<text x=\"%d\" y=\"%d\">%s</text>\n",
                          lx, ly - 11, fill[k], lx + 18, ly, kind_name[k]);
        lx += 30 + 7 * (int)strlen(kind_name[k]);
    }
    pt_textbuf_printf(&b,
                      "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"#eeeeee\"/>"
                      "<text x=\"%d\" y=\"%d\">idle</text>\n",
                      lx, ly - 11, lx + 18, ly);
    pt_textbuf_puts(&b, "</svg>\n");
    return pt_textbuf_finish(&b, text);
}
