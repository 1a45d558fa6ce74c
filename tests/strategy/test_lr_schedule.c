/* test_lr_schedule.c - the learning-rate schedules (lr_schedule.h) against
 * their closed forms, and the strategy applying them per applied optimizer
 * step.
 *
 * Independent references: each expected value is computed here in f64 from
 * the formula as its source writes it (transformers src/transformers/
 * optimization.py: the *_lr_lambda functions, times the base lr as torch's
 * LambdaLR does; DeepSpeed deepspeed/runtime/lr_schedules.py at edaa722:
 * WarmupLR, WarmupDecayLR, WarmupCosineLR get_lr / get_lr_ratio, OneCycle's
 * _get_scale_factor, _get_cycle_lr/_mom, _get_decay_lr/_mom), with a few
 * values worked by hand (HF linear: 0, 1/2, 1, then (T - j) / (T - W);
 * WarmupLR's log warmup: ln 2 / ln 3 of the way at its second step).
 * DeepSpeed's scheduler is built with last_batch_iteration -1 (its lr set at
 * construction) and stepped after each applied step; torch's LambdaLR steps
 * once at construction: the step after j applied steps uses DeepSpeed's
 * iteration j - 1 and HF's lambda(j).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "shardsim/lr_schedule.h"
#include "strategy/planted_grads.h"

static void assert_same_f64(double got, double want, const char *what, long j) {
    if (memcmp(&got, &want, sizeof got) != 0) fail_msg("%s at j=%ld: got %.17g, want %.17g", what, j, got, want);
}

/* ---- the formulas, as transformers and DeepSpeed write them ---------------------- */

static double hf_expected(shs_lr_schedule_kind_t k, double base, long j, long W, long T, double min_lr) {
    double lambda;
    if (k == SHS_LR_CONSTANT) lambda = 1;
    else if (j < W) lambda = (double)j / (double)(W > 1 ? W : 1); /* float(j) / float(max(1, W)) */
    else if (k == SHS_LR_CONSTANT_WITH_WARMUP) lambda = 1.0;
    else if (k == SHS_LR_LINEAR) {
        double r = (double)(T - j) / (double)(T - W > 1 ? T - W : 1);
        lambda = r > 0.0 ? r : 0.0;
    } else {
        double progress = (double)(j - W) / (double)(T - W > 1 ? T - W : 1);
        double f = 0.5 * (1.0 + cos(M_PI * 0.5 * 2.0 * progress));
        if (k == SHS_LR_COSINE_WITH_MIN_LR) {
            double rate = min_lr / base;
            f = f * (1 - rate) + rate;
        }
        lambda = f > 0 ? f : 0;
    }
    return base * lambda;
}

/* DeepSpeed's get_lr at iteration it (-1: the value set at construction) */
static double ds_expected(const shs_lr_schedule_t *s, double base, long it) {
    long Wi = s->warmup_steps > 2 ? s->warmup_steps : 2; /* max(2, warmup_num_steps) */
    double W = (double)Wi, T = (double)s->total_steps;
    double inverse_log_warm_up = 1.0 / log(W);
    if (s->kind == SHS_LR_WARMUP_COSINE_LR) {
        if (it < 0) return 0.0;
        double ratio;
        if (it < Wi) {
            ratio = s->warmup_linear ? (double)it / W : inverse_log_warm_up * log((double)(it + 1));
            ratio = s->warmup_min_ratio + ratio * (1.0 - s->warmup_min_ratio);
        } else {
            double real_last_step = (double)(it - Wi + 1), real_total = T - W > 1 ? T - W : 1;
            double p = real_last_step / real_total < 1.0 ? real_last_step / real_total : 1.0;
            ratio = (1 + cos(M_PI * p)) / 2;
            ratio = s->cos_min_ratio + (1.0 - s->cos_min_ratio) * ratio;
            if (ratio < 0) ratio = 0;
        }
        return base * ratio;
    }
    if (it < 0) return s->min_lr;
    double gamma;
    if (it < Wi) gamma = s->warmup_linear ? (double)it / W : inverse_log_warm_up * log((double)(it + 1));
    else if (s->kind == SHS_LR_WARMUP_DECAY_LR) {
        gamma = (T - (double)it) / (T - W > 1.0 ? T - W : 1.0);
        if (gamma < 0) gamma = 0;
    } else gamma = 1.0;
    return s->min_lr + (s->max_lr - s->min_lr) * gamma;
}

