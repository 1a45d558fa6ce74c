/* comm_values.h - what the thread communicator's tests share: the world
 * sizes, per-dtype element access, and the closed-form inputs and expected
 * results of every reduction (x_r[i] depends on rank r and index i; the
 * expected value is a formula in i and N). Include after <cmocka.h>. Not a
 * test; included by the test_comm_*.c programs only. */
#ifndef SHARDSIM_TEST_COMM_VALUES_H
#define SHARDSIM_TEST_COMM_VALUES_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "shardsim/comm.h"
#include "order_values.h" /* test_avg_term */

static const int world_sizes[] = {1, 2, 3, 4, 5, 8};
#define NUM_WORLD_SIZES (int)(sizeof world_sizes / sizeof world_sizes[0])
#define DATA_TIMEOUT_MS 20000  /* only reached if a test is broken */

/* ---- helpers ------------------------------------------------------------ */

static inline void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline int dtype_signed(shs_dtype_t t) { return t != SHS_U8 && t != SHS_U32 && t != SHS_U64; }

/* Element i of buf as a double (every test value is exact in every dtype). */
static inline double get(const void *buf, shs_dtype_t t, size_t i) {
    switch (t) {
    case SHS_I8: return ((const int8_t *)buf)[i];
    case SHS_U8: return ((const uint8_t *)buf)[i];
    case SHS_I32: return ((const int32_t *)buf)[i];
    case SHS_U32: return ((const uint32_t *)buf)[i];
    case SHS_I64: return (double)((const int64_t *)buf)[i];
    case SHS_U64: return (double)((const uint64_t *)buf)[i];
    case SHS_F16: return shs_f16_to_f32(((const uint16_t *)buf)[i]);
    case SHS_F32: return ((const float *)buf)[i];
    case SHS_F64: return ((const double *)buf)[i];
    case SHS_BF16: return shs_bf16_to_f32(((const uint16_t *)buf)[i]);
    default: return NAN;
    }
}

static inline void put(void *buf, shs_dtype_t t, size_t i, double v) {
    switch (t) {
    case SHS_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case SHS_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case SHS_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case SHS_U32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case SHS_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case SHS_U64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case SHS_F16: ((uint16_t *)buf)[i] = shs_f32_to_f16((float)v); break;
    case SHS_F32: ((float *)buf)[i] = (float)v; break;
    case SHS_F64: ((double *)buf)[i] = v; break;
    case SHS_BF16: ((uint16_t *)buf)[i] = shs_f32_to_bf16((float)v); break;
    default: break;
    }
}

/* Number of ranks r in [0, n) with r % 4 == t. */
static inline int ranks_with_residue(int n, int t) { return t < n ? (n - 1 - t) / 4 + 1 : 0; }

/* x_r[i] for reductions: small integers (sums <= 84 for N <= 8), exact in
 * every dtype, so every op has an exact closed form below. */
static inline double red_input(shs_redop_t op, shs_dtype_t t, int r, size_t i, int n) {
    double sign = dtype_signed(t) && (i % 2) ? -1.0 : 1.0;
    switch (op) {
    case SHS_SUM:
    case SHS_AVG: return sign * (double)(r + 1 + (int)(i % 7));
    case SHS_PROD: {
        int k = (int)((r + i) % 4);
        return k == 0 ? 2.0 : (k == 1 && dtype_signed(t)) ? -1.0 : 1.0;
    }
    default: return sign * (double)((r + i) % (size_t)n + i % 3); /* max, min */
    }
}

/* Float AVG of red_input over ranks 0..n-1 by comm.h's definition: the
 * terms x_r * s rounded to t (test_avg_term), summed in rank order with each
 * add in f32 (f64 for f64) rounded to t. */
static inline double red_expect_avg(shs_dtype_t t, size_t i, int n) {
    double acc = test_avg_term(t, red_input(SHS_AVG, t, 0, i, n), n);
    for (int r = 1; r < n; r++) {
        double y = test_avg_term(t, red_input(SHS_AVG, t, r, i, n), n);
        if (t == SHS_F64) acc += y;
        else if (t == SHS_F32) acc = (float)acc + (float)y;
        else {
            float f = (float)acc + (float)y;
            acc = t == SHS_F16 ? shs_f16_to_f32(shs_f32_to_f16(f)) : shs_bf16_to_f32(shs_f32_to_bf16(f));
        }
    }
    return acc;
}

/* op over ranks of red_input, in closed form (float AVG: by definition). */
static inline double red_expect(shs_redop_t op, shs_dtype_t t, size_t i, int n) {
    double sign = dtype_signed(t) && (i % 2) ? -1.0 : 1.0;
    double sum = n * (n + 1) / 2 + n * (double)(i % 7); /* sum of (r + 1 + i%7) */
    double top = (double)(n - 1) + (double)(i % 3), bottom = (double)(i % 3);
    switch (op) {
    case SHS_SUM: return sign * sum;
    case SHS_AVG: return shs_dtype_is_float(t) ? red_expect_avg(t, i, n) : sign * floor(sum / n); /* ints truncate toward 0 */
    case SHS_PROD: {
        int twos = ranks_with_residue(n, (int)((4 - i % 4) % 4));
        int minus = dtype_signed(t) ? ranks_with_residue(n, (int)((5 - i % 4) % 4)) : 0;
        return ldexp(minus % 2 ? -1.0 : 1.0, twos);
    }
    case SHS_MAX: return sign > 0 ? top : -bottom;
    default: return sign > 0 ? bottom : -top; /* min */
    }
}

/* x_r[i] for the data movers (all_gather, broadcast). */
static inline double move_input(shs_dtype_t t, int r, size_t i) {
    double v = (double)((r * 13 + (int)(i % 101)) % 101);
    return dtype_signed(t) ? v - 50 : v;
}

static inline void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) abort();
    return p;
}

#define CASE_FMT "%s %s N=%d count=%zu in_place=%d"
#define CASE_ARGS(t, op, n, count, ip) shs_dtype_name(t), shs_redop_name(op), n, count, ip

#endif
