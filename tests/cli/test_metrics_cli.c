/* test_metrics_cli.c - `train --metrics FILE.jsonl` (sim/train_metrics.h):
 * one JSON object per step and line, its figures checked against what the
 * same run prints on stdout (the loss's f32 bits, the grad norm, the loss
 * scale, the peak memory of the summary) and against the options (lr,
 * tokens = world x micro-batch x context x grad-accum); written durably:
 * whole lines only, the completed steps kept after a failure, an earlier
 * file untouched by a run that fails before its first step. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "cli/cli_expect.h"

#define run_args(...) test_shardsim(120.0, __VA_ARGS__)
#define SMALL "--layers", "1", "--channels", "16", "--heads", "2", "--context", "16", "--micro-batch", "2"

static const char *tmp_path(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir, name);
    return path;
}

/* The file's text (at most n-1 bytes), or fail. */
static void read_text(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = 0;
    fclose(f);
}

/* The number after "KEY": in the JSON line l; *is_null set for null. */
static double field(const char *l, const char *key, int *is_null) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *v = strstr(l, k);
    if (!v || v > strchr(l, '\n')) fail_msg("no %s in %.*s", key, (int)strcspn(l, "\n"), l);
    v += strlen(k);
    *is_null = !strncmp(v, "null", 4);
    return *is_null ? 0 : strtod(v, NULL);
}

static double number(const char *l, const char *key) {
    int is_null;
    double v = field(l, key, &is_null);
    if (is_null) fail_msg("%s is null in %.*s", key, (int)strcspn(l, "\n"), l);
    return v;
}

/* Each step's line against the run's stdout: loss bits, grad norm, scale. */
static void test_lines_match_the_run(void **state) {
    (void)state;
    const char *path = tmp_path("m.jsonl");
    const test_proc_t *p = run_args("train", SMALL, "--world", "3", "--steps", "4", "--grad-accum", "2", "--lr", "0.003",
                                    "--param-dtype", "f16", "--clip-grad-norm", "1", "--loss-bits", "--metrics", path, NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    static char text[65536];
    read_text(path, text, sizeof text);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1); /* renamed at the end */
    const char *l = text, *out = p->out;
    for (long step = 1; step <= 4; step++) {
        if (*l != '{' || !strchr(l, '\n') || strchr(l, '\n')[-1] != '}') fail_msg("line %ld is not one object:\n%s", step, text);
        assert_int_equal((long)number(l, "step"), step);
        /* stdout's "step k/4 | loss ... | loss bits 0x... | scale S | grad norm G" */
        char key[32];
        snprintf(key, sizeof key, "step %ld/4 |", step);
        const char *sl = strstr(out, key);
        assert_non_null(sl);
        unsigned bits;
        double scale, norm;
        const char *b = strstr(sl, "loss bits 0x");
        assert_non_null(b);
        assert_int_equal(sscanf(b, "loss bits 0x%x | scale %lf | grad norm %lf", &bits, &scale, &norm), 3);
        float loss = (float)number(l, "loss");
        uint32_t got;
        memcpy(&got, &loss, sizeof got);
        if (got != bits) fail_msg("step %ld: loss %.9g is 0x%08x, stdout says 0x%08x", step, (double)loss, got, bits);
        if (fabs(number(l, "grad_norm") - norm) > 1e-5 * norm) fail_msg("step %ld: grad norm vs %g", step, norm);
        assert_true(number(l, "loss_scale") == scale);
        assert_true((float)number(l, "lr") == 0.003f);
        assert_int_equal((long)number(l, "tokens"), 3L * 2 * 16 * 2); /* world x micro-batch x context x accum */
        assert_non_null(strstr(l, "\"step_skipped\": false"));
        double sec = number(l, "seconds"), tps = number(l, "tokens_per_s");
        assert_true(sec > 0);
        if (fabs(tps - 192.0 / sec) > 1e-3 * tps + 0.05) fail_msg("tokens_per_s %g vs 192 / %g", tps, sec);
        assert_true(number(l, "device_mem_bytes") > 0);
        assert_true(number(l, "device_mem_peak_bytes") >= number(l, "device_mem_bytes"));
        l = strchr(l, '\n') + 1;
    }
    assert_int_equal(*l, 0);
    /* the last line's peak is the summary's largest rank total (MiB, 3 decimals) */
    const char *last = strrchr(text, '{');
    double peak = number(last, "device_mem_peak_bytes") / 1048576.0, most = 0;
    for (const char *r = strstr(out, "\n    0  "); r && r[5] >= '0' && r[5] <= '9'; r = strchr(r + 1, '\n')) {
        double v[7];
        int rank;
        if (sscanf(r, " %d %lf %lf %lf %lf %lf %lf %lf", &rank, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) != 8) break;
        if (v[6] > most) most = v[6];
    }
    if (fabs(peak - most) > 0.0005) fail_msg("metrics peak %.4f MiB, summary %.3f MiB", peak, most);
}

