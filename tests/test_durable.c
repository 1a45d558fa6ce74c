/* test_durable.c - the whole-or-nothing stdio writer (src/durable.h,
 * shs__afile_*) that every report, picture and trace export goes through,
 * and what the CLI does when such a write fails. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "durable.h"
#include "harness.h"

static void expect_contents(const char *path, const char *text) {
    char buf[256] = {0};
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    assert_int_equal(n, strlen(text));
    assert_memory_equal(buf, text, n);
}

static void path_in_tmp(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", test_tmpdir, name); }

/* A discarded write leaves the earlier file whole and no temp file;
 * a committed one replaces it. */
static void test_discard_keeps_earlier_commit_replaces(void **state) {
    (void)state;
    char path[512], tmp[520];
    path_in_tmp(path, sizeof path, "report.txt");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    test_tmp_write("report.txt", "earlier\n", 8);
    shs__afile_t f;
    assert_int_equal(shs__afile_open(&f, path, "w"), SHS_OK);
    fputs("half of a new re", f.fp);
    expect_contents(path, "earlier\n"); /* nothing reaches the name before commit */
    shs__afile_discard(&f);
    expect_contents(path, "earlier\n");
    assert_int_not_equal(access(tmp, F_OK), 0);

    assert_int_equal(shs__afile_open(&f, path, "w"), SHS_OK);
    fputs("new report\n", f.fp);
    assert_int_equal(shs__afile_commit(&f), SHS_OK);
    expect_contents(path, "new report\n");
    assert_int_not_equal(access(tmp, F_OK), 0);
}

/* Errors name the path: a missing directory at open; a device that refuses
 * the bytes (/dev/full, written in place as a device) at commit. */
static void test_errors_name_the_path(void **state) {
    (void)state;
    shs__afile_t f;
    char path[512];
    path_in_tmp(path, sizeof path, "no/such/dir/x.json");
    assert_int_equal(shs__afile_open(&f, path, "w"), SHS_IO);
    assert_non_null(strstr(shs_last_error(), "no/such/dir/x.json: cannot create"));

    if (access("/dev/full", W_OK) != 0) skip();
    assert_int_equal(shs__afile_open(&f, "/dev/full", "w"), SHS_OK);
    for (int i = 0; i < 2000; i++) fputs("0123456789abcdef", f.fp); /* more than one stdio buffer */
    assert_int_equal(shs__afile_commit(&f), SHS_IO);
    assert_non_null(strstr(shs_last_error(), "/dev/full"));
    assert_null(f.fp);
}

/* A device is written in place, not renamed onto: --output /dev/stdout. */
static void test_device_written_in_place(void **state) {
    (void)state;
    shs__afile_t f;
    assert_int_equal(shs__afile_open(&f, "/dev/null", "w"), SHS_OK);
    fputs("discarded by the device\n", f.fp);
    assert_int_equal(shs__afile_commit(&f), SHS_OK);
    assert_int_equal(access("/dev/null.tmp", F_OK) != 0, 1);
}

/* The CLI: a report that cannot be written is an error (exit 1, the path
 * named; stdout on a full device too), and a plot into a missing directory
 * leaves nothing behind. */
static void test_cli_write_failures(void **state) {
    (void)state;
    test_proc_t *p = malloc(sizeof *p);
    assert_non_null(p);
    if (access("/dev/full", W_OK) == 0) {
        char *full[] = {SHS_BIN_PATH, "compare", "--layers", "1", "--channels", "32", "--heads", "2", "--context", "8",
                        "--world", "2", "--variants", "plain", "--output", "/dev/full", NULL};
        test_run_process(full, 60, p);
        assert_int_equal(p->exit_code, 1);
        assert_non_null(strstr(p->err, "/dev/full"));
    }
    if (access("/dev/full", W_OK) == 0) { /* a report that never reaches stdout is a failure too */
        char *sh[] = {"/bin/sh", "-c",
                      SHS_BIN_PATH " compare --layers 1 --channels 32 --heads 2 --context 8 --world 2 --variants plain "
                                   "> /dev/full",
                      NULL};
        test_run_process(sh, 60, p);
        assert_int_equal(p->exit_code, 1);
        assert_non_null(strstr(p->err, "cannot write the output"));
    }
    char plot[512], out[512];
    path_in_tmp(plot, sizeof plot, "missing/plot.svg");
    path_in_tmp(out, sizeof out, "table.txt");
    test_tmp_write("table.txt", "earlier table\n", 14);
    char *bad[] = {SHS_BIN_PATH, "compare", "--layers", "1", "--channels", "32", "--heads", "2", "--context", "8",
                   "--world", "2", "--variants", "plain", "--plot", plot, NULL};
    test_run_process(bad, 60, p);
    assert_int_equal(p->exit_code, 1);
    assert_non_null(strstr(p->err, "missing/plot.svg"));
    /* a good run replaces the earlier table whole */
    char *good[] = {SHS_BIN_PATH, "compare", "--layers", "1", "--channels", "32", "--heads", "2", "--context", "8",
                    "--world", "2", "--variants", "plain", "--format", "csv", "--output", out, NULL};
    test_run_process(good, 60, p);
    if (p->exit_code != 0) fail_msg("compare --output failed: %s", p->err);
    test_assert_file_starts(out, "name,");
    free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discard_keeps_earlier_commit_replaces),
        cmocka_unit_test(test_errors_name_the_path),
        cmocka_unit_test(test_device_written_in_place),
        cmocka_unit_test(test_cli_write_failures),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
