/* test_grad_averaging.c - DeepSpeed's prescale_gradients and
 * gradient_predivide_factor (strategy.h) as the strategy reduces gradients:
 * the reduced gradient against its closed form, the same bits at every
 * stage, and the same trained run under ZeRO-1/2/3 as under DDP (what
 * `train --check ddp` checks).
 *
 * Independent reference: DeepSpeed's engine.py allreduce_bucket, applied to
 * the tensor it all-reduces: prescale: x.mul_(1. / N), all_reduce (SUM);
 * otherwise x.mul_(1. / f) when f != 1, all_reduce, x.mul_(f / N) when
 * f != N. torch's mul_ with a Python scalar computes in f32 (its opmath for
 * f32, f16 and bf16 tensors), the scalar taken as f32; each result rounded
 * to the tensor's dtype. The SUM adds ranks in order 0..N-1, rounding each
 * add to the dtype (comm.h), and for hybrid sharding sums the shard group
 * first, then the replicas. Written here with the test's own bf16 rounding
 * (round to nearest even on the f32 bits). The reduced gradient is read
 * exactly: parameters start at 0 and SGD at lr 1 leaves -gradient.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "run_record.h"
#include "strategy/planted_grads.h"

#define ELEMS 11

/* rank r's local gradient: values with all their significand bits in use */
static float grad_of(int rank, size_t i, long step) {
    return (float)(((double)rank + 1.37) * ((double)i + 0.71) * 0.1234567 * (i % 2 ? -1.0 : 1.0));
}

static float bf16_round(float x) {
    uint32_t b;
    memcpy(&b, &x, 4);
    b += 0x7fffu + ((b >> 16) & 1u);
    b &= 0xffff0000u;
    memcpy(&x, &b, 4);
    return x;
}
static float rnd(float x, shs_dtype_t dt) { return dt == SHS_BF16 ? bf16_round(x) : x; }

/* The reduced gradient element i: N ranks in shard groups of G (G = N:
 * one group), reduce dtype dt, DeepSpeed's averaging (prescale, or
 * predivide f; both off: NCCL's AVG, 1/N rounded to dt on each input). */
static float expected(int N, int G, shs_dtype_t dt, int prescale, double f, size_t i) {
    float x[PG_MAX_RANKS];
    int averaging = prescale || (f != 0 && f != 1);
    float pre = prescale ? (float)(1.0 / N) : averaging ? (float)(1.0 / f) : rnd((float)(1.0 / N), dt);
    for (int r = 0; r < N; r++) {
        float g = rnd(grad_of(r, i, 1), dt); /* carried in the reduce dtype */
        x[r] = rnd(g * pre, dt);
    }
    float total = 0;
    for (int grp = 0; grp < N / G; grp++) {
        float s = x[grp * G];
        for (int r = 1; r < G; r++) s = rnd(s + x[grp * G + r], dt);
        if (!averaging && G < N) s = rnd(s * rnd((float)(1.0 / (N / G)), dt), dt); /* HSDP's AVG over replicas */
        total = grp == 0 ? s : rnd(total + s, dt);
    }
    if (averaging && !prescale && f != N) total = rnd(total * (float)(f / N), dt);
    return total;
}

static void check_case(shs_strategy_kind_t kind, int N, int G, shs_dtype_t dt, int prescale, float f) {
    pg_world_t w = {.n = ELEMS, .grad = grad_of};
    w.sc = (shs_strategy_config_t){.kind = kind, .optim = shs_optim_default(SHS_OPTIM_SGD), .reduce_dtype = dt,
                                   .shard_group_size = G, .prescale_gradients = prescale,
                                   .gradient_predivide_factor = f};
    w.sc.optim.lr = 1.0f;
    pg_start(&w, N);
    pg_step(&w);
    float p[ELEMS];
    pg_params(&w, p);
    for (size_t i = 0; i < ELEMS; i++) {
        float want = -expected(N, G, dt, prescale, f, i);
        if (memcmp(&p[i], &want, 4) != 0)
            fail_msg("%s N=%d G=%d %s prescale %d f %g: element %zu %.9g, want %.9g", shs_strategy_name(kind), N, G,
                     shs_dtype_name(dt), prescale, (double)f, i, (double)p[i], (double)want);
    }
    pg_stop(&w);
}

