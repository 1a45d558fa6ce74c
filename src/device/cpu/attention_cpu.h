/* attention_cpu.h - private: the CPU backend's dropout, eager-with-dropout
 * and FlashAttention kernels (attention_cpu.c) for its vtable
 * (device_cpu.c). Contracts as the public functions in device.h. */
#ifndef SHARDSIM_ATTENTION_CPU_H
#define SHARDSIM_ATTENTION_CPU_H

#include "shardsim/device.h"

void shs__cpu_dropout_forward(shs_device_t *dev, float *out, uint8_t *mask, const float *inp, size_t n,
                              const shs_dropout_t *d);
void shs__cpu_dropout_backward(shs_device_t *dev, float *dinp, const uint8_t *mask, const float *dout, size_t n,
                               float p);
void shs__cpu_attention_forward_dropout(shs_device_t *dev, float *out, float *preatt, float *att, float *att_drop,
                                        uint8_t *mask, const float *qkv, int B, int T, int C, int NH,
                                        const shs_dropout_t *d);
void shs__cpu_attention_backward_dropout(shs_device_t *dev, float *dqkv, float *dpreatt, float *datt,
                                         const float *dout, const float *qkv, const float *att, const float *att_drop,
                                         const uint8_t *mask, int B, int T, int C, int NH, float p);
void shs__cpu_attention_forward_flash(shs_device_t *dev, float *out, float *lse, const float *qkv, int B, int T, int C,
                                      int NH, const shs_dropout_t *d);
void shs__cpu_attention_backward_flash(shs_device_t *dev, float *dqkv, const float *dout, const float *qkv,
                                       const float *out, const float *lse, int B, int T, int C, int NH,
                                       const shs_dropout_t *d);

#endif
