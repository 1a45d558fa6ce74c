/* stages.c - the stage table: one row per data-parallel stage, saying what
 * it shards, how it reduces gradients and when it gathers parameters. The
 * rest of src/strategy/ reads these rows (and the unit's form that
 * strategy.c derives from them) instead of testing the stage's kind, so
 * where two stages differ is where their rows differ.
 * What it is not: the mechanics (strategy_unit.c gathers, strategy_reduce.c
 * reduces, strategy_step.c updates) or the memory estimate (meta/estimate.c).
 *
 * The ZeRO stages follow Rajbhandari et al., "ZeRO: Memory Optimizations
 * Toward Training Trillion Parameter Models" (SC 2020), section 5: with
 * N data-parallel ranks,
 *   P_os      (stage 1) partitions the optimizer states: each rank updates
 *             only its 1/N of the parameters, then all-gathers them;
 *   P_os+g    (stage 2) also partitions the gradients: each rank keeps the
 *             reduced gradient of the parameters it updates (a
 *             reduce-scatter instead of an all-reduce);
 *   P_os+g+p  (stage 3) also partitions the parameters: each rank stores its
 *             1/N and the full parameters are all-gathered before each use
 *             in forward and backward and dropped after it.
 * DDP partitions nothing and all-reduces (Li et al., VLDB 2020). Hybrid
 * sharding (PyTorch FSDP's HYBRID_SHARD and _HYBRID_SHARD_ZERO2) applies
 * stage 3 or 2 within groups of shard_group_size ranks and replicates the
 * groups, so the gradient shard is also all-reduced across them.
 *
 *                       optimizer grads params regathers  reduce                              GPU run modelled
 *   ddp                     -       -      -       -      all-reduce                          PyTorch DDP
 *   zero1                   x       -      -       x      reduce-scatter                      DeepSpeed ZeRO-1
 *   zero2                   x       x      -       x      reduce-scatter                      DeepSpeed ZeRO-2
 *   zero3                   x       x      x       -      reduce-scatter                      PyTorch FSDP2
 *   hybrid_shard            x       x      x       -      reduce-scatter + replica all-reduce PyTorch FSDP2 HSDP
 *   hybrid_shard_zero2      x       x      -       x      reduce-scatter + replica all-reduce DeepSpeed ZeRO-2 layout
 *
 * The last column is the framework whose GPU run the device's GPU ledger
 * models for the stage unless the configuration names one
 * (shs_strategy_config_t.framework; strategy.h SHS_FRAMEWORK_MAP).
 *
 * ZeRO-1 keeps the full gradient and reduce-scatters it in place (its shard
 * of the full buffer becomes the reduced shard); ZeRO-2 reduce-scatters a
 * transient full gradient into a persistent shard. ZeRO-2 keeps the full
 * parameters and re-gathers them after the step; ZeRO-3 keeps shards and
 * gathers before every use. With a 2-byte param dtype the stages that
 * re-gather keep f32 master shards plus a full replica in that dtype
 * (DeepSpeed's 16-bit ZeRO-1/2), so their f32 parameters are shards too
 * (strategy.c, plan_unit).
 */
#include <string.h>

#include "shardsim/strategy.h"

#include "core/names.h"

static const shs_stage_t ddp = {
    .shards_optimizer = 0, .shards_grads = 0, .shards_params = 0,
    .regathers_params_after_step = 0,
    .reduce = SHS_GRAD_ALL_REDUCE,
    .framework = SHS_FRAMEWORK_TORCH,
};

static const shs_stage_t zero1 = {
    .shards_optimizer = 1, .shards_grads = 0, .shards_params = 0,
    .regathers_params_after_step = 1,
    .reduce = SHS_GRAD_REDUCE_SCATTER,
    .framework = SHS_FRAMEWORK_DEEPSPEED,
};

static const shs_stage_t zero2 = {
    .shards_optimizer = 1, .shards_grads = 1, .shards_params = 0,
    .regathers_params_after_step = 1,
    .reduce = SHS_GRAD_REDUCE_SCATTER,
    .framework = SHS_FRAMEWORK_DEEPSPEED,
};