/* OneCycle: lr and beta1 at iteration it */
static void one_cycle_expected(const shs_lr_schedule_t *s, long it, double *lr, double *mom) {
    double total = s->cycle.first_step_size + s->cycle.second_step_size;
    if (it < 0) {
        *lr = s->cycle.min_lr;
        *mom = s->cycle.min_mom;
        return;
    }
    if ((double)it < total) {
        double bi = (double)(it + 1), ratio = s->cycle.first_step_size / total;
        double cycle = floor(1 + bi / total), x = 1. + bi / total - cycle, scale;
        long stairs;
        if (x <= ratio) {
            scale = x / ratio;
            stairs = s->cycle.first_stair_count;
        } else {
            scale = (x - 1) / (ratio - 1);
            stairs = s->cycle.second_stair_count;
        }
        if (stairs > 0) {
            double ci = fmod(bi, total);
            double pos = ci <= s->cycle.first_step_size ? ci * (double)stairs / s->cycle.first_step_size
                                                        : (total - ci) * (double)stairs / s->cycle.second_step_size;
            scale = floor(pos) / (double)stairs;
        }
        *lr = s->cycle.min_lr + (s->cycle.max_lr - s->cycle.min_lr) * scale;
        *mom = s->cycle.max_mom - (s->cycle.max_mom - s->cycle.min_mom) * scale;
        return;
    }
    double k = (double)it - total + 1, interval = s->cycle.decay_step_size ? k / s->cycle.decay_step_size : 0;
    *lr = s->cycle.decay_step_size && s->cycle.decay_lr_rate ? s->cycle.min_lr / (1 + s->cycle.decay_lr_rate * interval)
                                                             : s->cycle.min_lr;
    *mom = s->cycle.decay_step_size && s->cycle.decay_mom_rate ? s->cycle.max_mom * (1 + s->cycle.decay_mom_rate * interval)
                                                               : s->cycle.max_mom;
}

/* ---- the pure function ---------------------------------------------------------------- */

static void test_hf_schedules(void **state) {
    (void)state;
    static const shs_lr_schedule_kind_t kinds[] = {SHS_LR_CONSTANT, SHS_LR_CONSTANT_WITH_WARMUP, SHS_LR_LINEAR,
                                                   SHS_LR_COSINE, SHS_LR_COSINE_WITH_MIN_LR};
    static const long WT[][2] = {{0, 10}, {3, 10}, {10, 10}, {4, 3}, {1, 1}};
    static const double bases[] = {0x1p-10, (double)1e-3f, (double)3e-4f};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t c = 0; c < sizeof WT / sizeof WT[0]; c++)
            for (size_t b = 0; b < 3; b++) {
                shs_lr_schedule_t s = {.kind = kinds[k], .warmup_steps = WT[c][0], .total_steps = WT[c][1],
                                       .min_lr = bases[b] / 16};
                assert_int_equal(shs_lr_schedule_check(&s), SHS_OK);
                for (long j = 0; j <= WT[c][1] + 3; j++) {
                    shs_lr_point_t p = shs_lr_schedule_at(&s, bases[b], j);
                    assert_same_f64(p.lr, hf_expected(kinds[k], bases[b], j, WT[c][0], WT[c][1], bases[b] / 16),
                                    shs_lr_schedule_name(kinds[k]), j);
                    assert_false(p.has_betas);
                }
            }
    /* by hand: linear, W = 2, T = 10, base 1: 0, 1/2, 1, then (10 - j) / 8; 0 from T on */
    shs_lr_schedule_t lin = {.kind = SHS_LR_LINEAR, .warmup_steps = 2, .total_steps = 10};
    static const double want[] = {0, 0.5, 1, 7.0 / 8, 6.0 / 8, 5.0 / 8, 0.5, 3.0 / 8, 2.0 / 8, 1.0 / 8, 0, 0};
    for (long j = 0; j < 12; j++) assert_same_f64(shs_lr_schedule_at(&lin, 1.0, j).lr, want[j], "linear by hand", j);
    /* cosine, W = 0, T = 4: 1, (1 + cos(pi/4)) / 2, 1/2, ..., 0 */
    shs_lr_schedule_t cs = {.kind = SHS_LR_COSINE, .total_steps = 4};
    assert_same_f64(shs_lr_schedule_at(&cs, 1.0, 0).lr, 1.0, "cosine by hand", 0);
    assert_same_f64(shs_lr_schedule_at(&cs, 1.0, 2).lr, 0.5, "cosine by hand", 2);
    assert_true(shs_lr_schedule_at(&cs, 1.0, 4).lr == 0.0);
}

