/* test_ds_config.c - the DeepSpeed config reader (ds_config.h): every mapped
 * key, the refusals (by file and key path), DeepSpeed's batch-size rule and
 * the command line's precedence.
 *
 * Independent references: DeepSpeed's docs/_pages/config-json.md and
 * runtime/config.py for each key's meaning and default (stage 0, hysteresis
 * 2, loss_scale_window 1000, min_loss_scale 1, persistence threshold 1e5),
 * the batch rule worked by hand (train_batch_size 32 = 2 x 4 x 4, ...),
 * engine.py's Adam table (adam_w_mode true by default) and FusedAdam's
 * weight_decay default 0.
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

static const char *write_cfg(const char *name, const char *json) { return test_tmp_write(name, json, strlen(json)); }

#ifdef SHS_HAVE_JANSSON

/* Load and apply with the train defaults at world 4; given may be NULL. */
static shs_status_t load_apply(const char *json, const int *given, shs_train_config_t *cfg, shs_ds_source_t *src) {
    const char *path = write_cfg("ds.json", json);
    shs_status_t st = shs_ds_config_load(path, &ds);
    if (st != SHS_OK) return st;
    return shs_ds_config_apply(&ds, given, cfg->model.channels, cfg, src);
}

static shs_train_config_t defaults4(void) {
    shs_train_config_t c = shs_train_default_config();
    c.world_size = 4;
    return c;
}

static void expect_error(const char *json, shs_status_t want, const char *part1, const char *part2) {
    shs_train_config_t c = defaults4();
    shs_status_t st = load_apply(json, NULL, &c, NULL);
    if (st != want || !strstr(shs_last_error(), part1) || (part2 && !strstr(shs_last_error(), part2)))
        fail_msg("want status %d with '%s' / '%s', got %d: %s", (int)want, part1, part2 ? part2 : "", (int)st,
                 shs_last_error());
    assert_non_null(strstr(shs_last_error(), "ds.json")); /* every message names the file */
}

static void test_every_key_mapped(void **state) {
    (void)state;
    shs_train_config_t c = defaults4();
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    const char *json =
        "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 3, \"gradient_clipping\": 0.5,"
        " \"communication_data_type\": \"fp32\", \"data_types\": {\"grad_accum_dtype\": \"fp32\"},"
        " \"fp16\": {\"enabled\": true, \"initial_scale_power\": 12, \"loss_scale_window\": 500, \"hysteresis\": 3,"
        "           \"min_loss_scale\": 0.25, \"loss_scale\": 0, \"consecutive_hysteresis\": true},"
        " \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.002, \"betas\": [0.8, 0.95], \"eps\": 1e-6,"
        "                 \"weight_decay\": 0.05}},"
        " \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\"},"
        "   \"offload_param\": {\"device\": \"cpu\"}, \"stage3_param_persistence_threshold\": 4096,"
        "   \"stage3_prefetch_bucket_size\": 0, \"mics_shard_size\": 2, \"contiguous_gradients\": true},"
        " \"steps_per_print\": 5, \"wall_clock_breakdown\": true}";
    assert_int_equal(load_apply(json, NULL, &c, src), SHS_OK);
    assert_int_equal(c.strategy.kind, SHS_HYBRID_SHARD); /* stage 3 + MiCS */
    assert_int_equal(c.strategy.shard_group_size, 2);
    assert_int_equal(c.strategy.offload, SHS_OFFLOAD_PARAMS);
    assert_int_equal(c.replicate_below, 4096);
    assert_int_equal(c.strategy.backward_prefetch, SHS_PREFETCH_NONE);
    assert_int_equal(c.strategy.param_dtype, SHS_F16);
    assert_int_equal(c.strategy.reduce_dtype, SHS_F32);
    assert_int_equal(c.strategy.grad_accum_dtype, SHS_F32);
    assert_true(c.strategy.scaler.init_scale == 4096.0f); /* 2^12 */
    assert_int_equal(c.strategy.scaler.growth_interval, 500);
    assert_int_equal(c.strategy.scaler.kind, SHS_SCALER_DEEPSPEED);
    assert_int_equal(c.strategy.scaler.hysteresis, 3);
    assert_int_equal(c.strategy.scaler.consecutive_hysteresis, 1);
    assert_true(c.strategy.scaler.min_scale == 0.25f);
    assert_int_equal(c.micro_batch, 2);
    assert_int_equal(c.grad_accum, 3);
    assert_true(c.strategy.clip_norm == 0.5f);
    assert_int_equal(c.strategy.optim.kind, SHS_OPTIM_ADAMW); /* Adam with adam_w_mode (default true) */
    assert_true(c.strategy.optim.lr == 0.002f && c.strategy.optim.beta1 == 0.8f && c.strategy.optim.beta2 == 0.95f);
    assert_true(c.strategy.optim.eps == 1e-6f && c.strategy.optim.weight_decay == 0.05f);
    assert_int_equal(src[SHS_DS_STAGE], SHS_DS_FROM_CONFIG);
    assert_int_equal(src[SHS_DS_WORLD], SHS_DS_FROM_SHARDSIM);
    assert_int_equal(ds.num_ignored, 2); /* steps_per_print, wall_clock_breakdown */
    /* the granularity: DeepSpeed's defaults (runtime/zero/config.py) but the prefetch bucket given 0 */
    assert_int_equal(c.strategy.zero.reduce_bucket, 500000000);
    assert_int_equal(c.strategy.zero.allgather_bucket, 500000000);
    assert_int_equal(c.strategy.zero.contiguous_gradients, 1);
    assert_int_equal(c.strategy.zero.overlap_comm, 1); /* true at stage 3 */
    assert_int_equal(c.strategy.zero.prefetch_bucket, 0);
    assert_int_equal(c.strategy.zero.max_live, 1000000000);
    assert_int_equal(c.strategy.zero.max_reuse, 1000000000);
    char buf[8192];
    shs_ds_config_describe(&ds, &c, src, "", buf, sizeof buf);
    assert_non_null(strstr(buf, "strategy hybrid_shard (config), shard group 2 (config)"));
    assert_non_null(strstr(buf, "ignored: steps_per_print"));
    assert_non_null(strstr(buf, "ZeRO granularity (config): reduce bucket 500000000 elements (contiguous gradients yes, "
                                "overlap comm yes), all-gather bucket 500000000; stage 3: prefetch bucket 0, max live "
                                "1000000000, max reuse distance 1000000000"));
    assert_non_null(strstr(buf, "micro-batch 2 (config) x accumulation 3 (config) x world 4"));
    assert_non_null(strstr(buf, "loss scaler deepspeed (config): initial scale 4096 (config), scale window 500 (config), "
                                "hysteresis 3 consecutive (config), min loss scale 0.25 (config)"));
}

