/* param_source.h - where a model's forward and backward passes get each wrap
 * unit's parameters and gradient buffers.
 *
 * What it is: the contract between a model (model.h) and a strategy
 * (strategy.h). The strategy implements it (DDP and the ZeRO stages differ
 * only here); the model never allocates or frees parameters itself. All
 * pointers are device pointers to the unit's full flat buffer (unit numel
 * f32 elements, plus possibly padding), laid out as layout.h says.
 * Decorators (shs_param_decorator_t) stand in front of a source to
 * observe or remap its calls (trace markers, memory timelines, grouped
 * wrap units); a front end attaches them only when asked.
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
    /* Full f32 gradient buffer of `unit` to accumulate this micro-batch's
     * gradient into, valid until grads_ready; a second acquire before it
     * gives the same buffer. What it holds on entry is the source's: the
     * gradient accumulated so far in the step (zeros at its start), or zeros
     * when the source adds each micro-batch's gradient itself (strategy.h,
     * grad_accum_dtype). */
    shs_status_t (*acquire_grads)(void *self, int unit, float **grads);
    /* The unit's backward is complete for this micro-batch: no more
     * accumulation into it until the next backward. */
    shs_status_t (*grads_ready)(void *self, int unit);
};

/* The four calls of a source, as a decorator's hook sees them. */
typedef enum {
    SHS_PARAM_CALL_ACQUIRE_PARAMS,
    SHS_PARAM_CALL_RELEASE_PARAMS,
    SHS_PARAM_CALL_ACQUIRE_GRADS,
    SHS_PARAM_CALL_GRADS_READY
} shs_param_call_t;

/* A source in front of `inner` that forwards every call to it unchanged,
 * calling `before` (optional) first. A decorator embeds one as its FIRST
 * member (src.self points at it, so at the decorator), sets `before` for
 * what it observes and replaces the slots of `src` it implements itself;
 * the model is given &src. */
typedef struct shs_param_decorator shs_param_decorator_t;
struct shs_param_decorator {
    shs_param_source_t src;      /* give this to the model */
    shs_param_source_t *inner;   /* the source it forwards to */
    void (*before)(shs_param_decorator_t *d, shs_param_call_t call, int unit); /* NULL: none */
};

/* Make `d` forward every call to `inner` (both outlive its use), with the
 * optional hook. Returns &d->src. */
shs_param_source_t *shs_param_decorator_init(shs_param_decorator_t *d, shs_param_source_t *inner,
                                             void (*before)(shs_param_decorator_t *d, shs_param_call_t call,
                                                            int unit));

#endif
