/* test_kernels_attention.c - the CPU backend's FlashAttention, eager
 * attention with dropout, and dropout kernels (device.h), against a float64
 * oracle written here, against the eager kernel, and by finite differences.
 *
 * Tolerances: forward outputs within FWD_TOL (1e-5) x max(1, |ref|) of the
 * f64 oracle; flash against eager within 2e-6 x max(1, |eager|) for the
 * forward (both are f32 with different summation orders) and FWD_TOL for
 * dqkv; gradients by central differences within FD_TOL (kernel_checks.h).
 * Exact: every kernel's bits at 1 and 3 threads; the accumulate contract;
 * dropout masks (a pure function of key and counter).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "device/kernel_checks.h"
#include "device/device_impl.h"
#include "device/kernel_math.h"
#include "shardsim/gpt.h"
#include "shardsim/device.h"

/* f64 oracle of causal attention with optional dropout (keep flags from the
 * documented rule: top 32 bits of shs__dropout_bits >= floor(p 2^32)):
 * out (B,T,C), lse (B,NH,T), att (B,NH,T,T) the undropped probabilities. */
static void attention_oracle(const float *qkv, int B, int T, int C, int NH, const shs_dropout_t *d, double *out,
                             double *lse, double *att) {
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs), keep_scale = d ? 1.0 / (1.0 - (double)d->p) : 1.0;
    uint64_t thr = d ? (uint64_t)((double)d->p * 4294967296.0) : 0;
    double *s = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                size_t row = ((size_t)(b * NH + h) * T + t);
                const float *q = qkv + (size_t)(b * T + t) * 3 * C + h * hs;
                double mx = -INFINITY, sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + (size_t)(b * T + t2) * 3 * C + C + h * hs;
                    double dot = 0;
                    for (int i = 0; i < hs; i++) dot += (double)q[i] * k[i];
                    s[t2] = dot * scale;
                    mx = fmax(mx, s[t2]);
                }
                for (int t2 = 0; t2 <= t; t2++) sum += exp(s[t2] - mx);
                if (lse) lse[row] = mx + log(sum);
                for (int i = 0; i < hs; i++) {
                    double o = 0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        double p = exp(s[t2] - mx) / sum;
                        if (d) {
                            uint64_t bits = shs__mix64(d->key ^ shs__mix64(d->offset + row * T + (uint64_t)t2));
                            p = (bits >> 32) >= thr ? p * keep_scale : 0.0;
                        }
                        o += p * qkv[(size_t)(b * T + t2) * 3 * C + 2 * C + h * hs + i];
                    }
                    out[(size_t)(b * T + t) * C + h * hs + i] = o;
                }
                if (att)
                    for (int t2 = 0; t2 < T; t2++) att[row * T + t2] = t2 <= t ? exp(s[t2] - mx) / sum : 0.0;
            }
    free(s);
}

/* T = 150 > 2 blocks of SHS_FLASH_BLOCK, so the online rescaling runs. */
enum { FB = 2, FT = 150, FC = 16, FNH = 2 };

