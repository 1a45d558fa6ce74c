/* test_features_precision.c - replicated (unsharded) small units, shard
 * alignment, mixed precision and fp16 dynamic loss scaling, each proven
 * bit-identical to DDP under the same settings; plus independent checks
 * that mixed precision is applied, that an fp16 overflow skips the step on
 * every rank whatever the world size, and the scale's growth; DeepSpeed's
 * loss scaler (hysteresis, scale window, floor) and a static scale, their
 * scale sequences worked by hand from DeepSpeed's rule. */
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

/* --param-dtype / --reduce-dtype / --grad-accum-dtype: f32 master weights,
 * compute on rounded parameters, gradients stored in the param dtype or an
 * f32 accumulation buffer, reduction in the reduce dtype: every stage equals
 * DDP. */
static void test_mixed_precision_matches_ddp(void **state) {
    static const shs_dtype_t combos[][3] = {
        {SHS_BF16, SHS_BF16, SHS_DTYPE_DEFAULT}, {SHS_BF16, SHS_F32, SHS_DTYPE_DEFAULT},
        {SHS_F16, SHS_F16, SHS_DTYPE_DEFAULT},   {SHS_F32, SHS_BF16, SHS_DTYPE_DEFAULT},
        {SHS_BF16, SHS_BF16, SHS_F32},           {SHS_F16, SHS_F32, SHS_F32}};
    for (int c = 0; c < 6; c++)
        for (int w = 0; w < NWORLDS; w++) {
            if (c > 0 && test_worlds[w] != 3 && test_worlds[w] != 8 && !full_sweep()) continue;
            shs_train_config_t cfg = small_config(test_worlds[w]);
            cfg.strategy.param_dtype = combos[c][0];
            cfg.strategy.reduce_dtype = combos[c][1];
            cfg.strategy.grad_accum_dtype = combos[c][2];
            cfg.strategy.scaler.init_scale = 1024.0f;
            cfg.strategy.clip_norm = c == 2 || c == 4 ? 0.05f : 0; /* clipping on f32 copies, after unscaling */
            cfg.grad_accum = 2;
            check_stages_match_ddp(cfg, 2);
        }
}

/* Elements of the flat buffers each rank's shards are cut from, and the
 * shard elements, summed over units (shard.h), for `n` ranks. */
static void shard_sums(const shs_layout_t *lo, int n, size_t *full, size_t *shard) {
    *full = *shard = 0;
    for (int u = 0; u < lo->num_units; u++) {
        *full += shs_padded_numel(lo->units[u].numel, n, 1);
        *shard += shs_shard_size(lo->units[u].numel, n, 1);
    }
}

/* Gradients are stored in the gradient dtype: with bf16 parameters ZeRO-1
 * keeps 2 bytes per element of the full gradient, ZeRO-2/3 2 bytes per shard
 * element, and ZeRO-3 a bf16 shard beside its f32 master (the ZeRO paper's
 * 2 + 2 + 12 bytes); --grad-accum-dtype f32 keeps 4. Measured on the CPU
 * threads after a step (persistent buffers: their peak is their size). */
static void test_grad_dtype_memory(void **state) {
    const int N = 3;
    static const struct { shs_strategy_kind_t kind; shs_dtype_t accum; size_t grads_full, grads_shard, params_full,
                          params_shard; } cases[] = {
        /* bytes per element of the full flat buffer / of this rank's shard */
        {SHS_ZERO1, SHS_DTYPE_DEFAULT, 2, 0, 2, 4},
        {SHS_ZERO1, SHS_F32, 4, 0, 2, 4},
        {SHS_ZERO2, SHS_DTYPE_DEFAULT, 0, 2, 2, 4},
        {SHS_ZERO3, SHS_DTYPE_DEFAULT, 0, 2, 0, 4 + 2},
        {SHS_ZERO3, SHS_F32, 0, 4, 0, 4 + 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        shs_train_config_t cfg = small_config(N);
        cfg.strategy.kind = cases[c].kind;
        cfg.strategy.param_dtype = SHS_BF16;
        cfg.strategy.grad_accum_dtype = cases[c].accum;
        shs_trainer_t *t;
        assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
        float loss;
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        size_t full, shard;
        shard_sums(shs_trainer_layout(t), N, &full, &shard);
        shs_mem_stats_t m;
        shs_trainer_mem_stats(t, 0, &m);
        assert_int_equal(m.peak[SHS_MEM_GRADS], cases[c].grads_full * full + cases[c].grads_shard * shard);
        assert_int_equal(m.peak[SHS_MEM_PARAMS], cases[c].params_full * full + cases[c].params_shard * shard);
        shs_trainer_destroy(t);
    }
}

/* The f32 accumulation buffer changes the arithmetic (acc + (f32)(bf16)g
 * instead of (bf16)(acc + g) over micro-batches), and only with more than
 * one micro-batch: with one, both store the same rounded gradient. */
static void test_grad_accum_dtype_is_applied(void **state) {
    for (int accum = 1; accum <= 2; accum++) {
        shs_train_config_t cfg = small_config(2);
        cfg.strategy.kind = SHS_ZERO2;
        cfg.strategy.param_dtype = SHS_BF16;
        cfg.grad_accum = accum;
        run_record_t lp, f32;
        record_run(&cfg, &test_corpus, 2, &lp);
        cfg.strategy.grad_accum_dtype = SHS_F32;
        record_run(&cfg, &test_corpus, 2, &f32);
        int same = memcmp(lp.snap[1], f32.snap[1], lp.len * sizeof(float)) == 0;
        assert_int_equal(same, accum == 1);
        free_record(&lp);
        free_record(&f32);
    }
    /* a gradient dtype that is neither f32 nor the param dtype is refused */
    shs_train_config_t cfg = small_config(2);
    cfg.strategy.param_dtype = SHS_BF16;
    cfg.strategy.grad_accum_dtype = SHS_F16;
    shs_trainer_t *t = NULL;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "gradient accumulation dtype must be f32 or the param dtype bf16"));
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

