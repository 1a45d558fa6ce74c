/* test_kernels_layers.c - the CPU backend's layer kernels, through the
 * public device API: layernorm, attention, GELU, ReLU and the encoder, each
 * forward against a naive f64 oracle or closed form and each backward
 * against central finite differences (accumulating); and a whole layer
 * stack's results independent of the thread count, bit for bit.
 * Tolerances: test_kernels_matmul.c's header. Not the matmul itself
 * (test_kernels_matmul.c) nor elementwise ops (test_kernels_elementwise.c). */
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

/* ---- layernorm ------------------------------------------------------------ */

static void test_layernorm_forward(void **state) {
    shs_device_t *d = new_dev(1);
    seed(3);
    int N = 9, C = 37;
    float *inp = hf(N * C), *w = hf(C), *b = hf(C);
    fill(inp, N * C, -2, 3);
    for (int c = 0; c < C; c++) inp[4 * C + c] = 1000.0f + 0.5f * (float)(c % 3); /* large mean */
    fill(w, C, 0.5f, 1.5f);
    fill(b, C, -1, 1);
    float *d_out = dnew(d, N * C), *d_mean = dnew(d, N), *d_rstd = dnew(d, N);
    shs_layernorm_forward(d, d_out, d_mean, d_rstd, dput(d, inp, N * C), dput(d, w, C), dput(d, b, C), N, C);
    double *ref = hd(N * C), *rmean = hd(N), *rrstd = hd(N);
    for (int r = 0; r < N; r++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += inp[r * C + c];
        m /= C;
        for (int c = 0; c < C; c++) v += (inp[r * C + c] - m) * (inp[r * C + c] - m);
        v /= C;
        double s = 1.0 / sqrt(v + 1e-5);
        for (int c = 0; c < C; c++) ref[r * C + c] = (inp[r * C + c] - m) * s * w[c] + b[c];
        rmean[r] = m;
        rrstd[r] = s;
    }
    check_close("layernorm mean", fetch(d, d_mean, N), rmean, NULL, N, FWD_TOL);
    check_close("layernorm rstd", fetch(d, d_rstd, N), rrstd, NULL, N, FWD_TOL);
    /* row 4 has mean ~1000 and variance ~0.17: rstd must still be accurate
     * (a one-pass E[x^2] - E[x]^2 in f32 would not be), but the f32 mean's
     * rounding (~3e-5) shows up in that row's normalised values. */
    check_close("layernorm out", fetch(d, d_out, N * C), ref, NULL, N * C, 1e-3);
    float *out = fetch(d, d_out, N * C);
    check_close("layernorm out rows 0-3", out, ref, NULL, 4 * C, FWD_TOL);
    check_close("layernorm out rows 5-8", out + 5 * C, ref + 5 * C, NULL, 4 * C, FWD_TOL);
}

typedef struct {
    shs_device_t *d;
    int N, C;
    float *inp, *w, *b, *lw;
    float *d_inp, *d_w, *d_b, *d_out, *d_mean, *d_rstd;
} ln_ctx_t;

static double ln_loss(void *p) {
    ln_ctx_t *l = p;
    put(l->d, l->d_inp, l->inp, sizeof(float) * l->N * l->C);
    put(l->d, l->d_w, l->w, sizeof(float) * l->C);
    put(l->d, l->d_b, l->b, sizeof(float) * l->C);
    shs_layernorm_forward(l->d, l->d_out, l->d_mean, l->d_rstd, l->d_inp, l->d_w, l->d_b, l->N, l->C);
    float out[l->N * l->C];
    get(l->d, out, l->d_out, sizeof out);
    return weighted_sum(out, l->lw, l->N * l->C);
}

