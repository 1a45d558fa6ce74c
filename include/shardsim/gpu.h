/* gpu.h - the GPU generations the step-time model knows: one table of
 * constants per generation (A100, H100 and its 96 GB HBM2e variant, H200),
 * each with its source in
 * src/time/gpu_preset.c, and the check that a GPU has every constant the
 * model needs.
 * What it is not: the model that uses them (step_time.h).
 */
#ifndef SHARDSIM_GPU_H
#define SHARDSIM_GPU_H

#include "shardsim/nccl_model.h"
#include "shardsim/status.h"

typedef struct {
    char name[32];
    int arch;                /* compute capability x 10 (80 Ampere, 90 Hopper) */
    int sms;                 /* streaming multiprocessors */
    double peak_flops_16;    /* dense bf16/f16 tensor FLOP/s */
    double peak_flops_32;    /* dense TF32 tensor FLOP/s (matmuls of an f32 model) */
    double hbm_bw;           /* device memory bytes/s */
    double mem_bytes;        /* device memory */
    double pcie_bw;          /* host<->device bytes/s, one direction */
    double host_bw;          /* host memory bytes/s for one GPU's share of an offloaded optimizer */
    int tile_m, tile_n;      /* a large GEMM's output tile per thread block (cuBLAS/CUTLASS) */
    double gemm_eff;         /* fraction of the peak a large, well-shaped GEMM reaches: the one
                              * constant calibrated per generation (gpu_preset.c says on what) */
    double attn_fwd_eff;     /* FlashAttention-2's best fraction of the 16-bit peak, forward */
    double attn_bwd_eff;     /* the same, backward */
    int attn_block;          /* FlashAttention-2's query / key block (tokens) */
    shs_nccl_topo_t nccl;    /* the node's links as NCCL's search rates them */
} shs_hw_t;

/* Presets "a100", "h100-sxm", "h100-hbm2e", "h200" (constants and sources in
 * src/time/gpu_preset.c). Errors: SHS_INVALID_ARG (unknown name, the list
 * of names in the text). */
shs_status_t shs_hw_preset(const char *name, shs_hw_t *out);
/* Every constant the step-time model divides by or counts with is set
 * (positive; GEMM and attention efficiencies in (0, 1]). Errors:
 * SHS_INVALID_ARG naming the GPU and the first missing constant. */
shs_status_t shs_hw_validate(const shs_hw_t *hw);

#endif
