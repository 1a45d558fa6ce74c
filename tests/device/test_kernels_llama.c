/* test_kernels_llama.c - the Llama-family kernels of device.h (RMSNorm,
 * RoPE full and partial with an mscale, SwiGLU, GeGLU, soft capping,
 * grouped-query attention eager and flash with document masks, sliding
 * windows, soft caps and scales, the encoder without position embedding) on
 * the CPU backend, against float64 oracles written here (plain loops from
 * the papers' / Hugging Face's formulas, independent of the kernels) and by
 * finite differences. Their backend contract, thread-count invariance and
 * meta counts: test_kernels_llama_meta.c.
 *
 * Tolerances: forward outputs within FWD_TOL (1e-5) x max(1, |ref|) of the
 * f64 oracle; RoPE at a known angle within 1e-6 of the closed form (cosf of
 * the f32 pi/2 is -4.4e-8, not 0); flash against eager within 2e-6 x
 * max(1, |eager|) forward and FWD_TOL for the gradients (the same math in a
 * different f32 summation order); gradients by central differences within
 * FD_TOL (kernel_checks.h), SwiGLU's also against its f64 derivative.
 * Exact (assert_memory_equal / check_bits): every kernel's bits at 1 and 3
 * threads; the accumulate contract; RoPE with positions NULL vs positions =
 * t, and in place vs out of place; the encoder without wpe (a copy); a key
 * or value of another document changing nothing.
 */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "device/kernel_checks.h"
#include "device/device_impl.h"
#include "shardsim/device.h"

/* ---- a generic finite-difference context ---------------------------------------
 * Up to 3 host inputs uploaded to their device copies, then fwd() writes
 * d_out (nout); the loss is sum out * lw. */
typedef struct fd_ctx {
    shs_device_t *d;
    int nin;
    float *h[3], *dv[3];
    size_t n[3];
    float *d_out, *d_aux;
    size_t nout;
    const float *lw;
    const int32_t *d_pos, *d_doc;
    int B, T, NH, NKV, HD, N, C;
    float eps;
    shs_attention_opts_t opt;     /* the GQA kernels' */
    shs_rope_t rope;              /* the RoPE kernels' (inv_freq: d_aux) */
    void (*fwd)(struct fd_ctx *);
} fd_ctx_t;

static double fd_loss(void *p) {
    fd_ctx_t *c = p;
    for (int i = 0; i < c->nin; i++) put(c->d, c->dv[i], c->h[i], c->n[i] * sizeof(float));
    c->fwd(c);
    float *out = malloc(c->nout * sizeof(float)); /* called per perturbation: not a teardown buffer */
    assert_non_null(out);
    get(c->d, out, c->d_out, c->nout * sizeof(float));
    double L = weighted_sum(out, c->lw, c->nout);
    free(out);
    return L;
}

/* The output (n floats on the device), its loss weights in [-1, 1) (host,
 * returned) and a first forward. */
static float *fd_output(fd_ctx_t *c, size_t n) {
    float *lw = hf(n);
    c->nout = n, c->d_out = dnew(c->d, n);
    fill(lw, n, -1, 1);
    c->lw = lw;
    fd_loss(c);
    return lw;
}

/* Adds host input i (n floats, filled in [lo, hi)) to c. */
static float *fd_input(fd_ctx_t *c, size_t n, float lo, float hi) {
    int i = c->nin++;
    c->h[i] = hf(n), c->n[i] = n;
    fill(c->h[i], n, lo, hi);
    c->dv[i] = dput(c->d, c->h[i], n);
    return c->h[i];
}

/* Runs a backward into zeros and into a pre-filled buffer for each of the
 * `ng` gradients (device d_g[i], n[i] floats): returns the fresh gradients
 * and checks the accumulate contract bit for bit. */
typedef void (*bwd_fn_t)(fd_ctx_t *c, float **d_g);
static void backward_twice(fd_ctx_t *c, bwd_fn_t bwd, int ng, float **d_g, const size_t *n, float **fresh) {
    for (int i = 0; i < ng; i++) zero(c->d, d_g[i], n[i] * sizeof(float));
    bwd(c, d_g);
    float *pre[3];
    for (int i = 0; i < ng; i++) {
        fresh[i] = fetch(c->d, d_g[i], n[i]);
        pre[i] = hf(n[i]);
        fill_wide(pre[i], n[i]);
        put(c->d, d_g[i], pre[i], n[i] * sizeof(float));
    }
    bwd(c, d_g);
    for (int i = 0; i < ng; i++) check_accumulated("backward +=", fetch(c->d, d_g[i], n[i]), pre[i], fresh[i], n[i]);
}

/* ---- RMSNorm ------------------------------------------------------------------------ */

/* Hugging Face LlamaRMSNorm: variance = mean(x^2); x * rsqrt(variance + eps) * weight. */
static void rmsnorm_oracle(const float *x, const float *w, int N, int C, double eps, double *out, double *rstd) {
    for (int r = 0; r < N; r++) {
        double var = 0;
        for (int c = 0; c < C; c++) var += (double)x[r * C + c] * x[r * C + c];
        var /= C;
        double s = 1.0 / sqrt(var + eps);
        rstd[r] = s;
        for (int c = 0; c < C; c++) out[r * C + c] = (double)w[c] * ((double)x[r * C + c] * s);
    }
}

