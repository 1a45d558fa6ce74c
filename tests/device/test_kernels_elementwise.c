/* test_kernels_elementwise.c - the CPU backend's elementwise kernels,
 * through the public device API: elementwise ops, softmax cross-entropy
 * (forward and backward against finite differences), sums, casts and the
 * optimizers (AdamW, SGD) against hand-computed f64 steps.
 * Tolerances: test_kernels_matmul.c's header. */
#include <float.h>
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

#include "kernel_checks.h"

/* ---- elementwise ------------------------------------------------------------ */

static void test_elementwise(void **state) {
    shs_device_t *d = new_dev(1);
    seed(10);
    enum { N = 101 };
    float *a = hf(N), *b = hf(N), *want = hf(N);
    fill(a, N, -5, 5);
    fill(b, N, -5, 5);
    float *d_a = dput(d, a, N), *d_b = dput(d, b, N), *d_out = dnew(d, N);
    shs_residual_forward(d, d_out, d_a, d_b, N);
    for (int i = 0; i < N; i++) want[i] = (float)((double)a[i] + b[i]);
    check_bits("residual out", fetch(d, d_out, N), want, N);
    shs_residual_forward(d, d_a, d_a, d_b, N); /* out aliases a */
    check_bits("residual in place", fetch(d, d_a, N), want, N);
    put(d, d_a, a, sizeof(float) * N);
    shs_accumulate(d, d_a, d_b, N);
    check_bits("accumulate", fetch(d, d_a, N), want, N);
    shs_scale(d, d_b, 0.3f, N);
    for (int i = 0; i < N; i++) want[i] = (float)((double)b[i] * 0.3f);
    check_bits("scale", fetch(d, d_b, N), want, N);
}

/* ---- softmax cross-entropy --------------------------------------------------- */

static void test_softmax_xent(void **state) {
    shs_device_t *d = new_dev(1);
    seed(11);
    enum { BT = 6, V = 11 };
    float *logits = hf(BT * V);
    fill(logits, BT * V, -4, 4);
    int32_t targets[BT] = {0, 10, 5, 3, 1, 7};
    for (int v = 0; v < V; v++) logits[3 * V + v] = v == 3 ? 100.0f : v == 4 ? -100.0f : 0.0f; /* exp(100) overflows f32 */
    for (int v = 0; v < V; v++) logits[4 * V + v] = v == 1 ? -200.0f : 0.0f; /* p[target] underflows */
    float *d_logits = dput(d, logits, BT * V), *d_probs = dnew(d, BT * V), *d_losses = dnew(d, BT);
    int32_t *d_tg = dput_i32(d, targets, BT);
    shs_softmax_xent_forward(d, d_losses, d_probs, d_logits, d_tg, BT, V);
    float *probs = fetch(d, d_probs, BT * V), *losses = fetch(d, d_losses, BT);
    double *rp = hd(BT * V), *rl = hd(BT);
    for (int r = 0; r < BT; r++) {
        double mx = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, logits[r * V + v]);
        for (int v = 0; v < V; v++) s += exp(logits[r * V + v] - mx);
        for (int v = 0; v < V; v++) rp[r * V + v] = exp(logits[r * V + v] - mx) / s;
        rl[r] = log(s) - (logits[r * V + targets[r]] - mx);
    }
    check_close("softmax probs", probs, rp, NULL, BT * V, FWD_TOL);
    check_close("xent losses", losses, rl, NULL, BT, FWD_TOL);
    assert_true(fabs(losses[4] - (200.0 + log(10.0))) < 1e-3); /* finite although p[target] == 0 in f32 */

    /* backward overwrites dlogits: (probs - onehot) * dloss, two f32 roundings */
    float dloss = 1.0f / BT;
    float *d_dl = dnew(d, BT * V), *nan = hf(BT * V), *want = hf(BT * V);
    for (int i = 0; i < BT * V; i++) nan[i] = NAN;
    put(d, d_dl, nan, sizeof(float) * BT * V);
    shs_softmax_xent_backward(d, d_dl, d_probs, d_tg, dloss, BT, V);
    for (int r = 0; r < BT; r++)
        for (int v = 0; v < V; v++) want[r * V + v] = (probs[r * V + v] - (v == targets[r] ? 1.0f : 0.0f)) * dloss;
    check_bits("xent dlogits", fetch(d, d_dl, BT * V), want, BT * V);
}

typedef struct {
    shs_device_t *d;
    int BT, V;
    float dloss;
    float *logits;
    int32_t *d_tg;
    float *d_logits, *d_probs, *d_losses;
} xent_ctx_t;

