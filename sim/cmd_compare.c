/* cmd_compare.c - `shardsim compare`: every data-parallel strategy for one
 * model at one scale, measured by running the real strategy and model code
 * on the meta backend (meta_run.h), beside the ZeRO paper's closed forms
 * and a step-time estimate (estimate.h). Text table, JSON or CSV; optional
 * SVG of each strategy's memory over one step (compare_plot.c).
 * What it is not: the meta backend or the time model (src/).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "options.h"
#include "commands.h"
#include "compare_plot.h"
#include "model_choice.h"
#include "shardsim/durable.h"
#include "shardsim/estimate.h"
#include "shardsim/features.h"
#include "shardsim/gpu_memory.h"
#include "shardsim/meta_run.h"
#include "shardsim/model_preset.h"
#include "shardsim/optim.h"
#include "shardsim/units.h"

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>
#endif

#define usage_error(...) sim_usage_error("compare", __VA_ARGS__)

/* The options of `compare`; the rows' order is --help's. */
typedef enum {
    C_MODEL, C_HF_CONFIG, C_LAYERS, C_CHANNELS, C_HEADS, C_CONTEXT, C_VOCAB, C_WORLD, C_PARAM_DTYPE, C_REDUCE_DTYPE, C_GRAD_ACCUM_DTYPE,
    C_OPTIMIZER,
    C_MOMENTUM, C_MICRO_BATCH, C_DEVICE_MEM, C_WRAP, C_SHARD_GROUP_SIZE, C_STRATEGIES, C_VARIANTS, C_GPU, C_EFFICIENCY,
    C_ALGO, C_PEAK_TFLOPS, C_HBM_GBS, C_INTRA_GBS, C_INTER_GBS, C_INTRA_LAT_US, C_INTER_LAT_US, C_GPUS_PER_NODE,
    C_PCIE_GBS, C_HOST_GBS, C_NICS_PER_NODE, C_NIC_GBPS, C_ACCOUNTING, C_FORMAT, C_PLOT, C_OUTPUT, C_RECOMPUTE,
    C_AC_MODE, C_SELECTIVE_AC_OPTION, C_ATTENTION, C_AUTOCAST, C_DROPOUT,
    C_DS_CONFIG, C_FRAMEWORK, C_LOSS_KERNEL, C_CUDA_CONTEXT_MIB, C_NCCL_BUFFSIZE, C_NCCL_CHANNELS, C_RESHARD, C_NUM_OPTIONS
} compare_opt_t;

#define HW_ROW(name, help) {name, NULL, SIM_OPT_FLOAT, 1e-6, 1e9, 0, 0, "X", help}
static const sim_opt_t compare_options[C_NUM_OPTIONS] = {
    [C_MODEL] = {"--model", NULL, SIM_OPT_STR, 0, 0, 0, 0, "NAME",
                 "preset: gpt2-124m gpt2-350m gpt2-774m gpt2-1.5b gpt3-6.7b gpt3-13b\n"
                 "gpt3-175b mpt-1b mpt-3b mpt-7b mpt-13b mpt-30b mpt-70b (llm-foundry's\n"
                 "benchmark shapes); --layers/--channels/--heads/--context/--vocab override\n"
                 "its fields (a custom GPT). Llama family: llama2-7b llama2-13b\n"
                 "llama2-70b llama3-8b llama3-70b llama3.1-405b mistral-7b (their\n"
                 "config.json shapes; --context only, default max_position_embeddings,\n"
                 "llama3.1-405b 8192 (pre-training's), mistral-7b its window 4096)"},
    [C_HF_CONFIG] = SIM_ROW_HF_CONFIG,
    [C_LAYERS] = SIM_ROW_LAYERS,
    [C_CHANNELS] = SIM_ROW_CHANNELS,
    [C_HEADS] = SIM_ROW_HEADS,
    [C_CONTEXT] = SIM_ROW_CONTEXT,
    [C_VOCAB] = {"--vocab", NULL, SIM_OPT_INT, 1, 1 << 20, 0, 0, "V", "vocabulary size"},
    [C_WORLD] = {"--world", NULL, SIM_OPT_INT, 1, SHS_MAX_META_WORLD, 0, 0, "N",
                 "ranks (simulated GPUs), 1..65536 (two representative ranks run)"},
    [C_PARAM_DTYPE] = SIM_ROW_PARAM_DTYPE,
    [C_REDUCE_DTYPE] = SIM_ROW_REDUCE_DTYPE,
    [C_GRAD_ACCUM_DTYPE] = SIM_ROW_GRAD_ACCUM_DTYPE,
    [C_OPTIMIZER] = SIM_ROW_OPTIMIZER,
    [C_MOMENTUM] = SIM_ROW_MOMENTUM,
    [C_MICRO_BATCH] = SIM_ROW_MICRO_BATCH,
    [C_DEVICE_MEM] = SIM_ROW_DEVICE_MEM,
    [C_WRAP] = {"--wrap", NULL, SIM_OPT_STR, 0, 0, 0, 0, "P",
                "block (one unit per block) | size:N (blocks grouped into units of at\n"
                "least N parameters, FSDP's size-based auto-wrap)"},
    [C_SHARD_GROUP_SIZE] = {"--shard-group-size", NULL, SIM_OPT_INT, 1, SHS_MAX_META_WORLD, 0, 0, "G",
                            "hybrid_*: shard within groups of G consecutive ranks, replicate\nacross the N/G groups"},
    [C_STRATEGIES] = {"--strategies", NULL, SIM_OPT_STR, 0, 0, 0, 0, "LIST", "comma-separated subset, e.g. ddp,zero3"},
    [C_VARIANTS] = {"--variants", NULL, SIM_OPT_STR, 0, 0, 0, 0, "V", "all (plain, +ckpt, +offload, +ckpt+offload) | plain"},
    [C_GPU] = {"--gpu", NULL, SIM_OPT_STR, 0, 0, 0, 0, "G", "h100-sxm | h200 | a100"},
    [C_EFFICIENCY] = {"--efficiency", NULL, SIM_OPT_FLOAT, 1e-3, 1, 0, 0, "E", "fraction of peak FLOP/s the kernels reach"},
    [C_ALGO] = {"--algo", NULL, SIM_OPT_STR, 0, 0, 0, 0, "A", "ring | tree | direct | auto (per call the faster of ring and tree)"},
    [C_PEAK_TFLOPS] = HW_ROW("--peak-tflops", "custom GPU (overrides the --gpu preset): dense TFLOP/s, the param dtype's"),
    [C_HBM_GBS] = HW_ROW("--hbm-gbs", "custom GPU: memory bandwidth, GB/s"),
    [C_INTRA_GBS] = HW_ROW("--intra-gbs", "custom GPU: bandwidth within a node, GB/s per GPU, one direction"),
    [C_INTER_GBS] = HW_ROW("--inter-gbs", "custom GPU: bandwidth across nodes, GB/s per GPU, one direction, as\n"
                                          "a flat ring (replaces the per-NIC cluster model)"),
    [C_INTRA_LAT_US] = HW_ROW("--intra-lat-us", "custom GPU: latency within a node, us"),
    [C_INTER_LAT_US] = HW_ROW("--inter-lat-us", "custom GPU: latency across nodes (per NIC, per ring step), us"),
    [C_GPUS_PER_NODE] = {"--gpus-per-node", NULL, SIM_OPT_INT, 1, 1 << 20, 0, 0, "N", "custom GPU: GPUs per node"},
    [C_PCIE_GBS] = HW_ROW("--pcie-gbs", "custom GPU: host link bandwidth, GB/s"),
    [C_HOST_GBS] = HW_ROW("--host-gbs", "custom GPU: host memory bandwidth for the offloaded optimizer, GB/s"),
    [C_NICS_PER_NODE] = {"--nics-per-node", NULL, SIM_OPT_INT, 1, 1 << 10, 0, 0, "N",
                         "custom GPU: network adapters per node (presets: 8)"},
    [C_NIC_GBPS] = HW_ROW("--nic-gbps", "custom GPU: bandwidth of one NIC, Gb/s (1e9 bits) per direction\n"
                                        "(presets: a100 200 HDR, h100-sxm / h200 400 NDR)"),
    [C_ACCOUNTING] = {"--accounting", NULL, SIM_OPT_STR, 0, 0, 0, 0, "A",
                      "shardsim (measured categories beside shardsim-width closed forms) |\n"
                      "zero-paper (also the ZeRO paper's categories: 2-byte params, 2-byte\n"
                      "grads, K = 12 optimizer states with the f32 master, measured and\n"
                      "(2+2+K)Psi, in GB = 1e9 bytes)"},
    [C_FORMAT] = {"--format", NULL, SIM_OPT_STR, 0, 0, 0, 0, "F", "table | json | csv"},
    [C_PLOT] = {"--plot", NULL, SIM_OPT_STR, 0, 0, 0, 0, "FILE.svg", "memory of one rank over the step, one panel per row"},
    [C_OUTPUT] = {"--output", "-o", SIM_OPT_STR, 0, 0, 0, 0, "FILE", "write the table / JSON / CSV to FILE instead of stdout"},
    [C_RECOMPUTE] = {"--recompute-granularity", NULL, SIM_OPT_STR, 0, 0, 0, 0, "G",
                     "what the checkpointing variants (+ckpt, +sel) recompute: full\n"
                     "(each block) | selective (the attention core, Korthikanti et al. 2022)"},
    [C_AC_MODE] = {"--ac-mode", NULL, SIM_OPT_STR, 0, 0, 0, 0, "M",
                   "the checkpointing variants' policy in torchtitan's terms: full (+ckpt)\n"
                   "| selective (--selective-ac-option: +sac-op, +sac-N)"},
    [C_SELECTIVE_AC_OPTION] = SIM_ROW_SELECTIVE_AC_OPTION,
    [C_ATTENTION] = SIM_ROW_ATTENTION,
    [C_AUTOCAST] = SIM_ROW_AUTOCAST,
    [C_DROPOUT] = SIM_ROW_DROPOUT,
    [C_DS_CONFIG] = SIM_ROW_DS_CONFIG,
    [C_FRAMEWORK] = {"--framework", NULL, SIM_OPT_STR, 0, 0, 0, 0, "F",
                     "whose GPU run each row's memory models: torch (DDP under autocast,\n"
                     "FSDP2) | deepspeed (stage 0-3); default each row's (ddp, zero3,\n"
                     "hybrid_shard torch; zero1, zero2, hybrid_shard_zero2 deepspeed; all\n"
                     "deepspeed under --ds-config)"},
    [C_LOSS_KERNEL] = {"--loss-kernel", NULL, SIM_OPT_STR, 0, 0, 0, 0, "K",
                       "the GPU run's cross-entropy: torch (F.cross_entropy on f32 logits, up\n"
                       "to 12 B per logit) | fused (flash-attn's xentropy on the logits' dtype,\n"
                       "llm-foundry's default)"},
    [C_CUDA_CONTEXT_MIB] = {"--cuda-context-mib", NULL, SIM_OPT_FLOAT, 0, 1e6, 0, 0, "M",
                            "the CUDA context of one GPU process, MiB (preset: 273.75, PyTorch with\n"
                            "lazy module loading)"},
    [C_NCCL_BUFFSIZE] = {"--nccl-buffsize", NULL, SIM_OPT_FLOAT, 1, 1e12, 0, 0, "B",
                         "NCCL_BUFFSIZE, bytes (NCCL's default 4194304)"},
    [C_NCCL_CHANNELS] = {"--nccl-channels", NULL, SIM_OPT_INT, 1, 1024, 0, 0, "C",
                         "NCCL ring channels per communicator (presets: 24, one node's)"},
    [C_RESHARD] = {"--reshard-after-forward", NULL, SIM_OPT_STR, 0, 0, 0, 0, "R",
                   "zero3 / hybrid_shard rows, FSDP2's reshard_after_forward: true (free a\n"
                   "gathered unit after its forward) | false (keep it for backward, FSDP's\n"
                   "SHARD_GRAD_OP) | R (keep 1/R of it, re-gathered within R consecutive\n"
                   "ranks in backward; R divides the shard group)"},
};
#undef HW_ROW