/* DeepSpeed's DynamicLossScaler, as documented in
 * deepspeed/runtime/fp16/loss_scaler.py (update_scale), worked by hand for
 * hysteresis 2, scale_window 3, init 1024: an overflow with the counter at
 * 2 only lowers the counter; with it at 1 the scale halves (the counter
 * stays 1); the scale doubles when (iter - last_overflow_iter - 1) is a
 * positive multiple of 3, and then (without consecutive_hysteresis) the
 * counter refills to 2. With consecutive_hysteresis every good step refills
 * it, so an overflow, a good step, an overflow never halves.
 *
 *  iter              0    1    2    3    4    5    6    7    8    9   10   11   12   13   14   15   16   17   18   19
 *  overflow          -    X    -    X    -    -    -    -    X    -    -    -    -    -    -    -    X    X    X    -
 *  stable interval   0    .    0    .    0    1    2    3    .    0    1    2    3    4    5    6    .    .    .    0
 *  scale after    1024 1024 1024  512  512  512  512 1024 1024 1024 1024 1024 2048 2048 2048 4096 4096 2048 1024 1024
 *  counter after     2    1    1    1    1    1    1    2    1    1    1    1    2    2    2    2    1    1    1    1
 *  consecutive:
 *  scale after    1024 1024 1024 1024 1024 1024 1024 2048 2048 2048 2048 2048 4096 4096 4096 8192 8192 4096 2048 2048
 *  counter after     2    1    2    1    2    2    2    2    1    2    2    2    2    2    2    2    1    1    1    2
 */
#define DS_STEPS 20
static const int ds_overflow[DS_STEPS] = {0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0};
static const float ds_scale[2][DS_STEPS] = {
    {1024, 1024, 1024, 512, 512, 512, 512, 1024, 1024, 1024, 1024, 1024, 2048, 2048, 2048, 4096, 4096, 2048, 1024, 1024},
    {1024, 1024, 1024, 1024, 1024, 1024, 1024, 2048, 2048, 2048, 2048, 2048, 4096, 4096, 4096, 8192, 8192, 4096, 2048,
     2048}};
static const int ds_counter[2][DS_STEPS] = {
    {2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1},
    {2, 1, 2, 1, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2}};

static void test_deepspeed_scaler_sequence(void **state) {
    for (int consec = 0; consec < 2; consec++)
        for (int k = SHS_DDP; k <= SHS_ZERO3; k += 2) { /* DDP, ZeRO-2 */
            shs_train_config_t cfg = small_config(3);
            cfg.strategy.kind = (shs_strategy_kind_t)k;
            cfg.strategy.param_dtype = SHS_F16;
            cfg.strategy.scaler = (shs_loss_scaler_config_t){.kind = SHS_SCALER_DEEPSPEED, .init_scale = 1024.0f,
                                                             .growth_interval = 3, .hysteresis = 2,
                                                             .consecutive_hysteresis = consec, .min_scale = 1.0f};
            shs_trainer_t *t;
            assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
            long skipped = 0;
            for (int i = 0; i < DS_STEPS; i++) {
                if (ds_overflow[i]) assert_int_equal(shs_trainer_run(t, plant_job, t), SHS_OK);
                float loss;
                assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
                skipped += ds_overflow[i];
                for (int r = 0; r < 3; r++) {
                    shs_strategy_t *s = shs_trainer_strategy(t, r);
                    shs_loss_scale_state_t ls = shs_strategy_loss_scale(s);
                    if (shs_strategy_step_skipped(s) != ds_overflow[i] || ls.scale != ds_scale[consec][i] ||
                        ls.hysteresis != ds_counter[consec][i] || ls.iter != i + 1 || ls.skipped_steps != skipped)
                        fail_msg("consecutive %d stage %d iter %d rank %d: skipped %d scale %g counter %d iter %ld; "
                                 "want %d %g %d %d", consec, k, i, r, shs_strategy_step_skipped(s), (double)ls.scale,
                                 ls.hysteresis, ls.iter, ds_overflow[i], (double)ds_scale[consec][i],
                                 ds_counter[consec][i], i + 1);
                }
            }
            assert_int_equal(shs_trainer_loss_scale(t).last_overflow_iter, 18);
            shs_trainer_destroy(t);
        }
}

