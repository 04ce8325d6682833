/* commands.h: the subcommands of the pipetrain command. Each lives in its
 * own cmd_*.c, takes the arguments after its name, and returns the process
 * exit status: 0 success, 1 a failure while working (a file that will not
 * load, ...), 2 a usage error (a flag, a value or a combination refused). */
#ifndef PT_CLI_COMMANDS_H
#define PT_CLI_COMMANDS_H

int cmd_schedule(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_plan(int argc, char **argv);
/* `plan --cluster` and `plan --check` (cmd_plan_cluster.c) */
int cmd_plan_cluster(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);

#endif
