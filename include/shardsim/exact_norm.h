/* exact_norm.h - gradient norms that do not depend on how the gradient is
 * split: the canonical reduction order for clip_grad_norm_.
 *
 * What it is: an exact accumulator for sum |x| (p = 1) and sum x^2 (p = 2)
 * over f32 values. Every f32 is m * 2^e with a 24-bit integer m and
 * e >= -149, so |x| and x^2 (m^2 < 2^48, exact) are integer multiples of
 * 2^-298. The accumulator holds that integer exactly in fixed point: 20
 * base-2^32 digits in int64 words (LSB 2^-298, room for 2^40 terms of the
 * largest square), plus counts of NaN and infinite terms. Integer addition
 * is associative, so any partition of the elements over ranks, any shard
 * boundary and any order give the same accumulator, which is rounded only
 * once at the end. Partial accumulators from several ranks combine by an
 * elementwise int64 sum (an all-reduce of SHS_INT64 SUM does it exactly:
 * every digit stays below 2^63 for up to 2^30 partials).
 * Hence the norm computed from shards equals the norm computed from the full
 * gradient bit for bit, at every world size (the "canonical order" is: the
 * exact sum, rounded once). Cf. Demmel & Hida, "Accurate and efficient
 * floating point summation", SIAM J. Sci. Comput. 2003 (exact accumulation
 * in fixed point); torch.nn.utils.clip_grad_norm_ for the clip rule.
 * What it is not: a device kernel (device.h's shs_norm_accumulate calls it)
 * or the clipping itself (strategy.c).
 */
#ifndef SHARDSIM_EXACT_NORM_H
#define SHARDSIM_EXACT_NORM_H

#include <stddef.h>
#include <stdint.h>

#define SHS_NORM_DIGITS 20                       /* base-2^32 digits, LSB 2^-298 */
#define SHS_NORM_ACC_WORDS (SHS_NORM_DIGITS + 2) /* + NaN count, + infinity count */
#define SHS_NORM_INF (-1)                         /* norm type: max |x| */

/* Add |x[i]|^p (p = 1 or 2) for n elements into acc (SHS_NORM_ACC_WORDS
 * int64, zeroed to start). Host memory. Digits are carried as needed, so
 * any n is safe. p = SHS_NORM_INF means the inf-norm: word 0 keeps max |x| (as its f32
 * bits) and partial accumulators combine by an elementwise max instead. */
void shs_exact_norm_add(int64_t *acc, const float *x, size_t n, int p);

/* The p-norm of everything added (p = SHS_NORM_INF: max |x|): (sum)^(1/p), the exact sum rounded to
 * double (top digits first, a fixed rule), then the root in double, then
 * rounded to f32. NaN if any term was NaN, +inf if any was infinite (and
 * none NaN). acc is normalized in place. */
float shs_exact_norm_finish(int64_t *acc, int p);

#endif
