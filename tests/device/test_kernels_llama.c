/* test_kernels_llama.c - the Llama-family kernels of device.h (RMSNorm,
 * RoPE, SwiGLU, grouped-query attention eager and flash with document masks,
 * the encoder without position embedding) on the CPU backend, against
 * float64 oracles written here (plain loops from the papers' / Hugging
 * Face's formulas, independent of the kernels), by finite differences, and
 * their meta-device counts against the closed forms of device_meta.c's
 * header, recomputed here by hand.
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

/* The rotation with the angle (float)pos * inv_freq[i] formed in f32 (the
 * contract), cos and sin in f64. */
static void rope_oracle(const float *x, const int32_t *pos, const float *inv_freq, int B, int T, int NH, int HD,
                        double *out) {
    int half = HD / 2;
    for (int bt = 0; bt < B * T; bt++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < half; i++) {
                float p = (float)(pos ? pos[bt] : bt % T);
                double a = (double)(p * inv_freq[i]);
                size_t o = ((size_t)bt * NH + h) * HD + i;
                out[o] = x[o] * cos(a) - x[o + half] * sin(a);
                out[o + half] = x[o + half] * cos(a) + x[o] * sin(a);
            }
}

static void rope_fwd(fd_ctx_t *c) {
    shs_rope_forward(c->d, c->d_out, c->dv[0], c->d_pos, c->d_aux, c->B, c->T, c->NH, c->HD);
}
static void rope_bwd(fd_ctx_t *c, float **g) {
    shs_rope_backward(c->d, g[0], dput(c->d, c->lw, c->nout), c->d_pos, c->d_aux, c->B, c->T, c->NH, c->HD);
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
    c.nout = n, c.d_out = dnew(c.d, n);
    float *lw = hf(n);
    fill(lw, n, -1, 1);
    c.lw = lw;
    fd_loss(&c);
    double *ref = hd(n);
    rope_oracle(x, pos, inv, c.B, c.T, c.NH, c.HD, ref);
    float *out = fetch(c.d, c.d_out, n);
    check_close("rope out", out, ref, NULL, n, FWD_TOL);
    /* in place: the same bits */
    float *d_x = dput(c.d, x, n);
    shs_rope_forward(c.d, d_x, d_x, c.d_pos, c.d_aux, c.B, c.T, c.NH, c.HD);
    assert_memory_equal(fetch(c.d, d_x, n), out, n * sizeof(float));
    /* positions NULL == positions t, bit for bit */
    float *d_o1 = dnew(c.d, n), *d_o2 = dnew(c.d, n);
    shs_rope_forward(c.d, d_o1, c.dv[0], NULL, c.d_aux, c.B, c.T, c.NH, c.HD);
    shs_rope_forward(c.d, d_o2, c.dv[0], dput_i32(c.d, post, bt), c.d_aux, c.B, c.T, c.NH, c.HD);
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
    shs_rope_forward(c.d, d_o1, c.dv[0], dput_i32(c.d, p1, bt), d_q, c.B, c.T, c.NH, c.HD);
    for (size_t r = 0; r < n / c.HD; r++)
        for (int i = 0; i < 4; i++) {
            want[r * 8 + i] = -x[r * 8 + i + 4];
            want[r * 8 + i + 4] = x[r * 8 + i];
        }
    check_close("rope pi/2", fetch(c.d, d_o1, n), want, NULL, n, 1e-6);
    shs_rope_forward(c.d, d_o1, c.dv[0], dput_i32(c.d, p2, bt), d_q, c.B, c.T, c.NH, c.HD);
    for (size_t i = 0; i < n; i++) want[i] = -x[i];
    check_close("rope pi", fetch(c.d, d_o1, n), want, NULL, n, 1e-6);
    /* backward: finite differences, accumulate, and R^T R = 1 */
    float *d_g[1] = {dnew(c.d, n)}, *g[1];
    backward_twice(&c, rope_bwd, 1, d_g, &n, g);
    check_fd("rope dinp", fd_loss, &c, x, n, g[0]);
    fd_loss(&c); /* the forward of x itself (check_fd left the last perturbation's) */
    zero(c.d, d_g[0], n * sizeof(float));
    shs_rope_backward(c.d, d_g[0], c.d_out, c.d_pos, c.d_aux, c.B, c.T, c.NH, c.HD);
    double *xd = hd(n);
    for (size_t i = 0; i < n; i++) xd[i] = x[i];
    check_close("rope backward(forward(x))", fetch(c.d, d_g[0], n), xd, NULL, n, 1e-6);
}