static void test_layernorm_backward(void **state) {
    shs_device_t *d = new_dev(1);
    seed(4);
    ln_ctx_t l = {.d = d, .N = 10, .C = 12};
    int N = l.N, C = l.C;
    l.inp = hf(N * C), l.w = hf(C), l.b = hf(C), l.lw = hf(N * C);
    fill(l.inp, N * C, -2, 2);
    fill(l.w, C, 0.5f, 1.5f);
    fill(l.b, C, -1, 1);
    fill(l.lw, N * C, -1, 1);
    l.d_inp = dnew(d, N * C), l.d_w = dnew(d, C), l.d_b = dnew(d, C), l.d_out = dnew(d, N * C);
    l.d_mean = dnew(d, N), l.d_rstd = dnew(d, N);
    float *d_dout = dput(d, l.lw, N * C), *d_dinp = dnew(d, N * C), *d_dw = dnew(d, C), *d_db = dnew(d, C);
    ln_loss(&l);
    zero(d, d_dinp, sizeof(float) * N * C);
    zero(d, d_dw, sizeof(float) * C);
    zero(d, d_db, sizeof(float) * C);
    shs_layernorm_backward(d, d_dinp, d_dw, d_db, d_dout, l.d_inp, l.d_w, l.d_mean, l.d_rstd, N, C);
    float *dinp = fetch(d, d_dinp, N * C), *dw = fetch(d, d_dw, C), *db = fetch(d, d_db, C);

    float *pre_inp = hf(N * C), *pre_w = hf(C), *pre_b = hf(C);
    fill(pre_inp, N * C, -3, 3);
    fill(pre_w, C, -3, 3);
    fill(pre_b, C, -3, 3);
    put(d, d_dinp, pre_inp, sizeof(float) * N * C);
    put(d, d_dw, pre_w, sizeof(float) * C);
    put(d, d_db, pre_b, sizeof(float) * C);
    shs_layernorm_backward(d, d_dinp, d_dw, d_db, d_dout, l.d_inp, l.d_w, l.d_mean, l.d_rstd, N, C);
    check_accumulated("layernorm dinp +=", fetch(d, d_dinp, N * C), pre_inp, dinp, N * C);
    check_accumulated("layernorm dweight +=", fetch(d, d_dw, C), pre_w, dw, C);
    check_accumulated("layernorm dbias +=", fetch(d, d_db, C), pre_b, db, C);

    check_fd("layernorm dinp", ln_loss, &l, l.inp, N * C, dinp);
    check_fd("layernorm dweight", ln_loss, &l, l.w, C, dw);
    check_fd("layernorm dbias", ln_loss, &l, l.b, C, db);
}

/* ---- attention ------------------------------------------------------------ */