static void test_flash_forward_oracle_and_eager(void **state) {
    shs_device_t *d = new_dev(1);
    seed(11);
    size_t nqkv = (size_t)FB * FT * 3 * FC, nout = (size_t)FB * FT * FC, nrow = (size_t)FB * FNH * FT;
    float *qkv = hf(nqkv);
    fill(qkv, nqkv, -2, 2);
    float *d_qkv = dput(d, qkv, nqkv), *d_out = dnew(d, nout), *d_lse = dnew(d, nrow);
    shs_attention_forward_flash(d, d_out, d_lse, d_qkv, FB, FT, FC, FNH, NULL);
    float *out = fetch(d, d_out, nout), *lse = fetch(d, d_lse, nrow);
    double *rout = hd(nout), *rlse = hd(nrow);
    attention_oracle(qkv, FB, FT, FC, FNH, NULL, rout, rlse, NULL);
    check_close("flash out vs f64", out, rout, NULL, nout, FWD_TOL);
    check_close("flash lse vs f64", lse, rlse, NULL, nrow, FWD_TOL);
    /* against the eager kernel */
    float *d_eo = dnew(d, nout), *d_pre = dnew(d, nrow * FT), *d_att = dnew(d, nrow * FT);
    shs_attention_forward(d, d_eo, d_pre, d_att, d_qkv, FB, FT, FC, FNH);
    float *eo = fetch(d, d_eo, nout);
    double *eod = hd(nout);
    for (size_t i = 0; i < nout; i++) eod[i] = eo[i];
    check_close("flash out vs eager", out, eod, NULL, nout, 2e-6);
    /* a future position does not change earlier outputs */
    qkv[(size_t)(FT - 1) * 3 * FC] += 1.0f;
    put(d, d_qkv, qkv, nqkv * sizeof(float));
    shs_attention_forward_flash(d, d_out, d_lse, d_qkv, FB, FT, FC, FNH, NULL);
    float *out2 = fetch(d, d_out, nout);
    assert_memory_equal(out2, out, sizeof(float) * (FT - 1) * FC);
}

typedef struct {
    shs_device_t *d;
    int B, T, C, NH;
    const shs_dropout_t *drop;
    float *qkv, *lw;
    float *d_qkv, *d_out, *d_lse;
} flash_ctx_t;

static double flash_loss(void *p) {
    flash_ctx_t *a = p;
    size_t nout = (size_t)a->B * a->T * a->C;
    put(a->d, a->d_qkv, a->qkv, sizeof(float) * 3 * nout);
    shs_attention_forward_flash(a->d, a->d_out, a->d_lse, a->d_qkv, a->B, a->T, a->C, a->NH, a->drop);
    float *out = malloc(nout * sizeof(float)); /* called per perturbation: not a teardown buffer */
    assert_non_null(out);
    get(a->d, out, a->d_out, nout * sizeof(float));
    double L = weighted_sum(out, a->lw, nout);
    free(out);
    return L;
}

/* Backward by finite differences, against the eager backward, and the
 * accumulate contract; with and without dropout. */
static void flash_backward_case(const shs_dropout_t *drop) {
    shs_device_t *d = new_dev(1);
    seed(12);
    flash_ctx_t a = {.d = d, .B = 2, .T = 7, .C = 8, .NH = 2, .drop = drop};
    size_t nqkv = (size_t)a.B * a.T * 3 * a.C, nout = nqkv / 3, natt = (size_t)a.B * a.NH * a.T * a.T;
    a.qkv = hf(nqkv), a.lw = hf(nout);
    fill(a.qkv, nqkv, -1.5f, 1.5f);
    fill(a.lw, nout, -1, 1);
    a.d_qkv = dnew(d, nqkv), a.d_out = dnew(d, nout), a.d_lse = dnew(d, (size_t)a.B * a.NH * a.T);
    float *d_dout = dput(d, a.lw, nout), *d_dqkv = dnew(d, nqkv);
    flash_loss(&a);
    zero(d, d_dqkv, sizeof(float) * nqkv);
    shs_attention_backward_flash(d, d_dqkv, d_dout, a.d_qkv, a.d_out, a.d_lse, a.B, a.T, a.C, a.NH, drop);
    float *dqkv = fetch(d, d_dqkv, nqkv);
    float *pre = hf(nqkv);
    fill(pre, nqkv, -3, 3);
    put(d, d_dqkv, pre, sizeof(float) * nqkv);
    shs_attention_backward_flash(d, d_dqkv, d_dout, a.d_qkv, a.d_out, a.d_lse, a.B, a.T, a.C, a.NH, drop);
    check_accumulated("flash dqkv +=", fetch(d, d_dqkv, nqkv), pre, dqkv, nqkv);
    /* eager with the same dropout (or none) */
    float *d_eo = dnew(d, nout), *d_pre = dnew(d, natt), *d_att = dnew(d, natt), *d_ad = dnew(d, natt);
    float *d_dpre = dnew(d, natt), *d_datt = dnew(d, natt), *d_edqkv = dnew(d, nqkv);
    uint8_t *d_mask = dalloc(d, natt);
    zero(d, d_edqkv, sizeof(float) * nqkv);
    if (drop) {
        shs_attention_forward_dropout(d, d_eo, d_pre, d_att, d_ad, d_mask, a.d_qkv, a.B, a.T, a.C, a.NH, drop);
        shs_attention_backward_dropout(d, d_edqkv, d_dpre, d_datt, d_dout, a.d_qkv, d_att, d_ad, d_mask, a.B, a.T,
                                       a.C, a.NH, drop->p);
    } else {
        shs_attention_forward(d, d_eo, d_pre, d_att, a.d_qkv, a.B, a.T, a.C, a.NH);
        shs_attention_backward(d, d_edqkv, d_dpre, d_datt, d_dout, a.d_qkv, d_att, a.B, a.T, a.C, a.NH);
    }
    float *eo = fetch(d, d_eo, nout), *edqkv = fetch(d, d_edqkv, nqkv), *fo = fetch(d, a.d_out, nout);
    double *ref = hd(nqkv), *refo = hd(nout);
    for (size_t i = 0; i < nqkv; i++) ref[i] = edqkv[i];
    for (size_t i = 0; i < nout; i++) refo[i] = eo[i];
    check_close("flash out vs eager", fo, refo, NULL, nout, 2e-6);
    check_close("flash dqkv vs eager", dqkv, ref, NULL, nqkv, FWD_TOL);
    check_fd("flash dqkv", flash_loss, &a, a.qkv, nqkv, dqkv);
}