/* ---- SwiGLU -------------------------------------------------------------------------- */

static double silu64(double g) { return g / (1.0 + exp(-g)); }

static void swiglu_fwd(fd_ctx_t *c) { shs_swiglu_forward(c->d, c->d_out, c->dv[0], c->dv[1], c->nout); }
static void swiglu_bwd(fd_ctx_t *c, float **g) {
    shs_swiglu_backward(c->d, g[0], g[1], dput(c->d, c->lw, c->nout), c->dv[0], c->dv[1], c->nout);
}

static void test_swiglu(void **state) {
    seed(23);
    fd_ctx_t c = {.d = new_dev(1), .nout = 300, .fwd = swiglu_fwd};
    size_t n = c.nout;
    float *gate = fd_input(&c, n, -6, 6), *up = fd_input(&c, n, -2, 2);
    gate[0] = -100.0f, gate[1] = 100.0f, gate[2] = 0.0f; /* exp overflow/underflow ends and 0 */
    c.d_out = dnew(c.d, n);
    float *lw = hf(n);
    fill(lw, n, -1, 1);
    c.lw = lw;
    fd_loss(&c);
    double *ref = hd(n), *rg = hd(n), *ru = hd(n);
    for (size_t i = 0; i < n; i++) {
        double g = gate[i], sig = 1.0 / (1.0 + exp(-g));
        ref[i] = silu64(g) * up[i];
        rg[i] = (double)lw[i] * up[i] * (sig + g * sig * (1.0 - sig)); /* d silu = sig + g sig (1 - sig) */
        ru[i] = (double)lw[i] * silu64(g);
    }
    check_close("swiglu out", fetch(c.d, c.d_out, n), ref, NULL, n, FWD_TOL);
    size_t ns[2] = {n, n};
    float *d_g[2] = {dnew(c.d, n), dnew(c.d, n)}, *g[2];
    backward_twice(&c, swiglu_bwd, 2, d_g, ns, g);
    check_close("swiglu dgate vs f64", g[0], rg, NULL, n, FWD_TOL);
    check_close("swiglu dup vs f64", g[1], ru, NULL, n, FWD_TOL);
    gate[0] = -3.0f, gate[1] = 3.0f; /* finite differences away from the saturated ends */
    put(c.d, c.dv[0], gate, n * sizeof(float));
    backward_twice(&c, swiglu_bwd, 2, d_g, ns, g);
    check_fd("swiglu dgate", fd_loss, &c, gate, n, g[0]);
    check_fd("swiglu dup", fd_loss, &c, up, n, g[1]);
}

/* ---- grouped-query attention ----------------------------------------------------------- */

/* f64 causal GQA with document masks (HF: repeat_kv, then softmax(q k^T /
 * sqrt(HD) + mask) v). out (B,T,NH*HD), att (B,NH,T,T), lse (B,NH,T). */
static void gqa_oracle(const float *q, const float *k, const float *v, const int32_t *doc, int B, int T, int NH,
                       int NKV, int HD, double *out, double *att, double *lse) {
    double scale = 1.0 / sqrt((double)HD), *s = malloc(sizeof(double) * T);
    assert_non_null(s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int kvh = h / (NH / NKV);
            for (int t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0;
                for (int t2 = 0; t2 < T; t2++) {
                    int ok = t2 <= t && (!doc || doc[b * T + t2] == doc[b * T + t]);
                    s[t2] = -INFINITY;
                    if (!ok) continue;
                    double dot = 0;
                    for (int i = 0; i < HD; i++)
                        dot += (double)q[((size_t)(b * T + t) * NH + h) * HD + i] *
                               k[((size_t)(b * T + t2) * NKV + kvh) * HD + i];
                    s[t2] = dot * scale;
                    mx = fmax(mx, s[t2]);
                }
                for (int t2 = 0; t2 < T; t2++) sum += exp(s[t2] - mx);
                size_t row = ((size_t)b * NH + h) * T + t;
                if (lse) lse[row] = mx + log(sum);
                if (att)
                    for (int t2 = 0; t2 < T; t2++) att[row * T + t2] = exp(s[t2] - mx) / sum;
                for (int i = 0; i < HD; i++) {
                    double o = 0;
                    for (int t2 = 0; t2 < T; t2++)
                        o += exp(s[t2] - mx) / sum * v[((size_t)(b * T + t2) * NKV + kvh) * HD + i];
                    out[((size_t)(b * T + t) * NH + h) * HD + i] = o;
                }
            }
        }
    free(s);
}

