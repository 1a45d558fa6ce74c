/* dtype.c - dtype sizes and names, and the public bit-exact f16/bf16 <-> f32
 * conversions (written once in core/half.h, which the CUDA kernels share). */
#include "shardsim/dtype.h"

#include <string.h>

#include "core/half.h"

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

float shs_bf16_to_f32(uint16_t b) { return shs__bf16_to_f32(b); }
uint16_t shs_f32_to_bf16(float f) { return shs__f32_to_bf16(f); }
float shs_f16_to_f32(uint16_t h) { return shs__f16_to_f32(h); }
uint16_t shs_f32_to_f16(float f) { return shs__f32_to_f16(f); }