static const char *const compare_defaults[C_NUM_OPTIONS] = {
    [C_MODEL] = "gpt2-124m", [C_WORLD] = "8", [C_PARAM_DTYPE] = "bf16", [C_REDUCE_DTYPE] = "param dtype",
    [C_GRAD_ACCUM_DTYPE] = "param dtype", [C_ACCOUNTING] = "shardsim",
    [C_OPTIMIZER] = "adamw", [C_MOMENTUM] = "0", [C_MICRO_BATCH] = "1", [C_DEVICE_MEM] = "the GPU preset's",
    [C_WRAP] = "block", [C_SHARD_GROUP_SIZE] = "8 when it divides N, else N", [C_STRATEGIES] = "all",
    [C_VARIANTS] = "all", [C_GPU] = "h100-sxm", [C_EFFICIENCY] = "0.5", [C_ALGO] = "auto", [C_FORMAT] = "table",
    [C_RECOMPUTE] = "full", [C_AC_MODE] = "full", [C_ATTENTION] = "eager; flash for the Llama family",
    [C_AUTOCAST] = "off; bf16 for the Llama family", [C_DROPOUT] = "0",
    [C_FRAMEWORK] = "each row's", [C_LOSS_KERNEL] = "torch", [C_CUDA_CONTEXT_MIB] = "the GPU preset's",
    [C_NCCL_BUFFSIZE] = "4194304", [C_NCCL_CHANNELS] = "the GPU preset's", [C_RESHARD] = "true",
};

static const char compare_usage_head[] =
    "usage: shardsim compare [options]\n"
    "\n"
    "Run one training step of every strategy (DDP, ZeRO-1/2/3, hybrid sharding; each with and\n"
    "without CPU offload and activation checkpointing) on the meta backend: the real strategy and\n"
    "model code, with memory and collectives counted and no data moved. Prints per-rank memory\n"
    "by category beside the ZeRO paper's closed forms, bytes sent per collective, and a step-time\n"
    "estimate.\n"
    "\n";

typedef struct {
    char name[48];
    shs_strategy_kind_t kind;
    int ckpt;
    shs_offload_t offload;
    shs_meta_config_t cfg;
    shs_meta_result_t res;
    const shs_meta_rank_result_t *worst;
    shs_gpu_states_t form;       /* the framework's model states, closed form (gpu_memory.h) */
    shs_zero_states_t paper, paper_measured; /* the ZeRO paper's categories: its forms, and measured */
    double paper_total, paper_sent;
    uint64_t sent[SHS_NUM_COLL_OPS], sent_total, calls;
    shs_step_estimate_t est;
    shs_framework_t framework;   /* whose GPU run the row's memory models (resolved) */
    shs_gpu_mem_report_t gm;     /* allocated, reserved, fixed and total on the board */
    double recompute_flops, hfu; /* FLOPs the recompute adds (measured: against the same run keeping
                                  * every activation) and hardware FLOP utilisation counting them */
    char notes[640];
    int fits;
} row_t;

static void add_note(char *notes, size_t n, const char *text) {
    size_t len = strlen(notes);
    snprintf(notes + len, n - len, "%s%s", len ? "; " : "", text);
}