static void gqa_fwd(fd_ctx_t *c) {
    shs_attention_gqa_forward(c->d, c->d_out, c->d_aux, c->dv[0], c->dv[1], c->dv[2], c->d_doc, c->B, c->T, c->NH,
                              c->NKV, c->HD);
}
static void gqa_bwd(fd_ctx_t *c, float **g) {
    size_t natt = (size_t)c->B * c->NH * c->T * c->T;
    shs_attention_gqa_backward(c->d, g[0], g[1], g[2], dnew(c->d, natt), dput(c->d, c->lw, c->nout), c->dv[0],
                               c->dv[1], c->dv[2], c->d_aux, c->B, c->T, c->NH, c->NKV, c->HD);
}
static void gqa_fwd_flash(fd_ctx_t *c) {
    shs_attention_gqa_forward_flash(c->d, c->d_out, c->d_aux, c->dv[0], c->dv[1], c->dv[2], c->d_doc, c->B, c->T,
                                    c->NH, c->NKV, c->HD);
}
static void gqa_bwd_flash(fd_ctx_t *c, float **g) {
    shs_attention_gqa_backward_flash(c->d, g[0], g[1], g[2], dput(c->d, c->lw, c->nout), c->dv[0], c->dv[1],
                                     c->dv[2], c->d_out, c->d_aux, c->d_doc, c->B, c->T, c->NH, c->NKV, c->HD);
}

/* One GQA shape, eager or flash: forward against the oracle, backward by
 * finite differences and the accumulate contract. */
