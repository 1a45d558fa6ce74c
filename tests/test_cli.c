/* test_cli.c - the shardsim program as a user runs it: exit codes and
 * one-line messages for each kind of bad input, and the main job with
 * --check ddp succeeding. Every run has a wall-clock limit: a hang fails. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define BIN SHS_BIN_PATH

/* shardsim with these arguments (NULL-terminated), 120 s at most. */
#define run_args(...) test_shardsim(120.0, __VA_ARGS__)

/* Exit code and a substring of stderr; bad input gives exactly one error line
 * (plus an optional "note:" line), never a crash. */
static void expect_error(const test_proc_t *p, int code, const char *needle) {
    if (p->exit_code != code || !strstr(p->err, needle))
        fail_msg("expected exit %d and '%s' in stderr; got exit %d, stderr:\n%s", code, needle, p->exit_code, p->err);
    assert_non_null(strstr(p->err, "shardsim: error: "));
    const char *nl = strchr(p->err, '\n');
    assert_non_null(nl);
    assert_true(nl[1] == 0 || strncmp(nl + 1, "shardsim: note: ", 16) == 0);
}

static const char *tmp_file(const char *name, const char *content) {
    return test_tmp_write(name, content, strlen(content));
}

static void test_unknown_command_and_option(void **state) {
    (void)state;
    expect_error(run_args("frobnicate", NULL), 2, "unknown command 'frobnicate'");
    expect_error(run_args("train", "--wrold", "4", NULL), 2, "unknown option '--wrold'");
    expect_error(run_args("train", "stray", NULL), 2, "unexpected argument 'stray'");
    expect_error(run_args("train", "--steps", NULL), 2, "--steps needs a value");
    expect_error(run_args("train", "--bogus", NULL), 2, "unknown option '--bogus'");
    expect_error(run_args("train", "--strategy", "zero4", NULL), 2, "unknown strategy 'zero4'");
    expect_error(run_args("train", "--check", "zero1", NULL), 2, "--check takes 'ddp'");
    expect_error(run_args("train", "--optimizer", "lion", NULL), 2, "unknown optimizer 'lion'");
}

static void test_bad_numbers(void **state) {
    (void)state;
    expect_error(run_args("train", "--world", "0", NULL), 2, "--world: 0 is out of range");
    expect_error(run_args("train", "--world", "1000000", NULL), 2, "--world: 1000000 is out of range");
    expect_error(run_args("train", "--world", "-3", NULL), 2, "out of range");
    expect_error(run_args("train", "--world", "99999999999999999999", NULL), 2, "--world: 99999999999999999999 is out of range");
    expect_error(run_args("train", "--steps", "0", NULL), 2, "--steps: 0 is out of range");
    expect_error(run_args("train", "--steps", "ten", NULL), 2, "'ten' is not an integer");
    expect_error(run_args("train", "--lr", "fast", NULL), 2, "'fast' is not a number");
    expect_error(run_args("train", "--device-mem", "80Gb", NULL), 2, "unknown unit");
    expect_error(run_args("train", "--heads", "3", "--channels", "16", NULL), 2, "--heads 3 must divide --channels 16");
    expect_error(run_args("train", "--seed", "-1", NULL), 2, "--seed: -1 is out of range");
    /* conflicting feature options are usage errors */
    expect_error(run_args("train", "--strategy", "zero3", "--shard-group-size", "2", NULL), 2,
                 "--shard-group-size applies to hybrid_shard");
    expect_error(run_args("train", "--world", "6", "--strategy", "hybrid_shard", "--shard-group-size", "4", NULL), 2,
                 "--shard-group-size 4 must divide the world size 6");
    expect_error(run_args("train", "--world", "3", "--reduce-order", "ring", "--check", "ddp", "--inject-bitflip", "1",
                          NULL), 2, "--inject-bitflip needs an exact --check");
    expect_error(run_args("train", "--norm-type", "2", NULL), 2, "--norm-type needs --clip-grad-norm");
    expect_error(run_args("train", "--strategy", "ddp", "--offload", "params", NULL), 1,
                 "offloading parameters needs sharded parameters");
    expect_error(run_args("train", "--param-dtype", "fp8", NULL), 2, "--param-dtype takes f32, bf16 or f16");
    /* outputs go to places that exist and are writable, checked before training */
    expect_error(run_args("train", "--export-safetensors", "/nonexistent/dir/x", NULL), 2,
                 "--export-safetensors /nonexistent/dir/x: its directory does not exist");
    expect_error(run_args("train", "--memory-timeline", "/nonexistent/x.svg", NULL), 2,
                 "--memory-timeline /nonexistent/x.svg: its directory");
}

