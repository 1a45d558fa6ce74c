/* order_values.c - see order_values.h. */
#include "order_values.h"

#include <math.h>

uint64_t test_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

double test_order_value(uint64_t seed, int r, size_t i) {
    uint64_t h = test_mix64(seed * 1000003u + (uint64_t)r * 7919u + i);
    double m = 1.0 + (double)(h & 0xffffff) / 16777216.0;
    return ((h >> 40) & 1 ? -1.0 : 1.0) * ldexp(m, (int)((h >> 24) % 17) - 8);
}

/* f32 value v (exact in f32) rounded to t. */
static double f32_to(shs_dtype_t t, float v) {
    if (t == SHS_F16) return shs_f16_to_f32(shs_f32_to_f16(v));
    if (t == SHS_BF16) return shs_bf16_to_f32(shs_f32_to_bf16(v));
    return v;
}

double test_avg_scale(shs_dtype_t t, int n) {
    double inv = 1.0 / n;
    return t == SHS_F64 ? inv : f32_to(t, (float)inv);
}

double test_avg_term(shs_dtype_t t, double x, int n) {
    double p = x * test_avg_scale(t, n);
    return t == SHS_F64 ? p : f32_to(t, (float)p);
}
