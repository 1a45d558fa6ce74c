/* features_run.h - what the training-feature tests share: the world sizes'
 * count, the full sweep switch (make test-full), a small 2-block
 * configuration, and every ZeRO stage checked against DDP bit for bit under
 * one configuration. Include after <cmocka.h>. Not a test; included by the
 * test_features_*.c programs only. */
#ifndef SHARDSIM_TEST_FEATURES_RUN_H
#define SHARDSIM_TEST_FEATURES_RUN_H

#include <string.h>

#include "shardsim/train.h"
#include "harness.h"
#include "run_record.h"

#define NWORLDS 5 /* test_worlds */

/* `make test-full` (SHS_TEST_FULL=1): every variant at every world size
 * (run_record.h); `make test` runs a representative part. */
static inline int full_sweep(void) { return test_full_sweep(); }

/* test_small_config with 2 blocks. */
static inline shs_train_config_t small_config(int world) { return test_small_config(world, 2); }

/* Every ZeRO stage against DDP with the same config. */
static inline void check_stages_match_ddp(shs_train_config_t cfg, int steps) {
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

#endif