/* --seed takes any value in 0..2^62 (its upper bound once converted to
 * LONG_MIN, refusing every seed); the same seed gives the same run. */
static void test_seed_values(void **state) {
    (void)state;
    static char first[65536];
    static const char *const seeds[] = {"0", "42", "1337", "4611686018427387904"};
    for (int i = 0; i < 4; i++) {
        const test_proc_t *p = run_args("train", "--world", "1", "--steps", "1", "--layers", "1", "--channels", "8",
                                        "--heads", "2", "--context", "8", "--seed", seeds[i], NULL);
        if (p->exit_code != 0) fail_msg("--seed %s: exit %d: %s", seeds[i], p->exit_code, p->err);
        const char *loss = strstr(p->out, "loss ");
        assert_non_null(loss);
        /* "loss 5.543400 |" : the loss alone, not the step time after the bar */
        if (i == 2) snprintf(first, sizeof first, "%.*s", (int)strcspn(loss, "|"), loss);
    }
    const test_proc_t *p = run_args("train", "--world", "1", "--steps", "1", "--layers", "1", "--channels", "8",
                                    "--heads", "2", "--context", "8", "--seed", "1337", NULL);
    const char *again = strstr(p->out, "loss ");
    assert_non_null(again);
    assert_int_equal(strcspn(again, "|"), strlen(first));
    assert_int_equal(strncmp(again, first, strlen(first)), 0);
}

/* Option order never matters, and options of the other optimizer are refused. */
static void test_optimizer_options(void **state) {
    (void)state;
    static char a[65536], b[65536];
    const test_proc_t *p = run_args("train", "--world", "1", "--steps", "3", "--layers", "1", "--channels", "16",
                                    "--context", "16", "--momentum", "0.9", "--optimizer", "sgd", NULL);
    assert_int_equal(p->exit_code, 0);
    snprintf(a, sizeof a, "%s", p->out);
    p = run_args("train", "--world", "1", "--steps", "3", "--layers", "1", "--channels", "16", "--context", "16",
                 "--optimizer", "sgd", "--momentum", "0.9", NULL);
    assert_int_equal(p->exit_code, 0);
    snprintf(b, sizeof b, "%s", p->out);
    const char *la = strstr(a, "step 3/3 | loss "), *lb = strstr(b, "step 3/3 | loss ");
    assert_non_null(la);
    assert_non_null(lb);
    assert_memory_equal(la, lb, 30);
    p = run_args("train", "--world", "1", "--steps", "3", "--layers", "1", "--channels", "16", "--context", "16",
                 "--optimizer", "sgd", NULL);
    assert_memory_not_equal(strstr(p->out, "step 3/3 | loss "), lb, 30); /* momentum made a difference */
    expect_error(run_args("train", "--momentum", "0.9", NULL), 2, "--momentum applies to sgd, not adamw");
    expect_error(run_args("train", "--optimizer", "sgd", "--beta1", "0.8", NULL), 2, "--beta1 applies to adamw, not sgd");
    expect_error(run_args("train", "--beta1", "1", NULL), 2, "--beta1: 1 is out of range [0, 1)");
    expect_error(run_args("train", "--lr", "1e-50", NULL), 2, "below the smallest f32");
}

/* AdamW with eps = 0 makes 0/0 on padding: padding must still stay 0. */
static void test_eps_zero_keeps_padding(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--world", "3", "--steps", "2", "--layers", "1", "--channels", "16",
                                    "--context", "16", "--eps", "0", "--check", "ddp", NULL);
    if (p->exit_code != 0) fail_msg("exit %d\n%s\n%s", p->exit_code, p->out, p->err);
}

