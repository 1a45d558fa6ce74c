/* loss_gpu_memory.h - private: what the modelled GPU run holds for a
 * decoder's loss (device.h's GPU ledger), shared by gpt.c and llama.c.
 * What it is not: the loss itself (the softmax cross-entropy kernels).
 */
#ifndef SHARDSIM_LOSS_GPU_MEMORY_H
#define SHARDSIM_LOSS_GPU_MEMORY_H

#include <stddef.h>

#include "shardsim/gpt.h"

/* Bytes the GPU run holds at the peak of its loss over BT rows of V
 * logits, the logits in dtype A (the LM head's output dtype: autocast's A,
 * else f32):
 *   SHS_LOSS_TORCH  torch.nn.functional.cross_entropy on logits upcast to
 *                   f32 (torch.autocast runs cross_entropy / log_softmax in
 *                   f32; torchtitan and Hugging Face call .float() first):
 *                   forward holds the A logits, their f32 copy and the f32
 *                   log-softmax it saves (A + 8 bytes per logit); the
 *                   backward of log_softmax holds that saved output, its
 *                   gradient and the gradient of the logits, all f32 (12
 *                   bytes): the larger of the two;
 *   SHS_LOSS_FUSED  a fused cross-entropy kernel on the A logits
 *                   (flash-attn's xentropy, llm-foundry's default
 *                   fused_crossentropy): the A logits it saves and their A
 *                   gradient (2 A bytes per logit) and an f32 log-sum-exp
 *                   per row.
 * Rows of f32 losses are the caller's. */
size_t shs__loss_gpu_bytes(size_t BT, size_t V, size_t a, shs_loss_kernel_t kernel);

#endif