/* DeepSpeed's floor: with hysteresis 1 and min_loss_scale 768 an overflow
 * at 1024 gives max(512, 768) = 768; the next overflow finds the scale at
 * its minimum, where DeepSpeed raises ("Current loss scale already at
 * minimum"): the step fails on every rank, naming the rank and step. */
static void test_deepspeed_scaler_floor_and_stop(void **state) {
    shs_train_config_t cfg = small_config(2);
    cfg.strategy.kind = SHS_ZERO3;
    cfg.strategy.param_dtype = SHS_F16;
    cfg.strategy.scaler = (shs_loss_scaler_config_t){.kind = SHS_SCALER_DEEPSPEED, .init_scale = 1024.0f,
                                                     .growth_interval = 100, .hysteresis = 1, .min_scale = 768.0f};
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
    float loss;
    assert_int_equal(shs_trainer_run(t, plant_job, t), SHS_OK);
    assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
    assert_true(shs_trainer_loss_scale(t).scale == 768.0f);
    assert_int_equal(shs_trainer_run(t, plant_job, t), SHS_OK);
    assert_int_equal(shs_trainer_step(t, &loss), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "already at its minimum 768"));
    assert_non_null(strstr(shs_last_error(), "step 2"));
    shs_trainer_destroy(t);
}

/* A static scale (DeepSpeed's fp16.loss_scale > 0): an overflow skips the
 * step and leaves the scale; good steps never grow it. */
static void test_static_scale(void **state) {
    shs_train_config_t cfg = small_config(2);
    cfg.strategy.kind = SHS_ZERO1;
    cfg.strategy.param_dtype = SHS_F16;
    cfg.strategy.scaler = (shs_loss_scaler_config_t){.kind = SHS_SCALER_STATIC, .init_scale = 1024.0f,
                                                     .growth_interval = 1};
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
    float loss;
    for (int i = 0; i < 4; i++) {
        if (i == 1) assert_int_equal(shs_trainer_run(t, plant_job, t), SHS_OK);
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        assert_int_equal(shs_strategy_step_skipped(shs_trainer_strategy(t, 1)), i == 1);
        assert_true(shs_trainer_loss_scale(t).scale == 1024.0f);
    }
    assert_int_equal(shs_trainer_loss_scale(t).skipped_steps, 1);
    shs_trainer_destroy(t);
}

/* DeepSpeed's scaler from a scale high enough that the data overflows by
 * itself (so the counter, the halvings and the growth all happen): every
 * ZeRO stage equals DDP bit for bit, skipped steps included. */
static void test_deepspeed_scaler_matches_ddp(void **state) {
    shs_train_config_t cfg = small_config(3);
    cfg.strategy.param_dtype = SHS_F16;
    cfg.strategy.scaler = (shs_loss_scaler_config_t){.kind = SHS_SCALER_DEEPSPEED, .init_scale = 1048576.0f,
                                                     .growth_interval = 2, .hysteresis = 2, .min_scale = 1.0f};
    enum { STEPS = 8 }; /* REC_MAX_STEPS */
    cfg.strategy.kind = SHS_DDP;
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
    float loss;
    for (int i = 0; i < STEPS; i++) assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
    shs_loss_scale_state_t ls = shs_trainer_loss_scale(t);
    /* the first two overflows cost the counter then one halving, at least */
    if (ls.skipped_steps < 3 || ls.skipped_steps > STEPS - 3)
        fail_msg("%ld of %d steps skipped: the data does not exercise the scaler", ls.skipped_steps, STEPS);
    shs_trainer_destroy(t);
    check_stages_match_ddp(cfg, STEPS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replicated_units_match_ddp),
        cmocka_unit_test(test_shard_align_matches_ddp),
        cmocka_unit_test(test_mixed_precision_matches_ddp),
        cmocka_unit_test(test_mixed_precision_is_applied),
        cmocka_unit_test(test_grad_dtype_memory),
        cmocka_unit_test(test_grad_accum_dtype_is_applied),
        cmocka_unit_test(test_fp16_overflow_skips_everywhere),
        cmocka_unit_test(test_fp16_scale_growth),
        cmocka_unit_test(test_fp16_avg_overflow_independent_of_world),
        cmocka_unit_test(test_deepspeed_scaler_sequence),
        cmocka_unit_test(test_deepspeed_scaler_floor_and_stop),
        cmocka_unit_test(test_static_scale),
        cmocka_unit_test(test_deepspeed_scaler_matches_ddp),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