static void test_attention_forward(void **state) {
    shs_device_t *d = new_dev(1);
    seed(5);
    int B = 2, T = 5, C = 12, NH = 3, hs = C / NH;
    float *qkv = hf(B * T * 3 * C);
    fill(qkv, B * T * 3 * C, -2, 2);
    float *d_out = dnew(d, B * T * C), *d_pre = dnew(d, B * NH * T * T), *d_att = dnew(d, B * NH * T * T);
    float *garbage = hf(B * NH * T * T);
    for (int i = 0; i < B * NH * T * T; i++) garbage[i] = NAN;
    put(d, d_pre, garbage, sizeof(float) * B * NH * T * T);
    put(d, d_att, garbage, sizeof(float) * B * NH * T * T);
    shs_attention_forward(d, d_out, d_pre, d_att, dput(d, qkv, B * T * 3 * C), B, T, C, NH);
    float *out = fetch(d, d_out, B * T * C), *pre = fetch(d, d_pre, B * NH * T * T);
    float *att = fetch(d, d_att, B * NH * T * T);

    double *rout = hd(B * T * C), *rpre = hd(B * NH * T * T), *ratt = hd(B * NH * T * T);
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + (b * T + t) * 3 * C + h * hs;
                double *rp = rpre + ((b * NH + h) * T + t) * T, *ra = ratt + ((b * NH + h) * T + t) * T;
                double mx = -INFINITY, sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + (b * T + t2) * 3 * C + C + h * hs;
                    double dot = 0;
                    for (int i = 0; i < hs; i++) dot += (double)q[i] * k[i];
                    rp[t2] = dot * scale;
                    mx = fmax(mx, rp[t2]);
                }
                for (int t2 = 0; t2 <= t; t2++) sum += exp(rp[t2] - mx);
                for (int t2 = 0; t2 < T; t2++) ra[t2] = t2 <= t ? exp(rp[t2] - mx) / sum : 0.0;
                for (int t2 = t + 1; t2 < T; t2++) rp[t2] = 0.0;
                for (int i = 0; i < hs; i++) {
                    double o = 0;
                    for (int t2 = 0; t2 <= t; t2++) o += ra[t2] * qkv[(b * T + t2) * 3 * C + 2 * C + h * hs + i];
                    rout[(b * T + t) * C + h * hs + i] = o;
                }
            }
    check_close("attention preatt", pre, rpre, NULL, B * NH * T * T, FWD_TOL);
    check_close("attention att", att, ratt, NULL, B * NH * T * T, FWD_TOL);
    check_close("attention out", out, rout, NULL, B * T * C, FWD_TOL);
    /* causality: exact zeros above the diagonal; each row is a distribution */
    for (int row = 0; row < B * NH * T; row++) {
        int t = row % T;
        double s = 0;
        for (int t2 = 0; t2 < T; t2++) {
            if (t2 > t) {
                assert_true(att[row * T + t2] == 0.0f);
                assert_true(pre[row * T + t2] == 0.0f);
            } else {
                assert_true(att[row * T + t2] > 0.0f);
            }
            s += att[row * T + t2];
        }
        if (!(fabs(s - 1.0) <= 1e-6)) fail_msg("attention row %d sums to %.9g", row, s);
    }
    /* changing a future position must not change earlier outputs */
    float *qkv2 = hf(B * T * 3 * C);
    memcpy(qkv2, qkv, sizeof(float) * B * T * 3 * C);
    for (int c = 0; c < 3 * C; c++) qkv2[(T - 1) * 3 * C + c] += 1.0f; /* b = 0, t = T-1 */
    shs_attention_forward(d, d_out, d_pre, d_att, dput(d, qkv2, B * T * 3 * C), B, T, C, NH);
    float *out2 = fetch(d, d_out, B * T * C);
    assert_memory_equal(out2, out, sizeof(float) * (T - 1) * C);
    assert_memory_not_equal(out2 + (T - 1) * C, out + (T - 1) * C, sizeof(float) * C);
}

typedef struct {
    shs_device_t *d;
    int B, T, C, NH;
    float *qkv, *lw;
    float *d_qkv, *d_out, *d_pre, *d_att;
} attn_ctx_t;

static double attn_loss(void *p) {
    attn_ctx_t *a = p;
    put(a->d, a->d_qkv, a->qkv, sizeof(float) * a->B * a->T * 3 * a->C);
    shs_attention_forward(a->d, a->d_out, a->d_pre, a->d_att, a->d_qkv, a->B, a->T, a->C, a->NH);
    float out[a->B * a->T * a->C];
    get(a->d, out, a->d_out, sizeof out);
    return weighted_sum(out, a->lw, a->B * a->T * a->C);
}

