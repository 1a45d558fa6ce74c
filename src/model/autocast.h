/* autocast.h - private to src/model/: the torch.autocast emulation the
 * decoders share (gpt.c, llama.c): activations stored in a 16-bit dtype
 * and read by f32 kernels through views, weights rounded as autocast reads
 * them, and the autocast matmul. What it is not: which tensor a model
 * stores in which dtype (gpt.h, llama.h say that).
 * Followed: PyTorch's amp op lists ("ops that can autocast to float16":
 * linear, matmul, bmm compute from A-cast inputs and write A). */
#ifndef SHARDSIM_MODEL_AUTOCAST_H
#define SHARDSIM_MODEL_AUTOCAST_H

#include <stddef.h>

#include "shardsim/device.h"
#include "shardsim/gpt.h"

typedef struct {
    shs_device_t *dev;
    shs_dtype_t A;      /* activation dtype: the autocast dtype (bf16, f16), else f32 */
    shs_dtype_t R;      /* the residual stream's: A when the parameters are A too (the
                         * whole model runs in A: FSDP MixedPrecision, Megatron's half
                         * model), else f32 (torch's promotion of f32 + A) */
    int round_weights;  /* autocast with parameters not already A: weights rounded at use */
    float *ww;          /* round_weights: the rounded weight and bias (shs__amp_ww_elems) */
} shs__amp_t;

/* A, R and round_weights of `ex` on dev; ww is the caller's to carve. */
void shs__amp_setup(shs__amp_t *amp, shs_device_t *dev, const shs_gpt_exec_t *ex);

/* An f32 view of n elements stored as dt: the tensor itself (f32), or
 * its conversion into `work` (n floats). */
const float *shs__amp_view(const shs__amp_t *amp, const void *stored, shs_dtype_t dt, float *work, size_t n);
/* Where a kernel writes a tensor stored as dt: the tensor (f32), or `work`. */
float *shs__amp_target(void *stored, shs_dtype_t dt, float *work);
/* After that kernel: round `work` (n floats) into the tensor's 16-bit
 * storage; nothing for f32. */
void shs__amp_commit(const shs__amp_t *amp, void *stored, shs_dtype_t dt, const float *work, size_t n);
/* A matmul's weight (n elements) or bias as autocast reads it: rounded to A
 * into ww + off when round_weights, else w itself. NULL stays NULL. */
const float *shs__amp_weights(const shs__amp_t *amp, const float *w, size_t n, size_t off);
/* out (BT,OC) = inp (BT,C) w^T + bias, the autocast linear: inputs as
 * stored (already A-valued), weight and bias as shs__amp_weights reads
 * them, f32 accumulation; out rounded to A in place when round_out (an
 * output that is not stored: a stored one is rounded by its commit). */
void shs__amp_matmul(const shs__amp_t *amp, float *out, const float *inp, const float *w, const float *bias, int BT,
                     int C, int OC, int round_out);
/* Its backward with the weight as the forward read it (gradients f32). */
void shs__amp_matmul_backward(const shs__amp_t *amp, float *dinp, float *dw, float *db, const float *dout,
                              const float *inp, const float *w, int BT, int C, int OC);

#endif
