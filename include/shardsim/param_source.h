/* param_source.h - where a model's forward and backward passes get each wrap
 * unit's parameters and gradient buffers.
 *
 * What it is: the contract between a model (model.h) and a strategy
 * (strategy.h). The strategy implements it (DDP and the ZeRO stages differ
 * only here); the model never allocates or frees parameters itself. All
 * pointers are device pointers to the unit's full flat buffer (unit numel
 * f32 elements, plus possibly padding), laid out as layout.h says.
 * What it is not: a memory allocator or a communicator.
 */
#ifndef SHARDSIM_PARAM_SOURCE_H
#define SHARDSIM_PARAM_SOURCE_H

#include "shardsim/status.h"

typedef struct shs_param_source shs_param_source_t;
struct shs_param_source {
    void *self;
    /* Full parameters of `unit`, resident until the matching release.
     * Acquires nest: a unit acquired twice needs two releases. */
    shs_status_t (*acquire_params)(void *self, int unit, const float **params);
    shs_status_t (*release_params)(void *self, int unit);
    /* Full gradient buffer of `unit` to accumulate into (zeroed at the start
     * of each step, kept across the step's micro-batches), valid until
     * grads_ready. */
    shs_status_t (*acquire_grads)(void *self, int unit, float **grads);
    /* The unit's backward is complete for this micro-batch: no more
     * accumulation into it until the next backward. */
    shs_status_t (*grads_ready)(void *self, int unit);
};

#endif
