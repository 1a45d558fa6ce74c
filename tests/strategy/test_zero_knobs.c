/* test_zero_knobs.c - DeepSpeed's ZeRO granularity knobs (strategy.h
 * shs_zero_knobs_t): the same bits as DDP whatever they are, the
 * collectives they say (counted by a rule typed here from DeepSpeed's
 * stage3.py / stage_1_and_2.py / partitioned_param_coordinator.py, not read
 * from the strategy), and what the GPU ledger holds for them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "run_record.h"
#include "shardsim/shard.h"
#include "shardsim/train.h"

static shs_train_config_t small(int world) {
    shs_train_config_t c = test_small_config(world, 3);
    c.poison_freed = 1; /* a stale bucket would read NaN */
    return c;
}

/* Every knob, every stage it applies to, f32 and bf16, worlds that pad:
 * DDP's bits. */
static void test_knobs_match_ddp(void **state) {
    (void)state;
    static const shs_zero_knobs_t knobs[] = {
        {.reduce_bucket = 3000, .contiguous_gradients = 1},
        {.reduce_bucket = 3000, .contiguous_gradients = 0},
        {.reduce_bucket = 1, .contiguous_gradients = 1}, /* every unit larger than the bucket: reduced alone */
        {.reduce_bucket = 100000, .contiguous_gradients = 1, .overlap_comm = 1, .allgather_bucket = 500},
        {.prefetch_bucket = 2500, .max_live = 6000, .max_reuse = 2000},
        {.prefetch_bucket = 100000, .max_reuse = 100000},
    };
    static const int worlds[] = {2, 3, 5};
    for (int w = 0; w < (test_full_sweep() ? 3 : 2); w++)
        for (int prec = 0; prec < 2; prec++) {
            shs_train_config_t cfg = small(worlds[w]);
            cfg.grad_accum = 2;
            cfg.strategy.param_dtype = prec ? SHS_BF16 : SHS_F32;
            cfg.strategy.kind = SHS_DDP;
            run_record_t ddp;
            record_run(&cfg, &test_corpus, 2, &ddp);
            for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++)
                for (int kind = SHS_ZERO1; kind <= SHS_ZERO3; kind++) {
                    cfg.strategy.kind = (shs_strategy_kind_t)kind;
                    cfg.strategy.zero = knobs[k];
                    run_record_t z;
                    record_run(&cfg, &test_corpus, 2, &z);
                    assert_same_run(&ddp, &z);
                    free_record(&z);
                }
            free_record(&ddp);
        }
}

/* DeepSpeed's bucket rule, typed from stage3.py / stage_1_and_2.py
 * (reduce_independent_p_g_buckets_and_remove_grads): a gradient that would
 * take the bucket past reduce_bucket_size first flushes it; one larger than
 * the bucket is reduced on its own. Units finish backward in reverse order. */
static int expected_rs_calls(const shs_layout_t *lo, int N, size_t cap) {
    int calls = 0;
    size_t in = 0;
    for (int u = lo->num_units - 1; u >= 0; u--) {
        size_t n = shs_padded_numel(lo->units[u].numel, N, 1);
        if (in && in + n > cap) calls++, in = 0;
        if (n > cap) calls++;
        else in += n;
    }
    return calls + (in > 0);
}

/* The reduce bucket's calls and bytes; the ipg buffer in the GPU ledger;
 * ZeRO-1/2's re-gather as one all-gather of the partition. */
