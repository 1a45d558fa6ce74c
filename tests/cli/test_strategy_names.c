/* test_strategy_names.c - `train --strategy` takes the names users know
 * from other tools (sim/strategy_names.h), each listed in --help with what
 * it maps to, and runs exactly that layout.
 *
 * The expected mapping is written here from the tools' own definitions,
 * not read from shardsim:
 *   DeepSpeed zero_optimization.stage 0..3 (deepspeed/runtime/zero/config.py,
 *     ZeroStageEnum: disabled, optimizer_states, gradients, weights);
 *   FairScale: OSS shards optimizer state (ZeRO-1), ShardedDDP with OSS
 *     also gradients (ZeRO-2) (fairscale/optim/oss.py,
 *     fairscale/nn/data_parallel/sharded_ddp.py);
 *   PyTorch FSDP ShardingStrategy (torch/distributed/fsdp/api.py): NO_SHARD
 *     is DDP; FULL_SHARD unshards before forward and before backward and
 *     reshards after each; SHARD_GRAD_OP "does not reshard them after the
 *     forward, and only reshards them after the backward": parameters are
 *     sharded between steps (unlike ZeRO-2, which keeps them whole) and
 *     gathered once per step; HYBRID_SHARD is FULL_SHARD within a group,
 *     _HYBRID_SHARD_ZERO2 SHARD_GRAD_OP within a group;
 *   HF Trainer --fsdp (transformers trainer_utils.FSDPOption): full_shard,
 *     shard_grad_op, no_shard, the same layouts. */
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
#include "cli/cli_expect.h"

#define run_args(...) test_shardsim(120.0, __VA_ARGS__)
#define SMALL "--layers", "2", "--channels", "32", "--heads", "4", "--context", "16"

typedef struct {
    const char *name;
    const char *strategy;  /* shardsim's kind */
    int keeps;             /* gathered parameters kept from forward to backward (reshard_after_forward=False) */
} expected_t;

static const expected_t expected[] = {
    {"0", "ddp", 0},           {"1", "zero1", 0},      {"2", "zero2", 0},
    {"3", "zero3", 0},         {"oss", "zero1", 0},    {"sdp", "zero2", 0},
    {"NO_SHARD", "ddp", 0},    {"FULL_SHARD", "zero3", 0}, {"SHARD_GRAD_OP", "zero3", 1},
    {"HYBRID_SHARD", "hybrid_shard", 0}, {"_HYBRID_SHARD_ZERO2", "hybrid_shard", 1},
    {"no_shard", "ddp", 0},    {"full_shard", "zero3", 0}, {"shard_grad_op", "zero3", 1},
};
#define NEXPECTED (sizeof expected / sizeof expected[0])

/* Every alias --help lists ("  NAME = WHAT") is one of the expected names,
 * its line names the expected layout, and every expected name is listed. */
static void test_help_lists_every_alias(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--help", NULL);
    assert_int_equal(p->exit_code, 0);
    int listed[NEXPECTED] = {0};
    static char entry[8192]; /* --strategy's entry: up to the next option */
    const char *e = strstr(p->out, "\n  --strategy ");
    assert_non_null(e);
    const char *end = strstr(e + 1, "\n  --");
    snprintf(entry, sizeof entry, "%.*s", (int)(end ? end - e : (long)strlen(e)), e);
    for (const char *l = entry; (l = strstr(l, " = ")) != NULL; l += 3) {
        const char *start = l;
        while (start > entry && start[-1] != ' ') start--;
        char name[64], what[128];
        snprintf(name, sizeof name, "%.*s", (int)(l - start), start);
        snprintf(what, sizeof what, "%.*s", (int)strcspn(l + 3, "\n"), l + 3);
        size_t k = 0;
        while (k < NEXPECTED && strcmp(expected[k].name, name)) k++;
        if (k == NEXPECTED) fail_msg("--help lists '%s = %s', which the test does not know", name, what);
        listed[k] = 1;
        const char *layout = what;
        if (!strncmp(what, "as ", 3)) { /* "as OTHER (...)": OTHER's line says it */
            size_t j = 0;
            while (j < NEXPECTED && strncmp(what + 3, expected[j].name, strlen(expected[j].name))) j++;
            if (j == NEXPECTED || strcmp(expected[j].strategy, expected[k].strategy) || expected[j].keeps != expected[k].keeps)
                fail_msg("--help: '%s = %s' refers to a name of another layout", name, what);
            continue;
        }
        size_t n = strlen(expected[k].strategy);
        if (strncmp(layout, expected[k].strategy, n) != 0 || (layout[n] != ' ' && layout[n] != 0))
            fail_msg("--help: '%s = %s', expected %s", name, what, expected[k].strategy);
        if (expected[k].keeps != (strstr(what, "--reshard-after-forward false") != NULL))
            fail_msg("--help: '%s = %s' %s --reshard-after-forward false", name, what, expected[k].keeps ? "lacks" : "has");
    }
    for (size_t k = 0; k < NEXPECTED; k++)
        if (!listed[k]) fail_msg("--help does not list --strategy %s", expected[k].name);
}

