/* kernels_layers.cu - the CUDA backend's per-row layer kernels: layernorm,
 * attention, the encoder and softmax cross-entropy, forward and backward.
 * Per-row statistics run one thread per row, because device.h's contract
 * fixes a sequential order. How every kernel keeps the contract, and which
 * ones agree with the CPU to a few ulps only: kernels.cu's header. Not the
 * matmul (kernels_matmul.cu) nor elementwise kernels (kernels.cu).
 *
 * Legend: B batch, T time, C channels, NH heads, hs = C/NH, V vocabulary,
 * BT = B*T rows, n element count.
 */
#include <math.h>
#include <stdint.h>

#include "device/cuda/kernels.h"
#include "device/cuda/kernels_launch.h"
#include "device/kernel_math.h"
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