static void test_flash_backward(void **state) { flash_backward_case(NULL); }

static void test_flash_backward_dropout(void **state) {
    shs_dropout_t drop = {.p = 0.25f, .key = 0x5eedULL, .offset = 1000};
    flash_backward_case(&drop);
}

/* Eager with dropout against the f64 oracle with the documented mask rule,
 * and the mask itself: exactly the rule's keep flags, 0 above the diagonal. */
static void test_eager_dropout_oracle(void **state) {
    shs_device_t *d = new_dev(1);
    seed(13);
    int B = 2, T = 9, C = 12, NH = 3;
    shs_dropout_t drop = {.p = 0.3f, .key = 42, .offset = 7};
    size_t nqkv = (size_t)B * T * 3 * C, nout = nqkv / 3, natt = (size_t)B * NH * T * T;
    float *qkv = hf(nqkv);
    fill(qkv, nqkv, -2, 2);
    float *d_out = dnew(d, nout), *d_pre = dnew(d, natt), *d_att = dnew(d, natt), *d_ad = dnew(d, natt);
    uint8_t *d_mask = dalloc(d, natt);
    shs_attention_forward_dropout(d, d_out, d_pre, d_att, d_ad, d_mask, dput(d, qkv, nqkv), B, T, C, NH, &drop);
    double *rout = hd(nout), *ratt = hd(natt);
    attention_oracle(qkv, B, T, C, NH, &drop, rout, NULL, ratt);
    check_close("eager dropout out", fetch(d, d_out, nout), rout, NULL, nout, FWD_TOL);
    check_close("eager dropout att", fetch(d, d_att, natt), ratt, NULL, natt, FWD_TOL);
    uint8_t *mask = hbuf(natt);
    get(d, mask, d_mask, natt);
    uint64_t thr = (uint64_t)((double)drop.p * 4294967296.0);
    size_t kept = 0, below = 0;
    for (size_t i = 0; i < natt; i++) {
        int t = (int)(i / T % T), t2 = (int)(i % T);
        int want = t2 <= t && (shs__mix64(drop.key ^ shs__mix64(drop.offset + i)) >> 32) >= thr;
        if (mask[i] != want) fail_msg("mask[%zu] = %d, want %d", i, mask[i], want);
        below += t2 <= t;
        kept += mask[i];
    }
    /* something was dropped and something kept: the test is not vacuous */
    assert_true(kept > 0 && kept < below);
}