static void test_reduced_gradient_closed_form(void **state) {
    (void)state;
    static const shs_strategy_kind_t kinds[] = {SHS_DDP, SHS_ZERO1, SHS_ZERO2, SHS_ZERO3, SHS_HYBRID_SHARD,
                                                SHS_HYBRID_SHARD_ZERO2};
    static const struct {
        int prescale;
        float f;
    } modes[] = {{0, 0}, {1, 0}, {0, 8}, {0, 3}, {0, 4}, {1, 8}, {0, 0.5f}};
    static const shs_dtype_t dts[] = {SHS_F32, SHS_BF16};
    for (int N = 3; N <= 4; N++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
                for (size_t d = 0; d < 2; d++) check_case(kinds[k], N, N, dts[d], modes[m].prescale, modes[m].f);
    /* hybrid sharding with two groups of two: the group's sum, then the replicas' */
    for (size_t d = 0; d < 2; d++) {
        check_case(SHS_HYBRID_SHARD, 4, 2, dts[d], 0, 8);
        check_case(SHS_HYBRID_SHARD, 4, 2, dts[d], 1, 0);
    }
}

/* The averaging changes bits where it should: prescale's f32 1/3 against
 * NCCL's bf16-rounded 1/3 under a bf16 reduction, and f = 8 against the
 * plain mean in f32 (so the tests above could not pass on the default path). */
static void test_modes_differ(void **state) {
    (void)state;
    int differ_prescale = 0, differ_predivide = 0;
    for (size_t i = 0; i < ELEMS; i++) {
        differ_prescale |= expected(3, 3, SHS_BF16, 1, 0, i) != expected(3, 3, SHS_BF16, 0, 0, i);
        differ_predivide |= expected(3, 3, SHS_F32, 0, 8, i) != expected(3, 3, SHS_F32, 0, 0, i);
    }
    assert_true(differ_prescale && differ_predivide);
}

/* A trained run: ZeRO-1/2/3 equal DDP bit for bit (losses, every parameter
 * after every step) with DeepSpeed's averaging, in f32 and in bf16. */
static void test_stages_match_ddp(void **state) {
    (void)state;
    static const struct {
        int prescale;
        float f;
        shs_dtype_t param;
    } modes[] = {{0, 8, SHS_F32}, {1, 0, SHS_BF16}, {0, 2, SHS_BF16}};
    for (size_t m = 0; m < 3; m++) {
        shs_train_config_t cfg = test_small_config(3, 2);
        cfg.strategy.prescale_gradients = modes[m].prescale;
        cfg.strategy.gradient_predivide_factor = modes[m].f;
        cfg.strategy.param_dtype = modes[m].param;
        cfg.strategy.kind = SHS_DDP;
        run_record_t ddp = {0};
        record_run(&cfg, &test_corpus, 3, &ddp);
        for (int k = SHS_ZERO1; k <= SHS_ZERO3; k++) {
            cfg.strategy.kind = (shs_strategy_kind_t)k;
            run_record_t z = {0};
            record_run(&cfg, &test_corpus, 3, &z);
            assert_same_run(&ddp, &z);
            free_record(&z);
        }
        /* and the averaging is not the default's: another trajectory */
        cfg.strategy.kind = SHS_DDP;
        cfg.strategy.prescale_gradients = 0;
        cfg.strategy.gradient_predivide_factor = 0;
        run_record_t plain = {0};
        record_run(&cfg, &test_corpus, 3, &plain);
        assert_memory_not_equal(plain.snap[2], ddp.snap[2], ddp.len * sizeof(float));
        free_record(&plain);
        free_record(&ddp);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduced_gradient_closed_form),
        cmocka_unit_test(test_modes_differ),
        cmocka_unit_test(test_stages_match_ddp),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
