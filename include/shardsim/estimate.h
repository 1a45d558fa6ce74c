/* estimate.h - closed forms of the ZeRO paper for what a meta run counted
 * (`shardsim compare`).
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
 * The step-time estimate of compare has its own header (step_time.h),
 * included here.
 * What it is not: a measurement.
 */
#ifndef SHARDSIM_ESTIMATE_H
#define SHARDSIM_ESTIMATE_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/meta_run.h"
#include "shardsim/step_time.h"

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

#endif
