/* ds_config.h - a DeepSpeed configuration file (ds_config.json) read into
 * shardsim's training configuration, with the command line's options taking
 * precedence and every effective setting's origin recorded for the run's
 * header.
 *
 * What it is: the reader (JSON through jansson; duplicate keys refused, as
 * DeepSpeed's own loader does with dict_raise_error_on_duplicate_keys), the
 * mapping of each DeepSpeed key onto shs_train_config_t (lr schedule
 * included), and DeepSpeed's batch-size rule. A key is taken as DeepSpeed
 * takes it: what DeepSpeed refuses is refused (an unknown key inside a
 * section DeepSpeed reads as a strict model, a scheduler argument its
 * constructor lacks, ...); what DeepSpeed passes over is accepted and listed
 * as ignored (unknown top-level keys, which its config reads one by one,
 * with the known key a misspelling is closest to); keys that change nothing
 * a simulator computes (logging, monitors, pinned memory, ...) are listed as
 * ignored too; keys that change the numbers in a way shardsim does not
 * model are refused by name ("ds.json: optimizer.params.amsgrad = true is
 * not modelled: ..."), all of a file's in one error. Read for `compare`,
 * keys that change only the trained values (the lr schedule, gradient
 * averaging, ...) are listed as ignored instead (shs_ds_use_t).
 * Each section's keys are a table in src/train/ds_config*.c, one row per
 * key with what DeepSpeed does and what shardsim does.
 * What it is not: the command line (sim/), or a DeepSpeed engine.
 */
#ifndef SHARDSIM_DS_CONFIG_H
#define SHARDSIM_DS_CONFIG_H

#include <stddef.h>

#include "shardsim/status.h"
#include "shardsim/train.h"

/* The settings a DeepSpeed config can decide, one row each: enum suffix,
 * name in the header. */
#define SHS_DS_SETTING_MAP(X)                                  \
    X(STAGE, "stage")                                          \
    X(SHARD_GROUP, "shard group")                              \
    X(DTYPE, "param dtype")                                    \
    X(REDUCE_DTYPE, "reduce dtype")                            \
    X(GRAD_ACCUM_DTYPE, "grad accum dtype")                    \
    X(MICRO_BATCH, "micro-batch")                              \
    X(GRAD_ACCUM, "accumulation")                              \
    X(WORLD, "world")                                          \
    X(OFFLOAD, "offload")                                      \
    X(CLIP, "clipping")                                        \
    X(OPTIMIZER, "optimizer")                                  \
    X(LR, "lr")                                                \
    X(BETA1, "beta1")                                          \
    X(BETA2, "beta2")                                          \
    X(EPS, "eps")                                              \
    X(WEIGHT_DECAY, "weight decay")                            \
    X(MOMENTUM, "momentum")                                    \
    X(REPLICATE_BELOW, "replicate below")                      \
    X(PREFETCH, "prefetch")                                    \
    X(ZERO_KNOBS, "ZeRO buckets and budgets")                  \
    X(INIT_SCALE, "initial loss scale")                        \
    X(GROWTH_INTERVAL, "loss scale growth interval")           \
    X(LOSS_SCALER, "loss scaler")                              \
    X(HYSTERESIS, "loss scale hysteresis")                     \
    X(MIN_LOSS_SCALE, "min loss scale")                        \
    X(BIAS_CORRECTION, "bias correction")                      \
    X(LR_SCHEDULE, "lr schedule")                              \
    X(WARMUP_STEPS, "warmup steps")                            \
    X(TOTAL_STEPS, "total steps")                              \
    X(GRAD_AVERAGING, "gradient averaging")

typedef enum {
#define SHS_DS_SETTING_ENUM(id, name) SHS_DS_##id,
    SHS_DS_SETTING_MAP(SHS_DS_SETTING_ENUM)
#undef SHS_DS_SETTING_ENUM
    SHS_DS_NUM_SETTINGS
} shs_ds_setting_t;

/* Where an effective setting came from. */
typedef enum {
    SHS_DS_FROM_SHARDSIM = 0,  /* shardsim's default (the config does not decide it) */
    SHS_DS_FROM_CONFIG,        /* a key of the file */
    SHS_DS_FROM_DS_DEFAULT,    /* DeepSpeed's default for a key the file leaves out */
    SHS_DS_FROM_DERIVED,       /* DeepSpeed's batch-size rule (train_batch_size) */
    SHS_DS_FROM_COMMAND_LINE,  /* an option given beside --ds-config */
    SHS_DS_FROM_AUTO,          /* a key given as "auto", resolved as the Hugging Face Trainer does */
    SHS_DS_FROM_PER_ROW        /* compare --variants: each row's own */
} shs_ds_source_t;

