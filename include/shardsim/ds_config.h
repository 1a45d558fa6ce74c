/* ds_config.h - a DeepSpeed configuration file (ds_config.json) read into
 * shardsim's training configuration, with the command line's options taking
 * precedence and every effective setting's origin recorded for the run's
 * header.
 *
 * What it is: the reader (JSON through jansson; duplicate keys refused, as
 * DeepSpeed's own loader does with dict_raise_error_on_duplicate_keys), the
 * mapping of each DeepSpeed key onto shs_train_config_t, and DeepSpeed's
 * batch-size rule. Keys that would change the numbers and that shardsim does
 * not model are refused by name ("ds.json: fp16.auto_cast = true is not
 * modelled ..."); keys that change nothing a simulator computes (logging,
 * monitors, profilers, pinned memory, ...) are accepted and listed as
 * ignored; every other key is refused as unknown. DeepSpeed reads its
 * top-level keys one by one (runtime/config.py, get_scalar_param) and so
 * passes over unknown ones, which lets a misspelt key leave a default in
 * force silently; shardsim refuses unknown keys at every depth.
 * The key-by-key mapping and its sources are in src/train/ds_config.c.
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
    X(INIT_SCALE, "initial loss scale")                        \
    X(GROWTH_INTERVAL, "loss scale growth interval")           \
    X(LOSS_SCALER, "loss scaler")                              \
    X(HYSTERESIS, "loss scale hysteresis")                     \
    X(MIN_LOSS_SCALE, "min loss scale")

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
    SHS_DS_FROM_COMMAND_LINE   /* an option given beside --ds-config */
} shs_ds_source_t;

const char *shs_ds_setting_name(shs_ds_setting_t s);
/* "config", "DeepSpeed default", "derived", "command line", "shardsim default" */
const char *shs_ds_source_name(shs_ds_source_t s);

#define SHS_DS_MAX_NOTES 48

/* A file as read: the values it decides, each with its source (SHARDSIM
 * where it decides nothing), and the keys accepted without effect. */
typedef struct {
    char path[512];
    shs_train_config_t vals;            /* the decided fields (others untouched) */
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
    long train_batch;                   /* train_batch_size; 0: not given */
    int has_micro, has_accum;           /* the file gives these keys (DeepSpeed's "provided") */
    int num_ignored;
    char ignored[SHS_DS_MAX_NOTES][192]; /* "key path (why)" of keys accepted without effect */
    int num_notes;
    char notes[SHS_DS_MAX_NOTES][160];  /* how approximate mappings were made */
} shs_ds_config_t;

/* Read `path`. Errors (each naming the file and the key path): SHS_IO (no
 * such file), SHS_PARSE (malformed JSON with its line; a duplicate key; a
 * value of the wrong type or out of range; "auto", which only the Hugging
 * Face Trainer fills in), SHS_UNSUPPORTED (a key shardsim does not model,
 * or does not know; without jansson: says so). */
shs_status_t shs_ds_config_load(const char *path, shs_ds_config_t *out);

/* Apply `ds` to `cfg`, which holds shardsim's defaults overwritten by the
 * options given on the command line: the settings with given[s] != 0 keep
 * cfg's value (the command line wins), the others take the file's where it
 * decides them. Then DeepSpeed's batch-size rule (runtime/config.py,
 * _set_batch_related_parameters and _batch_assertion) over
 * train_batch_size (file), micro-batch and accumulation (file or command
 * line) and cfg->world_size: of the three, the missing one is derived from
 * the two given (integer division, as DeepSpeed does), only train_batch_size
 * given means accumulation 1, only the micro-batch means accumulation 1;
 * then train_batch_size must equal micro x accumulation x world, else
 * SHS_INVALID_ARG naming the three values and the world. Neither
 * train_batch_size nor a micro-batch: SHS_INVALID_ARG (DeepSpeed's
 * assertion). `given` may be NULL (nothing given). Fills src_out (may be
 * NULL) with each effective setting's source. */
shs_status_t shs_ds_config_apply(const shs_ds_config_t *ds, const int given[SHS_DS_NUM_SETTINGS],
                                 shs_train_config_t *cfg, shs_ds_source_t src_out[SHS_DS_NUM_SETTINGS]);

/* The run's header lines about the config: the effective settings of `cfg`
 * (after apply) with their sources, then the ignored keys and the notes;
 * each line starts with `prefix`. Returns the characters written (as
 * snprintf: the length it needed). */
size_t shs_ds_config_describe(const shs_ds_config_t *ds, const shs_train_config_t *cfg,
                              const shs_ds_source_t src[SHS_DS_NUM_SETTINGS], const char *prefix, char *buf,
                              size_t n);

#endif
