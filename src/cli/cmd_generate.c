/* cmd_generate.c: placeholder until the command is written. */
#include <stdio.h>

#include "cli/commands.h"

int cmd_generate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "pipetrain generate: not built yet\n");
    return 2;
}