/* The keys the Hugging Face Trainer fills in when given as "auto"
 * (transformers integrations/deepspeed.py, HfTrainerDeepSpeedConfig
 * trainer_config_process / trainer_config_finalize), one row each: enum
 * suffix, key path. Resolved by shs_ds_config_apply from the Trainer's
 * arguments, which here are the command line or shardsim's defaults:
 *   train_micro_batch_size_per_gpu, gradient_accumulation_steps -> the
 *       micro-batch and the accumulation; train_batch_size -> their product
 *       times the world (so its "auto" also makes the accumulation the
 *       command line's or 1)
 *   gradient_clipping -> 1.0 (max_grad_norm's default)
 *   optimizer.params lr 5e-5, betas [0.9, 0.999], eps 1e-8, weight_decay 0.0
 *       (TrainingArguments' defaults)
 *   fp16.enabled, bf16.enabled -> off unless --param-dtype f16 / bf16
 *   zero_optimization reduce_bucket_size hidden^2, stage3_prefetch_bucket_size
 *       0.9 hidden^2, stage3_param_persistence_threshold 10 hidden (hidden:
 *       the model's; a model without one is refused naming the keys)
 *   scheduler.params warmup_min_lr 0; warmup_max_lr learning_rate (--lr,
 *       else 5e-5); warmup_num_steps get_warmup_steps (--warmup-steps, else
 *       ceil(--warmup-ratio x total)); total_num_steps num_training_steps
 *       (--lr-total-steps, else --steps): the values cfg's lr_schedule
 *       carries into shs_ds_config_apply (train only; compare ignores the
 *       scheduler) */
#define SHS_DS_AUTO_MAP(X)                                           \
    X(MICRO, "train_micro_batch_size_per_gpu")                       \
    X(ACCUM, "gradient_accumulation_steps")                          \
    X(TRAIN_BATCH, "train_batch_size")                               \
    X(CLIP, "gradient_clipping")                                     \
    X(LR, "optimizer.params.lr")                                     \
    X(BETAS, "optimizer.params.betas")                               \
    X(EPS, "optimizer.params.eps")                                   \
    X(WEIGHT_DECAY, "optimizer.params.weight_decay")                 \
    X(FP16, "fp16.enabled")                                          \
    X(BF16, "bf16.enabled")                                          \
    X(REDUCE_BUCKET, "zero_optimization.reduce_bucket_size")         \
    X(PREFETCH, "zero_optimization.stage3_prefetch_bucket_size")     \
    X(PERSISTENCE, "zero_optimization.stage3_param_persistence_threshold") \
    X(WARMUP_MIN_LR, "scheduler.params.warmup_min_lr")               \
    X(WARMUP_MAX_LR, "scheduler.params.warmup_max_lr")               \
    X(WARMUP_NUM_STEPS, "scheduler.params.warmup_num_steps")         \
    X(TOTAL_NUM_STEPS, "scheduler.params.total_num_steps")

typedef enum {
#define SHS_DS_AUTO_ENUM(id, key) SHS_DS_AUTO_##id,
    SHS_DS_AUTO_MAP(SHS_DS_AUTO_ENUM)
#undef SHS_DS_AUTO_ENUM
    SHS_DS_NUM_AUTOS
} shs_ds_auto_t;

const char *shs_ds_setting_name(shs_ds_setting_t s);
/* "config", "DeepSpeed default", "derived", "command line", "shardsim default", "auto", "each row's own" */
const char *shs_ds_source_name(shs_ds_source_t s);

#define SHS_DS_MAX_NOTES 48

/* What a config is read for. Keys whose only effect is on the trained
 * values (the lr schedule, DeepSpeed's gradient averaging, the optimizer's
 * bias correction, ...) change nothing `compare` reports: for COMPARE they
 * are listed as ignored where TRAIN would refuse or model them. Keys that
 * DeepSpeed itself refuses are refused for both. */
typedef enum { SHS_DS_FOR_TRAIN = 0, SHS_DS_FOR_COMPARE } shs_ds_use_t;

/* A file as read: the values it decides, each with its source (SHARDSIM
 * where it decides nothing), and the keys accepted without effect. */
typedef struct {
    char path[512];
    shs_ds_use_t use;                   /* what it was read for */
    shs_train_config_t vals;            /* the decided fields (others untouched); vals.strategy.lr_schedule:
                                         * the scheduler's, "auto" values resolved by apply */
    int sched_max_lr_is_lr;             /* WarmupLR without warmup_max_lr: DeepSpeed's default, the optimizer's lr */
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    long train_batch;                   /* train_batch_size; 0: not given */
    int has_micro, has_accum;           /* the file gives these keys (DeepSpeed's "provided") */
    unsigned autos;                     /* bit SHS_DS_AUTO_x: that key is "auto" */
    /* zero_optimization keys whose effect depends on the effective strategy
     * (shs_ds_config_apply): vals holds the file's stage (hybrid_shard for
     * MiCS), its offload, and the stage-3 settings as at stage 3 */
    int stage3_keys;                    /* the file gives a stage3_* key (or its alias) */
    int num_ignored;
    char ignored[SHS_DS_MAX_NOTES][256]; /* "key path (why)" of keys accepted without effect */
    int num_notes;
    char notes[SHS_DS_MAX_NOTES][160];  /* how approximate mappings were made */
} shs_ds_config_t;

