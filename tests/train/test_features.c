/* test_features.c - FSDP/ZeRO features that touch numbers, each proven
 * bit-identical to DDP under the same settings: gradient
 * accumulation (no_sync), clip_grad_norm_ with norm types 1/2/inf,
 * replicated (unsharded) small units, and shard alignment. Plus independent
 * checks that gradient accumulation averages every micro-batch (none
 * dropped, the first step weighted as the others) and that clipping is really active. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/shard.h"
#include "shardsim/trace.h"
#include "shardsim/trace_record.h"
#include "strategy/strategy_testing.h" /* shs_strategy_plant_grad_inf */
#include "shardsim/train.h"
#include "harness.h"
#include "run_record.h"


#define NWORLDS 5 /* test_worlds */

/* `make test-full` (SHS_TEST_FULL=1): every variant at every world size
 * (run_record.h); `make test` runs a representative part. */
static int full_sweep(void) { return test_full_sweep(); }

/* test_small_config with 2 blocks. */
static shs_train_config_t small_config(int world) { return test_small_config(world, 2); }

/* Every ZeRO stage against DDP with the same config. */
static void check_stages_match_ddp(shs_train_config_t cfg, int steps) {
    cfg.strategy.kind = SHS_DDP;
    run_record_t ddp;
    record_run(&cfg, &test_corpus, steps, &ddp);
    for (int k = SHS_ZERO1; k <= SHS_ZERO3; k++) {
        cfg.strategy.kind = (shs_strategy_kind_t)k;
        run_record_t z;
        record_run(&cfg, &test_corpus, steps, &z);
        assert_same_run(&ddp, &z);
        free_record(&z);
    }
    assert_true(memcmp(ddp.snap[0], ddp.snap[steps - 1], ddp.len * sizeof(float)) != 0);
    free_record(&ddp);
}

static void test_grad_accum_matches_ddp(void **state) {
    for (int w = 0; w < NWORLDS; w++) {
        shs_train_config_t c = small_config(test_worlds[w]);
        c.grad_accum = 3;
        check_stages_match_ddp(c, 2);
    }
}

/* Independent oracle: K micro-batches of B at world 1 see the same
 * sequences as K ranks with one micro-batch each (data.h: micro-batch k of
 * step s is data step s*K + k; rank r of step s reads sequence s*N + r), so
 * the mean gradient, and hence the SGD update, agrees to rounding. A run that
 * dropped micro-batches or weighted the first step
 * differently would be off by O(1) of the update. */
static void check_accum_means_all(shs_strategy_kind_t kind, int K, shs_offload_t offload) {
    shs_train_config_t a = small_config(1);
    a.strategy.offload = offload;
    a.micro_batch = 1;
    a.grad_accum = K;
    a.strategy.kind = kind;
    a.strategy.optim = shs_optim_default(SHS_OPTIM_SGD);
    a.strategy.optim.lr = 0.5f;
    shs_train_config_t b = a;
    b.grad_accum = 1;
    b.world_size = K;
    b.strategy.kind = SHS_DDP;
    run_record_t ra, rb, r0;
    record_run(&a, &test_corpus, 3, &ra);
    record_run(&b, &test_corpus, 3, &rb);
    shs_train_config_t z = a; /* the initial parameters: a run with lr 0 */
    z.strategy.optim.lr = 0.0f;
    record_run(&z, &test_corpus, 1, &r0);
    for (int s = 0; s < 3; s++) {
        assert_true(fabsf(ra.loss[s] - rb.loss[s]) <= 1e-5f * fabsf(rb.loss[s]));
        double dd = 0, upd = 0;
        for (int u = 0; u < ra.layout.num_units; u++)
            for (size_t i = 0; i < ra.layout.units[u].numel; i++) {
                double pa = record_param(&ra, s, u, i), pb = record_param(&rb, s, u, i);
                double p0 = record_param(&r0, 0, u, i);
                dd += (pa - pb) * (pa - pb);
                upd += (pb - p0) * (pb - p0);
            }
        if (!(sqrt(dd) <= 1e-4 * sqrt(upd)) || upd == 0)
            fail_msg("%s K=%d step %d: |params - oracle| = %g, |update| = %g", shs_strategy_name(kind), K, s + 1,
                     sqrt(dd), sqrt(upd));
    }
    free_record(&ra);
    free_record(&rb);
    free_record(&r0);
}

