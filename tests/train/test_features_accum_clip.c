/* test_features_accum_clip.c - gradient accumulation (no_sync) and
 * clip_grad_norm_ with norm types 1/2/inf, each proven bit-identical to DDP
 * under the same settings; plus independent checks that gradient
 * accumulation averages every micro-batch (none dropped, the first step
 * weighted as the others) and that clipping is really active, the same on
 * every rank, with the threshold's semantics. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/shard.h"
#include "shardsim/train.h"
#include "harness.h"
#include "run_record.h"

#include "features_run.h"

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_accum_matches_ddp),
        cmocka_unit_test(test_grad_accum_means_every_micro_batch),
        cmocka_unit_test(test_clipping_matches_ddp),
        cmocka_unit_test(test_clip_active_and_same_on_every_rank),
        cmocka_unit_test(test_clip_threshold_semantics),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
