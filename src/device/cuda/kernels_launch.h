/* kernels_launch.h - private: what the CUDA kernel files share (kernels.cu,
 * kernels_matmul.cu, kernels_layers.cu): the fixed launch configuration
 * (THREADS per block, the grid from the sizes, grid-stride loops beyond
 * MAX_GRID blocks), a launch's error and the grid-stride launch. Included
 * by the .cu files only (nvcc).
 * What it is not: the kernels' contract (kernels.cu's header). */
#ifndef SHARDSIM_CUDA_KERNELS_LAUNCH_H
#define SHARDSIM_CUDA_KERNELS_LAUNCH_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#define THREADS 256
#define MAX_GRID 65535u /* grid-stride loops beyond this many blocks */

static inline unsigned grid_for(size_t n) {
    size_t g = (n + THREADS - 1) / THREADS;
    if (g < 1) g = 1;
    return g > MAX_GRID ? MAX_GRID : (unsigned)g;
}

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

static inline cudaError_t launched(void) { return cudaGetLastError(); }

/* A grid-stride kernel over n elements launched on stream s (nothing when
 * n = 0); returns from the calling launcher with the launch's error. */
#define ELEMENTWISE(launch_name, kernel, n, ...)                                                   \
    do {                                                                                           \
        if ((n) == 0) return cudaSuccess;                                                          \
        kernel<<<grid_for(n), THREADS, 0, s>>>(__VA_ARGS__);                                       \
        return launched();                                                                         \
    } while (0)

#endif
