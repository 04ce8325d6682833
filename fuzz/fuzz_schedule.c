/* fuzz_schedule: the schedule text format (src/sched/text.c), as
 * `pipetrain schedule --from FILE` reads it. The input, as text up to its
 * first NUL byte, goes to pt_schedule_parse(); a schedule it accepts is
 * queried as the CLI queries it (virtual stages, peers of every action),
 * validated and, when valid, simulated and lowered (the program must
 * validate too), then printed with pt_schedule_format(), parsed again and
 * printed again: the second parse must equal the first (pt_sched_equal) and
 * the two texts must be the same, so parse -> print -> parse is the
 * identity on whatever the parser takes. */
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "sched/schedule.h"

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    pt_schedule *s = NULL, *again = NULL;
    if (pt_schedule_parse(text, &s) != PT_OK) {
        FUZZ_REQUIRE(!s, "a refused schedule was handed back");
        free(text);
        return 0;
    }
    /* what `schedule --from FILE --json` asks of a schedule before validating it */
    pt_schedule_virtual_stages(s);
    pt_schedule_stages(s);
    pt_sched_is_async(s);
    for (int w = 0; w < s->n_workers; w++)
        for (int i = 0; i < s->n_actions[w]; i++) {
            pt_sched_send_to(s, &s->actions[w][i]);
            pt_sched_recv_from(s, &s->actions[w][i]);
        }
    if (pt_schedule_validate(s) == PT_OK) {
        pt_schedule_costs costs = pt_schedule_costs_default();
        pt_schedule_sim *sim = NULL;
        FUZZ_REQUIRE(pt_schedule_simulate(s, &costs, &sim) == PT_OK,
                     "a valid schedule does not simulate: %s", pt_last_error());
        pt_schedule_sim_destroy(sim);
        /* lowering either refuses (a program that cannot run, e.g. replicas
         * placed across stages) or hands on a program that validates */
        pt_program *p = NULL;
        if (pt_program_lower(s, NULL, &p) == PT_OK)
            FUZZ_REQUIRE(pt_program_validate(p) == PT_OK,
                         "the lowered program of a valid schedule is invalid: %s", pt_last_error());
        pt_program_destroy(p);
    }
    char *printed = NULL, *reprinted = NULL;
    FUZZ_REQUIRE(pt_schedule_format(s, &printed) == PT_OK, "format: %s", pt_last_error());
    FUZZ_REQUIRE(pt_schedule_parse(printed, &again) == PT_OK,
                 "the printed schedule does not parse: %s\n%s", pt_last_error(), printed);
    FUZZ_REQUIRE(pt_sched_equal(s, again), "parse -> print -> parse changed the schedule:\n%s",
                 printed);
    FUZZ_REQUIRE(pt_schedule_format(again, &reprinted) == PT_OK, "format: %s", pt_last_error());
    FUZZ_REQUIRE(!strcmp(printed, reprinted), "printing twice differs:\n%s\n--\n%s", printed,
                 reprinted);
    free(printed);
    free(reprinted);
    pt_schedule_destroy(again);
    pt_schedule_destroy(s);
    free(text);
    return 0;
}
