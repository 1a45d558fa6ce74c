/* test_ds_config_keys.c - the DeepSpeed config keys that follow DeepSpeed's
 * own handling rather than a blanket rule: the scheduler section, gradient
 * averaging by ZeRO stage, unknown keys (passed over at the top level and in
 * sections DeepSpeed reads key by key, refused where DeepSpeed refuses
 * them), keys that change only the trained values (accepted as ignored by
 * compare), and feature sections switched off.
 *
 * Independent references: deepspeed/runtime/lr_schedules.py (constructor
 * defaults: warmup_num_steps 1000, warmup_max_lr the optimizer's lr for
 * WarmupLR and 0.001 for WarmupDecayLR, cos_min_ratio 1e-4, OneCycle's second
 * half defaulting to the first; its ValueError for warmup_num_steps that is
 * not a positive int), runtime/engine.py (_scheduler_from_config: unknown
 * names assert, params passed as keyword arguments; allreduce_bucket),
 * runtime/zero/stage_1_and_2.py and stage3.py (their asserts on
 * prescale/predivide with reduce_scatter), runtime/config.py (top-level keys
 * read one by one), transformers integrations/deepspeed.py
 * (trainer_config_process / _finalize: warmup_min_lr 0, warmup_max_lr
 * learning_rate, warmup_num_steps get_warmup_steps, total_num_steps
 * num_training_steps).
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

static shs_ds_config_t ds; /* large: not on the stack */
static char buf[8192];

#ifdef SHS_HAVE_JANSSON

/* Load for `use` and apply at world 4 with the HF Trainer's warmup 10 and
 * total 100; given may be NULL. */
static shs_status_t read_apply(const char *json, shs_ds_use_t use, const int *given, shs_train_config_t *cfg,
                               shs_ds_source_t *src) {
    const char *path = test_tmp_write("ds.json", json, strlen(json));
    SHS_CHECK(shs_ds_config_load_for(path, use, &ds));
    SHS_CHECK(shs_ds_config_apply(&ds, given, 64, cfg, src));
    shs_ds_config_describe(&ds, cfg, src, "", buf, sizeof buf);
    return SHS_OK;
}

static shs_train_config_t base(void) {
    shs_train_config_t c = shs_train_default_config();
    c.world_size = 4;
    c.strategy.lr_schedule.warmup_steps = 10;
    c.strategy.lr_schedule.total_steps = 100;
    return c;
}

static void expect(const char *json, shs_ds_use_t use, shs_status_t want, const char *part) {
    shs_train_config_t c = base();
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    shs_status_t st = read_apply(json, use, NULL, &c, src);
    const char *text = st == SHS_OK ? buf : shs_last_error();
    if (st != want || (part && !strstr(text, part)))
        fail_msg("want status %d with '%s', got %d: %s", (int)want, part ? part : "", (int)st, text);
}

#define TB "{\"train_batch_size\": 8, "