/* Each name runs the expected strategy: the header says so. */
static void test_each_name_runs_its_layout(void **state) {
    (void)state;
    for (size_t k = 0; k < NEXPECTED; k++) {
        const test_proc_t *p = run_args("train", SMALL, "--world", "2", "--steps", "1", "--strategy", expected[k].name, NULL);
        if (p->exit_code != 0) fail_msg("--strategy %s: exit %d: %s", expected[k].name, p->exit_code, p->err);
        char want[160];
        snprintf(want, sizeof want, ", strategy %s (given as %s%s), ", expected[k].strategy, expected[k].name,
                 expected[k].keeps ? ", parameters kept from forward to backward" : "");
        if (!strstr(p->out, want)) fail_msg("--strategy %s: no '%s' in\n%s", expected[k].name, want, p->out);
    }
    const test_proc_t *p = run_args("train", SMALL, "--steps", "1", "--strategy", "zero3", NULL);
    assert_int_equal(p->exit_code, 0);
    assert_null(strstr(p->out, "given as")); /* shardsim's own names: the header as it was */
}

/* The summary from "peak device memory" on. */
static const char *summary_of(const test_proc_t *p, char *buf, size_t n) {
    const char *s = strstr(p->out, "  peak device memory");
    if (p->exit_code != 0 || !s) fail_msg("exit %d\n%s\n%s", p->exit_code, p->out, p->err);
    snprintf(buf, n, "%s", s);
    return buf;
}

