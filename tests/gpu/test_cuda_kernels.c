/* test_cuda_kernels.c - every kernel of device.h on the CUDA backend against
 * the CPU backend, on the same inputs (needs a GPU; `make test-gpu`).
 *
 * Tolerance per kernel (|cuda - cpu| <= atol + rtol |cpu|; "exact" =
 * bit-identical, memcmp), and why:
 *   matmul forward/backward, layernorm forward/backward, attention backward,
 *   encoder forward/backward, residual, accumulate, scale, relu fwd/bwd,
 *   softmax_xent backward, sum, cast (every dtype pair), adamw, sgd:
 *       exact. The CPU reference uses + - * / sqrt and explicit fma only;
 *       kernels.cu keeps each output's order, and nvcc --fmad=false with
 *       IEEE div/sqrt gives the same roundings.
 *   norm_accumulate (p = 1, 2, inf): exact, all SHS_NORM_ACC_WORDS int64
 *       words (integer sums are associative).
 *   attention forward: preatt exact (dot products only); att and out
 *       atol 1e-6, rtol 1e-5: expf is CUDA's (2 ulp) not glibc's.
 *   gelu forward/backward: atol 1e-6, rtol 1e-5 (tanhf, coshf: 2 ulp each).
 *   softmax_xent forward: probs atol 1e-7, rtol 1e-5; losses atol 1e-5
 *       (expf, logf).
 * Backward kernels start from pre-filled outputs to check "accumulates".
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpu_common.h"
#include "shardsim/exact_norm.h"

#define B 2
#define T 13
#define C 24
#define NH 3
#define OC 40
#define V 67
#define BT (B * T)

static shs_device_t *cpu, *gpu;

/* One float array living on both devices. */
typedef struct {
    float *c, *g;
    size_t n;
} dual_t;

static dual_t dual(const float *host, size_t n) {
    dual_t d = {gpu_upload(cpu, host, n), gpu_upload(gpu, host, n), n};
    return d;
}
static dual_t dual_random(size_t n, uint64_t seed, float lo, float hi) {
    float *h = malloc(n * sizeof(float));
    gpu_fill(h, n, seed, lo, hi);
    dual_t d = dual(h, n);
    free(h);
    return d;
}
static void dual_free(dual_t *d) {
    shs_device_free(cpu, d->c);
    shs_device_free(gpu, d->g);
}
/* Compare the GPU copy with the CPU copy. */
static int same(const char *name, dual_t d, double atol, double rtol) {
    assert_int_equal(shs_device_sync(gpu), SHS_OK);
    float *g = gpu_download(gpu, d.g, d.n), *c = gpu_download(cpu, d.c, d.n);
    int ok = gpu_close(name, g, c, d.n, atol, rtol);
    free(g);
    free(c);
    return ok;
}
#define EXACT(name, d) assert_true(same(name, d, 0, 0))

static int setup(void **state) {
    (void)state;
    gpu_require_device();
    if (shs_device_create_cpu(&cpu, 0, SIZE_MAX, 2) != SHS_OK) return -1;
    if (shs_device_create_cuda(&gpu, 0, 0, SIZE_MAX) != SHS_OK) {
        fprintf(stderr, "%s\n", shs_last_error());
        return -1;
    }
    return 0;
}
static int teardown(void **state) {
    (void)state;
    shs_device_destroy(cpu);
    shs_device_destroy(gpu);
    return 0;
}

