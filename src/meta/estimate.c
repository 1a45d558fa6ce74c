/* estimate.c - ZeRO closed forms, GPU presets and the step-time estimate
 * (estimate.h).
 *
 * Preset sources (GB = 1e9 bytes; "per direction" = half the bidirectional
 * figure NVIDIA quotes):
 *   H100-SXM  NVIDIA H100 Tensor Core GPU datasheet (2023): BF16 dense
 *             989.4 TFLOP/s (1979 with sparsity), TF32 dense 494.7,
 *             HBM3 3.35 TB/s, 80 GB; NVLink 4 900 GB/s bidirectional ->
 *             450 GB/s; PCIe Gen5 x16 64 GB/s per direction.
 *             DGX H100 user guide: 8 GPUs per node, one 400 Gb/s ConnectX-7
 *             (NDR InfiniBand) per GPU -> 50 GB/s per GPU between nodes.
 *   H200      NVIDIA H200 datasheet (2024): the same tensor throughput as
 *             H100-SXM, HBM3e 4.8 TB/s, 141 GB; NVLink 4, 400 Gb/s IB (HGX
 *             H200 reference), PCIe Gen5.
 *   A100      NVIDIA A100 datasheet (80 GB SXM): BF16 dense 312 TFLOP/s,
 *             TF32 dense 156, HBM2e 2.039 TB/s; NVLink 3 600 GB/s
 *             bidirectional -> 300 GB/s; DGX A100: 200 Gb/s HDR IB per GPU
 *             -> 25 GB/s; PCIe Gen4 x16 32 GB/s.
 *   Latency   NCCL 2.20.3 src/graph/tuning.cc, Simple protocol (as
 *             trace_net.c's hgx-h100 preset; NCCL's table does not depend
 *             on the GPU generation): per call baseLat[RING][SIMPLE] =
 *             8.4 us (tree 0); per ring step hwLat[NVLINK][RING][SIMPLE] =
 *             3.4 us within a node, hwLat[NET][RING][SIMPLE] = 14.0 us
 *             between nodes; per tree level hwLat[*][TREE][SIMPLE] = 28 us.
 *   Cluster   per-node NICs (shs_net_t nics_per_node, nic_bw; priced per
 *             level by trace_net.c), Gb/s = 1e9 bits:
 *             | preset   | node     | NICs | per NIC             | source
 *             | a100     | DGX A100 | 8    | 200 Gb/s HDR = 25 GB/s  | DGX A100 user guide / system
 *             |          |          |      |                     | architecture white paper (2020):
 *             |          |          |      |                     | 8 single-port ConnectX-6 HDR for
 *             |          |          |      |                     | the compute fabric
 *             | h100-sxm | DGX H100 | 8    | 400 Gb/s NDR = 50 GB/s  | DGX H100 user guide (2023): 8
 *             |          |          |      |                     | ConnectX-7 NDR ports (4 OSFP
 *             |          |          |      |                     | cages x 2) for the compute fabric
 *             | h200     | DGX H200 | 8    | 400 Gb/s NDR = 50 GB/s  | DGX H200 datasheet (2024): the
 *             |          |          |      |                     | same 8 x ConnectX-7 400 Gb/s
 *             inter_bw (the flat ring's per-rank bandwidth, used when
 *             --inter-gbs replaces the NIC model) = NICs x per NIC / 8.
 *   Host      100 GB/s of host memory bandwidth for one GPU's share of the
 *             CPU optimizer pass (a 2-socket DDR5 server has ~600-900 GB/s
 *             for 8 GPUs): an assumption, set by --host-bw.
 */
#include "shardsim/estimate.h"

#include <string.h>

