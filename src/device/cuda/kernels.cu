/* kernels.cu - the CUDA backend's kernels: every operation of
 * include/shardsim/device.h, and the collectives' rank-ordered reduction.
 *
 * What it is: CUDA C kernels that keep device.h's determinism contract the
 * same way the CPU backend does. Work is split over independent OUTPUT
 * elements only; each output element is computed by one thread, with the
 * summation order device.h (or the CPU reference, src/device/cpu/device_cpu.c) fixes:
 *   - no atomics anywhere, no reductions split across threads except the
 *     integer norm accumulator, whose int64 sums are associative (exact);
 *   - fixed launch configurations (THREADS per block, grid from the sizes);
 *   - compiled with --fmad=false (Makefile): no a*b+c is contracted into an
 *     fma behind our back, as gcc's -ffp-contract=off on the CPU side; the
 *     fmas device.h asks for (matmul chains) are explicit fmaf() calls;
 *   - IEEE division and square root (nvcc's defaults -prec-div=true,
 *     -prec-sqrt=true, -ftz=false; never --use_fast_math).
 * The math of each element or row is kernel_math.h's: the same SHS_HD
 * functions the CPU backend calls, so both run the same operations in the
 * same order; this file holds the thread decomposition and the launches.
 * Consequence: a kernel whose CPU reference uses only + - * / sqrt and fma
 * gives the CPU's bits exactly (matmul, layernorm, attention backward,
 * encoder, residual, accumulate, scale, relu, sum, norm, cast, adamw, sgd,
 * softmax backward). Kernels that call expf, logf, tanhf, coshf (attention
 * forward, softmax forward, GELU) agree to a few ulps only: CUDA's libm is
 * not glibc's (CUDA C Programming Guide, "Mathematical Functions": expf 2
 * ulp, tanhf 2 ulp, logf 1 ulp, coshf 2 ulp). They are still deterministic
 * run to run. tests/gpu/test_cuda_kernels.c states the tolerance per kernel.
 *
 * The matmul is our own tiled kernel, not cuBLAS: device.h fixes each output
 * as one fma chain in increasing reduction index, which no cuBLAS algorithm
 * promises (they split K across warps and reorder), so cuBLAS could not keep
 * the contract even with CUBLAS_PEDANTIC_MATH and a fixed algorithm. Tiling
 * over K (shared-memory blocks of TK) keeps the chain order: an accumulator
 * stays in a register across tiles.
 *
 * What it is not: fast. Per-row statistics (layernorm, softmax, attention
 * scores) run one thread per row, because the contract fixes a sequential
 * order; this is a reference backend, not llm.c's tuned kernels.
 *
 * Legend: B batch, T time, C channels, NH heads, hs = C/NH, V vocabulary,
 * BT = B*T rows, OC output channels, n element count.
 */
#include <math.h>
#include <stdint.h>

#include "device/cuda/kernels.h"
#include "device/kernel_math.h"

#define THREADS 256
#define MAX_GRID 65535u /* grid-stride loops beyond this many blocks */

static unsigned grid_for(size_t n) {
    size_t g = (n + THREADS - 1) / THREADS;
    if (g < 1) g = 1;
    return g > MAX_GRID ? MAX_GRID : (unsigned)g;
}

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

static cudaError_t launched(void) { return cudaGetLastError(); }

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

/* ---- layernorm ------------------------------------------------------------ */

/* One thread per row: mean and rstd in the CPU's order. */
__global__ void layernorm_stats_kernel(float *mean, float *rstd, const float *inp, int N, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    shs__layernorm_stats(inp + (size_t)r * C, C, &mean[r], &rstd[r]);
}

__global__ void layernorm_out_kernel(float *out, const float *inp, const float *mean, const float *rstd,
                                     const float *weight, const float *bias, int N, int C) {
    GRID_STRIDE(i, (size_t)N * C) {
        size_t r = i / (size_t)C;
        int c = (int)(i % (size_t)C);
        out[i] = shs__layernorm_out(inp[i], mean[r], rstd[r], weight[c], bias[c]);
    }
}