static void fill_row(row_t *r, const shs_gpu_mem_preset_t *gmp, const shs_hw_t *hw, double eff, shs_net_algo_t algo) {
    const shs_train_config_t *tc = &r->cfg.train;
    const shs_meta_rank_result_t *w = r->worst = shs_meta_worst_rank(&r->res);
    int N = tc->world_size;
    int hybrid = r->kind == SHS_HYBRID_SHARD || r->kind == SHS_HYBRID_SHARD_ZERO2;
    int n = hybrid ? (tc->strategy.shard_group_size ? tc->strategy.shard_group_size : N) : N;
    double psi = (double)r->res.num_params;
    int spp = shs_optim_state_per_param(&tc->strategy.optim);
    shs_dtype_t pd = tc->strategy.param_dtype ? tc->strategy.param_dtype : SHS_F32;
    double width = (double)shs_dtype_size(pd);
    int grad_width = (int)shs_dtype_size(tc->strategy.grad_accum_dtype ? tc->strategy.grad_accum_dtype : pd);
    r->form = shs_gpu_states(r->kind, r->framework, psi, n, spp, r->offload, (int)width, grad_width);
    r->paper = shs_zero_paper_states(r->kind, psi, n);
    r->paper_total = shs_zero_paper_total(r->kind, psi, n);
    /* measured in the paper's categories: the f32 master moves from the
     * parameters to the optimizer states (its K) */
    const shs_mem_stats_t *m = &w->gpu.alloc; /* what the framework's GPU run holds */
    r->paper_measured = (shs_zero_states_t){
        .params = (double)(m->peak[SHS_MEM_PARAMS] - w->master_bytes),
        .grads = (double)m->peak[SHS_MEM_GRADS],
        .optim = (double)(m->peak[SHS_MEM_OPTIM] + w->master_bytes)};
    r->paper_sent = shs_zero_paper_sent(r->kind, psi, N, n, width);
    r->sent_total = r->calls = 0;
    for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
        if (op == SHS_OP_SPLIT || op == SHS_OP_BARRIER) continue;
        r->sent[op] = w->last_step_comm.bytes_sent[op];
        r->sent_total += r->sent[op];
        r->calls += w->last_step_comm.calls[op];
    }
    shs_gpu_mem_report(gmp, w, r->kind, N, n, &r->gm);
    r->fits = r->gm.fits;
    shs_estimate_step(&r->cfg, &r->res, w, hw, eff, algo, &r->est);
    /* why measured differs from the closed forms */
    char b[64], t[160];
    double states = (double)(m->peak[SHS_MEM_PARAMS] + m->peak[SHS_MEM_GRADS] + m->peak[SHS_MEM_OPTIM]);
    double form = r->form.params + r->form.grads + r->form.optim;
    r->notes[0] = 0;
    if (states != form) {
        snprintf(t, sizeof t, "padding %+.0f B (units padded to multiples of %d: %zu elements)", states - form, n,
                 r->res.padded_params - r->res.num_params);
        add_note(r->notes, sizeof r->notes, t);
    }
    /* against the paper's own byte widths (2-byte params and grads, K = 12
     * with the f32 master inside it): with a 2-byte param dtype shardsim
     * holds the same, except DDP (no persistent 2-byte copy), an f32
     * gradient buffer, and an optimizer other than AdamW */
    if (r->offload == SHS_OFFLOAD_NONE && fabs(form - r->paper_total) > 0.005 * r->paper_total) {
        snprintf(t, sizeof t, "model states %+.3g%% vs the paper's 2+2+12 total: %s", 100.0 * (form - r->paper_total) / r->paper_total,
                 width == 4 ? "f32 params/grads where it holds 2-byte ones"
                 : spp != 2 ? "optimizer state other than Adam's"
                 : r->framework == SHS_FRAMEWORK_DEEPSPEED && grad_width < 4 ? "DeepSpeed's f32 gradient copy for the optimizer step"
                 : grad_width == 4 ? "an f32 gradient buffer (--grad-accum-dtype f32)"
                 : "no persistent 2-byte parameter copy (cast at each use)");
        add_note(r->notes, sizeof r->notes, t);
    }
    if (r->offload != SHS_OFFLOAD_NONE) {
        snprintf(t, sizeof t, "offload: %s on host", r->offload == SHS_OFFLOAD_PARAMS ? "params+optimizer" : "optimizer");
        add_note(r->notes, sizeof r->notes, t);
    }
    snprintf(t, sizeof t, "+activations %s, buffers %s not in the formula",
             shs_format_bytes(b, sizeof b, (double)m->peak[SHS_MEM_ACTIVATIONS]),
             shs_format_bytes(b + 32, 32, (double)m->peak[SHS_MEM_COMM]));
    add_note(r->notes, sizeof r->notes, t);
    if ((double)r->sent_total != r->paper_sent) {
        snprintf(t, sizeof t, "comm %+.4g%% vs paper", 100.0 * ((double)r->sent_total - r->paper_sent) / r->paper_sent);
        add_note(r->notes, sizeof r->notes, t);
        if (hybrid && N / n > 1) add_note(r->notes, sizeof r->notes, "replica all-reduce of the shard over N/G ranks");
        if (tc->strategy.reduce_dtype && tc->strategy.reduce_dtype != tc->strategy.param_dtype)
            add_note(r->notes, sizeof r->notes, "gradients reduced in reduce dtype");
        if (r->res.padded_params != r->res.num_params) add_note(r->notes, sizeof r->notes, "padding");
        if (r->kind != SHS_DDP && w->last_step_comm.bytes_sent[SHS_OP_ALL_REDUCE] && !hybrid) {
            snprintf(t, sizeof t, "all_reduce of loss/norm scalars %llu B",
                     (unsigned long long)w->last_step_comm.bytes_sent[SHS_OP_ALL_REDUCE]);
            add_note(r->notes, sizeof r->notes, t);
        } else if (r->kind == SHS_DDP) {
            add_note(r->notes, sizeof r->notes, "+ the loss all-reduce (4 B)");
        }
    }
}

/* The recompute's FLOPs: the row's measured FLOPs minus those of the same
 * run keeping every activation (a second meta run; same rank); HFU counts
 * them (Korthikanti et al. 2022 §6: hardware FLOPs include recomputation),
 * MFU does not. */
static int row_hfu(row_t *r, const shs_hw_t *hw) {
    const shs_train_config_t *tc = &r->cfg.train;
    int lowp = tc->strategy.param_dtype == SHS_BF16 || tc->strategy.param_dtype == SHS_F16;
    double peak = lowp ? hw->peak_flops_16 : hw->peak_flops_32, steps = r->cfg.steps > 0 ? r->cfg.steps : 1;
    r->recompute_flops = 0;
    if (tc->recompute != SHS_RECOMPUTE_NONE) {
        shs_meta_config_t plain = r->cfg;
        plain.train.recompute = SHS_RECOMPUTE_NONE;
        shs_meta_result_t res;
        if (shs_meta_run(&plain, &res) != SHS_OK) {
            sim_error("compare", "%s without recompute: %s", r->name, shs_last_error());
            return SIM_EXIT_ERROR;
        }
        int k = (int)(r->worst - r->res.ranks);
        r->recompute_flops = ((double)r->worst->kernels.flops - (double)res.ranks[k].kernels.flops) / steps;
        shs_meta_result_free(&res);
    }
    r->hfu = r->est.step_s > 0 ? (r->est.model_flops + r->recompute_flops) / (r->est.step_s * peak) : 0;
    return SIM_EXIT_OK;
}

/* The name a checkpointing row carries: +ckpt (full), +sel (Megatron's
 * selective), +sac-op, +sac-N (torchtitan's selective). */
static void row_ckpt_suffix(char *buf, size_t n, const shs_train_config_t *tc) {
    switch (tc->recompute) {
    case SHS_RECOMPUTE_SELECTIVE: snprintf(buf, n, "+sel"); break;
    case SHS_RECOMPUTE_SELECTIVE_OP: snprintf(buf, n, "+sac-op"); break;
    case SHS_RECOMPUTE_EVERY_N: snprintf(buf, n, "+sac-%d", tc->recompute_every); break;
    default: snprintf(buf, n, "+ckpt");
    }
}

/* ---- output -------------------------------------------------------------------- */

static double unit_div(size_t maxb, const char **name) {
    if (maxb >= ((size_t)1 << 30)) { *name = "GiB"; return 1073741824.0; }
    if (maxb >= ((size_t)1 << 20)) { *name = "MiB"; return 1048576.0; }
    *name = "KiB";
    return 1024.0;
}

/* --accounting zero-paper: each row in the ZeRO paper's categories (2-byte
 * parameters, 2-byte gradients, K = 12 optimizer states holding the f32
 * master), measured beside the paper's (2+2+K)Psi forms, per rank, GB. */
static void print_zero_paper(FILE *out, const row_t *rows, int nrows, int w) {
    fprintf(out, "ZeRO paper accounting (Rajbhandari et al. 2020, §3.1 and §5; K = 12; GB = 1e9 bytes per rank), "
                 "measured | paper:\n");
    fprintf(out, "%-*s %-9s %17s %17s %17s %17s %8s\n", w, "strategy", "stage", "params (2)", "grads (2)",
            "optimizer (K)", "total", "diff");
    for (int i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        const shs_stage_t *st = shs_strategy_stage(r->kind);
        const char *stage = st->shards_params ? "Pos+g+p" : st->shards_grads ? "Pos+g" : st->shards_optimizer ? "Pos" : "baseline";
        const shs_zero_states_t *m = &r->paper_measured, *f = &r->paper;
        double mt = m->params + m->grads + m->optim;
        fprintf(out, "%-*s %-9s %8.4g|%-8.4g %8.4g|%-8.4g %8.4g|%-8.4g %8.4g|%-8.4g %+7.2f%%\n", w, r->name, stage,
                m->params / 1e9, f->params / 1e9, m->grads / 1e9, f->grads / 1e9, m->optim / 1e9, f->optim / 1e9,
                mt / 1e9, r->paper_total / 1e9, 100.0 * (mt - r->paper_total) / r->paper_total);
    }
    fprintf(out, "  measured params: the param-dtype copy (f32 with --param-dtype f32); optimizer: optimizer state\n"
                 "  + the f32 master parameters; offloaded state is on the host and not counted\n");
}