/* Rank 0's figure in column col (0: params) of the memory table, MiB. */
static double rank0_mem(const char *summary, int col) {
    const char *r = strstr(summary, "\n    0  ");
    assert_non_null(r);
    double v[7];
    assert_int_equal(sscanf(r, " 0 %lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]), 7);
    return v[col];
}

static long all_gather_calls(const char *summary) {
    const char *r = strstr(summary, "    all_gather ");
    assert_non_null(r);
    long calls;
    assert_int_equal(sscanf(r, " all_gather %ld", &calls), 1);
    return calls;
}

/* SHARD_GRAD_OP is zero3 with --reshard-after-forward false, not zero2:
 * the same run byte for byte as the former; against the others, FSDP's
 * own description: one all-gather per unit per step where FULL_SHARD
 * (zero3) has two, and parameters sharded at rest where ZeRO-2 holds them
 * whole (N = 4 times its params memory, up to the shards' padding). */
static void test_shard_grad_op_is_zero3_keeping_params(void **state) {
    (void)state;
    static char sgo[8192], keep[8192], z3[8192], z2[8192];
    summary_of(run_args("train", SMALL, "--world", "4", "--steps", "2", "--strategy", "SHARD_GRAD_OP", NULL), sgo, sizeof sgo);
    summary_of(run_args("train", SMALL, "--world", "4", "--steps", "2", "--strategy", "zero3",
                        "--reshard-after-forward", "false", NULL), keep, sizeof keep);
    summary_of(run_args("train", SMALL, "--world", "4", "--steps", "2", "--strategy", "zero3", NULL), z3, sizeof z3);
    summary_of(run_args("train", SMALL, "--world", "4", "--steps", "2", "--strategy", "zero2", NULL), z2, sizeof z2);
    assert_string_equal(sgo, keep);
    assert_int_equal(2 * all_gather_calls(sgo), all_gather_calls(z3));
    double ratio = rank0_mem(z2, 0) / rank0_mem(sgo, 0);
    if (ratio < 3.8 || ratio > 4.2) fail_msg("zero2's params / SHARD_GRAD_OP's = %.3f, expected 4 (N)", ratio);
    /* _HYBRID_SHARD_ZERO2: the same within shard groups of 2 */
    static char hz2[8192], hkeep[8192], hsz2[8192];
    summary_of(run_args("train", SMALL, "--world", "4", "--steps", "2", "--strategy", "_HYBRID_SHARD_ZERO2",
                        "--shard-group-size", "2", NULL), hz2, sizeof hz2);
    summary_of(run_args("train", SMALL, "--world", "4", "--steps", "2", "--strategy", "hybrid_shard",
                        "--reshard-after-forward", "false", "--shard-group-size", "2", NULL), hkeep, sizeof hkeep);
    summary_of(run_args("train", SMALL, "--world", "4", "--steps", "2", "--strategy", "hybrid_shard_zero2",
                        "--shard-group-size", "2", NULL), hsz2, sizeof hsz2);
    assert_string_equal(hz2, hkeep);
    ratio = rank0_mem(hsz2, 0) / rank0_mem(hz2, 0);
    if (ratio < 1.9 || ratio > 2.1) fail_msg("hybrid_shard_zero2's params / _HYBRID_SHARD_ZERO2's = %.3f, expected 2 (G)", ratio);
}

/* A name that fixes when parameters are freed contradicts the opposite
 * --reshard-after-forward; an unknown name lists the known ones. */
static void test_contradictions_and_unknown_names(void **state) {
    (void)state;
    test_expect_error(run_args("train", "--strategy", "SHARD_GRAD_OP", "--reshard-after-forward", "true", NULL), 2,
                      "--strategy SHARD_GRAD_OP keeps gathered parameters from forward to backward; "
                      "--reshard-after-forward true contradicts it");
    test_expect_error(run_args("train", "--strategy", "FULL_SHARD", "--reshard-after-forward=false", NULL), 2,
                      "--strategy FULL_SHARD frees gathered parameters after forward; --reshard-after-forward false");
    test_expect_error(run_args("train", "--strategy", "HYBRID_SHARD", "--reshard-after-forward", "false", NULL), 2,
                      "contradicts it");
    const test_proc_t *p = run_args("train", SMALL, "--steps", "1", "--strategy", "SHARD_GRAD_OP",
                                    "--reshard-after-forward", "false", NULL);
    if (p->exit_code != 0) fail_msg("agreeing options: exit %d: %s", p->exit_code, p->err);
    test_expect_error(run_args("train", "--strategy", "shard_grad_OP", NULL), 2, "unknown strategy 'shard_grad_OP'");
    test_expect_error(run_args("train", "--strategy", "4", NULL), 2, "DeepSpeed's stage 0-3");
    test_expect_error(run_args("train", "--strategy", "zero4", NULL), 2, "FSDP's FULL_SHARD, SHARD_GRAD_OP");
}

int main(void) {
    if (access(SHS_BIN_PATH, X_OK) != 0) {
        fprintf(stderr, "test_strategy_names: %s is not built (run make)\n", SHS_BIN_PATH);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_lists_every_alias),
        cmocka_unit_test(test_each_name_runs_its_layout),
        cmocka_unit_test(test_shard_grad_op_is_zero3_keeping_params),
        cmocka_unit_test(test_contradictions_and_unknown_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
