/* strategy_impl.h - private: the state behind strategy.h's opaque handle,
 * shared by strategy.c (creation, the parameter source, gradient
 * reduction), strategy_step.c (clipping, loss scaling, offload, the
 * optimizer step) and strategy_state.c (reading and writing state).
 * What it is not: an interface for anything outside the strategy.
 */
#ifndef SHARDSIM_STRATEGY_IMPL_H
#define SHARDSIM_STRATEGY_IMPL_H

#include <stdint.h>

#include "shardsim/shard.h"
#include "shardsim/strategy.h"

/* One wrap unit's buffers on this rank. */
typedef struct {
    size_t numel;          /* real elements */
    int whole;             /* held whole and all-reduced: DDP, or a replicated unit */
    shs_shard_t shard;     /* this rank's range of the padded flat buffer */
    size_t full_len;       /* elements in the full flat buffer: numel (whole) or N*S (sharded) */
    float *params;         /* whole, and Z1/Z2 in f32: full (full_len); Z3, and Z1/Z2 with a 2-byte
                            * param dtype: the f32 shard (S), the master weights */
    void *lp_replica;      /* Z1/Z2 with a 2-byte param dtype: the full parameters in param_dtype
                            * (full_len, PARAMS), every rank's copy, refreshed by an all-gather after
                            * each optimizer step (DeepSpeed ZeRO-1/2's replicated 16-bit parameters) */
    int lp_stale;          /* lp_replica must be re-gathered before its next use (after create/load) */
    float *gathered;       /* Z3 or low precision: f32 compute params while acquired (COMM) */
    int gather_refs;       /* outstanding acquires of `gathered` (a held ref included) */
    int held;              /* gathered ahead (prefetch) or kept after forward: one ref held for the next acquire */
    size_t plant_inf;      /* plant_grad_inf: element + 1 to poison at finish_step, 0 none */
    int skip_gather;       /* skip_gather: leave out the next all-gather of the shards (fault injection) */
    float *grad_full;      /* whole/Z1: view into grad_block; Z2/Z3: transient (COMM) */
    float *grad_shard;     /* Z2/Z3: reduced gradient shard (S) */
    size_t grad_offset;    /* whole/Z1: offset of this unit in grad_block */
    float *optim_state;    /* state_per_param * (whole: numel, sharded: S); on the host when offloading */
    float *host_grad;      /* offload: the reduced gradient range the optimizer reads (host, GRADS) */
    float *master;         /* offload optimizer: f32 master copy of the updated range (host, PARAMS);
                            * offload params: NULL (the parameter shard itself lives on the host) */
} unit_state_t;

struct shs_strategy {
    shs_strategy_config_t cfg;
    const shs_layout_t *layout;
    shs_device_t *dev;
    shs_device_t *host;    /* offload: host memory (its own accounting) and the CPU optimizer */
    shs_device_t *opt_dev; /* where the optimizer, clipping and overflow checks run: host or dev */
    uint64_t h2d_bytes, d2h_bytes; /* offload traffic */
    shs_comm_t *comm;      /* the world: DDP all-reduces, norms, overflow flags */
    int rank, nranks;
    /* sharding: over the world, or for hybrid sharding over this rank's
     * group of shard_group_size consecutive ranks, replicated across groups */
    shs_comm_t *shard_comm, *replica_comm; /* replica_comm: hybrid with more than one replica, else NULL */
    int shard_n, shard_rank, replica;
    int sync;              /* reduce in grads_ready (0: no_sync micro-batch) */
    float grad_norm;       /* last step's total norm, -1 without clipping */
    int scaling;           /* dynamic loss scaling on (param dtype f16) */
    shs_loss_scale_state_t scaler;
    int skipped;           /* the last step was skipped for overflow */
    shs_phase_t phase;
    /* what the tags of this rank's calls carry (comm.h CALL TAGS): the step
     * (shs_strategy_set_step; finish_step's argument), the micro-batch (its
     * index in the step: forward phases entered since begin_step, less one)
     * and, for the DDP bucket's all-reduce, the unit that joined it last */
    long step;
    int micro, forwards;
    int bucket_unit;
    /* execution order, per phase: units in order of first acquire during this
     * pass (order) and during the last complete one (prev); FSDP records it
     * the same way to drive prefetching */
    int *order[2], *prev[2];
    int order_len[2], prev_len[2];
    int held_prefetches;   /* units gathered ahead and not yet used */
    unit_state_t *units;
    float *grad_block;     /* whole and Z1 units' gradients, contiguous (GRADS) */
    size_t grad_block_len;
    int64_t *norm_acc;     /* SHS_NORM_ACC_WORDS (OTHER), with clipping */
    /* bucket: the pending ready range [bucket_lo, bucket_hi) of grad_block */
    size_t bucket_lo, bucket_hi;
    shs_param_source_t source;
};

static inline int low_precision(const shs_strategy_t *s) { return s->cfg.param_dtype != SHS_F32; }
/* ZeRO-3 and HYBRID_SHARD: parameters live as shards between uses. */
static inline int stage_is_param_sharded(const shs_strategy_t *s) {
    return s->cfg.kind == SHS_ZERO3 || s->cfg.kind == SHS_HYBRID_SHARD;
}
static inline int stage_shards_grads(const shs_strategy_t *s) { return s->cfg.kind != SHS_DDP && s->cfg.kind != SHS_ZERO1; }
/* Stages that keep full parameters but update only a shard, re-gathering
 * after the optimizer step. */
