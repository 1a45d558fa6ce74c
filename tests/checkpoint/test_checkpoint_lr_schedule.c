/* test_checkpoint_lr_schedule.c - the lr schedule's position in a
 * checkpoint (index line `lr_schedule KIND APPLIED`, version 3): a resumed
 * run continues the schedule bit for bit, under another stage too; an overflow-skipped step is not counted before or after the save; a
 * run with another schedule kind is refused; an index of version 2 (before
 * the line) reads as a constant-lr run whose position is its steps not
 * skipped.
 * Independent reference: the uninterrupted run of the same configuration
 * (the bits must be identical) and the counts worked by hand (3 steps, one
 * skipped: position 2).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "checkpoint_run.h"
#include "strategy/strategy_testing.h"

static shs_train_config_t sched_config(int world, shs_strategy_kind_t kind, shs_lr_schedule_kind_t sched) {
    shs_train_config_t c = small_config(world, kind, 1);
    c.strategy.lr_schedule = (shs_lr_schedule_t){.kind = sched, .warmup_steps = 2, .total_steps = 6, .max_lr = 1e-3,
                                                 .min_lr = 1e-5, .cos_min_ratio = 1e-4};
    return c;
}

/* 6 steps straight == 3 steps, save, resume (at `world`, `kind`), 3 steps
 * (the same world: another one reads the data in another order) */
static void check_continues(shs_lr_schedule_kind_t sched, int world, shs_strategy_kind_t kind, const char *name) {
    shs_train_config_t a = sched_config(2, SHS_ZERO3, sched);
    shs_trainer_t *straight = make(&a);
    steps(straight, 6, NULL);
    float *want = params_of(straight);
    double want_lr = shs_trainer_last_lr(straight);
    assert_int_equal(shs_trainer_lr_steps(straight), 6);
    shs_trainer_destroy(straight);

    shs_trainer_t *first = make(&a);
    steps(first, 3, NULL);
    const char *dir = tpath(name);
    save_ok(first, dir);
    shs_trainer_destroy(first);
    char ip[600], line[96];
    snprintf(ip, sizeof ip, "%s/index.txt", dir);
    char *idx = slurp(ip, NULL);
    snprintf(line, sizeof line, "\nlr_schedule %s 3\n", shs_lr_schedule_name(sched));
    if (!strstr(idx, line)) fail_msg("no '%s' in the index", line + 1);
    assert_non_null(strstr(idx, "shardsim-checkpoint 3\n"));
    free(idx);

    shs_train_config_t b = sched_config(world, kind, sched);
    shs_trainer_t *second = make(&b);
    resume_ok(second, dir);
    assert_int_equal(shs_trainer_lr_steps(second), 3);
    steps(second, 3, NULL);
    float *got = params_of(second);
    size_t n = shs_trainer_layout(second)->num_params;
    assert_memory_equal(got, want, n * sizeof(float));
    assert_true(shs_trainer_last_lr(second) == want_lr);
    shs_trainer_destroy(second);
    free(want);
    free(got);
}

static void test_resume_continues_schedule(void **state) {
    (void)state;
    check_continues(SHS_LR_WARMUP_DECAY_LR, 2, SHS_ZERO3, "wdlr");
    check_continues(SHS_LR_COSINE, 2, SHS_ZERO1, "cos");
    check_continues(SHS_LR_WARMUP_COSINE_LR, 2, SHS_DDP, "wclr");
}

/* a planted overflow on every rank's strategy before the step */
static void plant_overflow(shs_trainer_t *t, int world) {
    for (int r = 0; r < world; r++)
        assert_int_equal(shs_strategy_plant_grad_inf(shs_trainer_strategy(t, r), 0, 0), SHS_OK);
}

/* f16 with an overflow at step 2: the position is 2 after 3 steps, saved
 * as such, and the resumed run goes on from it like the straight run. */