static void rms_fwd(fd_ctx_t *c) { shs_rmsnorm_forward(c->d, c->d_out, c->d_aux, c->dv[0], c->dv[1], c->N, c->C, c->eps); }
static void rms_bwd(fd_ctx_t *c, float **g) {
    shs_rmsnorm_backward(c->d, g[0], g[1], dput(c->d, c->lw, c->nout), c->dv[0], c->dv[1], c->d_aux, c->N, c->C);
}

static void test_rmsnorm(void **state) {
    seed(21);
    fd_ctx_t c = {.d = new_dev(1), .N = 5, .C = 24, .eps = 1e-5f, .fwd = rms_fwd};
    float *x = fd_input(&c, (size_t)c.N * c.C, -2, 2), *w = fd_input(&c, (size_t)c.C, 0.5f, 1.5f);
    x[3] = 1e-3f; /* a small element among large ones */
    c.nout = (size_t)c.N * c.C;
    c.d_out = dnew(c.d, c.nout), c.d_aux = dnew(c.d, (size_t)c.N);
    float *lw = hf(c.nout);
    fill(lw, c.nout, -1, 1);
    c.lw = lw;
    fd_loss(&c);
    double *rout = hd(c.nout), *rrstd = hd((size_t)c.N);
    rmsnorm_oracle(x, w, c.N, c.C, c.eps, rout, rrstd);
    check_close("rmsnorm out", fetch(c.d, c.d_out, c.nout), rout, NULL, c.nout, FWD_TOL);
    check_close("rmsnorm rstd", fetch(c.d, c.d_aux, (size_t)c.N), rrstd, NULL, (size_t)c.N, FWD_TOL);
    /* a tiny row: eps dominates (rstd = 1/sqrt(eps + mean x^2)) */
    float tiny[24], *d_t = dnew(c.d, 24), *d_o = dnew(c.d, 24), *d_r = dnew(c.d, 1);
    for (int i = 0; i < 24; i++) tiny[i] = 1e-4f;
    put(c.d, d_t, tiny, sizeof tiny);
    shs_rmsnorm_forward(c.d, d_o, d_r, d_t, c.dv[1], 1, 24, 1e-6f);
    double want_r = 1.0 / sqrt(1e-8 + (double)1e-6f);
    check_close("rmsnorm rstd eps", fetch(c.d, d_r, 1), &want_r, NULL, 1, FWD_TOL);
    /* backward: finite differences, accumulate */
    size_t n[2] = {c.nout, (size_t)c.C};
    float *d_g[2] = {dnew(c.d, n[0]), dnew(c.d, n[1])}, *g[2];
    backward_twice(&c, rms_bwd, 2, d_g, n, g);
    check_fd("rmsnorm dinp", fd_loss, &c, x, n[0], g[0]);
    check_fd("rmsnorm dweight", fd_loss, &c, w, n[1], g[1]);
}

/* ---- RoPE -------------------------------------------------------------------------- */

/* The rotation of the first R channels with the angle (float)pos *
 * inv_freq[i] formed in f32 (the contract), cos and sin in f64 times m; the
 * channels [R, HD) copied. */
static void rope_oracle(const float *x, const int32_t *pos, const float *inv_freq, int R, double m, int B, int T, int NH,
                        int HD, double *out) {
    int half = R / 2;
    for (int bt = 0; bt < B * T; bt++)
        for (int h = 0; h < NH; h++) {
            for (int i = 0; i < half; i++) {
                float p = (float)(pos ? pos[bt] : bt % T);
                double a = (double)(p * inv_freq[i]);
                size_t o = ((size_t)bt * NH + h) * HD + i;
                out[o] = (x[o] * cos(a) - x[o + half] * sin(a)) * m;
                out[o + half] = (x[o + half] * cos(a) + x[o] * sin(a)) * m;
            }
            for (int j = R; j < HD; j++) out[((size_t)bt * NH + h) * HD + j] = x[((size_t)bt * NH + h) * HD + j];
        }
}

static void rope_fwd(fd_ctx_t *c) { shs_rope_forward(c->d, c->d_out, c->dv[0], c->d_pos, &c->rope, c->B, c->T, c->NH, c->HD); }
static void rope_bwd(fd_ctx_t *c, float **g) {
    shs_rope_backward(c->d, g[0], dput(c->d, c->lw, c->nout), c->d_pos, &c->rope, c->B, c->T, c->NH, c->HD);
}

