/* test_dtype.c - dtype sizes/names/parsing and the f16 / bf16 conversions.
 *
 * Conversions are checked three ways: closed-form bit patterns for the
 * interesting cases (exact values, largest finite, overflow, subnormals,
 * ties to even, signed zero, inf, NaN); exhaustive round trips over all 65536
 * patterns of each 16-bit format; and f32 -> 16-bit against an independent
 * reference that finds the nearest representable value by binary search over
 * a table built in f64 from the formats' definitions (not from dtype.c).
 *
 * NaN rule (IEEE 754 §6.2.3 as hardware does it): converting a NaN keeps its
 * sign and the top payload bits and sets the quiet bit, so a quiet NaN round
 * trips exactly and a signalling 16-bit NaN comes back quieted (pattern | quiet bit).
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardsim/dtype.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#define CHECK16(got, want)                                                                             \
    do {                                                                                               \
        unsigned g_ = (got), w_ = (want);                                                              \
        if (g_ != w_) fail_msg("%s = %#06x, want %#06x", #got, g_, w_);                                \
    } while (0)

/* ---- reference: the formats from their definitions, in f64 ------------------ */

/* Value of a positive finite 16-bit pattern with `mbits` mantissa bits and
 * exponent bias `bias` (f16: 10, 15; bf16: 7, 127). */
static double value16(uint16_t h, int mbits, int bias) {
    int e = h >> mbits, m = h & ((1 << mbits) - 1);
    return e == 0 ? ldexp(m, 1 - bias - mbits) : ldexp((1 << mbits) + m, e - bias - mbits);
}

/* Nearest 16-bit pattern to f (ties to even mantissa), by binary search over
 * the increasing positive patterns 0 .. max_finite; beyond max + half an ulp
 * the result is infinity (IEEE 754 §4.3.1: rounding as with unbounded
 * exponent, then overflow). */
static uint16_t ref_round16(float f, int mbits, int bias, uint16_t max_finite, uint16_t inf) {
    uint16_t sign = (bits(f) >> 31) ? 0x8000 : 0;
    double x = fabs((double)f);
    double maxv = value16(max_finite, mbits, bias);
    double half_ulp = (maxv - value16(max_finite - 1, mbits, bias)) / 2;
    if (x >= maxv + half_ulp) return sign | inf; /* the tie goes to the even "next" = inf */
    uint16_t lo = 0, hi = max_finite;           /* invariant: value(lo) <= x, answer in [lo, hi] */
    if (x >= maxv) return sign | max_finite;
    while (hi - lo > 1) {
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if (value16(mid, mbits, bias) <= x) lo = mid;
        else hi = mid;
    }
    double dlo = x - value16(lo, mbits, bias), dhi = value16(hi, mbits, bias) - x;
    uint16_t r = dlo < dhi ? lo : dhi < dlo ? hi : (lo & 1) ? hi : lo;
    return sign | r;
}
static uint16_t ref_f16(float f) { return ref_round16(f, 10, 15, 0x7bff, 0x7c00); }
static uint16_t ref_bf16(float f) { return ref_round16(f, 7, 127, 0x7f7f, 0x7f80); }

/* ---- names ---------------------------------------------------------------------- */

