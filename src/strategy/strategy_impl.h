/* strategy_impl.h - private: the state behind strategy.h's opaque handle
 * and the inline views of it every file of src/strategy/ shares: a unit's
 * form and buffers (unit_state_t), the strategy (struct shs_strategy), and
 * the ranges the optimizer updates. The functions shared between files are
 * in strategy_unit.h.
 * What it is not: an interface for anything outside src/strategy/, or a
 * place for stage decisions (those are the rows of stages.c, turned into
 * each unit's form once, in strategy.c's plan_unit).
 */
#ifndef SHARDSIM_STRATEGY_IMPL_H
#define SHARDSIM_STRATEGY_IMPL_H

#include <stdint.h>

#include "shardsim/shard.h"
#include "shardsim/strategy.h"

/* Whether a unit's compute parameters are held ahead of their next
 * acquire (the reference the hold keeps is taken over by that acquire). */
typedef enum {
    UNIT_NOT_HELD = 0,
    UNIT_PREFETCHED,          /* gathered ahead of its use (forward_prefetch, backward_prefetch) */
    UNIT_KEPT_AFTER_FORWARD   /* kept from forward for backward (keep_after_forward) */
} unit_hold_t;

/* One wrap unit's buffers on this rank, grouped by what uses them. */
typedef struct {
    /* shape and form, fixed at create from the stage's row (strategy.c, plan_unit) */
    size_t numel;          /* real elements */
    shs_shard_t shard;     /* this rank's range of the padded flat buffer */
    size_t full_len;       /* elements in the full flat buffer: numel (whole) or N*S (sharded) */
    int whole;             /* held whole and all-reduced: DDP, or a replicated unit */
    int keeps_lp_replica;  /* f32 master shards plus a full replica in param_dtype (lp_replica) */
    int keeps_lp_shard;    /* sharded f32 master plus its shard in param_dtype (lp_shard): ZeRO-3 below f32 */
    int full_params;       /* the f32 parameters are held in full (else only this rank's shard) */
    int grads_in_block;    /* the gradient lives in grad_block (else transiently, reduced into grad_shard) */
    int gathers;           /* an acquire materializes compute parameters (all-gather or rounding) */
    int params_on_host;    /* the parameter shard itself lives on the host (offload params) */

    /* parameters, persistent */
    float *params;         /* full_params: full (full_len); otherwise the f32 shard (S), the master weights */
    void *lp_replica;      /* Z1/Z2 with a 2-byte param dtype: the full parameters in param_dtype
                            * (full_len, PARAMS), every rank's copy, refreshed by an all-gather after
                            * each optimizer step (DeepSpeed ZeRO-1/2's replicated 16-bit parameters) */
    int lp_stale;          /* lp_replica must be re-gathered before its next use (after create/load) */
    void *lp_shard;        /* keeps_lp_shard: this rank's shard in param_dtype (shard.size, PARAMS), the
                            * source of its all-gathers, cast from the f32 master after each change
                            * (DeepSpeed ZeRO-3's 16-bit partition beside the f32 one) */

    /* compute parameters while acquired: the parameter source (strategy_source.c, strategy_unit.c) */
    float *gathered;       /* gathers: f32 compute params (COMM) */
    void *gpu_cache;       /* the GPU ledger only (device.h): PyTorch autocast's weight cache, the unit's
                            * param-dtype copy from its forward to its backward (TORCH, full units below f32) */
    void *gpu_lp_params;   /* the GPU ledger only: DeepSpeed's persistent 16-bit parameters of a whole unit */
    int gather_refs;       /* outstanding acquires of `gathered` (a hold's reference included) */
    unit_hold_t held;      /* one reference held for the next acquire, and why */
    void *rs_grad;         /* zero.reduce_bucket: the unit's full gradient waiting in the bucket (with
                            * contiguous_gradients a copy the GPU holds in the ipg buffer, else grad_full) */
    void *post_fwd;        /* reshard_after_forward R: this rank's 1/R of the unit (param_dtype, full_len / R)
                            * from its forward to its backward all-gather within the reshard group (COMM) */

    /* gradients: backward and reduction (strategy_source.c, strategy_reduce.c), in the
     * gradient dtype (grad_dtype) except bwd */
    void *grad_full;       /* the full gradient (full_len): grads_in_block: view into grad_block;
                            * otherwise transient (COMM), kept across no_sync micro-batches */
    void *grad_shard;      /* !grads_in_block: reduced gradient shard (S) */
    size_t grad_offset;    /* grads_in_block: offset of this unit in grad_block, elements */
    float *bwd;            /* f32 buffer backward accumulates into, from acquire_grads to grads_ready:
                            * grad_full itself when the gradient is f32 and needs no rounding,
                            * else a transient working copy (COMM) folded into grad_full */

    /* optimizer step (strategy_step.c) */
    float *optim_state;    /* state_per_param * (whole: numel, sharded: S); on the host when offloading */
    float *host_grad;      /* offload: the reduced gradient range the optimizer reads (host, GRADS) */
    float *master;         /* offload optimizer: f32 master copy of the updated range (host, PARAMS);
                            * offload params: NULL (the parameter shard itself lives on the host) */

    /* planted faults (strategy_testing.h) */
    size_t plant_inf;      /* element + 1 to poison at finish_step, 0 none */
    int skip_gather;       /* leave out the next all-gather of the shards */
} unit_state_t;

