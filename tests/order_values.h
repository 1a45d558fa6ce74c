/* order_values.h - deterministic test inputs whose sums depend on the order
 * of addition (for the fixed-reduction-order tests: test_comm_order,
 * test_reduce_order, test_mpi). Pure functions of their arguments, so every
 * rank, process and oracle draws the same values.
 * What it is not: a statistical generator.
 */
#ifndef SHARDSIM_TESTS_ORDER_VALUES_H
#define SHARDSIM_TESTS_ORDER_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/dtype.h"

/* splitmix64's finalizer (Steele, Lea, Flood 2014): a 64-bit mix. */
uint64_t test_mix64(uint64_t x);

/* Rank r's element i for `seed`: (1 + k/2^24) * 2^e of either sign with
 * e in -8..8 (24 random mantissa bits), exact in double; rounding it to f32
 * gives the same value as computing it in f32. */
double test_order_value(uint64_t seed, int r, size_t i);

/* AVG over N ranks, as comm.h defines it (NCCL's pre-multiplied sum), for a
 * float dtype t: the scalar s (1/N in double, rounded to f32, then to t; f64:
 * 1/N in double) and one input's term rnd_t(x * s), x a value of t. The
 * product is formed in double, exact for f32, f16 and bf16 operands (at most
 * 48 significant bits), then rounded once to t (for f16/bf16 via f32, exact
 * there). An oracle sums the terms in rank order, rounding each add to t. */
double test_avg_scale(shs_dtype_t t, int n);
double test_avg_term(shs_dtype_t t, double x, int n);

#endif
