/* main.c - the shardsim command line: dispatches subcommands.
 * Exit codes: 0 success, 1 runtime error, 2 usage error, 3 --check found a
 * difference. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "help_examples.h"

static void usage(FILE *f) {
    fprintf(f,
            "shardsim - a reference simulator of sharded data parallelism (DDP, ZeRO-1/2/3)\n"
            "\n"
            "usage: shardsim <command> [options]\n"
            "\n"
            "commands:\n"
            "  train     train a GPT on simulated GPUs (threads) under a strategy\n"
            "  bench     collective, training-step and matmul benchmarks (ratios)\n"
            "  replay    check and replay a communication trace (NCCL log, PyTorch ET, Chakra, ...)\n"
            "  compare   every strategy for one model at any scale on the meta backend: memory, bytes, time\n"
            "  help      this text; 'shardsim <command> --help' for a command's options\n"
            "  version   print the version\n");
    sim_help_examples(f, NULL);
}

static const char *command; /* the command run, for sim_finish_output's message; NULL: none */

static int run(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return SIM_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } commands[] = {{"train", sim_cmd_train}, {"bench", sim_cmd_bench}, {"replay", sim_cmd_replay},
                    {"compare", sim_cmd_compare}};
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
        if (strcmp(cmd, commands[k].name) == 0) {
            command = commands[k].name;
            return commands[k].fn(argc - 1, argv + 1);
        }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("shardsim %s\n", SIM_VERSION);
        return 0;
    }
    sim_error(NULL, "unknown command '%s' (see 'shardsim help')", cmd);
    return SIM_EXIT_USAGE;
}

/* a report that never reached stdout is a failure, whatever the command returned */
int main(int argc, char **argv) {
    int rc = run(argc, argv);
    return sim_finish_output(command, rc);
}
