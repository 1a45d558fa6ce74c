/* test_lr_schedule_cli.c - `train --lr-schedule` and a DeepSpeed config's
 * scheduler from the command line: the header names the schedule, each
 * step prints its lr, a resumed run goes on with the schedule bit for bit,
 * and the options that make no sense together are usage errors (exit 2).
 *
 * Independent references: HF's linear schedule by hand (lr 1e-3, warmup 2,
 * total 4: 0, 0.0005, 0.001, 0.0005); DeepSpeed's WarmupDecayLR by hand
 * (warmup_num_steps 2, total 4, log warmup: the first two steps at
 * warmup_min_lr 0, then ln 2 / ln 2 = all of the maximum, at iteration 2
 * (4 - 2) / (4 - 2) of it, at iteration 3 (4 - 3) / (4 - 2)); the
 * uninterrupted run's loss bits for the resumed one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

#define SMALL "--world", "2", "--layers", "1", "--channels", "16", "--heads", "2", "--context", "16"

/* the step lines' "loss bits 0x..." in order, joined */
static void loss_bits(const char *out, char *bits, size_t n) {
    size_t at = 0;
    bits[0] = 0;
    for (const char *p = out; (p = strstr(p, "loss bits 0x")) != NULL; p += 12)
        at += (size_t)snprintf(bits + at, at < n ? n - at : 0, "%.10s ", p + 10);
}

/* Step k of `steps` (1-based) prints lrs[k - 1] on its line. */
static void assert_step_lrs(const char *out, int steps, const char *const *lrs) {
    const char *at = out;
    for (int k = 0; k < steps; k++) {
        char step[32];
        snprintf(step, sizeof step, "step %d/%d", k + 1, steps);
        at = strstr(at, step);
        if (!at) fail_msg("no '%s' in %s", step, out);
        const char *eol = strchr(at, '\n'), *lr = strstr(at, lrs[k]);
        if (!lr || lr > eol) fail_msg("step %d: no '%s' in %.*s", k + 1, lrs[k], (int)(eol - at), at);
    }
}

static void test_linear_schedule_lines(void **state) {
    (void)state;
    const test_proc_t *p = test_shardsim(120, "train", SMALL, "--steps", "4", "--lr-schedule", "linear",
                                         "--warmup-steps", "2", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "lr schedule (each applied optimizer step, lr_schedule.h): linear (HF): lr 0.001, "
                                   "warmup 2 steps, total 4 steps"));
    static const char *const lrs[] = {"| lr 0 |", "| lr 0.0005 |", "| lr 0.001 |", "| lr 0.0005 |"};
    assert_step_lrs(p->out, 4, lrs);
}

#ifdef SHS_HAVE_JANSSON
/* a config's WarmupDecayLR with "auto" params: the Trainer's values from
 * --warmup-steps, and --lr-total-steps over --steps */
static void test_deepspeed_scheduler_from_config(void **state) {
    (void)state;
    static const char cfg[] = "{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": "
                              "{\"warmup_min_lr\": \"auto\", \"warmup_max_lr\": 0.002, \"warmup_num_steps\": \"auto\", "
                              "\"total_num_steps\": \"auto\"}}}";
    const char *path = test_tmp_write("sched.json", cfg, sizeof cfg - 1);
    const test_proc_t *p = test_shardsim(120, "train", SMALL, "--steps", "5", "--ds-config", path, "--warmup-steps",
                                         "2", "--lr-total-steps", "4", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "lr schedule WarmupDecayLR (config), warmup steps 2 (command line), total steps 4 "
                                   "(command line)"));
    static const char *const lrs[] = {"| lr 0 |", "| lr 0 |", "| lr 0.002 |", "| lr 0.002 |", "| lr 0.001 |"};
    assert_step_lrs(p->out, 5, lrs);
    /* without a warmup the Trainer's 0 is what DeepSpeed refuses */
    p = test_shardsim(60, "train", SMALL, "--steps", "4", "--ds-config", path, NULL);
    assert_int_equal(p->exit_code, 1);
    assert_non_null(strstr(p->err, "warmup_num_steps = \"auto\" is 0 here"));
}
#endif

static void test_resume_continues(void **state) {
    (void)state;
    char dir[600], straight[512], resumed[512];
    snprintf(dir, sizeof dir, "%s/ck", test_tmpdir);
    const test_proc_t *p = test_shardsim(120, "train", SMALL, "--steps", "6", "--lr-schedule", "cosine",
                                         "--warmup-steps", "2", "--loss-bits", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    loss_bits(strstr(p->out, "step 4/6"), straight, sizeof straight);
    p = test_shardsim(120, "train", SMALL, "--steps", "3", "--lr-schedule", "cosine", "--warmup-steps", "2",
                      "--lr-total-steps", "6", "--save", dir, NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    /* without --lr-total-steps the length is unknown: refused */
    p = test_shardsim(60, "train", SMALL, "--steps", "3", "--lr-schedule", "cosine", "--warmup-steps", "2",
                      "--resume", dir, NULL);
    assert_int_equal(p->exit_code, 2);
    assert_non_null(strstr(p->err, "--resume with lr schedule cosine needs --lr-total-steps N"));
    p = test_shardsim(120, "train", SMALL, "--steps", "3", "--lr-schedule", "cosine", "--warmup-steps", "2",
                      "--lr-total-steps", "6", "--resume", dir, "--loss-bits", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    loss_bits(p->out, resumed, sizeof resumed);
    assert_string_equal(resumed, straight);
    assert_true(strlen(straight) > 30); /* three steps' bits were compared */
}

static void test_usage_errors(void **state) {
    (void)state;
    static const struct {
        const char *args[4], *want;
    } cases[] = {
        {{"--warmup-steps", "3"}, "--warmup-steps applies to an lr schedule"},
        {{"--lr-schedule", "triangle"}, "unknown --lr-schedule 'triangle'"},
        {{"--lr-schedule", "cosine_with_min_lr"}, "needs --min-lr X"},
        {{"--lr-schedule", "OneCycle"}, "OneCycle takes its cycle"},
        {{"--lr-schedule", "WarmupLR"}, "warmup steps 0 must be >= 1"},
        {{"--lr-schedule", "linear", "--min-lr", "0.1"}, "--min-lr applies to cosine_with_min_lr"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *const *a = cases[k].args;
        const test_proc_t *p = test_shardsim(60, "train", "--steps", "1", a[0], a[1], a[2], a[3], NULL);
        if (p->exit_code != 2 || !strstr(p->err, cases[k].want))
            fail_msg("%s %s: exit %d: %s", a[0], a[1], p->exit_code, p->err);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_schedule_lines),
#ifdef SHS_HAVE_JANSSON
        cmocka_unit_test(test_deepspeed_scheduler_from_config),
#endif
        cmocka_unit_test(test_resume_continues),
        cmocka_unit_test(test_usage_errors),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
