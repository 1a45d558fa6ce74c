/* train.h - the training job: a GPT trained data-parallel on a world of
 * simulated GPUs under one strategy, step by step, plus the bit-for-bit
 * comparison of two runs' parameters.
 *
 * What it is: the loop that ties world.h, data.h, model.h and strategy.h
 * together. Each step every rank takes its slice of the global batch
 * (data.h), runs forward and backward, and the strategy reduces gradients
 * and updates parameters. The reported loss is the mean over the global
 * batch: each rank's mean, averaged over ranks by an all-reduce (AVG).
 * What it is not: the command line (sim/).
 */
#ifndef SHARDSIM_TRAIN_H
#define SHARDSIM_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/comm.h"
#include "shardsim/data.h"
#include "shardsim/device.h"
#include "shardsim/gpt.h"
#include "shardsim/llama.h"
#include "shardsim/memory_timeline.h"
#include "shardsim/trace_record.h"
#include "shardsim/model_file.h"
#include "shardsim/world.h"
#include "shardsim/strategy.h"

/* How a step's loss is normalized over its token losses, with S_i and n_i
 * the loss sum and the count of counted targets (not SHS_IGNORE_INDEX) of
 * micro-batch i of the step's global batch (K per rank, N ranks):
 * - PER_MICRO_BATCH: mean_i(S_i / n_i), each micro-batch's mean averaged
 *   over micro-batches and ranks: what torch's `(loss / K).backward()` under
 *   DDP gives, and what Hugging Face transformers did before its fix
 *   (transformers#34242; #37474 for data parallelism): micro-batches with
 *   few real tokens weigh as much as full ones.
 * - GLOBAL_TOKENS: sum_i S_i / sum_i n_i, every real token of the global
 *   batch weighs the same (transformers' num_items_in_batch). The count
 *   sum_i n_i is all-reduced (SUM, i64, tag token-count) over the ranks
 *   before the first backward of the step, as transformers gathers
 *   num_items_in_batch across data-parallel ranks: a real collective, so
 *   traces and meta runs see it. Micro-batch k's backward then gets
 *   dloss = scale * N * n_k / G (G = sum_i n_i): d(step loss)/d(micro
 *   mean) = n_k / G, times N because the gradient reduction averages over
 *   the N ranks, times the fp16 loss scale; rounded once from f64. Every
 *   stage gets the same dloss, so DDP and ZeRO-1/2/3 stay bit-identical;
 *   world sizes and accumulation factors that split the same global batch
 *   differently agree up to the reduction order. The reported loss is
 *   sum over ranks (SUM all-reduce) of sum_k mean_k * n_k / G.
 * - DEFAULT: PER_MICRO_BATCH for the stream sampler (no ignored targets:
 *   both are the same mean, and the run stays bit-identical to before),
 *   GLOBAL_TOKENS with documents (--pack, --pad), as fixed transformers. */
typedef enum {
    SHS_LOSS_NORM_DEFAULT = 0,
    SHS_LOSS_NORM_PER_MICRO_BATCH,
    SHS_LOSS_NORM_GLOBAL_TOKENS,
} shs_loss_norm_t;

/* The longest context (T) a job takes, whatever the model allows. */
#define SHS_TRAIN_MAX_CONTEXT 65536

/* Which network a job trains (model_file, when set, overrides it). */
typedef enum {
    SHS_ARCH_GPT = 0,            /* gpt.h, shaped by `model` */
    SHS_ARCH_LLAMA,              /* llama.h, shaped by `llama` (context: model.context) */
} shs_model_arch_t;