static double xent_loss(void *p) {
    xent_ctx_t *x = p;
    put(x->d, x->d_logits, x->logits, sizeof(float) * x->BT * x->V);
    shs_softmax_xent_forward(x->d, x->d_losses, x->d_probs, x->d_logits, x->d_tg, x->BT, x->V);
    float losses[x->BT];
    get(x->d, losses, x->d_losses, sizeof losses);
    double L = 0;
    for (int i = 0; i < x->BT; i++) L += (double)losses[i] * x->dloss;
    return L;
}

static void test_softmax_xent_backward_fd(void **state) {
    shs_device_t *d = new_dev(1);
    seed(12);
    xent_ctx_t x = {.d = d, .BT = 10, .V = 11, .dloss = 0.7f};
    int32_t targets[10] = {0, 10, 5, 3, 1, 7, 7, 2, 9, 4};
    x.logits = hf(x.BT * x.V);
    fill(x.logits, x.BT * x.V, -3, 3);
    x.d_tg = dput_i32(d, targets, x.BT);
    x.d_logits = dnew(d, x.BT * x.V), x.d_probs = dnew(d, x.BT * x.V), x.d_losses = dnew(d, x.BT);
    float *d_dl = dnew(d, x.BT * x.V);
    xent_loss(&x);
    shs_softmax_xent_backward(d, d_dl, x.d_probs, x.d_tg, x.dloss, x.BT, x.V);
    check_fd("xent dlogits", xent_loss, &x, x.logits, x.BT * x.V, fetch(d, d_dl, x.BT * x.V));
}

/* ---- reductions -------------------------------------------------------------- */

static void test_sum(void **state) {
    shs_device_t *d = new_dev(4);
    seed(13);
    enum { N = 1000 };
    float *x = hf(N);
    fill(x, N, -1, 1);
    x[0] = 16777216.0f; /* 2^24: an f32 accumulator would absorb every later +-1 term */
    for (int i = 1; i < 200; i++) x[i] = 1.0f;
    float *d_x = dput(d, x, N), *d_s = dnew(d, 1);
    shs_sum(d, d_s, d_x, N);
    double s = 0;
    for (int i = 0; i < N; i++) s += x[i];
    float got, want = (float)s;
    get(d, &got, d_s, sizeof got);
    assert_memory_equal(&got, &want, sizeof got);
    assert_true(got >= 16777216.0f + 198.0f);
    shs_sum(d, d_s, d_x, 0);
    get(d, &got, d_s, sizeof got);
    assert_true(got == 0.0f);
}

/* ---- cast --------------------------------------------------------------------- */