static const shs_stage_t zero3 = {
    .shards_optimizer = 1, .shards_grads = 1, .shards_params = 1,
    .regathers_params_after_step = 0,
    .reduce = SHS_GRAD_REDUCE_SCATTER,
    .framework = SHS_FRAMEWORK_TORCH,
};

static const shs_stage_t hybrid_shard = {
    .shards_optimizer = 1, .shards_grads = 1, .shards_params = 1,
    .regathers_params_after_step = 0,
    .reduce = SHS_GRAD_REDUCE_SCATTER_REPLICAS,
    .framework = SHS_FRAMEWORK_TORCH,
};

static const shs_stage_t hybrid_shard_zero2 = {
    .shards_optimizer = 1, .shards_grads = 1, .shards_params = 0,
    .regathers_params_after_step = 1,
    .reduce = SHS_GRAD_REDUCE_SCATTER_REPLICAS,
    .framework = SHS_FRAMEWORK_DEEPSPEED,
};

static const shs_stage_t *const stages[SHS_NUM_STRATEGIES] = {
    [SHS_DDP] = &ddp,
    [SHS_ZERO1] = &zero1,
    [SHS_ZERO2] = &zero2,
    [SHS_ZERO3] = &zero3,
    [SHS_HYBRID_SHARD] = &hybrid_shard,
    [SHS_HYBRID_SHARD_ZERO2] = &hybrid_shard_zero2,
};

const shs_stage_t *shs_strategy_stage(shs_strategy_kind_t k) {
    return (int)k >= 0 && k < SHS_NUM_STRATEGIES ? stages[k] : NULL;
}

#define FRAMEWORK_NAME(id, name) name,
static const char *const framework_names[] = {SHS_FRAMEWORK_MAP(FRAMEWORK_NAME)};
#undef FRAMEWORK_NAME

const char *shs_framework_name(shs_framework_t f) {
    return shs__name_of(framework_names, SHS_NUM_FRAMEWORKS, (int)f, "invalid");
}

const char *shs_framework_describe(shs_framework_t f, shs_strategy_kind_t k) {
    const shs_stage_t *st = shs_strategy_stage(k);
    if (!st) return "invalid";
    if (f == SHS_FRAMEWORK_DEFAULT) f = st->framework;
    if (f == SHS_FRAMEWORK_DEEPSPEED) {
        if (!st->shards_optimizer) return "DeepSpeed stage 0 (BF16_Optimizer / FP16_Optimizer)";
        if (st->shards_params) return "DeepSpeed ZeRO-3 (DeepSpeedZeroOptimizer_Stage3)";
        return st->shards_grads ? "DeepSpeed ZeRO-2 (DeepSpeedZeroOptimizer)" : "DeepSpeed ZeRO-1 (DeepSpeedZeroOptimizer)";
    }
    if (!st->shards_optimizer) return "PyTorch DDP under autocast";
    if (st->shards_params) return st->reduce == SHS_GRAD_REDUCE_SCATTER_REPLICAS ? "PyTorch FSDP2 HSDP (fully_shard, 2-D mesh)"
                                                                             : "PyTorch FSDP2 (fully_shard)";
    return "PyTorch FSDP SHARD_GRAD_OP layout";
}

#define STRATEGY_NAME(id, name) name,
static const char *const strategy_names[] = {SHS_STRATEGY_MAP(STRATEGY_NAME)};
#undef STRATEGY_NAME

const char *shs_strategy_name(shs_strategy_kind_t k) {
    return shs__name_of(strategy_names, SHS_NUM_STRATEGIES, (int)k, "invalid");
}

int shs_strategy_parse(const char *name, shs_strategy_kind_t *out) {
    int k = shs__name_find(strategy_names, SHS_NUM_STRATEGIES, name);
    if (k >= 0) *out = (shs_strategy_kind_t)k;
    return k >= 0 ? 0 : -1;
}
