/* test_comm.c - collectives of the thread communicator against closed-form
 * expected values (gloo's manner: x_r[i] depends on rank r and index i, the
 * expected result is a formula in i and N), over N in {1,2,3,4,5,8}, every
 * dtype and op, counts divisible and not by N (and 0), in place and out of
 * place; the fixed reduction order checked bit for bit against serial
 * oracles; split; and the error paths (mismatch, timeout, abort, arguments).
 * Every error test runs with a short timeout, so nothing can hang. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "comm/comm_impl.h" /* the algorithm thresholds */
#include "shardsim/comm.h"
#include "order_values.h"
#include "run_record.h"
#include "thread_world.h"
#include "shardsim/clock.h"
#include "shardsim/train.h"
#include "strategy/strategy_testing.h" /* shs_strategy_skip_gather */

static const int world_sizes[] = {1, 2, 3, 4, 5, 8};
#define NUM_WORLD_SIZES (int)(sizeof world_sizes / sizeof world_sizes[0])
#define DATA_TIMEOUT_MS 20000  /* only reached if a test is broken */

/* ---- helpers ------------------------------------------------------------ */

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int dtype_signed(shs_dtype_t t) { return t != SHS_U8 && t != SHS_U32 && t != SHS_U64; }

/* Element i of buf as a double (every test value is exact in every dtype). */
static double get(const void *buf, shs_dtype_t t, size_t i) {
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

static void put(void *buf, shs_dtype_t t, size_t i, double v) {
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
static int ranks_with_residue(int n, int t) { return t < n ? (n - 1 - t) / 4 + 1 : 0; }

/* x_r[i] for reductions: small integers (sums <= 84 for N <= 8), exact in
 * every dtype, so every op has an exact closed form below. */
static double red_input(shs_redop_t op, shs_dtype_t t, int r, size_t i, int n) {
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
static double red_expect_avg(shs_dtype_t t, size_t i, int n) {
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
static double red_expect(shs_redop_t op, shs_dtype_t t, size_t i, int n) {
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
static double move_input(shs_dtype_t t, int r, size_t i) {
    double v = (double)((r * 13 + (int)(i % 101)) % 101);
    return dtype_signed(t) ? v - 50 : v;
}

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) abort();
    return p;
}

#define CASE_FMT "%s %s N=%d count=%zu in_place=%d"
#define CASE_ARGS(t, op, n, count, ip) shs_dtype_name(t), shs_redop_name(op), n, count, ip

/* ---- all_reduce --------------------------------------------------------- */

static const size_t reduce_counts[] = {0, 1, 7, 120, 121, 3001, 70001};

static shs_status_t rank_all_reduce(tw_rank_t *r) {
    int n = r->nranks;
    for (int t = SHS_DTYPE_DEFAULT + 1; t < SHS_NUM_DTYPES; t++) {
        size_t es = shs_dtype_size((shs_dtype_t)t);
        for (int op = 0; op < SHS_NUM_REDOPS; op++) {
            for (size_t c = 0; c < sizeof reduce_counts / sizeof reduce_counts[0]; c++) {
                size_t count = reduce_counts[c];
                if (count > 10000 && op != SHS_SUM && t != SHS_F32) continue; /* keep the run short */
                for (int ip = 0; ip < 2; ip++) {
                    char *send = xmalloc(count * es), *recv = ip ? send : xmalloc(count * es);
                    for (size_t i = 0; i < count; i++) put(send, t, i, red_input(op, t, r->rank, i, n));
                    TW_EXPECT_STATUS(r, shs_all_reduce(send, recv, count, t, op, r->comm), SHS_OK);
                    for (size_t i = 0; i < count; i++) {
                        double got = get(recv, t, i), want = red_expect(op, t, i, n);
                        TW_EXPECT(r, got == want, CASE_FMT " i=%zu: got %g want %g", CASE_ARGS(t, op, n, count, ip), i,
                                  got, want);
                        if (!ip) {
                            double in = get(send, t, i), x = red_input(op, t, r->rank, i, n);
                            TW_EXPECT(r, in == x, CASE_FMT ": sendbuf changed at %zu", CASE_ARGS(t, op, n, count, ip), i);
                        }
                    }
                    if (!ip) free(recv);
                    free(send);
                }
            }
        }
    }
    return SHS_OK;
}

static void test_all_reduce(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_all_reduce, NULL);
}

/* On one CPU every world is oversubscribed: small all_reduces take the
 * shared one-shot reduction (one rank reduces, all copy) on any machine. */
static void test_all_reduce_oversubscribed(void **state) {
    (void)state;
    static const int worlds[] = {2, 3, 5};
    for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++)
        tw_run_ok_one_cpu(worlds[w], DATA_TIMEOUT_MS, rank_all_reduce, NULL);
}

/* ---- reduce_scatter ----------------------------------------------------- */

static const size_t block_counts[] = {0, 1, 7, 1000, 3001};

/* Rank r's sendbuf holds N blocks; element g = j*recvcount + i is x_r[g]. */
static shs_status_t rank_reduce_scatter(tw_rank_t *r) {
    int n = r->nranks;
    for (int t = SHS_DTYPE_DEFAULT + 1; t < SHS_NUM_DTYPES; t++) {
        size_t es = shs_dtype_size((shs_dtype_t)t);
        for (int op = 0; op < SHS_NUM_REDOPS; op++) {
            for (size_t c = 0; c < sizeof block_counts / sizeof block_counts[0]; c++) {
                size_t count = block_counts[c], total = count * (size_t)n;
                for (int ip = 0; ip < 2; ip++) {
                    char *send = xmalloc(total * es);
                    char *recv = ip ? send + (size_t)r->rank * count * es : xmalloc(count * es);
                    for (size_t g = 0; g < total; g++) put(send, t, g, red_input(op, t, r->rank, g, n));
                    TW_EXPECT_STATUS(r, shs_reduce_scatter(send, recv, count, t, op, r->comm), SHS_OK);
                    for (size_t i = 0; i < count; i++) {
                        size_t g = (size_t)r->rank * count + i;
                        double got = get(recv, t, i), want = red_expect(op, t, g, n);
                        TW_EXPECT(r, got == want, CASE_FMT " i=%zu: got %g want %g", CASE_ARGS(t, op, n, count, ip), i,
                                  got, want);
                    }
                    if (!ip) free(recv);
                    free(send);
                }
            }
        }
    }
    return SHS_OK;
}

static void test_reduce_scatter(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_reduce_scatter, NULL);
}

/* ---- all_gather --------------------------------------------------------- */

static shs_status_t rank_all_gather(tw_rank_t *r) {
    int n = r->nranks;
    for (int t = SHS_DTYPE_DEFAULT + 1; t < SHS_NUM_DTYPES; t++) {
        size_t es = shs_dtype_size((shs_dtype_t)t);
        for (size_t c = 0; c < sizeof block_counts / sizeof block_counts[0]; c++) {
            size_t count = block_counts[c], total = count * (size_t)n;
            for (int ip = 0; ip < 2; ip++) {
                char *recv = xmalloc(total * es);
                char *send = ip ? recv + (size_t)r->rank * count * es : xmalloc(count * es);
                for (size_t g = 0; g < total; g++) put(recv, t, g, 99);
                for (size_t i = 0; i < count; i++) put(send, t, i, move_input(t, r->rank, i));
                TW_EXPECT_STATUS(r, shs_all_gather(send, recv, count, t, r->comm), SHS_OK);
                for (size_t g = 0; g < total; g++) {
                    double got = get(recv, t, g), want = move_input(t, (int)(g / count), g % count);
                    TW_EXPECT(r, got == want, CASE_FMT " g=%zu: got %g want %g", CASE_ARGS(t, SHS_SUM, n, count, ip),
                              g, got, want);
                }
                if (!ip) free(send);
                free(recv);
            }
        }
    }
    return SHS_OK;
}

static void test_all_gather(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_all_gather, NULL);
}

/* ---- broadcast ---------------------------------------------------------- */

static const size_t root_counts[] = {0, 1, 7, 120, 121, 3001};

static shs_status_t rank_broadcast(tw_rank_t *r) {
    int n = r->nranks;
    for (int root = 0; root < n; root++) {
        for (int t = SHS_DTYPE_DEFAULT + 1; t < SHS_NUM_DTYPES; t++) {
            size_t es = shs_dtype_size((shs_dtype_t)t);
            for (size_t c = 0; c < sizeof root_counts / sizeof root_counts[0]; c++) {
                size_t count = root_counts[c];
                for (int ip = 0; ip < 2; ip++) {
                    char *recv = xmalloc(count * es), *send = ip ? recv : xmalloc(count * es);
                    for (size_t i = 0; i < count; i++) {
                        put(recv, t, i, 99);
                        put(send, t, i, move_input(t, r->rank, i));
                    }
                    /* sendbuf is read on the root only: others pass NULL in one variant */
                    const void *sb = (!ip && r->rank != root && c % 2) ? NULL : send;
                    TW_EXPECT_STATUS(r, shs_broadcast(sb, recv, count, t, root, r->comm), SHS_OK);
                    for (size_t i = 0; i < count; i++) {
                        double got = get(recv, t, i), want = move_input(t, root, i);
                        TW_EXPECT(r, got == want, CASE_FMT " root=%d i=%zu: got %g want %g",
                                  CASE_ARGS(t, SHS_SUM, n, count, ip), root, i, got, want);
                    }
                    if (!ip) free(send);
                    free(recv);
                }
            }
        }
    }
    return SHS_OK;
}

