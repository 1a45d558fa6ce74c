/* help_examples.h - the examples each command's --help ends with, and
 * `shardsim help`'s: command lines that run as written from a checkout
 * (paths relative to it), each followed by what it shows. One table for
 * every command, so tests/cli/test_help_examples.c can run them all.
 * What it is not: the options (each command's table). */
#ifndef SHARDSIM_SIM_HELP_EXAMPLES_H
#define SHARDSIM_SIM_HELP_EXAMPLES_H

#include <stdio.h>

/* Print "examples:" and the examples of cmd ("train", "compare", ...; NULL:
 * the program's own) to f, each "  shardsim ARGS" then its description
 * indented below; nothing for a command without examples. */
void sim_help_examples(FILE *f, const char *cmd);

#endif
