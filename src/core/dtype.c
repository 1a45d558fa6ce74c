/* dtype.c - dtype sizes and names, and bit-exact f16/bf16 <-> f32 conversion.
 * Conversions work on bit patterns only (no host float16 type is assumed). */
#include "shardsim/dtype.h"

#include <string.h>

static const struct { const char *name; size_t size; int is_float, nccl; } dtype_info[SHS_NUM_DTYPES] = {
    [SHS_DTYPE_DEFAULT] = {"default", 0, 0, -1},
#define DTYPE_ROW(id, name, size, is_float, nccl) [SHS_##id] = {name, size, is_float, nccl},
    SHS_DTYPE_MAP(DTYPE_ROW)
#undef DTYPE_ROW
};

static int dtype_valid(shs_dtype_t t) { return (int)t >= 0 && t < SHS_NUM_DTYPES; }

size_t shs_dtype_size(shs_dtype_t t) { return dtype_valid(t) ? dtype_info[t].size : 0; }
const char *shs_dtype_name(shs_dtype_t t) { return dtype_valid(t) ? dtype_info[t].name : "invalid"; }
int shs_dtype_is_float(shs_dtype_t t) { return dtype_valid(t) && dtype_info[t].is_float; }
int shs_dtype_nccl(shs_dtype_t t) { return dtype_valid(t) ? dtype_info[t].nccl : -1; }

shs_dtype_t shs_dtype_from_nccl(long long id) {
    for (int t = 1; t < SHS_NUM_DTYPES; t++)
        if (dtype_info[t].nccl == id) return (shs_dtype_t)t;
    return SHS_DTYPE_DEFAULT;
}

int shs_dtype_parse(const char *name, shs_dtype_t *out) {
    static const struct { const char *alias; shs_dtype_t t; } aliases[] = {
        {"float32", SHS_F32}, {"fp32", SHS_F32}, {"float16", SHS_F16}, {"fp16", SHS_F16},
        {"half", SHS_F16},    {"bfloat16", SHS_BF16}, {"float64", SHS_F64}, {"fp64", SHS_F64},
        {"int32", SHS_I32},   {"int8", SHS_I8}, {"uint8", SHS_U8}, {"int64", SHS_I64},
    };
    if (!name) return -1;
    for (int t = 1; t < SHS_NUM_DTYPES; t++)
        if (strcmp(name, dtype_info[t].name) == 0) { *out = (shs_dtype_t)t; return 0; }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0) { *out = aliases[i].t; return 0; }
    return -1;
}

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float shs_bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

uint16_t shs_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    /* Round to nearest even on the 16 dropped bits; a carry into the exponent
     * correctly rounds up to the next binade or to infinity. */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return (uint16_t)(u >> 16);
}

float shs_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / NaN */
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal: man * 2^-24, exact in f32 */
        float v = (float)man * bits_f32(0x33800000u); /* 2^-24 */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t shs_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* quiet NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {
        /* result is an f16 subnormal or zero: value = a * 2^24 in units of 2^-24,
         * rounded to nearest even. */
        if (a < 0x33000000u) return sign; /* < 2^-25: rounds to zero (ties too) */
        uint32_t e = a >> 23;                  /* biased f32 exponent, 102..112 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u; /* 24-bit significand */
        uint32_t shift = 126u - e;             /* so that m >> shift is the f16 subnormal mantissa */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias exponent (127 -> 15) and round 13 dropped bits to nearest even */
    uint32_t lsb = (a >> 13) & 1u;
    a += 0xfffu + lsb;
    return (uint16_t)(sign | (((a - 0x38000000u) >> 13) & 0x7fffu));
}
