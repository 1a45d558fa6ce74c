/* param_source.c - the forwarding parameter source decorators build on
 * (param_source.h). What it is not: any decorator's own logic. */
#include "shardsim/param_source.h"

static shs_status_t fwd_acquire_params(void *self, int unit, const float **params) {
    shs_param_decorator_t *d = self;
    if (d->before) d->before(d, SHS_PARAM_CALL_ACQUIRE_PARAMS, unit);
    return d->inner->acquire_params(d->inner->self, unit, params);
}

static shs_status_t fwd_release_params(void *self, int unit) {
    shs_param_decorator_t *d = self;
    if (d->before) d->before(d, SHS_PARAM_CALL_RELEASE_PARAMS, unit);
    return d->inner->release_params(d->inner->self, unit);
}

static shs_status_t fwd_acquire_grads(void *self, int unit, float **grads) {
    shs_param_decorator_t *d = self;
    if (d->before) d->before(d, SHS_PARAM_CALL_ACQUIRE_GRADS, unit);
    return d->inner->acquire_grads(d->inner->self, unit, grads);
}

static shs_status_t fwd_grads_ready(void *self, int unit) {
    shs_param_decorator_t *d = self;
    if (d->before) d->before(d, SHS_PARAM_CALL_GRADS_READY, unit);
    return d->inner->grads_ready(d->inner->self, unit);
}

shs_param_source_t *shs_param_decorator_init(shs_param_decorator_t *d, shs_param_source_t *inner,
                                             void (*before)(shs_param_decorator_t *d, shs_param_call_t call,
                                                            int unit)) {
    d->inner = inner;
    d->before = before;
    d->src = (shs_param_source_t){.self = d, .acquire_params = fwd_acquire_params,
                                  .release_params = fwd_release_params, .acquire_grads = fwd_acquire_grads,
                                  .grads_ready = fwd_grads_ready};
    return &d->src;
}
