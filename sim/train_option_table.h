/* train_option_table.h - the option table of `shardsim train` (args.h):
 * one id per option, its row (name, type, range, --help text), the --help
 * defaults and the text before the options. Adding an option is a row here
 * (an id in the enum, its row in train_option_table.c) and its use in
 * train_options.c.
 * What it is not: how the options combine (train_options.c). */
#ifndef SHARDSIM_SIM_TRAIN_OPTION_TABLE_H
#define SHARDSIM_SIM_TRAIN_OPTION_TABLE_H

#include "args.h"

/* The options of `train`: each checked by its row (args.h), then applied in
 * parse_train_args() so that their order on the command line never matters.
 * The rows' order is --help's. */
typedef enum {
    O_WORLD, O_BACKEND, O_LOSS_BITS, O_STRATEGY, O_SHARD_GROUP_SIZE, O_RESHARD_AFTER_FORWARD, O_BACKWARD_PREFETCH,
    O_FORWARD_PREFETCH, O_LIMIT_ALL_GATHERS, O_OFFLOAD, O_MEMORY_TIMELINE, O_POISON_FREED, O_DATA, O_DOC_SEP, O_PACK, O_PAD,
    O_LOSS_NORM, O_MODEL_FILE, O_HF_CONFIG,
    O_STEPS, O_CHECK, O_REDUCE_ORDER, O_LAYERS, O_HEADS, O_CHANNELS, O_CONTEXT, O_MICRO_BATCH, O_OPTIMIZER, O_LR,
    O_LR_SCHEDULE, O_WARMUP_STEPS, O_WARMUP_RATIO, O_LR_TOTAL_STEPS, O_MIN_LR,
    O_WEIGHT_DECAY, O_BETA1, O_BETA2, O_EPS, O_MOMENTUM, O_SEED, O_DEVICE_MEM, O_BUCKET_MB, O_TIMEOUT, O_GRAD_ACCUM,
    O_CLIP_GRAD_NORM, O_NORM_TYPE, O_REPLICATE_BELOW, O_SHARD_ALIGN, O_PARAM_DTYPE, O_REDUCE_DTYPE, O_GRAD_ACCUM_DTYPE,
    O_INIT_SCALE, O_GROWTH_INTERVAL, O_GROWTH_FACTOR, O_BACKOFF_FACTOR, O_LOSS_SCALER, O_HYSTERESIS,
    O_CONSECUTIVE_HYSTERESIS, O_MIN_LOSS_SCALE, O_CHECKPOINT_ACTIVATIONS, O_RECOMPUTE, O_AC_MODE,
    O_SELECTIVE_AC_OPTION, O_ATTENTION,
    O_AUTOCAST, O_DROPOUT, O_WRAP, O_INJECT_BITFLIP, O_SAVE,
    O_SAVE_EVERY, O_RESUME, O_EXPORT_SAFETENSORS, O_METRICS, O_PROGRESS, O_TRACE, O_DS_CONFIG,
    O_NUM_OPTIONS
} opt_id_t;

/* The rows, indexed by opt_id_t; their order is --help's. */
extern const sim_opt_t sim_train_options[O_NUM_OPTIONS];
/* The usage text --help prints before the rows. */
extern const char sim_train_usage_head[];
/* Each row's default as --help shows it (NULL: none), from
 * shs_train_default_config() where the config holds it. */
void sim_train_help_defaults(const char *defaults[O_NUM_OPTIONS]);

#endif
