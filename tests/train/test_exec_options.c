/* test_exec_options.c - the GPT's execution options in training (gpt.h's
 * shs_gpt_exec_t: --attention, --recompute-granularity, --autocast,
 * --dropout): every ZeRO stage with them equals DDP without recompute bit
 * for bit; recompute changes no bit; flash agrees with eager to rounding;
 * dropout changes the run and is reproduced; bad values are refused with
 * an error naming the option. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"
#include "run_record.h"
#include "shardsim/train.h"

#define STEPS 2

static shs_train_config_t base(int world) { return test_small_config(world, 3); }

/* DDP with every activation kept, then every stage with `recompute`: same bits. */
static void check_stages_match_ddp(shs_train_config_t cfg, shs_recompute_t recompute) {
    cfg.strategy.kind = SHS_DDP;
    cfg.recompute = SHS_RECOMPUTE_NONE;
    run_record_t ddp;
    record_run(&cfg, &test_corpus, STEPS, &ddp);
    cfg.recompute = recompute;
    for (int k = SHS_DDP; k <= SHS_ZERO3; k++) {
        cfg.strategy.kind = (shs_strategy_kind_t)k;
        run_record_t got;
        record_run(&cfg, &test_corpus, STEPS, &got);
        assert_same_run(&ddp, &got);
        free_record(&got);
    }
    assert_true(memcmp(ddp.snap[0], ddp.snap[STEPS - 1], ddp.len * sizeof(float)) != 0);
    free_record(&ddp);
}

static void test_flash_stages_match_ddp(void **state) {
    shs_train_config_t c = base(3);
    c.attention = SHS_ATTENTION_FLASH;
    check_stages_match_ddp(c, SHS_RECOMPUTE_FULL);
    check_stages_match_ddp(c, SHS_RECOMPUTE_SELECTIVE);
}

static void test_eager_selective_dropout_stages_match_ddp(void **state) {
    shs_train_config_t c = base(2);
    c.dropout = 0.2f;
    check_stages_match_ddp(c, SHS_RECOMPUTE_SELECTIVE);
    check_stages_match_ddp(c, SHS_RECOMPUTE_FULL);
}

static void test_autocast_stages_match_ddp(void **state) {
    static const struct {
        shs_dtype_t autocast, param;
        shs_attention_kind_t attention;
        float dropout;
    } cases[] = {
        {SHS_BF16, SHS_BF16, SHS_ATTENTION_FLASH, 0.1f}, /* 2-byte residual stream */
        {SHS_BF16, SHS_DTYPE_DEFAULT, SHS_ATTENTION_EAGER, 0.0f}, /* f32 params: weights rounded, f32 residual */
        {SHS_F16, SHS_F16, SHS_ATTENTION_EAGER, 0.1f},   /* with dynamic loss scaling */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        shs_train_config_t c = base(2);
        c.autocast = cases[k].autocast;
        c.strategy.param_dtype = cases[k].param;
        c.attention = cases[k].attention;
        c.dropout = cases[k].dropout;
        check_stages_match_ddp(c, k == 1 ? SHS_RECOMPUTE_SELECTIVE : SHS_RECOMPUTE_FULL);
    }
}

/* torchtitan's policies (op-level SAC; every 2nd of 3 blocks in full):
 * every stage equals DDP keeping everything, bit for bit, with eager
 * attention and dropout (the recompute draws the same masks) and with
 * flash under bf16 autocast with bf16 parameters and dropout. */
static void test_torchtitan_policies_stages_match_ddp(void **state) {
    shs_train_config_t c = base(2);
    c.dropout = 0.1f;
    c.recompute_every = 2;
    check_stages_match_ddp(c, SHS_RECOMPUTE_SELECTIVE_OP);
    check_stages_match_ddp(c, SHS_RECOMPUTE_EVERY_N);
    c = base(3);
    c.attention = SHS_ATTENTION_FLASH;
    c.autocast = c.strategy.param_dtype = SHS_BF16;
    c.dropout = 0.1f;
    c.recompute_every = 2;
    check_stages_match_ddp(c, SHS_RECOMPUTE_SELECTIVE_OP);
    check_stages_match_ddp(c, SHS_RECOMPUTE_EVERY_N);
}

/* Flash against eager: the same model to rounding (losses within 1e-5
 * relative over 3 steps), not the same bits (different summation order). */
static void test_flash_close_to_eager(void **state) {
    shs_train_config_t c = base(2);
    run_record_t eager, flash;
    record_run(&c, &test_corpus, 3, &eager);
    c.attention = SHS_ATTENTION_FLASH;
    record_run(&c, &test_corpus, 3, &flash);
    int differs = 0;
    for (int s = 0; s < 3; s++) {
        double e = eager.loss[s], f = flash.loss[s];
        if (!(fabs(e - f) <= 1e-5 * fabs(e))) fail_msg("step %d: flash loss %.9g, eager %.9g", s + 1, f, e);
        differs |= memcmp(eager.snap[s], flash.snap[s], eager.len * sizeof(float)) != 0;
    }
    assert_true(differs); /* a different kernel, not a copy of the eager path */
    free_record(&eager);
    free_record(&flash);
}