/* One thread per row: dinp += rstd * (g - mean(g) - norm * mean(g norm)). */
__global__ void layernorm_dinp_kernel(float *dinp, const float *dout, const float *inp, const float *weight,
                                      const float *mean, const float *rstd, int N, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    shs__layernorm_dinp_row(dinp + (size_t)r * C, inp + (size_t)r * C, dout + (size_t)r * C, weight, mean[r], rstd[r],
                            C);
}

/* One thread per column: dweight, dbias summed over rows in increasing order. */
__global__ void layernorm_dweight_kernel(float *dweight, float *dbias, const float *dout, const float *inp,
                                         const float *mean, const float *rstd, int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float dw = 0.0f, db = 0.0f;
    for (int r = 0; r < N; r++) {
        float dy = dout[(size_t)r * C + c];
        float norm = shs__layernorm_norm(inp[(size_t)r * C + c], mean[r], rstd[r]);
        dw += dy * norm;
        db += dy;
    }
    dweight[c] += dw;
    dbias[c] += db;
}

extern "C" cudaError_t shs__cuda_layernorm_forward(cudaStream_t s, float *out, float *mean, float *rstd,
                                                   const float *inp, const float *weight, const float *bias, int N,
                                                   int C) {
    if (N <= 0) return cudaSuccess;
    layernorm_stats_kernel<<<(N + THREADS - 1) / THREADS, THREADS, 0, s>>>(mean, rstd, inp, N, C);
    layernorm_out_kernel<<<grid_for((size_t)N * C), THREADS, 0, s>>>(out, inp, mean, rstd, weight, bias, N, C);
    return launched();
}

extern "C" cudaError_t shs__cuda_layernorm_backward(cudaStream_t s, float *dinp, float *dweight, float *dbias,
                                                    const float *dout, const float *inp, const float *weight,
                                                    const float *mean, const float *rstd, int N, int C) {
    if (N > 0) layernorm_dinp_kernel<<<(N + THREADS - 1) / THREADS, THREADS, 0, s>>>(dinp, dout, inp, weight, mean, rstd, N, C);
    layernorm_dweight_kernel<<<(C + THREADS - 1) / THREADS, THREADS, 0, s>>>(dweight, dbias, dout, inp, mean, rstd, N, C);
    return launched();
}

/* ---- attention --------------------------------------------------------------
 * Row (b, h, t) of the (T,T) score matrix is index bht = (b*NH + h)*T + t. */

/* One thread per row: scores, max, exp, sum, normalize, zeros above the diagonal. */
__global__ void attention_scores_kernel(float *preatt, float *att, const float *qkv, int B, int T, int C, int NH) {
    int bht = blockIdx.x * blockDim.x + threadIdx.x;
    if (bht >= B * NH * T) return;
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = shs__attention_scale(hs);
    int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
    const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
    const float *kv0 = qkv + (size_t)b * T * C3 + h * hs;
    shs__attention_scores_row(preatt + (size_t)bht * T, att + (size_t)bht * T, q, kv0, t, T, hs, C3, C, scale);
}

/* One thread per (row, channel i): out_t[i] = sum_{t2<=t} att[t2] v_t2[i]. */
__global__ void attention_out_kernel(float *out, const float *att, const float *qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    GRID_STRIDE(e, (size_t)B * NH * T * hs) {
        size_t bht = e / (size_t)hs;
        int i = (int)(e % (size_t)hs);
        int b = (int)(bht / ((size_t)NH * T)), h = (int)(bht / T % NH), t = (int)(bht % T);
        size_t C3 = 3 * (size_t)C;
        const float *v0 = qkv + (size_t)b * T * C3 + 2 * (size_t)C + h * hs + i;
        out[((size_t)b * T + t) * C + h * hs + i] = shs__attention_value_sum(att + bht * T, v0, C3, t);
    }
}

/* Pass 1, one thread per row: datt = dout_t . v_t2; dpreatt = att (datt - att.datt). */
__global__ void attention_bwd_row_kernel(float *dpreatt, float *datt, const float *dout, const float *qkv,
                                         const float *att, int B, int T, int C, int NH) {
    int bht = blockIdx.x * blockDim.x + threadIdx.x;
    if (bht >= B * NH * T) return;
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
    const float *kv0 = qkv + (size_t)b * T * C3 + h * hs;
    const float *dy = dout + ((size_t)b * T + t) * C + h * hs;
    shs__attention_bwd_row(datt + (size_t)bht * T, dpreatt + (size_t)bht * T, att + (size_t)bht * T, dy, kv0, t, T,
                           hs, C3, C);
}

