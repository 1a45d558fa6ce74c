/* strategy_unit.c - operations on one unit's buffers on this rank: rounding
 * to the param dtype, materializing the compute parameters (all-gathering
 * ZeRO-3's shards, widening ZeRO-1/2's param-dtype replica), the references
 * and holds on them, refreshing the replica and the offload master copy
 * (strategy_unit.h).
 * What it is not: when these happen (the parameter source in
 * strategy_source.c, the step in strategy_step.c) or the stage decisions
 * (stages.c, turned into the unit's form by strategy.c).
 */
#include <stddef.h>

#include "strategy/strategy_unit.h"

shs_status_t shs__strategy_round_to(shs_strategy_t *s, float *dst, const float *src, size_t n, shs_dtype_t t) {
    if (n == 0) return SHS_OK;
    void *tmp;
    /* a cast the GPU does in registers: no buffer of its own there */
    SHS_CHECK(shs_device_alloc_modeled(s->dev, &tmp, n * shs_dtype_size(t), 0, SHS_MEM_COMM, "low-precision copy"));
    shs_cast(s->dev, tmp, t, src, SHS_F32, n);
    shs_cast(s->dev, dst, SHS_F32, tmp, t, n);
    shs_device_free(s->dev, tmp);
    return SHS_OK;
}

/* ZeRO-1/2 with a 2-byte param dtype: every rank's replica in param_dtype
 * from the f32 master shards, each rounded once (an all-gather over the
 * shard group, as DeepSpeed's after its step). */
shs_status_t shs__strategy_refresh_replica(shs_strategy_t *s, unit_state_t *u) {
    if (!u->lp_replica) return SHS_OK;
    shs_dtype_t pd = s->cfg.param_dtype;
    size_t es = shs_dtype_size(pd);
    void *lp_shard;
    /* DeepSpeed's 16-bit partition is a view of the replica (an in-place all-gather): none on the GPU */
    SHS_CHECK(shs_device_alloc_modeled(s->dev, &lp_shard, (u->shard.size ? u->shard.size : 1) * es, 0, SHS_MEM_COMM,
                                       "low-precision shard"));
    shs_cast(s->dev, lp_shard, pd, u->params, SHS_F32, u->shard.size);
    shs_status_t st = shs_all_gather(lp_shard, u->lp_replica, u->shard.size, pd,
                                     tagged(s, s->shard_comm, SHS_TAG_PARAM_REGATHER, unit_index(s, u)));
    shs_device_free(s->dev, lp_shard);
    if (st == SHS_OK) u->lp_stale = 0;
    return st;
}

void shs__strategy_refresh_lp_shard(shs_strategy_t *s, unit_state_t *u) {
    if (u->lp_shard) shs_cast(s->dev, u->lp_shard, s->cfg.param_dtype, u->params, SHS_F32, u->shard.size);
}

size_t shs__strategy_gathered_gpu_bytes(const shs_strategy_t *s, const unit_state_t *u) {
    size_t len = u->full_params ? u->numel : u->full_len, es = shs_dtype_size(s->cfg.param_dtype);
    if (u->lp_replica) return 0; /* the GPU computes with the replica itself */
    if (u->full_params && s->cfg.framework == SHS_FRAMEWORK_DEEPSPEED) return 0; /* its persistent 16-bit copy */
    return (len ? len : 1) * es; /* the all-gather's output, or autocast's cast of the weights */
}

shs_status_t shs__strategy_reshard(shs_strategy_t *s, unit_state_t *u) {
    shs_dtype_t pd = s->cfg.param_dtype;
    size_t n = u->full_len / (size_t)s->reshard_n, es = shs_dtype_size(pd);
    SHS_CHECK(shs_device_alloc(s->dev, &u->post_fwd, (n ? n : 1) * es, SHS_MEM_COMM, "resharded params (after forward)"));
    /* the gathered values are param_dtype values held in f32: the cast back is exact */
    shs_cast(s->dev, u->post_fwd, pd, u->gathered + (size_t)(s->rank % s->reshard_n) * n, SHS_F32, n);
    return SHS_OK;
}

/* Backward's gather of a unit resharded after forward: the reshard group's
 * all-gather of its 1/R parts into u->gathered (f32, full_len), then the
 * parts are freed. */
static shs_status_t gather_resharded(shs_strategy_t *s, unit_state_t *u) {
    shs_dtype_t pd = s->cfg.param_dtype;
    size_t n = u->full_len / (size_t)s->reshard_n, es = shs_dtype_size(pd);
    shs_comm_t *comm = tagged(s, s->reshard_comm, SHS_TAG_BWD_ALL_GATHER, unit_index(s, u));
    shs_status_t st;
    if (pd == SHS_F32) {
        st = shs_all_gather(u->post_fwd, u->gathered, n, SHS_F32, comm);
    } else {
        void *lp_full = NULL; /* counted on the GPU as u->gathered */
        st = shs_device_alloc_modeled(s->dev, &lp_full, (u->full_len ? u->full_len : 1) * es, 0, SHS_MEM_COMM,
                                      "zero3 gathered params (low precision)");
        if (st == SHS_OK) st = shs_all_gather(u->post_fwd, lp_full, n, pd, comm);
        if (st == SHS_OK) shs_cast(s->dev, u->gathered, SHS_F32, lp_full, pd, u->full_len);
        shs_device_free(s->dev, lp_full);
    }
    shs_device_free(s->dev, u->post_fwd);
    u->post_fwd = NULL;
    return st;
}