typedef struct {
    shs_gpt_config_t model;      /* the GPT; only model.context (T) is used with a model file or a Llama */
    shs_model_arch_t arch;       /* SHS_ARCH_GPT (0) or SHS_ARCH_LLAMA */
    shs_llama_config_t llama;    /* with arch SHS_ARCH_LLAMA: the Llama's shape */
    const shs_model_file_t *model_file; /* NULL: the GPT; else this described model (outlives the trainer) */
    int world_size;              /* N ranks */
    int micro_batch;             /* B sequences per rank per step */
    shs_strategy_config_t strategy; /* the strategy as shs_strategy_create takes it (kind, optimizer,
                                  * sharding, prefetch, offload, clipping, precision, loss scaling);
                                  * its seed also seeds the data */
    size_t wrap_min_params;      /* --wrap size:N (GPT and Llama): consecutive blocks grouped into one flat
                                  * parameter until it holds >= N elements (FSDP's
                                  * size_based_auto_wrap_policy(min_num_params=N)); 0: one unit per block */
    size_t device_mem;           /* bytes per rank; SIZE_MAX unlimited */
    int timeout_ms;              /* collective timeout; <= 0 default */
    int grad_accum;              /* K micro-batches per step, no_sync until the last; 0 or 1: none */
    size_t replicate_below;      /* units with fewer elements stay unsharded (replicated); 0: none */
    int memory_timeline;         /* record rank 0's memory per step phase (memory_timeline.h) */
    int poison_freed;            /* debugging: fill freed COMM buffers with NaN (device.h) */
    int checkpoint_activations;  /* --checkpoint-activations: recompute each block in backward */
    shs_recompute_t recompute;   /* --recompute-granularity, --ac-mode (GPT and Llama): NONE, FULL,
                                  * SELECTIVE, SELECTIVE_OP, EVERY_N (gpt.h); checkpoint_activations != 0
                                  * means FULL */
    int recompute_every;         /* --selective-ac-option N: with EVERY_N, N >= 1 */
    shs_attention_kind_t attention; /* --attention eager | flash (GPT and Llama) */
    shs_dtype_t autocast;        /* --autocast bf16 | f16 (GPT and Llama; gpt.h, llama.h); DEFAULT: off */
    shs_loss_kernel_t loss_kernel; /* the GPU ledger's loss kernel (gpt.h; compare --loss-kernel) */
    float dropout;               /* --dropout P (GPT only), masks seeded by strategy.seed */
    shs_reduce_order_t reduce_order; /* --reduce-order: all_reduce/reduce_scatter order (comm.h); 0 = rank */
    shs_world_backend_t backend; /* --backend cuda: devices and communicator (world.h); 0 = CPU threads */
    int gpu;                     /* --gpu: the CUDA backends' (first) GPU index */
    shs_comm_t *comm;            /* NULL: world_size rank threads; else this process runs one rank of this
                                  * communicator (e.g. comm_mpi.h; borrowed, outlives the trainer; world_size
                                  * must equal its size): see shs_world_create_local */
    shs_data_mode_t data_mode;   /* --pack / --pad: documents cut at doc_sep (data.h); 0: the stream sampler.
                                  * PACK needs per-document attention (the Llama model; the GPT and model
                                  * files refuse it); both need SHS_KERNELS_IGNORE_INDEX on the device */
    uint8_t doc_sep;             /* --doc-sep: the documents' separator byte (with data_mode) */
    shs_loss_norm_t loss_norm;   /* --loss-norm (see shs_loss_norm_t) */
    shs_trace_recorder_t *trace; /* NULL: none; else every rank's world communicator is attached to this
                                  * recorder (trace_record.h) before the strategy splits it, so every
                                  * collective is recorded, sub-communicators' included (borrowed: must
                                  * outlive the trainer's last collective) */
} shs_train_config_t;

/* The defaults of `shardsim train`: L=4, NH=4, C=128, T=64, N=4, B=4,
 * zero3, AdamW lr 1e-3 (wd 0.01), seed 1337, unlimited device memory. */
shs_train_config_t shs_train_default_config(void);

/* cfg->loss_norm with DEFAULT resolved (see shs_loss_norm_t). */
shs_loss_norm_t shs_train_loss_norm(const shs_train_config_t *cfg);

typedef struct shs_trainer shs_trainer_t;

/* Start the world and set up every rank (parameters initialized from the
 * seed, optimizer state, activations). The corpus must outlive the trainer.
 * Errors: SHS_INVALID_ARG (config; context longer than the corpus; --pack
 * with a model lacking per-document attention),
 * SHS_OUT_OF_MEMORY (a rank's device is too small; text names the rank),
 * SHS_HOST_OOM, SHS_SYSTEM. */
shs_status_t shs_trainer_create(shs_trainer_t **out, const shs_train_config_t *cfg, const shs_corpus_t *corpus);
void shs_trainer_destroy(shs_trainer_t *t);

/* One training step on every rank; *loss gets the global mean loss of the
 * step's batch (computed before the update). Errors from any rank propagate
 * (collective mismatch, timeout, abort, out of memory). With documents,
 * SHS_INVALID_ARG naming the step when the loss has no mean: under
 * GLOBAL_TOKENS a global batch without a real target (every rank returns
 * it, after the token count), under PER_MICRO_BATCH a micro-batch without
 * one (named by rank and micro-batch; found from the data before any rank
 * runs the step). */
shs_status_t shs_trainer_step(shs_trainer_t *t, float *loss);

/* The ranks this process runs, [first, first + count) (shs_world_local_ranks):
 * with cfg.comm set, per-rank getters below answer for these ranks only. */
void shs_trainer_local_ranks(const shs_trainer_t *t, int *first, int *count);

