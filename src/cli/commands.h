/* commands.h: the subcommands of the pipetrain command. Each lives in its
 * own cmd_*.c, takes the arguments after its name, and returns the process
 * exit status: 0 success, 1 a failure while working (a file that will not
 * load, ...), 2 a usage error (a flag, a value or a combination refused). */
#ifndef PT_CLI_COMMANDS_H
#define PT_CLI_COMMANDS_H

#include "pipetrain.h"

int cmd_schedule(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_plan(int argc, char **argv);
/* `plan --cluster` and `plan --check` (cmd_plan_cluster.c) */
int cmd_plan_cluster(int argc, char **argv);
/* `plan --tensor T --replicas D --zero Z` and `plan --ranks N`
 * (cmd_plan_layouts.c): memory and step time per rank of (P, T, D, zero)
 * layouts, from the profile `plan` measured; ranks 0 for the one layout;
 * sequence: with sequence parallelism where T >= 2 */
int cmd_plan_layouts(const pt_model_config *model, const void *profile, int stages, int tensor,
                     int sequence, int replicas, int zero, int ranks, int microbatches, int batch,
                     double memory_limit, double bandwidth, double latency);
int cmd_merge(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);

#endif
