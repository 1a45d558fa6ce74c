/* strategy_unit.h - private: the operations src/strategy/'s files share,
 * on one unit's buffers (strategy_unit.c: rounding, gathering, holds, the
 * param-dtype replica, the offload master copy) and on gradients
 * (strategy_reduce.c: the DDP bucket, reduce-scatter), and the parameter
 * source (strategy_source.c). Each file depends on these and on
 * strategy_impl.h, never on another file's statics, so the files form no
 * cycle: unit <- reduce <- source <- strategy.c; step and state use unit
 * and reduce.
 * What it is not: an interface for anything outside src/strategy/.
 */
#ifndef SHARDSIM_STRATEGY_UNIT_H
#define SHARDSIM_STRATEGY_UNIT_H

#include "strategy/strategy_impl.h"

/* ---- strategy_unit.c: one unit's buffers ---- */

/* Round n f32 values at dst (from src; may be the same) to dtype t, through
 * a temporary t buffer (COMM): dst = (f32)(t)src. */
shs_status_t shs__strategy_round_to(shs_strategy_t *s, float *dst, const float *src, size_t n, shs_dtype_t t);
/* Take one reference on the unit's compute parameters (u->gathered),
 * materializing them if none is live: ZeRO-3 all-gathers its shards (in
 * param_dtype), ZeRO-1/2 widen their param-dtype replica, full holders
 * round their copy. A collective over the shard group when the unit's
 * parameters are sharded. */
shs_status_t shs__strategy_take_gathered(shs_strategy_t *s, unit_state_t *u);
/* The bytes the modelled GPU run holds for the unit's compute parameters
 * while they are acquired (device.h's GPU ledger): the param-dtype buffer
 * (the all-gather's output; PyTorch autocast's cast of a whole unit's
 * weights), or 0 where the GPU computes with a buffer it keeps anyway (the
 * ZeRO-1/2 replica, DeepSpeed stage 0's 16-bit parameters). */
size_t shs__strategy_gathered_gpu_bytes(const shs_strategy_t *s, const unit_state_t *u);
/* reshard_after_forward R: keep this rank's 1/R of the gathered unit in
 * param_dtype (u->post_fwd: slice rank mod R of the full buffer, the slice
 * the reshard group's all-gather puts there) for the backward. Local. */
shs_status_t shs__strategy_reshard(shs_strategy_t *s, unit_state_t *u);
/* Free the unit's compute parameters and forget every reference on them. */
void shs__strategy_drop_gathered(shs_strategy_t *s, unit_state_t *u);
/* Free whatever a hold still keeps (a prefetch never used, a unit kept from
 * forward that backward did not need). Local: no communication. */
void shs__strategy_drop_held(shs_strategy_t *s);
/* Re-gather the unit's param-dtype replica from the f32 master shards
 * (ZeRO-1/2 with a 2-byte param dtype; no-op otherwise); a collective over
 * the shard group. */
shs_status_t shs__strategy_refresh_replica(shs_strategy_t *s, unit_state_t *u);
/* Cast the unit's f32 master shard into its param-dtype shard (ZeRO-3 below
 * f32; no-op otherwise), after every change of the master. Local. */
void shs__strategy_refresh_lp_shard(shs_strategy_t *s, unit_state_t *u);
/* The master copy of the updated range from the device parameters (offload
 * optimizer; no-op otherwise). */
shs_status_t shs__strategy_download_master(shs_strategy_t *s, unit_state_t *u);

/* ---- strategy_reduce.c: gradients ---- */

/* Reduce a unit whose backward finished (sync on): a whole unit joins the
 * DDP bucket; a sharded one is reduced as its stage's row says. */
shs_status_t shs__strategy_reduce_unit(shs_strategy_t *s, unit_state_t *u);
/* All-reduce the pending DDP/replicated-unit bucket. */
shs_status_t shs__strategy_flush_bucket(shs_strategy_t *s);
/* Reduce-scatter the pending reduce bucket of sharded units (zero.reduce_bucket). */
shs_status_t shs__strategy_flush_rs_bucket(shs_strategy_t *s);

/* ---- strategy_source.c: the parameter source ---- */

/* The parameter source the model calls, bound to `s`. */
shs_param_source_t shs__strategy_param_source(shs_strategy_t *s);

#endif
