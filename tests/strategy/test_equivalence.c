/* test_equivalence.c - the promise of shardsim: ZeRO-1, ZeRO-2 and ZeRO-3
 * give losses and parameters bit-identical (memcmp) to DDP on the same data,
 * step after step, for world sizes 1, 2, 3, 4, 5, 8, on the real corpus.
 * Independent checks of DDP itself: data parallelism at (N ranks x B) sees
 * the same global batch as (1 rank x N*B), so their losses agree to rounding. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/shard.h"
#include "shardsim/train.h"
#include "harness.h"
#include "run_record.h"

#define STEPS 3

static void check_matrix(shs_gpt_config_t model, int micro_batch, shs_optim_kind_t opt) {
    static const int worlds[] = {1, 2, 3, 4, 5, 8};
    for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++) {
        shs_train_config_t cfg = shs_train_default_config();
        cfg.model = model;
        cfg.world_size = worlds[w];
        cfg.micro_batch = micro_batch;
        cfg.strategy.optim = shs_optim_default(opt);
        if (opt == SHS_OPTIM_SGD) {
            cfg.strategy.optim.lr = 0.05f;
            cfg.strategy.optim.momentum = 0.9f;
            cfg.strategy.optim.weight_decay = 0.01f;
        }
        cfg.timeout_ms = 20000;
        cfg.strategy.bucket_bytes = 4096; /* several DDP buckets even for tiny models */
        cfg.strategy.kind = SHS_DDP;
        run_record_t ddp = {0};
        record_run(&cfg, &test_corpus, STEPS, &ddp);
        for (int k = SHS_ZERO1; k <= SHS_ZERO3; k++) {
            cfg.strategy.kind = (shs_strategy_kind_t)k;
            run_record_t z = {0};
            record_run(&cfg, &test_corpus, STEPS, &z);
            assert_int_equal(z.len, ddp.len);
            assert_same_run(&ddp, &z);
            free_record(&z);
        }
        /* training moved the parameters: the comparison was not vacuous */
        assert_memory_not_equal(ddp.snap[0], ddp.snap[STEPS - 1], ddp.len * sizeof(float));
        assert_true(ddp.loss[STEPS - 1] < ddp.loss[0]);
        free_record(&ddp);
    }
}

/* Unit sizes: embed 7*(256+13) = 1883 = 7*269, block 12*49 + 13*7 = 679 = 7*97:
 * neither divisible by 2, 3, 4, 5 or 8, so every sharded stage pads them
 * (the final LayerNorm unit has 2C = 14 elements, always even). */
static void test_equivalence_padded_units_adamw(void **state) {
    (void)state;
    shs_gpt_config_t m = {.num_layers = 2, .num_heads = 7, .channels = 7, .context = 13};
    shs_layout_t lo;
    assert_int_equal(shs_gpt_layout_create(&lo, &m), SHS_OK);
    assert_int_equal(lo.units[0].numel, 1883);
    assert_int_equal(lo.units[1].numel, 679);
    shs_layout_free(&lo);
    check_matrix(m, 2, SHS_OPTIM_ADAMW);
}

static void test_equivalence_padded_units_sgd_momentum(void **state) {
    (void)state;
    shs_gpt_config_t m = {.num_layers = 2, .num_heads = 7, .channels = 7, .context = 13};
    check_matrix(m, 2, SHS_OPTIM_SGD);
}

static void test_equivalence_wider_model(void **state) {
    (void)state;
    shs_gpt_config_t m = {.num_layers = 2, .num_heads = 4, .channels = 32, .context = 24};
    check_matrix(m, 2, SHS_OPTIM_ADAMW);
}

/* DDP at N ranks x B sequences trains on the same global batch as one rank
 * with N*B sequences; only summation order differs. */
static void test_ddp_matches_single_rank_large_batch(void **state) {
    (void)state;
    shs_gpt_config_t m = {.num_layers = 2, .num_heads = 4, .channels = 16, .context = 16};
    shs_train_config_t cfg = shs_train_default_config();
    cfg.model = m;
    cfg.strategy.kind = SHS_DDP;
    cfg.world_size = 4;
    cfg.micro_batch = 1;
    run_record_t wide = {0}, single = {0};
    record_run(&cfg, &test_corpus, STEPS, &wide);
    cfg.world_size = 1;
    cfg.micro_batch = 4;
    record_run(&cfg, &test_corpus, STEPS, &single);
    for (int s = 0; s < STEPS; s++) {
        double a = wide.loss[s], b = single.loss[s];
        if (fabs(a - b) > 1e-5 * fabs(b)) fail_msg("step %d: loss %.9g (4x1) vs %.9g (1x4)", s, a, b);
    }
    free_record(&wide);
    free_record(&single);
}

/* A freshly initialized GPT predicts nearly uniformly over 256 bytes. */
static void test_initial_loss_near_log_vocab(void **state) {
    (void)state;
    shs_train_config_t cfg = shs_train_default_config();
    cfg.model = (shs_gpt_config_t){.num_layers = 2, .num_heads = 4, .channels = 32, .context = 32};
    cfg.world_size = 2;
    run_record_t r = {0};
    record_run(&cfg, &test_corpus, STEPS, &r);
    assert_true(fabs(r.loss[0] - log(256.0)) < 0.05);
    free_record(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_initial_loss_near_log_vocab),
        cmocka_unit_test(test_ddp_matches_single_rank_large_batch),
        cmocka_unit_test(test_equivalence_padded_units_adamw),
        cmocka_unit_test(test_equivalence_padded_units_sgd_momentum),
        cmocka_unit_test(test_equivalence_wider_model),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