static void test_grad_accum_means_every_micro_batch(void **state) {
    check_accum_means_all(SHS_ZERO2, 3, SHS_OFFLOAD_NONE); /* no micro-batch dropped: ZeRO-2 and ZeRO-3 */
    check_accum_means_all(SHS_ZERO3, 3, SHS_OFFLOAD_NONE);
    check_accum_means_all(SHS_ZERO2, 4, SHS_OFFLOAD_OPTIMIZER); /* first step weighted as the others: ZeRO-2, 4 steps, CPU offload */
    check_accum_means_all(SHS_DDP, 4, SHS_OFFLOAD_NONE);
}

/* ZeRO-1 (and 2, 3) with clipping active; the norm comes only
 * from reduced, owned data, is the same on every rank and equals DDP's. */
static void test_clipping_matches_ddp(void **state) {
    static const int clip_worlds[] = {1, 2, 3, 5, 8};
    static const int types[] = {1, 2, SHS_NORM_INF};
    for (int p = 0; p < 3; p++)
        for (int w = 0; w < 5; w++) {
            shs_train_config_t c = small_config(clip_worlds[w]);
            c.strategy.clip_norm = 0.05f;
            c.strategy.norm_type = types[p];
            check_stages_match_ddp(c, 2);
        }
}

/* One SGD step (lr 0.5, no momentum, no weight decay) of DDP at `world`
 * with clip_norm `clip` (0: off): *delta = parameters after - before (len
 * floats, malloc'd), *norm = the trainer's gradient norm. */
static void sgd_step_delta(int world, float clip, float **delta, size_t *len, float *norm) {
    shs_train_config_t c = small_config(world);
    c.strategy.kind = SHS_DDP;
    c.strategy.optim = shs_optim_default(SHS_OPTIM_SGD);
    c.strategy.optim.lr = 0.5f;
    c.strategy.clip_norm = clip;
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &c, &test_corpus), SHS_OK);
    *len = shs_trainer_snapshot_len(t);
    float *before = malloc(*len * sizeof(float)), *after = malloc(*len * sizeof(float));
    assert_non_null(before);
    assert_non_null(after);
    assert_int_equal(shs_trainer_snapshot(t, before), SHS_OK);
    float loss;
    assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
    assert_int_equal(shs_trainer_snapshot(t, after), SHS_OK);
    *norm = shs_trainer_last_grad_norm(t);
    for (size_t i = 0; i < *len; i++) after[i] -= before[i];
    free(before);
    *delta = after;
    shs_trainer_destroy(t);
}

static double l2(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s);
}

/* Clipping scales the gradient the optimizer applies, as
 * torch.nn.utils.clip_grad_norm_ does: with SGD the update is -lr * g, so
 * without clipping ||update|| / lr is the true norm n (an independent
 * measure of it), and with clip_norm c < n the update is the unclipped one
 * times c / (n + 1e-6): same direction, norm lr * c. A run that computed
 * the norm but did not scale (or scaled by another factor) fails here. */
static void check_clip_scales_update(int world) {
    const float clip = 0.01f, lr = 0.5f;
    float *plain, *clipped, n_plain, n_clip;
    size_t len, len2;
    sgd_step_delta(world, 0, &plain, &len, &n_plain);
    sgd_step_delta(world, clip, &clipped, &len2, &n_clip);
    assert_int_equal(len, len2);
    double n = l2(plain, len) / lr, coef = clip / (n + 1e-6), dot = 0;
    for (size_t i = 0; i < len; i++) dot += (double)plain[i] * clipped[i];
    double cosine = dot / (l2(plain, len) * l2(clipped, len));
    if (fabs(n_clip / n - 1) > 1e-3 || n <= 2 * clip)
        fail_msg("N=%d: trainer's norm %.9g, ||update||/lr without clipping %.9g (want equal, > 2 x %g)", world,
                 (double)n_clip, n, (double)clip);
    if (fabs(l2(clipped, len) / l2(plain, len) / coef - 1) > 1e-3 || cosine < 1 - 1e-6)
        fail_msg("N=%d: clipped update is %.9g x the unclipped one (cosine %.9g); want c / (n + 1e-6) = %.9g", world,
                 l2(clipped, len) / l2(plain, len), cosine, coef);
    free(plain);
    free(clipped);
}

