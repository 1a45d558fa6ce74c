/* matmul_cpu.h - private: the CPU backend's matmul (matmul_cpu.c) and a test
 * hook that forces one instruction-set path of its micro-kernel.
 *
 * Every path computes each output element as the same chain of fused
 * multiply-adds (device.h), so every path gives the same bits; the hook lets
 * tests compare them.
 */
#ifndef SHARDSIM_MATMUL_CPU_H
#define SHARDSIM_MATMUL_CPU_H

#include "shardsim/device.h"

/* The vtable's matmul slots; contracts as shs_matmul_forward/backward. */
void shs__cpu_matmul_forward(shs_device_t *dev, float *out, const float *inp, const float *weight,
                             const float *bias, int BT, int C, int OC);
void shs__cpu_matmul_backward(shs_device_t *dev, float *dinp, float *dweight, float *dbias, const float *dout,
                              const float *inp, const float *weight, int BT, int C, int OC);

typedef enum {
    SHS__MM_ISA_AUTO = -1, /* the best path this CPU supports */
    SHS__MM_ISA_SCALAR,    /* portable C99 fmaf() */
    SHS__MM_ISA_AVX2,      /* AVX2 + FMA */
    SHS__MM_ISA_AVX512,    /* AVX-512F */
    SHS__MM_NUM_ISA
} shs__mm_isa_t;

/* 1 if this build and CPU can run `isa` (AUTO: always). */
int shs__cpu_matmul_isa_available(shs__mm_isa_t isa);
/* Test hook: every later matmul of the process uses `isa` (AUTO: back to the
 * best available). Returns 0 and changes nothing when `isa` is unavailable.
 * Not for concurrent use with running matmuls. */
int shs__cpu_matmul_force_isa(shs__mm_isa_t isa);
/* The path the next matmul will use, never AUTO. */
shs__mm_isa_t shs__cpu_matmul_isa(void);
/* "scalar", "avx2", "avx512", "auto". */
const char *shs__cpu_matmul_isa_name(shs__mm_isa_t isa);

#endif