static void test_dtype_info(void **state) {
    static const struct { shs_dtype_t t; size_t size; const char *name; int is_float; } info[] = {
        {SHS_I8, 1, "i8", 0},   {SHS_U8, 1, "u8", 0},     {SHS_I32, 4, "i32", 0}, {SHS_U32, 4, "u32", 0},
        {SHS_I64, 8, "i64", 0}, {SHS_U64, 8, "u64", 0},   {SHS_F16, 2, "f16", 1}, {SHS_F32, 4, "f32", 1},
        {SHS_F64, 8, "f64", 1}, {SHS_BF16, 2, "bf16", 1},
    };
    for (size_t i = 0; i < sizeof info / sizeof info[0]; i++) {
        assert_int_equal(shs_dtype_size(info[i].t), info[i].size);
        assert_string_equal(shs_dtype_name(info[i].t), info[i].name);
        assert_int_equal(shs_dtype_is_float(info[i].t), info[i].is_float);
        shs_dtype_t t = SHS_NUM_DTYPES;
        assert_int_equal(shs_dtype_parse(info[i].name, &t), 0);
        assert_int_equal(t, info[i].t);
    }
    /* NCCL's ncclDataType_t numbering (nccl.h: ncclInt8 0, ncclUint8 1, ncclInt32 2, ncclUint32 3,
     * ncclInt64 4, ncclUint64 5, ncclFloat16 6, ncclFloat32 7, ncclFloat64 8, ncclBfloat16 9) */
    static const shs_dtype_t by_nccl_id[] = {SHS_I8,  SHS_U8,  SHS_I32, SHS_U32, SHS_I64,
                                             SHS_U64, SHS_F16, SHS_F32, SHS_F64, SHS_BF16};
    for (int id = 0; id < 10; id++) {
        assert_int_equal(shs_dtype_nccl(by_nccl_id[id]), id);
        assert_int_equal(shs_dtype_from_nccl(id), by_nccl_id[id]);
    }
    assert_int_equal(shs_dtype_from_nccl(10), SHS_DTYPE_DEFAULT);
    assert_int_equal(shs_dtype_from_nccl(-1), SHS_DTYPE_DEFAULT);
    assert_int_equal(shs_dtype_nccl(SHS_DTYPE_DEFAULT), -1);
    static const struct { const char *alias; shs_dtype_t t; } aliases[] = {
        {"float32", SHS_F32}, {"fp32", SHS_F32}, {"fp16", SHS_F16}, {"float16", SHS_F16},
        {"half", SHS_F16}, {"bfloat16", SHS_BF16}, {"float64", SHS_F64},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        shs_dtype_t t = SHS_NUM_DTYPES;
        assert_int_equal(shs_dtype_parse(aliases[i].alias, &t), 0);
        assert_int_equal(t, aliases[i].t);
    }
    shs_dtype_t t = SHS_F32;
    assert_int_equal(shs_dtype_parse("f17", &t), -1);
    assert_int_equal(shs_dtype_parse("", &t), -1);
    assert_int_equal(shs_dtype_parse("F32", &t), -1); /* names are lower case */
    assert_int_equal(shs_dtype_parse(NULL, &t), -1);
    assert_int_equal(t, SHS_F32); /* untouched on failure */
    /* 0 is "not chosen" in a zero-initialised config, no element type */
    assert_int_equal(SHS_DTYPE_DEFAULT, 0);
    assert_int_equal(shs_dtype_size(SHS_DTYPE_DEFAULT), 0);
    assert_string_equal(shs_dtype_name(SHS_DTYPE_DEFAULT), "default");
    assert_int_equal(shs_dtype_is_float(SHS_DTYPE_DEFAULT), 0);
    assert_int_equal(shs_dtype_parse("default", &t), -1);
    assert_int_equal(shs_dtype_size(SHS_NUM_DTYPES), 0);
    assert_int_equal(shs_dtype_size((shs_dtype_t)-1), 0);
    assert_string_equal(shs_dtype_name(SHS_NUM_DTYPES), "invalid");
    assert_int_equal(shs_dtype_is_float(SHS_NUM_DTYPES), 0);
}

/* ---- f16: closed-form cases ----------------------------------------------------- */

