/* cuda_impl.h - private: what the CUDA communicators need from the CUDA
 * device backend (device_cuda.c), and CUDA error-to-status helpers.
 * Included by C files of src/device/cuda/ and src/comm/cuda/ only (built when nvcc was found).
 */
#ifndef SHARDSIM_CUDA_IMPL_H
#define SHARDSIM_CUDA_IMPL_H

#include <cuda_runtime_api.h>

#include "device/device_impl.h"

/* The CUDA device vtable (device_cuda.c). */
extern const shs_device_iface_t shs__cuda_iface;

/* 1 if dev was made by shs_device_create_cuda(). */
int shs__device_is_cuda(const shs_device_t *dev);
/* The device's stream: every kernel and copy of the device runs on it, in
 * call order. Only for CUDA devices. */
cudaStream_t shs__cuda_device_stream(const shs_device_t *dev);
/* Make dev's GPU the calling thread's current device (cudaSetDevice). */
shs_status_t shs__cuda_bind(const shs_device_t *dev);

/* SHS_INTERNAL with "rank R: WHAT: <cuda error name>: <cuda error string>". */
shs_status_t shs__cuda_error(int rank, const char *what, cudaError_t e);

#endif
