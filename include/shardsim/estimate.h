/* estimate.h - closed forms of the ZeRO paper and a step-time estimate for
 * what a meta run counted (`shardsim compare`).
 *
 * What it is:
 *  - Model-state bytes per rank as Rajbhandari et al. 2020 ("ZeRO: Memory
 *    Optimizations Toward Training Trillion Parameter Models"), §5, with Ψ
 *    parameters, N ranks and K bytes of optimizer state per parameter:
 *      DDP (2+2+K)Ψ;  ZeRO-1 (P_os) 2Ψ + 2Ψ + KΨ/N;
 *      ZeRO-2 (P_os+g) 2Ψ + (2+K)Ψ/N;  ZeRO-3 (P_os+g+p) (2+2+K)Ψ/N;
 *    the paper's widths are fp16 parameters and gradients (2 + 2) and, for
 *    mixed-precision Adam, K = 12 (fp32 master parameters, momentum and
 *    variance). With a 2-byte param dtype shardsim holds the same: the
 *    parameters in that dtype (ZeRO-1/2 a full replica, ZeRO-3 its shard),
 *    f32 master parameters (counted with the parameters, not the optimizer),
 *    2-byte gradients (grad_accum_dtype f32: 4) and 4·(optimizer state
 *    values); DDP keeps no persistent 2-byte copy (its f32 parameters are
 *    rounded at each use), so it holds 4 + 2 + 8. The forms below use
 *    shardsim's widths with the paper's partitioning: what the measured
 *    bytes must equal when no unit needs padding.
 *  - Communication volume per rank per step (the paper's §7): DDP
 *    all-reduce 2Ψ, ZeRO-1/2 reduce-scatter Ψ + all-gather Ψ = 2Ψ, ZeRO-3
 *    2Ψ of all-gathers (forward, backward) + Ψ of reduce-scatter = 3Ψ
 *    elements, i.e. bytes sent per rank (N-1)/N of those times the element
 *    width under the ring algorithm (nccl-tests' busbw convention).
 *  - A step-time estimate: per timeline segment, compute = max(FLOPs /
 *    (peak x efficiency), kernel bytes / HBM bandwidth) (a roofline); each
 *    collective priced by net.h's alpha-beta model on a cluster of
 *    nodes of GPUs (intra-node NVLink, NICs between nodes: a call that
 *    spans nodes is priced per level, hierarchical all-gather /
 *    reduce-scatter, see shs_net_time); collectives
 *    overlap compute per wrap unit on two streams with prefetch depth one
 *    (FSDP's forward_prefetch / BACKWARD_PRE): a unit's all-gathers run
 *    under the previous unit's compute and must end before its own, its
 *    reduce-scatter / all-reduce start after its compute (under the next
 *    unit's); optimizer and loss segments overlap nothing; exposed
 *    communication = the two streams' length - the compute; offload adds PCIe copies
 *    and the host's optimizer pass (memory bound) to the optimizer segment.
 *    MFU = model FLOPs (6Ψ + 12·L·C·T per token, PaLM, Chowdhery et al.
 *    2022, App. B; recomputation not counted) / (step time x peak).
 * What it is not: a measurement. Every constant of the presets is cited in
 * src/meta/estimate.c.
 */
#ifndef SHARDSIM_ESTIMATE_H
#define SHARDSIM_ESTIMATE_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/meta_run.h"
#include "shardsim/net.h"

/* Per-rank model-state bytes in shardsim's widths with the paper's
 * partitioning (see above). `psi` parameters, `n` the sharding degree (N,
 * or G for hybrid), `state_per_param` optimizer f32 values per parameter
 * (optim.h), `param_bytes` the param dtype's width (4, or 2 for bf16/f16:
 * the f32 master, 4Psi/n, plus the param-dtype copy: ZeRO-1/2 a replica,
 * param_bytes x Psi, ZeRO-3 a shard, param_bytes x Psi/n), `grad_bytes` the
 * gradient dtype's width (grad_accum_dtype). Offloaded state is on the host:
 * 0 on the device. */
typedef struct {
    double params, grads, optim;
} shs_zero_states_t;
shs_zero_states_t shs_zero_states(shs_strategy_kind_t kind, double psi, int n, int state_per_param,
                                  shs_offload_t offload, int param_bytes, int grad_bytes);
/* The paper's own categories for the stage (its §3.1 and §5, K = 12 for
 * mixed-precision Adam): fp16 parameters 2Ψ, fp16 gradients 2Ψ, optimizer
 * states KΨ (f32 master parameters, momentum, variance), each divided by
 * `n` where the stage partitions it (P_p, P_g, P_os). Bytes. */
shs_zero_states_t shs_zero_paper_states(shs_strategy_kind_t kind, double psi, int n);
/* Their sum, the paper's total (2+2+K)Ψ form for the stage. */
double shs_zero_paper_total(shs_strategy_kind_t kind, double psi, int n);
/* The paper's communication volume, in elements, per rank per step: 2Ψ
 * (DDP, ZeRO-1, ZeRO-2), 3Ψ (ZeRO-3); hybrid: the ZeRO-3/ZeRO-2 volume in
 * the group plus the replica all-reduce of the shard, 2Ψ/G. */
double shs_zero_paper_volume(shs_strategy_kind_t kind, double psi, int N, int G);
/* That volume as bytes each rank sends under ring algorithms, elements of
 * `width` bytes: the group's collectives x (n-1)/n with n = N (G for
 * hybrid), plus for hybrid the replica all-reduce 2 (Ψ/G) (R-1)/R with
 * R = N/G replicas. */
double shs_zero_paper_sent(shs_strategy_kind_t kind, double psi, int N, int G, double width);

/* A GPU and its links. */
typedef struct {
    char name[32];
    double peak_flops_16;   /* dense bf16/f16 tensor FLOP/s */
    double peak_flops_32;   /* dense tf32 tensor FLOP/s (f32 param dtype) */
    double hbm_bw;          /* bytes/s */
    double mem_bytes;       /* device memory */
    double pcie_bw;         /* host<->device bytes/s, one direction */
    double host_bw;         /* host memory bytes/s available to one GPU's optimizer pass */
    shs_net_t net;          /* NVLink within a node, nics_per_node InfiniBand NICs between */
} shs_hw_t;

/* Presets "h100-sxm", "h200", "a100" (sources in estimate.c).
 * Errors: SHS_INVALID_ARG (unknown name). */
shs_status_t shs_hw_preset(const char *name, shs_hw_t *out);

typedef struct {
    double compute_s;       /* sum of segment compute times */
    double comm_s;          /* every collective, serialized */
    double exposed_comm_s;  /* the part not hidden under compute (the prefetch schedule above) */
    double offload_s;       /* PCIe copies and the host optimizer pass */
    double step_s;          /* compute + exposed comm + offload */
    double model_flops;     /* 6Ψ + 12LCT per token, this rank's tokens */
    double mfu;             /* model_flops / (step_s x peak) */
} shs_step_estimate_t;

/* Estimate one step of rank result `r` (the last step's timeline) for the
 * job `cfg` on `hw` with matmul efficiency `eff` (0..1], collectives priced
 * with algorithm `algo` (SHS_NUM_ALGOS: per call the faster of ring and
 * tree, as NCCL's tuner chooses). */
void shs_estimate_step(const shs_meta_config_t *cfg, const shs_meta_result_t *res, const shs_meta_rank_result_t *r,
                       const shs_hw_t *hw, double eff, shs_net_algo_t algo, shs_step_estimate_t *out);

#endif