static void test_deepspeed_warmup_schedules(void **state) {
    (void)state;
    static const shs_lr_schedule_kind_t kinds[] = {SHS_LR_WARMUP_LR, SHS_LR_WARMUP_DECAY_LR, SHS_LR_WARMUP_COSINE_LR};
    static const long WT[][2] = {{1, 10}, {2, 10}, {3, 10}, {10, 10}, {5, 3}, {1000, 5000}};
    for (size_t k = 0; k < 3; k++)
        for (size_t c = 0; c < sizeof WT / sizeof WT[0]; c++)
            for (int lin = 0; lin < 2; lin++) {
                shs_lr_schedule_t s = {.kind = kinds[k], .warmup_steps = WT[c][0], .total_steps = WT[c][1],
                                       .min_lr = 1e-5, .max_lr = 3e-4, .warmup_linear = lin,
                                       .warmup_min_ratio = 0.1, .cos_min_ratio = 1e-4};
                assert_int_equal(shs_lr_schedule_check(&s), SHS_OK);
                for (long j = 0; j <= WT[c][1] + 3; j++)
                    assert_same_f64(shs_lr_schedule_at(&s, 2e-3, j).lr, ds_expected(&s, 2e-3, j - 1),
                                    shs_lr_schedule_name(kinds[k]), j);
            }
    /* by hand: WarmupLR log, W = 3: min at construction and at iteration 0,
     * then ln 2 / ln 3 of the way, then max */
    shs_lr_schedule_t w = {.kind = SHS_LR_WARMUP_LR, .warmup_steps = 3, .min_lr = 0, .max_lr = 1};
    assert_true(shs_lr_schedule_at(&w, 5, 0).lr == 0 && shs_lr_schedule_at(&w, 5, 1).lr == 0);
    assert_true(fabs(shs_lr_schedule_at(&w, 5, 2).lr - 0.6309297535714574) < 1e-15);
    assert_true(shs_lr_schedule_at(&w, 5, 4).lr == 1.0 && shs_lr_schedule_at(&w, 5, 99).lr == 1.0);
    /* WarmupDecayLR linear, W = 4, T = 8: 0, 0, 1/4, 1/2, 3/4, then (8 - i) / 4 */
    shs_lr_schedule_t d = {.kind = SHS_LR_WARMUP_DECAY_LR, .warmup_steps = 4, .total_steps = 8, .max_lr = 1,
                           .warmup_linear = 1};
    static const double want[] = {0, 0, 0.25, 0.5, 0.75, 1, 0.75, 0.5, 0.25, 0, 0};
    for (long j = 0; j < 11; j++) assert_same_f64(shs_lr_schedule_at(&d, 7, j).lr, want[j], "WarmupDecayLR by hand", j);
    /* WarmupCosineLR: 0 at construction (get_lr before the first step) */
    shs_lr_schedule_t c = {.kind = SHS_LR_WARMUP_COSINE_LR, .warmup_steps = 2, .total_steps = 6, .cos_min_ratio = 1e-4};
    assert_true(shs_lr_schedule_at(&c, 1e-3, 0).lr == 0.0);
}

