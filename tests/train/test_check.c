/* test_check.c - the --check ddp verdict as a library object (check.h),
 * without the command line: a ZeRO run that matches DDP gives SHS_OK with
 * the same loss bits; one flipped bit of one parameter gives SHS_NOT_EQUAL
 * naming the step, the unit, the tensor by its layout name and the element
 * (ZeRO-3: in the owner's shard; ZeRO-2: in the last rank's replica); the
 * inexact-by-design modes are named and report their drift. Expected tensor
 * names and indices follow GPT-2's parameter order (ln_1.weight, ln_1.bias,
 * attn.c_attn.weight, ...), not the layout code. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/check.h"

#define C 16 /* channels of the test model */

static shs_corpus_t corpus;

static shs_train_config_t small_config(shs_strategy_kind_t kind, int world) {
    shs_train_config_t cfg = shs_train_default_config();
    cfg.model = (shs_gpt_config_t){.num_layers = 1, .num_heads = 2, .channels = C, .context = 16};
    cfg.world_size = world;
    cfg.micro_batch = 2;
    cfg.strategy.kind = kind;
    cfg.timeout_ms = 20000;
    return cfg;
}

typedef struct {
    shs_trainer_t *run;
    shs_checker_t *ck;
} pair_t;

static pair_t start(const shs_train_config_t *cfg) {
    pair_t p;
    if (shs_trainer_create(&p.run, cfg, &corpus) != SHS_OK) fail_msg("trainer: %s", shs_last_error());
    if (shs_checker_create(&p.ck, cfg, &corpus, NULL, NULL) != SHS_OK) fail_msg("checker: %s", shs_last_error());
    return p;
}

static void stop(pair_t *p) {
    shs_checker_destroy(p->ck);
    shs_trainer_destroy(p->run);
}

/* One step of the run; with flip_index >= 0, one bit of element flip_index
 * of unit 1 (block0) is flipped before the check. */
static shs_status_t step(pair_t *p, long flip_index, shs_check_step_t *cs, float *loss) {
    assert_int_equal(shs_trainer_step(p->run, loss), SHS_OK);
    if (flip_index >= 0) assert_int_equal(shs_trainer_flip_param_bit(p->run, 1, (size_t)flip_index), SHS_OK);
    return shs_checker_step(p->ck, p->run, *loss, cs);
}

static void test_matching_run_is_ok(void **state) {
    (void)state;
    static const shs_strategy_kind_t kinds[] = {SHS_ZERO1, SHS_ZERO2, SHS_ZERO3};
    for (int k = 0; k < 3; k++) {
        shs_train_config_t cfg = small_config(kinds[k], 3);
        pair_t p = start(&cfg);
        assert_null(shs_checker_inexact_reason(p.ck));
        for (int s = 0; s < 2; s++) {
            shs_check_step_t cs;
            float loss;
            shs_status_t st = step(&p, -1, &cs, &loss);
            if (st != SHS_OK) fail_msg("%s step %d: %s", shs_strategy_name(kinds[k]), s + 1, shs_last_error());
            assert_int_equal(cs.differs, SHS_CHECK_SAME);
            assert_memory_equal(&loss, &cs.ref_loss, sizeof loss);
            assert_true(cs.drift.max_abs == 0 && cs.worst.max_abs == 0);
        }
        stop(&p);
    }
}

/* The two values' bits in "(bits 0xA, 0xB)" differ in the lowest bit only. */
static void assert_one_bit_apart(const char *msg) {
    const char *b = strstr(msg, "(bits 0x");
    if (!b) fail_msg("no bits in: %s", msg);
    unsigned x, y;
    if (sscanf(b, "(bits 0x%x, 0x%x)", &x, &y) != 2) fail_msg("cannot read the bits of: %s", msg);
    assert_int_equal(x ^ y, 1);
}

