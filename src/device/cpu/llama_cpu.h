/* llama_cpu.h - private: the CPU backend's Llama-family kernels
 * (llama_cpu.c) for its vtable (device_cpu.c): RMSNorm, RoPE, SwiGLU,
 * GeGLU, soft capping and grouped-query attention, eager and flash.
 * Contracts as the public functions in device.h (opt and rope with their
 * defaults filled in by device.c). */
#ifndef SHARDSIM_LLAMA_CPU_H
#define SHARDSIM_LLAMA_CPU_H

#include "shardsim/device.h"

void shs__cpu_rmsnorm_forward(shs_device_t *dev, float *out, float *rstd, const float *inp, const float *weight,
                              int N, int C, float eps);
void shs__cpu_rmsnorm_backward(shs_device_t *dev, float *dinp, float *dweight, const float *dout, const float *inp,
                               const float *weight, const float *rstd, int N, int C);
void shs__cpu_rope_forward(shs_device_t *dev, float *out, const float *inp, const int32_t *positions,
                           const shs_rope_t *rope, int B, int T, int NH, int HD);
void shs__cpu_rope_backward(shs_device_t *dev, float *dinp, const float *dout, const int32_t *positions,
                            const shs_rope_t *rope, int B, int T, int NH, int HD);
void shs__cpu_swiglu_forward(shs_device_t *dev, float *out, const float *gate, const float *up, size_t n);
void shs__cpu_swiglu_backward(shs_device_t *dev, float *dgate, float *dup, const float *dout, const float *gate,
                              const float *up, size_t n);
void shs__cpu_geglu_forward(shs_device_t *dev, float *out, const float *gate, const float *up, size_t n);
void shs__cpu_geglu_backward(shs_device_t *dev, float *dgate, float *dup, const float *dout, const float *gate,
                             const float *up, size_t n);
void shs__cpu_softcap_forward(shs_device_t *dev, float *out, const float *inp, float cap, size_t n);
void shs__cpu_softcap_backward(shs_device_t *dev, float *dinp, const float *dout, const float *out, float cap,
                               size_t n);
void shs__cpu_attention_gqa_forward(shs_device_t *dev, float *out, float *att, const float *q, const float *k,
                                    const float *v, const int32_t *doc_ids, const shs_attention_opts_t *opt, int B,
                                    int T, int NH, int NKV, int HD);
void shs__cpu_attention_gqa_backward(shs_device_t *dev, float *dq, float *dk, float *dv, float *datt,
                                     const float *dout, const float *q, const float *k, const float *v,
                                     const float *att, const shs_attention_opts_t *opt, int B, int T, int NH, int NKV,
                                     int HD);
void shs__cpu_attention_gqa_forward_flash(shs_device_t *dev, float *out, float *lse, const float *q, const float *k,
                                          const float *v, const int32_t *doc_ids, const shs_attention_opts_t *opt,
                                          int B, int T, int NH, int NKV, int HD);
void shs__cpu_attention_gqa_backward_flash(shs_device_t *dev, float *dq, float *dk, float *dv, const float *dout,
                                           const float *q, const float *k, const float *v, const float *out,
                                           const float *lse, const int32_t *doc_ids, const shs_attention_opts_t *opt,
                                           int B, int T, int NH, int NKV, int HD);

#endif