static void test_deepspeed_one_cycle(void **state) {
    (void)state;
    shs_lr_schedule_t s = {.kind = SHS_LR_ONE_CYCLE,
                           .cycle = {.min_lr = 1e-4, .max_lr = 1e-2, .first_step_size = 4, .second_step_size = 6,
                                     .momentum = 1, .min_mom = 0.8, .max_mom = 0.9, .decay_step_size = 3,
                                     .decay_lr_rate = 0.5, .decay_mom_rate = 0.1}};
    for (int stairs = 0; stairs < 3; stairs++) {
        s.cycle.first_stair_count = stairs;
        s.cycle.second_stair_count = stairs ? stairs + 1 : 0;
        for (int decay = 0; decay < 2; decay++) {
            s.cycle.decay_step_size = decay ? 3 : 0;
            assert_int_equal(shs_lr_schedule_check(&s), SHS_OK);
            for (long j = 0; j < 20; j++) {
                shs_lr_point_t p = shs_lr_schedule_at(&s, 1.0, j);
                double lr, mom;
                one_cycle_expected(&s, j - 1, &lr, &mom);
                assert_same_f64(p.lr, lr, "OneCycle lr", j);
                assert_same_f64(p.beta1, mom, "OneCycle beta1", j);
                assert_true(p.has_betas && p.beta2 == 0.99); /* DeepSpeed sets betas = (mom, 0.99) */
            }
        }
    }
    /* by hand, no stairs: the peak at the end of the rising half (batch 4 of
     * 4 + 6), back at the minimum after the cycle; beta1 the other way */
    s.cycle.first_stair_count = s.cycle.second_stair_count = 0;
    s.cycle.decay_step_size = 0;
    assert_true(fabs(shs_lr_schedule_at(&s, 1, 4).lr - 1e-2) < 1e-17 && fabs(shs_lr_schedule_at(&s, 1, 4).beta1 - 0.8) < 1e-15);
    assert_true(shs_lr_schedule_at(&s, 1, 0).lr == 1e-4 && shs_lr_schedule_at(&s, 1, 0).beta1 == 0.8);
    assert_true(shs_lr_schedule_at(&s, 1, 15).lr == 1e-4 && shs_lr_schedule_at(&s, 1, 15).beta1 == 0.9);
}

/* DeepSpeed's ValueErrors and the names */
static void test_checks_and_names(void **state) {
    (void)state;
    shs_lr_schedule_t s = {.kind = SHS_LR_WARMUP_LR, .warmup_steps = 0};
    assert_int_equal(shs_lr_schedule_check(&s), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "positive integer"));
    s.kind = SHS_LR_LINEAR; /* HF: no warmup is fine */
    assert_int_equal(shs_lr_schedule_check(&s), SHS_OK);
    s.total_steps = -1;
    assert_int_equal(shs_lr_schedule_check(&s), SHS_INVALID_ARG);
    shs_lr_schedule_t oc = {.kind = SHS_LR_ONE_CYCLE, .cycle = {.first_step_size = 0, .second_step_size = 1}};
    assert_int_equal(shs_lr_schedule_check(&oc), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "cycle_first_step_size"));
    oc.cycle.first_step_size = 2;
    oc.cycle.second_step_size = -1;
    assert_int_equal(shs_lr_schedule_check(&oc), SHS_INVALID_ARG);
    for (int k = 0; k < SHS_LR_NUM_SCHEDULES; k++) {
        shs_lr_schedule_kind_t back;
        assert_int_equal(shs_lr_schedule_parse(shs_lr_schedule_name((shs_lr_schedule_kind_t)k), &back), 0);
        assert_int_equal(back, k);
    }
    shs_lr_schedule_kind_t x;
    assert_int_equal(shs_lr_schedule_parse("warmuplr", &x), -1); /* DeepSpeed's names are case-sensitive */
    char buf[320];
    shs_lr_schedule_t lin = {.kind = SHS_LR_LINEAR, .warmup_steps = 2, .total_steps = 10};
    shs_lr_schedule_describe(&lin, 1e-3, buf, sizeof buf);
    assert_non_null(strstr(buf, "linear (HF): lr 0.001, warmup 2 steps, total 10 steps; lr at step 1: 0, 3: 0.001, 10: "
                                "0.000125"));
}