static void test_flipped_parameter_is_named(void **state) {
    (void)state;
    /* block0: ln_1.weight (C), ln_1.bias (C), then attn.c_attn.weight (3C x C):
     * unit element 2C + C + 5 is c_attn.weight element C + 5, row 1, col 5 */
    const long flip = 2 * C + C + 5;
    shs_train_config_t cfg = small_config(SHS_ZERO3, 3);
    pair_t p = start(&cfg);
    shs_check_step_t cs;
    float loss;
    assert_int_equal(step(&p, -1, &cs, &loss), SHS_OK);
    assert_int_equal(step(&p, flip, &cs, &loss), SHS_NOT_EQUAL);
    assert_int_equal(cs.differs, SHS_CHECK_PARAMS);
    const char *e = shs_last_error();
    char want[160];
    snprintf(want, sizeof want, "step 2: first difference in unit block0, tensor h.0.attn.c_attn.weight, element %d "
             "(row 1, col 5): ", C + 5);
    if (strncmp(e, want, strlen(want)) != 0) fail_msg("want '%s...', got '%s'", want, e);
    assert_non_null(strstr(e, "(zero3) != "));
    assert_one_bit_apart(e);
    stop(&p);
}

static void test_flipped_replica_is_named(void **state) {
    (void)state;
    shs_train_config_t cfg = small_config(SHS_ZERO2, 3);
    pair_t p = start(&cfg);
    shs_check_step_t cs;
    float loss;
    assert_int_equal(step(&p, 2 * C + 7, &cs, &loss), SHS_NOT_EQUAL);
    assert_int_equal(cs.differs, SHS_CHECK_REPLICAS);
    const char *want = "step 1: in the zero2 run, rank 2's copy of unit block0, tensor h.0.attn.c_attn.weight, "
                       "element 7 differs from the shard owner's";
    if (strcmp(shs_last_error(), want) != 0) fail_msg("want '%s', got '%s'", want, shs_last_error());
    stop(&p);
}

static void test_inexact_modes(void **state) {
    (void)state;
    shs_train_config_t cfg = small_config(SHS_ZERO3, 3);
    cfg.reduce_order = SHS_REDUCE_ORDER_RING;
    assert_string_equal(shs_check_inexact_reason(&cfg), "reduce order ring");
    cfg = small_config(SHS_HYBRID_SHARD, 4);
    cfg.strategy.shard_group_size = 2;
    assert_string_equal(shs_check_inexact_reason(&cfg), "hybrid sharding (a sum of group sums)");
    cfg.strategy.shard_group_size = 4; /* G = N: plain ZeRO-3 sharding */
    assert_null(shs_check_inexact_reason(&cfg));
    cfg.strategy.shard_group_size = 1; /* G = 1: DDP with replicas */
    assert_null(shs_check_inexact_reason(&cfg));

    /* ring order at N=3 is not DDP's rank order: drift, not SHS_NOT_EQUAL */
    cfg = small_config(SHS_ZERO3, 3);
    cfg.reduce_order = SHS_REDUCE_ORDER_RING;
    pair_t p = start(&cfg);
    double worst = 0;
    for (int s = 0; s < 2; s++) {
        shs_check_step_t cs;
        float loss;
        if (step(&p, -1, &cs, &loss) != SHS_OK) fail_msg("step %d: %s", s + 1, shs_last_error());
        assert_true(cs.drift.loss == (double)loss - (double)cs.ref_loss);
        worst = fmax(worst, cs.drift.max_abs);
        assert_true(cs.worst.max_abs == worst);
    }
    if (!(worst > 0 && worst < 1e-5)) fail_msg("N=3 ring: drift %g is not at rounding level", worst);
    stop(&p);
}

int main(void) {
    shs_corpus_builtin(&corpus);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matching_run_is_ok),
        cmocka_unit_test(test_flipped_parameter_is_named),
        cmocka_unit_test(test_flipped_replica_is_named),
        cmocka_unit_test(test_inexact_modes),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    shs_corpus_free(&corpus);
    return rc;
}