static void test_divergence_and_output_errors(void **state) {
    (void)state;
    expect_error(run_args("train", "--world", "2", "--steps", "5", "--layers", "1", "--channels", "16", "--context",
                          "16", "--lr", "1e6", NULL), 1, "training diverged");
    /* a full disk is an error, not a silent success */
    char *argv[] = {"/bin/sh", "-c", BIN " train --world 1 --steps 1 --layers 1 --channels 8 --context 8 > /dev/full",
                    NULL};
    static test_proc_t full;
    test_run_process(argv, 60, &full);
    assert_int_equal(full.exit_code, 1);
    assert_non_null(strstr(full.err, "cannot write the output"));
}

static void test_bad_data_files(void **state) {
    (void)state;
    expect_error(run_args("train", "--data", "/nonexistent/corpus.txt", NULL), 1,
                 "cannot read data file '/nonexistent/corpus.txt'");
    expect_error(run_args("train", "--data", tmp_file("empty.txt", ""), NULL), 1, "is empty");
    expect_error(run_args("train", "--data", test_tmpdir, NULL), 1, "is a directory");
    /* devices and pipes could block or never end: refused before reading */
    expect_error(run_args("train", "--data", "/dev/zero", NULL), 1, "is not a regular file");
    expect_error(run_args("train", "--model-file", "/dev/zero", NULL), 1, "is not a regular file");
    /* 32 bytes of text cannot hold one sequence of context 64 */
    expect_error(run_args("train", "--data", tmp_file("short.txt", "thirty-two bytes of text here!!\n"), "--context", "64",
                          NULL), 1, "context length 64 needs at least 65 bytes");
}

static void test_model_does_not_fit(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--world", "2", "--device-mem", "1MiB", "--steps", "1", NULL);
    expect_error(p, 1, "out of device memory");
    assert_non_null(strstr(p->err, "rank "));
    assert_non_null(strstr(p->err, "of 1.00 MiB in use"));
}

/* The main job on the real corpus: ZeRO-3 matches DDP bit for bit. */
static void test_train_check_ddp_passes(void **state) {
    (void)state;
    char data[1024];
    snprintf(data, sizeof data, "%s/data/tinyshakespeare.txt", test_shared_dir());
    const char *strategies[] = {"zero1", "zero2", "zero3"};
    for (int i = 0; i < 3; i++) {
        const test_proc_t *p = run_args("train", "--world", "3", "--strategy", strategies[i], "--data", data, "--steps",
                                        "3", "--layers", "1", "--channels", "24", "--heads", "2", "--context", "16",
                                        "--check", "ddp", NULL);
        if (p->exit_code != 0) fail_msg("exit %d\n%s\n%s", p->exit_code, p->out, p->err);
        assert_non_null(strstr(p->out, "step 3/3"));
        assert_non_null(strstr(p->out, "ddp check: bit-identical"));
        assert_non_null(strstr(p->out, "matched DDP bit for bit at all 3 steps"));
        assert_non_null(strstr(p->out, "peak device memory per rank"));
        assert_non_null(strstr(p->out, "reduce_scatter"));
    }
}

/* A planted one-bit fault is found and named, with exit code 3: under
 * ZeRO-3 in the owner's shard, under ZeRO-2 in the last rank's replica. */
