/* test_ds_config_real.c - the DeepSpeed configs users' tools ship
 * (ds_real_configs.h: DeepSpeedExamples, LLaMA-Factory, axolotl,
 * transformers, FastChat, Stanford Alpaca), each read for `compare` and for
 * `train` as the command line reads it: accepted, or refused naming the
 * key the row says; at least 90 % of the 31 files of the measure accepted
 * by compare.
 * Independent reference: each file's keys read against DeepSpeed's own
 * handling of them (runtime/config.py passes over unknown top-level keys;
 * engine.py casts only floating-point inputs under fp16.auto_cast; ...), the
 * expected outcome written in the row by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "shardsim/ds_config.h"
#include "ds_real_configs.h"

static shs_ds_config_t ds; /* large: not on the stack */

#ifdef SHS_HAVE_JANSSON

/* Read row `c` for `use` and apply it as the command line would: the world
 * given, the micro-batch given where the file has no batch key, the HF
 * Trainer's warmup and total steps (--warmup-steps 10, --steps 100) for
 * train. Returns the status; the error is shs_last_error(). */
static shs_status_t read_as(const real_config_t *c, shs_ds_use_t use) {
    const char *path = test_tmp_write("real.json", c->json, strlen(c->json));
    SHS_CHECK(shs_ds_config_load_for(path, use, &ds));
    shs_train_config_t cfg = shs_train_default_config();
    int given[SHS_DS_NUM_SETTINGS] = {0};
    cfg.world_size = c->world;
    given[SHS_DS_WORLD] = 1;
    if (c->micro_given) {
        cfg.micro_batch = 2;
        given[SHS_DS_MICRO_BATCH] = 1;
    }
    cfg.strategy.lr_schedule.warmup_steps = 10;
    cfg.strategy.lr_schedule.total_steps = 100;
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    return shs_ds_config_apply(&ds, given, 64, &cfg, src);
}

static int check_one(const real_config_t *c, shs_ds_use_t use) {
    const char *want = use == SHS_DS_FOR_COMPARE ? c->compare_refuses : c->train_refuses;
    shs_status_t st = read_as(c, use);
    const char *cmd = use == SHS_DS_FOR_COMPARE ? "compare" : "train";
    if (!want) {
        if (st != SHS_OK) fail_msg("%s: %s refuses it: %s", c->name, cmd, shs_last_error());
        printf("  %-80s %s: accepted\n", c->name, cmd);
        return 1;
    }
    if (st != SHS_UNSUPPORTED || !strstr(shs_last_error(), want))
        fail_msg("%s: %s: want a refusal naming '%s', got status %d: %s", c->name, cmd, want, (int)st,
                 st ? shs_last_error() : "accepted");
    const char *e = strstr(shs_last_error(), want);
    printf("  %-80s %s: refused: %.*s\n", c->name, cmd, (int)strcspn(e, "\n"), e);
    return 0;
}

static void test_real_configs(void **state) {
    (void)state;
    int accepted_compare = 0, accepted_train = 0;
    for (size_t k = 0; k < REAL_CONFIGS_COUNT; k++) {
        int a = check_one(&real_configs[k], SHS_DS_FOR_COMPARE), b = check_one(&real_configs[k], SHS_DS_FOR_TRAIN);
        if (k < REAL_CONFIGS_MAIN) {
            accepted_compare += a;
            accepted_train += b;
        }
    }
    printf("  of the %d files: %d accepted by compare, %d by train\n", REAL_CONFIGS_MAIN, accepted_compare,
           accepted_train);
    assert_int_equal(accepted_compare, 31);
    assert_true(accepted_compare * 10 >= REAL_CONFIGS_MAIN * 9); /* >= 90 % */
}

