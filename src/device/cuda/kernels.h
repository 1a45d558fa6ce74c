/* kernels.h - private: the CUDA backend's kernel launchers (kernels.cu),
 * callable from C (device_cuda.c, comm_cuda_local.c, comm_nccl.c).
 *
 * Every launcher enqueues work on `stream` and returns at once; launch errors
 * come back as the cudaError_t of the launch, execution errors at the next
 * synchronization. Pointers are device pointers of the current GPU unless
 * stated. Contracts (shapes, "accumulates", summation order) are those of
 * include/shardsim/device.h; kernels.cu says how each one keeps them.
 * What it is not: memory management or accounting (device_cuda.c, device.c).
 */
#ifndef SHARDSIM_CUDA_KERNELS_H
#define SHARDSIM_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "device/kernel_math.h"
#include "shardsim/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch the norm kernel needs: this many int64 (device), per device. */
#define SHS_CUDA_NORM_BLOCKS 128
size_t shs__cuda_norm_scratch_words(void);

cudaError_t shs__cuda_matmul_forward(cudaStream_t s, float *out, const float *inp, const float *weight,
                                     const float *bias, int BT, int C, int OC);
cudaError_t shs__cuda_matmul_backward(cudaStream_t s, float *dinp, float *dweight, float *dbias, const float *dout,
                                      const float *inp, const float *weight, int BT, int C, int OC);
cudaError_t shs__cuda_layernorm_forward(cudaStream_t s, float *out, float *mean, float *rstd, const float *inp,
                                        const float *weight, const float *bias, int N, int C);
cudaError_t shs__cuda_layernorm_backward(cudaStream_t s, float *dinp, float *dweight, float *dbias, const float *dout,
                                         const float *inp, const float *weight, const float *mean, const float *rstd,
                                         int N, int C);
cudaError_t shs__cuda_attention_forward(cudaStream_t s, float *out, float *preatt, float *att, const float *qkv, int B,
                                        int T, int C, int NH);
cudaError_t shs__cuda_attention_backward(cudaStream_t s, float *dqkv, float *dpreatt, float *datt, const float *dout,
                                         const float *qkv, const float *att, int B, int T, int C, int NH);
cudaError_t shs__cuda_gelu_forward(cudaStream_t s, float *out, const float *inp, size_t n);
cudaError_t shs__cuda_gelu_backward(cudaStream_t s, float *dinp, const float *inp, const float *dout, size_t n);
cudaError_t shs__cuda_relu_forward(cudaStream_t s, float *out, const float *inp, size_t n);
cudaError_t shs__cuda_relu_backward(cudaStream_t s, float *dinp, const float *inp, const float *dout, size_t n);
cudaError_t shs__cuda_encoder_forward(cudaStream_t s, float *out, const int32_t *tokens, const float *wte,
                                      const float *wpe, int B, int T, int C);
/* dwpe part of the encoder backward: dwpe (T,C) += sum over b of dout[b,t]. */
cudaError_t shs__cuda_encoder_backward_wpe(cudaStream_t s, float *dwpe, const float *dout, int B, int T, int C);
/* dwte part: positions grouped by token. pos (BT) lists positions sorted by
 * (token, position); group_start (ngroups + 1) where each token's run starts;
 * group_tok (ngroups) its token. Each dwte row is summed in increasing
 * position, then added once. */
cudaError_t shs__cuda_encoder_backward_wte(cudaStream_t s, float *dwte, const float *dout, const int32_t *pos,
                                           const int32_t *group_start, const int32_t *group_tok, int ngroups, int C);
cudaError_t shs__cuda_residual_forward(cudaStream_t s, float *out, const float *a, const float *b, size_t n);
cudaError_t shs__cuda_accumulate(cudaStream_t s, float *dst, const float *src, size_t n);
cudaError_t shs__cuda_scale(cudaStream_t s, float *x, float alpha, size_t n);
cudaError_t shs__cuda_softmax_xent_forward(cudaStream_t s, float *losses, float *probs, const float *logits,
                                           const int32_t *targets, int BT, int V);
cudaError_t shs__cuda_softmax_xent_backward(cudaStream_t s, float *dlogits, const float *probs, const int32_t *targets,
                                            float dloss, int BT, int V);
cudaError_t shs__cuda_sum(cudaStream_t s, float *out, const float *x, size_t n);
/* scratch: shs__cuda_norm_scratch_words() int64 of device memory. */
cudaError_t shs__cuda_norm_accumulate(cudaStream_t s, int64_t *acc, const float *x, size_t n, int p, int64_t *scratch);
cudaError_t shs__cuda_cast(cudaStream_t s, void *dst, shs_dtype_t dst_dtype, const void *src, shs_dtype_t src_dtype,
                           size_t n);
/* k: shs__adamw_coef(hp) (device_impl.h), computed by the caller on the host
 * as the CPU backend does. */
cudaError_t shs__cuda_adamw_update(cudaStream_t s, float *param, const float *grad, float *m, float *v, size_t n,
                                   shs__adamw_coef_t k);
cudaError_t shs__cuda_sgd_update(cudaStream_t s, float *param, const float *grad, float *momentum_buf, size_t n,
                                 float lr, float momentum, float weight_decay);

/* The collectives' element-wise reduction (comm_reduce.c's shs__reduce on
 * the GPU): for i in [0, n): acc = srcs[0][i]; acc = op(acc, srcs[k][i]) for
 * k = 1..nsrc-1 in that order, with comm.h's rounding (integers wrap, f16 and
 * bf16 in f32 rounded after every op; AVG with N = nsrc: floats sum every
 * source times shs__avg_scale(dtype, nsrc) rounded to the dtype, integers
 * divide the sum by nsrc at the end); the result goes to every dsts[j][i].
 * srcs and dsts are DEVICE arrays of
 * device pointers (element 0 of each slice). Each element is read from every
 * source before any destination is written, by the same thread, so a
 * destination may equal a source at the same offset (in-place collectives).
 * op takes shs_redop_t's values (sum 0, prod 1, max 2, min 3, avg 4). */
cudaError_t shs__cuda_reduce(cudaStream_t s, void *const *dsts, int ndst, const void *const *srcs, int nsrc, size_t n,
                             shs_dtype_t dtype, int op);

#ifdef __cplusplus
}
#endif

#endif