static void test_broadcast(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_broadcast, NULL);
}

/* ---- reduce ------------------------------------------------------------- */

static shs_status_t rank_reduce(tw_rank_t *r) {
    int n = r->nranks;
    for (int root = 0; root < n; root++) {
        for (int t = SHS_DTYPE_DEFAULT + 1; t < SHS_NUM_DTYPES; t++) {
            size_t es = shs_dtype_size((shs_dtype_t)t);
            for (int op = 0; op < SHS_NUM_REDOPS; op++) {
                for (size_t c = 0; c < sizeof root_counts / sizeof root_counts[0]; c++) {
                    size_t count = root_counts[c];
                    for (int ip = 0; ip < 2; ip++) {
                        char *send = xmalloc(count * es), *recv = ip ? send : xmalloc(count * es);
                        for (size_t i = 0; i < count; i++) {
                            if (!ip) put(recv, t, i, 99);
                            put(send, t, i, red_input(op, t, r->rank, i, n));
                        }
                        TW_EXPECT_STATUS(r, shs_reduce(send, recv, count, t, op, root, r->comm), SHS_OK);
                        for (size_t i = 0; i < count; i++) {
                            /* non-roots: recvbuf untouched (in place: it is the sendbuf) */
                            double got = get(recv, t, i);
                            double want = r->rank == root ? red_expect(op, t, i, n)
                                          : ip            ? red_input(op, t, r->rank, i, n)
                                                          : 99;
                            TW_EXPECT(r, got == want, CASE_FMT " root=%d i=%zu: got %g want %g",
                                      CASE_ARGS(t, op, n, count, ip), root, i, got, want);
                        }
                        if (!ip) free(recv);
                        free(send);
                    }
                }
            }
        }
    }
    return SHS_OK;
}

static void test_reduce(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_reduce, NULL);
}

/* ---- fixed reduction order, bit for bit ------------------------------------ */

/* A random f32 of either sign with an exponent spread over 2^-8 .. 2^8, so
 * sums lose bits and their value depends on the order. */
static float random_f32(uint64_t seed, int r, size_t i) { return (float)test_order_value(seed, r, i); }

/* The documented rule, one op at a time in rank order, with dtype.c's
 * conversions: for f16/bf16 each op in f32, then rounded to the dtype. */
static float round_to(shs_dtype_t t, float v) {
    if (t == SHS_BF16) return shs_bf16_to_f32(shs_f32_to_bf16(v));
    if (t == SHS_F16) return shs_f16_to_f32(shs_f32_to_f16(v));
    return v;
}

static float oracle_op(shs_redop_t op, float a, float b) {
    switch (op) {
    case SHS_PROD: return a * b;
    case SHS_MAX: return isnan(a) ? a : isnan(b) ? b : b > a ? b : a;
    case SHS_MIN: return isnan(a) ? a : isnan(b) ? b : b < a ? b : a;
    default: return a + b; /* sum, avg */
    }
}

/* Inputs for the 16-bit test: random values rounded to the dtype; for max
 * and min a few NaNs (rank-dependent positions) to check "first NaN wins". */
static float half_input(shs_dtype_t t, shs_redop_t op, int r, size_t i) {
    float v = round_to(t, random_f32(t * 10 + op, r, i));
    if ((op == SHS_MAX || op == SHS_MIN) && test_mix64((uint64_t)r * 31 + i) % 13 == 0) {
        uint16_t bits = (uint16_t)((t == SHS_BF16 ? 0x7fc0u : 0x7e00u) | (uint16_t)r); /* payload = rank */
        v = t == SHS_BF16 ? shs_bf16_to_f32(bits) : shs_f16_to_f32(bits);
    }
    return v;
}

/* An oracle's input for op: AVG's term x * s rounded to t (comm.h, via
 * test_avg_term), x itself for the other ops. */
static float avg_in(shs_dtype_t t, shs_redop_t op, float x, int n) {
    return op == SHS_AVG ? (float)test_avg_term(t, x, n) : x;
}

static uint16_t to_bits(shs_dtype_t t, float v) { return t == SHS_BF16 ? shs_f32_to_bf16(v) : shs_f32_to_f16(v); }

static shs_status_t rank_half_rounding(tw_rank_t *r) {
    int n = r->nranks;
    const size_t count = 4099;
    uint16_t *send = xmalloc(count * 2), *recv = xmalloc(count * 2);
    const shs_dtype_t types[2] = {SHS_BF16, SHS_F16};
    for (int k = 0; k < 2; k++) {
        shs_dtype_t t = types[k];
        for (int op = 0; op < SHS_NUM_REDOPS; op++) {
            for (size_t i = 0; i < count; i++) send[i] = to_bits(t, half_input(t, op, r->rank, i));
            TW_EXPECT_STATUS(r, shs_all_reduce(send, recv, count, t, op, r->comm), SHS_OK);
            size_t differs_from_single_rounding = 0;
            for (size_t i = 0; i < count; i++) {
                /* AVG: the same chain over the terms x * s rounded to t */
                float acc = avg_in(t, op, half_input(t, op, 0, i), n), wide = acc;
                for (int j = 1; j < n; j++) {
                    float x = avg_in(t, op, half_input(t, op, j, i), n);
                    acc = round_to(t, oracle_op(op, acc, x));
                    wide = oracle_op(op, wide, x);
                }
                uint16_t want = to_bits(t, acc);
                TW_EXPECT(r, recv[i] == want, "%s %s N=%d i=%zu: got 0x%04x want 0x%04x", shs_dtype_name(t),
                          shs_redop_name(op), n, i, recv[i], want);
                differs_from_single_rounding += to_bits(t, wide) != want;
            }
            /* the data must tell per-op rounding from a single final rounding */
            if (n >= 3 && (op == SHS_SUM || op == SHS_AVG))
                TW_EXPECT(r, differs_from_single_rounding > 0, "%s %s: test data too tame", shs_dtype_name(t),
                          shs_redop_name(op));
        }
    }
    free(send);
    free(recv);
    return SHS_OK;
}

static void test_half_precision_rounding_per_op(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_half_rounding, NULL);
}

/* all_reduce == all_gather(reduce_scatter) == broadcast(reduce) == the
 * serial rank-order oracle, bit for bit, on random f32 with inexact sums. */
static shs_status_t rank_bit_identical(tw_rank_t *r) {
    int n = r->nranks;
    const size_t recvcounts[] = {1, 333, 5000};
    const shs_redop_t ops[] = {SHS_SUM, SHS_AVG, SHS_PROD};
    for (size_t c = 0; c < sizeof recvcounts / sizeof recvcounts[0]; c++) {
        size_t rc = recvcounts[c], count = rc * (size_t)n;
        float *x = xmalloc(count * 4), *ar = xmalloc(count * 4), *ag = xmalloc(count * 4);
        float *rs = xmalloc(rc * 4), *rb = xmalloc(count * 4), *oracle = xmalloc(count * 4);
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            shs_redop_t op = ops[k];
            for (size_t i = 0; i < count; i++) x[i] = random_f32(c, r->rank, i);
            size_t order_matters = 0;
            for (size_t i = 0; i < count; i++) {
                float acc = avg_in(SHS_F32, op, random_f32(c, 0, i), n);
                float rev = avg_in(SHS_F32, op, random_f32(c, n - 1, i), n);
                for (int j = 1; j < n; j++) {
                    acc = oracle_op(op, acc, avg_in(SHS_F32, op, random_f32(c, j, i), n));
                    rev = oracle_op(op, rev, avg_in(SHS_F32, op, random_f32(c, n - 1 - j, i), n));
                }
                oracle[i] = acc;
                order_matters += rev != oracle[i];
            }
            TW_EXPECT_STATUS(r, shs_all_reduce(x, ar, count, SHS_F32, op, r->comm), SHS_OK);
            TW_EXPECT_STATUS(r, shs_reduce_scatter(x, rs, rc, SHS_F32, op, r->comm), SHS_OK);
            TW_EXPECT_STATUS(r, shs_all_gather(rs, ag, rc, SHS_F32, r->comm), SHS_OK);
            int root = (int)(c % (size_t)n);
            TW_EXPECT_STATUS(r, shs_reduce(x, rb, count, SHS_F32, op, root, r->comm), SHS_OK);
            TW_EXPECT_STATUS(r, shs_broadcast(rb, rb, count, SHS_F32, root, r->comm), SHS_OK);
            TW_EXPECT(r, memcmp(ar, oracle, count * 4) == 0, "all_reduce %s count=%zu != serial oracle",
                      shs_redop_name(op), count);
            TW_EXPECT(r, memcmp(ar, ag, count * 4) == 0, "all_reduce %s count=%zu != all_gather(reduce_scatter)",
                      shs_redop_name(op), count);
            TW_EXPECT(r, memcmp(ar, rb, count * 4) == 0, "all_reduce %s count=%zu != broadcast(reduce)",
                      shs_redop_name(op), count);
            if (n >= 3 && op == SHS_SUM && count >= 1000)
                TW_EXPECT(r, order_matters > 0, "sums are exact, the test proves nothing");
        }
        free(x); free(ar); free(ag); free(rs); free(rb); free(oracle);
    }
    return SHS_OK;
}