/* The clip is active (threshold below the true norm) at N = 2, 3, 5: it
 * scales the applied update (check_clip_scales_update), and every rank of
 * ZeRO-1/2/3 reports DDP's norm bit for bit (a norm taken from the
 * unreduced local gradients a ZeRO-1/2 rank still holds outside its shard
 * would differ). */
static void test_clip_active_and_same_on_every_rank(void **state) {
    static const int worlds[] = {2, 3, 5};
    for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++) {
        check_clip_scales_update(worlds[w]);
        float n_ddp = 0;
        for (int k = SHS_DDP; k <= SHS_ZERO3; k++) {
            shs_train_config_t c = small_config(worlds[w]);
            c.strategy.kind = (shs_strategy_kind_t)k;
            c.strategy.clip_norm = 0.01f;
            shs_trainer_t *t;
            assert_int_equal(shs_trainer_create(&t, &c, &test_corpus), SHS_OK);
            float loss;
            assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
            float n0 = shs_strategy_grad_norm(shs_trainer_strategy(t, 0));
            assert_true(n0 > 2 * c.strategy.clip_norm); /* clipping really scales the gradient */
            if (k == SHS_DDP) n_ddp = n0;
            /* the norm from reduced, owned shards equals DDP's, on every rank */
            for (int r = 0; r < worlds[w]; r++) {
                float nr = shs_strategy_grad_norm(shs_trainer_strategy(t, r));
                if (memcmp(&nr, &n_ddp, sizeof nr))
                    fail_msg("%s N=%d rank %d: norm %.9g, DDP's %.9g", shs_strategy_name(c.strategy.kind), worlds[w], r,
                             (double)nr, (double)n_ddp);
            }
            shs_trainer_destroy(t);
        }
    }
}

/* Clipping changes the result (the comparison above is not vacuous), and
 * a threshold above the norm changes nothing. */
static void test_clip_threshold_semantics(void **state) {
    shs_train_config_t c = small_config(3);
    c.strategy.kind = SHS_ZERO3;
    run_record_t plain, low, high;
    record_run(&c, &test_corpus, 1, &plain);
    c.strategy.clip_norm = 0.05f;
    record_run(&c, &test_corpus, 1, &low);
    c.strategy.clip_norm = 1e6f;
    record_run(&c, &test_corpus, 1, &high);
    assert_memory_not_equal(plain.snap[0], low.snap[0], plain.len * sizeof(float));
    assert_memory_equal(plain.snap[0], high.snap[0], plain.len * sizeof(float));
    free_record(&plain);
    free_record(&low);
    free_record(&high);
}

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

/* Hybrid sharding, shapes (G ranks per shard group, R replicas): with one
 * replica it is ZeRO-3 / ZeRO-2 and with G = 1 it is DDP, bit for bit. */
static void test_hybrid_exact_shapes(void **state) {
    static const int shapes[][2] = {{4, 1}, {1, 4}, {3, 1}, {1, 1}, {8, 1}, {1, 5}, {5, 1}};
    for (int k = 0; k < (full_sweep() ? 7 : 4); k++)
        for (int kind = SHS_HYBRID_SHARD; kind <= SHS_HYBRID_SHARD_ZERO2; kind++) {
            shs_train_config_t cfg = small_config(shapes[k][0] * shapes[k][1]);
            cfg.strategy.shard_group_size = shapes[k][0];
            cfg.strategy.clip_norm = 0.05f;
            cfg.strategy.kind = SHS_DDP;
            run_record_t ddp, h;
            record_run(&cfg, &test_corpus, 2, &ddp);
            cfg.strategy.kind = (shs_strategy_kind_t)kind;
            record_run(&cfg, &test_corpus, 2, &h);
            assert_same_run(&ddp, &h);
            free_record(&ddp);
            free_record(&h);
        }
}