static void test_skipped_step_not_counted(void **state) {
    (void)state;
    shs_train_config_t c = sched_config(2, SHS_ZERO2, SHS_LR_LINEAR);
    c.strategy.param_dtype = SHS_F16;
    shs_trainer_t *straight = make(&c);
    steps(straight, 1, NULL);
    plant_overflow(straight, 2);
    steps(straight, 4, NULL);
    assert_int_equal(shs_trainer_lr_steps(straight), 4); /* 5 steps, 1 skipped */
    float *want = params_of(straight);
    shs_trainer_destroy(straight);

    shs_trainer_t *first = make(&c);
    steps(first, 1, NULL);
    plant_overflow(first, 2);
    steps(first, 2, NULL);
    assert_int_equal(shs_trainer_lr_steps(first), 2);
    const char *dir = tpath("skip");
    save_ok(first, dir);
    shs_trainer_destroy(first);
    shs_trainer_t *second = make(&c);
    resume_ok(second, dir);
    assert_int_equal(shs_trainer_lr_steps(second), 2);
    steps(second, 2, NULL);
    float *got = params_of(second);
    assert_memory_equal(got, want, shs_trainer_layout(second)->num_params * sizeof(float));
    shs_trainer_destroy(second);
    free(want);
    free(got);
}

/* another kind: refused naming both, before anything is loaded */
static void test_other_kind_refused(void **state) {
    (void)state;
    shs_train_config_t c = sched_config(2, SHS_ZERO3, SHS_LR_LINEAR);
    shs_trainer_t *t = make(&c);
    steps(t, 1, NULL);
    const char *dir = tpath("kind");
    save_ok(t, dir);
    shs_trainer_destroy(t);
    c.strategy.lr_schedule.kind = SHS_LR_COSINE;
    t = make(&c);
    assert_int_equal(shs_checkpoint_resume(t, dir), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "lr schedule linear; this run has cosine"));
    assert_int_equal(shs_trainer_lr_steps(t), 0);
    shs_trainer_destroy(t);
}

/* Rewrite dir's index as version 2: no lr_schedule or bias_correction line,
 * the trailing crc32 recomputed. */
static void make_version_2(const char *dir) {
    char ip[600];
    snprintf(ip, sizeof ip, "%s/index.txt", dir);
    char *idx = slurp(ip, NULL), *out = malloc(strlen(idx) + 64);
    size_t o = 0;
    for (char *line = idx; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = (size_t)(nl - line) + 1;
        if (!strncmp(line, "shardsim-checkpoint 3", 21)) o += (size_t)sprintf(out + o, "shardsim-checkpoint 2\n");
        else if (strncmp(line, "lr_schedule ", 12) && strncmp(line, "bias_correction ", 16) &&
                 strncmp(line, "crc32 ", 6)) {
            memcpy(out + o, line, len);
            o += len;
        }
        line = nl + 1;
    }
    o += (size_t)sprintf(out + o, "crc32 %08x\n", (unsigned)shs_crc32(0, out, o));
    FILE *f = fopen(ip, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(out, 1, o, f), o);
    fclose(f);
    free(idx);
    free(out);
}

static void test_version_2_index(void **state) {
    (void)state;
    shs_train_config_t c = small_config(2, SHS_ZERO3, 1);
    c.strategy.param_dtype = SHS_F16;
    shs_trainer_t *t = make(&c);
    steps(t, 1, NULL);
    plant_overflow(t, 2);
    steps(t, 2, NULL);
    const char *dir = tpath("v2");
    save_ok(t, dir);
    shs_trainer_destroy(t);
    make_version_2(dir);
    shs_checkpoint_t *ck;
    if (shs_checkpoint_open(&ck, dir) != SHS_OK) fail_msg("open: %s", shs_last_error());
    const shs_checkpoint_meta_t *m = shs_checkpoint_meta(ck);
    assert_int_equal(m->step, 3);
    assert_int_equal(m->loss_scale.skipped_steps, 1);
    assert_int_equal(m->lr_steps, 2);
    assert_int_equal(m->lr_schedule_known, 0);
    shs_checkpoint_close(ck);
    /* and a linear-schedule run may continue from it (the kind is not known) */
    c.strategy.lr_schedule = (shs_lr_schedule_t){.kind = SHS_LR_LINEAR, .total_steps = 9};
    t = make(&c);
    resume_ok(t, dir);
    assert_int_equal(shs_trainer_lr_steps(t), 2);
    shs_trainer_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_continues_schedule),
        cmocka_unit_test(test_skipped_step_not_counted),
        cmocka_unit_test(test_other_kind_refused),
        cmocka_unit_test(test_version_2_index),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
