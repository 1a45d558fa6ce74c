/* plain_source.h - a test parameter source that holds every unit of a layout
 * whole in plain device buffers (no strategy), and records the model's
 * calls: outstanding acquires, grads_ready per unit and their order.
 * What it is not: a strategy; nothing is sharded, reduced or updated.
 */
#ifndef SHARDSIM_TESTS_PLAIN_SOURCE_H
#define SHARDSIM_TESTS_PLAIN_SOURCE_H

#include <stdint.h>

#include "shardsim/device.h"
#include "shardsim/layout.h"
#include "shardsim/param_source.h"

typedef struct {
    shs_param_source_t src;   /* give this to the model */
    shs_device_t *dev;
    const shs_layout_t *lo;
    float **params, **grads;  /* per unit, device */
    int *ready;               /* grads_ready calls per unit since the last plain_source_zero_grads */
    int *ready_order;         /* the units in grads_ready order */
    int num_ready;
    int acquired;             /* outstanding parameter acquires */
    int grads_after_ready;    /* acquire_grads of a unit already ready (a protocol fault) */
} plain_source_t;

/* Parameters from the layout's init with `seed`, each element plus
 * `perturb` * sin(0.7 i + unit) (so norm weights are not all 1 and biases
 * not 0); gradients zero. */
void plain_source_init(plain_source_t *s, shs_device_t *dev, const shs_layout_t *lo, uint64_t seed, float perturb);
void plain_source_zero_grads(plain_source_t *s);
void plain_source_free(plain_source_t *s);

#endif