static void gqa_case(int NH, int NKV, int with_doc, int flash) {
    seed(30 + NH * 7 + NKV * 3 + with_doc + 11 * flash);
    fd_ctx_t c = {.d = new_dev(1), .B = 2, .T = 7, .NH = NH, .NKV = NKV, .HD = 4};
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
    gqa_oracle(q, k, v, with_doc ? doc : NULL, c.B, c.T, NH, NKV, c.HD, rout, ratt, rlse);
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

static void test_gqa_eager_mha(void **state) { gqa_case(4, 4, 0, 0); }
static void test_gqa_eager_gqa_docs(void **state) { gqa_case(4, 2, 1, 0); }
static void test_gqa_eager_mqa_docs(void **state) { gqa_case(6, 1, 1, 0); }
static void test_gqa_flash_mha_docs(void **state) { gqa_case(4, 4, 1, 1); }
static void test_gqa_flash_gqa(void **state) { gqa_case(4, 2, 0, 1); }
static void test_gqa_flash_mqa_docs(void **state) { gqa_case(6, 1, 1, 1); }

/* Flash against eager at T = 150 > 2 blocks of SHS_FLASH_BLOCK, with a
 * document starting at 70 so that the first block is wholly masked for the
 * second document's queries; then a key and value of the first document
 * perturbed change nothing of the second document, bit for bit, in either
 * kernel's outputs and input gradients. */
static void test_gqa_flash_vs_eager_docs(void **state) {
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
    int32_t *d_doc = dput_i32(d, doc, T);
    float *d_eo = dnew(d, nq), *d_att = dnew(d, natt), *d_datt = dnew(d, natt), *d_fo = dnew(d, nq);
    float *d_lse = dnew(d, nrow), *d_g[6];
    for (int i = 0; i < 6; i++) d_g[i] = dnew(d, i % 3 ? nkv : nq);
    float *res[2][8];
    for (int pass = 0; pass < 2; pass++) {
        if (pass) { /* perturb key and value 5 (first document) */
            for (int i = 0; i < NKV * HD; i++) k[5 * NKV * HD + i] += 0.75f, v[5 * NKV * HD + i] -= 0.5f;
            put(d, d_k, k, nkv * sizeof(float)), put(d, d_v, v, nkv * sizeof(float));
        }
        for (int i = 0; i < 6; i++) zero(d, d_g[i], (i % 3 ? nkv : nq) * sizeof(float));
        shs_attention_gqa_forward(d, d_eo, d_att, d_q, d_k, d_v, d_doc, B, T, NH, NKV, HD);
        shs_attention_gqa_backward(d, d_g[0], d_g[1], d_g[2], d_datt, d_dy, d_q, d_k, d_v, d_att, B, T, NH, NKV, HD);
        shs_attention_gqa_forward_flash(d, d_fo, d_lse, d_q, d_k, d_v, d_doc, B, T, NH, NKV, HD);
        shs_attention_gqa_backward_flash(d, d_g[3], d_g[4], d_g[5], d_dy, d_q, d_k, d_v, d_fo, d_lse, d_doc, B, T, NH,
                                         NKV, HD);
        res[pass][0] = fetch(d, d_eo, nq), res[pass][1] = fetch(d, d_fo, nq);
        for (int i = 0; i < 6; i++) res[pass][2 + i] = fetch(d, d_g[i], i % 3 ? nkv : nq);
    }
    /* pass 1 (perturbed) against the oracle and across kernels */
    double *rout = hd(nq), *e = hd(nkv > nq ? nkv : nq);
    gqa_oracle(q, k, v, doc, B, T, NH, NKV, HD, rout, NULL, NULL);
    check_close("eager out vs f64", res[1][0], rout, NULL, nq, FWD_TOL);
    check_close("flash out vs f64", res[1][1], rout, NULL, nq, FWD_TOL);
    for (size_t i = 0; i < nq; i++) e[i] = res[1][0][i];
    check_close("flash out vs eager", res[1][1], e, NULL, nq, 2e-6);
    for (int g = 0; g < 3; g++) {
        size_t n = g ? nkv : nq;
        for (size_t i = 0; i < n; i++) e[i] = res[1][2 + g][i];
        check_close("flash grad vs eager", res[1][5 + g], e, NULL, n, FWD_TOL);
    }
    /* the second document: unchanged bits; the first: changed */
    size_t q2 = (size_t)SPLIT * NH * HD, kv2 = (size_t)SPLIT * NKV * HD;
    for (int r = 0; r < 8; r++) {
        int is_kv = r >= 2 && (r - 2) % 3 != 0;
        size_t off = is_kv ? kv2 : q2, n = is_kv ? nkv : nq;
        assert_memory_equal(res[1][r] + off, res[0][r] + off, (n - off) * sizeof(float));
        assert_memory_not_equal(res[1][r], res[0][r], off * sizeof(float));
    }
}

/* Every kernel gives the same bits at 1 and 3 threads (T = 150: flash's
 * blocks; several rows and column blocks everywhere). */
static void test_thread_count_bits(void **state) {
    seed(41);
    enum { B = 2, T = 150, NH = 4, NKV = 2, HD = 8, NR = 40, C = 40 };
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, natt = (size_t)B * NH * T * T;
    size_t nrow = (size_t)B * NH * T, nrms = (size_t)NR * C;
    float *q = hf(nq), *k = hf(nkv), *v = hf(nkv), *dy = hf(nq), *inv = hf(HD / 2), *w = hf(C);
    fill_wide(q, nq), fill_wide(k, nkv), fill_wide(v, nkv), fill_wide(dy, nq), fill(inv, HD / 2, 0, 1), fill(w, C, 0, 2);
    int32_t doc[B * T];
    for (int i = 0; i < B * T; i++) doc[i] = i / 37;
    enum { NRES = 15 };
    float *res[2][NRES];
    size_t len[NRES];
    for (int kk = 0; kk < 2; kk++) {
        shs_device_t *d = new_dev(kk ? 3 : 1);
        float *d_q = dput(d, q, nq), *d_k = dput(d, k, nkv), *d_v = dput(d, v, nkv), *d_dy = dput(d, dy, nq);
        int32_t *d_doc = dput_i32(d, doc, (size_t)B * T), *d_pos = d_doc; /* positions: any int32 */
        float *d_inv = dput(d, inv, HD / 2), *d_w = dput(d, w, C);
        float *o[NRES];
        size_t sz[NRES] = {nq, natt, nq, nkv, nkv, nq, nrow, nq, nkv, nkv, nrms, NR, nrms, C, nq};
        for (int i = 0; i < NRES; i++) o[i] = dnew(d, sz[i]), zero(d, o[i], sz[i] * sizeof(float)), len[i] = sz[i];
        shs_attention_gqa_forward(d, o[0], o[1], d_q, d_k, d_v, d_doc, B, T, NH, NKV, HD);
        shs_attention_gqa_backward(d, o[2], o[3], o[4], dnew(d, natt), d_dy, d_q, d_k, d_v, o[1], B, T, NH, NKV, HD);
        shs_attention_gqa_forward_flash(d, o[5], o[6], d_q, d_k, d_v, d_doc, B, T, NH, NKV, HD);
        shs_attention_gqa_backward_flash(d, o[7], o[8], o[9], d_dy, d_q, d_k, d_v, o[5], o[6], d_doc, B, T, NH, NKV,
                                         HD);
        shs_rmsnorm_forward(d, o[10], o[11], d_q, d_w, NR, C, 1e-5f);
        shs_rmsnorm_backward(d, o[12], o[13], d_dy, d_q, d_w, o[11], NR, C);
        shs_rope_forward(d, o[14], d_q, d_pos, d_inv, B, T, NH, HD);
        shs_rope_backward(d, o[14], d_dy, NULL, d_inv, B, T, NH, HD);
        shs_swiglu_forward(d, o[0], d_q, d_dy, nq);          /* over the attention output, rechecked below */
        shs_swiglu_backward(d, o[2], o[5], d_dy, d_q, d_k, nkv);
        for (int i = 0; i < NRES; i++) res[kk][i] = fetch(d, o[i], sz[i]);
    }
    for (int i = 0; i < NRES; i++) {
        char what[32];
        snprintf(what, sizeof what, "output %d", i);
        check_bits(what, res[1][i], res[0][i], len[i]);
    }
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

/* ---- which backends have the kernels; argument errors abort ---------------------------- */

static void test_supports(void **state) {
    assert_true(shs_device_supports(new_dev(1), SHS_KERNELS_LLAMA));
    shs_device_t *m = NULL;
    assert_int_equal(shs_device_create_meta(&m, 0, SIZE_MAX), SHS_OK);
    assert_true(shs_device_supports(m, SHS_KERNELS_LLAMA));
    shs_device_destroy(m);
    /* a backend missing any one of them (as the CUDA backend's vtable) does not */
    static shs_device_iface_t bare;
    bare = shs__cpu_iface;
    bare.name = "bare";
    bare.attention_gqa_backward_flash = NULL;
    shs_device_t *d = NULL;
    assert_int_equal(shs__device_new(&d, &bare, NULL, 0, SIZE_MAX, 1), SHS_OK);
    assert_false(shs_device_supports(d, SHS_KERNELS_LLAMA));
    assert_true(shs_device_supports(d, SHS_KERNELS_FLASH_ATTENTION));
    shs_device_destroy(d);
}

/* Runs f in a child process with stderr discarded; asserts it aborted. */
static void expect_abort(const char *what, void (*f)(void)) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        f();
        _exit(0); /* did not abort */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT)) fail_msg("%s: did not abort (status %d)", what, status);
}