/* The unit's full parameters in compute precision into u->gathered (f32,
 * full_len): ZeRO-3 all-gathers its shards in param_dtype; ZeRO-1/2 widen
 * their param_dtype replica; full holders round their copy. On the GPU the
 * gathered unit is the param-dtype buffer (shs__strategy_gathered_gpu_bytes),
 * so the f32 view is counted at that size and the all-gather's own output
 * at none. */
static shs_status_t materialize_params(shs_strategy_t *s, unit_state_t *u) {
    shs_dtype_t pd = s->cfg.param_dtype;
    size_t len = u->full_params ? u->numel : u->full_len;
    SHS_CHECK(shs_device_alloc_modeled(s->dev, (void **)&u->gathered, (len ? len : 1) * sizeof(float),
                                       shs__strategy_gathered_gpu_bytes(s, u), SHS_MEM_COMM,
                                       low_precision(s) ? "compute params (f32 view)" : "zero3 gathered params"));
    if (u->lp_replica) {
        if (u->lp_stale) SHS_CHECK(shs__strategy_refresh_replica(s, u));
        shs_cast(s->dev, u->gathered, SHS_F32, u->lp_replica, pd, u->full_len);
        return SHS_OK;
    }
    if (u->full_params) return shs__strategy_round_to(s, u->gathered, u->params, u->numel, pd);
    if (u->post_fwd) return gather_resharded(s, u);
    if (u->skip_gather) { /* a planted fault (strategy_testing.h) */
        u->skip_gather = 0;
        return shs_memset(s->dev, u->gathered, 0, len * sizeof(float));
    }
    shs_comm_t *comm = tagged(s, s->shard_comm,
                              s->phase == SHS_PHASE_BACKWARD ? SHS_TAG_BWD_ALL_GATHER : SHS_TAG_FWD_ALL_GATHER,
                              unit_index(s, u));
    const float *shard = u->params;
    float *staged = NULL;
    if (u->params_on_host) { /* offloaded shard: copy it in first */
        SHS_CHECK(shs_device_alloc(s->dev, (void **)&staged, (u->shard.size ? u->shard.size : 1) * sizeof(float),
                                   SHS_MEM_COMM, "parameter shard from host"));
        shs_status_t st = shs_memcpy_h2d(s->dev, staged, u->params, u->shard.size * sizeof(float));
        if (st != SHS_OK) {
            shs_device_free(s->dev, staged);
            return st;
        }
        s->h2d_bytes += u->shard.size * sizeof(float);
        shard = staged;
    }
    if (pd == SHS_F32) {
        shs_status_t st = shs_all_gather(shard, u->gathered, u->shard.size, SHS_F32, comm);
        shs_device_free(s->dev, staged);
        return st;
    }
    size_t es = shs_dtype_size(pd);
    void *lp_shard = u->lp_shard, *lp_full = NULL; /* the kept param-dtype shard, or one cast now (offloaded) */
    shs_status_t st = SHS_OK;
    if (!u->lp_shard)
        st = shs_device_alloc(s->dev, &lp_shard, (u->shard.size ? u->shard.size : 1) * es, SHS_MEM_COMM,
                              "low-precision shard");
    if (st == SHS_OK) /* counted on the GPU as u->gathered */
        st = shs_device_alloc_modeled(s->dev, &lp_full, (u->full_len ? u->full_len : 1) * es, 0, SHS_MEM_COMM,
                                      "zero3 gathered params (low precision)");
    if (st == SHS_OK) {
        if (!u->lp_shard) shs_cast(s->dev, lp_shard, pd, shard, SHS_F32, u->shard.size);
        st = shs_all_gather(lp_shard, lp_full, u->shard.size, pd, comm);
    }
    if (st == SHS_OK) shs_cast(s->dev, u->gathered, SHS_F32, lp_full, pd, u->full_len);
    if (!u->lp_shard) shs_device_free(s->dev, lp_shard);
    shs_device_free(s->dev, lp_full);
    shs_device_free(s->dev, staged);
    return st;
}

void shs__strategy_drop_gathered(shs_strategy_t *s, unit_state_t *u) {
    shs_device_free(s->dev, u->gathered);
    u->gathered = NULL;
    u->gather_refs = 0;
}

shs_status_t shs__strategy_take_gathered(shs_strategy_t *s, unit_state_t *u) {
    if (u->gather_refs == 0) {
        shs_status_t st = materialize_params(s, u);
        if (st != SHS_OK) {
            shs__strategy_drop_gathered(s, u);
            return st;
        }
    }
    u->gather_refs++;
    return SHS_OK;
}

void shs__strategy_drop_held(shs_strategy_t *s) {
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        if (u->held != UNIT_NOT_HELD && u->gather_refs == 1) shs__strategy_drop_gathered(s, u);
        else if (u->held != UNIT_NOT_HELD) u->gather_refs--;
        u->held = UNIT_NOT_HELD;
        shs_device_free(s->dev, u->gpu_cache); /* a forward whose backward did not come */
        u->gpu_cache = NULL;
        shs_device_free(s->dev, u->post_fwd);
        u->post_fwd = NULL;
    }
    s->held_prefetches = 0;
}


shs_status_t shs__strategy_download_master(shs_strategy_t *s, unit_state_t *u) {
    if (!u->master) return SHS_OK;
    float *param;
    void *grad;
    size_t n;
    device_range(s, u, &param, &grad, &n);
    return shs_memcpy_d2h(s->dev, u->master, param, n * sizeof(float));
}