/* Read `path`. Errors (each naming the file and the key path): SHS_IO (no
 * such file), SHS_PARSE (malformed JSON with its line; a duplicate key; a
 * value of the wrong type or out of range; "auto" on a key the Hugging Face
 * Trainer does not fill in), SHS_UNSUPPORTED (keys shardsim does not model,
 * and keys DeepSpeed refuses: all of the file's in one message; without
 * jansson: says so). */
shs_status_t shs_ds_config_load(const char *path, shs_ds_config_t *out);
/* The same for `use` (load is SHS_DS_FOR_TRAIN). */
shs_status_t shs_ds_config_load_for(const char *path, shs_ds_use_t use, shs_ds_config_t *out);

/* Apply `ds` to `cfg`, which holds shardsim's defaults overwritten by the
 * options given on the command line: the settings with given[s] != 0 keep
 * cfg's value (the command line wins), the others take the file's where it
 * decides them. Precedence of the param dtype: the command line, then the
 * file's fp16 / bf16 section, then DeepSpeed's fp32 (the caller applies a
 * model's torch_dtype only without a DeepSpeed config). Settings that depend
 * on the effective strategy (the command line's or the file's stage) apply
 * only where it takes them: the stage3_* keys (replicate below, prefetch)
 * only under a strategy that shards parameters (zero3, hybrid_shard);
 * mics_shard_size only under hybrid sharding; offload_param only with
 * sharded parameters (else the optimizer offload alone); the fp16 loss
 * scaler only with param dtype f16; the header's notes name each key left
 * without effect. A MiCS group that does not divide the world, or a config
 * offload under ddp, is SHS_INVALID_ARG naming the key. "auto" keys are
 * resolved (SHS_DS_AUTO_MAP) with `hidden`, the model's hidden size (0: the
 * model has none; then a hidden-size "auto" is SHS_INVALID_ARG naming the
 * keys). Then DeepSpeed's batch-size rule (runtime/config.py,
 * _set_batch_related_parameters and _batch_assertion) over
 * train_batch_size (file), micro-batch and accumulation (file or command
 * line) and cfg->world_size: of the three, the missing one is derived from
 * the two given (integer division, as DeepSpeed does), only train_batch_size
 * given means accumulation 1, only the micro-batch means accumulation 1;
 * then train_batch_size must equal micro x accumulation x world, else
 * SHS_INVALID_ARG naming the three values and the world (a
 * train_batch_size the others do not divide: naming the divisors). Neither
 * train_batch_size nor a micro-batch: SHS_INVALID_ARG (DeepSpeed's
 * assertion). `given` may be NULL (nothing given). Fills src_out (may be
 * NULL) with each effective setting's source.
 * The lr schedule (train only): cfg->strategy.lr_schedule holds the command
 * line's (--lr-schedule; the constant one otherwise) with the HF Trainer's
 * warmup and total steps; the file's scheduler replaces it unless
 * LR_SCHEDULE is given, its "auto" params filled from those steps and the
 * lr (SHS_DS_AUTO_MAP), WARMUP_STEPS / TOTAL_STEPS given winning over its
 * numbers; a schedule DeepSpeed would refuse (its warmup_num_steps "auto"
 * resolved to 0) is SHS_INVALID_ARG naming the key. Gradient averaging
 * (prescale_gradients, gradient_predivide_factor) applies under ddp, has no
 * effect under zero1 (DeepSpeed's ZeRO-1 does not read it: a header note),
 * and is SHS_INVALID_ARG under a strategy that shards gradients (DeepSpeed's
 * ZeRO-2/3 assert it away). */
shs_status_t shs_ds_config_apply(const shs_ds_config_t *ds, const int given[SHS_DS_NUM_SETTINGS], long hidden,
                                 shs_train_config_t *cfg, shs_ds_source_t src_out[SHS_DS_NUM_SETTINGS]);

/* The run's header lines about the config: the effective settings of `cfg`
 * (after apply) with their sources, the "auto" keys with their resolved
 * values (the hidden-size ones from cfg's model: llama hidden or GPT
 * channels, as apply's `hidden`), then the ignored keys and the notes (keys without effect under
 * the effective strategy or dtype among them);
 * each line starts with `prefix`. Returns the characters written (as
 * snprintf: the length it needed). */
size_t shs_ds_config_describe(const shs_ds_config_t *ds, const shs_train_config_t *cfg,
                              const shs_ds_source_t src[SHS_DS_NUM_SETTINGS], const char *prefix, char *buf,
                              size_t n);

#endif