/* A file that leaves keys out gets DeepSpeed's defaults, not shardsim's. */
static void test_deepspeed_defaults(void **state) {
    (void)state;
    shs_train_config_t c = defaults4();
    c.strategy.kind = SHS_ZERO3; /* shardsim's default: the file's absent stage means 0 */
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    assert_int_equal(load_apply("{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\"}}", NULL,
                                &c, src), SHS_OK);
    assert_int_equal(c.strategy.kind, SHS_DDP);
    assert_int_equal(src[SHS_DS_STAGE], SHS_DS_FROM_DS_DEFAULT);
    assert_int_equal(c.strategy.param_dtype, SHS_F32);
    assert_true(c.strategy.optim.weight_decay == 0.0f); /* FusedAdam's default, not torch AdamW's 0.01 */
    assert_int_equal(src[SHS_DS_WEIGHT_DECAY], SHS_DS_FROM_DS_DEFAULT);
    assert_true(c.strategy.clip_norm == 0.0f);
    assert_int_equal(c.grad_accum, 1);
    /* stage 3 without the threshold: DeepSpeed's 1e5 */
    c = defaults4();
    assert_int_equal(load_apply("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3}}", NULL, &c, src),
                     SHS_OK);
    assert_int_equal(c.replicate_below, 100000);
    assert_int_equal(src[SHS_DS_REPLICATE_BELOW], SHS_DS_FROM_DS_DEFAULT);
    /* torch_adam AdamW: torch.optim.AdamW's weight decay 0.01 */
    c = defaults4();
    assert_int_equal(load_apply("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"adamw\", \"params\": "
                                "{\"torch_adam\": true}}}", NULL, &c, src), SHS_OK);
    assert_true(c.strategy.optim.weight_decay == 0.01f);
    /* SGD (torch.optim's name) */
    c = defaults4();
    assert_int_equal(load_apply("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"SGD\", \"params\": "
                                "{\"lr\": 0.1, \"momentum\": 0.9}}}", NULL, &c, src), SHS_OK);
    assert_int_equal(c.strategy.optim.kind, SHS_OPTIM_SGD);
    assert_true(c.strategy.optim.momentum == 0.9f && c.strategy.optim.lr == 0.1f);
}