/* Shapes (2, 2) and (2, 3): a sum of group sums is not DDP's rank-order sum,
 * so results drift by rounding, but every replica stays bit-identical, the
 * loss stays within rounding of DDP's, and the gathers stay in the group
 * (all-gather buffers are G-way: a G/N share of ZeRO-3's bytes). */
static void test_hybrid_replicated_shapes(void **state) {
    static const int shapes[][2] = {{2, 2}, {2, 3}, {4, 2}, {2, 4}};
    for (int k = 0; k < (full_sweep() ? 4 : 2); k++) {
        int G = shapes[k][0], N = G * shapes[k][1];
        shs_train_config_t cfg = small_config(N);
        cfg.strategy.shard_group_size = G;
        run_record_t ddp;
        cfg.strategy.kind = SHS_DDP;
        record_run(&cfg, &test_corpus, 3, &ddp);
        for (int kind = SHS_HYBRID_SHARD; kind <= SHS_HYBRID_SHARD_ZERO2; kind++) {
            cfg.strategy.kind = (shs_strategy_kind_t)kind;
            shs_trainer_t *t;
            assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
            float *snap = malloc(shs_trainer_snapshot_len(t) * sizeof(float));
            for (int s = 0; s < 3; s++) {
                float loss;
                assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
                assert_true(fabsf(loss - ddp.loss[s]) <= 1e-5f * ddp.loss[s]);
                assert_int_equal(shs_trainer_snapshot(t, snap), SHS_OK);
                shs_replica_diff_t rd;
                assert_int_equal(shs_trainer_check_replicas(t, snap, &rd), 1);
            }
            shs_comm_stats_t cs;
            shs_trainer_comm_stats(t, 0, &cs);
            if (kind == SHS_HYBRID_SHARD) {
                /* 3 steps x (forward + backward gathers of every unit but the
                 * head's reuse): compare with ZeRO-3 on the same world */
                shs_train_config_t z = cfg;
                z.strategy.kind = SHS_ZERO3;
                shs_trainer_t *tz;
                assert_int_equal(shs_trainer_create(&tz, &z, &test_corpus), SHS_OK);
                float loss;
                for (int s = 0; s < 3; s++) assert_int_equal(shs_trainer_step(tz, &loss), SHS_OK);
                shs_comm_stats_t zs;
                shs_trainer_comm_stats(tz, 0, &zs);
                assert_int_equal(cs.calls[SHS_OP_ALL_GATHER], zs.calls[SHS_OP_ALL_GATHER]);
                assert_true(cs.bytes[SHS_OP_ALL_GATHER] < zs.bytes[SHS_OP_ALL_GATHER]);
                shs_trainer_destroy(tz);
            }
            free(snap);
            shs_trainer_destroy(t);
        }
        free_record(&ddp);
    }
}

/* A shard group size that does not divide the world is refused. */
static void test_hybrid_bad_group_size(void **state) {
    shs_train_config_t cfg = small_config(4);
    cfg.strategy.kind = SHS_HYBRID_SHARD;
    cfg.strategy.shard_group_size = 3;
    shs_trainer_t *t = NULL;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "shard group size 3 must divide the world size 4"));
}

/* FSDP's reshard/prefetch knobs: every freed
 * communication buffer is filled with NaN, and with prefetch on or off,
 * resharding after forward or not, the results equal DDP's (so no stale
 * buffer is read and no NaN leaks). */
