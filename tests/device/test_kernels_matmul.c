/* test_kernels_matmul.c - the CPU backend's memory operations and matmul,
 * through the public device API: forward against a naive f64 oracle,
 * backward against central finite differences (and accumulating), the
 * instruction-set paths and thread counts bit for bit, zero sizes.
 * Test data only ever reaches kernels through shs_memcpy_h2d/d2h.
 *
 * Tolerances (all test_kernels_*.c):
 *   FWD_TOL  forward vs f64 oracle: |got - ref| <= 1e-5 * max(1, |ref|)
 *            (matmul: max(1, sum of |terms|), the natural f32 dot-product scale)
 *   FD_TOL   gradients: L = sum_i out_i * w_i with fixed random w, summed in
 *            f64; central differences with step FD_STEP = 1e-3 applied to the
 *            f32 input (the realised step is used);
 *            |analytic - numeric| <= 2e-3 * max(1, |numeric|)
 *   OPT_TOL  optimizers vs f64 step: 2e-6 relative (max(1, |ref|) for params)
 * What the contract defines exactly (single f32 operations, fma chains, f64
 * sums, casts, thread-count and instruction-set independence, accumulation)
 * is compared bit for bit.
 */
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

#include "device/cpu/matmul_cpu.h" /* private: the matmul's instruction-set test hook */
#include "shardsim/device.h"

#include "kernel_checks.h"

/* ---- memory --------------------------------------------------------------- */

static void test_memory_ops(void **state) {
    shs_device_t *d = new_dev(1);
    void *z1 = dalloc(d, 0), *z2 = dalloc(d, 0);
    assert_ptr_not_equal(z1, z2);
    uint8_t h[64], back[64];
    for (int i = 0; i < 64; i++) h[i] = (uint8_t)i;
    uint8_t *p = dalloc(d, 64);
    put(d, p, h, 64);
    /* overlapping device->device copy behaves as memmove */
    assert_int_equal(shs_memcpy_d2d(d, p + 8, p, 40), SHS_OK);
    get(d, back, p, 64);
    for (int i = 0; i < 64; i++) assert_int_equal(back[i], i < 8 ? i : i < 48 ? i - 8 : i);
    assert_int_equal(shs_memcpy_d2d(d, p, p + 8, 40), SHS_OK);
    assert_int_equal(shs_memset(d, p + 60, 0xab, 4), SHS_OK);
    get(d, back, p, 64);
    for (int i = 0; i < 40; i++) assert_int_equal(back[i], i);
    for (int i = 60; i < 64; i++) assert_int_equal(back[i], 0xab);
    assert_int_equal(((uintptr_t)p) % 64, 0);
}

/* ---- matmul --------------------------------------------------------------- */

static void matmul_oracle(double *ref, double *scale, const float *inp, const float *w, const float *bias, int BT,
                          int C, int OC) {
    for (int r = 0; r < BT; r++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0, a = fabs(s);
            for (int c = 0; c < C; c++) {
                double t = (double)inp[r * C + c] * w[o * C + c];
                s += t;
                a += fabs(t);
            }
            ref[r * OC + o] = s;
            scale[r * OC + o] = a;
        }
}

/* The documented chains, on the host with C99 fmaf(): each out element is
 * acc = bias (or 0); acc = fma(inp, w, acc) for c = 0..C-1. */
static void matmul_fma_ref(float *out, const float *inp, const float *w, const float *bias, int BT, int C, int OC) {
    for (int r = 0; r < BT; r++)
        for (int o = 0; o < OC; o++) {
            float acc = bias ? bias[o] : 0.0f;
            for (int c = 0; c < C; c++) acc = fmaf(inp[r * C + c], w[o * C + c], acc);
            out[r * OC + o] = acc;
        }
}

/* Backward terms as fma chains from 0 over the reduction index in order,
 * each added once to what dinp and dweight held. */
static void matmul_backward_fma_ref(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                                    int BT, int C, int OC) {
    for (int r = 0; r < BT; r++)
        for (int c = 0; c < C; c++) {
            float t = 0.0f;
            for (int o = 0; o < OC; o++) t = fmaf(dout[r * OC + o], w[o * C + c], t);
            dinp[r * C + c] += t;
        }
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < C; c++) {
            float t = 0.0f;
            for (int r = 0; r < BT; r++) t = fmaf(dout[r * OC + o], inp[r * C + c], t);
            dw[o * C + c] += t;
        }
}