/* Without clipping and f16 the norm and scale are null, not made up. */
static void test_nulls_without_clipping_or_scaling(void **state) {
    (void)state;
    const char *path = tmp_path("plain.jsonl");
    const test_proc_t *p = run_args("train", SMALL, "--world", "2", "--steps", "1", "--metrics", path, NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    char text[4096];
    read_text(path, text, sizeof text);
    assert_non_null(strstr(text, "\"grad_norm\": null, \"lr\": 0.001, \"loss_scale\": null,"));
}

/* lr is what each update applied: under HF's linear schedule with W = 2
 * warmup steps of T = 4 (transformers get_linear_schedule_with_warmup:
 * j < W: j / W, else (T - j) / (T - W), j the steps applied before) the
 * factors are 0, 0.5, 1, 0.5. A step skipped for an fp16 overflow applied
 * none: lr and grad_norm are null, step_skipped true. */
static void test_lr_and_skipped_steps(void **state) {
    (void)state;
    const char *path = tmp_path("lr.jsonl");
    char keep[512];
    snprintf(keep, sizeof keep, "%s", path);
    const test_proc_t *p = run_args("train", SMALL, "--steps", "4", "--lr", "0.01", "--lr-schedule", "linear",
                                    "--warmup-steps", "2", "--metrics", keep, NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    char text[8192];
    read_text(keep, text, sizeof text);
    const double factor[4] = {0.0, 0.5, 1.0, 0.5};
    const char *l = text;
    for (int j = 0; j < 4; j++, l = strchr(l, '\n') + 1)
        if ((float)number(l, "lr") != (float)(0.01 * factor[j]))
            fail_msg("step %d: lr %g, expected %g", j + 1, number(l, "lr"), 0.01 * factor[j]);
    /* a loss scale of 2^40 overflows f16 (max 65504) at once: step 1 is skipped, the scale halves */
    p = run_args("train", SMALL, "--world", "2", "--steps", "1", "--param-dtype", "f16", "--init-scale", "1099511627776",
                 "--clip-grad-norm", "1", "--metrics", keep, NULL);
    if (p->exit_code != 0 || !strstr(p->out, "(overflow: step skipped)")) fail_msg("exit %d: %s%s", p->exit_code, p->out, p->err);
    read_text(keep, text, sizeof text);
    if (strncmp(text, "{\"step\": 1, ", 12) || !strstr(text, "\"grad_norm\": null, \"lr\": null, \"loss_scale\": ") ||
        !strstr(text, "\"step_skipped\": true,") || (float)number(text, "loss_scale") != 549755813888.0f /* 2^39 */)
        fail_msg("the skipped step's line:\n%s", text);
}

/* A run that fails at step 3 (diverged) keeps steps 1 and 2, whole; one that
 * fails before its first step leaves the earlier file as it was. */
static void test_failures_keep_whole_lines(void **state) {
    (void)state;
    const char *path = tmp_path("fail.jsonl");
    char keep[512];
    snprintf(keep, sizeof keep, "%s", path);
    test_tmp_write("fail.jsonl", "earlier\n", 8);
    const test_proc_t *p = run_args("train", SMALL, "--world", "2", "--steps", "3", "--device-mem", "64KiB",
                                    "--metrics", keep, NULL);
    test_expect_error(p, 1, "out of device memory");
    char text[4096];
    read_text(keep, text, sizeof text);
    assert_string_equal(text, "earlier\n");
    p = run_args("train", SMALL, "--world", "1", "--steps", "3", "--lr", "1e6", "--metrics", keep, NULL);
    test_expect_error(p, 1, "training diverged");
    read_text(keep, text, sizeof text);
    const char *second = strchr(text, '\n') + 1;
    if (strncmp(text, "{\"step\": 1,", 11) || strncmp(second, "{\"step\": 2,", 11) || strchr(second, '\n')[1] != 0)
        fail_msg("expected the lines of steps 1 and 2:\n%s", text);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%.500s.tmp", keep);
    assert_int_equal(access(tmp, F_OK), -1);
    /* a full disk: the error names --metrics, exit 1 */
    p = run_args("train", SMALL, "--steps", "1", "--metrics", "/dev/full", NULL);
    test_expect_error(p, 1, "--metrics: /dev/full: write failed: No space left on device");
}

/* A write that fails half way through a line (the file size limit,
 * RLIMIT_FSIZE, with SIGXFSZ ignored: write() then writes what fits and
 * fails with EFBIG): the part that reached the file is cut off, the whole
 * lines before it are kept. */
static void test_cut_line_is_removed(void **state) {
    (void)state;
    const char *path = tmp_path("cut.jsonl");
    char keep[512];
    snprintf(keep, sizeof keep, "%s", path);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 400; /* a line is about 250 bytes: the second one crosses the limit */
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN); /* inherited through exec */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    const test_proc_t *p = run_args("train", SMALL, "--steps", "3", "--metrics", keep, NULL);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);
    test_expect_error(p, 1, "--metrics: ");
    assert_non_null(strstr(p->err, "File too large"));
    char text[4096];
    read_text(keep, text, sizeof text);
    const char *nl = strchr(text, '\n');
    if (strncmp(text, "{\"step\": 1,", 11) || !nl || nl[1] != 0) fail_msg("expected step 1's line alone:\n%s", text);
}

