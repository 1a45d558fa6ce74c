/* test_cli_input.c - command lines a new user gets wrong, and what they
 * get back: a clear refusal (exit 2 for usage errors, naming the option)
 * before anything runs, never a hang, a silent guess or a message that
 * floods the terminal. Each case here once did one of those: a FIFO as a
 * checkpoint index blocked --resume forever; a dangling link or an empty
 * path for --save / --trace passed the check and failed after training;
 * --clip-grad-norm 0 silently meant "off"; a repeated option silently took
 * its last value; binary bytes and a 100,000-character argument were
 * echoed into error lines; a few conflicts exited 1 where the rest exit 2. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "cli/cli_expect.h"

#define run_args(...) test_shardsim(120.0, __VA_ARGS__)

/* A small, fast model for the runs that train. */
#define SMALL "--layers", "1", "--channels", "16", "--heads", "2", "--context", "16"

static const char *tmp_path(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir, name);
    return path;
}

/* A checkpoint directory whose index is a FIFO: opening it for reading
 * waited for a writer that never came. Now refused at once (the rank files
 * are read the same way). */
static void test_resume_refuses_a_fifo_index(void **state) {
    (void)state;
    char dir[512], fifo[600];
    snprintf(dir, sizeof dir, "%s", tmp_path("fifo-ck"));
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(fifo, sizeof fifo, "%s/index.txt", dir);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    const test_proc_t *p = test_shardsim(30.0, "train", SMALL, "--world", "1", "--steps", "1", "--resume", dir, NULL);
    assert_false(p->timed_out);
    test_expect_error(p, 1, "index.txt: not a regular file");
}

/* --save and --trace name directories written at the end of the run: what
 * the writers would refuse then is refused now, before a step runs. */
static void test_output_dirs_refused_before_training(void **state) {
    (void)state;
    char link[512], loop[512];
    snprintf(link, sizeof link, "%s", tmp_path("dangling"));
    assert_int_equal(symlink("/nonexistent-shardsim-target/ck", link), 0);
    snprintf(loop, sizeof loop, "%s", tmp_path("loop"));
    assert_int_equal(symlink(loop, loop), 0);
    const char *opts[] = {"--save", "--trace"};
    for (int k = 0; k < 2; k++) {
        const test_proc_t *p = run_args("train", SMALL, "--steps", "1", opts[k], link, NULL);
        test_expect_error(p, 2, "is a symbolic link to nothing (its target does not exist)");
        assert_string_equal(p->out, ""); /* nothing trained */
        p = run_args("train", SMALL, "--steps", "1", opts[k], loop, NULL);
        test_expect_error(p, 2, "is a symbolic link that loops");
        p = run_args("train", SMALL, "--steps", "1", opts[k], "", NULL);
        test_expect_error(p, 2, ": the value is empty");
        assert_string_equal(p->out, "");
    }
    test_expect_error(run_args("train", "--data=", NULL), 2, "--data: the value is empty");
    /* a link to a directory that exists is written through */
    char target[512], good[512];
    snprintf(target, sizeof target, "%s", tmp_path("ck-target"));
    assert_int_equal(mkdir(target, 0755), 0);
    snprintf(good, sizeof good, "%s", tmp_path("ck-link"));
    assert_int_equal(symlink(target, good), 0);
    const test_proc_t *p = run_args("train", SMALL, "--world", "2", "--steps", "1", "--save", good, NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    char index[600];
    snprintf(index, sizeof index, "%s/index.txt", target);
    assert_int_equal(access(index, R_OK), 0);
}

/* torch.nn.utils.clip_grad_norm_(max_norm=0) multiplies every gradient by
 * 0 / (norm + 1e-6) = 0; DeepSpeed's gradient_clipping 0 and the HF
 * Trainer's max_grad_norm 0 mean no clipping. shardsim used to take 0 as
 * off without a word: the ambiguity is refused, naming both readings. */
static void test_clip_grad_norm_zero_is_refused(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", SMALL, "--steps", "1", "--clip-grad-norm", "0", NULL);
    test_expect_error(p, 2, "--clip-grad-norm 0 is ambiguous");
    assert_non_null(strstr(p->err, "zeroes every gradient"));
    assert_non_null(strstr(p->err, "turn clipping off"));
    p = run_args("train", SMALL, "--steps", "1", "--clip-grad-norm", "0.5", NULL);
    if (p->exit_code != 0 || !strstr(p->out, "| grad norm ")) fail_msg("exit %d\n%s%s", p->exit_code, p->out, p->err);
}

/* The last of two values silently won; now any option given twice is
 * refused (the same value too: one of them is a typo or a leftover), in
 * every command; repeatable options (bench --world, --op) still repeat. */
static void test_repeated_option_is_refused(void **state) {
    (void)state;
    test_expect_error(run_args("train", "--steps", "3", "--steps", "5", NULL), 2, "option --steps is given twice");
    test_expect_error(run_args("train", "--world=2", "--world", "2", NULL), 2, "option --world is given twice");
    test_expect_error(run_args("train", "--pack", "--doc-sep", "0", "--pack", NULL), 2, "option --pack is given twice");
    test_expect_error(run_args("compare", "--world", "8", "--world", "16", NULL), 2, "option --world is given twice");
    test_expect_error(run_args("compare", "-o", "/dev/null", "--output", "/dev/null", NULL), 2,
                      "option --output is given twice");
    test_expect_error(run_args("replay", "x", "--world", "2", "--world", "4", NULL), 2, "option --world is given twice");
    const test_proc_t *p = run_args("bench", "--only", "coll", "--op", "broadcast", "--world", "2", "--world", "3",
                                    "--max-bytes", "4K", "--seconds", "0.01", NULL);
    if (p->exit_code != 0) fail_msg("repeatable --world: exit %d: %s", p->exit_code, p->err);
}

/* stderr holds one line, short, of printable characters only: every byte
 * is printable ASCII, a tab-free line feed at the end, or part of valid
 * UTF-8. */
static void expect_shown_safely(const test_proc_t *p, size_t max_len) {
    size_t n = strlen(p->err);
    if (n == 0 || n > max_len) fail_msg("stderr of %zu bytes (at most %zu):\n%.3000s", n, max_len, p->err);
    const unsigned char *s = (const unsigned char *)p->err;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n' && i + 1 == n) continue;
        if (s[i] < 0x20 || s[i] == 0x7f) fail_msg("byte 0x%02x at %zu of stderr:\n%s", s[i], i, p->err);
        if (s[i] >= 0x80) { /* only the 2-byte sequences the tests pass */
            if (!(s[i] >= 0xc2 && s[i] <= 0xdf && i + 1 < n && (s[i + 1] & 0xc0) == 0x80))
                fail_msg("invalid UTF-8 byte 0x%02x at %zu of stderr", s[i], i);
            i++;
        }
    }
}

