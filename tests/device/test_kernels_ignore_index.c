/* test_kernels_ignore_index.c - softmax cross-entropy with ignored targets
 * (SHS_IGNORE_INDEX, torch's ignore_index=-100) on the CPU backend, and
 * which backends say they take them (SHS_KERNELS_IGNORE_INDEX).
 * Expected values: an ignored row's loss and gradient are 0 by definition;
 * every other row must be bit-identical to the same kernel run with all
 * targets real, and probs are computed for every row. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shardsim/device.h"
#include "shardsim/model.h"

#include "kernel_checks.h"

enum { BT = 7, V = 13 };

static void test_ignored_rows(void **state) {
    shs_device_t *d = new_dev(2);
    seed(31);
    float *logits = hf(BT * V);
    fill(logits, BT * V, -4, 4);
    const int32_t real[BT] = {0, 12, 5, 3, 1, 7, 9};
    int32_t masked[BT];
    memcpy(masked, real, sizeof masked);
    masked[1] = masked[4] = masked[6] = SHS_IGNORE_INDEX;
    float *d_logits = dput(d, logits, BT * V);
    float *d_probs_a = dnew(d, BT * V), *d_probs_b = dnew(d, BT * V);
    float *d_loss_a = dnew(d, BT), *d_loss_b = dnew(d, BT);
    int32_t *d_real = dput_i32(d, real, BT), *d_masked = dput_i32(d, masked, BT);

    shs_softmax_xent_forward(d, d_loss_a, d_probs_a, d_logits, d_real, BT, V);
    shs_softmax_xent_forward(d, d_loss_b, d_probs_b, d_logits, d_masked, BT, V);
    float *la = fetch(d, d_loss_a, BT), *lb = fetch(d, d_loss_b, BT);
    float *pa = fetch(d, d_probs_a, BT * V), *pb = fetch(d, d_probs_b, BT * V);
    assert_memory_equal(pa, pb, sizeof(float) * BT * V); /* probs of ignored rows too */
    for (int r = 0; r < BT; r++) {
        if (masked[r] == SHS_IGNORE_INDEX) {
            assert_true(lb[r] == 0.0f && !signbit(lb[r]));
        } else {
            assert_memory_equal(&la[r], &lb[r], sizeof(float));
            assert_true(isfinite(lb[r]) && lb[r] > 0.0f);
        }
    }

    float dloss = 0.37f, *nan = hf(BT * V);
    for (int i = 0; i < BT * V; i++) nan[i] = NAN; /* backward must overwrite every element */
    float *d_dl_a = dnew(d, BT * V), *d_dl_b = dnew(d, BT * V);
    put(d, d_dl_a, nan, sizeof(float) * BT * V);
    put(d, d_dl_b, nan, sizeof(float) * BT * V);
    shs_softmax_xent_backward(d, d_dl_a, d_probs_a, d_real, dloss, BT, V);
    shs_softmax_xent_backward(d, d_dl_b, d_probs_b, d_masked, dloss, BT, V);
    float *ga = fetch(d, d_dl_a, BT * V), *gb = fetch(d, d_dl_b, BT * V);
    float zeros[V] = {0};
    for (int r = 0; r < BT; r++) {
        if (masked[r] == SHS_IGNORE_INDEX) assert_memory_equal(gb + r * V, zeros, sizeof zeros);
        else assert_memory_equal(gb + r * V, ga + r * V, sizeof zeros);
    }
}

/* Every row ignored: all losses and the whole gradient are 0. */
static void test_all_ignored(void **state) {
    shs_device_t *d = new_dev(1);
    seed(32);
    float *logits = hf(BT * V);
    fill(logits, BT * V, -4, 4);
    int32_t tg[BT];
    for (int r = 0; r < BT; r++) tg[r] = SHS_IGNORE_INDEX;
    float *d_logits = dput(d, logits, BT * V), *d_probs = dnew(d, BT * V), *d_loss = dnew(d, BT);
    int32_t *d_tg = dput_i32(d, tg, BT);
    shs_softmax_xent_forward(d, d_loss, d_probs, d_logits, d_tg, BT, V);
    float zeros[BT * V];
    memset(zeros, 0, sizeof zeros);
    assert_memory_equal(fetch(d, d_loss, BT), zeros, sizeof(float) * BT);
    float *d_dl = dnew(d, BT * V);
    shs_softmax_xent_backward(d, d_dl, d_probs, d_tg, 1.0f, BT, V);
    assert_memory_equal(fetch(d, d_dl, BT * V), zeros, sizeof zeros);
}

static void test_supports(void **state) {
    shs_device_t *cpu = new_dev(1), *meta = NULL;
    assert_int_equal(shs_device_create_meta(&meta, 0, SIZE_MAX), SHS_OK);
    assert_true(shs_device_supports(cpu, SHS_KERNELS_IGNORE_INDEX));
    assert_true(shs_device_supports(meta, SHS_KERNELS_IGNORE_INDEX));
    assert_true(shs_device_supports(meta, SHS_KERNELS_IGNORE_INDEX | SHS_KERNELS_ROUND));
    shs_device_destroy(meta);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_ignored_rows, teardown),
        cmocka_unit_test_teardown(test_all_ignored, teardown),
        cmocka_unit_test_teardown(test_supports, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