static void test_scheduler_types_and_defaults(void **state) {
    (void)state;
    shs_train_config_t c = base();
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    const shs_lr_schedule_t *ls = &c.strategy.lr_schedule;
    /* WarmupLR: warmup_max_lr defaults to the optimizer's lr, 1000 steps, log */
    assert_int_equal(read_apply(TB "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.002}}, \"scheduler\": "
                                "{\"type\": \"WarmupLR\", \"params\": {}}}", SHS_DS_FOR_TRAIN, NULL, &c, src), SHS_OK);
    assert_int_equal(ls->kind, SHS_LR_WARMUP_LR);
    assert_true(ls->max_lr == (double)0.002f && ls->min_lr == 0 && ls->warmup_steps == 1000 && !ls->warmup_linear);
    assert_int_equal(src[SHS_DS_WARMUP_STEPS], SHS_DS_FROM_DS_DEFAULT);
    assert_non_null(strstr(buf, "lr schedule WarmupLR (config), warmup steps 1000 (DeepSpeed default)"));
    /* WarmupDecayLR: warmup_max_lr 0.001 by default; linear warmup */
    c = base();
    assert_int_equal(read_apply(TB "\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": 50, "
                                "\"warmup_num_steps\": 5, \"warmup_type\": \"linear\"}}}", SHS_DS_FOR_TRAIN, NULL, &c,
                                src), SHS_OK);
    assert_true(ls->max_lr == 0.001 && ls->total_steps == 50 && ls->warmup_steps == 5 && ls->warmup_linear);
    /* WarmupCosineLR */
    c = base();
    assert_int_equal(read_apply(TB "\"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"total_num_steps\": 40, "
                                "\"warmup_min_ratio\": 0.1}}}", SHS_DS_FOR_TRAIN, NULL, &c, src), SHS_OK);
    assert_true(ls->cos_min_ratio == 1e-4 && ls->warmup_min_ratio == 0.1 && ls->warmup_steps == 1000);
    /* OneCycle: the second half and stairs default to the first's */
    c = base();
    assert_int_equal(read_apply(TB "\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 1e-4, "
                                "\"cycle_max_lr\": 1e-3, \"cycle_first_step_size\": 7, \"cycle_first_stair_count\": 2, "
                                "\"cycle_momentum\": false}}}", SHS_DS_FOR_TRAIN, NULL, &c, src), SHS_OK);
    assert_true(ls->cycle.second_step_size == 7 && ls->cycle.second_stair_count == 2 && !ls->cycle.momentum);
    assert_true(ls->cycle.min_mom == 0.8 && ls->cycle.max_mom == 0.9);
    /* an unknown warmup_type: DeepSpeed warns and uses log */
    c = base();
    assert_int_equal(read_apply(TB "\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_type\": \"cos\"}}}",
                                SHS_DS_FOR_TRAIN, NULL, &c, src), SHS_OK);
    assert_false(ls->warmup_linear);
    assert_non_null(strstr(buf, "scheduler.params.warmup_type \"cos\": not log or linear; DeepSpeed warns and uses log"));
    /* no type: DeepSpeed builds no scheduler */
    expect(TB "\"scheduler\": {\"params\": {}}}", SHS_DS_FOR_TRAIN, SHS_OK, "ignored: scheduler (no type");
}

static void test_scheduler_refusals(void **state) {
    (void)state;
    /* what DeepSpeed refuses, refused for compare too */
    static const shs_ds_use_t uses[] = {SHS_DS_FOR_TRAIN, SHS_DS_FOR_COMPARE};
    for (int u = 0; u < 2; u++) {
        expect(TB "\"scheduler\": {\"type\": \"NoSuchLR\", \"params\": {}}}", uses[u], SHS_UNSUPPORTED,
               "scheduler.type = \"NoSuchLR\": DeepSpeed refuses it too");
        expect(TB "\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_num_steps\": 3}}}", uses[u],
               SHS_UNSUPPORTED, "scheduler.params.total_num_steps is missing");
        expect(TB "\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_steps\": 3}}}", uses[u],
               SHS_UNSUPPORTED, "unknown key scheduler.params.warmup_steps: DeepSpeed passes the params");
        expect(TB "\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 1e3}}}", uses[u],
               SHS_PARSE, "scheduler.params.warmup_num_steps = 1000.0: want a positive integer");
        expect(TB "\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 0}}}", uses[u],
               SHS_PARSE, "want a positive integer");
        expect(TB "\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_max_lr\": 1}}}", uses[u],
               SHS_UNSUPPORTED, "scheduler.params.cycle_min_lr is missing");
        expect(TB "\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": \"auto\", \"cycle_max_lr\": 1}}}",
               uses[u], SHS_PARSE, "'auto' is filled in by the Hugging Face Trainer");
    }
    /* what changes only the lr: refused by train, ignored by compare */
    static const char *const lr_only[] = {
        TB "\"scheduler\": {\"type\": \"StepLR\", \"params\": {\"step_size\": 10}}}",
        TB "\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"last_batch_iteration\": 5}}}",
        TB "\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_max_lr\": [0.1, 0.2]}}}",
    };
    static const char *const named[] = {"scheduler.type = \"StepLR\" is not modelled",
                                        "scheduler.params.last_batch_iteration = 5 is not modelled",
                                        "scheduler.params.warmup_max_lr = [0.1,0.2] is not modelled"};
    for (int k = 0; k < 3; k++) {
        expect(lr_only[k], SHS_DS_FOR_TRAIN, SHS_UNSUPPORTED, named[k]);
        expect(lr_only[k], SHS_DS_FOR_COMPARE, SHS_OK, "ignored: scheduler (changes only the trained values");
    }
}

