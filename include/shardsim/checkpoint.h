/* checkpoint.h - sharded training checkpoints: save on N ranks, resume on N'
 * ranks under any stage and shard alignment.
 *
 * What it is: the full training state (every unit's parameters and optimizer
 * state, the step count, which is the data position, the seed, the fp16 loss
 * scaler) written as one file per rank, each holding that rank's shards, plus
 * a text index written last. Resuming reads every shard on the host, checks
 * sizes and CRC-32 checksums, rebuilds each unit's full unsharded arrays
 * (padding dropped) and hands them to every rank's strategy
 * (shs_strategy_load_state), so the stage, world size and alignment of the
 * resumed run are free. The RNG is counter-based from the seed, so there is
 * no other RNG state to save. Format: README.md, "Checkpoints".
 *
 * Crash safety: every file is written as NAME.tmp, fsync'd and renamed; the
 * directory is fsync'd after the rank files and again after the index. Each
 * save uses fresh rank-file names (a new generation), and the index, renamed
 * last, is the commit point: a save that fails or is interrupted leaves the
 * previous checkpoint in the directory loadable. Old generations' files are
 * removed after the new index is durable. One writer per directory at a time.
 *
 * What it is not: a format for other frameworks (see safetensors.h for the
 * weights), or a log of the data itself.
 */
#ifndef SHARDSIM_CHECKPOINT_H
#define SHARDSIM_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/dtype.h"
#include "shardsim/layout.h"
#include "shardsim/lr_schedule.h"
#include "shardsim/optim.h"
#include "shardsim/strategy.h"
#include "shardsim/train.h"

/* The index's format version; version 1 (before the loss scaler's kind and
 * DeepSpeed's fields) is still read, as torch's GradScaler with no
 * DeepSpeed state; versions 1 and 2 (before the lr schedule's line) as saved
 * under a constant lr, the schedule's position being the steps not skipped.
 * Rank files keep their own version, unchanged. */
#define SHS_CHECKPOINT_VERSION 3
#define SHS_CHECKPOINT_MIN_VERSION 1
#define SHS_CHECKPOINT_RANK_FILE_VERSION 1
#define SHS_CHECKPOINT_INDEX "index.txt"      /* the index's file name inside the directory */
#define SHS_CHECKPOINT_HEADER_BYTES 64        /* rank-file header */
#define SHS_CHECKPOINT_MAGIC "SHSHARD1"       /* first 8 bytes of a rank file */

/* What a checkpoint records besides the shards (the index's fields). */
typedef struct {
    const shs_layout_t *layout;  /* units (name, numel) and tensors (name, shape, offset) */
    char model[256];             /* model identity, e.g. "gpt layers=2 heads=4 channels=16 context=16" */
    int world_size;              /* N of the run that saved */
    size_t shard_align;          /* E (elements) of the run that saved; >= 1 */
    shs_strategy_kind_t strategy;
    shs_optim_config_t optim;    /* kind and hyperparameters */
    int state_per_param;         /* f32 optimizer-state arrays per unit (shs_optim_state_per_param) */
    long step;                   /* steps done: the next step reads batch `step` */
    uint64_t seed;               /* initialization and data order */
    int micro_batch, grad_accum; /* B and K of the run that saved (K 0 or 1: none) */
    float clip_norm;             /* <= 0: no clipping */
    int norm_type;               /* 1, 2, -1 (inf); 0 without clipping */
    shs_dtype_t param_dtype;     /* compute dtype (F32, BF16, F16); master weights are f32 */
    shs_dtype_t reduce_dtype;    /* gradient reduction dtype */
    shs_loss_scaler_config_t scaler; /* GradScaler settings (defaults filled in); used with F16 */
    shs_loss_scale_state_t loss_scale;
    shs_lr_schedule_kind_t lr_schedule; /* the schedule's kind (lr_schedule.h) */
    int lr_schedule_known;       /* 0: an index before version 3 (its run had a constant lr) */
    long lr_steps;               /* the schedule's position: optimizer steps applied */
} shs_checkpoint_meta_t;

/* The meta of a running trainer (layout points into the trainer). */
void shs_checkpoint_meta_of(shs_trainer_t *t, shs_checkpoint_meta_t *out);

/* ---- saving ---------------------------------------------------------------- */