static void test_attention_backward(void **state) {
    shs_device_t *d = new_dev(1);
    seed(6);
    attn_ctx_t a = {.d = d, .B = 2, .T = 5, .C = 12, .NH = 3};
    int B = a.B, T = a.T, C = a.C, NH = a.NH;
    size_t nqkv = B * T * 3 * C, nout = B * T * C, natt = B * NH * T * T;
    a.qkv = hf(nqkv), a.lw = hf(nout);
    fill(a.qkv, nqkv, -1.5f, 1.5f);
    fill(a.lw, nout, -1, 1);
    a.d_qkv = dnew(d, nqkv), a.d_out = dnew(d, nout), a.d_pre = dnew(d, natt), a.d_att = dnew(d, natt);
    float *d_dout = dput(d, a.lw, nout), *d_dqkv = dnew(d, nqkv);
    float *d_dpre = dnew(d, natt), *d_datt = dnew(d, natt);
    attn_loss(&a);
    zero(d, d_dqkv, sizeof(float) * nqkv);
    zero(d, d_dpre, sizeof(float) * natt);
    zero(d, d_datt, sizeof(float) * natt);
    shs_attention_backward(d, d_dqkv, d_dpre, d_datt, d_dout, a.d_qkv, a.d_att, B, T, C, NH);
    float *dqkv = fetch(d, d_dqkv, nqkv);

    /* dqkv accumulates; dpreatt/datt are scratch: NaN garbage there must not matter */
    float *pre = hf(nqkv), *garbage = hf(natt);
    fill(pre, nqkv, -3, 3);
    for (size_t i = 0; i < natt; i++) garbage[i] = NAN;
    put(d, d_dqkv, pre, sizeof(float) * nqkv);
    put(d, d_dpre, garbage, sizeof(float) * natt);
    put(d, d_datt, garbage, sizeof(float) * natt);
    shs_attention_backward(d, d_dqkv, d_dpre, d_datt, d_dout, a.d_qkv, a.d_att, B, T, C, NH);
    check_accumulated("attention dqkv +=", fetch(d, d_dqkv, nqkv), pre, dqkv, nqkv);

    check_fd("attention dqkv", attn_loss, &a, a.qkv, nqkv, dqkv);
}

/* ---- GELU ------------------------------------------------------------------ */