static void print_table(FILE *out, const row_t *rows, int nrows, const shs_meta_config_t *base, const char *model_name,
                        const shs_gpu_mem_preset_t *gmp, const shs_hw_t *hw, double eff, const char *algo_name,
                        int zero_paper) {
    size_t maxb = 0, device_mem = (size_t)gmp->board_bytes;
    for (int i = 0; i < nrows; i++)
        if ((size_t)rows[i].gm.total > maxb) maxb = (size_t)rows[i].gm.total;
    const char *u;
    double d = unit_div(maxb, &u);
    char suffix[24], label[48];
    row_ckpt_suffix(suffix, sizeof suffix, &base->train);
    char b1[32];
    const shs_train_config_t *tc = &base->train;
    fprintf(out, "shardsim compare: %s, %zu parameters (Psi), world %d, micro-batch %d x %d tokens, param dtype %s, %s\n",
           model_name, rows[0].res.num_params, tc->world_size, tc->micro_batch, tc->model.context,
           shs_dtype_name(tc->strategy.param_dtype), shs_optim_name(tc->strategy.optim.kind));
    shs_dtype_t pd = tc->strategy.param_dtype ? tc->strategy.param_dtype : SHS_F32;
    char b2[32], b3[32];
    fprintf(out, "  %d wrap units; board memory %s (%s, nvidia-smi's total); per-rank %s; memory: what each row's framework "
           "holds on the GPU, measured | closed form (ZeRO paper §5 partitioning, the framework's widths)\n",
           rows[0].res.num_units, shs_format_bytes(b1, sizeof b1, (double)device_mem), gmp->name, u);
    fprintf(out, "  fixed per rank: CUDA context %s + NCCL %s per communicator (NCCL_BUFFSIZE %s x %d channels x 2 ring "
           "peers%s); reserved: PyTorch's caching allocator (modelled); total = reserved + fixed; fits: total <= board\n",
           shs_format_bytes(b1, sizeof b1, gmp->cuda_context_bytes),
           shs_format_bytes(b2, sizeof b2, shs_gpu_nccl_comm_bytes(gmp, 3)), shs_format_bytes(b3, sizeof b3, gmp->nccl_buffsize),
           gmp->nccl_channels, gmp->nvls_bytes > 0 ? " + NVLink SHARP buffers" : "");
    (void)pd;
    int w = 8; /* the name column fits the longest row name */
    for (int i = 0; i < nrows; i++)
        if ((int)strlen(rows[i].name) > w) w = (int)strlen(rows[i].name);
    fprintf(out, "%-*s %17s %17s %17s %9s %9s %9s %9s %9s %4s | %9s %9s %9s %9s %6s | %9s %8s %5s %5s\n", w, "strategy",
           "params", "grads", "optimizer", "activ.", "comm buf", "alloc", "reserved", "total", "fits", "AG sent", "RS sent",
           "AR sent", "paper", "calls", "step s", "exposed", "MFU", "HFU");
    for (int i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        const shs_mem_stats_t *m = &r->worst->gpu.alloc;
        fprintf(out, "%-*s %8.3f|%-8.3f %8.3f|%-8.3f %8.3f|%-8.3f %9.3f %9.3f %9.3f %9.3f %9.3f %4s | %9.3f %9.3f %9.3f %9.3f "
               "%6llu | %9.4g %8.3g %4.1f%% %4.1f%%\n",
               w, r->name, m->peak[SHS_MEM_PARAMS] / d, r->form.params / d, m->peak[SHS_MEM_GRADS] / d, r->form.grads / d,
               m->peak[SHS_MEM_OPTIM] / d, r->form.optim / d, m->peak[SHS_MEM_ACTIVATIONS] / d,
               m->peak[SHS_MEM_COMM] / d, m->total_peak / d, r->gm.reserved / d, r->gm.total / d, r->fits ? "yes" : "NO",
               r->sent[SHS_OP_ALL_GATHER] / d,
               r->sent[SHS_OP_REDUCE_SCATTER] / d, r->sent[SHS_OP_ALL_REDUCE] / d, r->paper_sent / d,
               (unsigned long long)r->calls, r->est.step_s, r->est.exposed_comm_s, 100 * r->est.mfu, 100 * r->hfu);
    }
    if (zero_paper) print_zero_paper(out, rows, nrows, w);
    fprintf(out, "notes (where measured differs from the closed forms):\n");
    for (int i = 0; i < nrows; i++) fprintf(out, "  %-*s %s\n", w, rows[i].name, rows[i].notes);
    fprintf(out, "frameworks (whose GPU run each row's memory is; this CPU emulation holds more: its f32 views and working "
                 "copies, train's report):\n");
    for (int i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        const shs_strategy_config_t *sc = &r->cfg.train.strategy;
        shs_dtype_t rpd = sc->param_dtype ? sc->param_dtype : SHS_F32, gd = sc->grad_accum_dtype ? sc->grad_accum_dtype : rpd;
        char e[32], pk[32];
        fprintf(out, "  %-*s %s: params %s, grads %s reduced in %s; loss %s; emulation +%s (process peak %s)\n", w, r->name,
                shs_framework_describe(r->framework, r->kind), shs_dtype_name(rpd), shs_dtype_name(gd),
                shs_dtype_name(sc->reduce_dtype ? sc->reduce_dtype : rpd),
                r->cfg.train.loss_kernel == SHS_LOSS_FUSED ? "fused cross-entropy" : "torch cross_entropy on f32 logits",
                shs_format_bytes(e, sizeof e, (double)r->worst->gpu.emulation_peak),
                shs_format_bytes(pk, sizeof pk, (double)r->worst->mem.total_peak));
    }
    fprintf(out, "closed forms: Rajbhandari et al. 2020 §5: DDP (2+2+K)Psi, ZeRO-1 2Psi+2Psi+K Psi/N, ZeRO-2 2Psi+(2+K)Psi/N,\n"
           "  ZeRO-3 (2+2+K)Psi/N (hybrid: N -> shard group G); paper volume per rank: 2Psi (DDP, ZeRO-1/2), 3Psi (ZeRO-3)\n"
           "  x (N-1)/N x param-dtype bytes; sent = ring algorithm, nccl-tests busbw convention.\n"
           "step time (s, last of %d steps): roofline compute at %.0f%% of peak + exposed comm (prefetch per unit; alpha-beta, %s, %s) + offload;\n"
           "  MFU = (6 Psi + 12 L C T) x tokens / (step time x peak); see include/shardsim/estimate.h;\n"
           "  HFU adds the recompute's FLOPs (measured against the same run keeping every activation)\n"
           "activations: attention %s, autocast %s, dropout %g, %s recompute %s (%s)%s\n",
           base->steps, 100 * eff, hw->net.name, algo_name, shs_attention_name(tc->attention),
           tc->autocast ? shs_dtype_name(tc->autocast) : "off", (double)tc->dropout, suffix,
           shs_recompute_label(label, sizeof label, tc->recompute, tc->recompute_every),
           tc->arch == SHS_ARCH_LLAMA ? "llama.h" : "gpt.h",
           tc->arch == SHS_ARCH_LLAMA ? "; the Llama family's defaults: flash, bf16 autocast (--attention eager, "
                                        "--autocast off change them)" : "");
    if (sim_recompute_note(tc)) fprintf(out, "  note: %s\n", sim_recompute_note(tc));
}

static void print_csv(FILE *out, const row_t *rows, int nrows, int zero_paper) {
    fprintf(out, "name,strategy,checkpointing,offload,params_bytes,params_formula,grads_bytes,grads_formula,optimizer_bytes,"
           "optimizer_formula,paper_total,activations_bytes,comm_buffers_bytes,other_bytes,peak_bytes,fits,"
           "all_gather_sent,reduce_scatter_sent,all_reduce_sent,comm_bytes_per_step,paper_comm_bytes,collectives,"
           "compute_s,comm_s,exposed_comm_s,offload_s,step_time_s,mfu,recompute_flops,hfu,framework,reserved_bytes,"
           "fixed_bytes,total_bytes,process_peak_bytes%s\n",
            zero_paper ? ",paper_params_measured,paper_params,paper_grads_measured,paper_grads,paper_optimizer_measured,"
                         "paper_optimizer" : "");
    for (int i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        const shs_mem_stats_t *m = &r->worst->gpu.alloc;
        fprintf(out, "%s,%s,%d,%s,%zu,%.0f,%zu,%.0f,%zu,%.0f,%.0f,%zu,%zu,%zu,%zu,%d,%llu,%llu,%llu,%llu,%.0f,%llu,%.6g,%.6g,"
               "%.6g,%.6g,%.6g,%.6g,%.6g,%.6g",
               r->name, shs_strategy_name(r->kind), r->ckpt,
               r->offload == SHS_OFFLOAD_NONE ? "none" : r->offload == SHS_OFFLOAD_PARAMS ? "params" : "optimizer",
               m->peak[SHS_MEM_PARAMS], r->form.params, m->peak[SHS_MEM_GRADS], r->form.grads, m->peak[SHS_MEM_OPTIM],
               r->form.optim, r->paper_total, m->peak[SHS_MEM_ACTIVATIONS], m->peak[SHS_MEM_COMM],
               m->peak[SHS_MEM_OTHER], m->total_peak, r->fits, (unsigned long long)r->sent[SHS_OP_ALL_GATHER],
               (unsigned long long)r->sent[SHS_OP_REDUCE_SCATTER], (unsigned long long)r->sent[SHS_OP_ALL_REDUCE],
               (unsigned long long)r->sent_total, r->paper_sent, (unsigned long long)r->calls, r->est.compute_s,
               r->est.comm_s, r->est.exposed_comm_s, r->est.offload_s, r->est.step_s, r->est.mfu, r->recompute_flops, r->hfu);
        fprintf(out, ",%s,%.0f,%.0f,%.0f,%zu", shs_framework_name(r->framework), r->gm.reserved, r->gm.context + r->gm.nccl,
                r->gm.total, r->worst->mem.total_peak);
        if (zero_paper)
            fprintf(out, ",%.0f,%.0f,%.0f,%.0f,%.0f,%.0f", r->paper_measured.params, r->paper.params,
                    r->paper_measured.grads, r->paper.grads, r->paper_measured.optim, r->paper.optim);
        fputc('\n', out);
    }
}