static void test_prefetch_and_reshard_match_ddp(void **state) {
    typedef struct { int keep, fwd, limit; shs_prefetch_t bwd; } knobs_t;
    static const knobs_t knobs[] = {
        {0, 0, 0, SHS_PREFETCH_NONE}, {0, 0, 0, SHS_PREFETCH_PRE}, {0, 0, 0, SHS_PREFETCH_POST},
        {0, 1, 0, SHS_PREFETCH_PRE},  {1, 1, 1, SHS_PREFETCH_POST}, {1, 0, 0, SHS_PREFETCH_NONE},
    };
    static const int nw[] = {2, 3, 5, 1, 8};
    for (int w = 0; w < (full_sweep() ? 5 : 3); w++) {
        shs_train_config_t cfg = small_config(nw[w]);
        cfg.poison_freed = 1;
        cfg.grad_accum = 2;
        cfg.strategy.kind = SHS_DDP;
        run_record_t ddp;
        record_run(&cfg, &test_corpus, 2, &ddp);
        for (int k = 0; k < 6; k++)
            for (int prec = 0; prec < 2; prec++) {
                cfg.strategy.kind = SHS_ZERO3;
                cfg.strategy.keep_after_forward = knobs[k].keep;
                cfg.strategy.forward_prefetch = knobs[k].fwd;
                cfg.strategy.limit_all_gathers = knobs[k].limit;
                cfg.strategy.backward_prefetch = knobs[k].bwd;
                cfg.strategy.param_dtype = prec ? SHS_BF16 : SHS_F32;
                run_record_t z;
                if (prec) { /* the reference with the same precision */
                    shs_train_config_t d = cfg;
                    d.strategy.kind = SHS_DDP;
                    run_record_t dd;
                    record_run(&d, &test_corpus, 2, &dd);
                    record_run(&cfg, &test_corpus, 2, &z);
                    assert_same_run(&dd, &z);
                    free_record(&dd);
                } else {
                    record_run(&cfg, &test_corpus, 2, &z);
                    assert_same_run(&ddp, &z);
                }
                free_record(&z);
            }
        free_record(&ddp);
    }
}

/* The knobs do what they say: keeping gathered units from forward to
 * backward saves the backward all-gathers and raises the peak of gathered
 * memory; prefetching raises the peak without changing the gather count. */
static void test_prefetch_changes_order_and_peak(void **state) {
    typedef struct { int keep; shs_prefetch_t bwd; } knobs_t;
    static const knobs_t knobs[] = {{0, SHS_PREFETCH_NONE}, {0, SHS_PREFETCH_PRE}, {1, SHS_PREFETCH_NONE}};
    uint64_t gathers[3];
    size_t peak[3];
    for (int k = 0; k < 3; k++) {
        shs_train_config_t cfg = small_config(2);
        cfg.model.num_layers = 4;
        cfg.strategy.kind = SHS_ZERO3;
        cfg.strategy.keep_after_forward = knobs[k].keep;
        cfg.strategy.backward_prefetch = knobs[k].bwd;
        shs_trainer_t *t;
        assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
        float loss;
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        shs_comm_stats_t cs;
        shs_trainer_comm_stats(t, 0, &cs);
        uint64_t first = cs.calls[SHS_OP_ALL_GATHER];
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        shs_trainer_comm_stats(t, 0, &cs);
        cs.calls[SHS_OP_ALL_GATHER] -= first; /* the second step's: prefetch by recorded order */
        shs_mem_stats_t ms;
        shs_trainer_mem_stats(t, 0, &ms);
        gathers[k] = cs.calls[SHS_OP_ALL_GATHER];
        peak[k] = ms.peak[SHS_MEM_COMM];
        shs_trainer_destroy(t);
    }
    /* 6 units: forward gathers embed, 4 blocks, lnf, and embed again for the
     * head (kept into backward); backward gathers lnf and the 4 blocks */
    assert_int_equal(gathers[0], 7 + 5);
    assert_int_equal(gathers[1], gathers[0]);
    assert_int_equal(gathers[2], 6); /* kept: each unit once */
    assert_true(peak[1] > peak[0]);
    assert_true(peak[2] > peak[1]);
}

