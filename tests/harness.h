/* harness.h - helpers shared by the test programs: locating ../shared and
 * running the shardsim binary as a child process. */
#ifndef SHARDSIM_TEST_HARNESS_H
#define SHARDSIM_TEST_HARNESS_H

#include <stddef.h>

#include "shardsim/data.h"

/* Directory of the shared data: $SHS_SHARED_DIR, else the build's default. */
const char *test_shared_dir(void);
/* Load ../shared/data/tinyshakespeare.txt; prints why on failure. */
shs_status_t test_load_shakespeare(shs_corpus_t *c);

/* Group fixtures (cmocka_run_group_tests) that load Tiny Shakespeare into
 * test_corpus and free it. */
extern shs_corpus_t test_corpus;
int test_corpus_setup(void **state);
int test_corpus_teardown(void **state);

typedef struct {
    int exit_code;     /* -1: killed by a signal or timed out */
    int timed_out;
    char out[65536];   /* stdout, truncated */
    char err[16384];   /* stderr, truncated */
} test_proc_t;

/* Group fixtures: a fresh directory /tmp/shardsim-test-XXXXXX in
 * test_tmpdir for the program's files, removed with its contents after. */
extern char test_tmpdir[256];
int test_tmpdir_setup(void **state);
int test_tmpdir_teardown(void **state);

/* Run argv (argv[0] = program path) with a wall-clock limit in seconds. */
void test_run_process(char *const argv[], double timeout_s, test_proc_t *p);

#endif
