/* strategy_testing.c - the faults of strategy_testing.h: setting them up.
 * Where they strike: a planted inf in strategy_step.c (plant_faults), a
 * skipped gather in strategy_unit.c (materialize_params); a bit flip here,
 * at once.
 * What it is not: code the product runs unless a test plants a fault.
 */
#include "strategy/strategy_testing.h"

#include <stdint.h>

#include "strategy/strategy_unit.h"

shs_status_t shs_strategy_plant_grad_inf(shs_strategy_t *s, int unit, size_t index) {
    if (unit < 0 || unit >= s->layout->num_units || index >= s->units[unit].numel)
        return shs_set_error(SHS_INVALID_ARG, "plant inf: no element %zu in unit %d", index, unit);
    s->units[unit].plant_inf = index + 1;
    return SHS_OK;
}

shs_status_t shs_strategy_skip_gather(shs_strategy_t *s, int unit) {
    if (unit < 0 || unit >= s->layout->num_units)
        return shs_set_error(SHS_INVALID_ARG, "skip gather: no unit %d (the layout has %d)", unit,
                             s->layout->num_units);
    s->units[unit].skip_gather = 1;
    return SHS_OK;
}

shs_status_t shs_strategy_flip_param_bit(shs_strategy_t *s, int unit, size_t index) {
    if (unit < 0 || unit >= s->layout->num_units || index >= s->units[unit].numel)
        return shs_set_error(SHS_INVALID_ARG, "bit flip: no element %zu in unit %d", index, unit);
    unit_state_t *u = &s->units[unit];
    float *p;
    if (u->full_params) p = u->params + index;
    else if (index >= u->shard.offset && index < u->shard.offset + u->shard.size) p = u->params + (index - u->shard.offset);
    else return SHS_OK;
    uint32_t bits;
    shs_device_t *d = params_dev(s, u);
    SHS_CHECK(shs_memcpy_d2h(d, &bits, p, sizeof bits));
    bits ^= 1u;
    SHS_CHECK(shs_memcpy_h2d(d, p, &bits, sizeof bits));
    shs__strategy_refresh_lp_shard(s, u); /* and in the param-dtype shard cast from them */
    return shs__strategy_download_master(s, u); /* the fault is in the parameters the optimizer also updates */
}