#ifdef SHS_HAVE_JANSSON
static int print_json(FILE *out, const row_t *rows, int nrows, const shs_meta_config_t *base, const char *model_name,
                      const shs_gpu_mem_preset_t *gmp, const shs_hw_t *hw, int zero_paper) {
    size_t device_mem = (size_t)gmp->board_bytes;
    const shs_train_config_t *tc = &base->train;
    json_t *root = json_object(), *arr = json_array();
    json_object_set_new(root, "model", json_string(model_name));
    json_object_set_new(root, "num_params", json_integer((json_int_t)rows[0].res.num_params));
    json_object_set_new(root, "world_size", json_integer(tc->world_size));
    json_object_set_new(root, "micro_batch", json_integer(tc->micro_batch));
    json_object_set_new(root, "param_dtype", json_string(shs_dtype_name(tc->strategy.param_dtype)));
    json_object_set_new(root, "device_mem", json_integer((json_int_t)device_mem));
    json_object_set_new(root, "gpu", json_string(hw->name));
    json_object_set_new(root, "num_units", json_integer(rows[0].res.num_units));
    json_object_set_new(root, "gpu_memory", json_pack("{s:f,s:f,s:i,s:f}", "cuda_context", gmp->cuda_context_bytes,
                                                      "nccl_buffsize", gmp->nccl_buffsize, "nccl_channels",
                                                      gmp->nccl_channels, "nvls_per_communicator", gmp->nvls_bytes));
    for (int i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        const shs_mem_stats_t *m = &r->worst->gpu.alloc; /* what the framework's GPU run holds */
        json_t *o = json_object(), *pr = json_object(), *cf = json_object(), *cm = json_object();
        json_object_set_new(o, "name", json_string(r->name));
        json_object_set_new(o, "strategy", json_string(shs_strategy_name(r->kind)));
        json_object_set_new(o, "checkpointing", json_boolean(r->ckpt));
        json_object_set_new(o, "offload", json_string(r->offload == SHS_OFFLOAD_NONE ? "none"
                                                      : r->offload == SHS_OFFLOAD_PARAMS ? "params" : "optimizer"));
        json_object_set_new(pr, "params", json_integer((json_int_t)m->peak[SHS_MEM_PARAMS]));
        json_object_set_new(pr, "grads", json_integer((json_int_t)m->peak[SHS_MEM_GRADS]));
        json_object_set_new(pr, "optimizer", json_integer((json_int_t)m->peak[SHS_MEM_OPTIM]));
        json_object_set_new(pr, "activations", json_integer((json_int_t)m->peak[SHS_MEM_ACTIVATIONS]));
        json_object_set_new(pr, "comm_buffers", json_integer((json_int_t)m->peak[SHS_MEM_COMM]));
        json_object_set_new(pr, "other", json_integer((json_int_t)m->peak[SHS_MEM_OTHER]));
        json_object_set_new(pr, "peak", json_integer((json_int_t)m->total_peak));
        json_object_set_new(pr, "reserved", json_integer((json_int_t)r->gm.reserved));
        json_object_set_new(pr, "cuda_context", json_integer((json_int_t)r->gm.context));
        json_object_set_new(pr, "nccl", json_integer((json_int_t)r->gm.nccl));
        json_object_set_new(pr, "total", json_integer((json_int_t)r->gm.total));
        json_object_set_new(o, "per_rank_bytes", pr);
        json_object_set_new(o, "framework", json_string(shs_framework_name(r->framework)));
        json_object_set_new(o, "process_bytes", json_pack("{s:I,s:I}", "peak", (json_int_t)r->worst->mem.total_peak,
                                                          "emulation_peak", (json_int_t)r->worst->gpu.emulation_peak));
        json_object_set_new(cf, "params", json_real(r->form.params));
        json_object_set_new(cf, "grads", json_real(r->form.grads));
        json_object_set_new(cf, "optimizer", json_real(r->form.optim));
        json_object_set_new(cf, "paper_total", json_real(r->paper_total));
        json_object_set_new(cf, "paper_comm_bytes", json_real(r->paper_sent));
        json_object_set_new(o, "closed_form_bytes", cf);
        if (zero_paper)
            json_object_set_new(o, "zero_paper_bytes",
                                json_pack("{s:{s:f,s:f,s:f},s:{s:f,s:f,s:f}}", "measured", "params",
                                          r->paper_measured.params, "grads", r->paper_measured.grads, "optimizer",
                                          r->paper_measured.optim, "paper", "params", r->paper.params, "grads",
                                          r->paper.grads, "optimizer", r->paper.optim));
        json_object_set_new(o, "fits", json_boolean(r->fits));
        json_object_set_new(o, "host_bytes", json_integer((json_int_t)r->worst->host.total_peak));
        for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
            if (op == SHS_OP_SPLIT || op == SHS_OP_BARRIER) continue;
            json_object_set_new(cm, shs_coll_op_name((shs_coll_op_t)op),
                                json_pack("{s:I,s:I,s:I}", "calls", (json_int_t)r->worst->last_step_comm.calls[op],
                                          "bytes", (json_int_t)r->worst->last_step_comm.bytes[op], "bytes_sent",
                                          (json_int_t)r->sent[op]));
        }
        json_object_set_new(o, "collectives", cm);
        json_object_set_new(o, "comm_bytes_per_step", json_integer((json_int_t)r->sent_total));
        json_object_set_new(o, "num_collectives", json_integer((json_int_t)r->calls));
        json_object_set_new(o, "flops", json_integer((json_int_t)(r->worst->kernels.flops / (uint64_t)(r->cfg.steps))));
        json_object_set_new(o, "compute_s", json_real(r->est.compute_s));
        json_object_set_new(o, "comm_s", json_real(r->est.comm_s));
        json_object_set_new(o, "exposed_comm_s", json_real(r->est.exposed_comm_s));
        json_object_set_new(o, "offload_s", json_real(r->est.offload_s));
        json_object_set_new(o, "step_time_s", json_real(r->est.step_s));
        json_object_set_new(o, "mfu", json_real(r->est.mfu));
        char label[48];
        json_object_set_new(o, "recompute", json_string(shs_recompute_label(label, sizeof label, r->cfg.train.recompute,
                                                                            r->cfg.train.recompute_every)));
        json_object_set_new(o, "recompute_flops", json_real(r->recompute_flops));
        json_object_set_new(o, "hfu", json_real(r->hfu));
        json_object_set_new(o, "notes", json_string(r->notes));
        json_t *tl = json_array();
        for (int s = 0; s < r->worst->num_segments; s++) {
            const shs_step_segment_t *g = &r->worst->segments[s];
            json_t *seg = json_object(), *mem = json_object();
            static const char *const kinds[] = {"setup", "forward", "backward", "optim", "loss"};
            json_object_set_new(seg, "label", json_string(g->label));
            json_object_set_new(seg, "phase", json_string(kinds[g->kind]));
            json_object_set_new(seg, "unit", json_integer(g->unit));
            for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++)
                json_object_set_new(mem, shs_mem_category_name((shs_mem_category_t)c), json_integer((json_int_t)g->gpu_mem_end[c]));
            json_object_set_new(seg, "mem_end", mem);
            json_object_set_new(seg, "peak_total", json_integer((json_int_t)g->gpu_peak_total));
            json_object_set_new(seg, "flops", json_integer((json_int_t)g->flops));
            json_object_set_new(seg, "collectives", json_integer((json_int_t)(g->calls_end - g->calls_begin)));
            json_array_append_new(tl, seg);
        }
        json_object_set_new(o, "timeline", tl);
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "strategies", arr);
    char *s = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    if (!s) return SIM_EXIT_ERROR;
    fprintf(out, "%s\n", s);
    free(s);
    return SIM_EXIT_OK;
}
#endif

/* ---- main ------------------------------------------------------------------------ */

