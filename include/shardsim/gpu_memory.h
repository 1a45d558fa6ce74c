/* gpu_memory.h - what a GPU run's process holds beyond its tensors, and
 * whether the run fits the board (`shardsim compare`).
 *
 * What it is: per GPU, the constants of a run's fixed memory, each with its
 * source in src/meta/gpu_memory.c: the board's memory as nvidia-smi reports
 * it (memory.total), the CUDA context of a PyTorch process, NCCL's buffers
 * per communicator (NCCL_BUFFSIZE x channels x ring peers, plus NVLink SHARP
 * buffers on NVSwitch boards); and the sum a rank needs: the caching
 * allocator's reserved bytes (device.h's GPU ledger) + the CUDA context +
 * NCCL's buffers, against the board.
 * What it is not: the tensors (the meta run's GPU ledger, meta_run.h) or the
 * time model (estimate.h).
 */
#ifndef SHARDSIM_GPU_MEMORY_H
#define SHARDSIM_GPU_MEMORY_H

#include <stddef.h>

#include "shardsim/meta_run.h"
#include "shardsim/status.h"
#include "shardsim/strategy.h"

/* A GPU's memory constants, bytes; 0: not known for that GPU (the command
 * line must give it: shs_gpu_mem_check names the option). */
typedef struct {
    char name[32];
    double board_bytes;        /* nvidia-smi memory.total (--device-mem) */
    double cuda_context_bytes; /* a PyTorch process's CUDA context (--cuda-context-mib) */
    double nccl_buffsize;      /* NCCL_BUFFSIZE: one channel's buffer per peer (--nccl-buffsize) */
    int nccl_channels;         /* ring channels per communicator (--nccl-channels) */
    double nvls_bytes;         /* NVLink SHARP buffers per communicator; 0: the board has none */
} shs_gpu_mem_preset_t;

/* The preset of `gpu` ("h100-sxm", "h200", "a100", "h100-hbm2e": the last
 * without its board memory). Errors: SHS_INVALID_ARG naming the known ones. */
shs_status_t shs_gpu_mem_preset(const char *gpu, shs_gpu_mem_preset_t *out);
/* SHS_INVALID_ARG naming the option that sets the first constant `p` lacks
 * (board, context, NCCL buffer size or channels), else SHS_OK. */
shs_status_t shs_gpu_mem_check(const shs_gpu_mem_preset_t *p);

/* NCCL's device buffers of one communicator of `nranks` ranks: the ring's
 * NCCL_BUFFSIZE x channels x peers (2, one rank: 0, two ranks: 1; NCCL's
 * Simple-protocol buffers, allocated per channel for each peer it receives
 * from and sends to) plus the NVLink SHARP buffers when the board has them
 * and nranks > 1. Bytes. */
double shs_gpu_nccl_comm_bytes(const shs_gpu_mem_preset_t *p, int nranks);
/* The fixed memory of one rank of `kind` over `world` ranks (hybrid
 * sharding: shard groups of G): the CUDA context and the buffers of every
 * communicator the rank is in (the world's; hybrid also its shard group's
 * and, with more than one replica, its replica group's). Bytes. */
double shs_gpu_fixed_bytes(const shs_gpu_mem_preset_t *p, shs_strategy_kind_t kind, int world, int G);

/* The model-state bytes per rank of the framework's GPU run (device.h's GPU
 * ledger; strategy.h SHS_FRAMEWORK_MAP says what each framework keeps), the
 * peaks of the params, grads and optimizer categories when every unit
 * divides by n: `psi` parameters, `n` the sharding degree (N, or G for
 * hybrid), `spp` optimizer f32 values per parameter, p the param dtype's
 * width, g the gradient's (grad_accum_dtype). Stage (P_os, P_g, P_p) as
 * the ZeRO paper's partitioning; per framework:
 *   params  f32 (the master): 4 psi, sharded 4 psi / n (ZeRO-3; ZeRO-1/2
 *           below f32); the p-byte copy: ZeRO-1/2 below f32 a replica
 *           p psi; DEEPSPEED ZeRO-3 its partition p psi / n and stage 0 its
 *           16-bit model p psi; TORCH none (autocast and FSDP2 cast per use);
 *   grads   g psi, sharded g psi / n; DEEPSPEED with g < 4 adds the
 *           optimizer's f32 copy of its partition, 4 psi (/ n with P_os);
 *   optim   4 spp psi (/ n with P_os).
 * Offloading puts the optimizer state (and with it the step's f32 copy)
 * and, for PARAMS, the f32 parameters on the host: 0 here. `fw` DEFAULT:
 * the stage's. Bytes. */
typedef struct {
    double params, grads, optim;
} shs_gpu_states_t;
shs_gpu_states_t shs_gpu_states(shs_strategy_kind_t kind, shs_framework_t fw, double psi, int n, int spp,
                                shs_offload_t offload, int p, int g);

/* One rank's memory on the board. */
typedef struct {
    double allocated;      /* peak bytes the framework's tensors hold (GPU ledger's total peak) */
    double reserved;       /* peak bytes the caching allocator model reserves */
    double context, nccl;  /* fixed: CUDA context, NCCL buffers */
    double total;          /* reserved + context + nccl: nvidia-smi's memory.used at the peak */
    double board;
    int fits;              /* total <= board */
} shs_gpu_mem_report_t;

void shs_gpu_mem_report(const shs_gpu_mem_preset_t *p, const shs_meta_rank_result_t *r, shs_strategy_kind_t kind,
                        int world, int G, shs_gpu_mem_report_t *out);

#endif