static void test_all_reduce_bit_identical_to_rs_ag(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_bit_identical, NULL);
}

/* ---- AVG as NCCL defines it: closed forms ---------------------------------- */

/* One AVG case: rank r contributes in[r] (bits of the dtype, a value exact in
 * it); every rank must get `want` (bits). */
typedef struct {
    shs_dtype_t t;
    int n;
    uint64_t in[8];
    uint64_t want;
} avg_case_t;

/* Expected values worked by hand from comm.h's definition (float: each input
 * times s = 1/N as NCCL stores it, rounded to the dtype, then summed in rank
 * order with each add rounded; integer: the wrapped sum divided by N,
 * truncating toward zero).
 * f16 [60000, 60000] (0x7b53) at N = 2: s = 0.5, 60000 * 0.5 = 30000 exact,
 *   30000 + 30000 = 60000 exact (1875 ulps of 32): 60000. Sum-then-divide
 *   overflowed: 120000 > 65504 rounds to inf, inf / 2 = inf.
 * f16 61440 = 15 * 2^12 (0x7b80) on every rank at N = 4 and 8: s = 2^-k,
 *   each term 15 * 2^(12-k) exact, the partial sums 15j * 2^(12-k) (j <= 8:
 *   7 significant bits) exact: 61440. Sum-then-divide: inf.
 * f16 [1, 2, 2] at N = 3: s = f16(float(1/3)) = 1365/4096 = 0.333251953125
 *   (0x3555). Terms: 1*s = 1365/4096; 2*s = 2730/4096 = 0.66650390625 (exact,
 *   ulp 2^-11 in [0.5, 1)). s + 2s = 4095/4096 = 0.999755859375: 2047.5 ulps
 *   of 2^-11, a tie, to even 2048: 1.0. 1.0 + 0.66650390625 = 1.66650390625:
 *   1706.5 ulps of 2^-10 in [1, 2), a tie, to even 1706: 1.666015625 =
 *   0x3eaa. Sum-then-divide: 5/3 = 1.6667 -> 1707 ulps: 1.6669921875 (0x3eab).
 * bf16 [1, 2, 2] at N = 3: s = bf16(float(1/3)) = 171/512 = 0.333984375
 *   (0x3eab). Terms: s, 2s = 171/256 = 0.66796875 (exact, ulp 2^-8). s + 2s =
 *   513/512 = 1.001953125: a quarter ulp (2^-7) above 1, to 1.0. 1.0 +
 *   0.66796875 = 1 + 85.5/128: a tie, to even 86: 1.671875 = 0x3fd6.
 *   Sum-then-divide: 5/3 -> 1 + 85.33/128 -> 85: 1.6640625 (0x3fd5).
 * f32 [1, 1, 3] at N = 3: s = float(1/3) = 11184811 * 2^-25 (0x3eaaaaab).
 *   Terms: s; 3s = (2^25 + 1) * 2^-25 = 1 + 2^-25, a quarter ulp above 1, to
 *   1.0. s + s = 2s exact; 2s + 1.0 = 1 + 11184811 * 2^-24 = 1 + 5592405.5
 *   ulps (2^-23), a tie, to even 5592406: 0x1.aaaaacp0 (0x3fd55556).
 *   Sum-then-divide: 5/3 -> 1 + 5592405.33 ulps: 0x1.aaaaaap0 (0x3fd55555).
 * i32 [-7, 0, 0] at N = 3: -7 / 3 truncates to -2 (floor would be -3).
 * i8 [100, 100] at N = 2: the sum wraps to -56, / 2 = -28 (0xe4).
 * u8 [200, 100] at N = 2: the sum wraps to 44, / 2 = 22.
 * i64 [INT64_MAX, 1] at N = 2: the sum wraps to INT64_MIN, / 2 = -2^62. */
static const avg_case_t avg_cases[] = {
    {SHS_F16, 2, {0x7b53, 0x7b53}, 0x7b53},
    {SHS_F16, 4, {0x7b80, 0x7b80, 0x7b80, 0x7b80}, 0x7b80},
    {SHS_F16, 8, {0x7b80, 0x7b80, 0x7b80, 0x7b80, 0x7b80, 0x7b80, 0x7b80, 0x7b80}, 0x7b80},
    {SHS_F16, 3, {0x3c00, 0x4000, 0x4000}, 0x3eaa},
    {SHS_BF16, 3, {0x3f80, 0x4000, 0x4000}, 0x3fd6},
    {SHS_F32, 3, {0x3f800000, 0x3f800000, 0x40400000}, 0x3fd55556},
    {SHS_I32, 3, {(uint32_t)-7, 0, 0}, (uint32_t)-2},
    {SHS_I8, 2, {100, 100}, 0xe4},
    {SHS_U8, 2, {200, 100}, 22},
    {SHS_I64, 2, {0x7fffffffffffffffull, 1}, 0xc000000000000000ull},
};

/* The low es bytes' worth of v as an element of size es, and back. */
static void put_bits(void *p, size_t es, uint64_t v) {
    if (es == 1) *(uint8_t *)p = (uint8_t)v;
    else if (es == 2) *(uint16_t *)p = (uint16_t)v;
    else if (es == 4) *(uint32_t *)p = (uint32_t)v;
    else *(uint64_t *)p = v;
}
static uint64_t get_bits(const void *p, size_t es) {
    if (es == 1) return *(const uint8_t *)p;
    if (es == 2) return *(const uint16_t *)p;
    if (es == 4) return *(const uint32_t *)p;
    return *(const uint64_t *)p;
}

static shs_status_t rank_avg_closed_form(tw_rank_t *r) {
    for (size_t k = 0; k < sizeof avg_cases / sizeof avg_cases[0]; k++) {
        const avg_case_t *c = &avg_cases[k];
        if (c->n != r->nranks) continue;
        size_t es = shs_dtype_size(c->t);
        _Alignas(8) unsigned char send[8 * 8], recv[8];
        for (int j = 0; j < c->n; j++) put_bits(send + (size_t)j * es, es, c->in[r->rank]);
        TW_EXPECT_STATUS(r, shs_all_reduce(send, recv, 1, c->t, SHS_AVG, r->comm), SHS_OK);
        TW_EXPECT(r, get_bits(recv, es) == c->want, "case %zu: %s avg N=%d all_reduce: got 0x%llx want 0x%llx", k,
                  shs_dtype_name(c->t), c->n, (unsigned long long)get_bits(recv, es), (unsigned long long)c->want);
        TW_EXPECT_STATUS(r, shs_reduce_scatter(send, recv, 1, c->t, SHS_AVG, r->comm), SHS_OK);
        TW_EXPECT(r, get_bits(recv, es) == c->want, "case %zu: %s avg N=%d reduce_scatter: got 0x%llx want 0x%llx",
                  k, shs_dtype_name(c->t), c->n, (unsigned long long)get_bits(recv, es), (unsigned long long)c->want);
    }
    return SHS_OK;
}

static void test_avg_closed_forms(void **state) {
    (void)state;
    const int worlds[] = {2, 3, 4, 8};
    for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++)
        tw_run_ok(worlds[w], DATA_TIMEOUT_MS, rank_avg_closed_form, NULL);
}

/* ---- both sides of every algorithm threshold ------------------------------ */

/* Every collective at the largest count of one algorithm and one element
 * more (staged vs direct, cached vs streaming stores), in place and out of
 * place, for f32 sum and avg and bf16 sum, bit for bit against the serial
 * rank-order oracle on random inputs. */
typedef enum { TH_ALL_REDUCE, TH_REDUCE_SCATTER, TH_ALL_GATHER, TH_BROADCAST, TH_REDUCE, TH_NUM } th_coll_t;

/* random_f32's kind of value (order-dependent sums), cheaper to draw. */
static float th_input(shs_dtype_t t, int r, size_t g) {
    static const float pow2[17] = {0x1p-8f, 0x1p-7f, 0x1p-6f, 0x1p-5f, 0x1p-4f, 0x1p-3f, 0x1p-2f, 0x1p-1f, 1.0f,
                                   0x1p1f,  0x1p2f,  0x1p3f,  0x1p4f,  0x1p5f,  0x1p6f,  0x1p7f,  0x1p8f};
    uint64_t h = test_mix64((uint64_t)r << 40 ^ g);
    float v = (1.0f + (float)(h & 0xffffff) / 16777216.0f) * pow2[(h >> 24) % 17];
    return round_to(t, (h >> 40) & 1 ? -v : v);
}

static void th_put(void *buf, shs_dtype_t t, size_t i, float v) {
    if (t == SHS_F32) ((float *)buf)[i] = v;
    else ((uint16_t *)buf)[i] = shs_f32_to_bf16(v);
}

static int th_same(const void *buf, shs_dtype_t t, size_t i, float want) {
    if (t == SHS_F32) return memcmp((const float *)buf + i, &want, 4) == 0;
    return ((const uint16_t *)buf)[i] == shs_f32_to_bf16(want);
}