/* Pass 2, one thread per (row, channel i): dq, dk, dv of position t. */
__global__ void attention_bwd_qkv_kernel(float *dqkv, const float *dpreatt, const float *dout, const float *qkv,
                                         const float *att, int B, int T, int C, int NH) {
    int hs = C / NH;
    float scale = shs__attention_scale(hs);
    GRID_STRIDE(e, (size_t)B * NH * T * hs) {
        size_t bht = e / (size_t)hs;
        int i = (int)(e % (size_t)hs);
        int b = (int)(bht / ((size_t)NH * T)), h = (int)(bht / T % NH), t = (int)(bht % T);
        size_t bh = bht / T, C3 = 3 * (size_t)C, TT = (size_t)T * T;
        const float *kv0 = qkv + (size_t)b * T * C3 + h * hs;
        const float *dy0 = dout + (size_t)b * T * C + h * hs;
        const float *a = att + bh * TT, *dp = dpreatt + bh * TT;
        float *dq = dqkv + ((size_t)b * T + t) * C3 + h * hs;
        float *dk = dq + C, *dv = dq + 2 * (size_t)C;
        shs__attention_bwd_qkv(dq, dk, dv, dp, a, kv0, dy0, t, T, i, C3, C, scale);
    }
}

extern "C" cudaError_t shs__cuda_attention_forward(cudaStream_t s, float *out, float *preatt, float *att,
                                                   const float *qkv, int B, int T, int C, int NH) {
    int rows = B * NH * T;
    if (rows <= 0) return cudaSuccess;
    attention_scores_kernel<<<(rows + THREADS - 1) / THREADS, THREADS, 0, s>>>(preatt, att, qkv, B, T, C, NH);
    attention_out_kernel<<<grid_for((size_t)B * T * C), THREADS, 0, s>>>(out, att, qkv, B, T, C, NH);
    return launched();
}

extern "C" cudaError_t shs__cuda_attention_backward(cudaStream_t s, float *dqkv, float *dpreatt, float *datt,
                                                    const float *dout, const float *qkv, const float *att, int B,
                                                    int T, int C, int NH) {
    int rows = B * NH * T;
    if (rows <= 0) return cudaSuccess;
    attention_bwd_row_kernel<<<(rows + THREADS - 1) / THREADS, THREADS, 0, s>>>(dpreatt, datt, dout, qkv, att, B, T,
                                                                                C, NH);
    attention_bwd_qkv_kernel<<<grid_for((size_t)B * T * C), THREADS, 0, s>>>(dqkv, dpreatt, dout, qkv, att, B, T, C,
                                                                            NH);
    return launched();
}

/* ---- elementwise ------------------------------------------------------------ */

__global__ void gelu_forward_kernel(float *out, const float *inp, size_t n) {
    GRID_STRIDE(i, n) out[i] = shs__gelu(inp[i]);
}

__global__ void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t n) {
    GRID_STRIDE(i, n) dinp[i] += shs__gelu_grad(inp[i]) * dout[i];
}

__global__ void relu_forward_kernel(float *out, const float *inp, size_t n) {
    GRID_STRIDE(i, n) out[i] = shs__relu(inp[i]);
}

__global__ void relu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t n) {
    GRID_STRIDE(i, n) dinp[i] += shs__relu_grad(inp[i], dout[i]);
}

__global__ void residual_kernel(float *out, const float *a, const float *b, size_t n) {
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float *dst, const float *src, size_t n) {
    GRID_STRIDE(i, n) dst[i] += src[i];
}

__global__ void scale_kernel(float *x, float alpha, size_t n) {
    GRID_STRIDE(i, n) x[i] *= alpha;
}

#define ELEMENTWISE(launch_name, kernel, n, ...)                                                   \
    do {                                                                                           \
        if ((n) == 0) return cudaSuccess;                                                          \
        kernel<<<grid_for(n), THREADS, 0, s>>>(__VA_ARGS__);                                       \
        return launched();                                                                         \
    } while (0)

