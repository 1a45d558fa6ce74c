/* test_output_paths.c - where `shardsim replay` and `shardsim compare` may
 * write: an output that is an input trace (the file itself, through a link,
 * a gzip input, a file of an input directory) or another output of the same
 * command is refused before anything is written, naming both; a Chakra
 * prefix that is a device, directory or ends in '/' is refused; a full
 * device's error names the path once, with the system's reason.
 * Inputs are copies of the shared traces in a fresh temporary directory.
 * What it is not: the write-then-rename policy itself (test_durable). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define RANKS 8 /* all_reduce_8npus_1MB: all_reduce.<r>.et, r = 0..7 */

static char dir_in[512], file_in[600], gz_in[600];

/* Copy the shared 8-rank Chakra trace into test_tmpdir/in, one rank file
 * to test_tmpdir/one.et and a gzip of it to test_tmpdir/one.et.gz. */
static int setup(void **state) {
    if (test_tmpdir_setup(state)) return -1;
    snprintf(dir_in, sizeof dir_in, "%s/in", test_tmpdir);
    snprintf(file_in, sizeof file_in, "%s/one.et", test_tmpdir);
    snprintf(gz_in, sizeof gz_in, "%s/one.et.gz", test_tmpdir);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cp -r '%s/traces/chakra-et/microbench/all_reduce_8npus_1MB' '%s' && cp '%s/all_reduce.0.et' '%s' && "
             "gzip -c '%s' > '%s'",
             test_shared_dir(), dir_in, dir_in, file_in, file_in, gz_in);
    return system(cmd) == 0 ? 0 : -1;
}

/* The whole content of path (malloc'd), its size in *n; NULL when unreadable. */
static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    size_t cap = 0;
    *n = 0;
    for (;;) {
        if (*n == cap && !(b = realloc(b, cap = cap ? 2 * cap : 65536))) break;
        size_t k = fread(b + *n, 1, cap - *n, f);
        if (!k) break;
        *n += k;
    }
    fclose(f);
    return b;
}

static int exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* Exit 1 with each needle in stderr, the input's bytes unchanged and no
 * temp file beside it. */
static void expect_refused(const test_proc_t *p, const char *input, const char *before, size_t nbefore,
                           const char *n1, const char *n2, const char *n3) {
    const char *needles[] = {n1, n2, n3};
    if (p->exit_code != 1) fail_msg("want exit 1, got %d\nstderr:\n%s", p->exit_code, p->err);
    for (int i = 0; i < 3; i++)
        if (needles[i] && !strstr(p->err, needles[i])) fail_msg("want '%s' in stderr:\n%s", needles[i], p->err);
    size_t n;
    char *after = slurp(input, &n);
    assert_non_null(after);
    assert_int_equal(n, nbefore);
    assert_memory_equal(after, before, n);
    free(after);
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp", input);
    assert_false(exists(tmp));
}

static void test_output_onto_input_file(void **state) {
    (void)state;
    size_t n;
    char *before = slurp(file_in, &n);
    assert_non_null(before);
    assert_true(n > 0);
    static const char *const opts[] = {"--export-text", "--export-perfetto"};
    for (int i = 0; i < 2; i++) {
        const test_proc_t *p = test_shardsim(60.0, "replay", file_in, "--check-only", opts[i], file_in, NULL);
        expect_refused(p, file_in, before, n, opts[i], "is the input", "refusing to overwrite");
    }
    /* through a symbolic link, and with a read-only input (root could rename over it) */
    char link[700];
    snprintf(link, sizeof link, "%s/link.json", test_tmpdir);
    assert_int_equal(symlink(file_in, link), 0);
    assert_int_equal(chmod(file_in, 0444), 0);
    const test_proc_t *p = test_shardsim(60.0, "replay", file_in, "--check-only", "--export-perfetto", link, NULL);
    expect_refused(p, file_in, before, n, "--export-perfetto", link, "is the input");
    assert_int_equal(chmod(file_in, 0644), 0);
    unlink(link);
    free(before);
}

static void test_output_onto_gzip_input(void **state) {
    (void)state;
    size_t n;
    char *before = slurp(gz_in, &n);
    assert_non_null(before);
    const test_proc_t *p = test_shardsim(60.0, "replay", gz_in, "--check-only", "--export-text", gz_in, NULL);
    expect_refused(p, gz_in, before, n, "--export-text", "is the input", NULL);
    free(before);
}

static void test_output_onto_input_directory_file(void **state) {
    (void)state;
    char f3[700], prefix[700];
    snprintf(f3, sizeof f3, "%s/all_reduce.3.et", dir_in);
    snprintf(prefix, sizeof prefix, "%s/all_reduce", dir_in);
    size_t n;
    char *before = slurp(f3, &n);
    assert_non_null(before);
    const test_proc_t *p = test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-text", f3, NULL);
    expect_refused(p, f3, before, n, "--export-text", "a file of the input directory", dir_in);
    /* the Chakra export's P.<rank>.et are the directory's own files */
    p = test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-chakra", prefix, NULL);
    expect_refused(p, f3, before, n, "--export-chakra", "a file of the input directory", NULL);
    free(before);
    /* a new file beside the inputs overwrites nothing, but the directory would no longer read as one
     * trace (two files claiming one rank, or two formats): refused, not written */
    char fresh[700];
    snprintf(fresh, sizeof fresh, "%s/normalized.txt", dir_in);
    p = test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-text", fresh, NULL);
    if (p->exit_code != 1 || !strstr(p->err, "a new file in the input directory"))
        fail_msg("exit %d\nstderr:\n%s", p->exit_code, p->err);
    assert_false(exists(fresh));
}