static shs_device_t *abort_dev(void) {
    shs_device_t *d = NULL;
    SHS_ASSERT(shs_device_create_cpu(&d, 0, SIZE_MAX, 1) == SHS_OK);
    return d;
}
static float *abort_buf(shs_device_t *d, size_t n) {
    void *p = NULL;
    SHS_ASSERT(shs_device_alloc(d, &p, n * sizeof(float), SHS_MEM_OTHER, "t") == SHS_OK);
    memset(p, 0, n * sizeof(float));
    return p;
}
static void rope_odd_hd(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 64);
    shs_rope_forward(d, x, x, NULL, x, 1, 2, 2, 5);
}
static void gqa_bad_groups(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 1024);
    shs_attention_gqa_forward(d, x, x + 512, x, x, x, NULL, 1, 2, 4, 3, 4);
}
static void gqa_flash_bad_groups(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 1024);
    shs_attention_gqa_backward_flash(d, x, x, x, x, x, x, x, x, x, NULL, 1, 2, 3, 2, 4);
}
static void rmsnorm_short_weight(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 64), *w = abort_buf(d, 4);
    shs_rmsnorm_forward(d, x, x, x, w, 2, 8, 1e-5f); /* weight has 4 of C = 8 */
}
static void encoder_no_wpe_on_bare(void) {
    static shs_device_iface_t bare;
    bare = shs__cpu_iface;
    bare.rmsnorm_forward = NULL;
    shs_device_t *d = NULL;
    SHS_ASSERT(shs__device_new(&d, &bare, NULL, 0, SIZE_MAX, 1) == SHS_OK);
    float *x = abort_buf(d, 64);
    int32_t *tok = (int32_t *)abort_buf(d, 4);
    shs_encoder_forward(d, x, tok, x, NULL, 1, 2, 4);
}

