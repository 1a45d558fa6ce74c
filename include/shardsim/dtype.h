/* dtype.h - element types shared by devices and communicators, and exact
 * software conversions between f32 and the 16-bit float formats.
 *
 * What it is: the dtype table (enum, names, element sizes, NCCL's
 * ncclDataType_t ids), and f32 <-> f16 / bf16 conversions that round to
 * nearest-even exactly as IEEE 754 hardware does, including subnormals,
 * infinities and NaN.
 * What it is not: arithmetic in those formats (see comm reductions).
 */
#ifndef SHARDSIM_DTYPE_H
#define SHARDSIM_DTYPE_H

#include <stddef.h>
#include <stdint.h>

/* The element types, one row each: enum suffix, name, size in bytes, is a
 * float, NCCL's ncclDataType_t value (nccl.h: ncclInt8 0 ... ncclBfloat16 9). */
#define SHS_DTYPE_MAP(X)                                                         \
    X(I8, "i8", 1, 0, 0)                                                         \
    X(U8, "u8", 1, 0, 1)                                                         \
    X(I32, "i32", 4, 0, 2)                                                       \
    X(U32, "u32", 4, 0, 3)                                                       \
    X(I64, "i64", 8, 0, 4)                                                       \
    X(U64, "u64", 8, 0, 5)                                                       \
    X(F16, "f16", 2, 1, 6)                                                       \
    X(F32, "f32", 4, 1, 7)                                                       \
    X(F64, "f64", 8, 1, 8)                                                       \
    X(BF16, "bf16", 2, 1, 9)

/* SHS_DTYPE_DEFAULT (0) is no element type: a zero-initialised config's
 * "not chosen" (param_dtype: f32; reduce_dtype: the param dtype). Its size is
 * 0, so every call that moves elements refuses it. The real types follow from
 * 1; their numeric values are this enum's own, never written to a file (files
 * name dtypes; shs_dtype_nccl maps to NCCL's numbering). */
typedef enum {
    SHS_DTYPE_DEFAULT = 0,
#define SHS_DTYPE_ENUM(id, name, size, is_float, nccl) SHS_##id,
    SHS_DTYPE_MAP(SHS_DTYPE_ENUM)
#undef SHS_DTYPE_ENUM
    SHS_NUM_DTYPES
} shs_dtype_t;

/* Size of one element in bytes; 0 for SHS_DTYPE_DEFAULT or an invalid dtype. */
size_t shs_dtype_size(shs_dtype_t t);
/* Lower-case name ("f32", "bf16", ...); "default" for SHS_DTYPE_DEFAULT,
 * "invalid" for an unknown value. */
const char *shs_dtype_name(shs_dtype_t t);
/* NCCL's ncclDataType_t value of a real dtype; -1 for DEFAULT or invalid. */
int shs_dtype_nccl(shs_dtype_t t);
/* The dtype whose NCCL value is `id`; SHS_DTYPE_DEFAULT for an unknown id. */
shs_dtype_t shs_dtype_from_nccl(long long id);
/* Parse a real dtype's name as printed by shs_dtype_name (also "float32", "fp16", "bfloat16").
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