/* op over ranks 0..n-1 of th_input at global index g, rounded after each op. */
static float th_oracle(shs_dtype_t t, shs_redop_t op, int n, size_t g) {
    float acc = avg_in(t, op, th_input(t, 0, g), n);
    for (int j = 1; j < n; j++) acc = round_to(t, acc + avg_in(t, op, th_input(t, j, g), n));
    return acc;
}

/* The counts on both sides of each threshold of `coll` at N = n. */
static int th_counts(th_coll_t coll, int n, size_t es, size_t out[4]) {
    size_t stage = SHS__STAGE_BYTES / es, un = (size_t)n;
    switch (coll) {
    case TH_ALL_REDUCE: {
        size_t one_shot = SHS__ONE_SHOT_MAX_BYTES / un / es;
        size_t c = one_shot < stage ? one_shot : stage, s = SHS__STREAM_MIN_BYTES / un / es;
        out[0] = c, out[1] = c + 1, out[2] = s, out[3] = s + 1;
        return 4;
    }
    case TH_REDUCE_SCATTER: {
        size_t s = SHS__STREAM_MIN_BYTES / un / es;
        out[0] = stage / un, out[1] = stage / un + 1, out[2] = s, out[3] = s + 1;
        return 4;
    }
    case TH_ALL_GATHER: {
        size_t s = SHS__STREAM_MIN_BYTES / un / un / es;
        out[0] = stage, out[1] = stage + 1, out[2] = s, out[3] = s + 1;
        return 4;
    }
    default: out[0] = stage, out[1] = stage + 1; return 2;
    }
}

static shs_status_t th_run(tw_rank_t *r, th_coll_t coll, size_t count, shs_dtype_t t, shs_redop_t op, int ip) {
    int n = r->nranks, me = r->rank, root = n - 1;
    size_t es = shs_dtype_size(t), un = (size_t)n;
    size_t send_elems = coll == TH_REDUCE_SCATTER ? un * count : count;
    size_t recv_elems = coll == TH_ALL_GATHER ? un * count : count;
    size_t big = send_elems > recv_elems ? send_elems : recv_elems;
    char *a = xmalloc(big * es), *b = ip ? NULL : xmalloc(big * es);
    char *send = a, *recv = ip ? a : b;
    if (ip && coll == TH_REDUCE_SCATTER) recv = a + (size_t)me * count * es;
    if (ip && coll == TH_ALL_GATHER) send = a + (size_t)me * count * es;
    for (size_t i = 0; i < send_elems; i++) {
        size_t g = coll == TH_REDUCE_SCATTER ? i : coll == TH_ALL_GATHER ? (size_t)me * count + i : i;
        th_put(send, t, i, th_input(t, coll == TH_BROADCAST ? root : me, g));
    }
    shs_status_t s;
    switch (coll) {
    case TH_ALL_REDUCE: s = shs_all_reduce(send, recv, count, t, op, r->comm); break;
    case TH_REDUCE_SCATTER: s = shs_reduce_scatter(send, recv, count, t, op, r->comm); break;
    case TH_ALL_GATHER: s = shs_all_gather(send, recv, count, t, r->comm); break;
    case TH_BROADCAST: s = shs_broadcast(send, recv, count, t, root, r->comm); break;
    default: s = shs_reduce(send, recv, count, t, op, root, r->comm); break;
    }
    static const char *const names[TH_NUM] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"};
    int bad = s != SHS_OK;
    size_t first_bad = 0;
    /* the streaming sizes are checked at every 7th element and in full near
     * the end (the oracle is the slow part) */
    size_t stride = recv_elems > 100000 ? 7 : 1, tail = recv_elems > 2048 ? recv_elems - 2048 : 0;
    if (!bad && (coll != TH_REDUCE || me == root)) {
        for (size_t i = 0; i < recv_elems && !bad; i += i >= tail ? 1 : stride) {
            float want;
            switch (coll) {
            case TH_REDUCE_SCATTER: want = th_oracle(t, op, n, (size_t)me * count + i); break;
            case TH_ALL_GATHER: want = th_input(t, (int)(i / count), i); break;
            case TH_BROADCAST: want = th_input(t, root, i); break;
            default: want = th_oracle(t, op, n, i); break;
            }
            if (!th_same(recv, t, i, want)) bad = 1, first_bad = i;
        }
    }
    free(a);
    free(b);
    TW_EXPECT(r, !bad, "%s %s %s N=%d count=%zu in_place=%d: %s at %zu", names[coll], shs_dtype_name(t),
              shs_redop_name(op), n, count, ip, s != SHS_OK ? shs_last_error() : "differs from the oracle",
              first_bad);
    return SHS_OK;
}

static shs_status_t rank_thresholds(tw_rank_t *r) {
    const struct { shs_dtype_t t; shs_redop_t op; } kinds[] = {{SHS_F32, SHS_SUM}, {SHS_F32, SHS_AVG}, {SHS_BF16, SHS_SUM}};
    for (int coll = 0; coll < TH_NUM; coll++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            size_t counts[4];
            int nc = th_counts((th_coll_t)coll, r->nranks, shs_dtype_size(kinds[k].t), counts);
            for (int c = 0; c < nc; c++)
                for (int ip = 0; ip < 2; ip++) {
                    if (c >= 2 && kinds[k].op == SHS_AVG) continue; /* streaming: sum covers the store paths */
                    shs_status_t s = th_run(r, (th_coll_t)coll, counts[c], kinds[k].t, kinds[k].op, ip);
                    if (s != SHS_OK) return s;
                }
        }
    return SHS_OK;
}

static void test_algorithm_thresholds(void **state) {
    (void)state;
    const int sizes[] = {1, 2, 3, 8};
    for (size_t w = 0; w < sizeof sizes / sizeof sizes[0]; w++) tw_run_ok(sizes[w], DATA_TIMEOUT_MS, rank_thresholds, NULL);
}

/* Host-side check of main-thread visible results: assert_memory_equal on one
 * rank's all_reduce against all_gather(reduce_scatter), kept by rank 0. */
typedef struct {
    float a[4 * 777], b[4 * 777];
} pair_bufs_t;

static shs_status_t rank_pair(tw_rank_t *r) {
    pair_bufs_t *out = r->arg;
    size_t rc = 777, count = rc * (size_t)r->nranks;
    float *x = xmalloc(count * 4), *ar = xmalloc(count * 4), *ag = xmalloc(count * 4), *rs = xmalloc(rc * 4);
    for (size_t i = 0; i < count; i++) x[i] = random_f32(42, r->rank, i);
    TW_EXPECT_STATUS(r, shs_all_reduce(x, ar, count, SHS_F32, SHS_SUM, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_reduce_scatter(x, rs, rc, SHS_F32, SHS_SUM, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_all_gather(rs, ag, rc, SHS_F32, r->comm), SHS_OK);
    if (r->rank == 0) {
        memcpy(out->a, ar, count * 4);
        memcpy(out->b, ag, count * 4);
    }
    free(x); free(ar); free(ag); free(rs);
    return SHS_OK;
}

static void test_all_reduce_equals_rs_ag_memory(void **state) {
    (void)state;
    pair_bufs_t *bufs = calloc(1, sizeof *bufs);
    assert_non_null(bufs);
    tw_run_ok(4, DATA_TIMEOUT_MS, rank_pair, bufs);
    assert_memory_equal(bufs->a, bufs->b, sizeof bufs->a);
    free(bufs);
}

/* ---- the fused f32 sum with streaming stores ------------------------------- */

/* Large f32 sums and averages take a fused path (comm_reduce.c) when every
 * destination has the same address mod 64, and the tiled path otherwise.
 * Both, with every head length (buffers offset by 0, 4 and 60 bytes on all
 * ranks, or by rank-dependent amounts), in and out of place, all_reduce and
 * reduce_scatter, bit for bit against the serial rank-order oracle. */
static shs_status_t rank_streamed(tw_rank_t *r) {
    int n = r->nranks, me = r->rank;
    /* just above the streaming threshold, with a ragged tail */
    size_t count = SHS__STREAM_MIN_BYTES / 4 / (size_t)n + 37;
    size_t rs_count = SHS__STREAM_MIN_BYTES / 4 / (size_t)n + 5; /* reduce_scatter recvcount */
    size_t big = count > rs_count * (size_t)n ? count : rs_count * (size_t)n;
    static const int offsets[] = {0, 4, 60, -1}; /* -1: 4 * rank bytes, unequal across ranks */
    size_t bytes = (big * 4 + 128 + 63) / 64 * 64; /* aligned_alloc: a multiple of the alignment */
    char *sb = aligned_alloc(64, bytes), *rb = aligned_alloc(64, bytes);
    TW_EXPECT(r, sb && rb, "out of memory");
    for (size_t oi = 0; oi < sizeof offsets / sizeof offsets[0]; oi++) {
        size_t off = offsets[oi] < 0 ? 4 * (size_t)me : (size_t)offsets[oi];
        float *send = (float *)(sb + off), *recv = (float *)(rb + off);
        for (int coll = 0; coll < 2; coll++)
            for (int op = 0; op < 2; op++)
                for (int ip = 0; ip < 2; ip++) {
                    shs_redop_t redop = op ? SHS_AVG : SHS_SUM;
                    size_t total = coll == 0 ? count : rs_count * (size_t)n;
                    for (size_t g = 0; g < total; g++) send[g] = th_input(SHS_F32, me, g);
                    float *out = ip ? (coll == 0 ? send : send + (size_t)me * rs_count) : recv;
                    shs_status_t s = coll == 0 ? shs_all_reduce(send, out, count, SHS_F32, redop, r->comm)
                                               : shs_reduce_scatter(send, out, rs_count, SHS_F32, redop, r->comm);
                    TW_EXPECT(r, s == SHS_OK, "%s", shs_last_error());
                    size_t m = coll == 0 ? count : rs_count, base = coll == 0 ? 0 : (size_t)me * rs_count;
                    for (size_t i = 0; i < m; i++) {
                        float want = th_oracle(SHS_F32, redop, n, base + i);
                        TW_EXPECT(r, memcmp(&out[i], &want, 4) == 0,
                                  "%s %s offset %zu %s i=%zu: got %a want %a", coll ? "reduce_scatter" : "all_reduce",
                                  op ? "avg" : "sum", off, ip ? "in place" : "out of place", i, out[i], want);
                    }
                }
    }
    free(sb);
    free(rb);
    return SHS_OK;
}

static void test_streamed_f32_sum(void **state) {
    (void)state;
    static const int worlds[] = {1, 2, 3};
    for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++)
        tw_run_ok(worlds[w], DATA_TIMEOUT_MS, rank_streamed, NULL);
}

/* ---- barrier -------------------------------------------------------------- */

static shs_status_t rank_barrier(tw_rank_t *r) {
    atomic_int *arrived = r->arg;
    for (int round = 0; round < 50; round++) {
        if (round % 10 == 0) sleep_ms(r->rank); /* stagger arrivals */
        atomic_fetch_add(arrived, 1);
        TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK);
        int seen = atomic_load(arrived);
        TW_EXPECT(r, seen >= (round + 1) * r->nranks, "round %d: passed the barrier with %d arrivals", round, seen);
        TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK); /* nobody starts the next round early */
    }
    return SHS_OK;
}