/* "auto" from the HF Trainer's arguments, and the command line's precedence */
static void test_scheduler_auto_and_command_line(void **state) {
    (void)state;
    const char *hf = TB "\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_min_lr\": \"auto\", "
                        "\"warmup_max_lr\": \"auto\", \"warmup_num_steps\": \"auto\", \"total_num_steps\": \"auto\"}}}";
    shs_train_config_t c = base();
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    const shs_lr_schedule_t *ls = &c.strategy.lr_schedule;
    assert_int_equal(read_apply(hf, SHS_DS_FOR_TRAIN, NULL, &c, src), SHS_OK);
    assert_true(ls->min_lr == 0 && ls->max_lr == 5e-5 && ls->warmup_steps == 10 && ls->total_steps == 100);
    assert_non_null(strstr(buf, "auto (HF Trainer rule): scheduler.params.total_num_steps = 100 (total steps: auto)"));
    /* --lr 0.01: learning_rate */
    int given[SHS_DS_NUM_SETTINGS] = {0};
    given[SHS_DS_LR] = 1;
    c = base();
    c.strategy.optim.lr = 0.01f;
    assert_int_equal(read_apply(hf, SHS_DS_FOR_TRAIN, given, &c, src), SHS_OK);
    assert_true(ls->max_lr == (double)0.01f);
    /* the Trainer's warmup 0 (no --warmup-steps or ratio): DeepSpeed's WarmupDecayLR refuses it */
    c = base();
    c.strategy.lr_schedule.warmup_steps = 0;
    assert_int_equal(read_apply(hf, SHS_DS_FOR_TRAIN, NULL, &c, src), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "warmup_num_steps = \"auto\" is 0 here"));
    assert_non_null(strstr(shs_last_error(), "give --warmup-steps N or --warmup-ratio R"));
    /* --warmup-steps and --lr-total-steps win over the file's numbers */
    const char *fixed = TB "\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_num_steps\": 7, "
                           "\"total_num_steps\": 70}}}";
    memset(given, 0, sizeof given);
    given[SHS_DS_WARMUP_STEPS] = given[SHS_DS_TOTAL_STEPS] = 1;
    c = base();
    assert_int_equal(read_apply(fixed, SHS_DS_FOR_TRAIN, given, &c, src), SHS_OK);
    assert_true(ls->warmup_steps == 10 && ls->total_steps == 100);
    assert_non_null(strstr(buf, "warmup steps 10 (command line), total steps 100 (command line)"));
    /* --lr-schedule cosine: the file's scheduler has no effect */
    memset(given, 0, sizeof given);
    given[SHS_DS_LR_SCHEDULE] = 1;
    c = base();
    c.strategy.lr_schedule.kind = SHS_LR_COSINE;
    assert_int_equal(read_apply(fixed, SHS_DS_FOR_TRAIN, given, &c, src), SHS_OK);
    assert_int_equal(ls->kind, SHS_LR_COSINE);
    assert_non_null(strstr(buf, "note: scheduler (type WarmupDecayLR): no effect, --lr-schedule cosine (command line)"));
    /* compare: nothing applied */
    c = base();
    assert_int_equal(read_apply(hf, SHS_DS_FOR_COMPARE, NULL, &c, src), SHS_OK);
    assert_int_equal(ls->kind, SHS_LR_CONSTANT);
    assert_int_equal(src[SHS_DS_LR_SCHEDULE], SHS_DS_FROM_SHARDSIM);
}