/* Rank 0's position of the last call `op` marked `marker` in a trace. */
static long last_call(const shs_trace_t *t, shs_coll_op_t op, const char *marker) {
    long at = -1;
    for (size_t i = 0; i < t->ranks[0].n; i++) {
        const shs_trace_rec_t *x = &t->ranks[0].recs[i];
        if (x->op == op && !strcmp(shs_trace_str(t, x->marker), marker)) at = (long)i;
    }
    return at;
}

/* The order itself, from a recording of the second step's backward: without
 * prefetch block2's all-gather follows block3's reduce-scatter; with
 * backward prefetch (pre or post, FSDP's BACKWARD_PRE / BACKWARD_POST) it is
 * issued before it; forward prefetch does not change that, nor gather any
 * unit twice in one forward. */
static void test_prefetch_order_in_trace(void **state) {
    static const shs_prefetch_t modes[] = {SHS_PREFETCH_NONE, SHS_PREFETCH_PRE, SHS_PREFETCH_POST};
    for (int m = 0; m < 3; m++)
        for (int fwd = 0; fwd < 2; fwd++) {
            shs_train_config_t cfg = small_config(2);
            cfg.model.num_layers = 4;
            cfg.strategy.kind = SHS_ZERO3;
            cfg.strategy.backward_prefetch = modes[m];
            cfg.strategy.forward_prefetch = fwd;
            shs_trace_recorder_t *rec;
            assert_int_equal(shs_trace_recorder_create(&rec, 2), SHS_OK);
            cfg.trace = rec;
            shs_trainer_t *t;
            assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
            float loss;
            for (int step = 0; step < 2; step++) assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
            shs_trainer_destroy(t);
            shs_trace_t *tr;
            assert_int_equal(shs_trace_recorder_finish(rec, &tr), SHS_OK);
            shs_trace_recorder_free(rec);
            long ag2 = last_call(tr, SHS_OP_ALL_GATHER, "bwd/block2");
            long rs3 = last_call(tr, SHS_OP_REDUCE_SCATTER, "bwd/block3");
            assert_true(ag2 >= 0 && rs3 >= 0);
            if (modes[m] == SHS_PREFETCH_NONE) assert_true(ag2 > rs3);
            else assert_true(ag2 < rs3);
            /* every forward gathers block0 once, prefetch or not: the tied
             * head's second use of the embedding must not prefetch what
             * followed its first (block0, already done) */
            int b0 = 0;
            for (size_t i = 0; i < tr->ranks[0].n; i++)
                b0 += tr->ranks[0].recs[i].op == SHS_OP_ALL_GATHER &&
                      !strcmp(shs_trace_str(tr, tr->ranks[0].recs[i].marker), "fwd/block0");
            assert_int_equal(b0, 2);
            shs_trace_free(tr);
        }
}

/* CPU offload of the optimizer (every stage) and of the parameters
 * (ZeRO-3, hybrid_shard) equals DDP without offload, bit for bit, also with
 * fp16 loss scaling, clipping and gradient accumulation (ZeRO-2 + 4
 * accumulation steps + optimizer offload included). */
static void test_offload_matches_ddp(void **state) {
    for (int w = 0; w < NWORLDS; w++) {
        shs_train_config_t cfg = small_config(test_worlds[w]);
        cfg.grad_accum = test_worlds[w] == 3 ? 4 : 2;
        cfg.strategy.clip_norm = 0.05f;
        if (test_worlds[w] == 5) {
            cfg.strategy.param_dtype = SHS_F16;
            cfg.strategy.scaler.init_scale = 1024.0f;
        }
        cfg.strategy.kind = SHS_DDP;
        run_record_t ddp;
        record_run(&cfg, &test_corpus, 2, &ddp);
        for (int k = SHS_DDP; k <= SHS_HYBRID_SHARD; k++)
            for (int off = SHS_OFFLOAD_OPTIMIZER; off <= SHS_OFFLOAD_PARAMS; off++) {
                if (off == SHS_OFFLOAD_PARAMS && k != SHS_ZERO3 && k != SHS_HYBRID_SHARD) continue;
                shs_train_config_t c = cfg;
                c.strategy.kind = (shs_strategy_kind_t)k;
                c.strategy.offload = (shs_offload_t)off;
                run_record_t z;
                record_run(&c, &test_corpus, 2, &z);
                assert_same_run(&ddp, &z);
                free_record(&z);
            }
        free_record(&ddp);
    }
}

