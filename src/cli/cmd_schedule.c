/* cmd_schedule.c: placeholder until the command is written. */
#include <stdio.h>

#include "cli/commands.h"

int cmd_schedule(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "pipetrain schedule: not built yet\n");
    return 2;
}