/* prescale_gradients / gradient_predivide_factor by the effective stage */
static void test_grad_averaging_by_stage(void **state) {
    (void)state;
    shs_train_config_t c = base();
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    assert_int_equal(read_apply(TB "\"gradient_predivide_factor\": 8}", SHS_DS_FOR_TRAIN, NULL, &c, src), SHS_OK);
    assert_true(c.strategy.gradient_predivide_factor == 8.0f && !c.strategy.prescale_gradients);
    assert_non_null(strstr(buf, "gradient averaging: gradient_predivide_factor 8 (config): x 1/8 before the sum, "
                                "x 8/4 after"));
    c = base();
    assert_int_equal(read_apply(TB "\"prescale_gradients\": true}", SHS_DS_FOR_TRAIN, NULL, &c, src), SHS_OK);
    assert_true(c.strategy.prescale_gradients);
    assert_non_null(strstr(buf, "gradient averaging: prescale_gradients (config): x 1/4 before the sum"));
    /* ZeRO-1 reads neither: not applied, said so */
    c = base();
    assert_int_equal(read_apply(TB "\"prescale_gradients\": true, \"zero_optimization\": {\"stage\": 1}}",
                                SHS_DS_FOR_TRAIN, NULL, &c, src), SHS_OK);
    assert_false(c.strategy.prescale_gradients);
    assert_non_null(strstr(buf, "note: prescale_gradients / gradient_predivide_factor: no effect under zero1"));
    /* ZeRO-2 and ZeRO-3 (MiCS too) assert them away: refused, for compare as well */
    expect(TB "\"prescale_gradients\": true, \"zero_optimization\": {\"stage\": 2}}", SHS_DS_FOR_TRAIN,
           SHS_INVALID_ARG, "prescale_gradients = true under zero2 (config): DeepSpeed refuses it too (\"pre-scale "
                            "gradients is not yet supported with ZeRO-2 with reduce scatter enabled\")");
    expect(TB "\"gradient_predivide_factor\": 2, \"zero_optimization\": {\"stage\": 3}}", SHS_DS_FOR_COMPARE,
           SHS_INVALID_ARG, "gradient_predivide_factor = 2 under zero3 (config)");
    expect(TB "\"gradient_predivide_factor\": 2, \"zero_optimization\": {\"stage\": 3, \"mics_shard_size\": 2}}",
           SHS_DS_FOR_TRAIN, SHS_INVALID_ARG, "under hybrid_shard (config)");
    /* the command line's stage decides */
    int given[SHS_DS_NUM_SETTINGS] = {0};
    given[SHS_DS_STAGE] = 1;
    c = base();
    c.strategy.kind = SHS_ZERO3;
    assert_int_equal(read_apply(TB "\"gradient_predivide_factor\": 2}", SHS_DS_FOR_TRAIN, given, &c, src),
                     SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "under zero3 (command line)"));
    /* at its default it is no averaging at all; 0 is DeepSpeed's division by zero */
    c = base();
    c.strategy.kind = SHS_ZERO3;
    assert_int_equal(read_apply(TB "\"gradient_predivide_factor\": 1.0, \"prescale_gradients\": false}",
                                SHS_DS_FOR_TRAIN, given, &c, src), SHS_OK);
    expect(TB "\"gradient_predivide_factor\": 0}", SHS_DS_FOR_TRAIN, SHS_PARSE, "ZeroDivisionError");
    /* compare at stage 0: the values only, ignored */
    c = base();
    assert_int_equal(read_apply(TB "\"prescale_gradients\": true}", SHS_DS_FOR_COMPARE, NULL, &c, src), SHS_OK);
    assert_false(c.strategy.prescale_gradients);
    assert_non_null(strstr(buf, "ignored: prescale_gradients (changes only the trained values"));
}

/* unknown keys: passed over where DeepSpeed passes over them */
static void test_unknown_keys(void **state) {
    (void)state;
    expect(TB "\"train_micro_batch_size\": 2}", SHS_DS_FOR_TRAIN, SHS_OK,
           "ignored: train_micro_batch_size (not a DeepSpeed key: DeepSpeed passes over top-level keys it does not "
           "read; did you mean train_micro_batch_size_per_gpu?)");
    expect(TB "\"gradient_cliping\": 1.0}", SHS_DS_FOR_TRAIN, SHS_OK, "did you mean gradient_clipping?");
    expect(TB "\"cuda_visible_devices\": 0}", SHS_DS_FOR_TRAIN, SHS_OK,
           "ignored: cuda_visible_devices (not a DeepSpeed key: DeepSpeed passes over top-level keys it does not "
           "read)\n");
    expect(TB "\"zero_force_ds_cpu_optimizer\": false}", SHS_DS_FOR_TRAIN, SHS_OK,
           "ignored: zero_force_ds_cpu_optimizer (a check on the client's optimizer, no behaviour)");
    expect(TB "\"data_types\": {\"param_dtype_x\": 1}}", SHS_DS_FOR_TRAIN, SHS_OK, "ignored: data_types.param_dtype_x");
    expect(TB "\"optimizer\": {\"type\": \"AdamW\", \"comment\": \"x\"}}", SHS_DS_FOR_TRAIN, SHS_OK,
           "ignored: optimizer.comment");
    expect(TB "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"foo\": 1}}}", SHS_DS_FOR_COMPARE, SHS_UNSUPPORTED,
           "unknown key optimizer.params.foo: DeepSpeed refuses it too (the optimizer's constructor");
    expect(TB "\"bf16\": {\"enabled\": true, \"foo\": 1}}", SHS_DS_FOR_TRAIN, SHS_UNSUPPORTED,
           "unknown key bf16.foo: DeepSpeed refuses it too");
    /* a real key is not guessed at: fp16.auto_cast is DeepSpeed's, and casts only floating inputs */
    expect(TB "\"fp16\": {\"enabled\": true, \"auto_cast\": true}}", SHS_DS_FOR_TRAIN, SHS_OK,
           "ignored: fp16.auto_cast (shardsim's inputs are token ids (integers): no effect)");
}

