/* test_memory_timeline.c - train --memory-timeline (memory_timeline.h): rank 0's device
 * memory cut at every phase of a real CPU step. The phases follow the GPT's
 * unit order, and the segments' highest total equals the device's own peak
 * (the accounting is the independent reference). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/train.h"
#include "harness.h"

static void check(shs_strategy_kind_t kind) {
    shs_train_config_t cfg = shs_train_default_config();
    cfg.model = (shs_gpt_config_t){.num_layers = 3, .num_heads = 2, .channels = 8, .context = 8};
    cfg.world_size = 2;
    cfg.micro_batch = 2;
    cfg.strategy.kind = kind;
    cfg.memory_timeline = 1;
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
    float loss;
    for (int s = 0; s < 2; s++) assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
    int n;
    const shs_step_segment_t *g = shs_trainer_timeline(t, &n);
    /* forward: embed, block0..2, lnf, embed again (the tied head); backward:
     * embed (head), lnf, block2..0, embed (lookup); optimizer; loss */
    static const char *const want[] = {"fwd embed", "fwd block0", "fwd block1", "fwd block2", "fwd lnf",
                                       "fwd embed", "bwd embed",  "bwd lnf",    "bwd block2", "bwd block1",
                                       "bwd block0", "bwd embed", "optim",      "loss"};
    assert_int_equal(n, 14);
    for (int i = 0; i < n; i++) assert_string_equal(g[i].label, want[i]);
    shs_mem_stats_t m;
    shs_trainer_mem_stats(t, 0, &m);
    size_t top = 0, end = 0;
    for (int i = 0; i < n; i++)
        if (g[i].peak_total > top) top = g[i].peak_total;
    for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) end += g[n - 1].mem_end[c];
    assert_int_equal(top, m.total_peak);      /* the step holds the run's peak */
    assert_int_equal(end, m.total_current);   /* nothing live changes after the loss */
    shs_trainer_destroy(t);
}

static void test_memory_timeline_ddp(void **state) { check(SHS_DDP); }
static void test_memory_timeline_zero3(void **state) { check(SHS_ZERO3); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_timeline_ddp),
        cmocka_unit_test(test_memory_timeline_zero3),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
