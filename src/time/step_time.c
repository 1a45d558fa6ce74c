/* step_time.c - one training step's time from a meta run's timeline
 * (step_time.h): per segment its kernels (kernel_time.c) and its
 * collectives (NCCL's model), on two streams with prefetch depth one, the
 * overlapped compute slowed by the SMs NCCL holds; offload; MFU.
 * What it is not: the kernels' prices (kernel_time.c) or NCCL's
 * (src/net/nccl_model.c).
 */
#include "shardsim/step_time.h"

#include <string.h>

#include "shardsim/optim.h"
#include "train/step.h" /* shs__job_decoder_shape */

/* Nodes that rank 0's communicator of the call sits on. World and shard
 * groups are consecutive ranks from 0; a replica group (hybrid) is the
 * ranks equal mod G: 0, G, 2G, ... < N. */
static int comm_nodes(const shs_meta_call_t *c, int N, int gpus_per_node) {
    int gpn = gpus_per_node > 0 ? gpus_per_node : 1;
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
 * prefetch depth one: a forward / backward unit's all-gathers are issued
 * when the previous unit's compute starts (the CPU runs a unit ahead of the
 * GPU; ahead of that unit's reduce-scatter or gradient all-reduce) and must
 * end before its own compute starts; all-gathers it issues for a later unit
 * (the strategy's prefetch) queue behind them and gate that unit's compute
 * instead; its other calls (reduce-scatter, all-reduce: they carry what the
 * compute produced) start once its compute ends. Other segments (optimizer,
 * loss) run their compute and calls one after another, overlapping
 * nothing. Compute that overlaps a call is stretched: o seconds of overlap
 * add o (f - 1), f = SMs / (SMs - channels). */
typedef struct {
    double comm_free, comp_free; /* when each stream is next free */
    double prev_start;           /* compute start of the previous segment: the issue point */
    double gate;                 /* end of the all-gathers prefetched for the next unit */
    double post, post_ready;     /* the previous unit's output calls and when they may start */
    double post_f;               /* their slowdown factor */
    double slowdown;             /* compute time added so far */
} streams_t;

typedef struct {
    double comp;                 /* the segment's compute at full speed */
    double own, ahead, post;     /* its all-gathers, those for a later unit, its other calls (seconds) */
    double pre_f, post_f;        /* slowdown factors while they run */
} seg_time_t;

static double overlap(double a0, double a1, double b0, double b1) {
    double lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0;
}

static void stretch(streams_t *s, double o, double f) {
    double add = o * (f - 1);
    s->slowdown += add;
    s->comp_free += add;
}

/* the previous unit's outputs go on the comm stream; compute running in
 * [c0, c1] beside them is stretched */
static void streams_flush(streams_t *s, double c0, double c1) {
    if (s->post <= 0) return;
    double t0 = s->comm_free > s->post_ready ? s->comm_free : s->post_ready;
    s->comm_free = t0 + s->post;
    stretch(s, overlap(t0, s->comm_free, c0, c1), s->post_f);
    s->post = 0;
}

static void streams_add(streams_t *s, int overlaps, const seg_time_t *g) {
    if (!overlaps) {
        streams_flush(s, s->comp_free, s->comp_free);
        double t = s->comm_free > s->comp_free ? s->comm_free : s->comp_free;
        if (s->gate > t) t = s->gate;
        s->comm_free = s->comp_free = s->prev_start = t + g->comp + g->own + g->ahead + g->post;
        s->gate = 0;
        return;
    }
    /* this unit's all-gathers, then those it prefetches, under the previous unit's compute */
    double issue = s->comm_free > s->prev_start ? s->comm_free : s->prev_start;
    double own_end = issue + g->own, ahead_end = own_end + g->ahead;
    stretch(s, overlap(issue, ahead_end, s->prev_start, s->comp_free), g->pre_f);
    s->comm_free = ahead_end;
    double start = s->comp_free;
    if (own_end > start) start = own_end;
    if (s->gate > start) start = s->gate;
    s->comp_free = start + g->comp;
    /* what of them still runs under this unit's compute, then the previous unit's outputs */
    stretch(s, overlap(issue > start ? issue : start, ahead_end, start, s->comp_free), g->pre_f);
    streams_flush(s, start, s->comp_free);
    s->prev_start = start;
    s->gate = g->ahead > 0 ? ahead_end : 0;
    s->post = g->post;
    s->post_f = g->post_f;
    s->post_ready = s->comp_free;
}

/* A segment's compute: its kernels, or without records its FLOPs at gemm_eff. */
static double segment_compute(const shs_meta_rank_result_t *r, int seg, const shs_hw_t *hw,
                              const shs_kernel_env_t *env, shs_step_estimate_t *out) {
    if (!r->num_kernel_log) {
        double peak = env->matmul_dtype == SHS_F32 ? hw->peak_flops_32 : hw->peak_flops_16;
        double t = (double)r->segments[seg].flops / (peak * env->gemm_eff);
        out->gemm_s += t;
        return t;
    }
    double t = 0;
    for (size_t i = 0; i < r->num_kernel_log; i++) {
        const shs_meta_kernel_t *k = &r->kernel_log[i];
        if (k->segment != seg) continue;
        double dt = shs_kernel_time(hw, env, &k->info, k->count);
        switch (k->info.cls) {
        case SHS_KERNEL_GEMM: out->gemm_s += dt; break;
        case SHS_KERNEL_ATTENTION: out->attention_s += dt; break;
        case SHS_KERNEL_OPTIMIZER: out->optimizer_s += dt; break;
        default: out->elementwise_s += dt;
        }
        t += dt;
    }
    return t;
}

void shs_estimate_step(const shs_meta_config_t *cfg, const shs_meta_result_t *res, const shs_meta_rank_result_t *r,
                       const shs_hw_t *hw, const shs_time_opts_t *opts, shs_step_estimate_t *out) {
    memset(out, 0, sizeof *out);
    const shs_train_config_t *tc = &cfg->train;
    shs_time_opts_t dflt = {0, SHS_NUM_ALGOS, SHS_NUM_PROTOS};
    if (!opts) opts = &dflt;
    shs_kernel_env_t env = shs_kernel_env(tc, hw, opts->gemm_eff);
    double peak = env.matmul_dtype == SHS_F32 ? hw->peak_flops_32 : hw->peak_flops_16;
    streams_t streams = {0};
    for (int i = 0; i < r->num_segments; i++) {
        const shs_step_segment_t *g = &r->segments[i];
        seg_time_t t = {.comp = segment_compute(r, i, hw, &env, out), .pre_f = 1, .post_f = 1};
        for (uint64_t c = g->calls_begin; c < g->calls_end; c++) {
            const shs_meta_call_t *call = &r->calls[c];
            int nodes = comm_nodes(call, tc->world_size, hw->nccl.gpus_per_node);
            shs_nccl_cost_t cost;
            if (shs_nccl_best(&hw->nccl, call->op, opts->algo, opts->proto, (double)call->bytes, call->comm_size,
                              nodes, &cost) != 0 &&
                shs_nccl_best(&hw->nccl, call->op, SHS_NUM_ALGOS, SHS_NUM_PROTOS, (double)call->bytes,
                              call->comm_size, nodes, &cost) != 0)
                continue; /* not a collective NCCL runs */
            double f = cost.channels < hw->sms ? (double)hw->sms / (hw->sms - cost.channels) : 1;
            int gather = call->op == SHS_OP_ALL_GATHER;
            *(!gather ? &t.post : call->ahead ? &t.ahead : &t.own) += cost.time_s;
            double *ff = gather ? &t.pre_f : &t.post_f;
            if (f > *ff) *ff = f;
        }
        streams_add(&streams, g->kind == SHS_STEP_SEG_FORWARD || g->kind == SHS_STEP_SEG_BACKWARD, &t);
        out->compute_s += t.comp;
        out->comm_s += t.own + t.ahead + t.post;
    }
    streams_flush(&streams, streams.comp_free, streams.comp_free);
    double end = streams.comm_free > streams.comp_free ? streams.comm_free : streams.comp_free;
    if (streams.gate > end) end = streams.gate;
    out->slowdown_s = streams.slowdown;
    double busy = out->compute_s + out->slowdown_s;
    out->exposed_comm_s = end - busy > 0 ? end - busy : 0;
    double steps = cfg->steps > 0 ? cfg->steps : 1;
    if (tc->strategy.offload != SHS_OFFLOAD_NONE) {
        double copies = (double)(r->h2d_bytes + r->d2h_bytes) / steps;
        /* the host optimizer pass: AdamW reads p, g, m, v and writes p, m, v (28 bytes per element) */
        int spp = shs_optim_state_per_param(&tc->strategy.optim);
        double state = (double)r->host.peak[SHS_MEM_OPTIM] / 4.0 / (double)(spp ? spp : 1);
        out->offload_s = copies / hw->pcie_bw + state * 28.0 / hw->host_bw;
    }
    out->step_s = busy + out->exposed_comm_s + out->offload_s;
    out->tokens = (double)tc->micro_batch * tc->model.context * (tc->grad_accum > 1 ? tc->grad_accum : 1);
    /* 6 FLOPs per parameter per token (Kaplan et al. 2020; Narayanan et al.
     * 2021 Eq. 3) for every parameter a matmul reads: an untied Llama's
     * embedding table is only looked up, so its V C are left out (its LM head
     * is counted); tied, the one table is the head's matmul */
    double matmul_params = (double)res->num_params;
    if (!tc->model_file && tc->arch == SHS_ARCH_LLAMA && !tc->llama.tie_word_embeddings)
        matmul_params -= (double)tc->llama.vocab * (double)tc->llama.hidden;
    double per_token = 6.0 * matmul_params;
    int layers, hidden; /* the attention term 12 L C T, C = NH * HD for either decoder */
    shs__job_decoder_shape(tc, &layers, &hidden);
    per_token += 12.0 * layers * (double)hidden * tc->model.context;
    out->model_flops = per_token * out->tokens;
    out->mfu = out->step_s > 0 ? out->model_flops / (out->step_s * peak) : 0;
}