/* keys of the trained values only: train models or refuses them, compare ignores them */
static void test_values_only_keys(void **state) {
    (void)state;
    shs_train_config_t c = base();
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    const char *nobc = TB "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"bias_correction\": false}}}";
    assert_int_equal(read_apply(nobc, SHS_DS_FOR_TRAIN, NULL, &c, src), SHS_OK);
    assert_int_equal(c.strategy.optim.no_bias_correction, 1);
    assert_non_null(strstr(buf, "bias correction off (config)"));
    c = base();
    assert_int_equal(read_apply(nobc, SHS_DS_FOR_COMPARE, NULL, &c, src), SHS_OK);
    assert_int_equal(c.strategy.optim.no_bias_correction, 0);
    assert_non_null(strstr(buf, "ignored: optimizer.params.bias_correction (changes only the trained values"));
    static const char *const refused_by_train[] = {
        TB "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"adam_w_mode\": false}}}",
        TB "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"max_grad_norm\": 1.0}}}",
        TB "\"gradient_allreduce_op\": \"sum\"}",
        TB "\"optimizer\": {\"type\": \"SGD\", \"params\": {\"nesterov\": true, \"momentum\": 0.9}}}",
    };
    static const char *const named[] = {"optimizer.params.adam_w_mode = false", "optimizer.params.max_grad_norm",
                                        "gradient_allreduce_op = \"sum\"", "optimizer.params.nesterov = true"};
    for (int k = 0; k < 4; k++) {
        expect(refused_by_train[k], SHS_DS_FOR_TRAIN, SHS_UNSUPPORTED, named[k]);
        expect(refused_by_train[k], SHS_DS_FOR_COMPARE, SHS_OK, "(changes only the trained values");
    }
    /* AMSGrad keeps another state array: memory compare reports, refused by both */
    expect(TB "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"amsgrad\": true}}}", SHS_DS_FOR_COMPARE,
           SHS_UNSUPPORTED, "optimizer.params.amsgrad = true is not modelled");
}

static void test_feature_sections(void **state) {
    (void)state;
    expect(TB "\"progressive_layer_drop\": {\"enabled\": false, \"theta\": 0.5}}", SHS_DS_FOR_TRAIN, SHS_OK,
           "ignored: progressive_layer_drop (enabled false: no effect)");
    expect(TB "\"curriculum_learning\": {}}", SHS_DS_FOR_TRAIN, SHS_OK, "ignored: curriculum_learning");
    expect(TB "\"data_efficiency\": {\"enabled\": true}}", SHS_DS_FOR_COMPARE, SHS_UNSUPPORTED,
           "data_efficiency = {\"enabled\":true} is not modelled");
    expect(TB "\"sequence_parallel_size\": 1}", SHS_DS_FOR_TRAIN, SHS_OK, NULL);
    expect(TB "\"sequence_parallel_size\": 2}", SHS_DS_FOR_TRAIN, SHS_UNSUPPORTED, "sequence_parallel_size = 2");
    expect(TB "\"compile\": {\"deepcompile\": true}}", SHS_DS_FOR_TRAIN, SHS_UNSUPPORTED, "compile.deepcompile");
    expect(TB "\"managed_gradient_accumulation\": false}", SHS_DS_FOR_TRAIN, SHS_UNSUPPORTED,
           "managed_gradient_accumulation = false");
}

#else

static void test_without_jansson(void **state) {
    (void)state;
    const char *path = test_tmp_write("ds.json", "{}", 2);
    assert_int_equal(shs_ds_config_load_for(path, SHS_DS_FOR_COMPARE, &ds), SHS_UNSUPPORTED);
    (void)buf;
}

#endif

int main(void) {
    const struct CMUnitTest tests[] = {
#ifdef SHS_HAVE_JANSSON
        cmocka_unit_test(test_scheduler_types_and_defaults),
        cmocka_unit_test(test_scheduler_refusals),
        cmocka_unit_test(test_scheduler_auto_and_command_line),
        cmocka_unit_test(test_grad_averaging_by_stage),
        cmocka_unit_test(test_unknown_keys),
        cmocka_unit_test(test_values_only_keys),
        cmocka_unit_test(test_feature_sections),
#else
        cmocka_unit_test(test_without_jansson),
#endif
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