static void test_matmul(void **state) {
    (void)state;
    /* sizes off every tile multiple; K spans several TK tiles */
    int rows = 37, ch = 53, oc = 71;
    dual_t inp = dual_random((size_t)rows * ch, 1, -1, 1), w = dual_random((size_t)oc * ch, 2, -1, 1);
    dual_t bias = dual_random(oc, 3, -1, 1), out = dual_random((size_t)rows * oc, 4, 0, 1);
    shs_matmul_forward(cpu, out.c, inp.c, w.c, bias.c, rows, ch, oc);
    shs_matmul_forward(gpu, out.g, inp.g, w.g, bias.g, rows, ch, oc);
    EXACT("matmul_forward (bias)", out);
    shs_matmul_forward(cpu, out.c, inp.c, w.c, NULL, rows, ch, oc);
    shs_matmul_forward(gpu, out.g, inp.g, w.g, NULL, rows, ch, oc);
    EXACT("matmul_forward (no bias)", out);
    dual_t dout = dual_random((size_t)rows * oc, 5, -1, 1);
    dual_t dinp = dual_random((size_t)rows * ch, 6, -1, 1), dw = dual_random((size_t)oc * ch, 7, -1, 1);
    dual_t db = dual_random(oc, 8, -1, 1);
    shs_matmul_backward(cpu, dinp.c, dw.c, db.c, dout.c, inp.c, w.c, rows, ch, oc);
    shs_matmul_backward(gpu, dinp.g, dw.g, db.g, dout.g, inp.g, w.g, rows, ch, oc);
    EXACT("matmul_backward dinp", dinp);
    EXACT("matmul_backward dweight", dw);
    EXACT("matmul_backward dbias", db);
    dual_t all[] = {inp, w, bias, out, dout, dinp, dw, db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dual_free(&all[i]);
}

static void test_layernorm(void **state) {
    (void)state;
    dual_t inp = dual_random((size_t)BT * C, 10, -2, 2), w = dual_random(C, 11, 0.5f, 1.5f),
           bias = dual_random(C, 12, -0.5f, 0.5f), out = dual_random((size_t)BT * C, 13, 0, 1),
           mean = dual_random(BT, 14, 0, 1), rstd = dual_random(BT, 15, 0, 1);
    shs_layernorm_forward(cpu, out.c, mean.c, rstd.c, inp.c, w.c, bias.c, BT, C);
    shs_layernorm_forward(gpu, out.g, mean.g, rstd.g, inp.g, w.g, bias.g, BT, C);
    EXACT("layernorm_forward out", out);
    EXACT("layernorm_forward mean", mean);
    EXACT("layernorm_forward rstd", rstd);
    dual_t dout = dual_random((size_t)BT * C, 16, -1, 1), dinp = dual_random((size_t)BT * C, 17, -1, 1),
           dw = dual_random(C, 18, -1, 1), db = dual_random(C, 19, -1, 1);
    shs_layernorm_backward(cpu, dinp.c, dw.c, db.c, dout.c, inp.c, w.c, mean.c, rstd.c, BT, C);
    shs_layernorm_backward(gpu, dinp.g, dw.g, db.g, dout.g, inp.g, w.g, mean.g, rstd.g, BT, C);
    EXACT("layernorm_backward dinp", dinp);
    EXACT("layernorm_backward dweight", dw);
    EXACT("layernorm_backward dbias", db);
    dual_t all[] = {inp, w, bias, out, mean, rstd, dout, dinp, dw, db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dual_free(&all[i]);
}

static void test_attention(void **state) {
    (void)state;
    size_t tt = (size_t)B * NH * T * T;
    dual_t qkv = dual_random((size_t)BT * 3 * C, 20, -2, 2), out = dual_random((size_t)BT * C, 21, 0, 1),
           pre = dual_random(tt, 22, 0, 1), att = dual_random(tt, 23, 0, 1);
    shs_attention_forward(cpu, out.c, pre.c, att.c, qkv.c, B, T, C, NH);
    shs_attention_forward(gpu, out.g, pre.g, att.g, qkv.g, B, T, C, NH);
    EXACT("attention_forward preatt", pre);
    assert_true(same("attention_forward att", att, 1e-6, 1e-5));
    assert_true(same("attention_forward out", out, 1e-6, 1e-5));
    /* backward from the CPU's att on both, so that it is exact */
    float *att_h = gpu_download(cpu, att.c, tt);
    dual_t att_same = dual(att_h, tt);
    free(att_h);
    dual_t dout = dual_random((size_t)BT * C, 24, -1, 1), dqkv = dual_random((size_t)BT * 3 * C, 25, -1, 1),
           dpre = dual_random(tt, 26, 0, 1), datt = dual_random(tt, 27, 0, 1);
    shs_attention_backward(cpu, dqkv.c, dpre.c, datt.c, dout.c, qkv.c, att_same.c, B, T, C, NH);
    shs_attention_backward(gpu, dqkv.g, dpre.g, datt.g, dout.g, qkv.g, att_same.g, B, T, C, NH);
    EXACT("attention_backward dqkv", dqkv);
    EXACT("attention_backward dpreatt", dpre);
    EXACT("attention_backward datt", datt);
    dual_t all[] = {qkv, out, pre, att, att_same, dout, dqkv, dpre, datt};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dual_free(&all[i]);
}

static void test_elementwise(void **state) {
    (void)state;
    size_t n = 100003; /* more than one grid-stride pass of some launches */
    dual_t x = dual_random(n, 30, -6, 6), y = dual_random(n, 31, -1, 1), out = dual_random(n, 32, 0, 1),
           acc = dual_random(n, 33, -1, 1);
    shs_gelu_forward(cpu, out.c, x.c, n);
    shs_gelu_forward(gpu, out.g, x.g, n);
    assert_true(same("gelu_forward", out, 1e-6, 1e-5));
    shs_gelu_backward(cpu, acc.c, x.c, y.c, n);
    shs_gelu_backward(gpu, acc.g, x.g, y.g, n);
    assert_true(same("gelu_backward", acc, 1e-6, 1e-5));
    /* from here on the accumulators must agree exactly again */
    float *h = gpu_download(cpu, acc.c, n);
    dual_free(&acc);
    acc = dual(h, n);
    free(h);
    shs_relu_forward(cpu, out.c, x.c, n);
    shs_relu_forward(gpu, out.g, x.g, n);
    EXACT("relu_forward", out);
    shs_relu_backward(cpu, acc.c, x.c, y.c, n);
    shs_relu_backward(gpu, acc.g, x.g, y.g, n);
    EXACT("relu_backward", acc);
    shs_residual_forward(cpu, out.c, x.c, y.c, n);
    shs_residual_forward(gpu, out.g, x.g, y.g, n);
    EXACT("residual_forward", out);
    shs_residual_forward(cpu, out.c, out.c, y.c, n); /* aliasing allowed */
    shs_residual_forward(gpu, out.g, out.g, y.g, n);
    EXACT("residual_forward (out aliases a)", out);
    shs_accumulate(cpu, acc.c, y.c, n);
    shs_accumulate(gpu, acc.g, y.g, n);
    EXACT("accumulate", acc);
    shs_scale(cpu, acc.c, 0.37f, n);
    shs_scale(gpu, acc.g, 0.37f, n);
    EXACT("scale", acc);
    float s_c, s_g;
    dual_t sum = dual_random(1, 34, 0, 1);
    shs_sum(cpu, sum.c, x.c, n);
    shs_sum(gpu, sum.g, x.g, n);
    EXACT("sum", sum);
    (void)s_c, (void)s_g;
    dual_t all[] = {x, y, out, acc, sum};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dual_free(&all[i]);
}

static void test_encoder(void **state) {
    (void)state;
    int32_t tok[BT];
    for (int i = 0; i < BT; i++) tok[i] = (i * 7 + i / 3) % 11; /* repeats: groups of several positions */
    int32_t *tc = gpu_upload_bytes(cpu, tok, sizeof tok), *tg = gpu_upload_bytes(gpu, tok, sizeof tok);
    dual_t wte = dual_random((size_t)V * C, 40, -1, 1), wpe = dual_random((size_t)T * C, 41, -1, 1),
           out = dual_random((size_t)BT * C, 42, 0, 1);
    shs_encoder_forward(cpu, out.c, tc, wte.c, wpe.c, B, T, C);
    shs_encoder_forward(gpu, out.g, tg, wte.g, wpe.g, B, T, C);
    EXACT("encoder_forward", out);
    dual_t dout = dual_random((size_t)BT * C, 43, -1, 1), dwte = dual_random((size_t)V * C, 44, -1, 1),
           dwpe = dual_random((size_t)T * C, 45, -1, 1);
    shs_encoder_backward(cpu, dwte.c, dwpe.c, dout.c, tc, B, T, C);
    shs_encoder_backward(gpu, dwte.g, dwpe.g, dout.g, tg, B, T, C);
    EXACT("encoder_backward dwte", dwte);
    EXACT("encoder_backward dwpe", dwpe);
    shs_device_free(cpu, tc);
    shs_device_free(gpu, tg);
    dual_t all[] = {wte, wpe, out, dout, dwte, dwpe};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dual_free(&all[i]);
}

/* The Llama-family kernels are CPU and meta only: the CUDA backend says so
 * (callers ask shs_device_supports before using them). */
static void test_no_llama_kernels(void **state) {
    (void)state;
    assert_false(shs_device_supports(gpu, SHS_KERNELS_LLAMA));
    assert_true(shs_device_supports(cpu, SHS_KERNELS_LLAMA));
}

static void test_softmax_xent(void **state) {
    (void)state;
    int32_t tgt[BT];
    for (int i = 0; i < BT; i++) tgt[i] = (i * 13) % V;
    int32_t *tc = gpu_upload_bytes(cpu, tgt, sizeof tgt), *tg = gpu_upload_bytes(gpu, tgt, sizeof tgt);
    dual_t logits = dual_random((size_t)BT * V, 50, -8, 8), probs = dual_random((size_t)BT * V, 51, 0, 1),
           losses = dual_random(BT, 52, 0, 1);
    shs_softmax_xent_forward(cpu, losses.c, probs.c, logits.c, tc, BT, V);
    shs_softmax_xent_forward(gpu, losses.g, probs.g, logits.g, tg, BT, V);
    assert_true(same("softmax_xent_forward probs", probs, 1e-7, 1e-5));
    assert_true(same("softmax_xent_forward losses", losses, 1e-5, 0));
    float *p = gpu_download(cpu, probs.c, probs.n);
    dual_t same_probs = dual(p, probs.n);
    free(p);
    dual_t dlogits = dual_random((size_t)BT * V, 53, 0, 1);
    shs_softmax_xent_backward(cpu, dlogits.c, same_probs.c, tc, 1.0f / BT, BT, V);
    shs_softmax_xent_backward(gpu, dlogits.g, same_probs.g, tg, 1.0f / BT, BT, V);
    EXACT("softmax_xent_backward", dlogits);
    shs_device_free(cpu, tc);
    shs_device_free(gpu, tg);
    dual_t all[] = {logits, probs, losses, same_probs, dlogits};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dual_free(&all[i]);
}

/* Every word of the accumulator, with specials (0, -0, subnormals, max,
 * inf, NaN) and the elements split over two calls. */
static void test_norm_accumulate(void **state) {
    (void)state;
    size_t n = 70001;
    float *h = malloc(n * sizeof(float));
    gpu_fill(h, n, 60, -1e3f, 1e3f);
    uint32_t bits[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x7f7fffffu, 0xff7fffffu, 0x00800000u};
    for (size_t k = 0; k < sizeof bits / sizeof bits[0]; k++) memcpy(&h[k * 97], &bits[k], 4);
    static const int ps[] = {1, 2, SHS_NORM_INF};
    for (int with_specials = 0; with_specials < 2; with_specials++) {
        if (with_specials) {
            h[5] = INFINITY;
            h[n - 3] = NAN;
        }
        dual_t x = dual(h, n);
        for (size_t pi = 0; pi < 3; pi++) {
            int64_t zero[SHS_NORM_ACC_WORDS] = {0}, ac[SHS_NORM_ACC_WORDS], ag[SHS_NORM_ACC_WORDS];
            int64_t *dc = gpu_upload_bytes(cpu, zero, sizeof zero), *dg = gpu_upload_bytes(gpu, zero, sizeof zero);
            size_t cut = n / 3;
            shs_norm_accumulate(cpu, dc, x.c, cut, ps[pi]);
            shs_norm_accumulate(cpu, dc, x.c + cut, n - cut, ps[pi]);
            shs_norm_accumulate(gpu, dg, x.g, n - 1000, ps[pi]); /* another split: same words */
            shs_norm_accumulate(gpu, dg, x.g + n - 1000, 1000, ps[pi]);
            assert_int_equal(shs_memcpy_d2h(cpu, ac, dc, sizeof ac), SHS_OK);
            assert_int_equal(shs_memcpy_d2h(gpu, ag, dg, sizeof ag), SHS_OK);
            for (int w = 0; w < SHS_NORM_ACC_WORDS; w++) {
                if (ac[w] != ag[w])
                    fprintf(stderr, "norm p=%d specials=%d word %d: cuda %lld cpu %lld\n", ps[pi], with_specials, w,
                            (long long)ag[w], (long long)ac[w]);
                assert_true(ac[w] == ag[w]);
            }
            shs_device_free(cpu, dc);
            shs_device_free(gpu, dg);
        }
        dual_free(&x);
    }
    free(h);
}

/* Every pair of float dtypes, through values that exercise the rounding
 * (ties, subnormals of f16, overflow, NaN). */
static void test_cast(void **state) {
    (void)state;
    size_t n = 4099;
    double *src64 = malloc(n * sizeof(double));
    float *f = malloc(n * sizeof(float));
    gpu_fill(f, n, 70, -70000, 70000);
    for (size_t i = 0; i < n; i++) src64[i] = (double)f[i] * (1.0 + 1e-9 * (double)(i % 7)) * (i % 5 == 0 ? 1e-6 : 1);
    src64[0] = NAN, src64[1] = INFINITY, src64[2] = -0.0, src64[3] = 65520.0, src64[4] = 1e-8;
    static const shs_dtype_t ts[] = {SHS_F64, SHS_F32, SHS_F16, SHS_BF16};
    for (int a = 0; a < 4; a++) {
        /* the source in dtype ts[a], made on the CPU from f64 */
        void *s64c = gpu_upload_bytes(cpu, src64, n * 8);
        void *sc = NULL;
        assert_int_equal(shs_device_alloc(cpu, &sc, n * 8, SHS_MEM_OTHER, "cast"), SHS_OK);
        shs_cast(cpu, sc, ts[a], s64c, SHS_F64, n);
        size_t sb = n * shs_dtype_size(ts[a]);
        void *host_src = malloc(sb);
        assert_int_equal(shs_memcpy_d2h(cpu, host_src, sc, sb), SHS_OK);
        void *sg = gpu_upload_bytes(gpu, host_src, sb);
        for (int b = 0; b < 4; b++) {
            size_t db = n * shs_dtype_size(ts[b]);
            void *dc = NULL, *dg = NULL;
            assert_int_equal(shs_device_alloc(cpu, &dc, db, SHS_MEM_OTHER, "cast"), SHS_OK);
            assert_int_equal(shs_device_alloc(gpu, &dg, db, SHS_MEM_OTHER, "cast"), SHS_OK);
            shs_cast(cpu, dc, ts[b], sc, ts[a], n);
            shs_cast(gpu, dg, ts[b], sg, ts[a], n);
            void *hc = malloc(db), *hg = malloc(db);
            assert_int_equal(shs_memcpy_d2h(cpu, hc, dc, db), SHS_OK);
            assert_int_equal(shs_memcpy_d2h(gpu, hg, dg, db), SHS_OK);
            if (memcmp(hc, hg, db) != 0)
                fprintf(stderr, "cast %s -> %s differs\n", shs_dtype_name(ts[a]), shs_dtype_name(ts[b]));
            assert_memory_equal(hc, hg, db);
            free(hc);
            free(hg);
            shs_device_free(cpu, dc);
            shs_device_free(gpu, dg);
        }
        free(host_src);
        shs_device_free(cpu, s64c);
        shs_device_free(cpu, sc);
        shs_device_free(gpu, sg);
    }
    free(src64);
    free(f);
}

static void test_optimizers(void **state) {
    (void)state;
    size_t n = 5003;
    dual_t p = dual_random(n, 80, -1, 1), g = dual_random(n, 81, -1e-2f, 1e-2f), m = dual_random(n, 82, -1e-3f, 1e-3f),
           v = dual_random(n, 83, 0, 1e-5f);
    shs_adamw_hparams_t hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f,
                              .bias_correction1 = 1.0f - 0.9f * 0.9f, .bias_correction2_sqrt = sqrtf(1.0f - 0.999f * 0.999f)};
    for (int step = 0; step < 3; step++) {
        shs_adamw_update(cpu, p.c, g.c, m.c, v.c, n, &hp);
        shs_adamw_update(gpu, p.g, g.g, m.g, v.g, n, &hp);
    }
    EXACT("adamw param", p);
    EXACT("adamw m", m);
    EXACT("adamw v", v);
    dual_t buf = dual_random(n, 84, -1e-2f, 1e-2f);
    for (int step = 0; step < 3; step++) {
        shs_sgd_update(cpu, p.c, g.c, buf.c, n, 0.05f, 0.9f, 0.01f);
        shs_sgd_update(gpu, p.g, g.g, buf.g, n, 0.05f, 0.9f, 0.01f);
        shs_sgd_update(cpu, p.c, g.c, NULL, n, 0.05f, 0.0f, 0.0f);
        shs_sgd_update(gpu, p.g, g.g, NULL, n, 0.05f, 0.0f, 0.0f);
    }
    EXACT("sgd param", p);
    EXACT("sgd momentum", buf);
    dual_t all[] = {p, g, m, v, buf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dual_free(&all[i]);
}

/* Memory: accounting as every backend, zero-byte allocations, overlapping
 * device copies (memmove), memset. */
static void test_memory(void **state) {
    (void)state;
    void *z1 = NULL, *z2 = NULL;
    assert_int_equal(shs_device_alloc(gpu, &z1, 0, SHS_MEM_OTHER, NULL), SHS_OK);
    assert_int_equal(shs_device_alloc(gpu, &z2, 0, SHS_MEM_OTHER, NULL), SHS_OK);
    assert_true(z1 && z2 && z1 != z2);
    shs_device_free(gpu, z1);
    shs_device_free(gpu, z2);
    float h[100], back[100];
    for (int i = 0; i < 100; i++) h[i] = (float)i;
    float *d = gpu_upload(gpu, h, 100);
    assert_int_equal(shs_memcpy_d2d(gpu, d + 10, d, 50 * sizeof(float)), SHS_OK); /* overlapping */
    memmove(h + 10, h, 50 * sizeof(float));
    assert_int_equal(shs_memcpy_d2h(gpu, back, d, sizeof back), SHS_OK);
    assert_memory_equal(back, h, sizeof h);
    assert_int_equal(shs_memset(gpu, d, 0xff, 8), SHS_OK);
    assert_int_equal(shs_memcpy_d2h(gpu, back, d, sizeof back), SHS_OK);
    assert_true(isnan(back[0]) && isnan(back[1]) && back[2] == 2.0f);
    shs_device_free(gpu, d);
    shs_device_t *small;
    assert_int_equal(shs_device_create_cuda(&small, 3, 0, 1000), SHS_OK);
    void *p = NULL;
    assert_int_equal(shs_device_alloc(small, &p, 2000, SHS_MEM_PARAMS, "big"), SHS_OUT_OF_MEMORY);
    assert_non_null(strstr(shs_last_error(), "rank 3"));
    shs_device_destroy(small);
    assert_string_equal(shs_device_backend(gpu), "cuda");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),       cmocka_unit_test(test_matmul),         cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_attention),    cmocka_unit_test(test_elementwise),    cmocka_unit_test(test_encoder),
        cmocka_unit_test(test_softmax_xent), cmocka_unit_test(test_norm_accumulate), cmocka_unit_test(test_cast),
        cmocka_unit_test(test_optimizers),   cmocka_unit_test(test_no_llama_kernels),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
