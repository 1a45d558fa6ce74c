/* optim.h - optimizers applied to a contiguous range of a flat parameter.
 *
 * What it is: the optimizer configuration, the number of f32 state values
 * each parameter element needs, and one step over (param, grad, state) of n
 * elements through the device kernels. A range may be a full flat parameter
 * (DDP) or one rank's shard (ZeRO): the update is elementwise, so a shard's
 * result is bit-identical to the same elements of a full update.
 * What it is not: gradient clipping or learning-rate schedules.
 */
#ifndef SHARDSIM_OPTIM_H
#define SHARDSIM_OPTIM_H

#include <stddef.h>

#include "shardsim/device.h"

/* The optimizers, one row each: enum suffix, name. */
#define SHS_OPTIM_MAP(X) X(ADAMW, "adamw") X(SGD, "sgd")

typedef enum {
#define SHS_OPTIM_ENUM(id, name) SHS_OPTIM_##id,
    SHS_OPTIM_MAP(SHS_OPTIM_ENUM)
#undef SHS_OPTIM_ENUM
    SHS_NUM_OPTIMS
} shs_optim_kind_t;

typedef struct {
    shs_optim_kind_t kind;
    float lr;
    float beta1, beta2, eps;   /* AdamW */
    float momentum;            /* SGD */
    float weight_decay;        /* AdamW: decoupled; SGD: L2 added to the gradient */
    int no_bias_correction;    /* AdamW: 1 drops the 1 - beta^t divisors of m and v (DeepSpeed's
                                * FusedAdam / DeepSpeedCPUAdam bias_correction false) */
} shs_optim_config_t;

/* PyTorch's defaults for the kind (AdamW: betas (0.9, 0.999), eps 1e-8,
 * weight_decay 0.01; SGD: momentum 0, weight_decay 0), with lr = 1e-3. */
shs_optim_config_t shs_optim_default(shs_optim_kind_t kind);
const char *shs_optim_name(shs_optim_kind_t kind); /* "adamw", "sgd"; "invalid" otherwise */
int shs_optim_parse(const char *name, shs_optim_kind_t *out); /* 0 ok, -1 unknown */

/* f32 state values per parameter element: AdamW 2 (exp_avg, exp_avg_sq),
 * SGD 1 with momentum, else 0. */
int shs_optim_state_per_param(const shs_optim_config_t *cfg);

/* One step (1-based `step`) on n elements. `state` holds
 * shs_optim_state_per_param() * n floats laid out as [m (n) | v (n)]; it must
 * start zeroed. Bias corrections are computed on the host in double and
 * passed as f32 (shs_adamw_hparams_t). */
void shs_optim_step(shs_device_t *dev, const shs_optim_config_t *cfg, long step, float *param,
                    const float *grad, float *state, size_t n);

#endif