static inline int stage_regathers(const shs_strategy_t *s) {
    return s->cfg.kind == SHS_ZERO1 || s->cfg.kind == SHS_ZERO2 || s->cfg.kind == SHS_HYBRID_SHARD_ZERO2;
}
/* ZeRO-1/2 with a 2-byte param dtype: f32 master shards plus a replica in
 * param_dtype (u->lp_replica), as DeepSpeed keeps them; in f32 the
 * parameters are their own master and stay full. */
static inline int stage_has_lp_replicas(const shs_strategy_t *s) { return stage_regathers(s) && low_precision(s); }
/* Whether the f32 parameters are kept as shards (and the optimizer's
 * master weights are those shards). */
static inline int stage_shards_params(const shs_strategy_t *s) {
    return stage_is_param_sharded(s) || stage_has_lp_replicas(s);
}
/* Whether the unit's parameters are held in full on this rank. */
static inline int full_params(const shs_strategy_t *s, const unit_state_t *u) { return u->whole || !stage_shards_params(s); }
/* Whether the unit's gradient lives in grad_block (rather than transiently). */
static inline int in_grad_block(const shs_strategy_t *s, const unit_state_t *u) { return u->whole || !stage_shards_grads(s); }

/* This rank's shard of a unit's parameters, in whichever buffer holds it. */
static inline float *owned_params(const shs_strategy_t *s, const unit_state_t *u) {
    return full_params(s, u) ? u->params + u->shard.offset : u->params;
}

/* The elements the optimizer updates on this rank: parameters, their
 * reduced gradient, and the count (padding is never updated, so it stays
 * exactly 0 whatever the optimizer would make of 0/0, e.g. AdamW eps = 0). */
static inline void device_range(const shs_strategy_t *s, const unit_state_t *u, float **param, float **grad, size_t *n) {
    if (u->whole) {
        *param = u->params; *grad = u->grad_full; *n = u->numel;
    } else if (s->cfg.kind == SHS_ZERO1) {
        *param = owned_params(s, u); *grad = u->grad_full + u->shard.offset; *n = u->shard.valid;
    } else {
        *param = owned_params(s, u); *grad = u->grad_shard; *n = u->shard.valid;
    }
}

static inline int unit_index(const shs_strategy_t *s, const unit_state_t *u) { return (int)(u - s->units); }

/* `c` with the tag of this rank's next call set: `kind` for `unit` (-1:
 * none) at the current micro-batch and step. Every call the strategy makes
 * goes through it, so a rank that skips one is caught at its next call. */
static inline shs_comm_t *tagged(const shs_strategy_t *s, shs_comm_t *c, shs_tag_kind_t kind, int unit) {
    shs_comm_set_tag(c, shs_comm_tag_pack(kind, unit, s->micro, s->step));
    return c;
}

/* Whether the unit's parameter shard itself lives on the host (offload params). */
static inline int params_on_host(const shs_strategy_t *s, const unit_state_t *u) {
    return s->cfg.offload == SHS_OFFLOAD_PARAMS && !full_params(s, u);
}
static inline shs_device_t *params_dev(const shs_strategy_t *s, const unit_state_t *u) {
    return params_on_host(s, u) ? s->host : s->dev;
}

/* The optimizer's view of the range (on opt_dev): the device range, or with
 * offloading the host copies of the gradient and of the parameters. */
static inline void update_range(const shs_strategy_t *s, const unit_state_t *u, float **param, float **grad, size_t *n) {
    device_range(s, u, param, grad, n);
    if (!s->host) return;
    *grad = u->host_grad;
    if (u->master) *param = u->master;
}


/* Elements the unit's optimizer state covers per state array. */
static inline size_t optim_len(const unit_state_t *u) { return u->whole ? u->numel : u->shard.size; }
/* The optimizer steps on update_range's n elements with state [m (n) | v (n)]:
 * the distance between state arrays (numel whole, the valid part of a shard). */
static inline size_t optim_stride(const unit_state_t *u) { return u->whole ? u->numel : u->shard.valid; }

static inline size_t optim_state_len(const shs_strategy_t *s, const unit_state_t *u) {
    return (size_t)shs_optim_state_per_param(&s->cfg.optim) * optim_len(u);
}


/* The master copy of the updated range from the device parameters (offload
 * optimizer; no-op otherwise). strategy_state.c. */
shs_status_t shs__strategy_download_master(shs_strategy_t *s, unit_state_t *u);
/* Re-gather the unit's param-dtype replica from the f32 master shards
 * (ZeRO-1/2 with a 2-byte param dtype; no-op otherwise); a collective over
 * the shard group. strategy.c. */
shs_status_t shs__strategy_refresh_replica(shs_strategy_t *s, unit_state_t *u);
/* All-reduce the pending DDP/replicated-unit bucket. strategy.c. */
shs_status_t shs__strategy_flush_bucket(shs_strategy_t *s);
/* Free whatever prefetch or reshard_after_forward=false still holds.
 * strategy.c. */
void shs__strategy_drop_held(shs_strategy_t *s);

#endif