/* Autocast and dropout change the run (they are not ignored), the same
 * config twice gives the same bits, and a different seed other masks. */
static void test_options_take_effect(void **state) {
    shs_train_config_t c = base(2);
    run_record_t plain, a, b, other;
    record_run(&c, &test_corpus, STEPS, &plain);
    c.dropout = 0.3f;
    record_run(&c, &test_corpus, STEPS, &a);
    record_run(&c, &test_corpus, STEPS, &b);
    assert_same_run(&a, &b);
    assert_true(memcmp(&a.loss[0], &plain.loss[0], sizeof(float)) != 0);
    c.strategy.seed++;
    record_run(&c, &test_corpus, STEPS, &other);
    assert_true(memcmp(other.snap[STEPS - 1], a.snap[STEPS - 1], a.len * sizeof(float)) != 0);
    free_record(&other);
    free_record(&b);
    free_record(&a);
    c = base(2);
    c.autocast = SHS_BF16;
    record_run(&c, &test_corpus, STEPS, &a);
    assert_true(memcmp(&a.loss[0], &plain.loss[0], sizeof(float)) != 0);
    assert_true(fabs(a.loss[0] - plain.loss[0]) < 1e-2 * fabs(plain.loss[0]));
    free_record(&a);
    free_record(&plain);
}

static void expect_refusal(shs_train_config_t c, const char *needle) {
    shs_trainer_t *t = NULL;
    assert_int_equal(shs_trainer_create(&t, &c, &test_corpus), SHS_INVALID_ARG);
    assert_null(t);
    if (!strstr(shs_last_error(), needle)) fail_msg("error '%s' does not name '%s'", shs_last_error(), needle);
}

static void test_bad_values_refused(void **state) {
    shs_train_config_t c = base(1);
    c.dropout = 1.0f;
    expect_refusal(c, "dropout");
    c = base(1);
    c.dropout = -0.1f;
    expect_refusal(c, "dropout");
    c = base(1);
    c.autocast = SHS_F64;
    expect_refusal(c, "autocast");
    c = base(1);
    c.attention = (shs_attention_kind_t)7;
    expect_refusal(c, "attention");
    c = base(1);
    c.recompute = (shs_recompute_t)9;
    expect_refusal(c, "recompute");
}

static void test_cli(void **state) {
    static test_proc_t p;
    char *ok[] = {SHS_BIN_PATH, "train", "--steps", "2", "--world", "2", "--layers", "2", "--channels", "16",
                  "--heads", "2", "--context", "8", "--check", "ddp", "--attention", "flash", "--autocast", "bf16",
                  "--dropout", "0.1", "--recompute-granularity", "selective", NULL};
    test_run_process(ok, 120.0, &p);
    if (p.exit_code != 0) fail_msg("exit %d: %s", p.exit_code, p.err);
    assert_non_null(strstr(p.out, "bit for bit"));
    static const struct {
        const char *opt, *val, *needle;
    } bad[] = {
        {"--attention", "sdpa", "--attention takes eager or flash"},
        {"--autocast", "f64", "--autocast takes bf16, f16 or off"},
        {"--dropout", "1.5", "--dropout"},
        {"--recompute-granularity", "block", "--recompute-granularity takes full, selective or none"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char *argv[] = {SHS_BIN_PATH, "train", "--steps", "1", (char *)bad[k].opt, (char *)bad[k].val, NULL};
        test_run_process(argv, 60.0, &p);
        assert_int_not_equal(p.exit_code, 0);
        if (!strstr(p.err, bad[k].needle)) fail_msg("%s %s: stderr '%s'", bad[k].opt, bad[k].val, p.err);
    }
    char *both[] = {SHS_BIN_PATH, "train", "--steps", "1", "--checkpoint-activations", "--recompute-granularity",
                    "selective", NULL};
    test_run_process(both, 60.0, &p);
    assert_int_not_equal(p.exit_code, 0);
    assert_non_null(strstr(p.err, "conflicts"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flash_stages_match_ddp),
        cmocka_unit_test(test_eager_selective_dropout_stages_match_ddp),
        cmocka_unit_test(test_autocast_stages_match_ddp),
        cmocka_unit_test(test_torchtitan_policies_stages_match_ddp),
        cmocka_unit_test(test_flash_close_to_eager),
        cmocka_unit_test(test_options_take_effect),
        cmocka_unit_test(test_bad_values_refused),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
