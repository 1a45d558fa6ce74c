/* exact_norm.c - exact fixed-point accumulation of |x| and x^2 over f32 (see
 * exact_norm.h for the representation and why it is order-independent). */
#include "shardsim/exact_norm.h"

#include <math.h>
#include <string.h>

enum { NAN_WORD = SHS_NORM_DIGITS, INF_WORD = SHS_NORM_DIGITS + 1 };

/* Carry every digit into [0, 2^32). Digits only ever grow (terms are
 * non-negative), so no borrow is needed. */
static void normalize(int64_t *acc) {
    int64_t carry = 0;
    for (int i = 0; i < SHS_NORM_DIGITS; i++) {
        int64_t v = acc[i] + carry;
        acc[i] = v & 0xffffffffLL;
        carry = v >> 32;
    }
    /* the top digit keeps any carry: 2^40 terms of the largest square fit */
    acc[SHS_NORM_DIGITS - 1] += carry << 32;
}

/* Add m * 2^k (m < 2^48, k >= 0) to the digits. */
static void add_scaled(int64_t *acc, uint64_t m, int k) {
    int i = k >> 5, sh = k & 31;
    unsigned __int128 v = (unsigned __int128)m << sh; /* < 2^80: three digits */
    acc[i] += (int64_t)(uint32_t)v;
    acc[i + 1] += (int64_t)(uint32_t)(v >> 32);
    if (i + 2 < SHS_NORM_DIGITS) acc[i + 2] += (int64_t)(uint32_t)(v >> 64);
}

/* p = inf: word 0 keeps the largest |x| as its f32 bit pattern (ordered
 * like the values for non-NaN |x|), so partials combine by a max. */
static void add_max(int64_t *acc, const float *x, size_t n) {
    for (size_t j = 0; j < n; j++) {
        uint32_t bits;
        memcpy(&bits, &x[j], sizeof bits);
        bits &= 0x7fffffffu;
        if (bits > 0x7f800000u) acc[NAN_WORD] = 1;
        else if ((int64_t)bits > acc[0]) acc[0] = bits;
    }
}

void shs_exact_norm_add(int64_t *acc, const float *x, size_t n, int p) {
    if (p == SHS_NORM_INF) {
        add_max(acc, x, n);
        return;
    }
    size_t since_carry = 0;
    for (size_t j = 0; j < n; j++) {
        uint32_t bits;
        memcpy(&bits, &x[j], sizeof bits);
        uint32_t ex = (bits >> 23) & 0xff, frac = bits & 0x7fffff;
        if (ex == 0xff) {
            acc[frac ? NAN_WORD : INF_WORD]++;
            continue;
        }
        if (ex == 0 && frac == 0) continue;
        /* |x| = m * 2^(e) with e = max(ex, 1) - 150 >= -149 */
        uint64_t m = ex ? (frac | 0x800000u) : frac;
        int e = (ex ? (int)ex : 1) - 150;
        if (p == 1) add_scaled(acc, m, e + 298);           /* |x| = m 2^e = m 2^(e+298) LSBs */
        else add_scaled(acc, m * m, 2 * e + 298);           /* x^2 = m^2 2^(2e) */
        /* each digit gains < 2^32 per term: carry before 2^31 terms pile up */
        if (++since_carry == (size_t)1 << 30) {
            normalize(acc);
            since_carry = 0;
        }
    }
    normalize(acc);
}

float shs_exact_norm_finish(int64_t *acc, int p) {
    if (p == SHS_NORM_INF) {
        if (acc[NAN_WORD]) return NAN;
        uint32_t bits = (uint32_t)acc[0];
        float v;
        memcpy(&v, &bits, sizeof v);
        return v;
    }
    normalize(acc);
    if (acc[NAN_WORD]) return NAN;
    if (acc[INF_WORD]) return INFINITY;
    double sum = 0.0;
    for (int i = SHS_NORM_DIGITS - 1; i >= 0; i--) sum = sum * 4294967296.0 + (double)acc[i];
    sum = ldexp(sum, -298);
    return (float)(p == 1 ? sum : sqrt(sum));
}