static void test_barrier(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) {
        atomic_int arrived = 0;
        tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_barrier, &arrived);
        assert_int_equal(atomic_load(&arrived), 50 * world_sizes[w]);
    }
}

/* ---- split ---------------------------------------------------------------- */

static shs_status_t check_child(tw_rank_t *r, shs_comm_t *child, const char *name, int size, int rank,
                                const int *members /* parent ranks in child rank order */) {
    TW_EXPECT(r, child != NULL, "no child comm");
    TW_EXPECT(r, strcmp(shs_comm_name(child), name) == 0, "name '%s' want '%s'", shs_comm_name(child), name);
    TW_EXPECT(r, shs_comm_size(child) == size, "size %d want %d", shs_comm_size(child), size);
    TW_EXPECT(r, shs_comm_rank(child) == rank, "rank %d want %d", shs_comm_rank(child), rank);
    int32_t mine = r->rank, gathered[8], sum = 0, want_sum = 0;
    TW_EXPECT_STATUS(r, shs_all_gather(&mine, gathered, 1, SHS_I32, child), SHS_OK);
    for (int j = 0; j < size; j++) TW_EXPECT(r, gathered[j] == members[j], "member %d is %d want %d", j, gathered[j], members[j]);
    TW_EXPECT_STATUS(r, shs_all_reduce(&mine, &sum, 1, SHS_I32, SHS_SUM, child), SHS_OK);
    for (int j = 0; j < size; j++) want_sum += members[j];
    TW_EXPECT(r, sum == want_sum, "sum %d want %d", sum, want_sum);
    return SHS_OK;
}

static shs_status_t rank_split(tw_rank_t *r) {
    int p = r->rank;
    char name[64];
    /* colors p%2, keys reversed: color 0 = parents {4,2,0}, color 1 = {5,3,1} */
    shs_comm_t *by_parity = NULL, *by_half = NULL, *most = NULL, *nested = NULL;
    TW_EXPECT_STATUS(r, shs_comm_split(r->comm, p % 2, -p, &by_parity), SHS_OK);
    static const int parity_members[2][3] = {{4, 2, 0}, {5, 3, 1}};
    snprintf(name, sizeof name, "world/%d", p % 2);
    SHS_CHECK(check_child(r, by_parity, name, 3, 2 - p / 2, parity_members[p % 2]));
    /* colors p/3, equal keys: ranked by parent rank */
    TW_EXPECT_STATUS(r, shs_comm_split(r->comm, p / 3, 7, &by_half), SHS_OK);
    static const int half_members[2][3] = {{0, 1, 2}, {3, 4, 5}};
    snprintf(name, sizeof name, "world/%d", p / 3);
    SHS_CHECK(check_child(r, by_half, name, 3, p % 3, half_members[p / 3]));
    /* rank 5 opts out */
    TW_EXPECT_STATUS(r, shs_comm_split(r->comm, p == 5 ? SHS_SPLIT_NOCOLOR : 3, 0, &most), SHS_OK);
    static const int most_members[5] = {0, 1, 2, 3, 4};
    if (p == 5) TW_EXPECT(r, most == NULL, "NOCOLOR gave a communicator");
    else SHS_CHECK(check_child(r, most, "world/3", 5, p, most_members));
    /* split of a child, collectives on both at once */
    TW_EXPECT_STATUS(r, shs_comm_split(by_parity, 0, shs_comm_rank(by_parity) == 0 ? 1 : 0, &nested), SHS_OK);
    static const int nested_members[2][3] = {{2, 0, 4}, {3, 1, 5}};
    snprintf(name, sizeof name, "world/%d/0", p % 2);
    SHS_CHECK(check_child(r, nested, name, 3, (shs_comm_rank(by_parity) + 2) % 3, nested_members[p % 2]));
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK);
    shs_comm_destroy(by_parity); /* the parent and the other children outlive it */
    TW_EXPECT_STATUS(r, shs_barrier(nested), SHS_OK);
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK);
    shs_comm_destroy(by_half);
    shs_comm_destroy(most);
    shs_comm_destroy(nested);
    return SHS_OK;
}

static void test_split(void **state) {
    (void)state;
    tw_run_ok(6, DATA_TIMEOUT_MS, rank_split, NULL);
}

/* A child inherits the parent's timeout: a member that never calls makes the
 * others time out after the parent's 500 ms, naming the child. */
static shs_status_t rank_split_timeout(tw_rank_t *r) {
    shs_comm_t *child = NULL;
    TW_EXPECT_STATUS(r, shs_comm_split(r->comm, r->rank % 2, 0, &child), SHS_OK);
    shs_status_t s = SHS_OK;
    if (r->rank != 3) s = shs_barrier(child);
    shs_comm_destroy(child);
    return s;
}

static void test_split_child_inherits_timeout(void **state) {
    (void)state;
    tw_rank_t *ranks = tw_run(4, 500, rank_split_timeout, NULL);
    for (int r = 0; r < 4; r++) {
        if (r == 3 || r % 2 == 0) {
            assert_int_equal(ranks[r].status, SHS_OK);
            continue;
        }
        assert_int_equal(ranks[r].status, SHS_TIMEOUT);
        assert_non_null(strstr(ranks[r].error, "comm 'world/1'"));
        assert_non_null(strstr(ranks[r].error, "timed out after 0.500 s waiting for ranks [1]"));
    }
    free(ranks);
}

/* ---- stats ---------------------------------------------------------------- */