struct shs_strategy {
    /* setup, fixed at create */
    shs_strategy_config_t cfg;
    const shs_stage_t *stage; /* cfg.kind's row of the stage table (stages.c) */
    const shs_layout_t *layout;
    shs_device_t *dev;
    shs_device_t *host;    /* offload: host memory (its own accounting) and the CPU optimizer */
    shs_device_t *opt_dev; /* where the optimizer, clipping and overflow checks run: host or dev */
    shs_comm_t *comm;      /* the world: DDP all-reduces, norms, overflow flags */
    int rank, nranks;
    /* sharding: over the world, or for hybrid sharding over this rank's
     * group of shard_group_size consecutive ranks, replicated across groups */
    shs_comm_t *shard_comm, *replica_comm; /* replica_comm: hybrid with more than one replica, else NULL */
    int shard_n, shard_rank, replica;
    shs_comm_t *reshard_comm; /* reshard_after_forward_size R: this rank's group of R consecutive ranks, else NULL */
    int reshard_n;         /* R, 0 without */
    unit_state_t *units;

    /* the parameter source (strategy_source.c) */
    shs_param_source_t source;
    shs_phase_t phase;
    /* execution order, per phase: units in order of first acquire during this
     * pass (order) and during the last complete one (prev); FSDP records it
     * the same way to drive prefetching */
    int *order[2], *prev[2];
    int order_len[2], prev_len[2];
    int held_prefetches;   /* units held UNIT_PREFETCHED */

    /* gradient reduction (strategy_reduce.c) */
    int sync;              /* reduce in grads_ready (0: no_sync micro-batch) */
    void *grad_block;      /* the gradients of units with grads_in_block, contiguous, grad_dtype (GRADS) */
    size_t grad_block_len;
    /* bucket: the pending ready range [bucket_lo, bucket_hi) of grad_block */
    size_t bucket_lo, bucket_hi;
    /* zero.reduce_bucket: sharded units waiting for one reduce-scatter, their full_len summed */
    unit_state_t **rs_units;
    int rs_n;
    size_t rs_elems;
    void *ipg;             /* the GPU ledger only: DeepSpeed's ipg buffer(s) (contiguous_gradients) */

    /* the step (strategy_step.c) */
    float grad_norm;       /* last step's total norm, -1 without clipping */
    int64_t *norm_acc;     /* SHS_NORM_ACC_WORDS (OTHER), with clipping or loss scaling */
    int scaling;           /* dynamic loss scaling on (param dtype f16) */
    shs_loss_scale_state_t scaler;
    int skipped;           /* the last step was skipped for overflow */
    long lr_applied;       /* optimizer steps applied: the lr schedule's position */
    float last_lr;         /* the lr of the last applied step */
    /* multipliers scale_grads applied this step, in order, for gradients the
     * optimizer reads through an f32 copy (grads_in_place false) */
    float grad_coef[2];
    int num_grad_coef;
    uint64_t h2d_bytes, d2h_bytes; /* offload traffic */

