/* host_device.h - private: what lets one static inline function compile
 * alike under cc (C11) and nvcc (CUDA C++): SHS_HD, and float <-> bit-pattern
 * casts. Used by core/half.h and device/kernel_math.h.
 * What it is not: a portability layer for anything else; no public API.
 */
#ifndef SHARDSIM_HOST_DEVICE_H
#define SHARDSIM_HOST_DEVICE_H

#include <stdint.h>
#include <string.h>

/* __host__ __device__ under nvcc, nothing under a C compiler. */
#ifdef __CUDACC__
#define SHS_HD __host__ __device__
#else
#define SHS_HD
#endif

/* The bits of an f32, and back: CUDA's intrinsics in device code, memcpy
 * on the host (either is a plain move). */
#ifdef __CUDA_ARCH__
static inline SHS_HD uint32_t shs__f32_as_u32(float f) { return __float_as_uint(f); }
static inline SHS_HD float shs__u32_as_f32(uint32_t u) { return __uint_as_float(u); }
#else
static inline SHS_HD uint32_t shs__f32_as_u32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline SHS_HD float shs__u32_as_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
#endif

#endif
