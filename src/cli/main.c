/* main.c: the pipetrain command: finds the subcommand and hands it the rest
 * of the arguments. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"train", cmd_train, "train a model (single worker or pipelined)"},
    {"generate", cmd_generate, "sample text from a trained gpt checkpoint"},
    {"eval", cmd_eval, "a gpt checkpoint's mean loss on text or token data"},
    {"tokenize", cmd_tokenize, "encode text into a token file with a BPE tokenizer"},
    {"schedule", cmd_schedule, "build, check, simulate and draw a pipeline schedule"},
    {"plan", cmd_plan, "profile a model and compare schedules here, or plan a run on a cluster"},
    {"merge", cmd_merge, "merge a checkpoint set (folder) into one safetensors file"},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: pipetrain COMMAND [FLAGS]\n\n"
               "pipeline-parallel training of neural networks\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'pipetrain COMMAND --help' lists a command's flags and their defaults.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "pipetrain: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
