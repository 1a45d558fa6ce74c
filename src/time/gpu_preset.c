/* gpu_preset.c - one table of constants per GPU generation (gpu.h), each
 * with its source. GB = 1e9 bytes, Gb/s = 1e9 bits/s; "per direction" is
 * half the bidirectional figure NVIDIA quotes.
 *
 *   compute, memory   NVIDIA A100 datasheet (80 GB SXM4) and whitepaper
 *                     (2020): 108 SMs, BF16 dense 312 TFLOP/s, TF32 156,
 *                     HBM2e 2.039 TB/s. H100 datasheet and whitepaper
 *                     (2023), SXM5: 132 SMs, BF16 dense 989.4 TFLOP/s
 *                     (1979 with sparsity), TF32 494.7, HBM3 3.35 TB/s,
 *                     80 GB. H200 datasheet (2024): H100's SMs and tensor
 *                     throughput, HBM3e 4.8 TB/s, 141 GB. H100 with 96 GB
 *                     HBM2e at 2.4 TB/s and a 500 W limit (Meta's Grand
 *                     Teton hosts: pytorch/torchtitan
 *                     benchmarks/llama3_h100_202412_torchtitan.md, whose
 *                     footnote puts its peak "between SXM and NVL"): the
 *                     middle of SXM5's 989.4 and H100 NVL's 835.5 BF16 dense
 *                     TFLOP/s (NVL datasheet: 1,671 with sparsity), 912.5,
 *                     TF32 half that; the H100's SMs, links and calibrated
 *                     GEMM efficiency (the same generation).
 *   host links        PCIe Gen4 x16 32 GB/s (A100), Gen5 x16 64 GB/s (H100,
 *                     H200) per direction; host memory 100 GB/s for one
 *                     GPU's share of the CPU optimizer pass (a 2-socket
 *                     server has ~600-900 GB/s for 8 GPUs): an assumption.
 *   GEMM tile         256 x 128 outputs per thread block, the largest CTA
 *                     tile cuBLAS and CUTLASS use for 16-bit GEMMs on
 *                     Ampere and Hopper (NVIDIA, "Matrix Multiplication
 *                     Background User's Guide", tile and wave quantization).
 *   GEMM efficiency   the one calibrated constant per generation: the
 *                     fraction of the 16-bit peak a large GEMM reaches in a
 *                     real training run, calibrated so that one published
 *                     row is met (A100: llm-foundry's MPT-7B, 8 x A100-80GB,
 *                     seq 2048, micro-batch 6, 4641 tokens/s/GPU; H100 and
 *                     H200: MPT-7B, 8 x H100, seq 2048, micro-batch 6,
 *                     10643 tokens/s/GPU; mosaicml/llm-foundry
 *                     scripts/train/benchmarking/README.md). Every other
 *                     published row is a prediction (tests/time).
 *   attention         FlashAttention-2 (Dao 2023, "FlashAttention-2: Faster
 *                     Attention with Better Parallelism and Work
 *                     Partitioning", §4.1): up to 73% of the A100's peak in
 *                     the forward pass and 63% in the backward pass (head
 *                     dim 128, long sequences); on H100 up to 335 TFLOP/s
 *                     forward + backward without Hopper-specific
 *                     instructions: 335 / 989.4 = 0.339 for both. Blocks of
 *                     128 queries / keys (the paper's block size for head
 *                     dim 128).
 *   NCCL              what NCCL's topology search yields on the reference
 *                     node. Within a node 24 ring channels, as NCCL's logs
 *                     show them ("Channel 00/24" on one 8 x H100 node,
 *                     NVIDIA/nccl issue #1705; "Channel 23/24" on HGX A100,
 *                     NVIDIA/nccl-tests issue #100), sharing maxBw = NVLinks
 *                     x NCCL's per-link bandwidth (src/graph/topo.h; A100:
 *                     12 x SM80_NVLINK_BW 20 = 240 GB/s, 10 per channel;
 *                     H100: 18 x SM90_NVLINK_BW 20.6 = 370.8, of which 24
 *                     channels of 15, a sm90SpeedArrayIntra speed, use 360).
 *                     Between nodes 8 NICs per node, one ring per NIC,
 *                     doubled (the 16 channels of NVIDIA/nccl-tests issue
 *                     #213's two H100 nodes)
 *                     (DGX A100: 8 ConnectX-6 HDR 200 Gb/s = 25 GB/s, rated
 *                     24 by speedArrayInter; DGX H100 / H200: 8 ConnectX-7
 *                     NDR 400 Gb/s = 50 GB/s, rated 48 by
 *                     sm90SpeedArrayInter). CPUs: DGX A100 AMD EPYC 7742
 *                     (NCCL's AMD rows), DGX H100 / H200 Intel Xeon. LL128
 *                     on (NCCL's default on NVLink Ampere / Hopper).
 * What it is not: a measurement of any machine.
 */
#include "shardsim/gpu.h"

#include <string.h>

