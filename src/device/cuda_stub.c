/* cuda_stub.c - the CUDA device entry points of a build without the CUDA
 * backend (the Makefile found no nvcc, or SAN= is set): each says so and
 * fails with SHS_UNSUPPORTED, so callers need no #ifdef. With SHS_HAVE_CUDA
 * this file is empty and src/device/cuda/ provides the real ones.
 * What it is not: the CUDA communicators' stubs (src/comm/comm_cuda_stub.c).
 */
#ifndef SHS_HAVE_CUDA
#include <stddef.h>

#include "shardsim/features.h"
#include "shardsim/device.h"

#define NO_CUDA "shardsim was built without the CUDA backend, which %s", shs_feature_missing(SHS_FEATURE_CUDA)

shs_status_t shs_cuda_device_count(int *count) {
    if (count) *count = 0;
    return shs_set_error(SHS_UNSUPPORTED, NO_CUDA);
}

shs_status_t shs_device_create_cuda(shs_device_t **out, int rank, int gpu_index, size_t capacity) {
    (void)rank, (void)gpu_index, (void)capacity;
    if (out) *out = NULL;
    return shs_set_error(SHS_UNSUPPORTED, NO_CUDA);
}

#else
typedef int shs__cuda_stub_unused; /* ISO C forbids an empty translation unit */
#endif
