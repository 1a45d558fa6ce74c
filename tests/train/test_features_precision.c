/* test_features_precision.c - replicated (unsharded) small units, shard
 * alignment, mixed precision and fp16 dynamic loss scaling, each proven
 * bit-identical to DDP under the same settings; plus independent checks
 * that mixed precision is applied, that an fp16 overflow skips the step on
 * every rank whatever the world size, and the scale's growth. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/shard.h"
#include "strategy/strategy_testing.h" /* shs_strategy_plant_grad_inf */
#include "shardsim/train.h"
#include "harness.h"
#include "run_record.h"

#include "features_run.h"

/* Small units (the blocks, 1089 elements, and the final
 * LayerNorm, 18) kept unsharded on every rank while the embedding (2376) is
 * sharded; the clip norm counts each replicated element once. */
static void test_replicated_units_match_ddp(void **state) {
    for (int w = 0; w < NWORLDS; w++) {
        shs_train_config_t c = small_config(test_worlds[w]);
        c.replicate_below = 1100;
        c.strategy.clip_norm = 0.05f;
        check_stages_match_ddp(c, 2);
    }
}

/* --shard-align: shards start on multiples of E; padding can cover whole
 * trailing ranks (lnf: 18 elements, N = 5, E = 8: S = 8, ranks 3 and 4 own
 * only padding). */
static void test_shard_align_matches_ddp(void **state) {
    shs_shard_t s3 = shs_shard_of(18, 5, 3, 8), s2 = shs_shard_of(18, 5, 2, 8);
    assert_int_equal(s3.size, 8);
    assert_int_equal(s3.offset, 24);
    assert_int_equal(s3.valid, 0);
    assert_int_equal(s2.valid, 2);
    static const size_t aligns[] = {4, 8, 64};
    for (int w = 1; w < NWORLDS; w++)
        for (int a = 0; a < 3; a++) {
            shs_train_config_t c = small_config(test_worlds[w]);
            c.strategy.shard_align = aligns[a];
            c.strategy.clip_norm = 0.05f;
            check_stages_match_ddp(c, 2);
        }
}

/* --param-dtype / --reduce-dtype: f32 master weights, compute on rounded
 * parameters, reduction in the reduce dtype: every stage equals DDP. */
static void test_mixed_precision_matches_ddp(void **state) {
    static const shs_dtype_t combos[][2] = {
        {SHS_BF16, SHS_BF16}, {SHS_BF16, SHS_F32}, {SHS_F16, SHS_F16}, {SHS_F32, SHS_BF16}};
    for (int c = 0; c < 4; c++)
        for (int w = 0; w < NWORLDS; w++) {
            if (c > 0 && test_worlds[w] != 3 && test_worlds[w] != 8 && !full_sweep()) continue;
            shs_train_config_t cfg = small_config(test_worlds[w]);
            cfg.strategy.param_dtype = combos[c][0];
            cfg.strategy.reduce_dtype = combos[c][1];
            cfg.strategy.scaler.init_scale = 1024.0f;
            cfg.grad_accum = 2;
            check_stages_match_ddp(cfg, 2);
        }
}

/* The precision is really in effect: bf16 runs differ from f32, and the
 * ZeRO-3 all-gathers move half the bytes (2-byte elements). */
static void test_mixed_precision_is_applied(void **state) {
    shs_train_config_t cfg = small_config(2);
    cfg.strategy.kind = SHS_ZERO3;
    run_record_t f32, bf16;
    record_run(&cfg, &test_corpus, 1, &f32);
    cfg.strategy.param_dtype = SHS_BF16;
    record_run(&cfg, &test_corpus, 1, &bf16);
    assert_true(memcmp(&f32.loss[0], &bf16.loss[0], sizeof(float)) != 0);
    free_record(&f32);
    free_record(&bf16);
    uint64_t bytes[2];
    for (int k = 0; k < 2; k++) {
        cfg.strategy.param_dtype = k ? SHS_BF16 : SHS_F32;
        shs_trainer_t *t;
        assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
        float loss;
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        shs_comm_stats_t cs;
        shs_trainer_comm_stats(t, 0, &cs);
        bytes[k] = cs.bytes[SHS_OP_ALL_GATHER];
        shs_trainer_destroy(t);
    }
    assert_true(bytes[0] > 0 && bytes[1] * 2 == bytes[0]);
}

static shs_status_t plant_job(shs_rank_ctx_t *ctx, void *arg) {
    shs_trainer_t *t = arg;
    return shs_strategy_plant_grad_inf(shs_trainer_strategy(t, ctx->rank), 1, 5);
}