static void test_matmul_forward(void **state) {
    static const int shapes[][3] = {{7, 13, 11}, {19, 37, 21}, {16, 8, 24}, {1, 1, 1}, {3, 0, 5}};
    shs_device_t *d = new_dev(1);
    seed(1);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int BT = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        float *inp = hf(BT * C), *w = hf(OC * C), *bias = hf(OC);
        fill(inp, BT * C, -1, 1);
        fill(w, OC * C, -1, 1);
        fill(bias, OC, -1, 1);
        float *d_inp = dput(d, inp, BT * C), *d_w = dput(d, w, OC * C), *d_b = dput(d, bias, OC);
        float *d_out = dnew(d, BT * OC);
        double *ref = hd(BT * OC), *scale = hd(BT * OC);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *b = with_bias ? bias : NULL;
            shs_matmul_forward(d, d_out, d_inp, d_w, with_bias ? d_b : NULL, BT, C, OC);
            float *out = fetch(d, d_out, BT * OC);
            matmul_oracle(ref, scale, inp, w, b, BT, C, OC);
            check_close(with_bias ? "matmul out (bias)" : "matmul out", out, ref, scale, BT * OC, FWD_TOL);
            /* the documented order: an fma chain over c = 0..C-1 from the bias (or 0) */
            float *ordered = hf(BT * OC);
            matmul_fma_ref(ordered, inp, w, b, BT, C, OC);
            check_bits("matmul out vs in-order fma chain", out, ordered, BT * OC);
        }
    }
}

typedef struct {
    shs_device_t *d;
    int BT, C, OC;
    float *inp, *w, *b, *lw;               /* host */
    float *d_inp, *d_w, *d_b, *d_out;      /* device */
} matmul_ctx_t;

static double matmul_loss(void *p) {
    matmul_ctx_t *m = p;
    put(m->d, m->d_inp, m->inp, sizeof(float) * m->BT * m->C);
    put(m->d, m->d_w, m->w, sizeof(float) * m->OC * m->C);
    put(m->d, m->d_b, m->b, sizeof(float) * m->OC);
    shs_matmul_forward(m->d, m->d_out, m->d_inp, m->d_w, m->d_b, m->BT, m->C, m->OC);
    float out[m->BT * m->OC];
    get(m->d, out, m->d_out, sizeof out);
    return weighted_sum(out, m->lw, m->BT * m->OC);
}