static void test_f16_cases(void **state) {
    CHECK16(shs_f32_to_f16(1.0f), 0x3c00);
    CHECK16(shs_f32_to_f16(-2.0f), 0xc000);
    CHECK16(shs_f32_to_f16(0.5f), 0x3800);
    CHECK16(shs_f32_to_f16(65504.0f), 0x7bff);   /* max finite */
    CHECK16(shs_f32_to_f16(65519.0f), 0x7bff);   /* below max + half ulp (65520) */
    CHECK16(shs_f32_to_f16(65520.0f), 0x7c00);   /* the tie: even neighbour is inf */
    CHECK16(shs_f32_to_f16(-65520.0f), 0xfc00);
    CHECK16(shs_f32_to_f16(1e10f), 0x7c00);
    CHECK16(shs_f32_to_f16(FLT_MAX), 0x7c00);
    CHECK16(shs_f32_to_f16(0x1p-14f), 0x0400);   /* smallest normal */
    CHECK16(shs_f32_to_f16(0x1p-24f), 0x0001);   /* smallest subnormal */
    CHECK16(shs_f32_to_f16(0x1p-25f), 0x0000);   /* half of it: tie to even (0) */
    CHECK16(shs_f32_to_f16(-0x1p-25f), 0x8000);
    CHECK16(shs_f32_to_f16(3 * 0x1p-26f), 0x0001); /* 0.75 of it: rounds up */
    CHECK16(shs_f32_to_f16(0x1p-25f + 0x1p-40f), 0x0001); /* just above the tie */
    CHECK16(shs_f32_to_f16(3 * 0x1p-25f), 0x0002); /* 1.5 ulp: tie, up to even 2 */
    CHECK16(shs_f32_to_f16(5 * 0x1p-25f), 0x0002); /* 2.5 ulp: tie, down to even 2 */
    CHECK16(shs_f32_to_f16(1023 * 0x1p-24f), 0x03ff);  /* largest subnormal */
    CHECK16(shs_f32_to_f16(1023.5f * 0x1p-24f), 0x0400); /* tie, rounds up into the normals */
    CHECK16(shs_f32_to_f16(0x1p-30f), 0x0000);
    CHECK16(shs_f32_to_f16(from_bits(1)), 0x0000); /* f32 subnormal */
    /* ties in the normal range: 1 + 2^-11 is halfway between 0x3c00 and 0x3c01 */
    CHECK16(shs_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    CHECK16(shs_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    CHECK16(shs_f32_to_f16(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);
    CHECK16(shs_f32_to_f16(-(1.0f + 0x1p-11f)), 0xbc00);
    CHECK16(shs_f32_to_f16(2048.0f + 1.0f), 0x6800); /* ulp 2 at 2048: tie to even */
    CHECK16(shs_f32_to_f16(2048.0f + 3.0f), 0x6802);
    CHECK16(shs_f32_to_f16(0.0f), 0x0000);
    CHECK16(shs_f32_to_f16(-0.0f), 0x8000);
    CHECK16(shs_f32_to_f16(INFINITY), 0x7c00);
    CHECK16(shs_f32_to_f16(-INFINITY), 0xfc00);
    /* NaN stays a quiet NaN with its sign, also from a signalling or low-payload NaN */
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u, 0xff800100u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = shs_f32_to_f16(from_bits(nans[i]));
        if ((h & 0x7e00) != 0x7e00) fail_msg("f16 of NaN %#010x = %#06x is not a quiet NaN", nans[i], h);
        assert_int_equal(h >> 15, nans[i] >> 31);
    }
    /* f16 -> f32 closed forms */
    assert_true(shs_f16_to_f32(0x3c00) == 1.0f);
    assert_true(shs_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(shs_f16_to_f32(0x0001) == 0x1p-24f);
    assert_true(shs_f16_to_f32(0x03ff) == 1023 * 0x1p-24f);
    assert_true(shs_f16_to_f32(0x3555) == 0x1.554p-2f);
    assert_true(shs_f16_to_f32(0x7c00) == INFINITY);
    assert_true(shs_f16_to_f32(0xfc00) == -INFINITY);
    assert_int_equal(bits(shs_f16_to_f32(0x8000)), 0x80000000u);
    assert_true(isnan(shs_f16_to_f32(0x7e00)));
    assert_true(isnan(shs_f16_to_f32(0x7c01)));
    assert_true(signbit(shs_f16_to_f32(0xfe00)));
}

/* ---- bf16: closed-form cases ----------------------------------------------------- */

static void test_bf16_cases(void **state) {
    CHECK16(shs_f32_to_bf16(1.0f), 0x3f80);
    CHECK16(shs_f32_to_bf16(-2.0f), 0xc000);
    CHECK16(shs_f32_to_bf16(from_bits(0x3f808000u)), 0x3f80); /* tie, lsb 0: stays */
    CHECK16(shs_f32_to_bf16(from_bits(0x3f818000u)), 0x3f82); /* tie, lsb 1: up to even */
    CHECK16(shs_f32_to_bf16(from_bits(0x3f808001u)), 0x3f81); /* above the tie */
    CHECK16(shs_f32_to_bf16(from_bits(0x3f807fffu)), 0x3f80); /* below the tie */
    CHECK16(shs_f32_to_bf16(from_bits(0xbf818000u)), 0xbf82);
    CHECK16(shs_f32_to_bf16(from_bits(0x3fffffffu)), 0x4000); /* carry into the exponent */
    CHECK16(shs_f32_to_bf16(from_bits(0x7f7f7fffu)), 0x7f7f); /* below max + half ulp */
    CHECK16(shs_f32_to_bf16(from_bits(0x7f7f8000u)), 0x7f80); /* tie at the top: to inf (even) */
    CHECK16(shs_f32_to_bf16(FLT_MAX), 0x7f80);
    CHECK16(shs_f32_to_bf16(-FLT_MAX), 0xff80);
    CHECK16(shs_f32_to_bf16(from_bits(0x00008000u)), 0x0000); /* subnormal tie to even 0 */
    CHECK16(shs_f32_to_bf16(from_bits(0x00018000u)), 0x0002); /* subnormal tie to even 2 */
    CHECK16(shs_f32_to_bf16(from_bits(0x00008001u)), 0x0001);
    CHECK16(shs_f32_to_bf16(0.0f), 0x0000);
    CHECK16(shs_f32_to_bf16(-0.0f), 0x8000);
    CHECK16(shs_f32_to_bf16(INFINITY), 0x7f80);
    CHECK16(shs_f32_to_bf16(-INFINITY), 0xff80);
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fff0000u, 0xff80ffffu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t b = shs_f32_to_bf16(from_bits(nans[i]));
        if ((b & 0x7fc0) != 0x7fc0) fail_msg("bf16 of NaN %#010x = %#06x is not a quiet NaN", nans[i], b);
        assert_int_equal(b >> 15, nans[i] >> 31);
    }
    assert_true(shs_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(shs_bf16_to_f32(0x7f7f) == 0x1.fep127f);
    assert_true(shs_bf16_to_f32(0x0001) == 0x1p-133f);
    assert_true(shs_bf16_to_f32(0xff80) == -INFINITY);
}

/* ---- exhaustive round trips -------------------------------------------------------- */

static void test_f16_roundtrip_all(void **state) {
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = shs_f16_to_f32((uint16_t)h);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x03ff);
        if (is_nan) {
            if (!isnan(f)) fail_msg("f16 %#06x -> %g is not NaN", h, f);
            CHECK16(shs_f32_to_f16(f), h | 0x0200); /* quieted, payload and sign kept */
            continue;
        }
        /* the value is the format's definition */
        double want = (h & 0x7c00) == 0x7c00 ? INFINITY : value16(h & 0x7fff, 10, 15);
        if (h & 0x8000) want = -want;
        if ((double)f != want || !!signbit(f) != (int)(h >> 15))
            fail_msg("f16 %#06x -> %.9g, want %.9g", h, f, want);
        CHECK16(shs_f32_to_f16(f), h);
    }
}

static void test_bf16_roundtrip_all(void **state) {
    for (uint32_t b = 0; b <= 0xffff; b++) {
        float f = shs_bf16_to_f32((uint16_t)b);
        if (bits(f) != b << 16 && !isnan(f)) fail_msg("bf16 %#06x -> %#010x", b, bits(f));
        int is_nan = (b & 0x7f80) == 0x7f80 && (b & 0x007f);
        if (is_nan) {
            if (!isnan(f)) fail_msg("bf16 %#06x -> %g is not NaN", b, f);
            CHECK16(shs_f32_to_bf16(f), b | 0x0040);
            continue;
        }
        CHECK16(shs_f32_to_bf16(f), b);
    }
}

/* ---- against the search reference ------------------------------------------------- */

/* Every midpoint between neighbouring finite values (an exact tie, representable
 * in f32) and its two f32 neighbours. */
static void test_all_ties(void **state) {
    for (uint16_t h = 0; h < 0x7bff; h++) {
        float mid = (float)((value16(h, 10, 15) + value16(h + 1, 10, 15)) / 2);
        assert_true((double)mid == (value16(h, 10, 15) + value16(h + 1, 10, 15)) / 2);
        CHECK16(shs_f32_to_f16(mid), (h & 1) ? h + 1 : h);
        CHECK16(shs_f32_to_f16(nextafterf(mid, 0)), h);
        CHECK16(shs_f32_to_f16(nextafterf(mid, INFINITY)), h + 1);
        CHECK16(shs_f32_to_f16(-mid), 0x8000 | ((h & 1) ? h + 1 : h));
    }
    for (uint16_t b = 0; b < 0x7f7f; b++) {
        float mid = (float)((value16(b, 7, 127) + value16(b + 1, 7, 127)) / 2);
        CHECK16(shs_f32_to_bf16(mid), (b & 1) ? b + 1 : b);
        CHECK16(shs_f32_to_bf16(nextafterf(mid, 0)), b);
        CHECK16(shs_f32_to_bf16(nextafterf(mid, INFINITY)), b + 1);
    }
}

static uint64_t rng = 0x5eed;
static uint64_t next_u64(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void test_random_vs_reference(void **state) {
    for (int i = 0; i < 20000; i++) {
        uint32_t u = (uint32_t)next_u64();
        switch (i % 4) {
        case 0: /* exponents around the f16 range, subnormals included (2^-30 .. 2^17) */
            u = (u & 0x807fffffu) | ((uint32_t)(97 + next_u64() % 48) << 23);
            break;
        case 1: /* f16 subnormal range 2^-26 .. 2^-14 */
            u = (u & 0x807fffffu) | ((uint32_t)(101 + next_u64() % 12) << 23);
            break;
        case 2: /* near the f16 overflow threshold */
            u = (0x477fd000u + (uint32_t)(next_u64() % 0x3000)) | (u & 0x80000000u); /* 65488..65536 */
            break;
        default: /* anything finite */
            if ((u & 0x7f800000u) == 0x7f800000u) u ^= 0x40000000u;
            break;
        }
        float f = from_bits(u);
        uint16_t want = ref_f16(f), got = shs_f32_to_f16(f);
        if (got != want) fail_msg("f16(%a = %#010x) = %#06x, reference %#06x", f, u, got, want);
        want = ref_bf16(f), got = shs_f32_to_bf16(f);
        if (got != want) fail_msg("bf16(%a = %#010x) = %#06x, reference %#06x", f, u, got, want);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_info),
        cmocka_unit_test(test_f16_cases),
        cmocka_unit_test(test_bf16_cases),
        cmocka_unit_test(test_f16_roundtrip_all),
        cmocka_unit_test(test_bf16_roundtrip_all),
        cmocka_unit_test(test_all_ties),
        cmocka_unit_test(test_random_vs_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