extern "C" cudaError_t shs__cuda_gelu_forward(cudaStream_t s, float *out, const float *inp, size_t n) {
    ELEMENTWISE(gelu_forward, gelu_forward_kernel, n, out, inp, n);
}
extern "C" cudaError_t shs__cuda_gelu_backward(cudaStream_t s, float *dinp, const float *inp, const float *dout,
                                               size_t n) {
    ELEMENTWISE(gelu_backward, gelu_backward_kernel, n, dinp, inp, dout, n);
}
extern "C" cudaError_t shs__cuda_relu_forward(cudaStream_t s, float *out, const float *inp, size_t n) {
    ELEMENTWISE(relu_forward, relu_forward_kernel, n, out, inp, n);
}
extern "C" cudaError_t shs__cuda_relu_backward(cudaStream_t s, float *dinp, const float *inp, const float *dout,
                                               size_t n) {
    ELEMENTWISE(relu_backward, relu_backward_kernel, n, dinp, inp, dout, n);
}
extern "C" cudaError_t shs__cuda_residual_forward(cudaStream_t s, float *out, const float *a, const float *b,
                                                  size_t n) {
    ELEMENTWISE(residual, residual_kernel, n, out, a, b, n);
}
extern "C" cudaError_t shs__cuda_accumulate(cudaStream_t s, float *dst, const float *src, size_t n) {
    ELEMENTWISE(accumulate, accumulate_kernel, n, dst, src, n);
}
extern "C" cudaError_t shs__cuda_scale(cudaStream_t s, float *x, float alpha, size_t n) {
    ELEMENTWISE(scale, scale_kernel, n, x, alpha, n);
}

/* ---- encoder ------------------------------------------------------------------
 * A token outside [0, V) is a caller bug: the CPU backend aborts; here the
 * row becomes NaN (a kernel cannot abort the process cleanly). */

__global__ void encoder_forward_kernel(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B,
                                       int T, int C) {
    GRID_STRIDE(i, (size_t)B * T * C) {
        size_t bt = i / (size_t)C;
        int c = (int)(i % (size_t)C);
        int32_t tok = tokens[bt];
        out[i] = tok < 0 ? NAN : wte[(size_t)tok * C + c] + wpe[(bt % (size_t)T) * C + c];
    }
}

__global__ void encoder_wpe_kernel(float *dwpe, const float *dout, int B, int T, int C) {
    GRID_STRIDE(i, (size_t)T * C) {
        size_t t = i / (size_t)C;
        int c = (int)(i % (size_t)C);
        dwpe[i] += shs__encoder_dwpe_sum(dout, B, T, C, t, c);
    }
}

__global__ void encoder_wte_kernel(float *dwte, const float *dout, const int32_t *pos, const int32_t *group_start,
                                   const int32_t *group_tok, int ngroups, int C) {
    GRID_STRIDE(e, (size_t)ngroups * C) {
        int g = (int)(e / (size_t)C), c = (int)(e % (size_t)C);
        dwte[(size_t)group_tok[g] * C + c] += shs__encoder_dwte_sum(dout, pos, group_start[g], group_start[g + 1], C, c);
    }
}

extern "C" cudaError_t shs__cuda_encoder_forward(cudaStream_t s, float *out, const int32_t *tokens, const float *wte,
                                                 const float *wpe, int B, int T, int C) {
    size_t n = (size_t)B * T * C;
    ELEMENTWISE(encoder_forward, encoder_forward_kernel, n, out, tokens, wte, wpe, B, T, C);
}
extern "C" cudaError_t shs__cuda_encoder_backward_wpe(cudaStream_t s, float *dwpe, const float *dout, int B, int T,
                                                      int C) {
    size_t n = (size_t)T * C;
    ELEMENTWISE(encoder_wpe, encoder_wpe_kernel, n, dwpe, dout, B, T, C);
}
extern "C" cudaError_t shs__cuda_encoder_backward_wte(cudaStream_t s, float *dwte, const float *dout,
                                                      const int32_t *pos, const int32_t *group_start,
                                                      const int32_t *group_tok, int ngroups, int C) {
    size_t n = (size_t)ngroups * C;
    ELEMENTWISE(encoder_wte, encoder_wte_kernel, n, dwte, dout, pos, group_start, group_tok, ngroups, C);
}

/* ---- softmax cross-entropy ---------------------------------------------------- */