static void test_matmul_backward(void **state) {
    shs_device_t *d = new_dev(1);
    seed(2);
    matmul_ctx_t m = {.d = d, .BT = 10, .C = 12, .OC = 11};
    int BT = m.BT, C = m.C, OC = m.OC;
    m.inp = hf(BT * C), m.w = hf(OC * C), m.b = hf(OC), m.lw = hf(BT * OC);
    fill(m.inp, BT * C, -1, 1);
    fill(m.w, OC * C, -1, 1);
    fill(m.b, OC, -1, 1);
    fill(m.lw, BT * OC, -1, 1);
    m.d_inp = dnew(d, BT * C), m.d_w = dnew(d, OC * C), m.d_b = dnew(d, OC), m.d_out = dnew(d, BT * OC);
    float *d_dout = dput(d, m.lw, BT * OC);
    float *d_dinp = dnew(d, BT * C), *d_dw = dnew(d, OC * C), *d_db = dnew(d, OC);
    matmul_loss(&m);
    zero(d, d_dinp, sizeof(float) * BT * C);
    zero(d, d_dw, sizeof(float) * OC * C);
    zero(d, d_db, sizeof(float) * OC);
    shs_matmul_backward(d, d_dinp, d_dw, d_db, d_dout, m.d_inp, m.d_w, BT, C, OC);
    float *dinp = fetch(d, d_dinp, BT * C), *dw = fetch(d, d_dw, OC * C), *db = fetch(d, d_db, OC);

    /* accumulates; dinp and dbias may be NULL */
    float *pre_inp = hf(BT * C), *pre_w = hf(OC * C), *pre_b = hf(OC);
    fill(pre_inp, BT * C, -3, 3);
    fill(pre_w, OC * C, -3, 3);
    fill(pre_b, OC, -3, 3);
    put(d, d_dinp, pre_inp, sizeof(float) * BT * C);
    put(d, d_dw, pre_w, sizeof(float) * OC * C);
    put(d, d_db, pre_b, sizeof(float) * OC);
    shs_matmul_backward(d, d_dinp, d_dw, d_db, d_dout, m.d_inp, m.d_w, BT, C, OC);
    check_accumulated("matmul dinp +=", fetch(d, d_dinp, BT * C), pre_inp, dinp, BT * C);
    check_accumulated("matmul dweight +=", fetch(d, d_dw, OC * C), pre_w, dw, OC * C);
    check_accumulated("matmul dbias +=", fetch(d, d_db, OC), pre_b, db, OC);
    put(d, d_dw, pre_w, sizeof(float) * OC * C);
    shs_matmul_backward(d, NULL, d_dw, NULL, d_dout, m.d_inp, m.d_w, BT, C, OC);
    check_accumulated("matmul dweight += (dinp, dbias NULL)", fetch(d, d_dw, OC * C), pre_w, dw, OC * C);

    check_fd("matmul dinp", matmul_loss, &m, m.inp, BT * C, dinp);
    check_fd("matmul dweight", matmul_loss, &m, m.w, OC * C, dw);
    check_fd("matmul dbias", matmul_loss, &m, m.b, OC, db);
}

/* ---- matmul: instruction-set paths and thread counts ------------------------
 * Every path (scalar fmaf, AVX2, AVX-512) must give the bits of the host fma
 * chains, for the forward (with and without bias), dinp and dweight, on shapes
 * that cut tiles (12 x 32) at every edge, include 0 and 1, and span several
 * K blocks (256) in each product's reduction (C, OC, BT). */
static const int mm_shapes[][3] = {
    {1, 1, 1},   {0, 5, 3},    {3, 0, 5},   {4, 6, 0},    {13, 37, 45}, {25, 300, 70},
    {300, 17, 33}, {11, 20, 290}, {24, 64, 64}, {37, 48, 29}, {12, 513, 97},
};

typedef struct {
    int BT, C, OC;
    float *inp, *w, *bias, *dout, *pre_inp, *pre_w, *pre_b;   /* host inputs */
} mm_case_t;

typedef struct {
    float *out, *out_nb, *dinp, *dw, *db;
} mm_result_t;

static void mm_case_init(mm_case_t *m, int BT, int C, int OC) {
    m->BT = BT, m->C = C, m->OC = OC;
    m->inp = hf(BT * C), m->w = hf(OC * C), m->bias = hf(OC), m->dout = hf(BT * OC);
    m->pre_inp = hf(BT * C), m->pre_w = hf(OC * C), m->pre_b = hf(OC);
    fill_wide(m->inp, BT * C);
    fill_wide(m->w, OC * C);
    fill(m->bias, OC, -1, 1);
    fill_wide(m->dout, BT * OC);
    fill(m->pre_inp, BT * C, -3, 3);
    fill(m->pre_w, OC * C, -3, 3);
    fill(m->pre_b, OC, -3, 3);
}

/* forward with and without bias; backward into the pre-filled buffers */
static void mm_run(shs_device_t *d, const mm_case_t *m, mm_result_t *r) {
    int BT = m->BT, C = m->C, OC = m->OC;
    float *d_inp = dput(d, m->inp, BT * C), *d_w = dput(d, m->w, OC * C), *d_b = dput(d, m->bias, OC);
    float *d_dout = dput(d, m->dout, BT * OC), *d_out = dnew(d, BT * OC);
    float *d_dinp = dput(d, m->pre_inp, BT * C), *d_dw = dput(d, m->pre_w, OC * C), *d_db = dput(d, m->pre_b, OC);
    shs_matmul_forward(d, d_out, d_inp, d_w, d_b, BT, C, OC);
    r->out = fetch(d, d_out, BT * OC);
    shs_matmul_forward(d, d_out, d_inp, d_w, NULL, BT, C, OC);
    r->out_nb = fetch(d, d_out, BT * OC);
    shs_matmul_backward(d, d_dinp, d_dw, d_db, d_dout, d_inp, d_w, BT, C, OC);
    r->dinp = fetch(d, d_dinp, BT * C), r->dw = fetch(d, d_dw, OC * C), r->db = fetch(d, d_db, OC);
}