/* Accounting: with the optimizer offloaded the device holds no optimizer
 * state; the host holds 2 S (AdamW) and the master copy S per unit; each
 * step copies each rank's updated range (its valid shard elements) down and
 * up once. With parameters offloaded the device holds no parameters. */
static void test_offload_accounting(void **state) {
    shs_train_config_t cfg = small_config(3);
    cfg.strategy.kind = SHS_ZERO3;
    for (int off = SHS_OFFLOAD_OPTIMIZER; off <= SHS_OFFLOAD_PARAMS; off++) {
        cfg.strategy.offload = (shs_offload_t)off;
        shs_trainer_t *t;
        assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
        float loss;
        for (int s = 0; s < 2; s++) assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        const shs_layout_t *lo = shs_trainer_layout(t);
        size_t shard = 0, valid = 0;
        for (int u = 0; u < lo->num_units; u++) {
            shs_shard_t sh = shs_shard_of(lo->units[u].numel, 3, 1, 1);
            shard += sh.size;
            valid += sh.valid;
        }
        shs_mem_stats_t dm, hm;
        uint64_t h2d, d2h;
        shs_trainer_mem_stats(t, 1, &dm);
        shs_strategy_offload_stats(shs_trainer_strategy(t, 1), &h2d, &d2h, &hm);
        assert_int_equal(dm.peak[SHS_MEM_OPTIM], 0);
        assert_int_equal(hm.peak[SHS_MEM_OPTIM], 2 * shard * sizeof(float));
        assert_int_equal(hm.peak[SHS_MEM_GRADS], shard * sizeof(float));
        assert_int_equal(d2h, 2 * valid * sizeof(float));
        if (off == SHS_OFFLOAD_OPTIMIZER) {
            assert_int_equal(dm.peak[SHS_MEM_PARAMS], shard * sizeof(float));
            assert_int_equal(hm.peak[SHS_MEM_PARAMS], shard * sizeof(float));
            assert_int_equal(h2d, 2 * valid * sizeof(float));
        } else {
            assert_int_equal(dm.peak[SHS_MEM_PARAMS], 0);
            assert_int_equal(hm.peak[SHS_MEM_PARAMS], shard * sizeof(float));
            assert_true(h2d > 0); /* shards staged in before each all-gather */
        }
        shs_trainer_destroy(t);
    }
    cfg.strategy.kind = SHS_ZERO2;
    cfg.strategy.offload = SHS_OFFLOAD_PARAMS;
    shs_trainer_t *t = NULL;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "needs sharded parameters"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_accum_matches_ddp),
        cmocka_unit_test(test_grad_accum_means_every_micro_batch),
        cmocka_unit_test(test_clipping_matches_ddp),
        cmocka_unit_test(test_clip_active_and_same_on_every_rank),
        cmocka_unit_test(test_clip_threshold_semantics),
        cmocka_unit_test(test_replicated_units_match_ddp),
        cmocka_unit_test(test_shard_align_matches_ddp),
        cmocka_unit_test(test_mixed_precision_matches_ddp),
        cmocka_unit_test(test_mixed_precision_is_applied),
        cmocka_unit_test(test_fp16_overflow_skips_everywhere),
        cmocka_unit_test(test_fp16_scale_growth),
        cmocka_unit_test(test_hybrid_exact_shapes),
        cmocka_unit_test(test_hybrid_replicated_shapes),
        cmocka_unit_test(test_hybrid_bad_group_size),
        cmocka_unit_test(test_prefetch_and_reshard_match_ddp),
        cmocka_unit_test(test_prefetch_changes_order_and_peak),
        cmocka_unit_test(test_prefetch_order_in_trace),
        cmocka_unit_test(test_offload_matches_ddp),
        cmocka_unit_test(test_offload_accounting),
        cmocka_unit_test(test_fp16_avg_overflow_independent_of_world),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