/* The elementwise dropout: out, mask, the keep rate, and backward. */
static void test_dropout_elementwise(void **state) {
    shs_device_t *d = new_dev(2);
    seed(14);
    size_t n = 200000;
    shs_dropout_t drop = {.p = 0.1f, .key = 99, .offset = 123456};
    float *x = hf(n);
    fill(x, n, -1, 1);
    float *d_out = dnew(d, n), *d_x = dput(d, x, n);
    uint8_t *d_mask = dalloc(d, n);
    shs_dropout_forward(d, d_out, d_mask, d_x, n, &drop);
    float *out = fetch(d, d_out, n);
    uint8_t *mask = hbuf(n);
    get(d, mask, d_mask, n);
    float scale = 1.0f / (1.0f - drop.p);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        float want = mask[i] ? x[i] * scale : 0.0f;
        if (memcmp(&out[i], &want, sizeof want)) fail_msg("dropout out[%zu] = %.9g, want %.9g", i, out[i], want);
        kept += mask[i];
    }
    /* keep rate 0.9: binomial sd sqrt(n p q) = 134; allow 5 sd */
    double mean = 0.9 * (double)n;
    if (!(fabs((double)kept - mean) <= 5 * sqrt((double)n * 0.09)))
        fail_msg("kept %zu of %zu, expected about %.0f", kept, n, mean);
    /* backward accumulates mask * dout * scale */
    float *dy = hf(n), *pre = hf(n);
    fill(dy, n, -1, 1);
    fill(pre, n, -1, 1);
    float *d_dx = dput(d, pre, n);
    shs_dropout_backward(d, d_dx, d_mask, dput(d, dy, n), n, drop.p);
    float *dx = fetch(d, d_dx, n);
    for (size_t i = 0; i < n; i++) {
        float want = pre[i] + (mask[i] ? dy[i] * scale : 0.0f);
        if (memcmp(&dx[i], &want, sizeof want)) fail_msg("dropout dinp[%zu] = %.9g, want %.9g", i, dx[i], want);
    }
}

/* Every new kernel gives the same bits at 1 and 3 threads. */
static void test_thread_count_bits(void **state) {
    seed(15);
    int B = 2, T = 70, C = 8, NH = 2;
    size_t nqkv = (size_t)B * T * 3 * C, nout = nqkv / 3, nrow = (size_t)B * NH * T, natt = nrow * T;
    shs_dropout_t drop = {.p = 0.2f, .key = 5, .offset = 0};
    float *qkv = hf(nqkv), *dy = hf(nout);
    fill_wide(qkv, nqkv);
    fill(dy, nout, -1, 1);
    float *res[2][5];
    for (int k = 0; k < 2; k++) {
        shs_device_t *d = new_dev(k ? 3 : 1);
        float *d_qkv = dput(d, qkv, nqkv), *d_dy = dput(d, dy, nout);
        float *d_out = dnew(d, nout), *d_lse = dnew(d, nrow), *d_dqkv = dnew(d, nqkv);
        float *d_eo = dnew(d, nout), *d_pre = dnew(d, natt), *d_att = dnew(d, natt), *d_ad = dnew(d, natt);
        float *d_dpre = dnew(d, natt), *d_datt = dnew(d, natt), *d_edqkv = dnew(d, nqkv);
        uint8_t *d_mask = dalloc(d, natt);
        zero(d, d_dqkv, nqkv * sizeof(float));
        zero(d, d_edqkv, nqkv * sizeof(float));
        shs_attention_forward_flash(d, d_out, d_lse, d_qkv, B, T, C, NH, &drop);
        shs_attention_backward_flash(d, d_dqkv, d_dy, d_qkv, d_out, d_lse, B, T, C, NH, &drop);
        shs_attention_forward_dropout(d, d_eo, d_pre, d_att, d_ad, d_mask, d_qkv, B, T, C, NH, &drop);
        shs_attention_backward_dropout(d, d_edqkv, d_dpre, d_datt, d_dy, d_qkv, d_att, d_ad, d_mask, B, T, C, NH,
                                       drop.p);
        res[k][0] = fetch(d, d_out, nout), res[k][1] = fetch(d, d_lse, nrow), res[k][2] = fetch(d, d_dqkv, nqkv);
        res[k][3] = fetch(d, d_eo, nout), res[k][4] = fetch(d, d_edqkv, nqkv);
    }
    check_bits("flash out", res[1][0], res[0][0], nout);
    check_bits("flash lse", res[1][1], res[0][1], nrow);
    check_bits("flash dqkv", res[1][2], res[0][2], nqkv);
    check_bits("eager dropout out", res[1][3], res[0][3], nout);
    check_bits("eager dropout dqkv", res[1][4], res[0][4], nqkv);
}

