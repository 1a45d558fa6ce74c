/* strategy.h - data-parallel strategies: DDP and ZeRO stages 1, 2, 3.
 *
 * What it is: one rank's view of how parameters, gradients and optimizer
 * state are held and communicated, per wrap unit (each unit one flat
 * parameter, right-padded to a multiple of N and split per shard.h).
 *
 *   DDP    full params, full grads, full optimizer state on every rank.
 *          Gradients are all-reduced (AVG) in buckets of about bucket_bytes
 *          as units finish backward (torch DDP, Li et al. VLDB 2020).
 *   ZERO1  optimizer state sharded (ZeRO P_os, Rajbhandari et al. 2020 §5.1).
 *          Full gradients are kept; each unit's gradient is reduce-scattered
 *          in place when its backward finishes; each rank updates its shard
 *          of the parameters, then the parameters are all-gathered in place.
 *   ZERO2  gradients sharded too (P_os+g): a unit's full gradient lives only
 *          during its backward, is reduce-scattered into the rank's gradient
 *          shard and freed.
 *   ZERO3  parameters sharded too (P_os+g+p; FSDP FULL_SHARD, Zhao et al.
 *          2023): a unit's flat parameter is all-gathered before each use in
 *          forward and backward and freed after it.
 *
 * Every reduction goes through the communicator's fixed rank order, and the
 * optimizer is elementwise, so all four give bit-identical parameters.
 * Memory categories: persistent params/grads/optimizer state as PARAMS /
 * GRADS / OPTIM; ZeRO-3's gathered parameters and ZeRO-2/3's transient full
 * gradients as COMM (all-gather output, reduce-scatter input).
 * What it is not: the model (model.h) or the training loop (train.h).
 */
#ifndef SHARDSIM_STRATEGY_H
#define SHARDSIM_STRATEGY_H

#include <stdint.h>

#include "shardsim/comm.h"
#include "shardsim/device.h"
#include "shardsim/gpt.h"
#include "shardsim/optim.h"

typedef enum { SHS_DDP, SHS_ZERO1, SHS_ZERO2, SHS_ZERO3, SHS_NUM_STRATEGIES } shs_strategy_kind_t;

const char *shs_strategy_name(shs_strategy_kind_t k); /* "ddp", "zero1", "zero2", "zero3" */
int shs_strategy_parse(const char *name, shs_strategy_kind_t *out); /* 0 ok, -1 unknown */

#define SHS_DEFAULT_BUCKET_BYTES ((size_t)25 << 20) /* torch DDP bucket_cap_mb = 25 */

typedef struct {
    shs_strategy_kind_t kind;
    size_t bucket_bytes;         /* DDP all-reduce bucket size; 0 = default */
    shs_optim_config_t optim;
    uint64_t seed;               /* parameter initialization */
} shs_strategy_config_t;

typedef struct shs_strategy shs_strategy_t;

/* Allocate this rank's parameters (initialized from cfg->seed via
 * shs_layout_init_range), gradients and optimizer state on `dev`, and bind to
 * `comm` (rank and world size come from it). Errors: SHS_OUT_OF_MEMORY (text
 * names the rank), SHS_HOST_OOM, SHS_INVALID_ARG. */
shs_status_t shs_strategy_create(shs_strategy_t **out, const shs_strategy_config_t *cfg,
                                 const shs_layout_t *layout, shs_device_t *dev, shs_comm_t *comm);
void shs_strategy_destroy(shs_strategy_t *s);

/* The parameter source the model's forward/backward call into. */
shs_param_source_t *shs_strategy_source(shs_strategy_t *s);

/* Before forward: zero the persistent gradient buffers. */
shs_status_t shs_strategy_begin_step(shs_strategy_t *s);
/* After backward: finish gradient reduction, run the optimizer step
 * (1-based `step`) on the elements this rank owns, and re-gather parameters
 * where the stage keeps them full (ZeRO-1/2). Collective errors propagate. */
shs_status_t shs_strategy_finish_step(shs_strategy_t *s, long step);

/* Copy this rank's shard of unit `unit`'s parameters (shs_shard_of(numel, N,
 * rank): size S, padding included, zeros past numel) to host `out` (S floats).
 * Needs no communication for any strategy. */
shs_status_t shs_strategy_read_shard(shs_strategy_t *s, int unit, float *out);

/* For stages that keep full parameters on every rank (DDP, ZeRO-1, ZeRO-2):
 * copy this rank's full copy of unit `unit` (numel floats) to host `out`.
 * ZeRO-3 returns SHS_UNSUPPORTED (it holds only its shard). */
shs_status_t shs_strategy_read_full(shs_strategy_t *s, int unit, float *out);

/* Fault injection for testing checkers: flip the least significant bit of
 * element `index` of unit `unit`'s parameters in this rank's copy, if it
 * holds that element (any rank for full-parameter stages, the owner only for
 * ZeRO-3; otherwise nothing happens). Errors: SHS_INVALID_ARG for an index
 * past the unit. */
shs_status_t shs_strategy_flip_param_bit(shs_strategy_t *s, int unit, size_t index);

#endif
