/* cmd_train.c: placeholder until the command is written. */
#include <stdio.h>

#include "cli/commands.h"

int cmd_train(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "pipetrain train: not built yet\n");
    return 2;
}
