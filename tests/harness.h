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
/* Run the shardsim binary with the arguments first, ... (up to a NULL, at
 * most 39) under a limit of timeout_s seconds; fails the test if it timed
 * out. The result lives in one buffer the next call overwrites. */
const test_proc_t *test_shardsim(double timeout_s, const char *first, ...);

/* Write n bytes to test_tmpdir/name (test_tmpdir_setup first); fails the
 * test if it cannot. Returns the path, in a buffer the next call reuses. */
const char *test_tmp_write(const char *name, const void *data, size_t n);
/* Fail the test unless the file at path exists and starts with prefix. */
void test_assert_file_starts(const char *path, const char *prefix);

#endif
