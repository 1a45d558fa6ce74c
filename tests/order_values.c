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