/* NCCL 2.20.3 src/graph/tuning.cc, Simple protocol, seconds (see above) */
#define NCCL_BASE_RING 8.4e-6      /* baseLat[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] */
#define NCCL_BASE_TREE 0.0         /* baseLat[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] */
#define NCCL_HW_NVLINK_RING 3.4e-6 /* hwLat[NCCL_HW_NVLINK][NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] */
#define NCCL_HW_NET_RING 14.0e-6   /* hwLat[NCCL_HW_NET][NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] */
#define NCCL_HW_TREE 28e-6         /* hwLat[NCCL_HW_NVLINK and NET][NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] */
#define NCCL_LAT NCCL_HW_NVLINK_RING, NCCL_HW_NET_RING, NCCL_BASE_RING, NCCL_BASE_TREE, NCCL_HW_TREE, NCCL_HW_TREE
#define HDR_GBPS 200 /* InfiniBand HDR, Gb/s per port (ConnectX-6, DGX A100) */
#define NDR_GBPS 400 /* InfiniBand NDR, Gb/s per port (ConnectX-7, DGX H100 / H200) */
#define GBPS(x) ((x) * 1e9 / 8) /* Gb/s -> bytes/s */
/* the trailing fields of a preset's network: 8 NICs per node of `gbps` each */
#define NICS8(gbps) SHS_NET_NOT_ASTRA_NICS(8, GBPS(gbps))

#include "shardsim/optim.h"
#include "train/step.h" /* shs__job_attention_per_token */

shs_zero_states_t shs_zero_states(shs_strategy_kind_t kind, double psi, int n, int state_per_param,
                                  shs_offload_t offload, int param_bytes, int grad_bytes) {
    const shs_stage_t *st = shs_strategy_stage(kind); /* what the stage shards (strategy/stages.c) */
    shs_zero_states_t s;
    s.params = 4.0 * psi / (st->shards_params ? n : 1);
    /* below f32: f32 master shards plus a param-dtype replica (ZeRO-1/2) or shard (ZeRO-3) */
    if (param_bytes < 4 && st->regathers_params_after_step) s.params = 4.0 * psi / n + param_bytes * psi;
    if (param_bytes < 4 && st->shards_params) s.params = (4.0 + param_bytes) * psi / n;
    s.grads = (double)grad_bytes * psi / (st->shards_grads ? n : 1);
    s.optim = 4.0 * state_per_param * psi / (st->shards_optimizer ? n : 1);
    if (offload != SHS_OFFLOAD_NONE) s.optim = 0;
    if (offload == SHS_OFFLOAD_PARAMS) s.params = 0;
    return s;
}

shs_zero_states_t shs_zero_paper_states(shs_strategy_kind_t kind, double psi, int n) {
    const shs_stage_t *st = shs_strategy_stage(kind); /* P_os, P_g, P_p: what the stage shards */
    const double K = 12;
    return (shs_zero_states_t){.params = 2 * psi / (st->shards_params ? n : 1),
                               .grads = 2 * psi / (st->shards_grads ? n : 1),
                               .optim = K * psi / (st->shards_optimizer ? n : 1)};
}

double shs_zero_paper_total(shs_strategy_kind_t kind, double psi, int n) {
    shs_zero_states_t s = shs_zero_paper_states(kind, psi, n);
    return s.params + s.grads + s.optim;
}

double shs_zero_paper_volume(shs_strategy_kind_t kind, double psi, int N, int G) {
    if (kind == SHS_HYBRID_SHARD) return 3 * psi + (N / G > 1 ? 2 * psi / G : 0);
    if (kind == SHS_HYBRID_SHARD_ZERO2) return 2 * psi + (N / G > 1 ? 2 * psi / G : 0);
    return kind == SHS_ZERO3 ? 3 * psi : 2 * psi;
}

double shs_zero_paper_sent(shs_strategy_kind_t kind, double psi, int N, int G, double width) {
    const shs_stage_t *st = shs_strategy_stage(kind);
    int hybrid = st->reduce == SHS_GRAD_REDUCE_SCATTER_REPLICAS;
    int n = hybrid ? G : N, R = hybrid ? N / G : 1;
    double group = (st->shards_params ? 3 : 2) * psi * (n - 1) / n; /* gathered in forward and backward */
    double replica = hybrid && R > 1 ? 2 * (psi / G) * (R - 1) / R : 0;
    return (group + replica) * width;
}