/* ---- applied by the strategy ------------------------------------------------------------ */

static float one(int rank, size_t i, long step) { return 1.0f; }

/* Each applied step's lr is the schedule's at the count of applied steps,
 * rounded to f32; a skipped (overflow) step applies nothing and leaves the
 * schedule where it was, as DeepSpeed's engine and the HF Trainer do. */
static void test_strategy_steps_the_schedule(void **state) {
    (void)state;
    pg_world_t w = {.n = 5, .grad = one, .plant_inf_at = 3};
    w.sc = (shs_strategy_config_t){.kind = SHS_ZERO3, .optim = shs_optim_default(SHS_OPTIM_SGD),
                                   .param_dtype = SHS_F16,
                                   .lr_schedule = {.kind = SHS_LR_LINEAR, .warmup_steps = 2, .total_steps = 6}};
    w.sc.optim.lr = 0x1p-4f;
    pg_start(&w, 2);
    long applied = 0;
    for (long step = 1; step <= 7; step++) {
        pg_step(&w);
        for (int r = 0; r < 2; r++) {
            int skipped = shs_strategy_step_skipped(w.s[r]);
            assert_int_equal(skipped, step == 3);
            assert_int_equal(shs_strategy_lr_steps(w.s[r]), applied + !skipped);
            if (!skipped) {
                float want = (float)hf_expected(SHS_LR_LINEAR, 0x1p-4, applied, 2, 6, 0);
                if ((float)shs_strategy_last_lr(w.s[r]) != want)
                    fail_msg("step %ld rank %d: lr %.9g, want %.9g", step, r, shs_strategy_last_lr(w.s[r]), (double)want);
            }
        }
        applied += step != 3;
    }
    pg_stop(&w);
}

/* OneCycle's cycle_momentum under Adam: the first step runs with betas
 * (cycle_min_mom, 0.99), so from zero state and gradient 1 the state is
 * m = 1 - beta1 and v = 1 - 0.99 in f32. */
static void test_one_cycle_betas_reach_adam(void **state) {
    (void)state;
    pg_world_t w = {.n = 3, .grad = one};
    w.sc = (shs_strategy_config_t){.kind = SHS_DDP, .optim = shs_optim_default(SHS_OPTIM_ADAMW),
                                   .lr_schedule = {.kind = SHS_LR_ONE_CYCLE,
                                                   .cycle = {.min_lr = 1e-4, .max_lr = 1e-3, .first_step_size = 2,
                                                             .second_step_size = 2, .momentum = 1, .min_mom = 0.75,
                                                             .max_mom = 0.85}}};
    pg_start(&w, 2);
    pg_step(&w);
    float p[3], st[6];
    assert_int_equal(shs_strategy_read_state(w.s[0], 0, p, st), SHS_OK);
    assert_true(st[0] == 1.0f - 0.75f);         /* (1 - beta1) g */
    assert_true(st[3] == 1.0f - (float)0.99);   /* (1 - beta2) g^2 */
    assert_true((float)shs_strategy_last_lr(w.s[0]) == (float)1e-4);
    pg_stop(&w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_schedules),
        cmocka_unit_test(test_deepspeed_warmup_schedules),
        cmocka_unit_test(test_deepspeed_one_cycle),
        cmocka_unit_test(test_checks_and_names),
        cmocka_unit_test(test_strategy_steps_the_schedule),
        cmocka_unit_test(test_one_cycle_betas_reach_adam),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