/* runtime/config.py: _set_batch_related_parameters, then _batch_assertion */
static void test_batch_rule(void **state) {
    (void)state;
    shs_train_config_t c = defaults4();
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    /* train + micro: accumulation 32 / 2 / 4 = 4 */
    assert_int_equal(load_apply("{\"train_batch_size\": 32, \"train_micro_batch_size_per_gpu\": 2}", NULL, &c, src),
                     SHS_OK);
    assert_int_equal(c.grad_accum, 4);
    assert_int_equal(src[SHS_DS_GRAD_ACCUM], SHS_DS_FROM_DERIVED);
    /* train + accumulation: micro 32 / 4 / 2 = 4 */
    c = defaults4();
    assert_int_equal(load_apply("{\"train_batch_size\": 32, \"gradient_accumulation_steps\": 2}", NULL, &c, src),
                     SHS_OK);
    assert_int_equal(c.micro_batch, 4);
    assert_int_equal(src[SHS_DS_MICRO_BATCH], SHS_DS_FROM_DERIVED);
    /* train only: accumulation 1, micro 12 / 4 = 3 */
    c = defaults4();
    assert_int_equal(load_apply("{\"train_batch_size\": 12}", NULL, &c, src), SHS_OK);
    assert_true(c.micro_batch == 3 && c.grad_accum == 1);
    /* all three, agreeing */
    c = defaults4();
    assert_int_equal(load_apply("{\"train_batch_size\": 24, \"train_micro_batch_size_per_gpu\": 3, "
                                "\"gradient_accumulation_steps\": 2}", NULL, &c, src), SHS_OK);
    /* a contradiction names the three values and the world */
    expect_error("{\"train_batch_size\": 25, \"train_micro_batch_size_per_gpu\": 3, \"gradient_accumulation_steps\": 2}",
                 SHS_INVALID_ARG, "train_batch_size 25 != train_micro_batch_size_per_gpu 3", "gradient_accumulation_steps 2 (config) x world 4");
    /* derived by division, which must be exact: 30 / (4 x 2) is not whole */
    expect_error("{\"train_batch_size\": 30, \"gradient_accumulation_steps\": 2}", SHS_INVALID_ARG,
                 "train_batch_size 30 is not divisible by world 4 (shardsim default) x gradient_accumulation_steps 2 "
                 "(config)", NULL);
    /* train_batch_size alone: accumulation 1, 32 / 3 not whole (not "micro 10 (derived) ... != 32") */
    c = defaults4();
    c.world_size = 3;
    assert_int_equal(shs_ds_config_load(write_cfg("tb.json", "{\"train_batch_size\": 32}"), &ds), SHS_OK);
    assert_int_equal(shs_ds_config_apply(&ds, NULL, 64, &c, src), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "train_batch_size 32 is not divisible by world 3 (shardsim default) x "
                                             "accumulation 1"));
    /* nothing to size the batch with */
    expect_error("{\"gradient_accumulation_steps\": 2}", SHS_INVALID_ARG, "neither train_batch_size nor", NULL);
}

/* Options given on the command line win; the batch rule sees them. */
static void test_command_line_precedence(void **state) {
    (void)state;
    int given[SHS_DS_NUM_SETTINGS] = {0};
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    shs_train_config_t c = defaults4();
    c.strategy.kind = SHS_ZERO1; /* as --strategy zero1 */
    c.micro_batch = 4;          /* as --micro-batch 4 */
    c.strategy.optim.lr = 0.5f; /* as --lr 0.5 */
    given[SHS_DS_STAGE] = given[SHS_DS_MICRO_BATCH] = given[SHS_DS_LR] = given[SHS_DS_WORLD] = 1;
    const char *json = "{\"train_batch_size\": 32, \"train_micro_batch_size_per_gpu\": 2,"
                       " \"zero_optimization\": {\"stage\": 2}, \"optimizer\": {\"type\": \"AdamW\", \"params\": "
                       "{\"lr\": 0.001, \"eps\": 1e-6}}}";
    assert_int_equal(load_apply(json, given, &c, src), SHS_OK);
    assert_int_equal(c.strategy.kind, SHS_ZERO1);
    assert_int_equal(src[SHS_DS_STAGE], SHS_DS_FROM_COMMAND_LINE);
    assert_true(c.strategy.optim.lr == 0.5f && c.strategy.optim.eps == 1e-6f);
    assert_int_equal(src[SHS_DS_EPS], SHS_DS_FROM_CONFIG);
    assert_int_equal(c.micro_batch, 4);
    assert_int_equal(c.grad_accum, 2); /* 32 / 4 (command line) / 4 */
    assert_int_equal(src[SHS_DS_WORLD], SHS_DS_FROM_COMMAND_LINE);
    char buf[4096];
    shs_ds_config_describe(&ds, &c, src, "", buf, sizeof buf);
    assert_non_null(strstr(buf, "strategy zero1 (command line)"));
    assert_non_null(strstr(buf, "micro-batch 4 (command line) x accumulation 2 (derived) x world 4 (command line)"));
    /* a command-line micro-batch that contradicts the file's three */
    c = defaults4();
    c.micro_batch = 3;
    memset(given, 0, sizeof given);
    given[SHS_DS_MICRO_BATCH] = 1;
    assert_int_equal(load_apply("{\"train_batch_size\": 16, \"train_micro_batch_size_per_gpu\": 2, "
                                "\"gradient_accumulation_steps\": 2}", given, &c, src), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "train_micro_batch_size_per_gpu 3 (command line)"));
}