static double f16_value(uint16_t h) { /* closed form, independent of dtype.c */
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

static void test_cast(void **state) {
    shs_device_t *d = new_dev(2);
    seed(14);
    enum { N = 512 };
    float *x = hf(N);
    for (int i = 0; i < N; i++) {
        uint32_t u = (uint32_t)next_u64();
        if ((u & 0x7f800000u) == 0x7f800000u) u &= 0xbfffffffu; /* keep finite */
        if (i % 2) u = (u & 0x807fffffu) | ((uint32_t)(100 + next_u64() % 60) << 23); /* near the f16 range */
        memcpy(&x[i], &u, 4);
    }
    x[0] = INFINITY, x[1] = -0.0f, x[2] = NAN, x[3] = 65520.0f, x[4] = 0x1p-25f;
    float *d_x = dput(d, x, N), *d_back = dnew(d, N);
    uint16_t *d_h = dalloc(d, 2 * N), *h = hbuf(2 * N);
    double *d_f64 = dalloc(d, 8 * N), *f64 = hd(N);

    /* f32 -> f16 / bf16 -> f32 equals the dtype.h conversions */
    static const shs_dtype_t half[2] = {SHS_F16, SHS_BF16};
    for (int k = 0; k < 2; k++) {
        shs_cast(d, d_h, half[k], d_x, SHS_F32, N);
        get(d, h, d_h, 2 * N);
        shs_cast(d, d_back, SHS_F32, d_h, half[k], N);
        float *back = fetch(d, d_back, N);
        for (int i = 0; i < N; i++) {
            uint16_t want = half[k] == SHS_F16 ? shs_f32_to_f16(x[i]) : shs_f32_to_bf16(x[i]);
            float wantf = half[k] == SHS_F16 ? shs_f16_to_f32(want) : shs_bf16_to_f32(want);
            if (h[i] != want) fail_msg("cast f32->%s [%d]: %#06x, want %#06x", shs_dtype_name(half[k]), i, h[i], want);
            assert_memory_equal(&back[i], &wantf, 4);
        }
    }
    /* f32 -> f64 is exact, f64 -> f32 restores it */
    shs_cast(d, d_f64, SHS_F64, d_x, SHS_F32, N);
    get(d, f64, d_f64, 8 * N);
    for (int i = 0; i < N; i++)
        if (!isnan(x[i])) assert_true(f64[i] == (double)x[i]);
    shs_cast(d, d_back, SHS_F32, d_f64, SHS_F64, N);
    float *back = fetch(d, d_back, N);
    for (int i = 0; i < N; i++)
        if (!isnan(x[i])) assert_memory_equal(&back[i], &x[i], 4);
    assert_true(isnan(back[2]));

    /* f16 <-> bf16 direct, and in place (same size, dst == src) */
    shs_cast(d, d_h, SHS_F16, d_x, SHS_F32, N);
    uint16_t *h16 = hbuf(2 * N);
    get(d, h16, d_h, 2 * N);
    shs_cast(d, d_h, SHS_BF16, d_h, SHS_F16, N);
    get(d, h, d_h, 2 * N);
    for (int i = 0; i < N; i++) assert_int_equal(h[i], shs_f32_to_bf16(shs_f16_to_f32(h16[i])));

    /* f64 -> 16-bit rounds once: values just above a tie must round up, which
     * going through f32 with nearest-even would lose (double rounding). */
    static const struct { double v; uint16_t f16, bf16; } once[] = {
        {1.0 + 0x1p-11 + 0x1p-40, 0x3c01, 0x3f80},
        {-(1.0 + 0x1p-11 + 0x1p-40), 0xbc01, 0xbf80},
        {1.0 + 0x1p-11, 0x3c00, 0x3f80},
        {1.0 + 0x1p-8 + 0x1p-40, 0x3c04, 0x3f81},
        {0x1p-25 + 0x1p-60, 0x0001, 0x3300},
        {65520.0 - 0x1p-30, 0x7bff, 0x4780},
        {65520.0, 0x7c00, 0x4780},
        {1e300, 0x7c00, 0x7f80},
        {-1e-300, 0x8000, 0x8000},
        {(double)FLT_MAX * 1.0000001, 0x7c00, 0x7f80},
    };
    enum { NO = sizeof once / sizeof once[0] };
    double vals[NO];
    for (int i = 0; i < NO; i++) vals[i] = once[i].v;
    put(d, d_f64, vals, sizeof vals);
    for (int k = 0; k < 2; k++) {
        shs_cast(d, d_h, half[k], d_f64, SHS_F64, NO);
        get(d, h, d_h, 2 * NO);
        for (int i = 0; i < NO; i++) {
            uint16_t want = k == 0 ? once[i].f16 : once[i].bf16;
            if (h[i] != want)
                fail_msg("cast f64 %.17g -> %s: %#06x, want %#06x", vals[i], shs_dtype_name(half[k]), h[i], want);
        }
    }
    /* random f64 near f16 ties: the result is the nearest f16 (ties to even) */
    for (int i = 0; i < N; i++) {
        uint16_t base = (uint16_t)(next_u64() % 0x7bff);
        double lo = f16_value(base), hi = f16_value((uint16_t)(base + 1)), mid = (lo + hi) / 2;
        int64_t off = (int64_t)(next_u64() % 5) - 2; /* -2..2 tiny steps around the tie */
        f64[i] = mid + (double)off * (hi - lo) * 0x1p-35;
    }
    put(d, d_f64, f64, 8 * N);
    shs_cast(d, d_h, SHS_F16, d_f64, SHS_F64, N);
    get(d, h, d_h, 2 * N);
    for (int i = 0; i < N; i++) {
        double v = f16_value(h[i]);
        double other = f16_value((uint16_t)(h[i] + (f64[i] > v ? 1 : -1)));
        double e1 = fabs(f64[i] - v), e2 = fabs(f64[i] - other);
        if (!(e1 < e2 || (e1 == e2 && (h[i] & 1) == 0)))
            fail_msg("cast f64 %.17g -> f16 %#06x (%.17g) is not the nearest-even", f64[i], h[i], v);
    }
}

/* ---- optimizers ----------------------------------------------------------------- */

static void test_adamw(void **state) {
    shs_device_t *d = new_dev(1);
    enum { N = 6 };
    float p0[N] = {0.5f, -1.25f, 2.0f, 0.0f, 0.75f, -0.3f};
    float g1[N] = {0.1f, -0.5f, 10.0f, 0.0f, 1e-6f, -2.0f};
    float g2[N] = {-0.2f, -0.4f, 3.0f, 0.0f, 2e-6f, 0.5f};
    float lr = 0.05f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    float *d_p = dput(d, p0, N), *d_g = dnew(d, N), *d_m = dnew(d, N), *d_v = dnew(d, N);
    zero(d, d_m, sizeof(float) * N);
    zero(d, d_v, sizeof(float) * N);
    double p[N], m[N] = {0}, v[N] = {0};
    for (int i = 0; i < N; i++) p[i] = p0[i];
    for (int step = 1; step <= 2; step++) {
        const float *g = step == 1 ? g1 : g2;
        shs_adamw_hparams_t hp = {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd,
                                  .bias_correction1 = (float)(1.0 - pow(b1, step)),
                                  .bias_correction2_sqrt = (float)sqrt(1.0 - pow(b2, step))};
        put(d, d_g, g, sizeof(float) * N);
        shs_adamw_update(d, d_p, d_g, d_m, d_v, N, &hp);
        /* torch.optim.AdamW, single tensor, in f64 */
        for (int i = 0; i < N; i++) {
            p[i] *= 1.0 - (double)lr * wd;
            m[i] = (double)b1 * m[i] + (1.0 - b1) * g[i];
            v[i] = (double)b2 * v[i] + (1.0 - b2) * g[i] * (double)g[i];
            double denom = sqrt(v[i]) / hp.bias_correction2_sqrt + eps;
            p[i] -= ((double)lr / hp.bias_correction1) * m[i] / denom;
        }
        float *gp = fetch(d, d_p, N), *gm = fetch(d, d_m, N), *gv = fetch(d, d_v, N);
        check_close("adamw param", gp, p, NULL, N, OPT_TOL);
        check_rel("adamw m", gm, m, N, OPT_TOL);
        check_rel("adamw v", gv, v, N, OPT_TOL);
        assert_true(gp[3] == 0.0f && gm[3] == 0.0f && gv[3] == 0.0f);
    }
    /* first step of Adam moves each param by about lr (sign of the gradient) */
    float *gp = fetch(d, d_p, N);
    assert_true(gp[2] < 2.0f - 0.05f);
}

static void test_sgd(void **state) {
    shs_device_t *d = new_dev(1);
    enum { N = 5 };
    float p0[N] = {0.5f, -1.25f, 2.0f, 0.0f, 3.0f};
    float g1[N] = {0.1f, -0.5f, 10.0f, 0.0f, -1.0f};
    float g2[N] = {-0.2f, -0.4f, 3.0f, 1.0f, 0.25f};
    float lr = 0.1f, mom = 0.9f, wd = 0.01f;
    for (int with_mom = 0; with_mom < 2; with_mom++) {
        float *d_p = dput(d, p0, N), *d_g = dnew(d, N), *d_buf = NULL;
        if (with_mom) {
            d_buf = dnew(d, N);
            zero(d, d_buf, sizeof(float) * N);
        }
        double p[N], buf[N] = {0};
        for (int i = 0; i < N; i++) p[i] = p0[i];
        for (int step = 1; step <= 2; step++) {
            const float *g = step == 1 ? g1 : g2;
            put(d, d_g, g, sizeof(float) * N);
            shs_sgd_update(d, d_p, d_g, d_buf, N, lr, with_mom ? mom : 0.0f, wd);
            for (int i = 0; i < N; i++) {
                double gg = g[i] + (double)wd * p[i];
                buf[i] = with_mom ? (double)mom * buf[i] + gg : gg;
                p[i] -= (double)lr * buf[i];
            }
            check_close(with_mom ? "sgd param (momentum)" : "sgd param", fetch(d, d_p, N), p, NULL, N, OPT_TOL);
            if (with_mom) check_close("sgd momentum buf", fetch(d, d_buf, N), buf, NULL, N, OPT_TOL);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_elementwise, teardown),
        cmocka_unit_test_teardown(test_softmax_xent, teardown),
        cmocka_unit_test_teardown(test_softmax_xent_backward_fd, teardown),
        cmocka_unit_test_teardown(test_sum, teardown),
        cmocka_unit_test_teardown(test_cast, teardown),
        cmocka_unit_test_teardown(test_adamw, teardown),
        cmocka_unit_test_teardown(test_sgd, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