/* What a few of them become, read as users meant them. */
static void test_what_they_become(void **state) {
    (void)state;
    char buf[8192];
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    shs_train_config_t cfg;
    for (size_t k = 0; k < REAL_CONFIGS_COUNT; k++) {
        const real_config_t *c = &real_configs[k];
        if (!strcmp(c->name, "lf__ds_z3_config")) { /* comms_config, monitor_config: not DeepSpeed's keys */
            assert_int_equal(read_as(c, SHS_DS_FOR_COMPARE), SHS_OK);
            cfg = shs_train_default_config();
            shs_ds_config_describe(&ds, &cfg, ds.src, "", buf, sizeof buf);
            assert_non_null(strstr(buf, "ignored: comms_config (not a DeepSpeed key: DeepSpeed passes over"));
            assert_non_null(strstr(buf, "ignored: monitor_config (not a DeepSpeed key"));
        }
        if (!strcmp(c->name, "dse__training_imagenet_config_ds_fp16_config")) { /* auto_cast, cuda_visible_devices */
            assert_int_equal(read_as(c, SHS_DS_FOR_TRAIN), SHS_OK);
            assert_int_equal(ds.vals.strategy.param_dtype, SHS_F16);
            cfg = shs_train_default_config();
            shs_ds_config_describe(&ds, &cfg, ds.src, "", buf, sizeof buf);
            assert_non_null(strstr(buf, "ignored: fp16.auto_cast (shardsim's inputs are token ids"));
            assert_non_null(strstr(buf, "ignored: cuda_visible_devices (not a DeepSpeed key"));
        }
        if (!strcmp(c->name, "dse__training_BingBertSquad_deepspeed_bsz24_config")) { /* Adam without bias correction */
            assert_int_equal(read_as(c, SHS_DS_FOR_TRAIN), SHS_OK);
            assert_int_equal(ds.vals.strategy.optim.no_bias_correction, 1);
        }
        if (!strcmp(c->name, "alpaca__default_offload_opt_param")) { /* WarmupDecayLR, every param "auto" */
            const char *path = test_tmp_write("real.json", c->json, strlen(c->json));
            assert_int_equal(shs_ds_config_load(path, &ds), SHS_OK);
            cfg = shs_train_default_config();
            cfg.strategy.lr_schedule.warmup_steps = 10;
            cfg.strategy.lr_schedule.total_steps = 100;
            assert_int_equal(shs_ds_config_apply(&ds, NULL, 64, &cfg, src), SHS_OK);
            const shs_lr_schedule_t *ls = &cfg.strategy.lr_schedule;
            assert_int_equal(ls->kind, SHS_LR_WARMUP_DECAY_LR);
            assert_true(ls->min_lr == 0 && ls->max_lr == 5e-5); /* fill_only 0; TrainingArguments.learning_rate */
            assert_true(ls->warmup_steps == 10 && ls->total_steps == 100);
            assert_int_equal(src[SHS_DS_WARMUP_STEPS], SHS_DS_FROM_AUTO);
            shs_ds_config_describe(&ds, &cfg, src, "", buf, sizeof buf);
            assert_non_null(strstr(buf, "lr schedule WarmupDecayLR (config), warmup steps 10 (auto), total steps 100 "
                                        "(auto)"));
            assert_non_null(strstr(buf, "auto (HF Trainer rule): scheduler.params.warmup_max_lr = 5e-05"));
            /* compare: the lr changes nothing it reports */
            assert_int_equal(read_as(c, SHS_DS_FOR_COMPARE), SHS_OK);
            cfg = shs_train_default_config();
            shs_ds_config_describe(&ds, &cfg, ds.src, "", buf, sizeof buf);
            assert_non_null(strstr(buf, "ignored: scheduler (changes only the trained values, which compare does not "
                                        "compute)"));
        }
    }
}

#else

static void test_without_jansson(void **state) {
    (void)state;
    const char *path = test_tmp_write("real.json", real_configs[0].json, strlen(real_configs[0].json));
    assert_int_equal(shs_ds_config_load(path, &ds), SHS_UNSUPPORTED);
}

#endif

int main(void) {
    const struct CMUnitTest tests[] = {
#ifdef SHS_HAVE_JANSSON
        cmocka_unit_test(test_real_configs),
        cmocka_unit_test(test_what_they_become),
#else
        cmocka_unit_test(test_without_jansson),
#endif
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