/* One thread per row, the CPU's order; a target outside [0, V) gives a NaN loss. */
__global__ void softmax_xent_forward_kernel(float *losses, float *probs, const float *logits, const int32_t *targets,
                                            int BT, int V) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= BT) return;
    losses[r] = shs__softmax_xent_row(probs + (size_t)r * V, logits + (size_t)r * V, V, targets[r]);
}

__global__ void softmax_xent_backward_kernel(float *dlogits, const float *probs, const int32_t *targets, float dloss,
                                             int BT, int V) {
    GRID_STRIDE(i, (size_t)BT * V) {
        size_t r = i / (size_t)V;
        int v = (int)(i % (size_t)V);
        dlogits[i] = shs__softmax_xent_grad(probs[i], v == targets[r], dloss);
    }
}

extern "C" cudaError_t shs__cuda_softmax_xent_forward(cudaStream_t s, float *losses, float *probs,
                                                      const float *logits, const int32_t *targets, int BT, int V) {
    if (BT <= 0) return cudaSuccess;
    softmax_xent_forward_kernel<<<(BT + THREADS - 1) / THREADS, THREADS, 0, s>>>(losses, probs, logits, targets, BT, V);
    return launched();
}
extern "C" cudaError_t shs__cuda_softmax_xent_backward(cudaStream_t s, float *dlogits, const float *probs,
                                                       const int32_t *targets, float dloss, int BT, int V) {
    size_t n = (size_t)BT * V;
    ELEMENTWISE(softmax_xent_backward, softmax_xent_backward_kernel, n, dlogits, probs, targets, dloss, BT, V);
}

/* ---- reductions ---------------------------------------------------------------- */

/* device.h fixes the order: f64, index order, one rounding to f32 at the end.
 * A sequential chain of f64 roundings cannot be split, so one thread walks it
 * (the model calls it on B*T losses). */
__global__ void sum_kernel(float *out, const float *x, size_t n) { out[0] = shs__sum_f64(x, n); }

extern "C" cudaError_t shs__cuda_sum(cudaStream_t s, float *out, const float *x, size_t n) {
    sum_kernel<<<1, 1, 0, s>>>(out, x, n);
    return launched();
}

/* Exact norm accumulator (exact_norm.h): 20 base-2^32 digits (LSB 2^-298)
 * plus NaN and infinity counts. Each thread accumulates its grid-stride
 * elements into its own digits and normalizes them; a block sums its
 * threads' words by a fixed tree, writing one partial per block; one thread
 * then adds the partials to acc in block order and normalizes. The words are
 * int64 sums, so the result equals the CPU's shs_exact_norm_add() word for
 * word whatever the split (a normalized accumulator is unique for its value).
 * p = SHS_NORM_INF: word 0 is max |x| as f32 bits, the NaN word a flag; both
 * combine by max. Bounds: a thread sees at most n / (NORM_BLOCKS * THREADS)
 * elements, each adding < 2^32 to a digit (carried every 2^30 terms as on
 * the CPU); after normalizing, block and grid sums of 2^15 digits < 2^32
 * stay far below 2^63. */
#define NORM_DIGITS 20
#define NORM_WORDS (NORM_DIGITS + 2)
#define NAN_WORD NORM_DIGITS
#define INF_WORD (NORM_DIGITS + 1)
#define NORM_P_INF (-1)

extern "C" size_t shs__cuda_norm_scratch_words(void) { return (size_t)SHS_CUDA_NORM_BLOCKS * NORM_WORDS; }

__device__ static void norm_normalize(long long *acc) {
    long long carry = 0;
    for (int i = 0; i < NORM_DIGITS; i++) {
        long long v = acc[i] + carry;
        acc[i] = v & 0xffffffffLL;
        carry = v >> 32;
    }
    acc[NORM_DIGITS - 1] += carry * 4294967296LL;
}

/* acc += m * 2^k, m < 2^48, k >= 0: three digits, split by hand (no int128). */
__device__ static void norm_add_scaled(long long *acc, unsigned long long m, int k) {
    int i = k >> 5, sh = k & 31;
    unsigned long long lo = m << sh;                       /* low 64 bits of m * 2^sh */
    unsigned long long hi = sh ? m >> (64 - sh) : 0ull;   /* bits 64..79 */
    acc[i] += (long long)(lo & 0xffffffffull);
    acc[i + 1] += (long long)(lo >> 32);
    if (i + 2 < NORM_DIGITS) acc[i + 2] += (long long)hi;
}