const shs_layout_t *shs_trainer_layout(const shs_trainer_t *t);
/* The corpus's documents (data.h) with data_mode PACK or PAD; else NULL. */
const shs_documents_t *shs_trainer_documents(const shs_trainer_t *t);
int shs_trainer_world_size(const shs_trainer_t *t);
const shs_train_config_t *shs_trainer_config(const shs_trainer_t *t);
/* Steps completed (the data position: step s reads batch s). */
long shs_trainer_steps_done(const shs_trainer_t *t);
/* Global gradient norm of the last step (as clipped against), or -1 when
 * clipping is off. */
float shs_trainer_last_grad_norm(const shs_trainer_t *t);

/* For extensions that act on every rank (checkpoints): run job(ctx, arg) on
 * every rank thread and wait (shs_world_run), and the strategy of a rank
 * (valid inside such a job). */
shs_status_t shs_trainer_run(shs_trainer_t *t, shs_rank_fn job, void *arg);
shs_strategy_t *shs_trainer_strategy(shs_trainer_t *t, int rank);
/* Continue from step `steps_done` (after loading a checkpoint). */
void shs_trainer_set_steps_done(shs_trainer_t *t, long steps_done);

/* Dynamic loss scaling state (fp16; strategy.h, torch.cuda.amp.GradScaler):
 * the current scale and the count of consecutive steps without overflow.
 * Without fp16 the scale is 1 and never changes. Part of a checkpoint.
 * Get reads rank 0 (all ranks agree); set writes every rank. */
shs_loss_scale_state_t shs_trainer_loss_scale(const shs_trainer_t *t);
shs_status_t shs_trainer_set_loss_scale(shs_trainer_t *t, shs_loss_scale_state_t st);

/* The lr schedule's position (strategy.h shs_strategy_lr_steps: optimizer
 * steps applied, overflow-skipped steps not counted) and the lr the last
 * applied step used. Part of a checkpoint. Get reads rank 0 (all ranks
 * agree); set writes every rank. */
long shs_trainer_lr_steps(const shs_trainer_t *t);
double shs_trainer_last_lr(const shs_trainer_t *t);
shs_status_t shs_trainer_set_lr_steps(shs_trainer_t *t, long applied);

/* All parameters, unit after unit, each unit as its padded flat buffer
 * (N * S floats; see shard.h), gathered from the ranks' shards without any
 * collective. shs_trainer_snapshot_len() floats. */
size_t shs_trainer_snapshot_len(const shs_trainer_t *t);
shs_status_t shs_trainer_snapshot(shs_trainer_t *t, float *out);

/* Where a rank's full replica first differs from the snapshot. */
typedef struct {
    int rank;            /* -1: every replica matches */
    int unit;
    size_t index;        /* element within the unit */
} shs_replica_diff_t;

/* For stages that keep full parameters on every rank (DDP, ZeRO-1, ZeRO-2),
 * compare every rank's full copy bit for bit with `snapshot` (as filled by
 * shs_trainer_snapshot: each element as its owner holds it). Returns 1 when
 * all replicas match (always for ZeRO-3), 0 with the first difference
 * (lowest rank first), or -1 when a rank failed (shs_last_error()). */
int shs_trainer_check_replicas(shs_trainer_t *t, const float *snapshot, shs_replica_diff_t *diff);

/* Flip the lowest bit of one parameter element in one rank's memory: the
 * highest rank holding it (the owner under ZeRO-3, rank N-1's replica
 * otherwise). A planted fault for testing --check. */
shs_status_t shs_trainer_flip_param_bit(shs_trainer_t *t, int unit, size_t index);

void shs_trainer_mem_stats(const shs_trainer_t *t, int rank, shs_mem_stats_t *out);
/* The modelled GPU run's ledger of `rank`'s device (device.h); zeros for a
 * rank this process does not run. */
void shs_trainer_gpu_mem_stats(const shs_trainer_t *t, int rank, shs_gpu_mem_stats_t *out);
/* With cfg.memory_timeline: rank 0's device memory over the last step, per
 * phase (memory_timeline.h); NULL and *count = 0 otherwise. */
const shs_step_segment_t *shs_trainer_timeline(const shs_trainer_t *t, int *count);
void shs_trainer_comm_stats(const shs_trainer_t *t, int rank, shs_comm_stats_t *out);

/* Where two snapshots first differ. */
typedef struct {
    int unit;            /* -1: no difference */
    int tensor;          /* index into layout->tensors; -1 for padding */
    size_t index;        /* element within the tensor (or within the unit for padding) */
    float a, b;
} shs_param_diff_t;

/* Compare two snapshots of the same layout and world size bit for bit
 * (memcmp semantics: -0.0 != +0.0, NaN payloads count). Also requires every
 * padding element of both to be +0.0. Returns 1 if equal, else 0 with the
 * first difference in *diff. */
int shs_compare_snapshots(const shs_layout_t *layout, int nranks, size_t align, const float *a, const float *b,
                          shs_param_diff_t *diff);

#endif
