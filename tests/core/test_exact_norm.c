/* test_exact_norm.c - the exact gradient-norm accumulator (exact_norm.h):
 * the same bits whatever the split and order of the elements, and the right
 * value against closed forms and a long-double oracle. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/device.h"
#include "shardsim/exact_norm.h"

static float norm_of(const float *x, size_t n, int p) {
    int64_t acc[SHS_NORM_ACC_WORDS] = {0};
    shs_exact_norm_add(acc, x, n, p);
    return shs_exact_norm_finish(acc, p);
}

static uint64_t rng = 88172645463325252ULL;
static uint32_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)rng; }

/* Values spanning many binades, with signs, subnormals and zeros. */
static void fill_wild(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int e = (int)(next() % 80) - 60;
        x[i] = ldexpf((float)(next() % 16777216) / 16777216.0f, e) * (next() & 1 ? -1.0f : 1.0f);
        if (i % 97 == 0) x[i] = 0x1p-149f * (float)(next() % 8); /* subnormal or zero */
    }
}

/* Any partition into pieces, added in any order and combined by summing the
 * accumulators (as the all-reduce does), gives the same bits. */
static void test_split_and_order_independent(void **state) {
    enum { N = 5000 };
    float x[N], y[N];
    fill_wild(x, N);
    for (int p = -1; p <= 2; p++) {
        if (p == 0) continue;
        float whole = norm_of(x, N, p);
        for (int trial = 0; trial < 20; trial++) {
            /* shuffle a copy */
            memcpy(y, x, sizeof x);
            for (size_t i = N - 1; i > 0; i--) {
                size_t j = next() % (i + 1);
                float t = y[i]; y[i] = y[j]; y[j] = t;
            }
            int pieces = 1 + (int)(next() % 9);
            int64_t total[SHS_NORM_ACC_WORDS] = {0};
            size_t at = 0;
            for (int k = 0; k < pieces; k++) {
                size_t len = k == pieces - 1 ? N - at : next() % (N - at + 1);
                int64_t part[SHS_NORM_ACC_WORDS] = {0};
                shs_exact_norm_add(part, y + at, len, p);
                for (int w = 0; w < SHS_NORM_ACC_WORDS; w++)
                    total[w] = p == SHS_NORM_INF ? (part[w] > total[w] ? part[w] : total[w]) : total[w] + part[w];
                at += len;
            }
            float got = shs_exact_norm_finish(total, p);
            assert_memory_equal(&got, &whole, sizeof got);
        }
    }
}

static void test_closed_forms(void **state) {
    float a[] = {3.0f, -4.0f};
    assert_true(norm_of(a, 2, 2) == 5.0f);
    assert_true(norm_of(a, 2, 1) == 7.0f);
    assert_true(norm_of(a, 2, SHS_NORM_INF) == 4.0f);
    /* 2^24 + 1 + ... : an f32 running sum would lose every 1 */
    enum { M = 1000 };
    float b[M + 1];
    b[0] = 16777216.0f;
    for (int i = 1; i <= M; i++) b[i] = 1.0f;
    assert_true(norm_of(b, M + 1, 1) == 16777216.0f + 1000.0f);
    /* the smallest subnormal: its square 2^-298 is far below f32 but exact here */
    float tiny[4] = {0x1p-149f, 0x1p-149f, 0x1p-149f, 0x1p-149f};
    float t = norm_of(tiny, 4, 2); /* sqrt(4 * 2^-298) = 2^-148 */
    assert_true(t == 0x1p-148f);
    /* the largest f32 squared overflows f32 and f64 sums of a few, not here */
    float big[2] = {0x1.fffffep127f, 0x1.fffffep127f};
    assert_true(norm_of(big, 2, 2) == INFINITY); /* sqrt(2) * max > FLT_MAX: rounds to inf in f32 */
    float big1[1] = {0x1.fffffep127f};
    assert_true(norm_of(big1, 1, 2) == 0x1.fffffep127f);
    assert_true(norm_of(NULL, 0, 2) == 0.0f);
}

static void test_specials(void **state) {
    float x[3] = {1.0f, NAN, INFINITY};
    for (int p = -1; p <= 2; p++) if (p) assert_true(isnan(norm_of(x, 3, p)));
    float y[2] = {1.0f, -INFINITY};
    for (int p = -1; p <= 2; p++) if (p) assert_true(isinf(norm_of(y, 2, p)));
}

/* Against a long-double oracle on well-scaled data: within an f32 rounding. */
static void test_matches_oracle(void **state) {
    enum { N = 20000 };
    static float x[N];
    for (size_t i = 0; i < N; i++) x[i] = ((float)(next() % 2000001) - 1000000.0f) * 1e-6f;
    long double s1 = 0, s2 = 0, mx = 0;
    for (size_t i = 0; i < N; i++) {
        long double v = fabsl((long double)x[i]);
        s1 += v, s2 += v * v;
        if (v > mx) mx = v;
    }
    assert_true(fabs(norm_of(x, N, 1) - (double)s1) <= 1e-6 * (double)s1);
    assert_true(fabs(norm_of(x, N, 2) - (double)sqrtl(s2)) <= 1e-6 * (double)sqrtl(s2));
    assert_true(norm_of(x, N, SHS_NORM_INF) == (float)mx);
}

/* The device kernel adds into a device accumulator the same way. */
static void test_device_kernel(void **state) {
    shs_device_t *d;
    assert_int_equal(shs_device_create_cpu(&d, 0, SIZE_MAX, 2), SHS_OK);
    enum { N = 3000 };
    float x[N];
    fill_wild(x, N);
    float *dx;
    int64_t *dacc, acc[SHS_NORM_ACC_WORDS];
    assert_int_equal(shs_device_alloc(d, (void **)&dx, sizeof x, SHS_MEM_OTHER, NULL), SHS_OK);
    assert_int_equal(shs_device_alloc(d, (void **)&dacc, sizeof acc, SHS_MEM_OTHER, NULL), SHS_OK);
    assert_int_equal(shs_memcpy_h2d(d, dx, x, sizeof x), SHS_OK);
    assert_int_equal(shs_memset(d, dacc, 0, sizeof acc), SHS_OK);
    shs_norm_accumulate(d, dacc, dx, 1000, 2);
    shs_norm_accumulate(d, dacc, dx + 1000, N - 1000, 2);
    assert_int_equal(shs_memcpy_d2h(d, acc, dacc, sizeof acc), SHS_OK);
    float got = shs_exact_norm_finish(acc, 2), want = norm_of(x, N, 2);
    assert_memory_equal(&got, &want, sizeof got);
    shs_device_free(d, dx);
    shs_device_free(d, dacc);
    shs_device_destroy(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_and_order_independent),
        cmocka_unit_test(test_closed_forms),
        cmocka_unit_test(test_specials),
        cmocka_unit_test(test_matches_oracle),
        cmocka_unit_test(test_device_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
