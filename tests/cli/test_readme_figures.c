/* test_readme_figures.c - the README's generated output blocks (the main
 * job, the GPT-3 175B and Llama-3 70B compare tables, compare's timing)
 * match what this build prints now: tests/readme_figures.sh check, run
 * with this build's program. Machine-dependent figures (step times,
 * tokens/s, the devices' share of RAM, benchmark timings) are compared as
 * placeholders; everything else byte for byte. A block gone stale fails
 * here with its diff; `bash tests/readme_figures.sh update` rewrites it. */
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

static void test_readme_blocks_match_the_program(void **state) {
    (void)state;
    char *argv[] = {"/bin/bash", SHS_SOURCE_DIR "/tests/readme_figures.sh", "check", SHS_SOURCE_DIR "/README.md", NULL};
    setenv("SHARDSIM", SHS_DOCS_BIN_PATH, 1);
    static test_proc_t p;
    test_run_process(argv, 600.0, &p);
    if (p.timed_out || p.exit_code != 0)
        fail_msg("readme_figures.sh check: exit %d%s\n%s%s", p.exit_code, p.timed_out ? " (timed out)" : "", p.out, p.err);
    assert_non_null(strstr(p.out, "readme figures: 4 blocks of"));
}

/* The check is not blind: a planted change in a copy of the README (a
 * memory figure, one character) fails it, naming the block. */
static void test_a_stale_figure_fails(void **state) {
    (void)state;
    FILE *in = fopen(SHS_SOURCE_DIR "/README.md", "rb");
    assert_non_null(in);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, in);
    fclose(in);
    text[n] = 0;
    char *block = strstr(text, "<!-- readme_figures llama3-70b");
    assert_non_null(block);
    char *fig = strstr(block, "4.107|4.107");
    assert_non_null(fig);
    fig[0] = '5';
    char path[] = "/tmp/shardsim-readme-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    char *argv[] = {"/bin/bash", SHS_SOURCE_DIR "/tests/readme_figures.sh", "check", path, "llama3-70b", NULL};
    setenv("SHARDSIM", SHS_DOCS_BIN_PATH, 1);
    static test_proc_t p;
    test_run_process(argv, 600.0, &p);
    unlink(path);
    if (p.exit_code != 1 || !strstr(p.out, "block 'llama3-70b'") || !strstr(p.out, "-zero3                 5.107|4.107"))
        fail_msg("expected exit 1 naming llama3-70b; exit %d\n%s%s", p.exit_code, p.out, p.err);
}

int main(void) {
    if (access(SHS_DOCS_BIN_PATH, X_OK) != 0) {
        fprintf(stderr, "test_readme_figures: %s is not built (run make)\n", SHS_DOCS_BIN_PATH);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readme_blocks_match_the_program),
        cmocka_unit_test(test_a_stale_figure_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