#define A100_NCCL {.arch = 80, .channels_intra = 24, .bw_intra = 10, .gpus_per_node = 8, .nics_per_node = 8, \
                   .nic_gbs = 24, .cpu_amd = 1, .ll128 = 1}
#define H100_NCCL {.arch = 90, .channels_intra = 24, .bw_intra = 15, .gpus_per_node = 8, .nics_per_node = 8, \
                   .nic_gbs = 48, .cpu_amd = 0, .ll128 = 1}

/* The calibrated constants (see above; tests/time/test_published.c checks the rows). */
#define A100_GEMM_EFF 0.722
#define H100_GEMM_EFF 0.571

shs_status_t shs_hw_preset(const char *name, shs_hw_t *out) {
    static const shs_hw_t presets[] = {
        {.name = "a100", .arch = 80, .sms = 108, .peak_flops_16 = 312e12, .peak_flops_32 = 156e12, .hbm_bw = 2.039e12,
         .mem_bytes = 80e9, .pcie_bw = 32e9, .host_bw = 100e9, .tile_m = 256, .tile_n = 128,
         .gemm_eff = A100_GEMM_EFF, .attn_fwd_eff = 0.73, .attn_bwd_eff = 0.63, .attn_block = 128, .nccl = A100_NCCL},
        {.name = "h100-sxm", .arch = 90, .sms = 132, .peak_flops_16 = 989.4e12, .peak_flops_32 = 494.7e12,
         .hbm_bw = 3.35e12, .mem_bytes = 80e9, .pcie_bw = 64e9, .host_bw = 100e9, .tile_m = 256, .tile_n = 128,
         .gemm_eff = H100_GEMM_EFF, .attn_fwd_eff = 335 / 989.4, .attn_bwd_eff = 335 / 989.4, .attn_block = 128,
         .nccl = H100_NCCL},
        {.name = "h100-hbm2e", .arch = 90, .sms = 132, .peak_flops_16 = 912.45e12, .peak_flops_32 = 456.225e12,
         .hbm_bw = 2.4e12, .mem_bytes = 96e9, .pcie_bw = 64e9, .host_bw = 100e9, .tile_m = 256, .tile_n = 128,
         .gemm_eff = H100_GEMM_EFF, .attn_fwd_eff = 335 / 989.4, .attn_bwd_eff = 335 / 989.4, .attn_block = 128,
         .nccl = H100_NCCL},
        {.name = "h200", .arch = 90, .sms = 132, .peak_flops_16 = 989.4e12, .peak_flops_32 = 494.7e12,
         .hbm_bw = 4.8e12, .mem_bytes = 141e9, .pcie_bw = 64e9, .host_bw = 100e9, .tile_m = 256, .tile_n = 128,
         .gemm_eff = H100_GEMM_EFF, .attn_fwd_eff = 335 / 989.4, .attn_bwd_eff = 335 / 989.4, .attn_block = 128,
         .nccl = H100_NCCL},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) {
            *out = presets[i];
            return SHS_OK;
        }
    return shs_set_error(SHS_INVALID_ARG, "unknown GPU preset '%s' (a100, h100-sxm, h100-hbm2e, h200)", name);
}

shs_status_t shs_hw_validate(const shs_hw_t *hw) {
    const struct {
        const char *what;
        double v, max;
    } need[] = {
        {"SM count", hw->sms, 0},
        {"16-bit peak FLOP/s", hw->peak_flops_16, 0},
        {"TF32 peak FLOP/s", hw->peak_flops_32, 0},
        {"HBM bandwidth", hw->hbm_bw, 0},
        {"PCIe bandwidth", hw->pcie_bw, 0},
        {"host memory bandwidth", hw->host_bw, 0},
        {"GEMM tile rows", hw->tile_m, 0},
        {"GEMM tile columns", hw->tile_n, 0},
        {"GEMM efficiency", hw->gemm_eff, 1},
        {"attention forward efficiency", hw->attn_fwd_eff, 1},
        {"attention backward efficiency", hw->attn_bwd_eff, 1},
        {"attention block", hw->attn_block, 0},
        {"NCCL channels within a node", hw->nccl.channels_intra, 0},
        {"NCCL bandwidth per channel", hw->nccl.bw_intra, 0},
        {"GPUs per node", hw->nccl.gpus_per_node, 0},
        {"NICs per node", hw->nccl.nics_per_node, 0},
        {"NIC bandwidth", hw->nccl.nic_gbs, 0},
        {"compute capability", hw->arch, 0},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!(need[i].v > 0) || (need[i].max > 0 && need[i].v > need[i].max))
            return shs_set_error(SHS_INVALID_ARG, "GPU '%s' has no %s (got %g; the step-time model needs a value%s)",
                                 hw->name, need[i].what, need[i].v, need[i].max > 0 ? " in (0, 1]" : " > 0");
    if (hw->nccl.channels_intra >= hw->sms)
        return shs_set_error(SHS_INVALID_ARG, "GPU '%s': %d NCCL channels leave none of its %d SMs to compute",
                             hw->name, hw->nccl.channels_intra, hw->sms);
    return SHS_OK;
}