shs_status_t shs_hw_preset(const char *name, shs_hw_t *out) {
    static const shs_hw_t presets[] = {
        {"h100-sxm", 989.4e12, 494.7e12, 3.35e12, 80e9, 64e9, 100e9,
         {"nvlink4+8xndr400", 8, 450e9, GBPS(NDR_GBPS), NCCL_LAT, NICS8(NDR_GBPS)}},
        {"h200", 989.4e12, 494.7e12, 4.8e12, 141e9, 64e9, 100e9,
         {"nvlink4+8xndr400", 8, 450e9, GBPS(NDR_GBPS), NCCL_LAT, NICS8(NDR_GBPS)}},
        {"a100", 312e12, 156e12, 2.039e12, 80e9, 32e9, 100e9,
         {"nvlink3+8xhdr200", 8, 300e9, GBPS(HDR_GBPS), NCCL_LAT, NICS8(HDR_GBPS)}},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) {
            *out = presets[i];
            return SHS_OK;
        }
    return shs_set_error(SHS_INVALID_ARG, "unknown GPU preset '%s' (h100-sxm, h200, a100)", name);
}

/* Nodes that rank 0's communicator of the call sits on. World and shard
 * groups are consecutive ranks from 0; a replica group (hybrid) is the
 * ranks equal mod G: 0, G, 2G, ... < N. */
static int comm_nodes(const shs_meta_call_t *c, int N, const shs_net_t *net) {
    int gpn = net->gpus_per_node > 0 ? net->gpus_per_node : 1;
    if (c->group != 2) return (c->comm_size + gpn - 1) / gpn;
    int G = N / (c->comm_size > 0 ? c->comm_size : 1), nodes = 0, last = -1;
    for (int k = 0; k < c->comm_size; k++) {
        int node = k * G / gpn;
        if (node != last) nodes++;
        last = node;
    }
    return nodes > 0 ? nodes : 1;
}

/* The two streams of a step, one compute and one communication, with
 * prefetch depth one as FSDP's forward_prefetch and BACKWARD_PRE order it:
 * a forward / backward unit's all-gathers are issued when the previous
 * unit's compute starts (ahead of that unit's reduce-scatter or gradient
 * all-reduce) and must end before its own compute starts; its other calls
 * (reduce-scatter, all-reduce: they carry what the compute produced) start
 * once its compute ends. Other segments (optimizer, loss) run their compute
 * and calls one after another, overlapping nothing. Returns the step's
 * length; exposed = that - the compute. */
typedef struct {
    double comm_free, comp_free; /* when each stream is next free */
    double prev_start;           /* compute start of the previous segment: the prefetch point */
    double post, post_ready;     /* the previous unit's output calls and when they may start */
} step_streams_t;

static void streams_flush(step_streams_t *s) {
    if (s->post > 0) s->comm_free = (s->comm_free > s->post_ready ? s->comm_free : s->post_ready) + s->post;
    s->post = 0;
}

static void streams_add(step_streams_t *s, int overlaps, double comp, double pre, double post) {
    if (!overlaps) {
        streams_flush(s);
        double t = s->comm_free > s->comp_free ? s->comm_free : s->comp_free;
        s->comm_free = s->comp_free = s->prev_start = t + comp + pre + post;
        return;
    }
    double a = (s->comm_free > s->prev_start ? s->comm_free : s->prev_start) + pre; /* its all-gathers end */
    s->comm_free = a;
    streams_flush(s); /* the previous unit's outputs go after this unit's prefetch */
    double start = s->comp_free > a ? s->comp_free : a;
    s->comp_free = start + comp;
    s->prev_start = start;
    s->post = post;
    s->post_ready = s->comp_free;
}