static void test_refusals(void **state) {
    (void)state;
    expect_error("{\"train_batch_size\": 4, \"fp16\": {\"enabled\": true, \"hysteresis\": 0}}", SHS_PARSE,
                 "fp16.hysteresis = 0", NULL);
    expect_error("{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": "
                 "{\"device\": \"nvme\"}}}", SHS_UNSUPPORTED, "zero_optimization.offload_optimizer.device = \"nvme\"", NULL);
    expect_error("{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"cpu\"}}}",
                 SHS_UNSUPPORTED, "offload_param = cpu without offload_optimizer", NULL);
    expect_error("{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 2, \"mics_shard_size\": 2}}",
                 SHS_UNSUPPORTED, "mics_shard_size = 2 needs stage 3", NULL);
    expect_error("{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"adam_w_mode\": false}}}",
                 SHS_UNSUPPORTED, "optimizer.params.adam_w_mode = false", NULL);
    expect_error("{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"Lamb\"}}", SHS_UNSUPPORTED, "optimizer.type", NULL);
    expect_error("{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"WarmupLR\"}}", SHS_UNSUPPORTED,
                 "scheduler (type WarmupLR) has no params", "its engine fails without them");
    expect_error("{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 2, \"reduce_scatter\": false}}",
                 SHS_UNSUPPORTED, "zero_optimization.reduce_scatter = false", NULL);
    /* unknown keys inside sections DeepSpeed reads as strict models (the top level: test_ds_config_keys) */
    expect_error("{\"train_batch_size\": 4, \"zero_optimization\": {\"stgae\": 3}}", SHS_UNSUPPORTED,
                 "unknown key zero_optimization.stgae: DeepSpeed refuses it too", NULL);
    /* wrong types, "auto", duplicates, malformed JSON */
    expect_error("{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": \"3\"}}", SHS_PARSE,
                 "zero_optimization.stage = \"3\": want an integer", NULL);
    expect_error("{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": \"auto\"}}", SHS_PARSE,
                 "zero_optimization.stage = \"auto\"", "Hugging Face");
    expect_error("{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 5}}", SHS_PARSE,
                 "zero_optimization.stage = 5", NULL);
    expect_error("{\"train_batch_size\": 4, \"train_batch_size\": 8}", SHS_PARSE, "duplicate", NULL);
    expect_error("{\"train_batch_size\": 4,", SHS_PARSE, "malformed JSON", NULL);
    expect_error("{\"train_batch_size\": 4, \"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}",
                 SHS_INVALID_ARG, "both true", NULL);
}

/* fp16 onto DeepSpeed's loss scaler (precision_config.py defaults:
 * initial_scale_power 16, loss_scale_window 1000, hysteresis 2,
 * consecutive_hysteresis false, min_loss_scale 1), a static scale for
 * loss_scale > 0, and the command line's scaler options winning. */
