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
 *
 *   HYBRID_SHARD, HYBRID_SHARD_ZERO2 (FSDP's hybrid sharding, HSDP): the
 *          world is split (shs_comm_split, like ncclCommSplit) into N/G
 *          groups of G consecutive ranks; each group shards as ZeRO-3 / ZeRO-2
 *          among its G ranks and the groups are replicas. A unit's gradient is
 *          reduce-scattered within the group, then the shard is all-reduced
 *          across the replicas (rank r's replica peers: r mod G equal).
 *          NOT bit-identical to DDP when 1 < G < N: the sum over ranks is
 *          taken as a sum of group sums, ((x0+x1)+(x2+x3)), not DDP's
 *          (((x0+x1)+x2)+x3); G = N (one replica) equals ZeRO-3 / ZeRO-2 and
 *          G = 1 equals DDP, bit for bit. Replicas stay bit-identical.
 *
 * Units marked replicated in the layout (small ones, --replicate-below) are
 * held whole on every rank under every stage and all-reduced as under DDP
 * (DeepSpeed's persistent small parameters; FSDP's ignored modules).
 * Gradient accumulation follows torch's no_sync(): with sync off, backward
 * only accumulates locally (ZeRO-2/3 keep the unit's full gradient across
 * micro-batches); the micro-batch with sync on reduces the sum.
 * Mixed precision follows FSDP's MixedPrecision(param_dtype, reduce_dtype):
 * f32 master parameters stay on the shards and the optimizer updates them;
 * the model computes with parameters rounded to param_dtype (ZeRO-3
 * all-gathers them in param_dtype, so the bytes moved halve; ZeRO-1/2 keep
 * f32 master shards plus a full replica in param_dtype, re-gathered in
 * param_dtype after each step, as DeepSpeed's 16-bit ZeRO-1/2 do: 2 bytes
 * per parameter replicated instead of 4; ZeRO-3 and hybrid_shard keep their
 * shard in param_dtype beside the f32 master shard, as DeepSpeed's 16-bit
 * ZeRO-3 does, unless the shard is offloaded). So model states are the ZeRO
 * paper's (2 + 2 + K) Psi forms (K = 12 for AdamW: f32 master, m, v).
 * Gradients are stored, accumulated and reduced in grad_accum_dtype
 * (DeepSpeed's data_types.grad_accum_dtype; default param_dtype):
 *   param_dtype (default): backward accumulates a unit's micro-batch into an
 *          f32 working copy of the stored gradient, rounded back to
 *          param_dtype when the unit's backward ends (acc = (t)(acc + g));
 *   f32 with a 2-byte param_dtype: an f32 accumulation buffer; each
 *          micro-batch's gradient is rounded to param_dtype and added in f32
 *          (acc = acc + (f32)(t)g), DeepSpeed's fp32 accumulation.
 * The gradient is reduced in reduce_dtype (default: param_dtype), each add
 * rounded in that dtype (comm.h); a result in a reduce_dtype other than the
 * gradient's is stored back in the gradient's (DeepSpeed's
 * communication_data_type), and widened to f32 for the optimizer, one unit at
 * a time. The CPU kernels compute in f32, so a unit's f32 working copy of the
 * rounded parameters lives while it is acquired, and of its gradient during
 * its backward (COMM; an emulation cost a GPU would not have). Activations
 * stay f32.
 * With param_dtype f16, dynamic loss scaling follows torch.cuda.amp.GradScaler
 * (init 2^16, growth x2 every 2000 good steps, backoff x0.5): backward runs on
 * loss x scale; after reduction every rank checks its owned gradient for
 * inf/NaN and the flags are OR-ed across ranks (an all-reduce MAX), so every
 * rank skips the step together and changes the scale identically;
 * otherwise gradients are unscaled (x 1/scale in f32) before clipping.
 * Clipping follows torch.nn.utils.clip_grad_norm_: the total p-norm over
 * every gradient element (each counted once: a rank's owned, reduced shard
 * elements; replicated units by rank 0 only; never padding), computed
 * exactly (exact_norm.h) so it is the same bits at every world size and
 * stage; then coef = max_norm / (norm + 1e-6) in f32, and if coef < 1 every
 * gradient element is multiplied by it.
 * Memory categories: persistent params/grads/optimizer state as PARAMS /
 * GRADS / OPTIM; ZeRO-3's gathered parameters, ZeRO-2/3's transient full
 * gradients and the f32 working copies as COMM (all-gather output,
 * reduce-scatter input).
 * Each stage's choices are one row of a table (shs_strategy_stage,
 * src/strategy/stages.c): where two stages differ is where their rows do.
 * What it is not: the model (model.h), the training loop (train.h), or the
 * faults tests plant (src/strategy/strategy_testing.h).
 */
#ifndef SHARDSIM_STRATEGY_H
#define SHARDSIM_STRATEGY_H

#include <stdint.h>

#include "shardsim/comm.h"
#include "shardsim/device.h"
#include "shardsim/layout.h"
#include "shardsim/lr_schedule.h"
#include "shardsim/param_source.h"
#include "shardsim/shard.h"
#include "shardsim/optim.h"

/* The strategies, one row each: enum suffix, name (as options and
 * checkpoints write it). */
#define SHS_STRATEGY_MAP(X)                                                                  \
    X(DDP, "ddp")                                                                            \
    X(ZERO1, "zero1")                                                                        \
    X(ZERO2, "zero2")                                                                        \
    X(ZERO3, "zero3")                                                                        \
    X(HYBRID_SHARD, "hybrid_shard")             /* FSDP HYBRID_SHARD: ZeRO-3 within groups, replicated across */ \
    X(HYBRID_SHARD_ZERO2, "hybrid_shard_zero2") /* FSDP _HYBRID_SHARD_ZERO2: ZeRO-2 within groups, replicated across */

typedef enum {
#define SHS_STRATEGY_ENUM(id, name) SHS_##id,
    SHS_STRATEGY_MAP(SHS_STRATEGY_ENUM)
#undef SHS_STRATEGY_ENUM
    SHS_NUM_STRATEGIES
} shs_strategy_kind_t;

/* CPU offload: NONE; OPTIMIZER (ZeRO-Offload: optimizer state and f32
 * master parameters on the host, each step's reduced gradient range copied
 * to the host, the optimizer run there, the updated range copied back);
 * PARAMS (FSDP CPUOffload(offload_params=True), ZeRO-3 / hybrid_shard only:
 * the parameter shards live on the host too and are copied in before each
 * all-gather). Host memory is accounted apart (shs_strategy_offload_stats). */
typedef enum { SHS_OFFLOAD_NONE = 0, SHS_OFFLOAD_OPTIMIZER = 1, SHS_OFFLOAD_PARAMS = 2 } shs_offload_t;

/* FSDP's BackwardPrefetch: gather the next unit (in reverse forward order)
 * before the current unit's backward computation (PRE), after it (POST, at
 * grads_ready), or only when needed (NONE). */
typedef enum { SHS_PREFETCH_PRE = 0, SHS_PREFETCH_POST = 1, SHS_PREFETCH_NONE = 2 } shs_prefetch_t;
typedef enum { SHS_PHASE_FORWARD, SHS_PHASE_BACKWARD } shs_phase_t;

/* fp16 loss scaling rules. TORCH: torch.cuda.amp.GradScaler (the default).
 * DEEPSPEED: DeepSpeed's DynamicLossScaler (runtime/fp16/loss_scaler.py,
 * update_scale): on an overflow the step is skipped and, while hysteresis is
 * left (counter > 1 and delayed_shift > 1), only the counter drops by one;
 * once it is exhausted the scale becomes max(scale / 2, min_scale), and an
 * overflow with the scale already at min_scale (> 0) stops the run as
 * DeepSpeed's raise_error_at_min_scale does. A good step refills the
 * counter when consecutive_hysteresis is set; the scale doubles (and, without
 * consecutive_hysteresis, the counter refills) when the steps since the last
 * overflow, less one, are a positive multiple of growth_interval
 * (scale_window): the first growth after scale_window + 1 good steps, then
 * every scale_window. STATIC: DeepSpeed's fp16.loss_scale > 0 (LossScaler):
 * a fixed scale; an overflow still skips the step (ZeRO's step() checks for
 * overflow whatever the scaler) and leaves the scale unchanged. */
typedef enum { SHS_SCALER_TORCH = 0, SHS_SCALER_DEEPSPEED = 1, SHS_SCALER_STATIC = 2 } shs_scaler_kind_t;

/* "torch", "deepspeed", "static"; "invalid" otherwise */
const char *shs_scaler_name(shs_scaler_kind_t k);
int shs_scaler_parse(const char *name, shs_scaler_kind_t *out); /* 0 ok, -1 unknown */

/* Loss scaling parameters: torch.cuda.amp.GradScaler's, and DeepSpeed's
 * beside them (kind DEEPSPEED uses init_scale, growth_interval as
 * scale_window, hysteresis, consecutive_hysteresis, min_scale; its factor
 * is 2 both ways, as DeepSpeed's scale_factor; STATIC uses init_scale). */
typedef struct {
    float init_scale;            /* 0: 65536 */
    float growth_factor;         /* 0: 2 (TORCH) */
    float backoff_factor;        /* 0: 0.5 (TORCH) */
    int growth_interval;         /* 0: 2000 (TORCH), 1000 (DEEPSPEED: scale_window) */
    shs_scaler_kind_t kind;      /* 0: TORCH */
    int hysteresis;              /* DEEPSPEED delayed_shift; 0: 2 (DeepSpeed's default) */
    int consecutive_hysteresis;  /* DEEPSPEED: refill the counter on every good step */
    float min_scale;             /* DEEPSPEED floor; 0: none (and no stop at the minimum) */
} shs_loss_scaler_config_t;

/* Its state: identical on every rank. */
typedef struct {
    float scale;                 /* 1 without loss scaling */
    long good_steps;             /* consecutive steps without overflow */
    long skipped_steps;          /* steps skipped for overflow so far */
    /* DEEPSPEED (DynamicLossScaler's fields; untouched by the other kinds) */
    long iter;                   /* cur_iter: scale updates so far (skipped steps included) */
    long last_overflow_iter;     /* -1 before the first overflow */
    int hysteresis;              /* cur_hysteresis: overflows left before the scale drops */
} shs_loss_scale_state_t;

/* Fill the zeros of `c` with its kind's defaults (as above); for kinds
 * other than DEEPSPEED, zero DeepSpeed's fields. */
void shs_loss_scaler_fill_defaults(shs_loss_scaler_config_t *c);
/* The state before the first step: scale init_scale, no steps, DEEPSPEED's
 * counter at hysteresis and last_overflow_iter -1. `c` has its defaults. */
shs_loss_scale_state_t shs_loss_scale_initial(const shs_loss_scaler_config_t *c);
/* The update after one step's overflow check (`overflow` nonzero: inf/NaN
 * somewhere, the step was skipped), by c->kind's rule: skipped_steps and
 * good_steps (consecutive good steps) for every kind, then the scale and
 * DEEPSPEED's counters. Errors: SHS_INVALID_ARG for DEEPSPEED's overflow
 * with hysteresis exhausted and the scale already at min_scale > 0 (where
 * DeepSpeed raises; the text names the iteration); the state is then
 * unchanged but for the step counts. Pure: no communication. */
shs_status_t shs_loss_scale_update(const shs_loss_scaler_config_t *c, shs_loss_scale_state_t *st, int overflow);

/* "ddp", "zero1", "zero2", "zero3", "hybrid_shard", "hybrid_shard_zero2" */
const char *shs_strategy_name(shs_strategy_kind_t k); /* "ddp", "zero1", ...; "invalid" otherwise */
int shs_strategy_parse(const char *name, shs_strategy_kind_t *out); /* 0 ok, -1 unknown */
/* Whether `k` is hybrid sharding (HYBRID_SHARD, HYBRID_SHARD_ZERO2). */
int shs_strategy_is_hybrid(shs_strategy_kind_t k);
/* Hybrid sharding's two splits of the world communicator, G ranks per shard
 * group: split 0 makes the shard groups (G consecutive ranks: color
 * rank / G), split 1 the replica groups (ranks equal mod G: color
 * rank mod G); the key is the rank. Returns `rank`'s color, *key its key. */
int shs_strategy_hybrid_color(int G, int split_index, int rank, int *key);


/* The framework whose GPU run a strategy models, for the device's GPU ledger
 * (device.h: what the modelled GPU holds, beside what this process holds).
 * It changes no value, no collective and no byte of the device's own ledger:
 * only how many bytes the GPU ledger counts for a buffer:
 *   TORCH      PyTorch: DDP under autocast (its weight cache holds the
 *              param-dtype copies of a whole unit from its forward to its
 *              backward), FSDP2 fully_shard (the f32 shard is cast for each
 *              all-gather: no persistent param-dtype shard).
 *   DEEPSPEED  DeepSpeed's engine: ZeRO-1/2/3 keep 16-bit parameters (a
 *              replica, a partition), the optimizer reads an f32 copy of
 *              the gradient partition made for the whole step
 *              (single_partition_of_fp32_groups / fp32_partitioned_groups_flat
 *              .grad), stage 0 (BF16_Optimizer) keeps 16-bit parameters
 *              beside the f32 master.
 * In every framework an f32 view of a 16-bit tensor, an f32 working copy of
 * a 16-bit gradient and a rounding temporary count 0 (the GPU computes in
 * the 16-bit dtype), and a gathered unit counts at the param dtype's width. */
#define SHS_FRAMEWORK_MAP(X)                                                                   \
    X(DEFAULT, "default") /* the stage's row (stages.c): ddp torch, zero1/2 deepspeed, zero3 torch */ \
    X(TORCH, "torch")                                                                          \
    X(DEEPSPEED, "deepspeed")

typedef enum {
#define SHS_FRAMEWORK_ENUM(id, name) SHS_FRAMEWORK_##id,
    SHS_FRAMEWORK_MAP(SHS_FRAMEWORK_ENUM)
#undef SHS_FRAMEWORK_ENUM
    SHS_NUM_FRAMEWORKS
} shs_framework_t;

/* "default", "torch", "deepspeed"; "invalid" otherwise. */
const char *shs_framework_name(shs_framework_t f);
/* A sentence naming what the framework `f` (DEFAULT: the stage's) keeps
 * for stage `k`, e.g. "PyTorch FSDP2 fully_shard (MixedPrecisionPolicy)". */
const char *shs_framework_describe(shs_framework_t f, shs_strategy_kind_t k);

/* How a stage reduces a sharded or whole unit's gradient. */
typedef enum {
    SHS_GRAD_ALL_REDUCE,              /* AVG all-reduce of the full gradient (in buckets) */
    SHS_GRAD_REDUCE_SCATTER,          /* AVG reduce-scatter into each rank's shard */
    SHS_GRAD_REDUCE_SCATTER_REPLICAS  /* reduce-scatter within the shard group, then an AVG all-reduce
                                       * of the shard across the replica groups (HSDP) */
} shs_grad_reduce_t;

/* One stage's behaviour: what it shards, how it reduces, when it gathers.
 * The rows are in src/strategy/stages.c, next to the ZeRO paper's
 * definitions; units marked replicated in the layout are held whole under
 * every stage whatever its row says. */
typedef struct {
    int shards_optimizer;             /* optimizer state split over the shard group (ZeRO P_os) */
    int shards_grads;                 /* a unit's reduced gradient kept only as this rank's shard (P_g) */
    int shards_params;                /* f32 parameters kept only as shards, all-gathered before each
                                       * use in forward and backward (P_p) */
    int regathers_params_after_step;  /* full parameters kept, each rank updates its shard and the
                                       * shards are all-gathered after the optimizer step */
    shs_grad_reduce_t reduce;         /* for units this stage shards; whole units are all-reduced */
    shs_framework_t framework;        /* the framework whose GPU run it models by default (TORCH or DEEPSPEED) */
} shs_stage_t;

/* The row of stage `k`, or NULL for a kind out of range. */
const shs_stage_t *shs_strategy_stage(shs_strategy_kind_t k);

#define SHS_DEFAULT_BUCKET_BYTES ((size_t)25 << 20) /* torch DDP bucket_cap_mb = 25 */

/* DeepSpeed's ZeRO granularity (ds_config zero_optimization; read from
 * DeepSpeed's runtime/zero/stage_1_and_2.py, stage3.py and
 * partitioned_param_coordinator.py). Elements, not bytes, as DeepSpeed
 * counts them; 0 leaves the strategy's own per-unit behaviour. They change
 * which collectives carry the bytes and what is held when, never a value.
 *   reduce_bucket    reduce_bucket_size: sharded gradients (ZeRO-2/3) are
 *                    reduce-scattered together, units joining the pending
 *                    bucket until the next would pass this many elements
 *                    (that one starts a new bucket; a unit larger than the
 *                    bucket goes alone), one call per bucket over a buffer
 *                    laid out rank by rank (each rank's part of every unit
 *                    in turn), as __avg_scatter_grads does: the same
 *                    element-wise reductions, so the same bits.
 *   contiguous_gradients  with reduce_bucket: a unit's gradient is copied
 *                    into DeepSpeed's ipg buffer of reduce_bucket elements
 *                    (grad dtype, held throughout; two of them for ZeRO-1/2
 *                    with overlap_comm, stage_1_and_2's double buffer) and
 *                    freed; without it the gradients wait in the bucket.
 *                    (GPU ledger: what DeepSpeed holds.)
 *   allgather_bucket allgather_bucket_size: ZeRO-1/2's re-gather of the
 *                    param-dtype replica after the step runs over the
 *                    rank's whole partition (every unit's shard in turn) in
 *                    max(1, partition x N / allgather_bucket) all-gathers
 *                    (all_gather_dp_groups).
 *   prefetch_bucket  stage3_prefetch_bucket_size: ZeRO-3 gathers the units
 *                    that follow in the recorded order ahead, in forward and
 *                    backward, while the prefetched elements stay within it.
 *   max_live         stage3_max_live_parameters: no prefetch would raise the
 *                    gathered elements above it.
 *   max_reuse        stage3_max_reuse_distance: a unit used again within
 *                    this many gathered elements (its forward, then the same
 *                    unit's backward) stays gathered instead of being freed. */
typedef struct {
    size_t reduce_bucket;
    int contiguous_gradients;
    int overlap_comm;
    size_t allgather_bucket;
    size_t prefetch_bucket;
    size_t max_live;
    size_t max_reuse;
} shs_zero_knobs_t;

typedef struct {
    shs_strategy_kind_t kind;
    size_t bucket_bytes;         /* DDP all-reduce bucket size; 0 = default */
    shs_optim_config_t optim;
    uint64_t seed;               /* parameter initialization */
    size_t shard_align;          /* shard.h alignment E in elements; 0 or 1: none */
    int shard_group_size;        /* hybrid: ranks per shard group (divides N); 0 means N */
    /* When gathered parameters live (ZeRO-3, hybrid_shard; also the rounded
     * copies of mixed precision). They change the order of all-gathers and
     * the peak memory, never the results. */
    int keep_after_forward;      /* reshard_after_forward=False: keep gathered units from forward to
                                  * backward (FSDP SHARD_GRAD_OP); 0 frees after use (FULL_SHARD) */
    int reshard_after_forward_size; /* FSDP2's reshard_after_forward=R (an int): after its forward use a
                                  * gathered unit is resharded over groups of R consecutive ranks (each
                                  * keeps 1/R of it in param_dtype: full_len / R elements) and backward
                                  * all-gathers it within the group (R ranks, in node), not the shard
                                  * group. 1 < R < shard group, R divides it; 0 off; 1 and the shard
                                  * group's size are keep_after_forward and FULL_SHARD. Same values. */
    shs_prefetch_t backward_prefetch; /* default PRE (FSDP's default) */
    int forward_prefetch;        /* gather the next unit (previous forward's order) during forward */
    int limit_all_gathers;       /* at most this many units gathered ahead; 0: no limit */
    shs_offload_t offload;
    float clip_norm;             /* max_norm; <= 0: no clipping */
    int norm_type;               /* 1, 2 (0 means 2), or SHS_NORM_INF (exact_norm.h) */
    shs_dtype_t param_dtype;     /* SHS_F32, SHS_BF16 or SHS_F16; SHS_DTYPE_DEFAULT (0): F32 */
    shs_dtype_t reduce_dtype;    /* SHS_F32, SHS_BF16, SHS_F16; SHS_DTYPE_DEFAULT (0): param_dtype */
    shs_dtype_t grad_accum_dtype; /* gradients stored and accumulated in: param_dtype or SHS_F32;
                                   * SHS_DTYPE_DEFAULT (0): param_dtype */
    shs_loss_scaler_config_t scaler; /* with param_dtype f16; zeros mean GradScaler's defaults */
    shs_framework_t framework;   /* the GPU ledger's framework; DEFAULT: the stage's row */
    shs_zero_knobs_t zero;       /* DeepSpeed's ZeRO granularity (above); zeros: none */
    shs_lr_schedule_t lr_schedule; /* the lr (and OneCycle's betas) of each applied optimizer step
                                  * (lr_schedule.h); zero: optim.lr throughout */
    /* DeepSpeed's gradient averaging (engine.py allreduce_bucket): how the
     * mean over the N data-parallel ranks is taken. Default (both 0): each
     * rank's gradient multiplied by 1/N and summed (comm.h's AVG, NCCL's).
     * prescale_gradients: the same, DeepSpeed's spelling of it, with the
     * 1/N multiply written out before a SUM. gradient_predivide_factor f
     * (!= 0, 1; without prescale): x 1/f before a SUM, x f/N after it.
     * Every stage (all-reduce, reduce-scatter, HSDP's two steps) applies
     * the same multiplies to the same elements, so DDP and ZeRO-1/2/3 stay
     * bit-identical. Details: strategy_reduce.c. */
    int prescale_gradients;
    float gradient_predivide_factor;
} shs_strategy_config_t;

/* The splits of the world communicator a strategy makes, in order (comm.h
 * shs_comm_split): hybrid sharding's shard groups (color rank / G), its
 * replica groups when there is more than one replica (rank mod G), then,
 * with reshard_after_forward_size R, the reshard groups (R consecutive
 * ranks: rank / R). Returns split `split_index`'s kind (1 shard group,
 * 2 replica group, 3 reshard group; 0: no such split) for a world of
 * `world` ranks, and `rank`'s color and key (the rank) in *color, *key. */
int shs_strategy_split(const shs_strategy_config_t *cfg, int world, int split_index, int rank, int *color, int *key);

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

/* Before each forward and each backward: which pass the acquires belong to
 * (execution order recording, prefetch, reshard_after_forward). */
void shs_strategy_set_phase(shs_strategy_t *s, shs_phase_t phase);
/* Before the step's first forward: zero the persistent gradient buffers. */
shs_status_t shs_strategy_begin_step(shs_strategy_t *s);
/* Call tags (comm.h CALL TAGS): the strategy sets the tag of each call it
 * makes (purpose, unit, micro-batch, step) on the communicator it calls,
 * and leaves the last one set. The step they carry is `step` (1-based)
 * from now on; finish_step(s, step) also sets it, and then step + 1 for
 * the next step, so this is needed only to start elsewhere than 1 (a
 * resumed run). No communication. */
void shs_strategy_set_step(shs_strategy_t *s, long step);
/* Before each micro-batch's backward: sync = 0 only accumulates (no_sync),
 * sync = 1 reduces gradients as units finish. The last micro-batch of a
 * step must have sync = 1. Default 1. */
void shs_strategy_set_sync(shs_strategy_t *s, int sync);
/* After the last backward: finish gradient reduction, clip (if configured),
 * run the optimizer step (1-based `step`) on the elements this rank owns,
 * and re-gather parameters where the stage keeps them full (ZeRO-1/2: in
 * f32, or into the param-dtype replica).
 * Collective errors propagate. */
shs_status_t shs_strategy_finish_step(shs_strategy_t *s, long step);
/* Loss scaling: the current state (the trainer multiplies the loss gradient
 * by state.scale), and setting it (checkpoint resume). */
shs_loss_scale_state_t shs_strategy_loss_scale(const shs_strategy_t *s);
void shs_strategy_set_loss_scale(shs_strategy_t *s, shs_loss_scale_state_t st);
/* Whether the last finish_step skipped the update for an inf/NaN gradient. */
int shs_strategy_step_skipped(const shs_strategy_t *s);
/* The lr schedule's position: optimizer steps applied so far (an fp16
 * overflow's skipped step does not count, as DeepSpeed's engine and the HF
 * Trainer step their schedulers), and setting it (checkpoint resume). The
 * lr the last applied step used (0 before the first). No communication. */
long shs_strategy_lr_steps(const shs_strategy_t *s);
void shs_strategy_set_lr_steps(shs_strategy_t *s, long applied);
double shs_strategy_last_lr(const shs_strategy_t *s);
/* The total gradient norm of the last finish_step (before clipping), or -1
 * when clipping is off. The same on every rank. */
float shs_strategy_grad_norm(const shs_strategy_t *s);
/* Add the traffic of the strategy's own sub-communicators (hybrid sharding's
 * shard and replica groups, the reshard groups) to *acc; the world communicator's is not
 * included. */
void shs_strategy_add_comm_stats(const shs_strategy_t *s, shs_comm_stats_t *acc);
/* This rank's shard of unit `unit` within its shard group (offset, size,
 * valid over the group's padded flat buffer: N-way for ZeRO, G-way for
 * hybrid) and its replica index (0 except hybrid: the group index). */
void shs_strategy_shard_info(const shs_strategy_t *s, int unit, shs_shard_t *shard, int *replica);
/* Offload: bytes copied host->device and device->host so far (parameters,
 * gradients), and the host memory in use by category (zeros without
 * offload). */
void shs_strategy_offload_stats(const shs_strategy_t *s, uint64_t *h2d_bytes, uint64_t *d2h_bytes,
                                shs_mem_stats_t *host);
/* Whether this rank holds unit `unit`'s full f32 parameters (DDP, ZeRO-1/2
 * in f32, replicated units) rather than only an f32 shard (ZeRO-3; ZeRO-1/2
 * with a 2-byte param dtype, whose full copy is in that dtype). */
int shs_strategy_holds_full(const shs_strategy_t *s, int unit);
/* Device bytes of this rank's f32 parameters that are the optimizer's master
 * copy beside a param-dtype copy (a 2-byte param dtype: every f32 parameter
 * buffer on the device), 0 with param dtype f32 (the parameters are their own
 * master). The ZeRO paper counts these with the optimizer states (K). */
size_t shs_strategy_master_bytes(const shs_strategy_t *s);

/* Copy this rank's shard of unit `unit`'s parameters (shs_shard_of(numel, N,
 * rank, align): size S, padding included, zeros past numel) to host `out`
 * (S floats). Needs no communication for any strategy. */
shs_status_t shs_strategy_read_shard(shs_strategy_t *s, int unit, float *out);

/* Checkpointing. Number of f32 optimizer-state values per element. */
int shs_strategy_state_per_param(const shs_strategy_t *s);
/* This rank's shard (as read_shard) of unit `unit`'s parameters to host
 * `params` (S floats) and of its optimizer state to host `state`
 * (state_per_param arrays of S floats one after the other, [exp_avg |
 * exp_avg_sq] for AdamW; zeros in padding). Units held whole give the same
 * shard range, so every rank's part has the same form at any stage. No
 * communication. `state` may be NULL when state_per_param is 0. */
shs_status_t shs_strategy_read_state(shs_strategy_t *s, int unit, float *params, float *state);
/* Set unit `unit`'s parameters and optimizer state from the full unsharded
 * host arrays `params` (numel floats) and `state` (state_per_param arrays of
 * numel floats one after the other); each rank keeps the part it holds. No
 * communication. Errors: none beyond device copies. */
shs_status_t shs_strategy_load_state(shs_strategy_t *s, int unit, const float *params, const float *state);

/* For units this rank holds whole (shs_strategy_holds_full): copy this
 * rank's full copy of unit `unit` (numel floats) to host `out`. Otherwise
 * SHS_UNSUPPORTED (ZeRO-3 holds only its shard). */
shs_status_t shs_strategy_read_full(shs_strategy_t *s, int unit, float *out);

#endif