__global__ void norm_partial_kernel(long long *partial, const float *x, size_t n, int p) {
    long long d[NORM_WORDS];
    for (int w = 0; w < NORM_WORDS; w++) d[w] = 0;
    size_t since_carry = 0;
    GRID_STRIDE(j, n) {
        uint32_t bits = __float_as_uint(x[j]);
        if (p == NORM_P_INF) {
            bits &= 0x7fffffffu;
            if (bits > 0x7f800000u) d[NAN_WORD] = 1;
            else if ((long long)bits > d[0]) d[0] = bits;
            continue;
        }
        uint32_t ex = (bits >> 23) & 0xff, frac = bits & 0x7fffff;
        if (ex == 0xff) {
            d[frac ? NAN_WORD : INF_WORD]++;
            continue;
        }
        if (ex == 0 && frac == 0) continue;
        unsigned long long m = ex ? (frac | 0x800000u) : frac;
        int e = (ex ? (int)ex : 1) - 150;
        if (p == 1) norm_add_scaled(d, m, e + 298);
        else norm_add_scaled(d, m * m, 2 * e + 298);
        if (++since_carry == (size_t)1 << 30) {
            norm_normalize(d);
            since_carry = 0;
        }
    }
    if (p != NORM_P_INF) norm_normalize(d);
    __shared__ long long sh[THREADS];
    for (int w = 0; w < NORM_WORDS; w++) {
        sh[threadIdx.x] = d[w];
        __syncthreads();
        for (int half = THREADS / 2; half > 0; half /= 2) {
            if ((int)threadIdx.x < half) {
                long long a = sh[threadIdx.x], b = sh[threadIdx.x + half];
                sh[threadIdx.x] = p == NORM_P_INF ? (a > b ? a : b) : a + b;
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) partial[(size_t)blockIdx.x * NORM_WORDS + w] = sh[0];
        __syncthreads();
    }
}

__global__ void norm_finish_kernel(long long *acc, const long long *partial, int nblocks, int p) {
    for (int b = 0; b < nblocks; b++)
        for (int w = 0; w < NORM_WORDS; w++) {
            long long v = partial[(size_t)b * NORM_WORDS + w];
            if (p == NORM_P_INF) {
                if (v > acc[w]) acc[w] = v;
            } else {
                acc[w] += v;
            }
        }
    if (p != NORM_P_INF) norm_normalize(acc);
}

extern "C" cudaError_t shs__cuda_norm_accumulate(cudaStream_t s, int64_t *acc, const float *x, size_t n, int p,
                                                 int64_t *scratch) {
    norm_partial_kernel<<<SHS_CUDA_NORM_BLOCKS, THREADS, 0, s>>>((long long *)scratch, x, n, p);
    norm_finish_kernel<<<1, 1, 0, s>>>((long long *)acc, (const long long *)scratch, SHS_CUDA_NORM_BLOCKS, p);
    return launched();
}

/* ---- cast (the conversions: kernel_math.h and core/half.h, shared with the CPU) ---- */

__global__ void cast_kernel(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n) {
    int to_16bit = dst_dtype == SHS_F16 || dst_dtype == SHS_BF16;
    GRID_STRIDE(i, n) shs__cast_one(dst, dst_dtype, src, src_dtype, i, to_16bit);
}

extern "C" cudaError_t shs__cuda_cast(cudaStream_t s, void *dst, shs_dtype_t dst_dtype, const void *src,
                                      shs_dtype_t src_dtype, size_t n) {
    if (n == 0) return cudaSuccess;
    if (dst_dtype == src_dtype) {
        if (dst == src) return cudaSuccess;
        return cudaMemcpyAsync(dst, src, n * (dst_dtype == SHS_F64 ? 8 : dst_dtype == SHS_F32 ? 4 : 2),
                               cudaMemcpyDeviceToDevice, s);
    }
    cast_kernel<<<grid_for(n), THREADS, 0, s>>>(dst, (int)dst_dtype, src, (int)src_dtype, n);
    return launched();
}

/* ---- optimizers ------------------------------------------------------------------ */

__global__ void adamw_kernel(float *param, const float *grad, float *m, float *v, size_t n, shs__adamw_coef_t k) {
    GRID_STRIDE(i, n) shs__adamw_one(param, grad, m, v, i, k);
}

__global__ void sgd_kernel(float *param, const float *grad, float *momentum_buf, size_t n, float lr, float momentum,
                           float weight_decay) {
    GRID_STRIDE(i, n) shs__sgd_one(param, grad, momentum_buf, i, lr, momentum, weight_decay);
}

extern "C" cudaError_t shs__cuda_adamw_update(cudaStream_t s, float *param, const float *grad, float *m, float *v,
                                              size_t n, shs__adamw_coef_t k) {
    ELEMENTWISE(adamw, adamw_kernel, n, param, grad, m, v, n, k);
}

extern "C" cudaError_t shs__cuda_sgd_update(cudaStream_t s, float *param, const float *grad, float *momentum_buf,
                                            size_t n, float lr, float momentum, float weight_decay) {
    ELEMENTWISE(sgd, sgd_kernel, n, param, grad, momentum_buf, n, lr, momentum, weight_decay);
}

/* ---- collectives' reduction (comm_reduce.c's rules) ---------------------------------
 * Traits per dtype: Acc the accumulator type, load (stored -> Acc), the
 * rounding after each sum/prod (f16/bf16 only), AVG's pre-multiply of every
 * source by the dtype's 1/N (floats, PreMul; comm.h: NCCL's FuncPreMulSum)
 * and the final store with AVG's divisor (integers: NCCL's SumPostDiv). One
 * thread per element: it reads the element from every source in order, then
 * writes every destination. */

enum { OP_SUM = 0, OP_PROD = 1, OP_MAX = 2, OP_MIN = 3, OP_AVG = 4 };

/* AVG's scalar, the host's value (comm_reduce.c, declared in comm_impl.h). */
extern "C" double shs__avg_scale(shs_dtype_t dtype, int nranks);

template <typename T, typename U, typename W> struct IntTraits {
    typedef T Stored;
    typedef T Acc;
    __device__ static Acc load(Stored v) { return v; }
    __device__ static Acc sum(Acc a, Acc b) { return (T)((U)a + (U)b); }
    __device__ static Acc prod(Acc a, Acc b) { return (T)((U)a * (U)b); }
    __device__ static Acc max(Acc a, Acc b) { return b > a ? b : a; }
    __device__ static Acc min(Acc a, Acc b) { return b < a ? b : a; }
    static const bool PreMul = false;
    __device__ static Acc premul(Acc a, Acc) { return a; }
    __device__ static Stored store(Acc a, int divisor) { return divisor == 1 ? a : (T)((W)a / (W)divisor); }
};

template <typename F> struct FloatTraits {
    typedef F Stored;
    typedef F Acc;
    __device__ static Acc load(Stored v) { return v; }
    __device__ static Acc sum(Acc a, Acc b) { return a + b; }
    __device__ static Acc prod(Acc a, Acc b) { return a * b; }
    __device__ static Acc max(Acc a, Acc b) { return SHS_MAX_FIRST_NAN(a, b); }
    __device__ static Acc min(Acc a, Acc b) { return SHS_MIN_FIRST_NAN(a, b); }
    static const bool PreMul = true;
    __device__ static Acc premul(Acc a, Acc k) { return a * k; }
    __device__ static Stored store(Acc a, int) { return a; }
};

/* f16 and bf16: combined in f32, rounded to the dtype after every op (Bits:
 * the dtype's conversions, core/half.h). */
struct F16Bits {
    __device__ static float to_f32(uint16_t v) { return shs__f16_to_f32(v); }
    __device__ static uint16_t from_f32(float f) { return shs__f32_to_f16(f); }
};
struct BF16Bits {
    __device__ static float to_f32(uint16_t v) { return shs__bf16_to_f32(v); }
    __device__ static uint16_t from_f32(float f) { return shs__f32_to_bf16(f); }
};

template <typename Bits> struct HalfTraits {
    typedef uint16_t Stored;
    typedef float Acc;
    __device__ static Acc load(Stored v) { return Bits::to_f32(v); }
    __device__ static Acc round(float f) { return Bits::to_f32(Bits::from_f32(f)); }
    __device__ static Acc sum(Acc a, Acc b) { return round(a + b); }
    __device__ static Acc prod(Acc a, Acc b) { return round(a * b); }
    __device__ static Acc max(Acc a, Acc b) { return SHS_MAX_FIRST_NAN(a, b); }
    __device__ static Acc min(Acc a, Acc b) { return SHS_MIN_FIRST_NAN(a, b); }
    static const bool PreMul = true;
    /* a * k of two dtype values is exact in f32 (comm_reduce.c): one rounding */
    __device__ static Acc premul(Acc a, Acc k) { return round(a * k); }
    __device__ static Stored store(Acc a, int) { return Bits::from_f32(a); }
};

template <typename Tr, int OP>
__global__ void reduce_kernel(void *const *dsts, int ndst, const void *const *srcs, int nsrc, size_t n,
                              typename Tr::Acc scale) {
    typedef typename Tr::Stored S;
    typedef typename Tr::Acc A;
    const bool pre = OP == OP_AVG && Tr::PreMul;
    GRID_STRIDE(i, n) {
        A acc = Tr::load(((const S *)srcs[0])[i]);
        if (pre) acc = Tr::premul(acc, scale);
        for (int k = 1; k < nsrc; k++) {
            A y = Tr::load(((const S *)srcs[k])[i]);
            if (pre) y = Tr::premul(y, scale);
            switch (OP) {
            case OP_PROD: acc = Tr::prod(acc, y); break;
            case OP_MAX: acc = Tr::max(acc, y); break;
            case OP_MIN: acc = Tr::min(acc, y); break;
            default: acc = Tr::sum(acc, y); break;
            }
        }
        S out = Tr::store(acc, OP == OP_AVG && !Tr::PreMul ? nsrc : 1);
        for (int d = 0; d < ndst; d++) ((S *)dsts[d])[i] = out;
    }
}

template <typename Tr>
static cudaError_t reduce_with(cudaStream_t s, void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                               size_t n, int op, double avg_scale) {
    unsigned g = grid_for(n);
    typename Tr::Acc k = (typename Tr::Acc)avg_scale; /* exact: a value of the dtype (0 for integers) */
    switch (op) {
    case OP_SUM: reduce_kernel<Tr, OP_SUM><<<g, THREADS, 0, s>>>(dsts, ndst, srcs, nsrc, n, k); break;
    case OP_PROD: reduce_kernel<Tr, OP_PROD><<<g, THREADS, 0, s>>>(dsts, ndst, srcs, nsrc, n, k); break;
    case OP_MAX: reduce_kernel<Tr, OP_MAX><<<g, THREADS, 0, s>>>(dsts, ndst, srcs, nsrc, n, k); break;
    case OP_MIN: reduce_kernel<Tr, OP_MIN><<<g, THREADS, 0, s>>>(dsts, ndst, srcs, nsrc, n, k); break;
    case OP_AVG: reduce_kernel<Tr, OP_AVG><<<g, THREADS, 0, s>>>(dsts, ndst, srcs, nsrc, n, k); break;
    default: return cudaErrorInvalidValue;
    }
    return launched();
}

extern "C" cudaError_t shs__cuda_reduce(cudaStream_t s, void *const *dsts, int ndst, const void *const *srcs,
                                        int nsrc, size_t n, shs_dtype_t dtype, int op) {
    if (n == 0 || nsrc < 1) return cudaSuccess;
    double k = shs__avg_scale(dtype, nsrc);
    switch (dtype) {
    case SHS_I8: return reduce_with<IntTraits<int8_t, uint8_t, int64_t> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_U8: return reduce_with<IntTraits<uint8_t, uint8_t, uint64_t> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_I32: return reduce_with<IntTraits<int32_t, uint32_t, int64_t> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_U32: return reduce_with<IntTraits<uint32_t, uint32_t, uint64_t> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_I64: return reduce_with<IntTraits<int64_t, uint64_t, int64_t> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_U64: return reduce_with<IntTraits<uint64_t, uint64_t, uint64_t> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_F16: return reduce_with<HalfTraits<F16Bits> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_BF16: return reduce_with<HalfTraits<BF16Bits> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_F32: return reduce_with<FloatTraits<float> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_F64: return reduce_with<FloatTraits<double> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    default: return cudaErrorInvalidValue;
    }
}
