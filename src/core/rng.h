/* rng.h - private: counter-based random numbers (splitmix64 finalizer,
 * Steele et al. 2014). A value depends only on its key, never on call order,
 * so any rank can generate exactly the elements it owns. */
#ifndef SHARDSIM_RNG_H
#define SHARDSIM_RNG_H

#include <math.h>
#include <stdint.h>

static inline uint64_t shs__mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* 64 random bits for (seed, stream, index). */
static inline uint64_t shs__rand_bits(uint64_t seed, uint64_t stream, uint64_t index) {
    return shs__mix64(shs__mix64(seed ^ shs__mix64(stream)) ^ index);
}

/* Uniform in (0, 1) from the top 53 bits. */
static inline double shs__uniform01(uint64_t bits) { return ((double)(bits >> 11) + 0.5) * 0x1.0p-53; }

/* Standard normal for (seed, stream, index) by Box-Muller (one of the pair). */
static inline double shs__rand_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    double u1 = shs__uniform01(shs__rand_bits(seed, stream, 2 * index));
    double u2 = shs__uniform01(shs__rand_bits(seed, stream, 2 * index + 1));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