static void test_argument_errors_abort(void **state) {
    expect_abort("rope HD odd", rope_odd_hd);
    expect_abort("gqa NH % NKV", gqa_bad_groups);
    expect_abort("gqa flash NH % NKV", gqa_flash_bad_groups);
    expect_abort("rmsnorm weight too short", rmsnorm_short_weight);
    expect_abort("encoder without wpe on a backend without SHS_KERNELS_LLAMA", encoder_no_wpe_on_bare);
}

/* ---- meta counts: device_meta.c's closed forms, by hand ------------------------------- */

static void meta_expect(shs_device_t *m, shs_kernel_stats_t *prev, const char *what, double flops, double bytes,
                        int matmul) {
    shs_kernel_stats_t k;
    assert_int_equal(shs_device_kernel_stats(m, &k), SHS_OK);
    if (k.kernels != prev->kernels + 1) fail_msg("%s: %llu kernels", what, (unsigned long long)(k.kernels - prev->kernels));
    if (k.flops - prev->flops != (uint64_t)flops)
        fail_msg("%s: flops %llu, want %.0f", what, (unsigned long long)(k.flops - prev->flops), flops);
    if (k.bytes - prev->bytes != (uint64_t)bytes)
        fail_msg("%s: bytes %llu, want %.0f", what, (unsigned long long)(k.bytes - prev->bytes), bytes);
    uint64_t mm = k.matmul_flops - prev->matmul_flops;
    if (mm != (matmul ? (uint64_t)flops : 0)) fail_msg("%s: matmul flops %llu", what, (unsigned long long)mm);
    *prev = k;
}

