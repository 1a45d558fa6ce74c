/* dtype.h - element types shared by devices and communicators, and exact
 * software conversions between f32 and the 16-bit float formats.
 *
 * What it is: the dtype enum (values match NCCL's ncclDataType_t so traces map
 * 1:1), element sizes, names, and f32 <-> f16 / bf16 conversions that round to
 * nearest-even exactly as IEEE 754 hardware does, including subnormals,
 * infinities and NaN.
 * What it is not: arithmetic in those formats (see comm reductions).
 */
#ifndef SHARDSIM_DTYPE_H
#define SHARDSIM_DTYPE_H

#include <stddef.h>
#include <stdint.h>

/* Values equal NCCL's ncclDataType_t (nccl.h): int8 0 ... bfloat16 9. */
typedef enum {
    SHS_I8 = 0,
    SHS_U8 = 1,
    SHS_I32 = 2,
    SHS_U32 = 3,
    SHS_I64 = 4,
    SHS_U64 = 5,
    SHS_F16 = 6,
    SHS_F32 = 7,
    SHS_F64 = 8,
    SHS_BF16 = 9,
    SHS_NUM_DTYPES = 10
} shs_dtype_t;

/* Size of one element in bytes; 0 for an invalid dtype. */
size_t shs_dtype_size(shs_dtype_t t);
/* Lower-case name ("f32", "bf16", ...); "invalid" for an unknown value. */
const char *shs_dtype_name(shs_dtype_t t);
/* Parse a name as printed by shs_dtype_name (also "float32", "fp16", "bfloat16").
 * Returns 0 and sets *out, or -1 for an unknown name. */
int shs_dtype_parse(const char *name, shs_dtype_t *out);
/* 1 for f16, bf16, f32, f64. */
int shs_dtype_is_float(shs_dtype_t t);

/* IEEE binary16 bits -> f32 (exact: every f16 value is an f32 value). */
float shs_f16_to_f32(uint16_t h);
/* f32 -> IEEE binary16 bits, round to nearest, ties to even; overflow gives
 * +/-inf, tiny values become f16 subnormals or signed zero; NaN stays a quiet
 * NaN with its sign. (IEEE 754-2008 §4.3.1 / §7.4) */
uint16_t shs_f32_to_f16(float f);
/* bfloat16 bits -> f32 (exact: the upper half of the f32 pattern). */
float shs_bf16_to_f32(uint16_t b);
/* f32 -> bfloat16 bits, round to nearest, ties to even (the rounding of
 * Intel's BF16 whitepaper and PyTorch's c10::BFloat16); NaN stays quiet NaN. */
uint16_t shs_f32_to_bf16(float f);

#endif