static void test_rope(void **state) {
    seed(22);
    fd_ctx_t c = {.d = new_dev(1), .B = 2, .T = 5, .NH = 3, .HD = 8, .fwd = rope_fwd};
    size_t n = (size_t)c.B * c.T * c.NH * c.HD, bt = (size_t)c.B * c.T;
    float *x = fd_input(&c, n, -2, 2);
    float inv[4];
    for (int i = 0; i < 4; i++) inv[i] = (float)pow(10000.0, -2.0 * i / c.HD);
    int32_t pos[10] = {0, 3, 1, 700, 2, 9, 9, 0, 41, 5}, post[10];
    for (int i = 0; i < 10; i++) post[i] = i % c.T;
    c.d_aux = dput(c.d, inv, 4), c.d_pos = dput_i32(c.d, pos, bt);
    c.rope = (shs_rope_t){c.d_aux, 0, 0};
    fd_output(&c, n);
    double *ref = hd(n);
    rope_oracle(x, pos, inv, c.HD, 1.0, c.B, c.T, c.NH, c.HD, ref);
    float *out = fetch(c.d, c.d_out, n);
    check_close("rope out", out, ref, NULL, n, FWD_TOL);
    /* in place: the same bits */
    float *d_x = dput(c.d, x, n);
    shs_rope_forward(c.d, d_x, d_x, c.d_pos, &c.rope, c.B, c.T, c.NH, c.HD);
    assert_memory_equal(fetch(c.d, d_x, n), out, n * sizeof(float));
    /* positions NULL == positions t, bit for bit */
    float *d_o1 = dnew(c.d, n), *d_o2 = dnew(c.d, n);
    shs_rope_forward(c.d, d_o1, c.dv[0], NULL, &c.rope, c.B, c.T, c.NH, c.HD);
    shs_rope_forward(c.d, d_o2, c.dv[0], dput_i32(c.d, post, bt), &c.rope, c.B, c.T, c.NH, c.HD);
    float *o1 = fetch(c.d, d_o1, n);
    assert_memory_equal(o1, fetch(c.d, d_o2, n), n * sizeof(float));
    assert_memory_not_equal(o1, out, n * sizeof(float)); /* and positions matter */
    /* a known angle: inv_freq = pi/2, position 1 -> (x0, x1) becomes (-x1, x0); position 2 -> -x */
    float quarter[4];
    int32_t p1[10], p2[10];
    for (int i = 0; i < 4; i++) quarter[i] = (float)(M_PI / 2);
    for (int i = 0; i < 10; i++) p1[i] = 1, p2[i] = 2;
    float *d_q = dput(c.d, quarter, 4);
    double *want = hd(n);
    shs_rope_forward(c.d, d_o1, c.dv[0], dput_i32(c.d, p1, bt), &(shs_rope_t){d_q, 0, 0}, c.B, c.T, c.NH, c.HD);
    for (size_t r = 0; r < n / c.HD; r++)
        for (int i = 0; i < 4; i++) {
            want[r * 8 + i] = -x[r * 8 + i + 4];
            want[r * 8 + i + 4] = x[r * 8 + i];
        }
    check_close("rope pi/2", fetch(c.d, d_o1, n), want, NULL, n, 1e-6);
    shs_rope_forward(c.d, d_o1, c.dv[0], dput_i32(c.d, p2, bt), &(shs_rope_t){d_q, 0, 0}, c.B, c.T, c.NH, c.HD);
    for (size_t i = 0; i < n; i++) want[i] = -x[i];
    check_close("rope pi", fetch(c.d, d_o1, n), want, NULL, n, 1e-6);
    /* backward: finite differences, accumulate, and R^T R = 1 */
    float *d_g[1] = {dnew(c.d, n)}, *g[1];
    backward_twice(&c, rope_bwd, 1, d_g, &n, g);
    check_fd("rope dinp", fd_loss, &c, x, n, g[0]);
    fd_loss(&c); /* the forward of x itself (check_fd left the last perturbation's) */
    zero(c.d, d_g[0], n * sizeof(float));
    shs_rope_backward(c.d, d_g[0], c.d_out, c.d_pos, &c.rope, c.B, c.T, c.NH, c.HD);
    double *xd = hd(n);
    for (size_t i = 0; i < n; i++) xd[i] = x[i];
    check_close("rope backward(forward(x))", fetch(c.d, d_g[0], n), xd, NULL, n, 1e-6);
}

/* Partial rotation (Phi-4-mini's partial_rotary_factor: R = 6 of HD = 10)
 * with LongRoPE's attention factor m = 1.19: forward against the oracle,
 * the pass-through channels copied bit for bit (in place too), backward by
 * finite differences with dout passed through exactly on [R, HD). */
static void test_rope_partial_scaled(void **state) {
    seed(24);
    fd_ctx_t c = {.d = new_dev(1), .B = 2, .T = 4, .NH = 2, .HD = 10, .fwd = rope_fwd};
    enum { R = 6 };
    size_t n = (size_t)c.B * c.T * c.NH * c.HD, rows = n / c.HD;
    float *x = fd_input(&c, n, -2, 2), inv[R / 2] = {1.0f, 0.1f, 0.01f};
    c.d_aux = dput(c.d, inv, R / 2);
    c.rope = (shs_rope_t){c.d_aux, R, 1.19f};
    float *lw = fd_output(&c, n);
    double *ref = hd(n);
    rope_oracle(x, NULL, inv, R, (double)1.19f, c.B, c.T, c.NH, c.HD, ref);
    float *out = fetch(c.d, c.d_out, n);
    check_close("partial rope out", out, ref, NULL, n, FWD_TOL);
    for (size_t r = 0; r < rows; r++) check_bits("partial rope pass", out + r * c.HD + R, x + r * c.HD + R, c.HD - R);
    float *d_x = dput(c.d, x, n);
    shs_rope_forward(c.d, d_x, d_x, NULL, &c.rope, c.B, c.T, c.NH, c.HD);
    check_bits("partial rope in place", fetch(c.d, d_x, n), out, n);
    float *d_g[1] = {dnew(c.d, n)}, *g[1];
    backward_twice(&c, rope_bwd, 1, d_g, &n, g);
    check_fd("partial rope dinp", fd_loss, &c, x, n, g[0]);
    for (size_t r = 0; r < rows; r++) check_bits("partial rope dpass", g[0] + r * c.HD + R, lw + r * c.HD + R, c.HD - R);
}

