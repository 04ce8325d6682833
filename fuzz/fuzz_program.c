/* fuzz_program: the program text format (src/sched/program_text.c), the
 * schedule format with a `program` line and the lowered tokens (SF0.3>1,
 * RB0.3<1, R2, T0-3, N, S2, ...). The input, as text up to its first NUL
 * byte, goes to pt_program_parse(); a program it accepts is validated (and
 * simulated when valid), printed with pt_program_format(), parsed again and
 * printed again: the second parse must equal the first (pt_prog_equal) and
 * the two texts must be the same. */
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "sched/program.h"

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    pt_program *p = NULL, *again = NULL;
    if (pt_program_parse(text, &p) != PT_OK) {
        FUZZ_REQUIRE(!p, "a refused program was handed back");
        free(text);
        return 0;
    }
    if (pt_program_validate(p) == PT_OK) {
        pt_schedule_costs costs = pt_schedule_costs_default();
        pt_schedule_sim *sim = NULL;
        FUZZ_REQUIRE(pt_program_simulate(p, &costs, &sim) == PT_OK,
                     "a valid program does not simulate: %s", pt_last_error());
        pt_schedule_sim_destroy(sim);
    }
    char *printed = NULL, *reprinted = NULL;
    FUZZ_REQUIRE(pt_program_format(p, &printed) == PT_OK, "format: %s", pt_last_error());
    FUZZ_REQUIRE(pt_program_parse(printed, &again) == PT_OK,
                 "the printed program does not parse: %s\n%s", pt_last_error(), printed);
    FUZZ_REQUIRE(pt_prog_equal(p, again), "parse -> print -> parse changed the program:\n%s",
                 printed);
    FUZZ_REQUIRE(pt_program_format(again, &reprinted) == PT_OK, "format: %s", pt_last_error());
    FUZZ_REQUIRE(!strcmp(printed, reprinted), "printing twice differs:\n%s\n--\n%s", printed,
                 reprinted);
    free(printed);
    free(reprinted);
    pt_program_destroy(again);
    pt_program_destroy(p);
    free(text);
    return 0;
}
