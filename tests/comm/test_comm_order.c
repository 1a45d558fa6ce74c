/* test_comm_order.c - the thread communicator's fixed reduction order, bit
 * for bit against serial oracles: half-precision rounding per op, all_reduce
 * = reduce_scatter + all_gather, AVG as NCCL defines it (closed forms), both
 * sides of every algorithm threshold, the fused f32 sum with streaming
 * stores. Not the closed-form values per dtype (test_comm_collectives.c). */
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
#include "thread_world.h"

#include "comm_values.h"

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

int main(void) {
    alarm(900); /* a hang fails the binary instead of blocking the suite */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_precision_rounding_per_op),
        cmocka_unit_test(test_all_reduce_bit_identical_to_rs_ag),
        cmocka_unit_test(test_avg_closed_forms),
        cmocka_unit_test(test_algorithm_thresholds),
        cmocka_unit_test(test_all_reduce_equals_rs_ag_memory),
        cmocka_unit_test(test_streamed_f32_sum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