static void test_fp16_loss_scaler(void **state) {
    (void)state;
    shs_train_config_t c = defaults4();
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    assert_int_equal(load_apply("{\"train_batch_size\": 4, \"fp16\": {\"enabled\": true}}", NULL, &c, src), SHS_OK);
    const shs_loss_scaler_config_t *sc = &c.strategy.scaler;
    assert_int_equal(sc->kind, SHS_SCALER_DEEPSPEED);
    assert_true(sc->init_scale == 65536.0f && sc->min_scale == 1.0f);
    assert_int_equal(sc->growth_interval, 1000);
    assert_int_equal(sc->hysteresis, 2);
    assert_int_equal(sc->consecutive_hysteresis, 0);
    assert_int_equal(src[SHS_DS_HYSTERESIS], SHS_DS_FROM_DS_DEFAULT);
    assert_int_equal(src[SHS_DS_MIN_LOSS_SCALE], SHS_DS_FROM_DS_DEFAULT);
    /* static */
    c = defaults4();
    assert_int_equal(load_apply("{\"train_batch_size\": 4, \"fp16\": {\"enabled\": true, \"loss_scale\": 128, "
                                "\"hysteresis\": 4}}", NULL, &c, src), SHS_OK);
    assert_int_equal(sc->kind, SHS_SCALER_STATIC);
    assert_true(sc->init_scale == 128.0f);
    assert_int_equal(src[SHS_DS_LOSS_SCALER], SHS_DS_FROM_CONFIG);
    char buf[8192];
    shs_ds_config_describe(&ds, &c, src, "", buf, sizeof buf);
    assert_non_null(strstr(buf, "loss scaler static (config): initial scale 128 (config)\n"));
    assert_non_null(strstr(buf, "note: fp16.hysteresis: no effect beside the static fp16.loss_scale 128"));
    /* the command line wins: --hysteresis 5 --loss-scaler torch */
    c = defaults4();
    c.strategy.scaler.hysteresis = 5;
    int given[SHS_DS_NUM_SETTINGS] = {0};
    given[SHS_DS_HYSTERESIS] = 1;
    assert_int_equal(load_apply("{\"train_batch_size\": 4, \"fp16\": {\"enabled\": true, \"hysteresis\": 3}}",
                                given, &c, src), SHS_OK);
    assert_int_equal(sc->hysteresis, 5);
    assert_int_equal(src[SHS_DS_HYSTERESIS], SHS_DS_FROM_COMMAND_LINE);
    c = defaults4();
    memset(given, 0, sizeof given);
    given[SHS_DS_LOSS_SCALER] = 1;
    assert_int_equal(load_apply("{\"train_batch_size\": 4, \"fp16\": {\"enabled\": true}}", given, &c, src), SHS_OK);
    assert_int_equal(sc->kind, SHS_SCALER_TORCH);
}


/* Stage-dependent keys follow the effective strategy: a stage-3 file run
 * as zero1 keeps none of its stage3_* settings (DeepSpeed reads them at
 * stage 3 only) and offloads the optimizer alone; MiCS applies only under
 * hybrid sharding and must divide the world; a config offload under ddp is
 * refused naming the key and the override. */
static void test_stage_override(void **state) {
    (void)state;
    const char *z3 = "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, "
                     "\"stage3_param_persistence_threshold\": 100000, \"offload_optimizer\": {\"device\": \"cpu\"}, "
                     "\"offload_param\": {\"device\": \"cpu\"}}}";
    shs_train_config_t c = defaults4(), dflt = defaults4();
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    int given[SHS_DS_NUM_SETTINGS] = {0};
    given[SHS_DS_STAGE] = 1;
    c.strategy.kind = SHS_ZERO1;
    assert_int_equal(load_apply(z3, given, &c, src), SHS_OK);
    assert_int_equal(c.replicate_below, dflt.replicate_below);
    assert_int_equal(c.strategy.backward_prefetch, dflt.strategy.backward_prefetch);
    assert_int_equal(src[SHS_DS_REPLICATE_BELOW], SHS_DS_FROM_SHARDSIM);
    assert_int_equal(c.strategy.offload, SHS_OFFLOAD_OPTIMIZER);
    char buf[8192];
    shs_ds_config_describe(&ds, &c, src, "", buf, sizeof buf);
    assert_null(strstr(buf, "replicate units below"));
    assert_non_null(strstr(buf, "note: stage3_* keys: no effect, they apply to stage 3 and the strategy is zero1 "
                                "(command line)"));
    assert_non_null(strstr(buf, "note: zero_optimization.offload_param: no effect, zero1 (command line)"));
    /* the same file as zero3 keeps them */
    c = defaults4();
    c.strategy.kind = SHS_ZERO3;
    assert_int_equal(load_apply(z3, given, &c, src), SHS_OK);
    assert_int_equal(c.replicate_below, 100000);
    assert_int_equal(c.strategy.offload, SHS_OFFLOAD_PARAMS);
    /* ddp over a config offload */
    c = defaults4();
    c.strategy.kind = SHS_DDP;
    assert_int_equal(load_apply(z3, given, &c, src), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "zero_optimization.offload_optimizer = cpu needs a ZeRO stage"));
    assert_non_null(strstr(shs_last_error(), "--strategy"));
    /* MiCS: no effect under zero3 from the command line; a group not dividing the world names the key */
    const char *mics = "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"mics_shard_size\": 2}}";
    c = defaults4();
    c.strategy.kind = SHS_ZERO3;
    assert_int_equal(load_apply(mics, given, &c, src), SHS_OK);
    assert_int_equal(c.strategy.kind, SHS_ZERO3);
    assert_int_equal(src[SHS_DS_SHARD_GROUP], SHS_DS_FROM_SHARDSIM);
    shs_ds_config_describe(&ds, &c, src, "", buf, sizeof buf);
    assert_non_null(strstr(buf, "note: zero_optimization.mics_shard_size 2: no effect, the strategy is zero3"));
    c = defaults4();
    assert_int_equal(load_apply("{\"train_batch_size\": 12, \"zero_optimization\": {\"stage\": 3, "
                                "\"mics_shard_size\": 3}}", NULL, &c, src), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "zero_optimization.mics_shard_size 3 must divide the world 4"));
    assert_null(strstr(shs_last_error(), "--shard-group-size"));
}

