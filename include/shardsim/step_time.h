/* step_time.h - the time of one training step of what a meta run recorded,
 * on a GPU of gpu.h: each kernel priced by its kind and shape, each
 * collective as NCCL prices it, the two on streams that overlap at a cost.
 *
 * What it is (the constants and their sources in src/time/gpu_preset.c):
 *  - GEMMs: FLOPs / (16-bit or TF32 peak x gemm_eff x q), q the tile and
 *    wave quantization of the output (m x n) over the GPU's SMs: tiles of
 *    tile_m x tile_n (either orientation, the better), waves = ceil(tiles
 *    / SMs), q = m n / (waves x SMs x tile_m x tile_n) (NVIDIA, "Matrix
 *    Multiplication Background User's Guide"); at least the bytes of A, B
 *    and the output at HBM bandwidth. The dtype: the autocast dtype where
 *    autocast is on, else the param dtype (f32: TF32).
 *  - Flash attention: the counted FLOPs (causal pairs) / (16-bit peak x
 *    FlashAttention-2's forward or backward efficiency x q), q the causal
 *    blocks' useful share, T(T+1) / (nb(nb+1) block^2) with nb = ceil(T /
 *    block), times the wave quantization of B NH nb thread blocks over the
 *    SMs. Eager attention: its two batched GEMMs (T x T x HD per head) as
 *    GEMMs, its (T, T) traffic at HBM bandwidth.
 *  - Elementwise kernels (norms, activations, residuals, softmax,
 *    embedding, casts): counted bytes at HBM bandwidth, halved when the
 *    activations are 16-bit (the counts are f32); the optimizer's update:
 *    its f32 bytes at HBM bandwidth.
 *  - Collectives: NCCL's tuning model (nccl_model.h) on the GPU's node,
 *    n ranks on ceil(n / GPUs per node) nodes (a hybrid replica group: the
 *    nodes its members sit on), NCCL's choice of algorithm and protocol
 *    unless forced.
 *  - Overlap: two streams per rank. A unit's all-gathers are issued when
 *    the previous unit's compute starts (the CPU runs a unit ahead of the
 *    GPU: FSDP's pre-forward hook) and must end before its own compute;
 *    all-gathers the strategy prefetches for a later unit (FSDP's
 *    forward_prefetch and BACKWARD_PRE, marked by the meta run: meta_run.h
 *    `ahead`) queue behind them and gate that unit instead; a unit's
 *    reduce-scatter / all-reduce start after its compute, behind the next
 *    unit's all-gathers; optimizer and loss segments overlap nothing.
 *    While a collective runs beside compute, NCCL holds one SM per
 *    channel (one CUDA block per channel: NCCL's NCCL_MIN_NCHANNELS /
 *    NCCL_MAX_NCHANNELS documentation), so the overlapped compute runs at
 *    (SMs - channels) / SMs of its speed: it takes SMs / (SMs - channels)
 *    times as long.
 *  - Offload: PCIe copies and the host's optimizer pass (28 bytes per
 *    element at host bandwidth), after the step's compute.
 *  - MFU = model FLOPs / (step x peak), the model FLOPs 6 Psi' + 12 L C T
 *    per token (PaLM, Chowdhery et al. 2022, App. B; Psi' the parameters a
 *    matmul reads: an untied Llama's input embedding excluded;
 *    recomputation not counted).
 * What it is not: a measurement; no kernel launch or framework (Python)
 * overheads, no congestion between concurrent collectives, no HBM
 * contention between NCCL and compute.
 */
#ifndef SHARDSIM_STEP_TIME_H
#define SHARDSIM_STEP_TIME_H

#include <stdint.h>

#include "shardsim/device.h"
#include "shardsim/gpu.h"
#include "shardsim/meta_run.h"

/* How the kernels of a step run on a GPU. */
typedef struct {
    shs_dtype_t matmul_dtype;  /* SHS_BF16 / SHS_F16: the 16-bit peak; SHS_F32: TF32 */
    int act_bytes;             /* bytes per activation element: 2 or 4 */
    double gemm_eff;           /* the GPU's, or an override */
} shs_kernel_env_t;

/* The kernel environment of a job (the dtypes above) on `hw`; gemm_eff > 0
 * overrides the GPU's. */
shs_kernel_env_t shs_kernel_env(const shs_train_config_t *tc, const shs_hw_t *hw, double gemm_eff);
/* Seconds for `count` launches of kernel `k` (its flops and bytes summed
 * over them, as a meta run's merged records hold them). */
double shs_kernel_time(const shs_hw_t *hw, const shs_kernel_env_t *env, const shs_kernel_info_t *k, uint64_t count);
/* A GEMM's tile and wave quantization q in (0, 1] (above). */
double shs_gemm_quantization(const shs_hw_t *hw, double m, double n);

/* How collectives are priced. */
typedef struct {
    double gemm_eff;           /* 0: the GPU's calibrated value */
    shs_net_algo_t algo;       /* SHS_NUM_ALGOS: NCCL's choice */
    shs_nccl_proto_t proto;    /* SHS_NUM_PROTOS: NCCL's choice */
} shs_time_opts_t;

typedef struct {
    double compute_s;          /* kernels, serialized, at full speed */
    double gemm_s, attention_s, elementwise_s, optimizer_s; /* its parts */
    double comm_s;             /* every collective, serialized */
    double exposed_comm_s;     /* communication the compute did not hide */
    double slowdown_s;         /* compute time added by NCCL's SMs during overlap */
    double offload_s;          /* PCIe copies and the host optimizer pass */
    double step_s;             /* compute + slowdown + exposed + offload */
    double tokens;             /* this rank's tokens per step */
    double model_flops;        /* 6 Psi' + 12 L C T per token, this rank's tokens */
    double mfu;                /* model_flops / (step_s x peak) */
} shs_step_estimate_t;

/* Estimate one step of rank result `r` (the last step's timeline and
 * kernels) for the job `cfg` on `hw`. A rank result without kernel records
 * prices each segment's FLOPs as GEMMs at gemm_eff (q = 1). */
void shs_estimate_step(const shs_meta_config_t *cfg, const shs_meta_result_t *res, const shs_meta_rank_result_t *r,
                       const shs_hw_t *hw, const shs_time_opts_t *opts, shs_step_estimate_t *out);

#endif