static shs_status_t rank_stats(tw_rank_t *r) {
    float *buf = xmalloc(4000 * 4), *big = xmalloc(4 * 4000 * 4);
    for (int i = 0; i < 4000; i++) buf[i] = 1.0f;
    TW_EXPECT_STATUS(r, shs_all_reduce(buf, buf, 1000, SHS_F32, SHS_SUM, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_all_reduce(buf, buf, 1000, SHS_F32, SHS_SUM, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_all_gather(buf, big, 1000, SHS_F32, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_reduce_scatter(big, buf, 1000, SHS_F32, SHS_SUM, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_broadcast(buf, buf, 1000, SHS_F32, 1, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_reduce(buf, buf, 1000, SHS_F32, SHS_MAX, 2, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_all_reduce(NULL, buf, 1000, SHS_F32, SHS_SUM, r->comm), SHS_INVALID_ARG); /* not counted */
    shs_comm_stats_t s;
    shs_comm_get_stats(r->comm, &s);
    TW_EXPECT(r, s.calls[SHS_OP_ALL_REDUCE] == 2 && s.bytes[SHS_OP_ALL_REDUCE] == 8000 &&
                     s.bytes_sent[SHS_OP_ALL_REDUCE] == 2 * 6000,
              "all_reduce %llu %llu %llu", (unsigned long long)s.calls[SHS_OP_ALL_REDUCE],
              (unsigned long long)s.bytes[SHS_OP_ALL_REDUCE], (unsigned long long)s.bytes_sent[SHS_OP_ALL_REDUCE]);
    for (int op = SHS_OP_ALL_GATHER; op <= SHS_OP_REDUCE_SCATTER; op++)
        TW_EXPECT(r, s.calls[op] == 1 && s.bytes[op] == 16000 && s.bytes_sent[op] == 12000, "%s",
                  shs_coll_op_name((shs_coll_op_t)op));
    for (int op = SHS_OP_BROADCAST; op <= SHS_OP_REDUCE; op++)
        TW_EXPECT(r, s.calls[op] == 1 && s.bytes[op] == 4000 && s.bytes_sent[op] == 3000, "%s",
                  shs_coll_op_name((shs_coll_op_t)op));
    TW_EXPECT(r, s.calls[SHS_OP_BARRIER] == 1 && s.bytes[SHS_OP_BARRIER] == 0, "barrier");
    TW_EXPECT(r, s.calls[SHS_OP_SPLIT] == 0, "split");
    free(buf);
    free(big);
    return SHS_OK;
}

static void test_stats(void **state) {
    (void)state;
    tw_run_ok(4, DATA_TIMEOUT_MS, rank_stats, NULL);
}

/* ---- many ranks on few cores ---------------------------------------------- */

static shs_status_t rank_small_all_reduces(tw_rank_t *r) {
    const int calls = 2000;
    float x[256], y[256];
    for (int call = 0; call < calls; call++) {
        for (int i = 0; i < 256; i++) x[i] = (float)(r->rank + i + call % 3);
        TW_EXPECT_STATUS(r, shs_all_reduce(x, y, 256, SHS_F32, SHS_SUM, r->comm), SHS_OK);
    }
    int n = r->nranks, last = (calls - 1) % 3;
    for (int i = 0; i < 256; i++)
        TW_EXPECT(r, y[i] == (float)(n * (n - 1) / 2 + n * (i + last)), "i=%d: %g", i, y[i]);
    return SHS_OK;
}

static void test_oversubscribed_small_all_reduces(void **state) {
    (void)state;
    const int n = 16;
    double t0 = shs_now_seconds();
    tw_run_ok(n, DATA_TIMEOUT_MS, rank_small_all_reduces, NULL);
    double dt = shs_now_seconds() - t0;
    print_message("    16 ranks on %ld cores: 2000 all_reduce(256 x f32) in %.3f s, %.1f us per call\n",
                  sysconf(_SC_NPROCESSORS_ONLN), dt, dt / 2000 * 1e6);
}

/* ---- mismatches ------------------------------------------------------------ */

typedef enum { MM_OP, MM_COUNT, MM_DTYPE, MM_ROOT, MM_REDOP } mismatch_t;

typedef struct {
    mismatch_t kind;
    const char *common, *odd; /* the calls as the error text must show them */
} mismatch_case_t;

static shs_status_t rank_mismatch(tw_rank_t *r) {
    const mismatch_case_t *mc = r->arg;
    float *buf = xmalloc(4096 * 4), *out = xmalloc(4096 * 4);
    memset(buf, 0, 4096 * 4);
    int odd = r->rank == 2;
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK); /* seq 0 */
    shs_status_t s = SHS_OK;
    switch (mc->kind) {
    case MM_OP:
        s = odd ? shs_all_gather(buf, out, 256, SHS_F32, r->comm) : shs_all_reduce(buf, out, 1024, SHS_F32, SHS_SUM, r->comm);
        break;
    case MM_COUNT: s = shs_all_reduce(buf, out, odd ? 1000 : 1024, SHS_F32, SHS_SUM, r->comm); break;
    case MM_DTYPE: s = shs_all_reduce(buf, out, 1024, odd ? SHS_BF16 : SHS_F32, SHS_SUM, r->comm); break;
    case MM_ROOT: s = shs_broadcast(buf, out, 1024, SHS_F32, odd ? 3 : 1, r->comm); break;
    case MM_REDOP: s = shs_reduce(buf, out, 1024, SHS_F32, odd ? SHS_MAX : SHS_SUM, 0, r->comm); break;
    }
    const char *e = shs_last_error();
    TW_EXPECT(r, s == SHS_MISMATCH, "got %s: %s", shs_status_name(s), e);
    TW_EXPECT(r, strstr(e, "comm 'world' seq 1:") != NULL, "no comm/seq in: %s", e);
    char want[256];
    snprintf(want, sizeof want, "rank 0 called %s but rank 2 called %s", mc->common, mc->odd);
    TW_EXPECT(r, strstr(e, want) != NULL, "'%s' not in: %s", want, e);
    /* the communicator is failed now */
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_ABORTED);
    TW_EXPECT(r, strstr(shs_last_error(), "failed earlier") != NULL, "%s", shs_last_error());
    TW_EXPECT_STATUS(r, shs_all_reduce(buf, out, 1024, SHS_F32, SHS_SUM, r->comm), SHS_ABORTED);
    free(buf);
    free(out);
    return SHS_OK;
}

static void test_mismatches(void **state) {
    (void)state;
    static const mismatch_case_t cases[] = {
        {MM_OP, "all_reduce(count=1024, dtype=f32, op=sum)", "all_gather(count=256, dtype=f32)"},
        {MM_COUNT, "all_reduce(count=1024, dtype=f32, op=sum)", "all_reduce(count=1000, dtype=f32, op=sum)"},
        {MM_DTYPE, "all_reduce(count=1024, dtype=f32, op=sum)", "all_reduce(count=1024, dtype=bf16, op=sum)"},
        {MM_ROOT, "broadcast(count=1024, dtype=f32, root=1)", "broadcast(count=1024, dtype=f32, root=3)"},
        {MM_REDOP, "reduce(count=1024, dtype=f32, op=sum, root=0)", "reduce(count=1024, dtype=f32, op=max, root=0)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) tw_run_ok(4, 500, rank_mismatch, (void *)&cases[k]);
}

/* ---- timeout ------------------------------------------------------------------ */

typedef struct {
    int missing[4];       /* ranks that skip the collective, -1 ends */
    atomic_int returned;  /* ranks done waiting */
    int waiters;
} timeout_case_t;

static int in_list(const int *list, int r) {
    for (int k = 0; k < 4 && list[k] >= 0; k++)
        if (list[k] == r) return 1;
    return 0;
}

static shs_status_t rank_timeout(tw_rank_t *r) {
    timeout_case_t *tc = r->arg;
    float x[64] = {0}, y[64];
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK); /* seq 0 */
    if (!in_list(tc->missing, r->rank)) {
        shs_status_t s = shs_all_reduce(x, y, 64, SHS_F32, SHS_SUM, r->comm);
        char text[1024];
        snprintf(text, sizeof text, "%s", shs_last_error());
        atomic_fetch_add(&tc->returned, 1);
        TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_ABORTED); /* failed for good */
        shs_set_last_error_text(text);
        return s;
    }
    while (atomic_load(&tc->returned) < tc->waiters) sleep_ms(5);
    /* late: the communicator failed meanwhile */
    return shs_all_reduce(x, y, 64, SHS_F32, SHS_SUM, r->comm);
}

static void check_timeout(int n, timeout_case_t *tc, const char *missing_text, const char *last_calls_text) {
    double t0 = shs_now_seconds();
    tw_rank_t *ranks = tw_run(n, 500, rank_timeout, tc);
    double dt = shs_now_seconds() - t0;
    for (int r = 0; r < n; r++) {
        const char *e = ranks[r].error;
        if (in_list(tc->missing, r)) {
            assert_int_equal(ranks[r].status, SHS_ABORTED);
            assert_non_null(strstr(e, "failed earlier"));
            continue;
        }
        if (ranks[r].status != SHS_TIMEOUT) print_error("rank %d: %s\n", r, e);
        assert_int_equal(ranks[r].status, SHS_TIMEOUT);
        assert_true(ranks[r].seconds >= 0.45 && ranks[r].seconds < 5.0);
        char want[128];
        snprintf(want, sizeof want, "rank %d: all_reduce seq 1 on comm 'world': timed out after 0.500 s", r);
        assert_non_null(strstr(e, want));
        assert_non_null(strstr(e, missing_text));
        if (!strstr(e, last_calls_text)) print_error("'%s' not in: %s\n", last_calls_text, e);
        assert_non_null(strstr(e, last_calls_text));
    }
    assert_true(dt < 10.0);
    free(ranks);
}

static void test_timeout_names_missing_rank(void **state) {
    (void)state;
    timeout_case_t tc = {.missing = {3, -1}, .waiters = 3};
    check_timeout(4, &tc, "waiting for ranks [3]",
                  "last calls: ranks [0-2] all_reduce seq 1 (in progress); ranks [3] barrier seq 0 (completed)");
}

static void test_timeout_many_ranks(void **state) {
    (void)state;
    timeout_case_t tc = {.missing = {5, 9, 10, -1}, .waiters = 13};
    check_timeout(16, &tc, "waiting for ranks [5,9-10]",
                  "ranks [0-4,6-8,11-15] all_reduce seq 1 (in progress); ranks [5,9-10] barrier seq 0 (completed)");
}

/* ---- abort -------------------------------------------------------------------- */

static shs_status_t rank_abort(tw_rank_t *r) {
    float x[64] = {0}, y[64];
    if (r->rank == 3) {
        sleep_ms(100);
        shs_comm_abort(r->comm, "test abort");
        shs_comm_abort(r->comm, "second reason is ignored");
    }
    return shs_all_reduce(x, y, 64, SHS_F32, SHS_SUM, r->comm);
}

static void test_abort_wakes_waiting_ranks(void **state) {
    (void)state;
    tw_rank_t *ranks = tw_run(4, 20000, rank_abort, NULL);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(ranks[r].status, SHS_ABORTED);
        assert_non_null(strstr(ranks[r].error, "aborted by rank 3: test abort"));
        assert_true(ranks[r].seconds < 2.0);
    }
    free(ranks);
}

/* ---- invalid arguments ---------------------------------------------------------- */

static shs_status_t rank_invalid_args(tw_rank_t *r) {
    float a[16] = {0}, b[64] = {0};
    shs_comm_t *c = r->comm, *child = NULL;
    int n = r->nranks;
    TW_EXPECT_STATUS(r, shs_all_reduce(NULL, b, 4, SHS_F32, SHS_SUM, c), SHS_INVALID_ARG);
    TW_EXPECT(r, strstr(shs_last_error(), "all_reduce on comm 'world'") != NULL, "%s", shs_last_error());
    TW_EXPECT_STATUS(r, shs_all_reduce(a, NULL, 4, SHS_F32, SHS_SUM, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_reduce(a, b, 4, SHS_NUM_DTYPES, SHS_SUM, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_reduce(a, b, 4, SHS_F32, SHS_NUM_REDOPS, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_reduce(a, b, 4, SHS_F32, (shs_redop_t)-1, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_reduce(b, b + 1, 4, SHS_F32, SHS_SUM, c), SHS_INVALID_ARG); /* partial overlap */
    TW_EXPECT_STATUS(r, shs_all_reduce(a, b, SIZE_MAX / 2, SHS_F32, SHS_SUM, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_gather(NULL, b, 4, SHS_F32, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_gather(a, b, 4, (shs_dtype_t)-3, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_gather(b + 1, b, 4, SHS_F32, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_reduce_scatter(a, NULL, 4, SHS_F32, SHS_SUM, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_reduce_scatter(a, b, 4, SHS_F32, (shs_redop_t)9, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_reduce_scatter(b, b + 1, 4, SHS_F32, SHS_SUM, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_broadcast(a, b, 4, SHS_F32, -1, c), SHS_INVALID_ARG);
    TW_EXPECT(r, strstr(shs_last_error(), "root -1 out of range") != NULL, "%s", shs_last_error());
    TW_EXPECT_STATUS(r, shs_broadcast(a, b, 4, SHS_F32, n, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_broadcast(a, NULL, 4, SHS_F32, 0, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_reduce(a, b, 4, SHS_F32, SHS_SUM, n, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_reduce(NULL, b, 4, SHS_F32, SHS_SUM, 0, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_reduce(a, b, 4, SHS_F32, SHS_AVG + 1, 0, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_comm_split(c, 0, 0, NULL), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_comm_split(c, -5, 0, &child), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_barrier(NULL), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_reduce(a, b, 4, SHS_F32, SHS_SUM, NULL), SHS_INVALID_ARG);
    /* NULL buffers are fine with count 0; the communicator is still usable
     * and the failed calls took no sequence number */
    TW_EXPECT_STATUS(r, shs_all_reduce(NULL, NULL, 0, SHS_F32, SHS_SUM, c), SHS_OK);
    for (int i = 0; i < 16; i++) a[i] = (float)r->rank;
    TW_EXPECT_STATUS(r, shs_all_reduce(a, b, 16, SHS_F32, SHS_SUM, c), SHS_OK);
    TW_EXPECT(r, b[5] == (float)(n * (n - 1) / 2), "sum %g", b[5]);
    /* reduce: recvbuf is ignored on non-roots, sendbuf of broadcast too */
    TW_EXPECT_STATUS(r, shs_reduce(a, r->rank == 0 ? b : NULL, 16, SHS_F32, SHS_SUM, 0, c), SHS_OK);
    TW_EXPECT_STATUS(r, shs_broadcast(r->rank == 0 ? a : NULL, b, 16, SHS_F32, 0, c), SHS_OK);
    shs_comm_stats_t s;
    shs_comm_get_stats(c, &s);
    TW_EXPECT(r, s.calls[SHS_OP_ALL_REDUCE] == 2, "calls %llu", (unsigned long long)s.calls[SHS_OP_ALL_REDUCE]);
    return SHS_OK;
}

static void test_invalid_args(void **state) {
    (void)state;
    tw_run_ok(1, 500, rank_invalid_args, NULL);
    tw_run_ok(3, 500, rank_invalid_args, NULL);
}

static void test_init_errors(void **state) {
    (void)state;
    shs_comm_id_t *id = NULL;
    shs_comm_t *c0 = NULL, *again = NULL;
    assert_int_equal(shs_comm_id_create(&id, 0, 0, NULL), SHS_INVALID_ARG);
    assert_int_equal(shs_comm_id_create(&id, 2, 0, NULL), SHS_OK);
    assert_int_equal(shs_comm_init_rank(&c0, id, 2), SHS_INVALID_ARG);
    assert_int_equal(shs_comm_init_rank(&c0, id, -1), SHS_INVALID_ARG);
    assert_int_equal(shs_comm_init_rank(&c0, id, 0), SHS_OK);
    assert_int_equal(shs_comm_init_rank(&again, id, 0), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "already taken"));
    assert_null(again);
    assert_string_equal(shs_comm_name(c0), "world");
    assert_int_equal(shs_comm_size(c0), 2);
    assert_int_equal(shs_comm_rank(c0), 0);
    /* the creator may release the id before the ranks destroy their handles */
    shs_comm_id_release(id);
    shs_comm_abort(c0, "nobody else joined");
    assert_int_equal(shs_barrier(c0), SHS_ABORTED);
    assert_non_null(strstr(shs_last_error(), "aborted by rank 0: nobody else joined"));
    shs_comm_destroy(c0);
    shs_comm_destroy(NULL);
    shs_comm_id_release(NULL);
}

static void test_names(void **state) {
    (void)state;
    static const char *names[] = {"sum", "prod", "max", "min", "avg"};
    for (int op = 0; op < SHS_NUM_REDOPS; op++) {
        shs_redop_t parsed;
        assert_string_equal(shs_redop_name((shs_redop_t)op), names[op]);
        assert_int_equal(shs_redop_parse(names[op], &parsed), 0);
        assert_int_equal(parsed, op);
    }
    shs_redop_t unused;
    assert_int_equal(shs_redop_parse("mean", &unused), -1);
    assert_int_equal(shs_redop_parse(NULL, &unused), -1);
    assert_string_equal(shs_redop_name(SHS_NUM_REDOPS), "invalid");
    assert_string_equal(shs_coll_op_name(SHS_OP_ALL_GATHER), "all_gather");
    assert_string_equal(shs_coll_op_name(SHS_OP_REDUCE_SCATTER), "reduce_scatter");
    assert_string_equal(shs_coll_op_name(SHS_OP_SPLIT), "split");
    assert_string_equal(shs_coll_op_name(SHS_NUM_OPS), "invalid");
}

/* ---- call tags ---------------------------------------------------------------- */

/* comm.h's layout and text, written out by hand. */
static void test_tag_pack_and_format(void **state) {
    (void)state;
    char buf[128];
    assert_true(shs_comm_tag_pack(SHS_TAG_REDUCE_SCATTER, 3, 1, 7) == 0x0301000400000007ull);
    assert_true(shs_comm_tag_pack(SHS_TAG_SPLIT, -1, 0, 0) == 0x0a00000000000000ull);
    shs_comm_tag_format(buf, sizeof buf, shs_comm_tag_pack(SHS_TAG_REDUCE_SCATTER, 3, 1, 7));
    assert_string_equal(buf, "[reduce-scatter unit 3 micro 1 step 7]");
    shs_comm_tag_format(buf, sizeof buf, shs_comm_tag_pack(SHS_TAG_LOSS_ALL_REDUCE, -1, 0, 12));
    assert_string_equal(buf, "[loss-all-reduce micro 0 step 12]");
    shs_comm_tag_format(buf, sizeof buf, 0);
    assert_string_equal(buf, "untagged");
    shs_comm_tag_format(buf, sizeof buf, 14);
    assert_string_equal(buf, "tag 14");
    shs_comm_tag_format(buf, sizeof buf, 0xff00000000000001ull);
    assert_string_equal(buf, "tag 0xff00000000000001");
    shs_comm_tag_format(buf, 8, shs_comm_tag_pack(SHS_TAG_FWD_ALL_GATHER, 1, 0, 1));
    assert_string_equal(buf, "[fwd-al"); /* truncated, terminated */
    assert_true(shs_comm_tag(NULL) == 0);
}

/* One rank skips one of many identical all-reduces. */
#define SKIP_CALLS 8
#define SKIP_AT 3    /* the call index rank SKIP_RANK leaves out */
#define SKIP_RANK 2

typedef struct {
    int tagged;               /* tag = call index + 1 (0 would be untagged) */
    int failed_at[4];         /* per rank: call index whose status was not SHS_OK, -1 none */
    uint64_t failed_seq[4];   /* its sequence number */
    shs_status_t failed_status[4];
    float result[4][SKIP_CALLS]; /* element 0 of each call's result */
} skip_case_t;

static shs_status_t rank_skip_one(tw_rank_t *r) {
    skip_case_t *sc = r->arg;
    float x[4], y[4];
    sc->failed_at[r->rank] = -1;
    uint64_t seq = 0;
    for (int i = 0; i < SKIP_CALLS; i++) {
        if (r->rank == SKIP_RANK && i == SKIP_AT) continue;
        for (int e = 0; e < 4; e++) x[e] = (float)i; /* every rank contributes the call index */
        if (sc->tagged) shs_comm_set_tag(r->comm, (uint64_t)i + 1);
        shs_status_t s = shs_all_reduce(x, y, 4, SHS_F32, SHS_SUM, r->comm);
        if (s != SHS_OK) {
            sc->failed_at[r->rank] = i;
            sc->failed_seq[r->rank] = seq;
            sc->failed_status[r->rank] = s;
            return s;
        }
        sc->result[r->rank][i] = y[0];
        seq++;
    }
    return SHS_OK;
}

/* Tagged: every rank fails at sequence number SKIP_AT (the skipped call on
 * the others, the call after it on the skipping rank), naming both tags;
 * every call before it returned the right sum. */
static void test_tagged_skip_caught_at_the_skip(void **state) {
    (void)state;
    skip_case_t sc = {.tagged = 1};
    tw_rank_t *ranks = tw_run(4, DATA_TIMEOUT_MS, rank_skip_one, &sc);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(ranks[r].status, SHS_MISMATCH);
        assert_int_equal(sc.failed_status[r], SHS_MISMATCH);
        assert_int_equal(sc.failed_at[r], r == SKIP_RANK ? SKIP_AT + 1 : SKIP_AT);
        assert_int_equal(sc.failed_seq[r], SKIP_AT);
        const char *want = "comm 'world' seq 3: rank 0 called all_reduce(count=4, dtype=f32, op=sum) tag 4 "
                           "but rank 2 called all_reduce(count=4, dtype=f32, op=sum) tag 5";
        if (!strstr(ranks[r].error, want)) print_error("rank %d: %s\n", r, ranks[r].error);
        assert_non_null(strstr(ranks[r].error, want));
        for (int i = 0; i < SKIP_AT; i++) assert_true(sc.result[r][i] == 4.0f * (float)i);
    }
    free(ranks);
}

/* Untagged, today's behaviour as documented in comm.h: nothing is noticed
 * at the skip. From the skipped call on, the skipping rank's call i+1 pairs
 * with the others' call i, and each such call returns SHS_OK with a sum
 * mixing two calls' data (3*i + (i+1)); only the others' last call, which
 * the skipping rank never makes, times out. */
static void test_untagged_skip_found_only_at_the_end(void **state) {
    (void)state;
    skip_case_t sc = {.tagged = 0};
    tw_rank_t *ranks = tw_run(4, 300, rank_skip_one, &sc);
    for (int r = 0; r < 4; r++) {
        if (r == SKIP_RANK) {
            assert_int_equal(ranks[r].status, SHS_OK);
            assert_int_equal(sc.failed_at[r], -1);
            continue;
        }
        assert_int_equal(ranks[r].status, SHS_TIMEOUT);
        assert_int_equal(sc.failed_at[r], SKIP_CALLS - 1);
        assert_int_equal(sc.failed_seq[r], SKIP_CALLS - 1);
        assert_non_null(strstr(ranks[r].error, "waiting for ranks [2]"));
        for (int i = 0; i < SKIP_AT; i++) assert_true(sc.result[r][i] == 4.0f * (float)i);
        for (int i = SKIP_AT; i < SKIP_CALLS - 1; i++) assert_true(sc.result[r][i] == 3.0f * (float)i + (float)(i + 1));
    }
    for (int i = SKIP_AT + 1; i < SKIP_CALLS; i++) /* the skipping rank's call i was the others' i-1 */
        assert_true(sc.result[SKIP_RANK][i] == 3.0f * (float)(i - 1) + (float)i);
    free(ranks);
}

/* Untagged matches any tag; the nonzero tags must agree among themselves,
 * whichever rank holds the first one. */
static shs_status_t rank_tag_wildcard(tw_rank_t *r) {
    static const uint64_t first[4] = {0, 5, 5, 0}, second[4] = {0, 5, 6, 0};
    float x = 1.0f, y;
    shs_comm_set_tag(r->comm, first[r->rank]);
    TW_EXPECT_STATUS(r, shs_all_reduce(&x, &y, 1, SHS_F32, SHS_SUM, r->comm), SHS_OK);
    TW_EXPECT(r, y == 4.0f, "sum %g", y);
    TW_EXPECT(r, shs_comm_tag(r->comm) == first[r->rank], "tag is sticky");
    shs_comm_set_tag(r->comm, second[r->rank]);
    TW_EXPECT_STATUS(r, shs_all_reduce(&x, &y, 1, SHS_F32, SHS_SUM, r->comm), SHS_MISMATCH);
    const char *want = "comm 'world' seq 1: rank 1 called all_reduce(count=1, dtype=f32, op=sum) tag 5 but rank 2 "
                       "called all_reduce(count=1, dtype=f32, op=sum) tag 6";
    TW_EXPECT(r, strstr(shs_last_error(), want) != NULL, "'%s' not in: %s", want, shs_last_error());
    return SHS_OK;
}

static void test_tag_wildcard(void **state) {
    (void)state;
    tw_run_ok(4, DATA_TIMEOUT_MS, rank_tag_wildcard, NULL);
}

/* A ZeRO-3 run in which one rank leaves out block0's all-gather in the
 * first forward. The units are the embedding (0), block0..block2 (1-3) and
 * the final LayerNorm (4); the forward gathers them in that order, so the
 * gather of block0 is seq 1 on every rank. The blocks are the same size,
 * so the skipping rank's next call (block1's gather) looks like the
 * others' block0 gather but for the tag: the run fails at seq 1, naming
 * both gathers (untagged, it would go on until the final LayerNorm's
 * gather, of another count, at seq 3). */
static shs_status_t skip_block0_job(shs_rank_ctx_t *ctx, void *arg) {
    shs_trainer_t *t = arg;
    return ctx->rank == 1 ? shs_strategy_skip_gather(shs_trainer_strategy(t, ctx->rank), 1) : SHS_OK;
}

static void test_strategy_skipped_gather_caught_by_tag(void **state) {
    (void)state;
    shs_corpus_t corpus;
    shs_corpus_builtin(&corpus);
    shs_train_config_t cfg = test_small_config(3, 3);
    cfg.strategy.kind = SHS_ZERO3;
    cfg.timeout_ms = 2000;
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &corpus), SHS_OK);
    const shs_layout_t *lo = shs_trainer_layout(t);
    assert_int_equal(lo->num_units, 5);
    assert_string_equal(lo->units[1].name, "block0");
    assert_string_equal(lo->units[2].name, "block1");
    assert_true(lo->units[1].numel == lo->units[2].numel);
    assert_int_equal(shs_trainer_run(t, skip_block0_job, t), SHS_OK);
    float loss;
    assert_int_equal(shs_trainer_step(t, &loss), SHS_MISMATCH);
    const char *e = shs_last_error();
    const char *want[] = {"comm 'world' seq 1: rank 0 called all_gather(",
                          " [fwd-all-gather unit 1 micro 0 step 1] but rank 1 called all_gather(",
                          " [fwd-all-gather unit 2 micro 0 step 1]"};
    for (int k = 0; k < 3; k++) {
        if (!strstr(e, want[k])) print_error("'%s' not in: %s\n", want[k], e);
        assert_non_null(strstr(e, want[k]));
    }
    shs_trainer_destroy(t);
    shs_corpus_free(&corpus);
}

int main(void) {
    alarm(900); /* a hang fails the binary instead of blocking the suite */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_all_reduce),
        cmocka_unit_test(test_all_reduce_oversubscribed),
        cmocka_unit_test(test_reduce_scatter),
        cmocka_unit_test(test_all_gather),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_half_precision_rounding_per_op),
        cmocka_unit_test(test_all_reduce_bit_identical_to_rs_ag),
        cmocka_unit_test(test_avg_closed_forms),
        cmocka_unit_test(test_algorithm_thresholds),
        cmocka_unit_test(test_all_reduce_equals_rs_ag_memory),
        cmocka_unit_test(test_streamed_f32_sum),
        cmocka_unit_test(test_barrier),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_split_child_inherits_timeout),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_oversubscribed_small_all_reduces),
        cmocka_unit_test(test_mismatches),
        cmocka_unit_test(test_timeout_names_missing_rank),
        cmocka_unit_test(test_timeout_many_ranks),
        cmocka_unit_test(test_abort_wakes_waiting_ranks),
        cmocka_unit_test(test_tag_pack_and_format),
        cmocka_unit_test(test_tagged_skip_caught_at_the_skip),
        cmocka_unit_test(test_untagged_skip_found_only_at_the_end),
        cmocka_unit_test(test_tag_wildcard),
        cmocka_unit_test(test_strategy_skipped_gather_caught_by_tag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
