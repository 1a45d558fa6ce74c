/* kernel_checks.h - what the CPU kernel tests share: a seeded rng, host
 * scratch freed by teardown, devices, uploads and fetches, the comparisons
 * (close to an f64 oracle, relative, bit for bit) and the finite-difference
 * check. Tolerances and what is compared exactly: test_kernels_matmul.c's
 * header. Include after <cmocka.h>. Not a test; included by the
 * test_kernels_*.c programs only. */
#ifndef SHARDSIM_TEST_KERNEL_CHECKS_H
#define SHARDSIM_TEST_KERNEL_CHECKS_H

#include <stdint.h>
#include <stdlib.h>

#include "shardsim/device.h"

/* The tolerances (test_kernels_matmul.c's header says what each bounds). */
#define FWD_TOL 1e-5
#define FD_STEP 1e-3f
#define FD_TOL 2e-3
#define OPT_TOL 2e-6

/* ---- test scaffolding: rng, host scratch, devices ---------------------- */

static uint64_t rng_state;
static inline void seed(uint64_t s) { rng_state = s; }
static inline uint64_t next_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static inline float urand(float lo, float hi) { return lo + (hi - lo) * (float)((next_u64() >> 40) * 0x1.0p-24); }
static inline void fill(float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = urand(lo, hi);
}

/* Values of widely varying magnitude, so that reordering a float sum shows. */
static inline void fill_wide(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = ldexpf(urand(-1, 1), (int)(next_u64() % 17) - 8);
}

#define MAX_HOST 128
static void *host_bufs[MAX_HOST];
static int n_host;
static inline void *hbuf(size_t bytes) {
    assert_true(n_host < MAX_HOST);
    void *p = calloc(1, bytes ? bytes : 1);
    assert_non_null(p);
    return host_bufs[n_host++] = p;
}
static inline float *hf(size_t n) { return hbuf(n * sizeof(float)); }
static inline double *hd(size_t n) { return hbuf(n * sizeof(double)); }

#define MAX_DEVS 4
static shs_device_t *devs[MAX_DEVS];
static int n_devs;
static inline shs_device_t *new_dev(int nth) {
    assert_true(n_devs < MAX_DEVS);
    shs_device_t *d = NULL;
    assert_int_equal(shs_device_create_cpu(&d, n_devs, SIZE_MAX, nth), SHS_OK);
    assert_non_null(d);
    return devs[n_devs++] = d;
}

/* Devices own their allocations: destroying them frees everything. */
static inline int teardown(void **state) {
    for (int i = 0; i < n_devs; i++) shs_device_destroy(devs[i]);
    for (int i = 0; i < n_host; i++) free(host_bufs[i]);
    n_devs = n_host = 0;
    return 0;
}

static inline void *dalloc(shs_device_t *d, size_t bytes) {
    void *p = NULL;
    assert_int_equal(shs_device_alloc(d, &p, bytes, SHS_MEM_OTHER, "test"), SHS_OK);
    assert_non_null(p);
    return p;
}
static inline float *dnew(shs_device_t *d, size_t n) { return dalloc(d, n * sizeof(float)); }
static inline void put(shs_device_t *d, void *dst, const void *src, size_t bytes) {
    assert_int_equal(shs_memcpy_h2d(d, dst, src, bytes), SHS_OK);
}
static inline void get(shs_device_t *d, void *dst, const void *src, size_t bytes) {
    assert_int_equal(shs_memcpy_d2h(d, dst, src, bytes), SHS_OK);
}
static inline float *dput(shs_device_t *d, const float *h, size_t n) {
    float *p = dnew(d, n);
    put(d, p, h, n * sizeof(float));
    return p;
}
static inline int32_t *dput_i32(shs_device_t *d, const int32_t *h, size_t n) {
    int32_t *p = dalloc(d, n * sizeof(int32_t));
    put(d, p, h, n * sizeof(int32_t));
    return p;
}
static inline float *fetch(shs_device_t *d, const float *dp, size_t n) {
    float *h = hf(n);
    get(d, h, dp, n * sizeof(float));
    return h;
}
static inline void zero(shs_device_t *d, void *dp, size_t bytes) { assert_int_equal(shs_memset(d, dp, 0, bytes), SHS_OK); }

/* |got - ref| <= tol * max(1, scale) elementwise; scale = |ref| when NULL. */
static inline void check_close(const char *what, const float *got, const double *ref, const double *scale, size_t n,
                        double tol) {
    for (size_t i = 0; i < n; i++) {
        double s = fmax(1.0, scale ? scale[i] : fabs(ref[i]));
        double err = fabs((double)got[i] - ref[i]);
        if (!(err <= tol * s))
            fail_msg("%s[%zu]: got %.9g, want %.9g (err %.3g > tol %.3g)", what, i, got[i], ref[i], err, tol * s);
    }
}

/* |got - ref| <= tol * |ref| elementwise (so ref == 0 must be met exactly). */
static inline void check_rel(const char *what, const float *got, const double *ref, size_t n, double tol) {
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]);
        if (!(err <= tol * fabs(ref[i])))
            fail_msg("%s[%zu]: got %.9g, want %.9g (relative err %.3g > %.3g)", what, i, got[i], ref[i],
                     err / fabs(ref[i]), tol);
    }
}

/* Bit-exact comparison of floats, naming the first differing element. */
static inline void check_bits(const char *what, const float *got, const float *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s[%zu]: got %.9g, want %.9g (bit-exact)", what, i, got[i], want[i]);
}

/* ---- finite differences ----------------------------------------------------
 * loss(ctx) uploads the host inputs, runs the forward kernel and returns
 * L = sum_i out_i * w_i in f64. check_fd perturbs x[i] in place. */
typedef double (*loss_fn_t)(void *ctx);

static inline double weighted_sum(const float *out, const float *w, size_t n) {
    double L = 0.0;
    for (size_t i = 0; i < n; i++) L += (double)out[i] * w[i];
    return L;
}

static inline void check_fd(const char *what, loss_fn_t loss, void *ctx, float *x, size_t n, const float *analytic) {
    double max_num = 0.0;
    for (size_t i = 0; i < n; i++) {
        float x0 = x[i], xp = x0 + FD_STEP, xm = x0 - FD_STEP;
        x[i] = xp;
        double lp = loss(ctx);
        x[i] = xm;
        double lm = loss(ctx);
        x[i] = x0;
        double num = (lp - lm) / ((double)xp - (double)xm);
        double err = fabs((double)analytic[i] - num);
        if (!(err <= FD_TOL * fmax(1.0, fabs(num))))
            fail_msg("%s[%zu]: analytic %.7g, numeric %.7g (err %.3g)", what, i, analytic[i], num, err);
        max_num = fmax(max_num, fabs(num));
    }
    if (n && !(max_num > 1e-2)) fail_msg("%s: gradient is ~0 everywhere (max %.3g), check is vacuous", what, max_num);
}

/* Backward into pre-filled buffers must equal prefill + fresh gradient, bit for bit. */
static inline void check_accumulated(const char *what, const float *got, const float *prefill, const float *fresh,
                              size_t n) {
    float *want = hf(n);
    for (size_t i = 0; i < n; i++) want[i] = prefill[i] + fresh[i];
    check_bits(what, got, want, n);
}

#endif