static void test_chakra_prefix_not_a_file_name(void **state) {
    (void)state;
    char slash[600];
    snprintf(slash, sizeof slash, "%s/", test_tmpdir);
    const test_proc_t *p = test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-chakra", "/dev/full", NULL);
    if (p->exit_code != 1 || !strstr(p->err, "--export-chakra /dev/full: is a device"))
        fail_msg("exit %d\nstderr:\n%s", p->exit_code, p->err);
    assert_false(exists("/dev/full.0.et"));
    p = test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-chakra", slash, NULL);
    if (p->exit_code != 1 || !strstr(p->err, "ends in '/'")) fail_msg("exit %d\nstderr:\n%s", p->exit_code, p->err);
    char hidden[700];
    snprintf(hidden, sizeof hidden, "%s/.0.et", test_tmpdir);
    assert_false(exists(hidden));
    p = test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-chakra", test_tmpdir, NULL);
    if (p->exit_code != 1 || !strstr(p->err, "is a directory")) fail_msg("exit %d\nstderr:\n%s", p->exit_code, p->err);
    snprintf(hidden, sizeof hidden, "%s.0.et", test_tmpdir);
    assert_false(exists(hidden));
}

static void test_two_outputs_one_file(void **state) {
    (void)state;
    char out[600], link[600], et0[600], pre[600];
    snprintf(out, sizeof out, "%s/out.json", test_tmpdir);
    snprintf(link, sizeof link, "%s/alias.json", test_tmpdir);
    snprintf(pre, sizeof pre, "%s/o", test_tmpdir);
    snprintf(et0, sizeof et0, "%s/o.0.et", test_tmpdir);
    const test_proc_t *p = test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-perfetto", out,
                                         "--export-text", out, NULL);
    if (p->exit_code != 1 || !strstr(p->err, "--export-text") || !strstr(p->err, "--export-perfetto") ||
        !strstr(p->err, "name one file"))
        fail_msg("exit %d\nstderr:\n%s", p->exit_code, p->err);
    assert_false(exists(out));
    /* the same file by another name: a link to an existing output */
    FILE *f = fopen(out, "w");
    assert_non_null(f);
    fputs("keep\n", f);
    fclose(f);
    assert_int_equal(symlink("out.json", link), 0);
    p = test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-perfetto", out, "--export-text", link, NULL);
    if (p->exit_code != 1 || !strstr(p->err, "name one file")) fail_msg("exit %d\nstderr:\n%s", p->exit_code, p->err);
    test_assert_file_starts(out, "keep\n");
    /* one new file spelled two ways ("D/x" and "D/./x"): the same file once its directory is resolved */
    char spelled[700];
    snprintf(spelled, sizeof spelled, "%s/./new.json", test_tmpdir);
    snprintf(out, sizeof out, "%s/new.json", test_tmpdir);
    p = test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-perfetto", out, "--export-text", spelled, NULL);
    if (p->exit_code != 1 || !strstr(p->err, "name one file")) fail_msg("exit %d\nstderr:\n%s", p->exit_code, p->err);
    assert_false(exists(out));
    snprintf(out, sizeof out, "%s/out.json", test_tmpdir);
    /* a Chakra rank file named by another output */
    p = test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-perfetto", et0, "--export-chakra", pre, NULL);
    if (p->exit_code != 1 || !strstr(p->err, "--export-chakra") || !strstr(p->err, "name one file"))
        fail_msg("exit %d\nstderr:\n%s", p->exit_code, p->err);
    assert_false(exists(et0));
    /* /dev/null twice replaces nothing: allowed */
    p = test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-perfetto", "/dev/null", "--export-text",
                      "/dev/null", NULL);
    if (p->exit_code != 0) fail_msg("exit %d\nstderr:\n%s", p->exit_code, p->err);
    /* compare: --plot and --output */
    char svg[600];
    snprintf(svg, sizeof svg, "%s/x.svg", test_tmpdir);
    p = test_shardsim(60.0, "compare", "--plot", svg, "--output", svg, NULL);
    if (p->exit_code != 1 || !strstr(p->err, "--plot") || !strstr(p->err, "--output") || !strstr(p->err, "name one file"))
        fail_msg("exit %d\nstderr:\n%s", p->exit_code, p->err);
    assert_false(exists(svg));
    unlink(link);
    unlink(out);
}

/* stderr has needle, and "/dev/full" exactly once */
static void expect_full(const test_proc_t *p) {
    const char *needle = "/dev/full: write failed: No space left on device";
    const char *a = strstr(p->err, "/dev/full");
    if (p->exit_code != 1 || !strstr(p->err, needle) || !a || strstr(a + 1, "/dev/full"))
        fail_msg("want exit 1 and '%s' once; got exit %d\nstderr:\n%s", needle, p->exit_code, p->err);
}

static void test_full_device_reason(void **state) {
    (void)state;
    expect_full(test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-text", "/dev/full", NULL));
    expect_full(test_shardsim(60.0, "replay", dir_in, "--check-only", "--export-perfetto", "/dev/full", NULL));
    expect_full(test_shardsim(60.0, "compare", "--plot", "/dev/full", NULL));
    expect_full(test_shardsim(60.0, "compare", "--output", "/dev/full", NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_output_onto_input_file),
        cmocka_unit_test(test_output_onto_gzip_input),
        cmocka_unit_test(test_output_onto_input_directory_file),
        cmocka_unit_test(test_chakra_prefix_not_a_file_name),
        cmocka_unit_test(test_two_outputs_one_file),
        cmocka_unit_test(test_full_device_reason),
    };
    return cmocka_run_group_tests(tests, setup, test_tmpdir_teardown);
}