static double gelu_ref(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

static void test_gelu_forward(void **state) {
    shs_device_t *d = new_dev(1);
    enum { N = 207 };
    float *x = hf(N);
    for (int i = 0; i < 201; i++) x[i] = -10.0f + 0.1f * (float)i;
    x[201] = 0.0f, x[202] = -0.0f, x[203] = 50.0f, x[204] = -50.0f, x[205] = 1e-20f, x[206] = 3e4f;
    float *d_out = dnew(d, N);
    shs_gelu_forward(d, d_out, dput(d, x, N), N);
    double *ref = hd(N);
    for (int i = 0; i < N; i++) ref[i] = gelu_ref(x[i]);
    check_close("gelu out", fetch(d, d_out, N), ref, NULL, N, FWD_TOL);
}

typedef struct {
    shs_device_t *d;
    int n;
    float *x, *lw, *d_x, *d_out;
} gelu_ctx_t;

static double gelu_loss(void *p) {
    gelu_ctx_t *g = p;
    put(g->d, g->d_x, g->x, sizeof(float) * g->n);
    shs_gelu_forward(g->d, g->d_out, g->d_x, g->n);
    float out[g->n];
    get(g->d, out, g->d_out, sizeof out);
    return weighted_sum(out, g->lw, g->n);
}

static void test_gelu_backward(void **state) {
    shs_device_t *d = new_dev(1);
    seed(7);
    gelu_ctx_t g = {.d = d, .n = 61};
    g.x = hf(g.n), g.lw = hf(g.n);
    for (int i = 0; i < g.n; i++) g.x[i] = -6.0f + 0.2f * (float)i + urand(-0.05f, 0.05f);
    fill(g.lw, g.n, -1, 1);
    g.d_x = dnew(d, g.n), g.d_out = dnew(d, g.n);
    float *d_dout = dput(d, g.lw, g.n), *d_dx = dnew(d, g.n);
    zero(d, d_dx, sizeof(float) * g.n);
    shs_gelu_backward(d, d_dx, dput(d, g.x, g.n), d_dout, g.n);
    float *dx = fetch(d, d_dx, g.n);
    float *pre = hf(g.n);
    fill(pre, g.n, -3, 3);
    put(d, d_dx, pre, sizeof(float) * g.n);
    shs_gelu_backward(d, d_dx, dput(d, g.x, g.n), d_dout, g.n);
    check_accumulated("gelu dinp +=", fetch(d, d_dx, g.n), pre, dx, g.n);
    check_fd("gelu dinp", gelu_loss, &g, g.x, g.n, dx);
    /* saturated tails: gelu'(x) -> 1 for large x, -> 0 for very negative x, no NaN */
    float big[2] = {100.0f, -100.0f}, one[2] = {1.0f, 1.0f};
    float *d_big = dput(d, big, 2), *d_g = dnew(d, 2);
    zero(d, d_g, sizeof(float) * 2);
    shs_gelu_backward(d, d_g, d_big, dput(d, one, 2), 2);
    float *gb = fetch(d, d_g, 2);
    assert_true(gb[0] == 1.0f);
    assert_true(gb[1] == 0.0f);
}

/* ---- ReLU --------------------------------------------------------------------- */

/* Closed form: max(x, +0) with NaN kept; backward adds dout where x > 0 (0 at x = 0). */
static void test_relu(void **state) {
    shs_device_t *d = new_dev(3);
    seed(16);
    enum { N = 1001 };
    float *x = hf(N), *dout = hf(N), *pre = hf(N), *want = hf(N);
    fill(x, N, -2, 2);
    fill(dout, N, -1, 1);
    fill(pre, N, -3, 3);
    x[0] = 0.0f, x[1] = -0.0f, x[2] = NAN, x[3] = INFINITY, x[4] = -INFINITY, x[5] = 1e-40f, x[6] = -1e-40f;
    float *d_x = dput(d, x, N), *d_out = dnew(d, N);
    shs_relu_forward(d, d_out, d_x, N);
    float *out = fetch(d, d_out, N);
    for (int i = 0; i < N; i++) want[i] = isnan(x[i]) ? x[i] : x[i] > 0 ? x[i] : 0.0f;
    check_bits("relu out", out, want, N);
    assert_true(isnan(out[2]) && out[3] == INFINITY && out[4] == 0.0f && out[5] == 1e-40f);
    float *d_dx = dput(d, pre, N);
    shs_relu_backward(d, d_dx, d_x, dput(d, dout, N), N);
    for (int i = 0; i < N; i++) want[i] = pre[i] + (x[i] > 0 ? dout[i] : 0.0f);
    check_bits("relu dinp +=", fetch(d, d_dx, N), want, N);
    int passed = 0;
    for (int i = 0; i < N; i++) passed += x[i] > 0;
    assert_true(passed > N / 3 && passed < 2 * N / 3); /* both branches taken */
    shs_relu_forward(d, d_out, d_x, 0); /* n = 0 touches nothing */
    check_bits("relu n=0", fetch(d, d_out, N), out, N);
}
/* ---- encoder ---------------------------------------------------------------- */

static const int32_t enc_tokens[2 * 5] = {3, 7, 3, 0, 10, 7, 7, 1, 3, 9}; /* B=2, T=5, V=11, repeats */

static void test_encoder_forward(void **state) {
    shs_device_t *d = new_dev(1);
    seed(8);
    int B = 2, T = 5, C = 12, V = 11, maxT = 7;
    float *wte = hf(V * C), *wpe = hf(maxT * C);
    fill(wte, V * C, -1, 1);
    fill(wpe, maxT * C, -1, 1);
    float *d_out = dnew(d, B * T * C);
    shs_encoder_forward(d, d_out, dput_i32(d, enc_tokens, B * T), dput(d, wte, V * C), dput(d, wpe, maxT * C), B, T, C);
    float *out = fetch(d, d_out, B * T * C), *want = hf(B * T * C);
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++) /* one f32 addition: exactly the rounded f64 sum */
            want[bt * C + c] = (float)((double)wte[enc_tokens[bt] * C + c] + (double)wpe[(bt % T) * C + c]);
    check_bits("encoder out", out, want, B * T * C);
}

typedef struct {
    shs_device_t *d;
    int B, T, C, V;
    float *wte, *wpe, *lw;
    int32_t *d_tok;
    float *d_wte, *d_wpe, *d_out;
} enc_ctx_t;