/* fp16 with dynamic loss scaling and an inf planted in one
 * element of one rank's reduced gradient shard: every rank skips the step,
 * the scale halves everywhere, parameters (and the next step) are as if the
 * step had not happened. */
static void test_fp16_overflow_skips_everywhere(void **state) {
    for (int k = SHS_DDP; k <= SHS_ZERO3; k++) {
        shs_train_config_t cfg = small_config(3);
        cfg.strategy.kind = (shs_strategy_kind_t)k;
        cfg.strategy.param_dtype = SHS_F16;
        cfg.strategy.scaler.init_scale = 1024.0f;
        shs_trainer_t *t;
        assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
        float loss;
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        for (int r = 0; r < 3; r++) assert_false(shs_strategy_step_skipped(shs_trainer_strategy(t, r)));
        size_t len = shs_trainer_snapshot_len(t);
        float *before = malloc(len * sizeof(float)), *after = malloc(len * sizeof(float));
        assert_int_equal(shs_trainer_snapshot(t, before), SHS_OK);
        assert_int_equal(shs_trainer_run(t, plant_job, t), SHS_OK);
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        assert_int_equal(shs_trainer_snapshot(t, after), SHS_OK);
        assert_memory_equal(before, after, len * sizeof(float));
        for (int r = 0; r < 3; r++) {
            shs_strategy_t *s = shs_trainer_strategy(t, r);
            assert_true(shs_strategy_step_skipped(s));
            shs_loss_scale_state_t ls = shs_strategy_loss_scale(s);
            assert_true(ls.scale == 512.0f);
            assert_int_equal(ls.skipped_steps, 1);
            assert_int_equal(ls.good_steps, 0);
        }
        /* and training goes on */
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        assert_int_equal(shs_trainer_snapshot(t, after), SHS_OK);
        assert_memory_not_equal(before, after, len * sizeof(float));
        free(before);
        free(after);
        shs_trainer_destroy(t);
    }
}

/* One fp16 DDP step of the global batch of 8 sequences over `world` ranks
 * (8/world each) at loss scale `scale`: 1 when it was skipped (overflow). */
static int fp16_step_skipped(int world, float scale) {
    shs_train_config_t cfg = small_config(world);
    cfg.strategy.kind = SHS_DDP;
    cfg.micro_batch = 8 / world;
    cfg.strategy.param_dtype = SHS_F16;
    cfg.strategy.scaler.init_scale = scale;
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
    float loss;
    assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
    int skipped = shs_strategy_step_skipped(shs_trainer_strategy(t, 0));
    shs_trainer_destroy(t);
    return skipped;
}

/* AVG is NCCL's pre-multiplied sum (comm.h), so the f16 gradient average
 * overflows only where the average does, not where the sum of the ranks'
 * gradients would: at a loss scale where each rank's scaled gradient fits
 * f16 but the sum over 4 or 8 ranks would not, no world size skips the step
 * (summing first, then dividing, skipped at world 4 and 8 only). The scale
 * is near the edge: at 4 times it world 1 overflows by itself. */
static void test_fp16_avg_overflow_independent_of_world(void **state) {
    const float scale = 60000.0f;
    for (int w = 1; w <= 8; w *= 2)
        if (fp16_step_skipped(w, scale)) fail_msg("world %d skipped the step at loss scale %g", w, scale);
    assert_true(fp16_step_skipped(1, 4 * scale)); /* the data is near the edge */
}

/* GradScaler growth: after growth_interval good steps the scale doubles. */
static void test_fp16_scale_growth(void **state) {
    shs_train_config_t cfg = small_config(2);
    cfg.strategy.kind = SHS_ZERO2;
    cfg.strategy.param_dtype = SHS_F16;
    cfg.strategy.scaler.init_scale = 256.0f;
    cfg.strategy.scaler.growth_interval = 2;
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
    float loss;
    for (int s = 0; s < 4; s++) assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
    assert_true(shs_trainer_loss_scale(t).scale == 1024.0f);
    shs_trainer_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replicated_units_match_ddp),
        cmocka_unit_test(test_shard_align_matches_ddp),
        cmocka_unit_test(test_mixed_precision_matches_ddp),
        cmocka_unit_test(test_mixed_precision_is_applied),
        cmocka_unit_test(test_fp16_overflow_skips_everywhere),
        cmocka_unit_test(test_fp16_scale_growth),
        cmocka_unit_test(test_fp16_avg_overflow_independent_of_world),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
