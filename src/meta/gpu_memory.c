/* gpu_memory.c - a GPU run's fixed memory and the fit against the board
 * (gpu_memory.h).
 *
 * Sources of the constants (MiB = 2^20 bytes):
 *   board     nvidia-smi's memory.total. H100 SXM5 80GB ("NVIDIA H100 80GB
 *             HBM3"): 81559 MiB (nvidia-smi with driver 550.90.07 in
 *             wilicc/gpu-burn issue #114). H200 SXM 141GB ("NVIDIA H200"):
 *             143771 MiB (nvidia-smi as public H200 logs print it). A100
 *             SXM4 80GB: 81920 MiB (nvidia-smi of an A800-SXM4-80GB, the
 *             same 80 GiB board, driver 535.86.10, dexmal/dexbotic issue #41).
 *   context   a PyTorch process's CUDA context with lazy module loading
 *             (CUDA_MODULE_LOADING=LAZY, which PyTorch sets by default since
 *             1.13): 287,047,680 bytes, as measured in pytorch/pytorch
 *             pull request #86509 (666,632,192 bytes loading eagerly).
 *   NCCL      NCCL_BUFFSIZE 4 MiB (NCCL's documented default, 4194304 bytes),
 *             one per channel for each ring peer; ring channels: 24 within a
 *             node on H100 (NCCL_DEBUG=INFO "Channel 00/24" on one 8 x H100
 *             node, NVIDIA/nccl issue #1705; as src/net's time model takes
 *             them; H200 the same NVLink 4 board) and on HGX A100 ("Channel
 *             23/24", NVIDIA/nccl-tests issue #100); NVLink
 *             SHARP on NVSwitch Hopper boards: nvlsPerRankSize 201326592
 *             bytes per communicator (NCCL INFO of 8 H100s, NVIDIA/nccl-tests
 *             issue #213), none on A100 (its NVSwitch has no SHARP).
 */
#include "shardsim/gpu_memory.h"

#include <string.h>

#include "shardsim/strategy.h"

#define MIB (1024.0 * 1024.0)
#define TORCH_LAZY_CONTEXT 287047680.0 /* pytorch/pytorch#86509 */
#define NCCL_BUFFSIZE_DEFAULT (4 * MIB) /* NCCL docs: NCCL_BUFFSIZE default 4194304 */
#define NVLS_HOPPER 201326592.0         /* NVIDIA/nccl-tests#213: nvlsPerRankSize */

shs_status_t shs_gpu_mem_preset(const char *gpu, shs_gpu_mem_preset_t *out) {
    static const shs_gpu_mem_preset_t presets[] = {
        {"h100-sxm", 81559 * MIB, TORCH_LAZY_CONTEXT, NCCL_BUFFSIZE_DEFAULT, 24, NVLS_HOPPER},
        {"h200", 143771 * MIB, TORCH_LAZY_CONTEXT, NCCL_BUFFSIZE_DEFAULT, 24, NVLS_HOPPER},
        {"a100", 81920 * MIB, TORCH_LAZY_CONTEXT, NCCL_BUFFSIZE_DEFAULT, 24, 0},
        /* the 96 GB HBM2e H100 of torchtitan's benchmarks (Grand Teton): no nvidia-smi total published,
         * so a run names its board memory (--device-mem); otherwise an H100 */
        {"h100-hbm2e", 0, TORCH_LAZY_CONTEXT, NCCL_BUFFSIZE_DEFAULT, 24, NVLS_HOPPER},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(gpu, presets[i].name)) {
            *out = presets[i];
            return SHS_OK;
        }
    return shs_set_error(SHS_INVALID_ARG, "unknown GPU '%s' (h100-sxm, h200, a100, h100-hbm2e)", gpu);
}

shs_status_t shs_gpu_mem_check(const shs_gpu_mem_preset_t *p) {
    const char *missing = !(p->board_bytes > 0)          ? "its board memory (nvidia-smi memory.total): give --device-mem"
                          : !(p->cuda_context_bytes >= 0) ? "its CUDA context: give --cuda-context-mib"
                          : !(p->nccl_buffsize > 0)      ? "NCCL's buffer size: give --nccl-buffsize"
                          : p->nccl_channels < 1         ? "NCCL's channel count: give --nccl-channels"
                                                         : NULL;
    if (!missing) return SHS_OK;
    return shs_set_error(SHS_INVALID_ARG, "GPU %s lacks %s", p->name, missing);
}

double shs_gpu_nccl_comm_bytes(const shs_gpu_mem_preset_t *p, int nranks) {
    if (nranks < 2) return 0;
    int peers = nranks == 2 ? 1 : 2;
    return p->nccl_buffsize * p->nccl_channels * peers + p->nvls_bytes;
}

double shs_gpu_fixed_bytes(const shs_gpu_mem_preset_t *p, shs_strategy_kind_t kind, int world, int G) {
    double b = p->cuda_context_bytes + shs_gpu_nccl_comm_bytes(p, world);
    if (shs_strategy_is_hybrid(kind) && G > 0 && G < world) {
        b += shs_gpu_nccl_comm_bytes(p, G);
        b += shs_gpu_nccl_comm_bytes(p, world / G);
    }
    return b;
}

shs_gpu_states_t shs_gpu_states(shs_strategy_kind_t kind, shs_framework_t fw, double psi, int n, int spp,
                                shs_offload_t offload, int p, int g) {
    const shs_stage_t *st = shs_strategy_stage(kind);
    if (fw == SHS_FRAMEWORK_DEFAULT) fw = st->framework;
    int lp = p < 4, ds = fw == SHS_FRAMEWORK_DEEPSPEED;
    int replica = lp && st->regathers_params_after_step; /* ZeRO-1/2 below f32: f32 shards + a p-byte replica */
    shs_gpu_states_t s;
    s.params = 4.0 * psi / (st->shards_params || replica ? n : 1);
    if (replica) s.params += p * psi;
    else if (lp && ds && offload != SHS_OFFLOAD_PARAMS) s.params += p * psi / (st->shards_params ? n : 1);
    if (offload == SHS_OFFLOAD_PARAMS) s.params -= 4.0 * psi / n;
    s.grads = (double)g * psi / (st->shards_grads ? n : 1);
    if (ds && g < 4 && offload == SHS_OFFLOAD_NONE) s.grads += 4.0 * psi / (st->shards_optimizer ? n : 1);
    s.optim = offload != SHS_OFFLOAD_NONE ? 0 : 4.0 * spp * psi / (st->shards_optimizer ? n : 1);
    return s;
}

void shs_gpu_mem_report(const shs_gpu_mem_preset_t *p, const shs_meta_rank_result_t *r, shs_strategy_kind_t kind,
                        int world, int G, shs_gpu_mem_report_t *out) {
    memset(out, 0, sizeof *out);
    out->allocated = (double)r->gpu.alloc.total_peak;
    out->reserved = (double)r->gpu.reserved_peak;
    out->context = p->cuda_context_bytes;
    out->nccl = shs_gpu_fixed_bytes(p, kind, world, G) - p->cuda_context_bytes;
    out->total = out->reserved + out->context + out->nccl;
    out->board = p->board_bytes;
    out->fits = out->total <= out->board;
}