/* The param dtype: the command line over the fp16 section (whose scaler
 * keys then say they have no effect), and DeepSpeed's fp32 without one. */
static void test_dtype_precedence(void **state) {
    (void)state;
    shs_train_config_t c = defaults4();
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    c.strategy.param_dtype = SHS_BF16; /* e.g. compare's own default */
    assert_int_equal(load_apply("{\"train_batch_size\": 4}", NULL, &c, src), SHS_OK);
    assert_int_equal(c.strategy.param_dtype, SHS_F32);
    assert_int_equal(src[SHS_DS_DTYPE], SHS_DS_FROM_DS_DEFAULT);
    int given[SHS_DS_NUM_SETTINGS] = {0};
    given[SHS_DS_DTYPE] = 1;
    c = defaults4();
    c.strategy.param_dtype = SHS_BF16;
    assert_int_equal(load_apply("{\"train_batch_size\": 4, \"fp16\": {\"enabled\": true, \"min_loss_scale\": 0.5}}",
                                given, &c, src), SHS_OK);
    assert_int_equal(c.strategy.param_dtype, SHS_BF16);
    assert_int_equal(src[SHS_DS_MIN_LOSS_SCALE], SHS_DS_FROM_SHARDSIM);
    char buf[8192];
    shs_ds_config_describe(&ds, &c, src, "", buf, sizeof buf);
    assert_non_null(strstr(buf, "note: fp16 loss-scaling keys: no effect, the param dtype is bf16 (command line)"));
    /* fp16 off: its other keys are named as without effect */
    c = defaults4();
    assert_int_equal(load_apply("{\"train_batch_size\": 4, \"fp16\": {\"enabled\": false, \"min_loss_scale\": 0.5}}",
                                NULL, &c, src), SHS_OK);
    shs_ds_config_describe(&ds, &c, src, "", buf, sizeof buf);
    assert_non_null(strstr(buf, "note: fp16.min_loss_scale: no effect, fp16.enabled is false"));
}

/* transformers' zero3 example config (every "auto" it uses), resolved as
 * HfTrainerDeepSpeedConfig does with TrainingArguments' defaults and the
 * hidden size 64: persistence 10 x 64 = 640, prefetch 0.9 x 64^2 = 3686,
 * reduce bucket 64^2 = 4096. */
