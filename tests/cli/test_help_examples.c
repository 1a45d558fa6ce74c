/* test_help_examples.c - every command's --help (and `shardsim help`) ends
 * with examples, and each example runs as written from a checkout and
 * succeeds: an example that no longer runs fails here, not in a user's
 * terminal. The examples run in a fresh directory holding a link to the
 * checkout's traces/ (what they read) so their outputs land there. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

/* The program whose output the documentation shows: the plain build's
 * (Makefile: DOCS_BIN), also when this test is built under a sanitizer. */
#ifndef SHS_DOCS_BIN_PATH
#define SHS_DOCS_BIN_PATH SHS_BIN_PATH
#endif

static const char *const commands[] = {NULL, "train", "compare", "replay", "bench"};

/* The example lines ("  shardsim ARGS") after "examples:" in help. */
static int examples_of(const char *help, char lines[][512], int max) {
    const char *e = strstr(help, "\nexamples:\n");
    int n = 0;
    if (!e) return 0;
    for (const char *l = e + 11; *l && n < max; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
        if (!strncmp(l, "  shardsim ", 11)) snprintf(lines[n++], 512, "%.*s", (int)strcspn(l + 11, "\n"), l + 11);
    return n;
}

/* Run "shardsim ARGS" (ARGS split at spaces) in the current directory. */
static const test_proc_t *run_example(const char *args) {
    static char copy[512];
    static test_proc_t proc;
    char *argv[48];
    int n = 0;
    snprintf(copy, sizeof copy, "%.500s", args);
    argv[n++] = (char *)SHS_DOCS_BIN_PATH;
    for (char *t = strtok(copy, " "); t && n < 47; t = strtok(NULL, " ")) argv[n++] = t;
    argv[n] = NULL;
    test_run_process(argv, 300.0, &proc);
    if (proc.timed_out) fail_msg("shardsim %s: did not finish in 300 s", args);
    return &proc;
}

static void test_every_command_has_examples_that_run(void **state) {
    (void)state;
    char dir[] = "/tmp/shardsim-examples-XXXXXX", cwd[4096];
    assert_non_null(mkdtemp(dir));
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(symlink(SHS_SOURCE_DIR "/traces", "traces"), 0);
    static char done[64][512];
    int ndone = 0;
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        const test_proc_t *p = commands[c] ? test_shardsim(60.0, commands[c], "--help", NULL) : test_shardsim(60.0, "help", NULL);
        assert_int_equal(p->exit_code, 0);
        static char help[65536];
        snprintf(help, sizeof help, "%s", p->out);
        char lines[16][512];
        int n = examples_of(help, lines, 16), own = 0;
        if (n == 0) fail_msg("shardsim %s has no examples:\n%s", commands[c] ? commands[c] : "help", help);
        for (int i = 0; i < n; i++) {
            if (!commands[c] || !strncmp(lines[i], commands[c], strlen(commands[c]))) own++;
            int seen = 0;
            for (int k = 0; k < ndone; k++) seen |= !strcmp(done[k], lines[i]);
            if (seen) continue;
            snprintf(done[ndone++], 512, "%.500s", lines[i]);
            const test_proc_t *r = run_example(lines[i]);
            if (r->exit_code != 0) fail_msg("example 'shardsim %s': exit %d\n%s", lines[i], r->exit_code, r->err);
        }
        if (!own) fail_msg("shardsim %s --help: no example of the command itself", commands[c]);
    }
    assert_int_equal(chdir(cwd), 0);
    char rm[256];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    assert_int_equal(system(rm), 0);
}

int main(void) {
    if (access(SHS_DOCS_BIN_PATH, X_OK) != 0) {
        fprintf(stderr, "test_help_examples: %s is not built (run make)\n", SHS_DOCS_BIN_PATH);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_command_has_examples_that_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