static void test_check_names_first_difference(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--world", "3", "--strategy", "zero3", "--steps", "4", "--layers", "1",
                                    "--channels", "16", "--context", "16", "--check", "ddp", "--inject-bitflip", "2",
                                    NULL);
    if (p->exit_code != 3) fail_msg("exit %d\n%s\n%s", p->exit_code, p->out, p->err);
    assert_non_null(strstr(p->out, "step 1/4"));
    assert_non_null(strstr(p->out, "ddp check: PARAMETERS DIFFER"));
    assert_null(strstr(p->out, "step 3/4"));
    assert_non_null(strstr(p->err, "check failed at step 2: first difference in unit embed, tensor wte, "
                                   "element 0 (row 0, col 0)"));
    p = run_args("train", "--world", "3", "--strategy", "zero2", "--steps", "3", "--layers", "1", "--channels", "16",
                 "--context", "16", "--check", "ddp", "--inject-bitflip", "1", NULL);
    if (p->exit_code != 3) fail_msg("exit %d\n%s\n%s", p->exit_code, p->out, p->err);
    assert_non_null(strstr(p->out, "ddp check: REPLICAS DIFFER"));
    assert_non_null(strstr(p->err, "check failed at step 1: in the zero2 run, rank 2's copy of unit embed, tensor wte, "
                                   "element 0 differs from the shard owner's"));
    expect_error(run_args("train", "--inject-bitflip", "1", NULL), 2, "--inject-bitflip needs --check ddp");
    expect_error(run_args("train", "--check", "ddp", "--steps", "2", "--inject-bitflip", "3", NULL), 2,
                 "--inject-bitflip needs --check ddp");
}

/* No --data: the built-in corpus, so a fresh machine needs nothing else. */
static void test_train_builtin_corpus(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--world", "2", "--steps", "2", "--layers", "1", "--channels", "16",
                                    "--context", "16", NULL);
    if (p->exit_code != 0) fail_msg("exit %d\n%s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "data built-in"));
    assert_non_null(strstr(p->out, "final loss"));
}

static void test_help_and_version(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--help", NULL);
    assert_int_equal(p->exit_code, 0);
    assert_non_null(strstr(p->out, "--device-mem"));
    p = run_args("version", NULL);
    assert_int_equal(p->exit_code, 0);
    assert_non_null(strstr(p->out, "shardsim "));
}

/* GradScaler's knobs from the CLI: the default model at world 2 and scale
 * 131072 overflows in f16 on step 1 (skipped everywhere), so the next scale
 * is 131072 x backoff; with growth every good step it is then x growth (at
 * 65536 step 2 fits). The expected scales are that arithmetic, done here. */
static void test_loss_scaler_options(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--world", "2", "--steps", "2", "--param-dtype", "f16", "--init-scale",
                                    "131072", "--backoff-factor", "0.25", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "step 1/2 | loss"));
    assert_non_null(strstr(p->out, "scale 32768 (overflow: step skipped)")); /* 131072 x 0.25 */
    p = run_args("train", "--world", "2", "--steps", "2", "--param-dtype", "f16", "--init-scale", "131072",
                 "--growth-interval", "1", "--growth-factor", "4", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "scale 65536 (overflow: step skipped)")); /* 131072 x 0.5 */
    assert_non_null(strstr(p->out, "scale 262144 |"));                       /* 65536 x 4 after one good step */
    expect_error(run_args("train", "--backoff-factor", "0.5", NULL), 2, "apply to --param-dtype f16");
    expect_error(run_args("train", "--param-dtype", "f16", "--backoff-factor", "1", NULL), 2, "--backoff-factor: 1 is out of range");
    expect_error(run_args("train", "--param-dtype", "f16", "--growth-factor", "0.5", NULL), 2, "--growth-factor: 0.5 is out of range");
    expect_error(run_args("train", "--param-dtype", "f16", "--growth-factor", "1", NULL), 2, "--growth-factor must be > 1 (got '1')");
}

int main(void) {
    if (access(BIN, X_OK) != 0) {
        fprintf(stderr, "test_cli: %s is not built (run make)\n", BIN);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_command_and_option),
        cmocka_unit_test(test_bad_numbers),
        cmocka_unit_test(test_seed_values),
        cmocka_unit_test(test_bad_data_files),
        cmocka_unit_test(test_optimizer_options),
        cmocka_unit_test(test_eps_zero_keeps_padding),
        cmocka_unit_test(test_divergence_and_output_errors),
        cmocka_unit_test(test_model_does_not_fit),
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_train_builtin_corpus),
        cmocka_unit_test(test_check_names_first_difference),
        cmocka_unit_test(test_train_check_ddp_passes),
        cmocka_unit_test(test_loss_scaler_options),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