static void test_bucket_calls_and_ipg(void **state) {
    (void)state;
    const int N = 3;
    shs_train_config_t cfg = small(N);
    shs_layout_t lo;
    assert_int_equal(shs_gpt_layout_create(&lo, &cfg.model), SHS_OK);
    static const size_t caps[] = {1, 1200, 2500, 5000, 100000};
    uint64_t rs_bytes = 0;
    for (int k = 0; k < 5; k++) {
        cfg.strategy.kind = SHS_ZERO2;
        cfg.strategy.zero = (shs_zero_knobs_t){.reduce_bucket = caps[k], .contiguous_gradients = 1};
        shs_trainer_t *t;
        assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
        float loss;
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        shs_comm_stats_t cs;
        shs_trainer_comm_stats(t, 0, &cs);
        int want = expected_rs_calls(&lo, N, caps[k]);
        printf("  reduce_bucket_size %6zu: %llu reduce-scatters (DeepSpeed's rule: %d)\n", caps[k],
               (unsigned long long)cs.calls[SHS_OP_REDUCE_SCATTER], want);
        assert_int_equal(cs.calls[SHS_OP_REDUCE_SCATTER], (uint64_t)want);
        if (k == 0) rs_bytes = cs.bytes[SHS_OP_REDUCE_SCATTER];
        assert_int_equal(cs.bytes[SHS_OP_REDUCE_SCATTER], rs_bytes); /* the same bytes in other calls */
        /* the GPU ledger holds DeepSpeed's ipg buffer of reduce_bucket_size f32 elements throughout */
        shs_gpu_mem_stats_t g;
        shs_trainer_gpu_mem_stats(t, 0, &g);
        assert_true(g.alloc.current[SHS_MEM_COMM] >= caps[k] * 4);
        shs_trainer_destroy(t);
    }
    /* ZeRO-1/2 in bf16 re-gather the replica after the step: one all-gather per unit, or with
     * allgather_bucket_size (DeepSpeed on a torch with all_gather_into_tensor) one of the whole partition */
    uint64_t ag[2], agb[2];
    for (int k = 0; k < 2; k++) {
        cfg.strategy.kind = SHS_ZERO2;
        cfg.strategy.param_dtype = SHS_BF16;
        cfg.strategy.zero = (shs_zero_knobs_t){.allgather_bucket = k ? 500 : 0};
        shs_trainer_t *t;
        assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
        float loss;
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK); /* the first gathers each replica before use */
        shs_comm_stats_t c0, c1;
        shs_trainer_comm_stats(t, 0, &c0);
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        shs_trainer_comm_stats(t, 0, &c1);
        ag[k] = c1.calls[SHS_OP_ALL_GATHER] - c0.calls[SHS_OP_ALL_GATHER];
        agb[k] = c1.bytes[SHS_OP_ALL_GATHER] - c0.bytes[SHS_OP_ALL_GATHER];
        shs_trainer_destroy(t);
    }
    assert_int_equal(ag[0], (uint64_t)lo.num_units);
    assert_int_equal(ag[1], 1);
    assert_int_equal(agb[0], agb[1]);
    shs_layout_free(&lo);
}

/* ZeRO-3's prefetch budget: with a bucket that holds every unit, the
 * second step's forward gathers everything ahead while the first unit is
 * acquired (no gather waits for its unit), so the gathered peak is the
 * whole model; with max_live as small as one unit, nothing is prefetched;
 * with a reuse distance as large as the model, every unit stays gathered
 * from its forward to its backward: no backward all-gather. */
static void test_prefetch_and_reuse(void **state) {
    (void)state;
    shs_train_config_t cfg = small(2);
    cfg.strategy.kind = SHS_ZERO3;
    cfg.strategy.backward_prefetch = SHS_PREFETCH_NONE;
    shs_layout_t lo;
    assert_int_equal(shs_gpt_layout_create(&lo, &cfg.model), SHS_OK);
    size_t total = 0, largest = 0;
    for (int u = 0; u < lo.num_units; u++) {
        size_t n = shs_padded_numel(lo.units[u].numel, 2, 1);
        total += n;
        largest = n > largest ? n : largest;
    }
    static const shs_zero_knobs_t knobs[] = {
        {0}, {.prefetch_bucket = 1000000}, {.prefetch_bucket = 1000000, .max_live = 1}, {.max_reuse = 1000000}};
    size_t peak[4];
    uint64_t gathers[4];
    for (int k = 0; k < 4; k++) {
        cfg.strategy.zero = knobs[k];
        shs_trainer_t *t;
        assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
        float loss;
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        shs_comm_stats_t c0, c1;
        shs_trainer_comm_stats(t, 0, &c0);
        shs_mem_stats_t m;
        shs_trainer_mem_stats(t, 0, &m);
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        shs_trainer_comm_stats(t, 0, &c1);
        gathers[k] = c1.calls[SHS_OP_ALL_GATHER] - c0.calls[SHS_OP_ALL_GATHER];
        shs_mem_stats_t m2;
        shs_trainer_mem_stats(t, 0, &m2);
        peak[k] = m2.peak[SHS_MEM_COMM];
        shs_trainer_destroy(t);
    }
    /* all units gathered at once: the f32 gathered copies of the whole model, at least */
    assert_true(peak[1] >= total * 4);
    assert_true(peak[0] < total * 4);
    assert_int_equal(gathers[1], gathers[0]); /* prefetched, not more */
    assert_true(peak[2] <= peak[0]);           /* max_live holds nothing ahead */
    /* kept from forward to backward: the backward gathers none (the forward's L + 2, and the tied head's) */
    assert_int_equal(gathers[3], (uint64_t)lo.num_units);
    assert_true(gathers[0] > gathers[3]);
    (void)largest;
    shs_layout_free(&lo);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_knobs_match_ddp),
        cmocka_unit_test(test_bucket_calls_and_ipg),
        cmocka_unit_test(test_prefetch_and_reuse),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