    /* what the tags of this rank's calls carry (comm.h CALL TAGS): the step
     * (shs_strategy_set_step; finish_step's argument), the micro-batch (its
     * index in the step: forward phases entered since begin_step, less one)
     * and, for the DDP bucket's all-reduce, the unit that joined it last */
    long step;
    int micro, forwards;
    int bucket_unit;
};

static inline int low_precision(const shs_strategy_t *s) { return s->cfg.param_dtype != SHS_F32; }
/* The dtype gradients are stored, accumulated and reduced into: cfg.grad_accum_dtype
 * (resolved at create: param_dtype unless given). */
static inline shs_dtype_t grad_dtype(const shs_strategy_t *s) { return s->cfg.grad_accum_dtype; }
static inline size_t grad_es(const shs_strategy_t *s) { return shs_dtype_size(grad_dtype(s)); }
/* Element `i` of a gradient buffer in grad_dtype. */
static inline void *grad_at(const shs_strategy_t *s, void *g, size_t i) { return (char *)g + i * grad_es(s); }
/* Whether backward accumulates straight into the stored gradient (f32 and
 * nothing to round), not into a working copy. */
static inline int bwd_in_place(const shs_strategy_t *s) { return grad_dtype(s) == SHS_F32 && !low_precision(s); }
/* Whether the optimizer, clipping and overflow check read the reduced
 * gradient in place: f32 on the device, or the host's f32 copy (offload). */
static inline int grads_in_place(const shs_strategy_t *s) { return grad_dtype(s) == SHS_F32 || s->host != NULL; }

/* This rank's shard of a unit's parameters, in whichever buffer holds it. */
static inline float *owned_params(const unit_state_t *u) {
    return u->full_params ? u->params + u->shard.offset : u->params;
}

/* The elements the optimizer updates on this rank: parameters, their
 * reduced gradient, and the count (padding is never updated, so it stays
 * exactly 0 whatever the optimizer would make of 0/0, e.g. AdamW eps = 0). */
static inline void device_range(const shs_strategy_t *s, const unit_state_t *u, float **param, void **grad, size_t *n) {
    if (u->whole) {
        *param = u->params; *grad = u->grad_full; *n = u->numel;
    } else if (u->grads_in_block) { /* ZeRO-1: the reduced shard is this rank's part of the full gradient */
        *param = owned_params(u); *grad = grad_at(s, u->grad_full, u->shard.offset); *n = u->shard.valid;
    } else {
        *param = owned_params(u); *grad = u->grad_shard; *n = u->shard.valid;
    }
}

static inline int unit_index(const shs_strategy_t *s, const unit_state_t *u) { return (int)(u - s->units); }

/* Whether the modelled GPU run (TORCH: DDP under autocast) keeps the unit's
 * param-dtype weights from its forward to its backward: autocast's cast
 * cache, and autograd's saved inputs of each matmul. */
static inline int autocast_cached(const shs_strategy_t *s, const unit_state_t *u) {
    return s->cfg.framework == SHS_FRAMEWORK_TORCH && u->full_params && low_precision(s);
}

/* `c` with the tag of this rank's next call set: `kind` for `unit` (-1:
 * none) at the current micro-batch and step. Every call the strategy makes
 * goes through it, so a rank that skips one is caught at its next call. */
static inline shs_comm_t *tagged(const shs_strategy_t *s, shs_comm_t *c, shs_tag_kind_t kind, int unit) {
    shs_comm_set_tag(c, shs_comm_tag_pack(kind, unit, s->micro, s->step));
    return c;
}

static inline shs_device_t *params_dev(const shs_strategy_t *s, const unit_state_t *u) {
    return u->params_on_host ? s->host : s->dev;
}

/* The optimizer's view of the range (on opt_dev): the device range (its
 * gradient in grad_dtype), or with offloading the host copies of the
 * gradient (f32) and of the parameters. strategy_step.c reads the gradient
 * in f32 through step_grads. */
static inline void update_range(const shs_strategy_t *s, const unit_state_t *u, float **param, void **grad, size_t *n) {
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


#endif