static void test_meta_counts(void **state) {
    shs_device_t *m = NULL;
    assert_int_equal(shs_device_create_meta(&m, 0, SIZE_MAX), SHS_OK);
    shs_kernel_stats_t s = {0};
    enum { B = 2, T = 6, NH = 4, NKV = 2, HD = 8, N = 12, C = 32 };
    float *x = dalloc(m, 1 << 16), *y = dalloc(m, 1 << 16), *z = dalloc(m, 1 << 16), *w = dalloc(m, 1 << 16);
    int32_t *ip = dalloc(m, 1 << 10);
    /* rmsnorm: n = 384 */
    shs_rmsnorm_forward(m, y, z, x, w, N, C, 1e-5f);
    meta_expect(m, &s, "rmsnorm_forward", 4 * 384 + 3 * 12, 4 * (2 * 384 + 32 + 12), 0);
    shs_rmsnorm_backward(m, y, z, x, x, w, z, N, C);
    meta_expect(m, &s, "rmsnorm_backward", 11 * 384, 4 * (4 * 384 + 3 * 32 + 12), 0);
    /* rope: n = B T NH HD = 384, pairs 192 */
    shs_rope_forward(m, y, x, NULL, w, B, T, NH, HD);
    meta_expect(m, &s, "rope_forward", 192 * 9, 4 * (2 * 384 + 4), 0);
    shs_rope_forward(m, y, x, ip, w, B, T, NH, HD);
    meta_expect(m, &s, "rope_forward positions", 192 * 9, 4 * (2 * 384 + 4 + 12), 0);
    shs_rope_backward(m, y, x, ip, w, B, T, NH, HD);
    meta_expect(m, &s, "rope_backward", 192 * 11, 4 * (3 * 384 + 4 + 12), 0);
    shs_swiglu_forward(m, y, x, z, 1000);
    meta_expect(m, &s, "swiglu_forward", 4000, 12000, 0);
    shs_swiglu_backward(m, y, z, x, x, w, 1000);
    meta_expect(m, &s, "swiglu_backward", 13000, 28000, 0);
    /* attention: causal pairs B NH T (T+1) / 2 = 2*4*21 = 168; nq = 384, nkv = 192,
     * B NH T T = 288, B NH T = 48, B T = 12 */
    shs_attention_gqa_forward(m, y, z, x, x, x, NULL, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_forward", 168 * (4 * 8 + 5), 4 * (2 * 384 + 2 * 192 + 288), 1);
    shs_attention_gqa_forward(m, y, z, x, x, x, ip, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_forward docs", 168 * (4 * 8 + 5), 4 * (2 * 384 + 2 * 192 + 288 + 12), 1);
    shs_attention_gqa_backward(m, y, y, y, z, x, x, x, x, x, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_backward", 168 * (8 * 8 + 4), 4 * (4 * 384 + 6 * 192 + 3 * 288), 1);
    shs_attention_gqa_forward_flash(m, y, z, x, x, x, ip, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_forward_flash", 168 * (4 * 8 + 5), 4 * (2 * 384 + 2 * 192 + 48 + 12), 1);
    shs_attention_gqa_backward_flash(m, y, y, y, x, x, x, x, x, x, NULL, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_backward_flash", 168 * (10 * 8 + 4) + 48 * 2 * 8, 4 * (5 * 384 + 6 * 192 + 48), 1);
    /* encoder: B T C = 12 * 32 = 384 */
    shs_encoder_forward(m, y, ip, x, NULL, 2, 6, 32);
    meta_expect(m, &s, "encoder_forward no wpe", 0, 4 * (2 * 384 + 12), 0);
    shs_encoder_forward(m, y, ip, x, w, 2, 6, 32);
    meta_expect(m, &s, "encoder_forward", 384, 4 * (3 * 384 + 12), 0);
    shs_encoder_backward(m, y, NULL, x, ip, 2, 6, 32);
    meta_expect(m, &s, "encoder_backward no dwpe", 384, 4 * (3 * 384 + 12), 0);
    shs_device_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rmsnorm, teardown),
        cmocka_unit_test_teardown(test_rope, teardown),
        cmocka_unit_test_teardown(test_swiglu, teardown),
        cmocka_unit_test_teardown(test_gqa_eager_mha, teardown),
        cmocka_unit_test_teardown(test_gqa_eager_gqa_docs, teardown),
        cmocka_unit_test_teardown(test_gqa_eager_mqa_docs, teardown),
        cmocka_unit_test_teardown(test_gqa_flash_mha_docs, teardown),
        cmocka_unit_test_teardown(test_gqa_flash_gqa, teardown),
        cmocka_unit_test_teardown(test_gqa_flash_mqa_docs, teardown),
        cmocka_unit_test_teardown(test_gqa_flash_vs_eager_docs, teardown),
        cmocka_unit_test_teardown(test_thread_count_bits, teardown),
        cmocka_unit_test_teardown(test_encoder_no_wpe, teardown),
        cmocka_unit_test_teardown(test_supports, teardown),
        cmocka_unit_test_teardown(test_argument_errors_abort, teardown),
        cmocka_unit_test_teardown(test_meta_counts, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