/* Binary bytes and huge arguments in error lines: escaped as \xHH and
 * shortened around "[... N bytes not shown ...]", in every command (the
 * one error-line writer does it); valid UTF-8 is kept. */
static void test_messages_escape_and_shorten(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--strategy", "z\x01\x1b[31m\xff\xfez", NULL);
    test_expect_error(p, 2, "unknown strategy 'z\\x01\\x1b[31m\\xff\\xfez'");
    expect_shown_safely(p, 1000);
    p = run_args("train", "--strategy", "z\xc3\xa9ro", NULL); /* "zéro": valid UTF-8 stays */
    test_expect_error(p, 2, "unknown strategy 'z\xc3\xa9ro'");

    static char huge[100001];
    memset(huge, 'a', sizeof huge - 1);
    p = run_args("train", "--strategy", huge, NULL);
    test_expect_error(p, 2, "bytes not shown ...]");
    expect_shown_safely(p, 1000);
    /* spaces inside do not let it through: the line is capped too */
    for (size_t i = 3; i < sizeof huge - 1; i += 4) huge[i] = ' ';
    p = run_args("compare", "--model", huge, NULL);
    test_expect_error(p, 2, "bytes not shown]");
    expect_shown_safely(p, 2600);
    p = run_args("train", "--data", huge, NULL); /* a runtime error (exit 1) from the library's text */
    assert_int_equal(p->exit_code, 1);
    expect_shown_safely(p, 2600);

    /* a binary file's bytes, quoted by a reader's message */
    static unsigned char bin[60000];
    for (size_t i = 0; i < sizeof bin; i++) bin[i] = (unsigned char)(0x80 + i % 0x7f);
    bin[0] = '{';
    bin[1] = '"';
    const char *path = test_tmp_write("binary.json", bin, sizeof bin);
    p = run_args("train", "--hf-config", path, NULL);
    assert_int_equal(p->exit_code, 1);
    expect_shown_safely(p, 2600);
    p = run_args("train", "--ds-config", path, NULL);
    assert_int_equal(p->exit_code, 1);
    expect_shown_safely(p, 2600);
}

/* Option conflicts the library found only after setup exited 1 (as a
 * failed run); now they are usage errors, named and exit 2, before
 * anything is printed. */
static void test_conflicts_are_usage_errors(void **state) {
    (void)state;
    const char *mlp = SHS_SOURCE_DIR "/sim/models/mlp.txt";
    const test_proc_t *p = run_args("train", "--pack", "--doc-sep", "0x0a", NULL);
    test_expect_error(p, 2, "--pack needs per-document attention masks and positions, which only a Llama model has "
                            "(the GPT would attend");
    assert_string_equal(p->out, "");
    p = run_args("train", "--model-file", mlp, "--pack", "--doc-sep", "0x0a", NULL);
    test_expect_error(p, 2, "(the network of --model-file would attend");
    p = run_args("train", "--model-file", mlp, "--wrap", "size:1000", NULL);
    test_expect_error(p, 2, "--wrap size:1000: size-based wrapping applies to the GPT and the Llama only, not to "
                            "--model-file");
    static const char *const not_sharded[] = {"ddp", "zero1", "zero2", "hybrid_shard_zero2", "NO_SHARD", "oss", "2"};
    for (size_t k = 0; k < sizeof not_sharded / sizeof not_sharded[0]; k++) {
        p = run_args("train", "--world", "2", "--strategy", not_sharded[k], "--offload", "params", NULL);
        test_expect_error(p, 2, "--offload params needs sharded parameters (zero3 or hybrid_shard)");
        assert_string_equal(p->out, "");
    }
    p = run_args("train", SMALL, "--world", "2", "--steps", "1", "--strategy", "FULL_SHARD", "--offload", "params", NULL);
    if (p->exit_code != 0) fail_msg("FULL_SHARD offloads params: exit %d: %s", p->exit_code, p->err);
}

int main(void) {
    if (access(SHS_BIN_PATH, X_OK) != 0) {
        fprintf(stderr, "test_cli_input: %s is not built (run make)\n", SHS_BIN_PATH);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_refuses_a_fifo_index),
        cmocka_unit_test(test_output_dirs_refused_before_training),
        cmocka_unit_test(test_clip_grad_norm_zero_is_refused),
        cmocka_unit_test(test_repeated_option_is_refused),
        cmocka_unit_test(test_messages_escape_and_shorten),
        cmocka_unit_test(test_conflicts_are_usage_errors),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
