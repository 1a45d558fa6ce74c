/* half.h - private: bit-exact f16 / bf16 <-> f32 conversions, written once
 * for every caller: dtype.c's public shs_f16_to_f32() and friends, the
 * collectives' reduction (comm_reduce.c) and the CUDA kernels (kernels.cu).
 * Bit patterns only (no host float16 type is assumed); f32 -> f16/bf16
 * rounds to nearest even, NaN stays a quiet NaN.
 * What it is not: the dtype table (shardsim/dtype.h, dtype.c).
 */
#ifndef SHARDSIM_HALF_H
#define SHARDSIM_HALF_H

#include <stdint.h>

#include "core/host_device.h"

static inline SHS_HD float shs__bf16_to_f32(uint16_t b) { return shs__u32_as_f32((uint32_t)b << 16); }

static inline SHS_HD uint16_t shs__f32_to_bf16(float f) {
    uint32_t u = shs__f32_as_u32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    /* Round to nearest even on the 16 dropped bits; a carry into the exponent
     * correctly rounds up to the next binade or to infinity. */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return (uint16_t)(u >> 16);
}

static inline SHS_HD float shs__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return shs__u32_as_f32(sign | 0x7f800000u | (man << 13)); /* inf / NaN */
    if (exp == 0) {
        if (man == 0) return shs__u32_as_f32(sign);
        /* subnormal: man * 2^-24, exact in f32 */
        float v = (float)man * shs__u32_as_f32(0x33800000u); /* 2^-24 */
        return sign ? -v : v;
    }
    return shs__u32_as_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline SHS_HD uint16_t shs__f32_to_f16(float f) {
    uint32_t u = shs__f32_as_u32(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* quiet NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {
        /* result is an f16 subnormal or zero: value = a * 2^24 in units of 2^-24,
         * rounded to nearest even. */
        if (a < 0x33000000u) return sign; /* < 2^-25: rounds to zero (ties too) */
        uint32_t e = a >> 23;                     /* biased f32 exponent, 102..112 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u; /* 24-bit significand */
        uint32_t shift = 126u - e;                /* so that m >> shift is the f16 subnormal mantissa */
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

/* f32 -> f16/bf16 -> f32: the value the dtype holds (f16/bf16 arithmetic
 * computed in f32 rounds through this after every op). */
static inline SHS_HD float shs__f16_round(float f) { return shs__f16_to_f32(shs__f32_to_f16(f)); }
static inline SHS_HD float shs__bf16_round(float f) { return shs__bf16_to_f32(shs__f32_to_bf16(f)); }

#endif