static void test_hf_auto(void **state) {
    (void)state;
    const char *json =
        "{\"fp16\": {\"enabled\": \"auto\", \"loss_scale\": 0, \"loss_scale_window\": 1000, \"initial_scale_power\": 16,"
        "  \"hysteresis\": 2, \"min_loss_scale\": 1}, \"bf16\": {\"enabled\": \"auto\"},"
        " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\", \"betas\": \"auto\", \"eps\": \"auto\","
        "  \"weight_decay\": \"auto\"}},"
        " \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true},"
        "  \"offload_param\": {\"device\": \"cpu\", \"pin_memory\": true}, \"overlap_comm\": true,"
        "  \"contiguous_gradients\": true, \"sub_group_size\": 1e9, \"reduce_bucket_size\": \"auto\","
        "  \"stage3_prefetch_bucket_size\": \"auto\", \"stage3_param_persistence_threshold\": \"auto\","
        "  \"stage3_max_live_parameters\": 1e9, \"stage3_max_reuse_distance\": 1e9,"
        "  \"stage3_gather_16bit_weights_on_model_save\": true},"
        " \"gradient_accumulation_steps\": \"auto\", \"gradient_clipping\": \"auto\", \"steps_per_print\": 2000,"
        " \"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": \"auto\", \"wall_clock_breakdown\": false}";
    shs_train_config_t c = defaults4();
    c.micro_batch = 3; /* as if --micro-batch 3 */
    c.model.channels = 64; /* the hidden size apply is given (describe reads it from the model) */
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    int given[SHS_DS_NUM_SETTINGS] = {0};
    given[SHS_DS_MICRO_BATCH] = 1;
    assert_int_equal(shs_ds_config_load(write_cfg("hf.json", json), &ds), SHS_OK);
    assert_int_equal(shs_ds_config_apply(&ds, given, 64, &c, src), SHS_OK);
    assert_int_equal(c.micro_batch, 3);
    assert_int_equal(c.grad_accum, 1);
    assert_true(c.strategy.clip_norm == 1.0f);
    assert_true(c.strategy.optim.lr == 5e-5f && c.strategy.optim.beta1 == 0.9f && c.strategy.optim.beta2 == 0.999f);
    assert_true(c.strategy.optim.eps == 1e-8f && c.strategy.optim.weight_decay == 0.0f);
    assert_int_equal(c.strategy.param_dtype, SHS_F32);
    assert_int_equal(c.replicate_below, 640);
    assert_int_equal(c.strategy.backward_prefetch, SHS_PREFETCH_PRE);
    assert_int_equal(src[SHS_DS_LR], SHS_DS_FROM_AUTO);
    assert_int_equal(src[SHS_DS_DTYPE], SHS_DS_FROM_AUTO);
    assert_int_equal(src[SHS_DS_REPLICATE_BELOW], SHS_DS_FROM_AUTO);
    char buf[8192];
    shs_ds_config_describe(&ds, &c, src, "", buf, sizeof buf);
    assert_non_null(strstr(buf, "auto (HF Trainer rule): train_batch_size = 12 (micro-batch x accumulation x world)"));
    assert_non_null(strstr(buf, "auto (HF Trainer rule): train_micro_batch_size_per_gpu = 3 (command line)"));
    assert_non_null(strstr(buf, "auto (HF Trainer rule): optimizer.params.lr = 5e-05 (auto)"));
    assert_non_null(strstr(buf, "auto (HF Trainer rule): zero_optimization.reduce_bucket_size = 4096"));
    assert_non_null(strstr(buf, "auto (HF Trainer rule): zero_optimization.stage3_prefetch_bucket_size = 3686"));
    assert_non_null(strstr(buf, "auto (HF Trainer rule): zero_optimization.stage3_param_persistence_threshold = 640"));
    assert_non_null(strstr(buf, "auto (HF Trainer rule): fp16.enabled = false"));
    /* --param-dtype f16 turns fp16 "auto" on, with the file's scaler */
    c = defaults4();
    c.strategy.param_dtype = SHS_F16;
    given[SHS_DS_DTYPE] = 1;
    assert_int_equal(shs_ds_config_apply(&ds, given, 64, &c, src), SHS_OK);
    assert_int_equal(c.strategy.scaler.kind, SHS_SCALER_DEEPSPEED);
    assert_int_equal(src[SHS_DS_INIT_SCALE], SHS_DS_FROM_CONFIG);
    /* a model without a hidden size: refused naming the keys */
    c = defaults4();
    assert_int_equal(shs_ds_config_apply(&ds, NULL, 0, &c, src), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "zero_optimization.reduce_bucket_size, "
                                             "zero_optimization.stage3_prefetch_bucket_size, "
                                             "zero_optimization.stage3_param_persistence_threshold = \"auto\""));
}

/* Every refused key of a file in one error, with the fixes named. */
static void test_all_refused_named(void **state) {
    (void)state;
    shs_status_t st = shs_ds_config_load(
        write_cfg("many.json", "{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupLR\"}, \"fp16\": "
                               "{\"enabled\": true, \"fp16_master_weights_and_grads\": true, "
                               "\"consistent_hysteresis\": true}, \"zero_optimization\": {\"stgae\": 3}}"),
        &ds);
    assert_int_equal(st, SHS_UNSUPPORTED);
    const char *e = shs_last_error();
    assert_non_null(strstr(e, "many.json: 4 keys refused"));
    assert_non_null(strstr(e, "scheduler (type WarmupLR)"));
    assert_non_null(strstr(e, "fp16.fp16_master_weights_and_grads = true"));
    assert_non_null(strstr(e, "fp16.consistent_hysteresis"));
    assert_non_null(strstr(e, "zero_optimization.stgae"));
    /* alone, each says its fix (DeepSpeed's key is consecutive_hysteresis) */
    st = shs_ds_config_load(write_cfg("one.json", "{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, "
                                                  "\"consistent_hysteresis\": true}}"), &ds);
    assert_int_equal(st, SHS_UNSUPPORTED);
    assert_non_null(strstr(shs_last_error(), "fix: fp16.consecutive_hysteresis is DeepSpeed's key"));
    st = shs_ds_config_load(write_cfg("one.json", "{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, "
                                                  "\"fp16_master_weights_and_grads\": true}}"), &ds);
    assert_non_null(strstr(shs_last_error(), "fix: set it false or remove it"));
}
#else