/* Where it cannot go, refused before training (exit 2). */
static void test_refused_paths(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--metrics", "/nonexistent-dir/m.jsonl", NULL);
    test_expect_error(p, 2, "--metrics /nonexistent-dir/m.jsonl: cannot create");
    assert_string_equal(p->out, "");
    test_expect_error(run_args("train", "--metrics", test_tmpdir, NULL), 2, "is a directory");
    const char *data = test_tmp_write("text.txt", "some training text, long enough for a context of 16 bytes\n", 57);
    char d[512];
    snprintf(d, sizeof d, "%s", data);
    test_expect_error(run_args("train", "--data", d, "--metrics", d, NULL), 2, "is the input");
    const char *path = tmp_path("same.out");
    char s[512];
    snprintf(s, sizeof s, "%s", path);
    test_expect_error(run_args("train", "--metrics", s, "--export-safetensors", s, NULL), 2, "name one file");
}

int main(void) {
    if (access(SHS_BIN_PATH, X_OK) != 0) {
        fprintf(stderr, "test_metrics_cli: %s is not built (run make)\n", SHS_BIN_PATH);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_match_the_run),
        cmocka_unit_test(test_nulls_without_clipping_or_scaling),
        cmocka_unit_test(test_lr_and_skipped_steps),
        cmocka_unit_test(test_failures_keep_whole_lines),
        cmocka_unit_test(test_cut_line_is_removed),
        cmocka_unit_test(test_refused_paths),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