int sim_cmd_compare(int argc, char **argv) {
    shs_meta_config_t base = {.steps = 2};
    shs_train_config_t *tc = &base.train;
    *tc = shs_train_default_config();
    tc->world_size = 8;
    tc->micro_batch = 1;
    tc->strategy.param_dtype = SHS_BF16;
    tc->device_mem = SIZE_MAX;
    const char *output = NULL;
    const char *model = "gpt2-124m", *hf_path = NULL, *format = "table", *plot = NULL, *gpu = "h100-sxm", *strategies = NULL;
    size_t device_mem = 0;
    double eff = 0.5;
    int variants_all = 1, zero_paper = 0, rc_, ds_rows = 0; /* ds_rows: one row, the config's offload */
    shs_ds_config_t *ds = NULL;
    shs_ds_source_t ds_src[SHS_DS_NUM_SETTINGS];
    shs_recompute_t recompute = SHS_RECOMPUTE_FULL;
    shs_net_algo_t algo = SHS_NUM_ALGOS;
    const sim_command_t cmd = {"compare", compare_usage_head, compare_options, C_NUM_OPTIONS, compare_defaults,
                               NULL, NULL};
    sim_opts_t o;
    if ((rc_ = sim_opts_parse(&cmd, argc, argv, &o)) >= 0) return rc_;
    const sim_opts_t *op = &o;
#define GIVEN(id) op->given[id]
    if (GIVEN(C_MODEL)) model = o.str[C_MODEL];
    if (GIVEN(C_HF_CONFIG)) {
        static const compare_opt_t shape[] = {C_MODEL, C_LAYERS, C_CHANNELS, C_HEADS, C_VOCAB};
        for (int k = 0; k < 5; k++)
            if (GIVEN(shape[k]))
                return usage_error("--hf-config and %s exclude each other (the file gives the shape)",
                                   compare_options[shape[k]].name);
        hf_path = o.str[C_HF_CONFIG];
    }
    if (GIVEN(C_WORLD)) tc->world_size = (int)o.num[C_WORLD];
    if (GIVEN(C_MICRO_BATCH)) tc->micro_batch = (int)o.num[C_MICRO_BATCH];
    if (GIVEN(C_PARAM_DTYPE) && (rc_ = sim_opt_dtype("compare", "--param-dtype", o.str[C_PARAM_DTYPE], &tc->strategy.param_dtype)) >= 0)
        return rc_;
    if (GIVEN(C_REDUCE_DTYPE) &&
        (rc_ = sim_opt_dtype("compare", "--reduce-dtype", o.str[C_REDUCE_DTYPE], &tc->strategy.reduce_dtype)) >= 0)
        return rc_;
    if (GIVEN(C_GRAD_ACCUM_DTYPE) &&
        (rc_ = sim_opt_dtype("compare", "--grad-accum-dtype", o.str[C_GRAD_ACCUM_DTYPE], &tc->strategy.grad_accum_dtype)) >= 0)
        return rc_;
    if (tc->strategy.grad_accum_dtype && tc->strategy.grad_accum_dtype != SHS_F32 &&
        tc->strategy.grad_accum_dtype != tc->strategy.param_dtype)
        return usage_error("--grad-accum-dtype takes f32 or the param dtype %s (got '%s')",
                           shs_dtype_name(tc->strategy.param_dtype), o.str[C_GRAD_ACCUM_DTYPE]);
    if (GIVEN(C_ACCOUNTING)) {
        if (!strcmp(o.str[C_ACCOUNTING], "zero-paper")) zero_paper = 1;
        else if (strcmp(o.str[C_ACCOUNTING], "shardsim"))
            return usage_error("--accounting must be shardsim or zero-paper, not %s", o.str[C_ACCOUNTING]);
    }
    if (GIVEN(C_OPTIMIZER) && (rc_ = sim_opt_optimizer("compare", o.str[C_OPTIMIZER], &tc->strategy.optim)) >= 0) return rc_;
    if (GIVEN(C_MOMENTUM)) {
        if (tc->strategy.optim.kind != SHS_OPTIM_SGD)
            return usage_error("--momentum applies to sgd, not %s", shs_optim_name(tc->strategy.optim.kind));
        tc->strategy.optim.momentum = (float)o.num[C_MOMENTUM];
    }
    if (GIVEN(C_DEVICE_MEM)) {
        device_mem = o.bytes[C_DEVICE_MEM];
        if (device_mem == 0) return usage_error("--device-mem must be > 0, not %s", o.str[C_DEVICE_MEM]);
    }
    if (GIVEN(C_WRAP)) {
        char err[256];
        if (sim_parse_wrap(o.str[C_WRAP], &base.train.wrap_min_params, err, sizeof err))
            return usage_error("--wrap %s", err);
    }
    if (GIVEN(C_STRATEGIES)) {
        const char *v = o.str[C_STRATEGIES];
        if ((rc_ = sim_list_check("compare", "--strategies", v)) >= 0) return rc_;
        char item[64];
        int seen[SHS_NUM_STRATEGIES] = {0};
        for (const char *p = v; sim_list_next(&p, item, sizeof item);) {
            shs_strategy_kind_t k;
            if (shs_strategy_parse(item, &k))
                return usage_error("--strategies: unknown strategy '%s' in '%s' (ddp, zero1, zero2, zero3, "
                                   "hybrid_shard, hybrid_shard_zero2)", item, v);
            if (seen[k]++) return usage_error("--strategies: '%s' is given twice in '%s'", item, v);
        }
        strategies = v;
    }
    if (GIVEN(C_VARIANTS)) {
        const char *v = o.str[C_VARIANTS];
        if (!strcmp(v, "all")) variants_all = 1;
        else if (!strcmp(v, "plain")) variants_all = 0;
        else return usage_error("--variants must be all or plain, not %s", v);
    }
    if (GIVEN(C_GPU)) gpu = o.str[C_GPU];
    if (GIVEN(C_EFFICIENCY)) eff = o.num[C_EFFICIENCY];
    if (GIVEN(C_ALGO) && strcmp(o.str[C_ALGO], "auto") != 0 && shs_net_algo_parse(o.str[C_ALGO], &algo))
        return usage_error("--algo must be ring, tree, direct or auto, not %s", o.str[C_ALGO]);
    if (GIVEN(C_FORMAT)) {
        format = o.str[C_FORMAT];
        if (strcmp(format, "table") && strcmp(format, "json") && strcmp(format, "csv"))
            return usage_error("--format must be table, json or csv, not %s", format);
    }
#define STR(id) (GIVEN(id) ? o.str[id] : NULL)
    const sim_exec_args_t ea = {0, STR(C_RECOMPUTE), STR(C_AC_MODE), STR(C_SELECTIVE_AC_OPTION), STR(C_ATTENTION),
                                STR(C_AUTOCAST), GIVEN(C_DROPOUT), o.num[C_DROPOUT]};
#undef STR
    if ((rc_ = sim_opt_exec("compare", &ea, tc)) >= 0) return rc_;
    if (!GIVEN(C_RECOMPUTE) && !GIVEN(C_AC_MODE) && !GIVEN(C_SELECTIVE_AC_OPTION)) tc->recompute = SHS_RECOMPUTE_FULL;
    if (tc->recompute == SHS_RECOMPUTE_NONE)
        return usage_error("%s none: the checkpointing variants need full or selective (--variants plain runs none)",
                           GIVEN(C_AC_MODE) ? "--ac-mode" : "--recompute-granularity");
    recompute = tc->recompute; /* the table's legend; each row sets its own */
    if (GIVEN(C_PLOT)) plot = o.str[C_PLOT];
    if (GIVEN(C_OUTPUT)) output = o.str[C_OUTPUT];
    long layers = GIVEN(C_LAYERS) ? (long)o.num[C_LAYERS] : 0, channels = GIVEN(C_CHANNELS) ? (long)o.num[C_CHANNELS] : 0,
         heads = GIVEN(C_HEADS) ? (long)o.num[C_HEADS] : 0, context = GIVEN(C_CONTEXT) ? (long)o.num[C_CONTEXT] : 0,
         vocab = GIVEN(C_VOCAB) ? (long)o.num[C_VOCAB] : -1, G = GIVEN(C_SHARD_GROUP_SIZE) ? (long)o.num[C_SHARD_GROUP_SIZE] : 0;
#undef GIVEN
    if (!strcmp(format, "json") && !shs_feature_available(SHS_FEATURE_JANSSON))
        return usage_error("--format json %s", shs_feature_missing(SHS_FEATURE_JANSSON));
    if (plot && output) { /* one file for both: the second written would silently replace the first */
        const shs_out_named_t outs[] = {{"--output", output}, {"--plot", plot}};
        if (shs_out_check(outs, 2, NULL, 0) != SHS_OK) {
            sim_error("compare", "%s", shs_last_error());
            return SIM_EXIT_ERROR;
        }
    }
    char model_name[320];
    shs_hf_config_t hf;
    const shs_model_preset_t *preset = hf_path ? NULL : shs_model_preset_find(model);
    if (hf_path) {
        if (shs_hf_config_load(hf_path, &hf) != SHS_OK) {
            sim_error("compare", "--hf-config: %s", shs_last_error());
            return SIM_EXIT_ERROR;
        }
        /* the model's context, capped at the longest a run takes */
        int model_T = shs_hf_config_context(&hf);
        int default_T = model_T < SHS_TRAIN_MAX_CONTEXT ? model_T : SHS_TRAIN_MAX_CONTEXT;
        if ((rc_ = sim_model_set_hf("compare", hf_path, &hf, (int)context, default_T, tc)) >= 0)
            return rc_;
        /* the file's dtype, below the command line and a DeepSpeed config (which trains in fp32 unless
         * its fp16 / bf16 section says otherwise, whatever torch_dtype says) */
        if (!o.given[C_PARAM_DTYPE] && !o.given[C_DS_CONFIG] && hf.torch_dtype) tc->strategy.param_dtype = hf.torch_dtype;
        char what[sizeof model_name - 32];
        snprintf(what, sizeof what, "%s (model_type %s%s%s)", hf_path, hf.model_type,
                 hf.torch_dtype ? ", torch_dtype " : "", hf.torch_dtype ? shs_dtype_name(hf.torch_dtype) : "");
        sim_model_describe(model_name, sizeof model_name, what, tc, 0);
        size_t len = strlen(model_name);
        if (!context && default_T < model_T)
            snprintf(model_name + len, sizeof model_name - len, " (T: %s %d capped at compare's %d; --context sets it)",
                     shs_hf_config_context_key(&hf), model_T, default_T);
    } else if (!preset) {
        return usage_error("--model: unknown model preset '%s' (%s)", model, "compare --help lists them");
    } else if (preset->arch == SHS_ARCH_LLAMA) {
        if (layers || channels || heads || vocab >= 0)
            return usage_error("--layers/--channels/--heads/--vocab shape a GPT, not the Llama-family preset %s "
                               "(--hf-config takes any Llama shape)", preset->name);
        if ((rc_ = sim_model_set_llama("compare", preset->name, &preset->llama, preset->sliding_window, (int)context,
                                       preset->cfg.context, tc)) >= 0)
            return rc_;
        sim_model_describe(model_name, sizeof model_name, preset->name, tc, 0);
    }
    if (!hf_path && preset->arch == SHS_ARCH_GPT) {
        tc->model = preset->cfg;
        int custom = layers || channels || heads || context || vocab >= 0;
        if (layers) tc->model.num_layers = (int)layers;
        if (channels) tc->model.channels = (int)channels;
        if (heads) tc->model.num_heads = (int)heads;
        if (context) tc->model.context = (int)context;
        if (vocab >= 0) tc->model.vocab = (int)vocab;
        if (custom)
            snprintf(model_name, sizeof model_name, "custom GPT L=%d C=%d NH=%d T=%d V=%d", tc->model.num_layers,
                     tc->model.channels, tc->model.num_heads, tc->model.context, shs_gpt_vocab(&tc->model));
        else snprintf(model_name, sizeof model_name, "%s", preset->name);
    }
    /* after the model: its hidden size fills the "auto" bucket keys */
    if (o.given[C_DS_CONFIG]) {
        /* the options given beside the config win; --strategies and --variants choose rows, so given
         * they take the stage and the offload from the command line */
        static const compare_opt_t by_setting[SHS_DS_NUM_SETTINGS] = {
            [SHS_DS_STAGE] = C_STRATEGIES, [SHS_DS_SHARD_GROUP] = C_SHARD_GROUP_SIZE, [SHS_DS_DTYPE] = C_PARAM_DTYPE,
            [SHS_DS_REDUCE_DTYPE] = C_REDUCE_DTYPE, [SHS_DS_GRAD_ACCUM_DTYPE] = C_GRAD_ACCUM_DTYPE,
            [SHS_DS_MICRO_BATCH] = C_MICRO_BATCH, [SHS_DS_WORLD] = C_WORLD, [SHS_DS_OFFLOAD] = C_VARIANTS,
            [SHS_DS_OPTIMIZER] = C_OPTIMIZER, [SHS_DS_MOMENTUM] = C_MOMENTUM};
        static const int has_option[SHS_DS_NUM_SETTINGS] = {
            [SHS_DS_STAGE] = 1, [SHS_DS_SHARD_GROUP] = 1, [SHS_DS_DTYPE] = 1, [SHS_DS_REDUCE_DTYPE] = 1,
            [SHS_DS_GRAD_ACCUM_DTYPE] = 1, [SHS_DS_MICRO_BATCH] = 1, [SHS_DS_WORLD] = 1, [SHS_DS_OFFLOAD] = 1,
            [SHS_DS_OPTIMIZER] = 1, [SHS_DS_MOMENTUM] = 1};
        int given[SHS_DS_NUM_SETTINGS];
        for (int k = 0; k < SHS_DS_NUM_SETTINGS; k++) given[k] = has_option[k] && o.given[by_setting[k]];
        if (o.given[C_STRATEGIES]) { /* the stage-3 keys apply if a listed strategy shards parameters */
            char item[64];
            int first = 1;
            for (const char *p = strategies; sim_list_next(&p, item, sizeof item);) {
                shs_strategy_kind_t k;
                if (shs_strategy_parse(item, &k)) continue;
                if (first || shs_strategy_stage(k)->shards_params) tc->strategy.kind = k;
                if (shs_strategy_stage(k)->shards_params) break;
                first = 0;
            }
        }
        static shs_ds_config_t ds_store; /* one command per process; large for the stack */
        ds = &ds_store;
        if ((rc_ = sim_ds_config_apply("compare", o.str[C_DS_CONFIG], given, 0, ds, tc, ds_src)) >= 0) return rc_;
        if (o.given[C_VARIANTS]) ds_src[SHS_DS_OFFLOAD] = SHS_DS_FROM_PER_ROW;
        if (o.given[C_MOMENTUM] && tc->strategy.optim.kind != SHS_OPTIM_SGD)
            return usage_error("--momentum applies to sgd, not %s (the optimizer of --ds-config)",
                               shs_optim_name(tc->strategy.optim.kind));
        ds_rows = !o.given[C_VARIANTS];
        if (!o.given[C_STRATEGIES]) strategies = shs_strategy_name(tc->strategy.kind);
    }
    /* the Llama family trains as its reference runs do (torchtitan, Hugging Face): under bf16
     * autocast with flash attention (SDPA's flash kernel) */
    int llama_defaults = tc->arch == SHS_ARCH_LLAMA && !tc->model_file;
    if (llama_defaults && !o.given[C_ATTENTION]) tc->attention = SHS_ATTENTION_FLASH;
    if (llama_defaults && !o.given[C_AUTOCAST]) tc->autocast = SHS_BF16;
    if (tc->arch == SHS_ARCH_GPT && shs_gpt_config_validate(&tc->model) != SHS_OK)
        return usage_error("%s", shs_last_error());
    if ((rc_ = sim_opt_exec_check_model("compare", tc)) >= 0) return rc_;
    shs_hw_t hw;
    if (shs_hw_preset(gpu, &hw) != SHS_OK) return usage_error("--gpu: %s", shs_last_error());
    const double *hv = &o.num[C_PEAK_TFLOPS];
    const int *hs = &o.given[C_PEAK_TFLOPS]; /* the custom GPU values, in their rows' order */
    if (hs[0]) hw.peak_flops_16 = hw.peak_flops_32 = hv[0] * 1e12;
    if (hs[1]) hw.hbm_bw = hv[1] * 1e9;
    if (hs[2]) hw.net.intra_bw = hv[2] * 1e9;
    if (hs[3]) hw.net.inter_bw = hv[3] * 1e9;
    if (hs[4]) hw.net.intra_lat = hv[4] * 1e-6;
    if (hs[5]) hw.net.inter_lat = hv[5] * 1e-6;
    if (hs[6]) hw.net.gpus_per_node = hv[6] < 1 ? 1 : (int)hv[6];
    if (hs[7]) hw.pcie_bw = hv[7] * 1e9;
    if (hs[8]) hw.host_bw = hv[8] * 1e9;
    int nic_given = o.given[C_NICS_PER_NODE] || o.given[C_NIC_GBPS];
    if (o.given[C_INTER_GBS] && nic_given)
        return usage_error("--inter-gbs (a flat ring's per-GPU bandwidth) and --nics-per-node / --nic-gbps (the "
                           "per-NIC cluster model) exclude each other");
    if (o.given[C_INTER_GBS]) hw.net.nics_per_node = 0; /* the flat ring: inter_bw per rank */
    if (o.given[C_NICS_PER_NODE]) hw.net.nics_per_node = (int)o.num[C_NICS_PER_NODE];
    if (o.given[C_NIC_GBPS]) hw.net.nic_bw = o.num[C_NIC_GBPS] * 1e9 / 8;
    for (int k = 0; k <= C_NIC_GBPS - C_PEAK_TFLOPS; k++)
        if (hs[k]) {
            size_t len = strlen(hw.name);
            snprintf(hw.name + len, sizeof hw.name - len, "+custom");
            break;
        }
    /* the board's memory and a run's fixed costs (gpu_memory.h), each preset constant replaceable */
    shs_gpu_mem_preset_t gmp;
    if (shs_gpu_mem_preset(gpu, &gmp) != SHS_OK) return usage_error("--gpu: %s", shs_last_error());
    if (device_mem) gmp.board_bytes = (double)device_mem;
    if (o.given[C_CUDA_CONTEXT_MIB]) gmp.cuda_context_bytes = o.num[C_CUDA_CONTEXT_MIB] * 1048576.0;
    if (o.given[C_NCCL_BUFFSIZE]) gmp.nccl_buffsize = o.num[C_NCCL_BUFFSIZE];
    if (o.given[C_NCCL_CHANNELS]) gmp.nccl_channels = (int)o.num[C_NCCL_CHANNELS];
    if (shs_gpu_mem_check(&gmp) != SHS_OK) return usage_error("--gpu: %s", shs_last_error());
    device_mem = (size_t)gmp.board_bytes;
    shs_framework_t framework = SHS_FRAMEWORK_DEFAULT;
    if (o.given[C_FRAMEWORK]) {
        if (!strcmp(o.str[C_FRAMEWORK], "torch")) framework = SHS_FRAMEWORK_TORCH;
        else if (!strcmp(o.str[C_FRAMEWORK], "deepspeed")) framework = SHS_FRAMEWORK_DEEPSPEED;
        else return usage_error("--framework must be torch or deepspeed, not %s", o.str[C_FRAMEWORK]);
    } else if (ds) {
        framework = SHS_FRAMEWORK_DEEPSPEED; /* a DeepSpeed config describes DeepSpeed's engine */
    }
    if (o.given[C_LOSS_KERNEL]) {
        if (!strcmp(o.str[C_LOSS_KERNEL], "fused")) tc->loss_kernel = SHS_LOSS_FUSED;
        else if (strcmp(o.str[C_LOSS_KERNEL], "torch")) return usage_error("--loss-kernel must be torch or fused, not %s",
                                                                           o.str[C_LOSS_KERNEL]);
    }
    if (o.given[C_RESHARD]) {
        const char *v = o.str[C_RESHARD];
        char *end;
        long R = strtol(v, &end, 10);
        if (!strcmp(v, "false")) tc->strategy.keep_after_forward = 1;
        else if (!strcmp(v, "true")) tc->strategy.keep_after_forward = 0;
        else if (*v && !*end && R >= 1 && R <= SHS_MAX_META_WORLD) tc->strategy.reshard_after_forward_size = (int)R;
        else return usage_error("--reshard-after-forward must be true, false or a group size 1..%d, not '%s'",
                                SHS_MAX_META_WORLD, v);
    }
    int N = tc->world_size;
    if (N > hw.net.gpus_per_node && N % hw.net.gpus_per_node)
        return usage_error("--world %d spans more than one node but is not a multiple of --gpus-per-node %d (%s); "
                           "whole nodes only", N, hw.net.gpus_per_node, hw.name);
    if (!G && ds && ds_src[SHS_DS_SHARD_GROUP] == SHS_DS_FROM_CONFIG) G = tc->strategy.shard_group_size;
    if (!G) G = N % 8 == 0 ? 8 : N;
    if (N % G) return usage_error("--shard-group-size %ld must divide --world %d", G, N);
    int R = tc->strategy.reshard_after_forward_size;
    if (R && (N % R || (strategies && strstr(strategies, "hybrid_shard") && G % R)))
        return usage_error("--reshard-after-forward %d must divide the shard group (--world %d%s)", R, N,
                           strategies && strstr(strategies, "hybrid_shard") ? ", --shard-group-size" : "");
    tc->strategy.shard_group_size = (int)G;

    static const shs_strategy_kind_t kinds[] = {SHS_DDP, SHS_ZERO1, SHS_ZERO2, SHS_ZERO3, SHS_HYBRID_SHARD,
                                                SHS_HYBRID_SHARD_ZERO2};
    char ckpt_suffix[24];
    row_ckpt_suffix(ckpt_suffix, sizeof ckpt_suffix, tc);
    row_t *rows = calloc(4 * SHS_NUM_STRATEGIES, sizeof *rows);
    if (!rows) return SIM_EXIT_ERROR;
    int nrows = 0, rc = SIM_EXIT_OK;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (strategies) {
            char item[64];
            int found = 0;
            for (const char *p = strategies; !found && sim_list_next(&p, item, sizeof item);)
                found = !strcmp(item, shs_strategy_name(kinds[k]));
            if (!found) continue;
        }
        for (int var = 0; var < (ds_rows ? 1 : variants_all ? 4 : 1); var++) {
            row_t *r = &rows[nrows];
            r->kind = kinds[k];
            r->ckpt = var & 1;
            int off = ds_rows ? tc->strategy.offload != SHS_OFFLOAD_NONE : (var & 2) != 0;
            r->offload = ds_rows ? tc->strategy.offload
                         : !off ? SHS_OFFLOAD_NONE
                         : (kinds[k] == SHS_ZERO3 || kinds[k] == SHS_HYBRID_SHARD) ? SHS_OFFLOAD_PARAMS : SHS_OFFLOAD_OPTIMIZER;
            snprintf(r->name, sizeof r->name, "%s%s%s", shs_strategy_name(r->kind), r->ckpt ? ckpt_suffix : "",
                     off ? "+offload" : "");
            r->cfg = base;
            r->cfg.train.strategy.kind = r->kind;
            r->cfg.train.recompute = r->ckpt ? recompute : SHS_RECOMPUTE_NONE;
            r->cfg.train.strategy.offload = r->offload;
            /* the framework the row's memory models, and the dtypes its gradients take there unless given:
             * PyTorch's DDP and FSDP2 keep f32 gradients of their f32 parameters and reduce them in f32
             * (torchtitan's FSDP2 default, reduce_dtype float32) */
            shs_strategy_config_t *sc = &r->cfg.train.strategy;
            sc->framework = framework ? framework : shs_strategy_stage(r->kind)->framework;
            r->framework = sc->framework;
            int torch_f32_grads = sc->framework == SHS_FRAMEWORK_TORCH && !ds &&
                                  (r->kind == SHS_DDP || shs_strategy_stage(r->kind)->shards_params);
            if (torch_f32_grads && !o.given[C_GRAD_ACCUM_DTYPE]) sc->grad_accum_dtype = SHS_F32;
            if (torch_f32_grads && !o.given[C_REDUCE_DTYPE]) sc->reduce_dtype = SHS_F32;
            r->cfg.gpu_reserve_limit = (size_t)(gmp.board_bytes - shs_gpu_fixed_bytes(&gmp, r->kind, N, (int)G));
            if (ds && !shs_strategy_stage(r->kind)->shards_params) { /* the stage-3 keys: stage 3 only */
                r->cfg.train.replicate_below = shs_train_default_config().replicate_below;
                r->cfg.train.strategy.backward_prefetch = shs_train_default_config().strategy.backward_prefetch;
            }
            if (shs_meta_run(&r->cfg, &r->res) != SHS_OK) {
                sim_error("compare", "%s: %s", r->name, shs_last_error());
                rc = SIM_EXIT_ERROR;
                goto out;
            }
            nrows++;
            fill_row(r, &gmp, &hw, eff, algo);
            if ((rc = row_hfu(r, &hw)) != SIM_EXIT_OK) goto out;
        }
    }
    if (!nrows) {
        rc = usage_error("no strategy selected by --strategies %s", strategies);
        goto out;
    }
    /* --output is written whole or not at all (temp file, then rename) */
    shs_afile_t af = {0};
    if (output && shs_afile_open(&af, output, "w") != SHS_OK) {
        sim_error("compare", "%s", shs_last_error());
        rc = SIM_EXIT_ERROR;
        goto out;
    }
    FILE *dst = output ? af.fp : stdout;
    if (!strcmp(format, "csv")) print_csv(dst, rows, nrows, zero_paper);