static void mm_assert_equal(const mm_result_t *a, const mm_result_t *b, const mm_case_t *m) {
    size_t no = sizeof(float) * m->BT * m->OC, ni = sizeof(float) * m->BT * m->C, nw = sizeof(float) * m->OC * m->C;
    if (no) assert_memory_equal(a->out, b->out, no);
    if (no) assert_memory_equal(a->out_nb, b->out_nb, no);
    if (ni) assert_memory_equal(a->dinp, b->dinp, ni);
    if (nw) assert_memory_equal(a->dw, b->dw, nw);
    if (m->OC) assert_memory_equal(a->db, b->db, sizeof(float) * m->OC);
}

static void test_matmul_isa_paths(void **state) {
    int tested[SHS__MM_NUM_ISA] = {0};
    for (size_t s = 0; s < sizeof mm_shapes / sizeof mm_shapes[0]; s++) {
        int BT = mm_shapes[s][0], C = mm_shapes[s][1], OC = mm_shapes[s][2];
        seed(100 + s);
        mm_case_t m;
        mm_case_init(&m, BT, C, OC);
        /* the host chains */
        float *ref_out = hf(BT * OC), *ref_out_nb = hf(BT * OC), *ref_dinp = hf(BT * C), *ref_dw = hf(OC * C);
        matmul_fma_ref(ref_out, m.inp, m.w, m.bias, BT, C, OC);
        matmul_fma_ref(ref_out_nb, m.inp, m.w, NULL, BT, C, OC);
        memcpy(ref_dinp, m.pre_inp, sizeof(float) * BT * C);
        memcpy(ref_dw, m.pre_w, sizeof(float) * OC * C);
        matmul_backward_fma_ref(ref_dinp, ref_dw, m.dout, m.inp, m.w, BT, C, OC);

        shs_device_t *d = new_dev(2);
        mm_result_t r[SHS__MM_NUM_ISA];
        for (int isa = SHS__MM_ISA_SCALAR; isa < SHS__MM_NUM_ISA; isa++) {
            if (!shs__cpu_matmul_force_isa((shs__mm_isa_t)isa)) continue;
            assert_int_equal(shs__cpu_matmul_isa(), isa);
            mm_run(d, &m, &r[isa]);
            tested[isa] = 1;
            const char *name = shs__cpu_matmul_isa_name((shs__mm_isa_t)isa);
            char what[96];
            snprintf(what, sizeof what, "%s %dx%dx%d out", name, BT, C, OC);
            check_bits(what, r[isa].out, ref_out, BT * OC);
            snprintf(what, sizeof what, "%s %dx%dx%d out (no bias)", name, BT, C, OC);
            check_bits(what, r[isa].out_nb, ref_out_nb, BT * OC);
            snprintf(what, sizeof what, "%s %dx%dx%d dinp +=", name, BT, C, OC);
            check_bits(what, r[isa].dinp, ref_dinp, BT * C);
            snprintf(what, sizeof what, "%s %dx%dx%d dweight +=", name, BT, C, OC);
            check_bits(what, r[isa].dw, ref_dw, OC * C);
            if (isa != SHS__MM_ISA_SCALAR) mm_assert_equal(&r[isa], &r[SHS__MM_ISA_SCALAR], &m);
        }
        assert_true(shs__cpu_matmul_force_isa(SHS__MM_ISA_AUTO));
        teardown(state);
    }
    assert_true(tested[SHS__MM_ISA_SCALAR]);
    for (int isa = SHS__MM_ISA_SCALAR; isa < SHS__MM_NUM_ISA; isa++)
        print_message("matmul path %-6s %s\n", shs__cpu_matmul_isa_name((shs__mm_isa_t)isa),
                      tested[isa] ? "compared" : "not available here");
}