/* Save the trainer's full state into directory `dir` (created if missing,
 * one level): every rank writes its own file in parallel, then the index is
 * written. Errors: SHS_IO naming the file and the reason (cannot create,
 * write, fsync or rename; `dir` not a directory); SHS_HOST_OOM; a rank's
 * device-copy error. On any error the new files are removed and whatever
 * checkpoint was in `dir` before is intact. */
shs_status_t shs_checkpoint_save(shs_trainer_t *t, const char *dir);

/* The parts of a save, for callers that run their own ranks (the trainer's
 * save is begin, write_rank on every rank thread, commit). begin picks the
 * next generation and prepares the directory; write_rank writes rank
 * `rank`'s file from strategy `s` (all units, params then optimizer state;
 * safe to call from N threads at once, one call per rank); commit checks
 * that every rank wrote, writes the index, removes older generations, and
 * frees the writer. abort removes this save's files and frees it. `meta`
 * (and its layout) must outlive the writer. Errors as shs_checkpoint_save. */
typedef struct shs_checkpoint_writer shs_checkpoint_writer_t;
shs_status_t shs_checkpoint_writer_begin(shs_checkpoint_writer_t **out, const char *dir,
                                         const shs_checkpoint_meta_t *meta);
shs_status_t shs_checkpoint_write_rank(shs_checkpoint_writer_t *w, int rank, shs_strategy_t *s);
shs_status_t shs_checkpoint_writer_commit(shs_checkpoint_writer_t *w);
void shs_checkpoint_writer_abort(shs_checkpoint_writer_t *w);

/* ---- loading --------------------------------------------------------------- */

typedef struct shs_checkpoint shs_checkpoint_t;

/* Read and validate a whole checkpoint into host memory: the index (its own
 * CRC-32, version, every field), each rank file (present, byte size as
 * indexed, CRC-32 as indexed, header fields agreeing with the index, zero
 * padding), and rebuild every unit's full parameters and optimizer state
 * (numel elements each, padding dropped). Errors: SHS_IO (missing or
 * unreadable file), SHS_PARSE (malformed index or header, size or checksum
 * mismatch), SHS_HOST_OOM; the text names the file and what is wrong. */
shs_status_t shs_checkpoint_open(shs_checkpoint_t **out, const char *dir);
void shs_checkpoint_close(shs_checkpoint_t *ck);
/* The index's fields (layout owned by ck). */
const shs_checkpoint_meta_t *shs_checkpoint_meta(const shs_checkpoint_t *ck);
/* Unit `unit`'s full parameters (numel floats) and optimizer state
 * (state_per_param arrays of numel floats one after the other; NULL when 0). */
const float *shs_checkpoint_params(const shs_checkpoint_t *ck, int unit);
const float *shs_checkpoint_state(const shs_checkpoint_t *ck, int unit);

/* Whether a run described by `run` may continue from ck. Must match: the
 * model and layout (unit names and sizes, tensor names, shapes, offsets),
 * the optimizer kind and every hyperparameter (bit for bit), the seed,
 * gradient clipping (max norm, norm type), the param and reduce dtypes,
 * with f16 the loss-scaler settings, and the lr schedule's kind (its
 * parameters are the run's, as DeepSpeed and torch take them from the
 * config and keep only the position in a checkpoint). May differ: world size, strategy,
 * shard alignment, micro-batch and gradient accumulation (data order then
 * follows the new run's N·B·K; keep that product to continue on the same
 * data), replication, buckets, device memory, timeouts. Errors:
 * SHS_INVALID_ARG naming the first field that differs and both values. */
shs_status_t shs_checkpoint_check_compatible(const shs_checkpoint_t *ck, const shs_checkpoint_meta_t *run);

/* On a rank: set every unit of strategy `s` from ck (each rank keeps what it
 * holds; no communication). */
shs_status_t shs_checkpoint_load_rank(const shs_checkpoint_t *ck, shs_strategy_t *s);

/* Open `dir`, check it against the trainer, and only then load it on every
 * rank and set the steps done, loss scale and lr schedule position. Errors: those of open and
 * check_compatible, before any of the trainer's state is touched; a device
 * copy failing during the load itself (the trainer is then unusable). */
shs_status_t shs_checkpoint_resume(shs_trainer_t *t, const char *dir);

/* CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320, as zlib's crc32()):
 * continue `crc` (0 to start) over n bytes. crc32("123456789") = 0xCBF43926. */
uint32_t shs_crc32(uint32_t crc, const void *data, size_t n);

#endif