#ifdef SHS_HAVE_JANSSON
    else if (!strcmp(format, "json")) rc = print_json(dst, rows, nrows, &base, model_name, &gmp, &hw, zero_paper);
#endif
    else {
        if (ds) {
            char desc[8192];
            shs_ds_config_describe(ds, tc, ds_src, "", desc, sizeof desc);
            fprintf(dst, "%s", desc);
        }
        print_table(dst, rows, nrows, &base, model_name, &gmp, &hw, eff,
                    algo == SHS_NUM_ALGOS ? "auto: faster of ring and tree" : shs_net_algo_name(algo), zero_paper);
    }
    if (output) {
        if (rc != SIM_EXIT_OK) {
            shs_afile_discard(&af);
        } else if (shs_afile_commit(&af) != SHS_OK) {
            sim_error("compare", "%s", shs_last_error());
            rc = SIM_EXIT_ERROR;
        }
    }
    if (plot) {
        sim_plot_row_t *pr = calloc(nrows > 0 ? (size_t)nrows : 1, sizeof *pr);
        for (int i = 0; pr && i < nrows; i++) pr[i] = (sim_plot_row_t){rows[i].name, rows[i].worst, (size_t)gmp.board_bytes, 1};
        if (!pr || sim_compare_plot(plot, model_name, pr, nrows) != 0) {
            if (pr) sim_error("compare", "%s", shs_last_error()); /* it names the file */
            else sim_error("compare", "%s: out of memory", plot);
            rc = SIM_EXIT_ERROR;
        }
        free(pr);
    }
out:
    for (int i = 0; i < nrows; i++) shs_meta_result_free(&rows[i].res);
    free(rows);
    return rc;
}
