/* test_trace_gzip.c - gzip-compressed trace inputs: a .json.gz written here
 * with zlib's own gz functions from a real PyTorch ET file (and a directory
 * of gzip'd Kineto rank files) loads to exactly the trace the plain file
 * gives; corrupt, truncated and trailing-garbage .gz files are refused
 * naming the file and the compressed byte. Needs jansson and zlib: without
 * either it does not compile, and `make test` leaves it out and says so
 * (without zlib, `make check-nolibs` checks the refusal naming zlib1g-dev). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "harness.h"
#include "shardsim/trace_import.h"
#include "trace/trace_files.h"
#if !defined(SHS_HAVE_JANSSON) || !defined(SHS_HAVE_ZLIB)
#error "test_trace_gzip needs jansson and zlib (make deps); make test leaves it out otherwise"
#endif
#include <zlib.h>

/* Write `parts` gzip members (zlib's gzopen/gzwrite, one per part of
 * buf) to test_tmpdir/name; returns the path (static buffer). */
static const char *gz_write(const char *name, const char *buf, size_t n, int parts) {
    static char path[700];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir, name);
    FILE *clear = fopen(path, "wb"); /* gzopen "ab" appends a member per open */
    assert_non_null(clear);
    fclose(clear);
    for (int k = 0; k < parts; k++) {
        size_t a = n * (size_t)k / (size_t)parts, b = n * (size_t)(k + 1) / (size_t)parts;
        gzFile g = gzopen(path, "ab");
        assert_non_null(g);
        assert_int_equal(gzwrite(g, buf + a, (unsigned)(b - a)), (int)(b - a));
        assert_int_equal(gzclose(g), Z_OK);
    }
    return path;
}

static void assert_same_trace(const shs_trace_t *a, const shs_trace_t *b) {
    assert_string_equal(a->format, b->format);
    size_t na, nb;
    char *ta = trace_as_text(a, &na), *tb = trace_as_text(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ta, tb, na);
    free(ta);
    free(tb);
}

static void expect_refused(const char *path, const char *needle) {
    shs_trace_t *t = NULL;
    shs_status_t st = shs_trace_load(&t, path, NULL);
    assert_null(t);
    assert_int_equal(st, SHS_PARSE);
    if (!strstr(shs_last_error(), path) || !strstr(shs_last_error(), needle))
        fail_msg("want '%s' and the path in: %s", needle, shs_last_error());
}

/* The 8-rank DLRM ET of rank 0 (README of ../shared/traces: 13
 * communication ops), as one gzip member and as three. */
static void test_gzip_pytorch_et_reads_as_the_plain_file(void **state) {
    (void)state;
    char src[1024];
    snprintf(src, sizeof src, "%s/traces/pytorch-et/dlrm-8rank/dlrm_eg_0.json", test_shared_dir());
    size_t n;
    char *plain = trace_slurp(src, &n);
    shs_trace_t *want = trace_load_ok(src);
    assert_string_equal(want->format, "pytorch-et");
    assert_int_equal(want->ranks[0].n, 13);
    shs_trace_t *one = trace_load_ok(gz_write("dlrm_eg_0.json.gz", plain, n, 1));
    assert_same_trace(want, one);
    shs_trace_t *three = trace_load_ok(gz_write("dlrm_eg_0.3members.json.gz", plain, n, 3));
    assert_same_trace(want, three);
    /* the program too: detected through the compression, exit 0 */
    const test_proc_t *p = test_shardsim(60, "replay", gz_write("dlrm_eg_0.json.gz", plain, n, 1), "--check-only", NULL);
    assert_int_equal(p->exit_code, 0);
    if (!strstr(p->out, "format pytorch-et")) fail_msg("stdout: %s", p->out);
    shs_trace_free(want);
    shs_trace_free(one);
    shs_trace_free(three);
    free(plain);
}

/* A directory of gzip'd Kineto rank files reads as the plain directory. */
static void test_gzip_directory(void **state) {
    (void)state;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/kgz", test_tmpdir);
    assert_int_equal(mkdir(dir, 0777), 0);
    for (int r = 0; r < 2; r++) {
        char src[1024], name[64];
        snprintf(src, sizeof src, "%s/traces/cases/kineto-2rank/rank%d.json", SHS_SOURCE_DIR, r);
        snprintf(name, sizeof name, "kgz/rank%d.json.gz", r);
        size_t n;
        char *b = trace_slurp(src, &n);
        gz_write(name, b, n, 1);
        free(b);
    }
    char plain[1024];
    snprintf(plain, sizeof plain, "%s/traces/cases/kineto-2rank", SHS_SOURCE_DIR);
    shs_trace_t *want = trace_load_ok(plain), *got = trace_load_ok(dir);
    assert_int_equal(got->world, 2);
    assert_same_trace(want, got);
    shs_trace_free(want);
    shs_trace_free(got);
}

/* Damaged .gz files: refused with the file and the compressed byte, never
 * read as "unrecognized format" or "malformed JSON". */
static void test_damaged_gzip_refused(void **state) {
    (void)state;
    char src[1024];
    snprintf(src, sizeof src, "%s/traces/pytorch-et/dlrm-8rank/dlrm_eg_0.json", test_shared_dir());
    size_t n;
    char *plain = trace_slurp(src, &n);
    const char *path = gz_write("whole.json.gz", plain, n, 1);
    size_t gn;
    char *gz = trace_slurp(path, &gn);
    assert_true(gn > 4096);
    /* the CRC-32 of the trailer (bytes gn-8 .. gn-5) flipped: zlib's check fails */
    char *bad = malloc(gn);
    assert_non_null(bad);
    memcpy(bad, gz, gn);
    bad[gn - 6] ^= 0x5a;
    expect_refused(test_tmp_write("crc.json.gz", bad, gn), "corrupt gzip data near compressed byte");
    /* a deflate block header made invalid: 0xff bytes where data was */
    memcpy(bad, gz, gn);
    memset(bad + 10, 0xff, 16);
    expect_refused(test_tmp_write("flip.json.gz", bad, gn), "corrupt gzip data");
    /* truncated in the middle */
    expect_refused(test_tmp_write("cut.json.gz", gz, gn / 2), "gzip data truncated");
    /* bytes after the last member */
    memcpy(bad, gz, gn);
    char *tail = realloc(bad, gn + 5);
    assert_non_null(tail);
    memcpy(tail + gn, "hello", 5);
    expect_refused(test_tmp_write("tail.json.gz", tail, gn + 5), "5 bytes that are not gzip data");
    /* only the magic bytes */
    expect_refused(test_tmp_write("magic.gz", "\x1f\x8b", 2), "gzip data truncated");
    free(tail);
    free(gz);
    free(plain);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gzip_pytorch_et_reads_as_the_plain_file),
        cmocka_unit_test(test_gzip_directory),
        cmocka_unit_test(test_damaged_gzip_refused),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
