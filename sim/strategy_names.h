/* strategy_names.h - the names a user may give a strategy on the command
 * line (train --strategy; compare --strategies should take the same):
 * shardsim's own (ddp, zero1, zero2, zero3, hybrid_shard,
 * hybrid_shard_zero2) and the names other tools give the same layouts,
 * each with what it maps to. One table (SIM_STRATEGY_ALIASES) makes both
 * the lookup and the --help text, so they cannot drift apart.
 *
 * Sources of the semantics:
 *   PyTorch FSDP ShardingStrategy (torch/distributed/fsdp/api.py): FULL_SHARD
 *     all-gathers before forward and backward and frees after each;
 *     SHARD_GRAD_OP frees after backward only, so parameters stay sharded
 *     between steps: that is shardsim's zero3 with --reshard-after-forward
 *     false (keep_after_forward), not zero2, which keeps full parameters
 *     all the time and all-gathers after the optimizer step (DeepSpeed
 *     stage 2). _HYBRID_SHARD_ZERO2 is SHARD_GRAD_OP within the shard group
 *     (HYBRID_SHARDING_STRATEGIES in _init_utils.py; only FULL_SHARD and
 *     HYBRID_SHARD reshard after forward: RESHARD_AFTER_FORWARD_HANDLE_
 *     STRATEGIES in _flat_param.py), so it is hybrid_shard with
 *     keep_after_forward, not shardsim's hybrid_shard_zero2. Under no_sync
 *     (--grad-accum) FSDP also keeps SHARD_GRAD_OP's parameters between
 *     micro-batches; shardsim gathers them again each micro-batch (same
 *     numbers, more all-gathers).
 *   Hugging Face Trainer / Accelerate (transformers trainer_utils.FSDPOption):
 *     full_shard, shard_grad_op, no_shard; its hybrid_shard_zero2 is FSDP's
 *     _HYBRID_SHARD_ZERO2, a different layout from shardsim's name, which
 *     keeps its meaning here.
 *   FairScale: OSS shards the optimizer state (ZeRO-1); ShardedDataParallel
 *     with OSS also shards gradients, reduced to their owner (ZeRO-2).
 *   DeepSpeed zero_optimization.stage 0..3: ddp, zero1, zero2, zero3.
 * What it is not: the stages themselves (src/strategy/stages.c). */
#ifndef SHARDSIM_SIM_STRATEGY_NAMES_H
#define SHARDSIM_SIM_STRATEGY_NAMES_H

#include "shardsim/strategy.h"

/* X(name, kind, reshard, maps): reshard -1 leaves --reshard-after-forward
 * free, 1 means the name frees gathered parameters after forward, 0 keeps
 * them to backward (keep_after_forward); maps says in --help what the name
 * is here and whose name it is (string literals: the help text is made at
 * compile time). */
#define SIM_STRATEGY_ALIASES(X)                                                                                     \
    X("0", SHS_DDP, -1, "ddp (DeepSpeed ZeRO stage 0)")                                                             \
    X("1", SHS_ZERO1, -1, "zero1 (DeepSpeed stage 1)")                                                              \
    X("2", SHS_ZERO2, -1, "zero2 (DeepSpeed stage 2)")                                                              \
    X("3", SHS_ZERO3, -1, "zero3 (DeepSpeed stage 3)")                                                              \
    X("oss", SHS_ZERO1, -1, "zero1 (FairScale OSS)")                                                                \
    X("sdp", SHS_ZERO2, -1, "zero2 (FairScale ShardedDDP with OSS)")                                                \
    X("NO_SHARD", SHS_DDP, -1, "ddp (PyTorch FSDP)")                                                                \
    X("FULL_SHARD", SHS_ZERO3, 1, "zero3 (FSDP)")                                                                   \
    X("SHARD_GRAD_OP", SHS_ZERO3, 0, "zero3 --reshard-after-forward false (FSDP; not\n"                             \
                                     "    zero2, which keeps full parameters)")                              \
    X("HYBRID_SHARD", SHS_HYBRID_SHARD, 1, "hybrid_shard (FSDP)")                                                   \
    X("_HYBRID_SHARD_ZERO2", SHS_HYBRID_SHARD, 0, "hybrid_shard --reshard-after-forward false\n"                    \
                                                  "    (FSDP; not shardsim's hybrid_shard_zero2, which keeps\n"     \
                                                  "    full parameters)")                                            \
    X("no_shard", SHS_DDP, -1, "ddp (HF Trainer --fsdp)")                                                           \
    X("full_shard", SHS_ZERO3, 1, "zero3 (HF Trainer)")                                                             \
    X("shard_grad_op", SHS_ZERO3, 0, "as SHARD_GRAD_OP (HF Trainer)")

/* The aliases' --help lines, "  NAME = WHAT (WHOSE)" each (the table above). */
#define SIM_STRATEGY_ALIAS_HELP_LINE(name, kind, reshard, maps) "\n  " name " = " maps
#define SIM_STRATEGY_ALIASES_HELP SIM_STRATEGY_ALIASES(SIM_STRATEGY_ALIAS_HELP_LINE) "\n(each name exactly as written)"

/* What a strategy name means. */
typedef struct {
    const char *name;          /* as given */
    const char *maps;          /* an alias's help text (what it maps to), NULL for shardsim's own names */
    shs_strategy_kind_t kind;
    int reshard;               /* -1: not fixed by the name; 1: free after forward; 0: keep to backward */
} sim_strategy_name_t;

/* Look name up among shardsim's names and the aliases (exact, case
 * sensitive: FSDP's are upper case, HF Trainer's lower case). 0 with *out,
 * or -1 for an unknown name. */
int sim_strategy_lookup(const char *name, sim_strategy_name_t *out);

/* Apply a looked-up name to a strategy config: its kind, and
 * keep_after_forward when the name fixes it. reshard_given: the user's
 * --reshard-after-forward (-1: not given, else 0 or 1). Returns -1, or a
 * usage error of cmd when the two contradict each other. */
int sim_strategy_apply(const char *cmd, const sim_strategy_name_t *n, int reshard_given, shs_strategy_config_t *s);

/* The usage error for an unknown strategy name, listing the accepted ones
 * (opt: the option, "--strategy"). Returns SIM_EXIT_USAGE. */
int sim_strategy_unknown(const char *cmd, const char *opt, const char *name);

#endif