/* A backend without the kernels (the CUDA backend's vtable leaves these
 * slots empty): shs_device_supports says so, and a GPT asking for them is
 * refused with SHS_UNSUPPORTED naming the backend and what is missing. */
static void test_missing_kernels_refused(void **state) {
    static shs_device_iface_t bare;
    bare = shs__cpu_iface;
    bare.name = "bare";
    bare.attention_forward_flash = NULL;
    bare.dropout_forward = NULL;
    bare.round = NULL;
    shs_device_t *d = NULL;
    assert_int_equal(shs__device_new(&d, &bare, NULL, 0, SIZE_MAX, 1), SHS_OK);
    assert_true(shs_device_supports(d, 0));
    assert_false(shs_device_supports(d, SHS_KERNELS_FLASH_ATTENTION));
    assert_false(shs_device_supports(d, SHS_KERNELS_DROPOUT));
    assert_false(shs_device_supports(d, SHS_KERNELS_ROUND));
    assert_true(shs_device_supports(new_dev(1), SHS_KERNELS_FLASH_ATTENTION | SHS_KERNELS_DROPOUT | SHS_KERNELS_ROUND));
    shs_gpt_config_t cfg = {.num_layers = 1, .num_heads = 2, .channels = 8, .context = 4};
    shs_layout_t lo;
    assert_int_equal(shs_gpt_layout_create(&lo, &cfg), SHS_OK);
    static const struct {
        shs_gpt_exec_t ex;
        const char *needle;
    } cases[] = {
        {{.attention = SHS_ATTENTION_FLASH}, "bare backend has no kernels for attention flash"},
        {{.dropout = 0.1f}, "bare backend has no kernels for dropout"},
        {{.autocast = SHS_BF16}, "bare backend has no kernels for autocast"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        shs_model_t *m = NULL;
        assert_int_equal(shs_gpt_create_ex(&m, &lo, &cfg, d, 1, &cases[k].ex), SHS_UNSUPPORTED);
        assert_null(m);
        if (!strstr(shs_last_error(), cases[k].needle)) fail_msg("'%s' lacks '%s'", shs_last_error(), cases[k].needle);
    }
    shs_model_t *m = NULL; /* eager, f32, no dropout: there */
    shs_gpt_exec_t plain = {0};
    assert_int_equal(shs_gpt_create_ex(&m, &lo, &cfg, d, 1, &plain), SHS_OK);
    shs_model_destroy(m);
    shs_layout_free(&lo);
    shs_device_destroy(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_flash_forward_oracle_and_eager, teardown),
        cmocka_unit_test_teardown(test_flash_backward, teardown),
        cmocka_unit_test_teardown(test_flash_backward_dropout, teardown),
        cmocka_unit_test_teardown(test_eager_dropout_oracle, teardown),
        cmocka_unit_test_teardown(test_dropout_elementwise, teardown),
        cmocka_unit_test_teardown(test_thread_count_bits, teardown),
        cmocka_unit_test_teardown(test_missing_kernels_refused, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
