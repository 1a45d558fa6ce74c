/* cli_expect.h - what the CLI tests check of every refused command line:
 * its exit code, and exactly one error line "shardsim COMMAND: error: ..."
 * holding a given text (plus optional "shardsim COMMAND: note:" lines).
 * What it is not: running the program (harness.h). */
#ifndef SHARDSIM_TESTS_CLI_EXPECT_H
#define SHARDSIM_TESTS_CLI_EXPECT_H

#include "harness.h"

/* Fail the test unless p exited with code and its stderr is one error
 * line containing needle (then only note lines). */
void test_expect_error(const test_proc_t *p, int code, const char *needle);

#endif