static double enc_loss(void *p) {
    enc_ctx_t *e = p;
    put(e->d, e->d_wte, e->wte, sizeof(float) * e->V * e->C);
    put(e->d, e->d_wpe, e->wpe, sizeof(float) * e->T * e->C);
    shs_encoder_forward(e->d, e->d_out, e->d_tok, e->d_wte, e->d_wpe, e->B, e->T, e->C);
    float out[e->B * e->T * e->C];
    get(e->d, out, e->d_out, sizeof out);
    return weighted_sum(out, e->lw, e->B * e->T * e->C);
}

static void test_encoder_backward(void **state) {
    shs_device_t *d = new_dev(1);
    seed(9);
    enc_ctx_t e = {.d = d, .B = 2, .T = 5, .C = 12, .V = 11};
    int B = e.B, T = e.T, C = e.C, V = e.V;
    e.wte = hf(V * C), e.wpe = hf(T * C), e.lw = hf(B * T * C);
    fill(e.wte, V * C, -1, 1);
    fill(e.wpe, T * C, -1, 1);
    fill(e.lw, B * T * C, -1, 1);
    e.d_tok = dput_i32(d, enc_tokens, B * T);
    e.d_wte = dnew(d, V * C), e.d_wpe = dnew(d, T * C), e.d_out = dnew(d, B * T * C);
    float *d_dout = dput(d, e.lw, B * T * C), *d_dwte = dnew(d, V * C), *d_dwpe = dnew(d, T * C);
    zero(d, d_dwte, sizeof(float) * V * C);
    zero(d, d_dwpe, sizeof(float) * T * C);
    shs_encoder_backward(d, d_dwte, d_dwpe, d_dout, e.d_tok, B, T, C);
    float *dwte = fetch(d, d_dwte, V * C), *dwpe = fetch(d, d_dwpe, T * C);
    /* rows of tokens that never occur stay exactly zero */
    for (int c = 0; c < C; c++) {
        assert_true(dwte[2 * C + c] == 0.0f);
        assert_true(dwte[5 * C + c] == 0.0f);
    }
    /* token 7 occurs at (b,t) = (0,1), (1,0), (1,1): summed in that order */
    for (int c = 0; c < C; c++) {
        float s = 0.0f;
        s += e.lw[1 * C + c];
        s += e.lw[5 * C + c];
        s += e.lw[6 * C + c];
        assert_memory_equal(&dwte[7 * C + c], &s, sizeof s);
    }
    float *pre_wte = hf(V * C), *pre_wpe = hf(T * C);
    fill(pre_wte, V * C, -3, 3);
    fill(pre_wpe, T * C, -3, 3);
    put(d, d_dwte, pre_wte, sizeof(float) * V * C);
    put(d, d_dwpe, pre_wpe, sizeof(float) * T * C);
    shs_encoder_backward(d, d_dwte, d_dwpe, d_dout, e.d_tok, B, T, C);
    check_accumulated("encoder dwte +=", fetch(d, d_dwte, V * C), pre_wte, dwte, V * C);
    check_accumulated("encoder dwpe +=", fetch(d, d_dwpe, T * C), pre_wpe, dwpe, T * C);

    check_fd("encoder dwte", enc_loss, &e, e.wte, V * C, dwte);
    check_fd("encoder dwpe", enc_loss, &e, e.wpe, T * C, dwpe);
}

/* Each dwte row and each dwpe row sums its (b,t) terms in increasing order,
 * in f32, starting from zero. */
static void test_encoder_backward_order(void **state) {
    shs_device_t *d = new_dev(3);
    seed(16);
    enum { B = 4, T = 3, C = 16, V = 5 };
    int32_t tokens[B * T] = {2, 2, 4, 2, 0, 2, 2, 2, 4, 1, 2, 4};
    float *dout = hf(B * T * C);
    fill_wide(dout, B * T * C);
    float *d_dwte = dnew(d, V * C), *d_dwpe = dnew(d, T * C);
    zero(d, d_dwte, sizeof(float) * V * C);
    zero(d, d_dwpe, sizeof(float) * T * C);
    shs_encoder_backward(d, d_dwte, d_dwpe, dput(d, dout, B * T * C), dput_i32(d, tokens, B * T), B, T, C);
    float *wte = hf(V * C), *wpe = hf(T * C);
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++) {
            wte[tokens[bt] * C + c] += dout[bt * C + c];
            wpe[(bt % T) * C + c] += dout[bt * C + c];
        }
    check_bits("encoder dwte order", fetch(d, d_dwte, V * C), wte, V * C);
    check_bits("encoder dwpe order", fetch(d, d_dwpe, T * C), wpe, T * C);
}

