/* test_optim_bias_correction.c - AdamW with and without bias correction
 * (optim.h no_bias_correction: DeepSpeed's FusedAdam / DeepSpeedCPUAdam
 * bias_correction false) against the closed form.
 *
 * Independent reference: Adam (Kingma & Ba 2015, Algorithm 1) with
 * decoupled decay (Loshchilov & Hutter 2019) from zero state, written here
 * in f64: m_1 = (1 - b1) g, v_1 = (1 - b2) g^2; with bias correction the
 * step is lr (m_1 / (1 - b1)) / (sqrt(v_1 / (1 - b2)) + eps) = lr g / (|g| +
 * eps); without it lr m_1 / (sqrt(v_1) + eps), about sqrt(1 - b2) / (1 - b1)
 * = 0.316 of the first for the defaults; step 2 likewise with
 * 1 - b^2. The kernel computes in f32, so the comparison allows 4 ulp-sized
 * relative error; the two forms differ by far more.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardsim/device.h"
#include "shardsim/optim.h"

static double adam_param_after(int steps, int bias_correction, double g, double lr, double b1, double b2,
                               double eps, double wd) {
    double p = 1.0, m = 0, v = 0;
    for (int t = 1; t <= steps; t++) {
        p *= 1 - lr * wd;
        m = b1 * m + (1 - b1) * g;
        v = b2 * v + (1 - b2) * g * g;
        double bc1 = bias_correction ? 1 - pow(b1, t) : 1, bc2 = bias_correction ? 1 - pow(b2, t) : 1;
        p -= lr * (m / bc1) / (sqrt(v / bc2) + eps);
    }
    return p;
}

static void test_bias_correction_off(void **state) {
    (void)state;
    shs_device_t *dev;
    assert_int_equal(shs_device_create_cpu(&dev, 0, SIZE_MAX, 1), SHS_OK);
    static const float grads[] = {0.5f, -2.0f, 1e-3f, 3.0f};
    for (int bc = 0; bc < 2; bc++) {
        shs_optim_config_t o = shs_optim_default(SHS_OPTIM_ADAMW);
        o.lr = 0.01f;
        o.no_bias_correction = !bc;
        float p[4] = {1, 1, 1, 1}, st[8] = {0};
        for (long step = 1; step <= 2; step++) shs_optim_step(dev, &o, step, p, grads, st, 4);
        for (int i = 0; i < 4; i++) {
            double want = adam_param_after(2, bc, grads[i], o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
            double other = adam_param_after(2, !bc, grads[i], o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
            if (fabs(p[i] - want) > 4 * 1.2e-7 * fabs(want))
                fail_msg("bias correction %d, g %g: %.9g, want %.9g", bc, (double)grads[i], (double)p[i], want);
            assert_true(fabs(want - other) > 1e-4); /* the two forms are far apart */
        }
    }
    shs_device_destroy(dev);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bias_correction_off)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
