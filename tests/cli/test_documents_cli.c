/* test_documents_cli.c - `shardsim train --pack / --pad / --doc-sep /
 * --loss-norm` run as a child process (sim/cmd_train.c,
 * sim/train_options.c): the header's document statistics, refusals of
 * corpora and steps whose loss has no mean (exit 1, naming the file and
 * byte, or the step), the header without documents, and the help's word on
 * digits in --doc-sep.
 *
 * Independent references: the corpora are written here, so their document
 * counts (all, empty, longer than T) are known by construction.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define run_args(...) test_shardsim(120.0, __VA_ARGS__)
#define TINY "--world", "2", "--layers", "1", "--channels", "16", "--heads", "2", "--context", "8", "--micro-batch", "2"

static void expect(const test_proc_t *p, int code, const char *in_out, const char *in_err) {
    if (p->exit_code != code || (in_out && !strstr(p->out, in_out)) || (in_err && !strstr(p->err, in_err)))
        fail_msg("exit %d (want %d); want stdout to hold '%s', stderr '%s'\n--- stdout:\n%s\n--- stderr:\n%s",
                 p->exit_code, code, in_out ? in_out : "", in_err ? in_err : "", p->out, p->err);
}

/* Six documents: "ab\n", an empty one (a second '\n' in a row), "cd\n",
 * one of 20 bytes (longer than T = 8), "xy\n", and a last "z" without a
 * separator. */
static void test_header_statistics(void **state) {
    (void)state;
    static const char text[] = "ab\n\ncd\nabcdefghijklmnopqrs\nxy\nz";
    char path[4096];
    snprintf(path, sizeof path, "%s", test_tmp_write("docs.txt", text, strlen(text)));
    const test_proc_t *p = run_args("train", TINY, "--pad", "--doc-sep", "\\n", "--data", path, "--steps", "1", NULL);
    expect(p, 0, "6 in ", NULL);
    expect(p, 0, "1 empty (the separator alone), 1 longer than T=8", NULL);
}

/* A corpus of separators alone: every step's global batch is padding and
 * documents' ends. global-tokens refuses step 1 by number; per-micro-batch
 * refuses naming rank, micro-batch and step, suggesting global-tokens. */
static void test_no_targets(void **state) {
    (void)state;
    char seps[40];
    memset(seps, '\n', sizeof seps);
    char path[4096];
    snprintf(path, sizeof path, "%s", test_tmp_write("seps.txt", seps, sizeof seps));
    const test_proc_t *p = run_args("train", TINY, "--pad", "--doc-sep", "\\n", "--data", path, "--steps", "3", NULL);
    expect(p, 1, NULL, "step 1: the global batch has no target tokens");
    if (strstr(p->err, "step 1: step 1")) fail_msg("the step is named twice: %s", p->err);
    p = run_args("train", TINY, "--pad", "--doc-sep", "\\n", "--data", path, "--steps", "3", "--loss-norm",
                 "per-micro-batch", NULL);
    expect(p, 1, NULL, "step 1: rank 0's micro-batch 0");
    expect(p, 1, NULL, "--loss-norm global-tokens");
}

/* A corpus without the separator byte would be one document: refused,
 * naming the file and the byte ("--doc-sep 9" is byte 0x09, a tab). */
static void test_no_separator(void **state) {
    (void)state;
    static const char text[] = "digits 9 9 9 but no tab anywhere in this text";
    char path[4096];
    snprintf(path, sizeof path, "%s", test_tmp_write("plain.txt", text, strlen(text)));
    const test_proc_t *p = run_args("train", TINY, "--pad", "--doc-sep", "9", "--data", path, "--steps", "1", NULL);
    expect(p, 1, NULL, "plain.txt");
    expect(p, 1, NULL, "separator byte 0x09");
    /* the character '9' as '\x39' is found */
    p = run_args("train", TINY, "--pad", "--doc-sep", "\\x39", "--data", path, "--steps", "1", NULL);
    expect(p, 0, "separator byte 0x39", NULL);
}

/* Without documents, --loss-norm prints the normalization alone, not a
 * "documents: none" line with a separator that is not used. */
static void test_loss_norm_without_documents(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", TINY, "--steps", "1", "--loss-norm", "global-tokens", NULL);
    expect(p, 0, "  loss normalized over the global batch's tokens", NULL);
    if (strstr(p->out, "documents")) fail_msg("a documents line without documents:\n%s", p->out);
}

/* --help: digits in --doc-sep are a byte value, and the Llama is named. */
static void test_help(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--help", NULL);
    expect(p, 0, "9 is byte 0x09", NULL);
    expect(p, 0, "'\\x39' for the character '9'", NULL);
    expect(p, 0, "or a Llama-family one (--hf-config)", NULL);
    /* --attention, --recompute-granularity, --checkpoint-activations,
     * --autocast and --wrap run with the Llama; dropout is the GPT's only */
    const char *gpt_only = strstr(p->out, "the GPT only");
    int n = 0;
    for (; gpt_only; gpt_only = strstr(gpt_only + 1, "the GPT only")) n++;
    if (n != 1) fail_msg("want 'the GPT only' once (--dropout), got %d:\n%s", n, p->out);
    expect(p, 0, "meta backends; the GPT and the Llama", NULL);
    expect(p, 0, "(gpt.h, llama.h); the GPT and the\n", NULL);
}

int main(void) {
    if (access(SHS_BIN_PATH, X_OK) != 0) {
        fprintf(stderr, "test_documents_cli: %s is not built (run make)\n", SHS_BIN_PATH);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_statistics),
        cmocka_unit_test(test_no_targets),
        cmocka_unit_test(test_no_separator),
        cmocka_unit_test(test_loss_norm_without_documents),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
