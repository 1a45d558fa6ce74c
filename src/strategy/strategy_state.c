/* strategy_state.c - reading and writing a rank's parameters and optimizer
 * state outside the training step: snapshots and checkpoints (strategy.h).
 * What it is not: the checkpoint file format (checkpoint.c).
 */
#include <stdint.h>
#include <string.h>

#include "strategy/strategy_unit.h"

/* ---- reading and writing state ---------------------------------------------- */

shs_status_t shs_strategy_read_shard(shs_strategy_t *s, int unit, float *out) {
    unit_state_t *u = &s->units[unit];
    const float *src = owned_params(u);
    /* a whole unit's buffer is unpadded: elements past numel read as zero */
    size_t avail = u->whole ? u->shard.valid : u->shard.size;
    memset(out, 0, u->shard.size * sizeof(float));
    return shs_memcpy_d2h(params_dev(s, u), out, src, avail * sizeof(float));
}

int shs_strategy_state_per_param(const shs_strategy_t *s) { return shs_optim_state_per_param(&s->cfg.optim); }

shs_status_t shs_strategy_read_state(shs_strategy_t *s, int unit, float *params, float *state) {
    SHS_CHECK(shs_strategy_read_shard(s, unit, params));
    unit_state_t *u = &s->units[unit];
    int k = shs_strategy_state_per_param(s);
    size_t S = u->shard.size, stride = optim_stride(u);
    /* whole units keep state for all numel elements: take the shard's range */
    size_t from = u->whole ? u->shard.offset : 0;
    for (int j = 0; j < k; j++) {
        memset(state + (size_t)j * S, 0, S * sizeof(float));
        SHS_CHECK(shs_memcpy_d2h(s->opt_dev, state + (size_t)j * S, u->optim_state + (size_t)j * stride + from,
                                 u->shard.valid * sizeof(float)));
    }
    return SHS_OK;
}

shs_status_t shs_strategy_load_state(shs_strategy_t *s, int unit, const float *params, const float *state) {
    unit_state_t *u = &s->units[unit];
    int k = shs_strategy_state_per_param(s);
    if (u->full_params) {
        SHS_CHECK(shs_memcpy_h2d(s->dev, u->params, params, u->numel * sizeof(float)));
    } else {
        shs_device_t *pd = params_dev(s, u);
        SHS_CHECK(shs_memset(pd, u->params, 0, u->shard.size * sizeof(float)));
        SHS_CHECK(shs_memcpy_h2d(pd, u->params, params + u->shard.offset, u->shard.valid * sizeof(float)));
    }
    size_t stride = optim_stride(u);
    if (k) SHS_CHECK(shs_memset(s->opt_dev, u->optim_state, 0, optim_state_len(s, u) * sizeof(float)));
    for (int j = 0; j < k; j++) {
        float *dst = u->optim_state + (size_t)j * stride;
        const float *src = state + (size_t)j * u->numel;
        if (u->whole) SHS_CHECK(shs_memcpy_h2d(s->opt_dev, dst, src, u->numel * sizeof(float)));
        else SHS_CHECK(shs_memcpy_h2d(s->opt_dev, dst, src + u->shard.offset, u->shard.valid * sizeof(float)));
    }
    if (u->lp_replica) u->lp_stale = 1; /* every rank loads: re-gathered together at the next use */
    shs__strategy_refresh_lp_shard(s, u);
    return shs__strategy_download_master(s, u);
}

shs_status_t shs_strategy_read_full(shs_strategy_t *s, int unit, float *out) {
    if (!s->units[unit].full_params)
        return shs_set_error(SHS_UNSUPPORTED, "rank %d: %s keeps only a shard of unit %d", s->rank,
                             shs_strategy_name(s->cfg.kind), unit);
    return shs_memcpy_d2h(s->dev, out, s->units[unit].params, s->units[unit].numel * sizeof(float));
}

int shs_strategy_holds_full(const shs_strategy_t *s, int unit) { return s->units[unit].full_params; }
