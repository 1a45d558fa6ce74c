/* kernels_matmul.cu - the CUDA backend's matmul (forward and backward):
 * one tiled GEMM in which each output is one fma chain over k.
 *
 * The matmul is our own tiled kernel, not cuBLAS: device.h fixes each output
 * as one fma chain in increasing reduction index, which no cuBLAS algorithm
 * promises (they split K across warps and reorder), so cuBLAS could not keep
 * the contract even with CUBLAS_PEDANTIC_MATH and a fixed algorithm. Tiling
 * over K (shared-memory blocks of TK) keeps the chain order: an accumulator
 * stays in a register across tiles. How every kernel keeps device.h's
 * determinism contract: kernels.cu's header.
 *
 * Legend: B batch, T time, C channels, BT = B*T rows, OC output channels.
 */
#include <math.h>
#include <stdint.h>

#include "device/cuda/kernels.h"
#include "device/cuda/kernels_launch.h"
#include "device/kernel_math.h"
/* ---- matmul: one tiled GEMM, each output one fma chain over k ------------
 * out (M,N) row stride N; A(i,k) = A[i*a_rs + k*a_ks]; B(k,j) = B[k*b_ks + j*b_cs].
 * acc = init (bias[j], or 0); for k = 0..K-1: acc = fmaf(A(i,k), B(k,j), acc);
 * then out = acc, or out = out + acc when accumulating (the term is added once).
 * Block TM x TN outputs, 256 threads, each RxR outputs at rows ty + 16 a and
 * columns tx + 16 b (coalesced stores); K walked in tiles of TK through shared
 * memory, the inner loop stopping at K exactly (no padded fma(0,0,acc), which
 * would turn a -0 accumulator into +0). */
#define TM 64
#define TN 64
#define TK 16
#define R 4

/* Tile[kk][xx] = X(x0 + xx, k0 + kk), X(x, k) = X[x*x_s + k*k_s]; 0 outside
 * x < xn, kk < kn. The block's threads walk the tile with xx fastest
 * (x_fastest) or kk fastest, whichever reads X contiguously. */
template <int TX>
__device__ static void load_tile(float (*tile)[TX], const float *__restrict__ X, long long x_s, long long k_s, int x0,
                                 int xn, int k0, int kn, bool x_fastest) {
    for (int e = threadIdx.x; e < TX * TK; e += blockDim.x) {
        int xx, kk;
        if (x_fastest) { kk = e / TX; xx = e % TX; }
        else { xx = e / TK; kk = e % TK; }
        int x = x0 + xx, k = k0 + kk;
        tile[kk][xx] = (x < xn && kk < kn) ? X[(long long)x * x_s + (long long)k * k_s] : 0.0f;
    }
}

__global__ void gemm_kernel(int M, int N, int K, const float *__restrict__ A, long long a_rs, long long a_ks,
                            const float *__restrict__ B, long long b_ks, long long b_cs, const float *__restrict__ bias,
                            float *out, int accumulate) {
    __shared__ float As[TK][TM];
    __shared__ float Bs[TK][TN];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int i0 = blockIdx.y * TM, j0 = blockIdx.x * TN;
    float acc[R][R];
#pragma unroll
    for (int a = 0; a < R; a++)
#pragma unroll
        for (int b = 0; b < R; b++) {
            int j = j0 + tx + 16 * b;
            acc[a][b] = (bias && !accumulate && j < N) ? bias[j] : 0.0f;
        }
    for (int k0 = 0; k0 < K; k0 += TK) {
        int kn = K - k0 < TK ? K - k0 : TK;
        /* A: k fastest when A's rows are contiguous in k; B: j fastest when
         * its rows are contiguous in j */
        load_tile<TM>(As, A, a_rs, a_ks, i0, M, k0, kn, a_ks != 1);
        load_tile<TN>(Bs, B, b_cs, b_ks, j0, N, k0, kn, b_cs == 1);
        __syncthreads();
        for (int kk = 0; kk < kn; kk++) {
            float av[R], bv[R];
#pragma unroll
            for (int a = 0; a < R; a++) av[a] = As[kk][ty + 16 * a];
#pragma unroll
            for (int b = 0; b < R; b++) bv[b] = Bs[kk][tx + 16 * b];
#pragma unroll
            for (int a = 0; a < R; a++)
#pragma unroll
                for (int b = 0; b < R; b++) acc[a][b] = fmaf(av[a], bv[b], acc[a][b]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int a = 0; a < R; a++)
#pragma unroll
        for (int b = 0; b < R; b++) {
            int i = i0 + ty + 16 * a, j = j0 + tx + 16 * b;
            if (i < M && j < N) {
                float *o = out + (long long)i * N + j;
                *o = accumulate ? *o + acc[a][b] : acc[a][b];
            }
        }
}

static cudaError_t gemm(cudaStream_t s, int M, int N, int K, const float *A, long long a_rs, long long a_ks,
                        const float *B, long long b_ks, long long b_cs, const float *bias, float *out, int accumulate) {
    if (M <= 0 || N <= 0) return cudaSuccess;
    dim3 grid((unsigned)((N + TN - 1) / TN), (unsigned)((M + TM - 1) / TM));
    gemm_kernel<<<grid, THREADS, 0, s>>>(M, N, K, A, a_rs, a_ks, B, b_ks, b_cs, bias, out, accumulate);
    return launched();
}

/* dbias[o] += (sum over r = 0..BT-1 of dout[r,o], plain f32 adds from 0). */
__global__ void column_sum_kernel(float *dbias, const float *dout, int BT, int OC) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    float sum = 0.0f;
    for (int r = 0; r < BT; r++) sum += dout[(size_t)r * OC + o];
    dbias[o] += sum;
}

extern "C" cudaError_t shs__cuda_matmul_forward(cudaStream_t s, float *out, const float *inp, const float *weight,
                                                const float *bias, int BT, int C, int OC) {
    return gemm(s, BT, OC, C, inp, C, 1, weight, 1, C, bias, out, 0);
}

extern "C" cudaError_t shs__cuda_matmul_backward(cudaStream_t s, float *dinp, float *dweight, float *dbias,
                                                 const float *dout, const float *inp, const float *weight, int BT,
                                                 int C, int OC) {
    cudaError_t e;
    if (dinp && (e = gemm(s, BT, C, OC, dout, OC, 1, weight, C, 1, NULL, dinp, 1)) != cudaSuccess) return e;
    if ((e = gemm(s, OC, C, BT, dout, 1, OC, inp, C, 1, NULL, dweight, 1)) != cudaSuccess) return e;
    if (dbias && OC > 0) {
        column_sum_kernel<<<(OC + THREADS - 1) / THREADS, THREADS, 0, s>>>(dbias, dout, BT, OC);
        return launched();
    }
    return cudaSuccess;
}