static void test_matmul_thread_counts(void **state) {
    for (size_t s = 0; s < sizeof mm_shapes / sizeof mm_shapes[0]; s++) {
        seed(200 + s);
        mm_case_t m;
        mm_case_init(&m, mm_shapes[s][0], mm_shapes[s][1], mm_shapes[s][2]);
        mm_result_t r1, r2, r3;
        mm_run(new_dev(1), &m, &r1);
        mm_run(new_dev(2), &m, &r2);
        mm_run(new_dev(3), &m, &r3);
        mm_assert_equal(&r1, &r2, &m);
        mm_assert_equal(&r1, &r3, &m);
        teardown(state);
    }
}


/* Zero-size matmuls: C = 0 gives out = bias (or 0) exactly; OC = 0 and
 * BT = 0 leave every gradient buffer as it was. */
static void test_matmul_zero_sizes(void **state) {
    shs_device_t *d = new_dev(2);
    seed(17);
    float bias[5], pre[40], junk[40];
    fill(bias, 5, -1, 1);
    fill(pre, 40, 0.5f, 3);   /* positive: x + 0 keeps its bits */
    fill(junk, 40, -1, 1);
    float *d_bias = dput(d, bias, 5), *d_any = dput(d, junk, 40), *d_out = dput(d, junk, 40);
    /* C = 0: BT=4 rows of the bias */
    shs_matmul_forward(d, d_out, d_any, d_any, d_bias, 4, 0, 5);
    float *out = fetch(d, d_out, 20), *want = hf(20);
    for (int r = 0; r < 4; r++) memcpy(want + r * 5, bias, sizeof bias);
    check_bits("matmul C=0 with bias", out, want, 20);
    shs_matmul_forward(d, d_out, d_any, d_any, NULL, 4, 0, 5);
    memset(want, 0, 20 * sizeof(float));
    check_bits("matmul C=0", fetch(d, d_out, 20), want, 20);
    /* backward with C = 0: dbias still gets the column sums of dout */
    float *d_db = dput(d, pre, 5), *d_dw = dput(d, pre, 40), *d_dinp = dput(d, pre, 40);
    shs_matmul_backward(d, d_dinp, d_dw, d_db, d_any, d_any, d_any, 4, 0, 5);
    float *db = fetch(d, d_db, 5);
    for (int o = 0; o < 5; o++) {
        float s = 0.0f;
        for (int r = 0; r < 4; r++) s += junk[r * 5 + o];
        want[o] = pre[o] + s;
    }
    check_bits("matmul C=0 dbias", db, want, 5);
    check_bits("matmul C=0 dinp untouched", fetch(d, d_dinp, 40), pre, 40);
    check_bits("matmul C=0 dweight untouched", fetch(d, d_dw, 40), pre, 40);
    /* OC = 0: the output is empty, dinp += 0 */
    put(d, d_out, junk, 40 * sizeof(float));
    shs_matmul_forward(d, d_out, d_any, d_any, d_bias, 4, 6, 0);
    check_bits("matmul OC=0 out untouched", fetch(d, d_out, 40), junk, 40);
    shs_matmul_backward(d, d_dinp, d_dw, d_db, d_any, d_any, d_any, 4, 6, 0);
    check_bits("matmul OC=0 dinp", fetch(d, d_dinp, 24), pre, 24);
    check_bits("matmul OC=0 dbias", fetch(d, d_db, 5), db, 5);
    /* BT = 0: dweight and dbias += 0 */
    put(d, d_dw, pre, 40 * sizeof(float));
    shs_matmul_backward(d, NULL, d_dw, d_db, d_any, d_any, d_any, 0, 4, 5);
    check_bits("matmul BT=0 dweight", fetch(d, d_dw, 20), pre, 20);
    check_bits("matmul BT=0 dbias", fetch(d, d_db, 5), db, 5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_memory_ops, teardown),
        cmocka_unit_test_teardown(test_matmul_forward, teardown),
        cmocka_unit_test_teardown(test_matmul_backward, teardown),
        cmocka_unit_test_teardown(test_matmul_isa_paths, teardown),
        cmocka_unit_test_teardown(test_matmul_thread_counts, teardown),
        cmocka_unit_test_teardown(test_matmul_zero_sizes, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
