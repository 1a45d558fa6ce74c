/* strategy_testing.h - private: faults a test plants in one rank's strategy
 * to prove that a checker or the communicator catches them. Included by
 * tests (and by the trainer's own planted bit flip, train.c); not part of
 * the public API in include/shardsim/strategy.h, and nothing here runs
 * unless a test asks for it.
 * What it is not: debugging options of the product.
 */
#ifndef SHARDSIM_STRATEGY_TESTING_H
#define SHARDSIM_STRATEGY_TESTING_H

#include <stddef.h>

#include "shardsim/strategy.h"

/* At the next finish_step, after reduction, the rank owning element `index`
 * of unit `unit` writes +inf there in its reduced gradient. Errors:
 * SHS_INVALID_ARG for a unit out of range or an index past the unit. */
shs_status_t shs_strategy_plant_grad_inf(shs_strategy_t *s, int unit, size_t index);

/* This rank leaves out its next all-gather of unit `unit`'s parameter shards
 * (ZeRO-3 and hybrid sharding; the unit's parameters are zeros for that use)
 * and goes on with its next call, as a rank whose program skipped the
 * gather. The other ranks' gather then meets that next call. Errors:
 * SHS_INVALID_ARG for a unit out of range. */
shs_status_t shs_strategy_skip_gather(shs_strategy_t *s, int unit);

/* Flip the least significant bit of element `index` of unit `unit`'s
 * parameters in this rank's copy, if it holds that element (any rank for
 * full-parameter stages, the owner only for ZeRO-3; otherwise nothing
 * happens). Errors: SHS_INVALID_ARG for a unit out of range or an index
 * past the unit. */
shs_status_t shs_strategy_flip_param_bit(shs_strategy_t *s, int unit, size_t index);

#endif
