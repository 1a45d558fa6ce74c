/* commands.h - subcommands of the shardsim program and its exit codes. */
#ifndef SHARDSIM_SIM_COMMANDS_H
#define SHARDSIM_SIM_COMMANDS_H

#define SIM_VERSION "0.1.0"

enum { SIM_EXIT_OK = 0, SIM_EXIT_ERROR = 1, SIM_EXIT_USAGE = 2, SIM_EXIT_NOT_EQUAL = 3 };

/* argv[0] is the subcommand name. Returns the process exit code. */
int sim_cmd_train(int argc, char **argv);
int sim_cmd_bench(int argc, char **argv);
int sim_cmd_replay(int argc, char **argv);
int sim_cmd_compare(int argc, char **argv);

#endif