/* ---- determinism across thread counts ---------------------------------------------
 * Shapes large enough that 4 threads each get work and tiles have edges. */

typedef struct {
    float *mm_out, *mm_dinp, *mm_dw, *mm_db;
    float *ln_out, *ln_dinp, *ln_dw, *ln_db;
    float *at_out, *at_att, *at_dqkv;
    float *en_dwte;
} det_out_t;

enum { DBT = 37, DC = 48, DOC = 29, DB = 2, DT = 17, DNH = 4, DV = 13 };

static void run_layers(shs_device_t *d, det_out_t *r, const float *inp, const float *w, const float *bias,
                       const float *dout, const float *qkv, const float *attdout, const int32_t *tokens) {
    size_t nqkv = DB * DT * 3 * DC, nbt = DB * DT * DC, natt = DB * DNH * DT * DT;
    float *d_inp = dput(d, inp, DBT * DC), *d_w = dput(d, w, DOC * DC), *d_b = dput(d, bias, DOC);
    float *d_out = dnew(d, DBT * DOC), *d_dout = dput(d, dout, DBT * DOC);
    float *d_dinp = dnew(d, DBT * DC), *d_dw = dnew(d, DOC * DC), *d_db = dnew(d, DOC);
    zero(d, d_dinp, sizeof(float) * DBT * DC);
    zero(d, d_dw, sizeof(float) * DOC * DC);
    zero(d, d_db, sizeof(float) * DOC);
    shs_matmul_forward(d, d_out, d_inp, d_w, d_b, DBT, DC, DOC);
    shs_matmul_backward(d, d_dinp, d_dw, d_db, d_dout, d_inp, d_w, DBT, DC, DOC);
    r->mm_out = fetch(d, d_out, DBT * DOC), r->mm_dinp = fetch(d, d_dinp, DBT * DC);
    r->mm_dw = fetch(d, d_dw, DOC * DC), r->mm_db = fetch(d, d_db, DOC);

    /* layernorm on (DBT, DC) with the matmul weight's first rows as weight/bias */
    float *d_ln = dnew(d, DBT * DC), *d_mean = dnew(d, DBT), *d_rstd = dnew(d, DBT);
    float *d_lndw = dnew(d, DC), *d_lndb = dnew(d, DC);
    zero(d, d_dinp, sizeof(float) * DBT * DC);
    zero(d, d_lndw, sizeof(float) * DC);
    zero(d, d_lndb, sizeof(float) * DC);
    shs_layernorm_forward(d, d_ln, d_mean, d_rstd, d_inp, d_w, d_w + DC, DBT, DC);
    shs_layernorm_backward(d, d_dinp, d_lndw, d_lndb, d_inp, d_inp, d_w, d_mean, d_rstd, DBT, DC);
    r->ln_out = fetch(d, d_ln, DBT * DC), r->ln_dinp = fetch(d, d_dinp, DBT * DC);
    r->ln_dw = fetch(d, d_lndw, DC), r->ln_db = fetch(d, d_lndb, DC);

    float *d_qkv = dput(d, qkv, nqkv), *d_ao = dnew(d, nbt), *d_pre = dnew(d, natt), *d_att = dnew(d, natt);
    float *d_adout = dput(d, attdout, nbt), *d_dqkv = dnew(d, nqkv), *d_dpre = dnew(d, natt), *d_datt = dnew(d, natt);
    zero(d, d_dqkv, sizeof(float) * nqkv);
    shs_attention_forward(d, d_ao, d_pre, d_att, d_qkv, DB, DT, DC, DNH);
    shs_attention_backward(d, d_dqkv, d_dpre, d_datt, d_adout, d_qkv, d_att, DB, DT, DC, DNH);
    r->at_out = fetch(d, d_ao, nbt), r->at_att = fetch(d, d_att, natt), r->at_dqkv = fetch(d, d_dqkv, nqkv);

    float *d_dwte = dnew(d, DV * DC), *d_dwpe = dnew(d, DT * DC);
    zero(d, d_dwte, sizeof(float) * DV * DC);
    zero(d, d_dwpe, sizeof(float) * DT * DC);
    shs_encoder_backward(d, d_dwte, d_dwpe, d_adout, dput_i32(d, tokens, DB * DT), DB, DT, DC);
    r->en_dwte = fetch(d, d_dwte, DV * DC);
}