void shs_estimate_step(const shs_meta_config_t *cfg, const shs_meta_result_t *res, const shs_meta_rank_result_t *r,
                       const shs_hw_t *hw, double eff, shs_net_algo_t algo, shs_step_estimate_t *out) {
    memset(out, 0, sizeof *out);
    const shs_train_config_t *tc = &cfg->train;
    int lowp = tc->strategy.param_dtype == SHS_BF16 || tc->strategy.param_dtype == SHS_F16;
    double peak = lowp ? hw->peak_flops_16 : hw->peak_flops_32;
    if (eff <= 0) eff = 1;
    step_streams_t streams = {0};
    for (int i = 0; i < r->num_segments; i++) {
        const shs_step_segment_t *g = &r->segments[i];
        /* the kernel bytes of a segment are not kept apart; its FLOPs carry the roofline */
        double comp = (double)g->flops / (peak * eff);
        double pre = 0, post = 0;
        for (uint64_t c = g->calls_begin; c < g->calls_end; c++) {
            const shs_meta_call_t *call = &r->calls[c];
            int nodes = comm_nodes(call, tc->world_size, &hw->net);
            double t = shs_net_time(&hw->net, algo == SHS_NUM_ALGOS ? SHS_ALGO_RING : algo, call->op,
                                    (double)call->bytes, call->comm_size, nodes);
            if (algo == SHS_NUM_ALGOS) { /* auto: the faster of ring and tree, as NCCL's tuner picks */
                double tt = shs_net_time(&hw->net, SHS_ALGO_TREE, call->op, (double)call->bytes,
                                         call->comm_size, nodes);
                if (tt < t) t = tt;
            }
            *(call->op == SHS_OP_ALL_GATHER ? &pre : &post) += t;
        }
        streams_add(&streams, g->kind == SHS_STEP_SEG_FORWARD || g->kind == SHS_STEP_SEG_BACKWARD, comp, pre, post);
        out->compute_s += comp;
        out->comm_s += pre + post;
    }
    streams_flush(&streams);
    double end = streams.comm_free > streams.comp_free ? streams.comm_free : streams.comp_free;
    out->exposed_comm_s = end - out->compute_s > 0 ? end - out->compute_s : 0;
    /* whole-step memory traffic floor: kernel bytes at HBM bandwidth */
    double steps = cfg->steps > 0 ? cfg->steps : 1;
    double mem_time = (double)r->kernels.bytes / steps / hw->hbm_bw;
    if (mem_time > out->compute_s) out->compute_s = mem_time;
    if (tc->strategy.offload != SHS_OFFLOAD_NONE) {
        double copies = (double)(r->h2d_bytes + r->d2h_bytes) / steps;
        /* the host optimizer pass: AdamW reads p, g, m, v and writes p, m, v (28 bytes per element) */
        double state = (double)r->host.peak[SHS_MEM_OPTIM] / 4.0 /
                       (double)(shs_optim_state_per_param(&tc->strategy.optim) ? shs_optim_state_per_param(&tc->strategy.optim) : 1);
        out->offload_s = copies / hw->pcie_bw + state * 28.0 / hw->host_bw;
    }
    out->step_s = out->compute_s + out->exposed_comm_s + out->offload_s;
    double tokens = (double)tc->micro_batch * tc->model.context * (tc->grad_accum > 1 ? tc->grad_accum : 1);
    /* 6 FLOPs per parameter per token (Kaplan et al. 2020; Narayanan et al.
     * 2021 Eq. 3) for every parameter a matmul reads: an untied Llama's
     * embedding table is only looked up, so its V C are left out (its LM head
     * is counted); tied, the one table is the head's matmul */
    double matmul_params = (double)res->num_params;
    if (!tc->model_file && tc->arch == SHS_ARCH_LLAMA && !tc->llama.tie_word_embeddings)
        matmul_params -= (double)tc->llama.vocab * (double)tc->llama.hidden;
    double per_token = 6.0 * matmul_params;
    /* the attention term 12 L C T (C = NH * HD), with each windowed layer's keys min(T, window) */
    per_token += 12.0 * shs__job_attention_per_token(tc);
    out->model_flops = per_token * tokens;
    out->mfu = out->step_s > 0 ? out->model_flops / (out->step_s * peak) : 0;
}