/* ---- SwiGLU and GeGLU ---------------------------------------------------------------- */

static double silu64(double g) { return g / (1.0 + exp(-g)); }
static double dsilu64(double g) { /* d silu = sig + g sig (1 - sig) */
    double sig = 1.0 / (1.0 + exp(-g));
    return sig + g * sig * (1.0 - sig);
}
static double gelu64(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
static double dgelu64(double x) { return (gelu64(x + 1e-6) - gelu64(x - 1e-6)) / 2e-6; } /* central, step 1e-6 */

static void swiglu_fwd(fd_ctx_t *c) { shs_swiglu_forward(c->d, c->d_out, c->dv[0], c->dv[1], c->nout); }
static void swiglu_bwd(fd_ctx_t *c, float **g) {
    shs_swiglu_backward(c->d, g[0], g[1], dput(c->d, c->lw, c->nout), c->dv[0], c->dv[1], c->nout);
}
static void geglu_fwd(fd_ctx_t *c) { shs_geglu_forward(c->d, c->d_out, c->dv[0], c->dv[1], c->nout); }
static void geglu_bwd(fd_ctx_t *c, float **g) {
    shs_geglu_backward(c->d, g[0], g[1], dput(c->d, c->lw, c->nout), c->dv[0], c->dv[1], c->nout);
}

typedef struct {
    const char *name;
    unsigned seed;
    float gate_range, saturated;       /* gates uniform in +-range; gate[0], gate[1] = -+saturated */
    double (*act)(double), (*dact)(double);
    void (*fwd)(fd_ctx_t *);
    void (*bwd)(fd_ctx_t *, float **);
    double dgate_tol;                  /* against dact (GeGLU's by differences: 1e-5) */
} glu_case_t;

/* out = act(gate) * up against f64 (saturated ends and 0 included), the
 * gradients against f64's and, away from the saturated ends, by finite
 * differences of the kernel's own forward. */
static void check_glu(const glu_case_t *k) {
    seed(k->seed);
    fd_ctx_t c = {.d = new_dev(1), .nout = 300, .fwd = k->fwd};
    size_t n = c.nout;
    float *gate = fd_input(&c, n, -k->gate_range, k->gate_range), *up = fd_input(&c, n, -2, 2);
    gate[0] = -k->saturated, gate[1] = k->saturated, gate[2] = 0.0f;
    float *lw = fd_output(&c, n);
    double *ref = hd(n), *rg = hd(n), *ru = hd(n);
    for (size_t i = 0; i < n; i++) {
        double g = gate[i];
        ref[i] = k->act(g) * up[i];
        rg[i] = (double)lw[i] * up[i] * k->dact(g);
        ru[i] = (double)lw[i] * k->act(g);
    }
    char what[64];
    snprintf(what, sizeof what, "%s out", k->name);
    check_close(what, fetch(c.d, c.d_out, n), ref, NULL, n, FWD_TOL);
    size_t ns[2] = {n, n};
    float *d_g[2] = {dnew(c.d, n), dnew(c.d, n)}, *g[2];
    backward_twice(&c, k->bwd, 2, d_g, ns, g);
    snprintf(what, sizeof what, "%s dgate vs f64", k->name);
    check_close(what, g[0], rg, NULL, n, k->dgate_tol);
    snprintf(what, sizeof what, "%s dup vs f64", k->name);
    check_close(what, g[1], ru, NULL, n, FWD_TOL);
    gate[0] = -3.0f, gate[1] = 3.0f; /* finite differences away from the saturated ends */
    put(c.d, c.dv[0], gate, n * sizeof(float));
    backward_twice(&c, k->bwd, 2, d_g, ns, g);
    snprintf(what, sizeof what, "%s dgate", k->name);
    check_fd(what, fd_loss, &c, gate, n, g[0]);
    snprintf(what, sizeof what, "%s dup", k->name);
    check_fd(what, fd_loss, &c, up, n, g[1]);
}

/* SwiGLU: exp overflow and underflow at gates -+100. */
static void test_swiglu(void **state) {
    check_glu(&(glu_case_t){"swiglu", 23, 6.0f, 100.0f, silu64, dsilu64, swiglu_fwd, swiglu_bwd, FWD_TOL});
}

/* GeGLU: torch's gelu approximate='tanh' times up, tanh saturated at -+30. */
static void test_geglu(void **state) {
    check_glu(&(glu_case_t){"geglu", 25, 5.0f, 30.0f, gelu64, dgelu64, geglu_fwd, geglu_bwd, 1e-5});
}

/* ---- soft capping ---------------------------------------------------------------------- */

static void softcap_fwd(fd_ctx_t *c) { shs_softcap_forward(c->d, c->d_out, c->dv[0], c->eps, c->nout); }

/* Soft capping at 30 (Gemma 2's final_logit_softcapping): out = 30 tanh(x /
 * 30) against f64, bounded by the cap, in place the same bits; its backward
 * (from the output, overwriting) against f64's 1 - tanh^2 and by finite
 * differences, in place on dout too. */
static void test_softcap(void **state) {
    seed(26);
    fd_ctx_t c = {.d = new_dev(1), .nout = 200, .eps = 30.0f, .fwd = softcap_fwd};
    size_t n = c.nout;
    float *x = fd_input(&c, n, -60, 60);
    x[0] = 1e4f, x[1] = -1e4f, x[2] = 0.0f;
    float *lw = fd_output(&c, n);
    float *out = fetch(c.d, c.d_out, n);
    double *ref = hd(n), *rd = hd(n);
    for (size_t i = 0; i < n; i++) {
        double t = tanh((double)x[i] / 30.0);
        ref[i] = 30.0 * t, rd[i] = (double)lw[i] * (1.0 - t * t);
        assert_true(fabsf(out[i]) <= 30.0f);
    }
    check_close("softcap out", out, ref, NULL, n, FWD_TOL);
    float *d_x = dput(c.d, x, n);
    shs_softcap_forward(c.d, d_x, d_x, 30.0f, n);
    check_bits("softcap in place", fetch(c.d, d_x, n), out, n);
    float *d_dy = dput(c.d, lw, n), *d_dx = dnew(c.d, n);
    shs_softcap_backward(c.d, d_dx, d_dy, c.d_out, 30.0f, n);
    float *g = fetch(c.d, d_dx, n);
    check_close("softcap dinp vs f64", g, rd, NULL, n, 1e-5);
    shs_softcap_backward(c.d, d_dy, d_dy, c.d_out, 30.0f, n); /* in place on dout */
    check_bits("softcap backward in place", fetch(c.d, d_dy, n), g, n);
    x[0] = 50.0f, x[1] = -50.0f;
    fd_loss(&c);
    shs_softcap_backward(c.d, d_dx, dput(c.d, lw, n), c.d_out, 30.0f, n);
    check_fd("softcap dinp", fd_loss, &c, x, n, fetch(c.d, d_dx, n));
}

/* ---- grouped-query attention ----------------------------------------------------------- */

/* f64 causal GQA with document masks, sliding windows and soft caps (HF:
 * repeat_kv, then softmax(cap(q k^T scale) + mask) v; a key t2 is masked
 * unless t2 <= t, t - t2 < W when W > 0, and of t's document).
 * out (B,T,NH*HD), att (B,NH,T,T), lse (B,NH,T). o: scale 0 means
 * 1/sqrt(HD) computed here in f64. */
static void gqa_oracle(const float *q, const float *k, const float *v, const int32_t *doc,
                       const shs_attention_opts_t *o, int B, int T, int NH, int NKV, int HD, double *out, double *att,
                       double *lse) {
    double scale = o && o->scale ? (double)o->scale : 1.0 / sqrt((double)HD), *s = malloc(sizeof(double) * T);
    double cap = o ? o->softcap : 0;
    int W = o ? o->window : 0;
    assert_non_null(s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int kvh = h / (NH / NKV);
            for (int t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0;
                for (int t2 = 0; t2 < T; t2++) {
                    int ok = t2 <= t && (!doc || doc[b * T + t2] == doc[b * T + t]) && (!W || t - t2 < W);
                    s[t2] = -INFINITY;
                    if (!ok) continue;
                    double dot = 0;
                    for (int i = 0; i < HD; i++)
                        dot += (double)q[((size_t)(b * T + t) * NH + h) * HD + i] *
                               k[((size_t)(b * T + t2) * NKV + kvh) * HD + i];
                    s[t2] = cap > 0 ? cap * tanh(dot * scale / cap) : dot * scale;
                    mx = fmax(mx, s[t2]);
                }
                for (int t2 = 0; t2 < T; t2++) sum += exp(s[t2] - mx);
                size_t row = ((size_t)b * NH + h) * T + t;
                if (lse) lse[row] = mx + log(sum);
                if (att)
                    for (int t2 = 0; t2 < T; t2++) att[row * T + t2] = exp(s[t2] - mx) / sum;
                for (int i = 0; i < HD; i++) {
                    double acc = 0;
                    for (int t2 = 0; t2 < T; t2++)
                        acc += exp(s[t2] - mx) / sum * v[((size_t)(b * T + t2) * NKV + kvh) * HD + i];
                    out[((size_t)(b * T + t) * NH + h) * HD + i] = acc;
                }
            }
        }
    free(s);
}

static void gqa_fwd(fd_ctx_t *c) {
    shs_attention_gqa_forward(c->d, c->d_out, c->d_aux, c->dv[0], c->dv[1], c->dv[2], c->d_doc, &c->opt, c->B, c->T,
                              c->NH, c->NKV, c->HD);
}
static void gqa_bwd(fd_ctx_t *c, float **g) {
    size_t natt = (size_t)c->B * c->NH * c->T * c->T;
    shs_attention_gqa_backward(c->d, g[0], g[1], g[2], dnew(c->d, natt), dput(c->d, c->lw, c->nout), c->dv[0],
                               c->dv[1], c->dv[2], c->d_aux, &c->opt, c->B, c->T, c->NH, c->NKV, c->HD);
}
static void gqa_fwd_flash(fd_ctx_t *c) {
    shs_attention_gqa_forward_flash(c->d, c->d_out, c->d_aux, c->dv[0], c->dv[1], c->dv[2], c->d_doc, &c->opt, c->B,
                                    c->T, c->NH, c->NKV, c->HD);
}
static void gqa_bwd_flash(fd_ctx_t *c, float **g) {
    shs_attention_gqa_backward_flash(c->d, g[0], g[1], g[2], dput(c->d, c->lw, c->nout), c->dv[0], c->dv[1],
                                     c->dv[2], c->d_out, c->d_aux, c->d_doc, &c->opt, c->B, c->T, c->NH, c->NKV, c->HD);
}

/* One GQA shape, eager or flash, with attention options o (NULL: none):
 * forward against the oracle, backward by finite differences and the
 * accumulate contract. */
static void gqa_case(int NH, int NKV, int with_doc, int flash, const shs_attention_opts_t *o) {
    seed(30 + NH * 7 + NKV * 3 + with_doc + 11 * flash + (o ? 5 * o->window : 0));
    fd_ctx_t c = {.d = new_dev(1), .B = 2, .T = 7, .NH = NH, .NKV = NKV, .HD = 4};
    if (o) c.opt = *o;
    c.fwd = flash ? gqa_fwd_flash : gqa_fwd;
    size_t nq = (size_t)c.B * c.T * NH * c.HD, nkv = (size_t)c.B * c.T * NKV * c.HD;
    size_t natt = (size_t)c.B * NH * c.T * c.T, nrow = (size_t)c.B * NH * c.T;
    float *q = fd_input(&c, nq, -1.5f, 1.5f), *k = fd_input(&c, nkv, -1.5f, 1.5f), *v = fd_input(&c, nkv, -1, 1);
    static const int32_t doc[14] = {0, 0, 0, 1, 1, 1, 1, 4, 4, 4, 4, 4, 9, 9};
    if (with_doc) c.d_doc = dput_i32(c.d, doc, 14);
    c.nout = nq, c.d_out = dnew(c.d, nq), c.d_aux = dnew(c.d, flash ? nrow : natt);
    float *lw = hf(nq);
    fill(lw, nq, -1, 1);
    c.lw = lw;
    fd_loss(&c);
    double *rout = hd(nq), *ratt = hd(natt), *rlse = hd(nrow);
    gqa_oracle(q, k, v, with_doc ? doc : NULL, o, c.B, c.T, NH, NKV, c.HD, rout, ratt, rlse);
    check_close("gqa out", fetch(c.d, c.d_out, nq), rout, NULL, nq, FWD_TOL);
    if (flash)
        check_close("gqa lse", fetch(c.d, c.d_aux, nrow), rlse, NULL, nrow, FWD_TOL);
    else
        check_close("gqa att", fetch(c.d, c.d_aux, natt), ratt, NULL, natt, FWD_TOL); /* masked: exactly 0 */
    size_t n[3] = {nq, nkv, nkv};
    float *d_g[3] = {dnew(c.d, nq), dnew(c.d, nkv), dnew(c.d, nkv)}, *g[3];
    backward_twice(&c, flash ? gqa_bwd_flash : gqa_bwd, 3, d_g, n, g);
    check_fd("gqa dq", fd_loss, &c, q, nq, g[0]);
    check_fd("gqa dk", fd_loss, &c, k, nkv, g[1]);
    check_fd("gqa dv", fd_loss, &c, v, nkv, g[2]);
}

/* Window 3 (keys t-2..t), a soft cap of 1.5 on scores up to ~2.7 (scale
 * 0.3: the cap bends them), both, and Gemma's explicit scale alone. */
static const shs_attention_opts_t WIN = {.window = 3}, CAP = {.scale = 0.3f, .softcap = 1.5f},
                                  WINCAP = {.scale = 0.3f, .softcap = 1.5f, .window = 3}, SCALE = {.scale = 0.7f};

static void test_gqa_eager_mha(void **state) { gqa_case(4, 4, 0, 0, NULL); }
static void test_gqa_eager_gqa_docs(void **state) { gqa_case(4, 2, 1, 0, NULL); }
static void test_gqa_eager_mqa_docs(void **state) { gqa_case(6, 1, 1, 0, NULL); }
static void test_gqa_flash_mha_docs(void **state) { gqa_case(4, 4, 1, 1, NULL); }
static void test_gqa_flash_gqa(void **state) { gqa_case(4, 2, 0, 1, NULL); }
static void test_gqa_flash_mqa_docs(void **state) { gqa_case(6, 1, 1, 1, NULL); }
static void test_gqa_eager_window_docs(void **state) { gqa_case(4, 2, 1, 0, &WIN); }
static void test_gqa_flash_window(void **state) { gqa_case(4, 2, 0, 1, &WIN); }
static void test_gqa_eager_softcap(void **state) { gqa_case(4, 2, 0, 0, &CAP); }
static void test_gqa_flash_softcap_docs(void **state) { gqa_case(6, 1, 1, 1, &CAP); }
static void test_gqa_eager_window_softcap(void **state) { gqa_case(4, 4, 1, 0, &WINCAP); }
static void test_gqa_flash_window_softcap(void **state) { gqa_case(4, 2, 1, 1, &WINCAP); }
static void test_gqa_scale(void **state) {
    gqa_case(4, 2, 0, 0, &SCALE);
    gqa_case(4, 2, 0, 1, &SCALE);
}

/* Flash against eager at T = 150 > 2 blocks of SHS_FLASH_BLOCK, split at 70
 * so that key 5 is invisible to the queries from 70 on: by a document
 * starting at 70 (the first block wholly masked for the second document's
 * queries), or by a window of 65 (with a soft cap: the flash blocks then
 * start at t - 64, off the 64-grid). A key and value 5 perturbed change
 * nothing from row 70 on, bit for bit, in either kernel's outputs and input
 * gradients, and change rows before it. */
static void flash_vs_eager(const shs_attention_opts_t *o, int use_doc) {
    shs_device_t *d = new_dev(1);
    seed(40);
    enum { B = 1, T = 150, NH = 4, NKV = 2, HD = 8, SPLIT = 70 };
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, natt = (size_t)B * NH * T * T;
    size_t nrow = (size_t)B * NH * T;
    float *q = hf(nq), *k = hf(nkv), *v = hf(nkv), *dy = hf(nq);
    fill(q, nq, -2, 2), fill(k, nkv, -2, 2), fill(v, nkv, -1, 1), fill(dy, nq, -1, 1);
    int32_t doc[T];
    for (int t = 0; t < T; t++) doc[t] = t < SPLIT ? 3 : 8;
    float *d_q = dput(d, q, nq), *d_k = dput(d, k, nkv), *d_v = dput(d, v, nkv), *d_dy = dput(d, dy, nq);
    int32_t *d_doc = use_doc ? dput_i32(d, doc, T) : NULL;
    float *d_eo = dnew(d, nq), *d_att = dnew(d, natt), *d_datt = dnew(d, natt), *d_fo = dnew(d, nq);
    float *d_lse = dnew(d, nrow), *d_g[6];
    for (int i = 0; i < 6; i++) d_g[i] = dnew(d, i % 3 ? nkv : nq);
    float *res[2][8];
    for (int pass = 0; pass < 2; pass++) {
        if (pass) { /* perturb key and value 5 */
            for (int i = 0; i < NKV * HD; i++) k[5 * NKV * HD + i] += 0.75f, v[5 * NKV * HD + i] -= 0.5f;
            put(d, d_k, k, nkv * sizeof(float)), put(d, d_v, v, nkv * sizeof(float));
        }
        for (int i = 0; i < 6; i++) zero(d, d_g[i], (i % 3 ? nkv : nq) * sizeof(float));
        shs_attention_gqa_forward(d, d_eo, d_att, d_q, d_k, d_v, d_doc, o, B, T, NH, NKV, HD);
        shs_attention_gqa_backward(d, d_g[0], d_g[1], d_g[2], d_datt, d_dy, d_q, d_k, d_v, d_att, o, B, T, NH, NKV,
                                   HD);
        shs_attention_gqa_forward_flash(d, d_fo, d_lse, d_q, d_k, d_v, d_doc, o, B, T, NH, NKV, HD);
        shs_attention_gqa_backward_flash(d, d_g[3], d_g[4], d_g[5], d_dy, d_q, d_k, d_v, d_fo, d_lse, d_doc, o, B, T,
                                         NH, NKV, HD);
        res[pass][0] = fetch(d, d_eo, nq), res[pass][1] = fetch(d, d_fo, nq);
        for (int i = 0; i < 6; i++) res[pass][2 + i] = fetch(d, d_g[i], i % 3 ? nkv : nq);
    }
    /* pass 1 (perturbed) against the oracle and across kernels */
    double *rout = hd(nq), *e = hd(nkv > nq ? nkv : nq);
    gqa_oracle(q, k, v, use_doc ? doc : NULL, o, B, T, NH, NKV, HD, rout, NULL, NULL);
    check_close("eager out vs f64", res[1][0], rout, NULL, nq, FWD_TOL);
    check_close("flash out vs f64", res[1][1], rout, NULL, nq, FWD_TOL);
    for (size_t i = 0; i < nq; i++) e[i] = res[1][0][i];
    check_close("flash out vs eager", res[1][1], e, NULL, nq, 2e-6);
    for (int g = 0; g < 3; g++) {
        size_t n = g ? nkv : nq;
        for (size_t i = 0; i < n; i++) e[i] = res[1][2 + g][i];
        check_close("flash grad vs eager", res[1][5 + g], e, NULL, n, FWD_TOL);
    }
    /* from row SPLIT on: unchanged bits; before it: changed */
    size_t q2 = (size_t)SPLIT * NH * HD, kv2 = (size_t)SPLIT * NKV * HD;
    for (int r = 0; r < 8; r++) {
        int is_kv = r >= 2 && (r - 2) % 3 != 0;
        size_t off = is_kv ? kv2 : q2, n = is_kv ? nkv : nq;
        assert_memory_equal(res[1][r] + off, res[0][r] + off, (n - off) * sizeof(float));
        assert_memory_not_equal(res[1][r], res[0][r], off * sizeof(float));
    }
}

static void test_gqa_flash_vs_eager_docs(void **state) { flash_vs_eager(NULL, 1); }
static void test_gqa_flash_vs_eager_window(void **state) {
    flash_vs_eager(&(shs_attention_opts_t){.softcap = 5.0f, .window = 65}, 0);
}

/* A window as long as the context (Qwen2.5's sliding_window 131072 with a
 * shorter run) is no window: the same bits as none, eager and flash. */
static void test_gqa_window_at_least_context(void **state) {
    shs_device_t *d = new_dev(2);
    seed(43);
    enum { B = 2, T = 9, NH = 4, NKV = 2, HD = 4 };
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, natt = (size_t)B * NH * T * T;
    float *q = hf(nq), *k = hf(nkv), *v = hf(nkv);
    fill(q, nq, -2, 2), fill(k, nkv, -2, 2), fill(v, nkv, -1, 1);
    float *d_q = dput(d, q, nq), *d_k = dput(d, k, nkv), *d_v = dput(d, v, nkv), *d_o = dnew(d, nq);
    float *d_a = dnew(d, natt);
    const shs_attention_opts_t none = {0}, full = {.window = T}, big = {.window = 1 << 20};
    const shs_attention_opts_t *os[3] = {&none, &full, &big};
    float *got[2][3];
    for (int i = 0; i < 3; i++) {
        shs_attention_gqa_forward(d, d_o, d_a, d_q, d_k, d_v, NULL, os[i], B, T, NH, NKV, HD);
        got[0][i] = fetch(d, d_o, nq);
        shs_attention_gqa_forward_flash(d, d_o, d_a, d_q, d_k, d_v, NULL, os[i], B, T, NH, NKV, HD);
        got[1][i] = fetch(d, d_o, nq);
    }
    for (int f = 0; f < 2; f++) check_bits("window >= T", got[f][1], got[f][0], nq), check_bits("huge window", got[f][2], got[f][0], nq);
    const shs_attention_opts_t w1 = {.window = 1}; /* a window of 1: each query sees itself, out = v */
    shs_attention_gqa_forward(d, d_o, d_a, d_q, d_k, d_v, NULL, &w1, B, T, NH, NKV, HD);
    float *o = fetch(d, d_o, nq);
    for (int bt = 0; bt < B * T; bt++)
        for (int h = 0; h < NH; h++) check_bits("window 1", o + ((size_t)bt * NH + h) * HD, v + ((size_t)bt * NKV + h / 2) * HD, HD);
}

/* ---- encoder without position embedding ---------------------------------------------- */

static void test_encoder_no_wpe(void **state) {
    shs_device_t *d = new_dev(2);
    seed(42);
    enum { B = 2, T = 5, C = 6, V = 4 };
    float wte[V * C], dy[B * T * C], pre[V * C];
    fill(wte, V * C, -1, 1), fill_wide(dy, B * T * C), fill(pre, V * C, -1, 1);
    int32_t tok[B * T] = {1, 3, 1, 0, 1, 2, 3, 3, 1, 0};
    float *d_out = dnew(d, B * T * C), *d_dwte = dput(d, pre, V * C);
    int32_t *d_tok = dput_i32(d, tok, B * T);
    shs_encoder_forward(d, d_out, d_tok, dput(d, wte, V * C), NULL, B, T, C);
    float *out = fetch(d, d_out, B * T * C);
    for (int bt = 0; bt < B * T; bt++) assert_memory_equal(out + bt * C, wte + tok[bt] * C, C * sizeof(float));
    shs_encoder_backward(d, d_dwte, NULL, dput(d, dy, B * T * C), d_tok, B, T, C);
    /* each row: the f32 sum of its positions' dout in increasing (b,t), added once */
    float want[V * C];
    for (int vv = 0; vv < V; vv++)
        for (int c = 0; c < C; c++) {
            float s = 0.0f;
            for (int bt = 0; bt < B * T; bt++)
                if (tok[bt] == vv) s += dy[bt * C + c];
            want[vv * C + c] = pre[vv * C + c] + s;
        }
    assert_memory_equal(fetch(d, d_dwte, V * C), want, sizeof want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rmsnorm, teardown),
        cmocka_unit_test_teardown(test_rope, teardown),
        cmocka_unit_test_teardown(test_rope_partial_scaled, teardown),
        cmocka_unit_test_teardown(test_swiglu, teardown),
        cmocka_unit_test_teardown(test_geglu, teardown),
        cmocka_unit_test_teardown(test_softcap, teardown),
        cmocka_unit_test_teardown(test_gqa_eager_mha, teardown),
        cmocka_unit_test_teardown(test_gqa_eager_gqa_docs, teardown),
        cmocka_unit_test_teardown(test_gqa_eager_mqa_docs, teardown),
        cmocka_unit_test_teardown(test_gqa_flash_mha_docs, teardown),
        cmocka_unit_test_teardown(test_gqa_flash_gqa, teardown),
        cmocka_unit_test_teardown(test_gqa_flash_mqa_docs, teardown),
        cmocka_unit_test_teardown(test_gqa_eager_window_docs, teardown),
        cmocka_unit_test_teardown(test_gqa_flash_window, teardown),
        cmocka_unit_test_teardown(test_gqa_eager_softcap, teardown),
        cmocka_unit_test_teardown(test_gqa_flash_softcap_docs, teardown),
        cmocka_unit_test_teardown(test_gqa_eager_window_softcap, teardown),
        cmocka_unit_test_teardown(test_gqa_flash_window_softcap, teardown),
        cmocka_unit_test_teardown(test_gqa_scale, teardown),
        cmocka_unit_test_teardown(test_gqa_flash_vs_eager_docs, teardown),
        cmocka_unit_test_teardown(test_gqa_flash_vs_eager_window, teardown),
        cmocka_unit_test_teardown(test_gqa_window_at_least_context, teardown),
        cmocka_unit_test_teardown(test_encoder_no_wpe, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
