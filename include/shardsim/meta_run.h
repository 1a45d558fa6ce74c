/* meta_run.h - one training step of the real model and strategy code on the
 * meta backend, for representative ranks of a world of any size (`shardsim compare`).
 *
 * What it is: the trainer's step (src/train/step.c: model forward, backward, the
 * strategy's gradient reduction and optimizer step, the loss all-reduce)
 * executed by one thread per representative rank on a meta device
 * (device.h: allocations accounted, no memory touched, kernels counted) and
 * a meta communicator (comm_meta.h: collectives counted, nothing moved). Data-
 * parallel ranks are symmetric except for who owns the padding of each
 * flat parameter, so rank 0 and rank N-1 are run; memory and communication
 * are the same on both (the test checks it), FLOPs differ by the padding.
 * The counts are the ones the CPU backend gives for the same configuration,
 * byte for byte (tests/meta/test_meta.c).
 * It also records a timeline: the step cut at every unit's forward and
 * backward and at the optimizer step, with memory per category at each
 * boundary, the peak inside each segment, its FLOPs, its collectives and
 * its kernels with their shapes (for a time model to price).
 * What it is not: a time model (compare's step-time estimate prices these
 * counts), or a trainer (no values are computed).
 */
#ifndef SHARDSIM_META_RUN_H
#define SHARDSIM_META_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/comm.h"
#include "shardsim/device.h"
#include "shardsim/memory_timeline.h"
#include "shardsim/train.h"

/* The largest world a meta run takes: it runs two representative ranks
 * whatever N is, so N is bounded only by what the shard arithmetic and the
 * communicator's split (O(N) per split) keep cheap. */
#define SHS_MAX_META_WORLD 65536

typedef struct {
    /* The job as `shardsim train` would run it: model (GPT config with
     * vocab, or model_file), world_size (1..SHS_MAX_META_WORLD), micro_batch, the
     * strategy config, wrap_min_params (size-based wrapping, GPT only),
     * checkpoint_activations, grad_accum, replicate_below. device_mem is
     * the capacity of the meta device (SIZE_MAX: unlimited, so peaks are
     * measured even when they exceed a real device). Ignored: timeout_ms,
     * poison_freed, reduce_order, memory_timeline, trace (no values exist). */
    shs_train_config_t train;
    /* Training steps to run (0 means 1). Prefetching follows the execution
     * order recorded in the previous step (strategy.h), so the second step
     * is the steady state; the timeline and last_step_comm are the last
     * step's. */
    int steps;
    /* Bytes the GPU ledger's caching allocator model may reserve before it
     * releases its cached segments (device.h shs_device_set_gpu_reserve_limit):
     * the board's memory less the CUDA context and NCCL's buffers. 0: no limit. */
    size_t gpu_reserve_limit;
} shs_meta_config_t;


/* One collective as the representative rank issued it. */
typedef struct {
    shs_coll_op_t op;
    uint64_t bytes;          /* whole buffer (comm.h's stats convention: all_gather and
                              * reduce_scatter N x the per-rank part) */
    int comm_size;           /* ranks in its communicator */
    int group;               /* 0 world, 1 shard group, 2 replica group (hybrid), 3 reshard group
                             * (reshard_after_forward_size): shs_strategy_split's kinds */
    int segment;             /* index into the timeline: the segment that issued it */
    int ahead;               /* 1: a prefetch, issued for a later unit than its segment's (FSDP's
                              * forward_prefetch / backward_prefetch; the strategy marks it with that
                              * unit's name: "bwd/block3") */
} shs_meta_call_t;


/* Kernels of one segment with the same class, name and shape (elementwise
 * and optimizer kernels: the same name), merged: `info` carries the sums
 * of their FLOPs and bytes over `count` launches. */
typedef struct {
    shs_kernel_info_t info;
    uint64_t count;
    int segment;             /* index into the timeline */
} shs_meta_kernel_t;

/* What one representative rank counted. */
typedef struct {
    int rank;
    shs_mem_stats_t mem;         /* device: current and peak per category (peaks over all steps): what
                                  * this process holds */
    shs_gpu_mem_stats_t gpu;     /* the modelled GPU run's ledger (device.h): what its framework holds,
                                  * and the caching allocator model's reserved bytes */
    shs_mem_stats_t host;        /* offload host memory (zeros without offload) */
    shs_comm_stats_t comm;       /* world + sub-communicators, all steps (shs_trainer_comm_stats' sum) */
    shs_comm_stats_t last_step_comm; /* the last step alone */
    shs_kernel_stats_t kernels;  /* device kernels, all steps */
    uint64_t h2d_bytes, d2h_bytes;   /* offload copies, all steps */
    size_t master_bytes;         /* of mem's PARAMS: the f32 master copy beside a 2-byte param dtype
                                  * (shs_strategy_master_bytes) */
    shs_step_segment_t *segments;    /* the last step's timeline */
    int num_segments;
    shs_meta_call_t *calls;      /* the last step's collectives */
    size_t num_calls;
    shs_meta_kernel_t *kernel_log; /* the last step's kernels (device.h's records, merged per segment) */
    size_t num_kernel_log;
} shs_meta_rank_result_t;

typedef struct {
    size_t num_params;           /* Ψ: real parameters (no padding) */
    size_t padded_params;        /* Σ over units of the flat buffer each rank's shard is cut from */
    int num_units;               /* wrap units the strategy sees */
    int world_size;
    int num_ranks;               /* 1 (N = 1) or 2: ranks[0] is rank 0, ranks[1] rank N-1 */
    shs_meta_rank_result_t ranks[2];
} shs_meta_result_t;

/* Run cfg->steps training steps on the meta backend for rank 0 and rank
 * N-1. Fills *out (free with shs_meta_result_free). Errors: SHS_INVALID_ARG
 * (config), SHS_OUT_OF_MEMORY (the meta device's capacity: text names the
 * rank and allocation), SHS_HOST_OOM. */
shs_status_t shs_meta_run(const shs_meta_config_t *cfg, shs_meta_result_t *out);
void shs_meta_result_free(shs_meta_result_t *r);

/* The rank whose modelled GPU peak (gpu.alloc.total_peak) is highest (ties: rank 0's). */
const shs_meta_rank_result_t *shs_meta_worst_rank(const shs_meta_result_t *r);

#endif
