/* gpu_common.h - helpers of the GPU tests (tests/gpu/, `make test-gpu`):
 * require a CUDA device, move arrays between host and a device, compare
 * float arrays with a stated tolerance and report the worst element.
 * The GPU tests are not part of `make test` (which runs the test_*.c of
 * every other folder under tests/):
 * they need a GPU to run, and CI only compiles and links them. */
#ifndef SHARDSIM_TEST_GPU_COMMON_H
#define SHARDSIM_TEST_GPU_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/device.h"

/* Exit 1 with "no CUDA device ..." (or "built without CUDA") when the tests
 * cannot run: a GPU test that silently passes without a GPU proves nothing. */
void gpu_require_device(void);

/* Allocate n floats on dev (category OTHER) holding host[0..n). */
float *gpu_upload(shs_device_t *dev, const float *host, size_t n);
void *gpu_upload_bytes(shs_device_t *dev, const void *host, size_t bytes);
/* Copy n floats of dev memory to a new host array (free()). */
float *gpu_download(shs_device_t *dev, const float *p, size_t n);

/* Deterministic pseudo-random floats in [lo, hi) from seed. */
void gpu_fill(float *x, size_t n, uint64_t seed, float lo, float hi);

/* Compare got against want elementwise: |got - want| <= atol + rtol * |want|
 * (NaN matches NaN only; atol = rtol = 0 means bit-identical, memcmp).
 * Prints name, the worst element and the tolerance when it fails.
 * Returns 1 when within tolerance. */
int gpu_close(const char *name, const float *got, const float *want, size_t n, double atol, double rtol);

#endif