static void test_thread_determinism(void **state) {
    seed(15);
    size_t nqkv = DB * DT * 3 * DC, nbt = DB * DT * DC;
    float *inp = hf(DBT * DC), *w = hf(DOC * DC), *bias = hf(DOC), *dout = hf(DBT * DOC);
    float *qkv = hf(nqkv), *attdout = hf(nbt);
    int32_t tokens[DB * DT];
    fill_wide(inp, DBT * DC);
    fill_wide(w, DOC * DC);
    fill(bias, DOC, -1, 1);
    fill_wide(dout, DBT * DOC);
    fill(qkv, nqkv, -2, 2);
    fill_wide(attdout, nbt);
    for (int i = 0; i < DB * DT; i++) tokens[i] = (int32_t)(next_u64() % DV);
    det_out_t r1, r4;
    run_layers(new_dev(1), &r1, inp, w, bias, dout, qkv, attdout, tokens);
    run_layers(new_dev(4), &r4, inp, w, bias, dout, qkv, attdout, tokens);
    assert_memory_equal(r1.mm_out, r4.mm_out, sizeof(float) * DBT * DOC);
    assert_memory_equal(r1.mm_dinp, r4.mm_dinp, sizeof(float) * DBT * DC);
    assert_memory_equal(r1.mm_dw, r4.mm_dw, sizeof(float) * DOC * DC);
    assert_memory_equal(r1.mm_db, r4.mm_db, sizeof(float) * DOC);
    assert_memory_equal(r1.ln_out, r4.ln_out, sizeof(float) * DBT * DC);
    assert_memory_equal(r1.ln_dinp, r4.ln_dinp, sizeof(float) * DBT * DC);
    assert_memory_equal(r1.ln_dw, r4.ln_dw, sizeof(float) * DC);
    assert_memory_equal(r1.ln_db, r4.ln_db, sizeof(float) * DC);
    assert_memory_equal(r1.at_out, r4.at_out, sizeof(float) * nbt);
    assert_memory_equal(r1.at_att, r4.at_att, sizeof(float) * DB * DNH * DT * DT);
    assert_memory_equal(r1.at_dqkv, r4.at_dqkv, sizeof(float) * nqkv);
    assert_memory_equal(r1.en_dwte, r4.en_dwte, sizeof(float) * DV * DC);
    /* and the comparison is not vacuous */
    float zeros[DOC] = {0};
    assert_memory_not_equal(r1.mm_db, zeros, sizeof zeros);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_layernorm_forward, teardown),
        cmocka_unit_test_teardown(test_layernorm_backward, teardown),
        cmocka_unit_test_teardown(test_attention_forward, teardown),
        cmocka_unit_test_teardown(test_attention_backward, teardown),
        cmocka_unit_test_teardown(test_gelu_forward, teardown),
        cmocka_unit_test_teardown(test_gelu_backward, teardown),
        cmocka_unit_test_teardown(test_relu, teardown),
        cmocka_unit_test_teardown(test_encoder_forward, teardown),
        cmocka_unit_test_teardown(test_encoder_backward, teardown),
        cmocka_unit_test_teardown(test_encoder_backward_order, teardown),
        cmocka_unit_test_teardown(test_thread_determinism, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