static void test_without_jansson(void **state) {
    (void)state;
    assert_int_equal(shs_ds_config_load(write_cfg("ds.json", "{}"), &ds), SHS_UNSUPPORTED);
    assert_non_null(strstr(shs_last_error(), "jansson"));
}

#endif

#ifdef SHS_HAVE_JANSSON
/* DeepSpeed's ZeRO granularity keys (runtime/zero/config.py: integers >= 0;
 * stage_1_and_2.py: allgather_bucket_size a multiple of 2) into
 * shs_zero_knobs_t, and their refusals naming the key. */
static void test_zero_granularity_keys(void **state) {
    (void)state;
    shs_train_config_t c = defaults4();
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    assert_int_equal(load_apply("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, "
                                "\"reduce_bucket_size\": 1234, \"allgather_bucket_size\": 1000, "
                                "\"contiguous_gradients\": false, \"overlap_comm\": true}}", NULL, &c, src), SHS_OK);
    assert_int_equal(c.strategy.kind, SHS_ZERO2);
    assert_int_equal(c.strategy.zero.reduce_bucket, 1234);
    assert_int_equal(c.strategy.zero.allgather_bucket, 1000);
    assert_int_equal(c.strategy.zero.contiguous_gradients, 0);
    assert_int_equal(c.strategy.zero.overlap_comm, 1);
    assert_int_equal(c.strategy.zero.prefetch_bucket + c.strategy.zero.max_live + c.strategy.zero.max_reuse, 0);
    assert_int_equal(src[SHS_DS_ZERO_KNOBS], SHS_DS_FROM_CONFIG);
    c = defaults4();
    assert_int_equal(load_apply("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, "
                                "\"stage3_max_live_parameters\": 0, \"max_reuse_distance\": 5, "
                                "\"reduce_bucket_size\": \"auto\", \"stage3_prefetch_bucket_size\": \"auto\"}}",
                                NULL, &c, src), SHS_OK);
    long h = c.model.channels;
    assert_int_equal(c.strategy.zero.max_live, 1); /* 0: nothing may be prefetched */
    assert_int_equal(c.strategy.zero.max_reuse, 5);
    assert_int_equal(c.strategy.zero.overlap_comm, 1);
    assert_int_equal(c.strategy.zero.reduce_bucket, (size_t)(h * h));                /* the HF Trainer's hidden^2 */
    assert_int_equal(c.strategy.zero.prefetch_bucket, (size_t)(0.9 * (double)h * h)); /* 0.9 hidden^2 */
    /* stage 0 takes none of them */
    c = defaults4();
    assert_int_equal(load_apply("{\"train_batch_size\": 8, \"zero_optimization\": {\"reduce_bucket_size\": 10}}",
                                NULL, &c, src), SHS_OK);
    assert_int_equal(c.strategy.zero.reduce_bucket, 0);
    expect_error("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"reduce_bucket_size\": -1}}",
                 SHS_PARSE, "zero_optimization.reduce_bucket_size", "an integer in [0,");
    expect_error("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"allgather_bucket_size\": 0.5}}",
                 SHS_PARSE, "zero_optimization.allgather_bucket_size", "an integer");
    expect_error("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 1, \"allgather_bucket_size\": 7}}",
                 SHS_INVALID_ARG, "zero_optimization.allgather_bucket_size = 7", "multiple of its nccl_start_alignment_factor 2");
    expect_error("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"stage3_max_live_parameters\": -5}}",
                 SHS_PARSE, "zero_optimization.stage3_max_live_parameters", "an integer in [0,");
    expect_error("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"max_reuse_distance\": 1, "
                 "\"stage3_max_reuse_distance\": 2}}", SHS_PARSE, "the reuse distance is given twice", NULL);
    expect_error("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"overlap_comm\": 1}}",
                 SHS_PARSE, "zero_optimization.overlap_comm", NULL);
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
#ifdef SHS_HAVE_JANSSON
        cmocka_unit_test(test_zero_granularity_keys),
        cmocka_unit_test(test_every_key_mapped),
        cmocka_unit_test(test_deepspeed_defaults),
        cmocka_unit_test(test_batch_rule),
        cmocka_unit_test(test_command_line_precedence),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_stage_override),
        cmocka_unit_test(test_dtype_precedence),
        cmocka_unit_test(test_hf_auto),
        cmocka_unit_test(test_all_refused_named),
        cmocka_unit_test(test_fp16_loss_scaler),
#else
        cmocka_unit_test(test_without_jansson),
#endif
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
