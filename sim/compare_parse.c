/* compare_parse.c - `shardsim compare`'s options and their reading into a
 * job (compare.h): the model, the strategies and variants, the GPU and its
 * network, the output. What it is not: the runs or the output (compare_run.c,
 * compare_print.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "compare.h"
#include "model_choice.h"
#include "options.h"
#include "shardsim/durable.h"
#include "shardsim/features.h"
#include "shardsim/model_preset.h"
#include "shardsim/optim.h"

#define usage_error(...) sim_usage_error("compare", __VA_ARGS__)


/* The options of `compare`; the rows' order is --help's. */
typedef enum {
    C_MODEL, C_HF_CONFIG, C_LAYERS, C_CHANNELS, C_HEADS, C_CONTEXT, C_VOCAB, C_WORLD, C_PARAM_DTYPE, C_REDUCE_DTYPE, C_GRAD_ACCUM_DTYPE,
    C_OPTIMIZER,
    C_MOMENTUM, C_MICRO_BATCH, C_GRAD_ACCUM, C_DEVICE_MEM, C_WRAP, C_SHARD_GROUP_SIZE, C_STRATEGIES, C_VARIANTS, C_GPU, C_EFFICIENCY,
    C_ALGO, C_PROTO, C_PEAK_TFLOPS, C_HBM_GBS, C_INTRA_GBS, C_GPUS_PER_NODE,
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
                 "its fields (a custom GPT). Llama family (their config.json shapes;\n"
                 "--context only): llama2-7b llama2-13b llama2-70b llama3-8b llama3-70b\n"
                 "llama3.1-8b llama3.1-70b llama3.1-405b llama3.2-1b llama3.2-3b\n"
                 "mistral-7b qwen2.5-7b qwen3-0.6b gemma-2b gemma2-9b gemma2-27b\n"
                 "gemma3-1b phi3-mini olmo2-7b olmo2-13b internlm2.5-7b smollm2-360m;\n"
                 "default context the pre-training one (llama3.1: 8192, mistral-7b:\n"
                 "8192 with its window of 4096), else max_position_embeddings"},
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
    [C_GRAD_ACCUM] = {"--grad-accum", NULL, SIM_OPT_INT, 1, 65536, 0, 0, "K",
                      "micro-batches per step (as train: gradients reduced on the last);\n"
                      "the step time covers all K"},
    [C_DEVICE_MEM] = SIM_ROW_DEVICE_MEM,
    [C_WRAP] = {"--wrap", NULL, SIM_OPT_STR, 0, 0, 0, 0, "P",
                "block (one unit per block) | size:N (blocks grouped into units of at\n"
                "least N parameters, FSDP's size-based auto-wrap)"},
    [C_SHARD_GROUP_SIZE] = {"--shard-group-size", NULL, SIM_OPT_INT, 1, SHS_MAX_META_WORLD, 0, 0, "G",
                            "hybrid_*: shard within groups of G consecutive ranks, replicate\nacross the N/G groups"},
    [C_STRATEGIES] = {"--strategies", NULL, SIM_OPT_STR, 0, 0, 0, 0, "LIST", "comma-separated subset, e.g. ddp,zero3"},
    [C_VARIANTS] = {"--variants", NULL, SIM_OPT_STR, 0, 0, 0, 0, "V", "all (plain, +ckpt, +offload, +ckpt+offload) | plain"},
    [C_GPU] = {"--gpu", NULL, SIM_OPT_STR, 0, 0, 0, 0, "G", "a100 | h100-sxm | h100-hbm2e | h200 (constants and sources:\nsrc/time/gpu_preset.c)"},
    [C_EFFICIENCY] = {"--efficiency", NULL, SIM_OPT_FLOAT, 1e-3, 1, 0, 0, "E",
                      "fraction of the peak a large GEMM reaches (replaces the GPU's\n"
                      "calibrated constant; tile and wave quantization still apply)"},
    [C_ALGO] = {"--algo", NULL, SIM_OPT_STR, 0, 0, 0, 0, "A", "ring | tree | auto: NCCL's algorithm (auto: its choice per call)"},
    [C_PROTO] = {"--proto", NULL, SIM_OPT_STR, 0, 0, 0, 0, "P", "ll | ll128 | simple | auto: NCCL's protocol (auto: its choice per call)"},
    [C_PEAK_TFLOPS] = HW_ROW("--peak-tflops", "custom GPU (overrides the --gpu preset): dense TFLOP/s, the param dtype's"),
    [C_HBM_GBS] = HW_ROW("--hbm-gbs", "custom GPU: memory bandwidth, GB/s"),
    [C_INTRA_GBS] = HW_ROW("--intra-gbs", "custom GPU: NCCL's bus bandwidth within a node (all its channels), GB/s"),
    [C_GPUS_PER_NODE] = {"--gpus-per-node", NULL, SIM_OPT_INT, 1, 1 << 20, 0, 0, "N", "custom GPU: GPUs per node"},
    [C_PCIE_GBS] = HW_ROW("--pcie-gbs", "custom GPU: host link bandwidth, GB/s"),
    [C_HOST_GBS] = HW_ROW("--host-gbs", "custom GPU: host memory bandwidth for the offloaded optimizer, GB/s"),
    [C_NICS_PER_NODE] = {"--nics-per-node", NULL, SIM_OPT_INT, 1, 1 << 10, 0, 0, "N",
                         "custom GPU: network adapters per node (presets: 8)"},
    [C_NIC_GBPS] = HW_ROW("--nic-gbps", "custom GPU: bandwidth of one NIC as NCCL rates it, Gb/s (1e9 bits)\n"
                                        "(presets: a100 192 of HDR's 200, h100-sxm / h200 384 of NDR's 400)"),
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
    [C_OPTIMIZER] = "adamw", [C_MOMENTUM] = "0", [C_MICRO_BATCH] = "1", [C_GRAD_ACCUM] = "1", [C_DEVICE_MEM] = "the GPU preset's",
    [C_WRAP] = "block", [C_SHARD_GROUP_SIZE] = "8 when it divides N, else N", [C_STRATEGIES] = "all",
    [C_VARIANTS] = "all", [C_GPU] = "h100-sxm", [C_EFFICIENCY] = "the GPU's", [C_ALGO] = "auto", [C_PROTO] = "auto", [C_FORMAT] = "table",
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

/* The GPU: a preset, then the custom values given beside it; every
 * constant the time model needs checked before any rank runs. */
static int parse_gpu(const sim_opts_t *o, const char *gpu, shs_hw_t *hw) {
    if (shs_hw_preset(gpu, hw) != SHS_OK) return usage_error("--gpu: %s", shs_last_error());
    int custom = 0;
    for (int k = C_PEAK_TFLOPS; k <= C_NIC_GBPS; k++) custom |= o->given[k];
    if (o->given[C_PEAK_TFLOPS]) hw->peak_flops_16 = hw->peak_flops_32 = o->num[C_PEAK_TFLOPS] * 1e12;
    if (o->given[C_HBM_GBS]) hw->hbm_bw = o->num[C_HBM_GBS] * 1e9;
    if (o->given[C_INTRA_GBS]) hw->nccl.bw_intra = o->num[C_INTRA_GBS] / hw->nccl.channels_intra;
    if (o->given[C_GPUS_PER_NODE]) hw->nccl.gpus_per_node = (int)o->num[C_GPUS_PER_NODE];
    if (o->given[C_PCIE_GBS]) hw->pcie_bw = o->num[C_PCIE_GBS] * 1e9;
    if (o->given[C_HOST_GBS]) hw->host_bw = o->num[C_HOST_GBS] * 1e9;
    if (o->given[C_NICS_PER_NODE]) hw->nccl.nics_per_node = (int)o->num[C_NICS_PER_NODE];
    if (o->given[C_NIC_GBPS]) hw->nccl.nic_gbs = o->num[C_NIC_GBPS] / 8;
    if (custom) {
        size_t len = strlen(hw->name);
        snprintf(hw->name + len, sizeof hw->name - len, "+custom");
    }
    if (shs_hw_validate(hw) != SHS_OK) return usage_error("--gpu: %s", shs_last_error());
    return -1;
}

int sim_compare_parse(int argc, char **argv, sim_compare_job_t *job) {
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
    double eff = 0;
    int variants_all = 1, zero_paper = 0, rc_, ds_rows = 0; /* ds_rows: one row, the config's offload */
    shs_ds_config_t *ds = NULL;
    shs_ds_source_t ds_src[SHS_DS_NUM_SETTINGS];
    shs_recompute_t recompute = SHS_RECOMPUTE_FULL;
    shs_net_algo_t algo = SHS_NUM_ALGOS;
    shs_nccl_proto_t proto = SHS_NUM_PROTOS;
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
    if (GIVEN(C_GRAD_ACCUM)) tc->grad_accum = (int)o.num[C_GRAD_ACCUM];
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
    if (GIVEN(C_ALGO) && strcmp(o.str[C_ALGO], "auto") != 0 &&
        (shs_net_algo_parse(o.str[C_ALGO], &algo) || algo == SHS_ALGO_DIRECT))
        return usage_error("--algo must be one of NCCL's algorithms ring or tree, or auto, not %s", o.str[C_ALGO]);
    if (GIVEN(C_PROTO) && strcmp(o.str[C_PROTO], "auto") != 0 && shs_nccl_proto_parse(o.str[C_PROTO], &proto))
        return usage_error("--proto must be one of NCCL's protocols ll, ll128 or simple, or auto, not %s",
                           o.str[C_PROTO]);
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
    char model_name[768];
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
        len = strlen(model_name);
        if (hf.notes[0]) snprintf(model_name + len, sizeof model_name - len, " (notes: %s)", hf.notes);
    } else if (!preset) {
        return usage_error("--model: unknown model preset '%s' (%s)", model, "compare --help lists them");
    } else if (preset->arch == SHS_ARCH_LLAMA) {
        if (layers || channels || heads || vocab >= 0)
            return usage_error("--layers/--channels/--heads/--vocab shape a GPT, not the Llama-family preset %s "
                               "(--hf-config takes any Llama shape)", preset->name);
        if ((rc_ = sim_model_set_llama("compare", preset->name, &preset->llama, (int)context, preset->cfg.context,
                                       tc)) >= 0)
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
            [SHS_DS_MICRO_BATCH] = C_MICRO_BATCH, [SHS_DS_GRAD_ACCUM] = C_GRAD_ACCUM, [SHS_DS_WORLD] = C_WORLD, [SHS_DS_OFFLOAD] = C_VARIANTS,
            [SHS_DS_OPTIMIZER] = C_OPTIMIZER, [SHS_DS_MOMENTUM] = C_MOMENTUM};
        static const int has_option[SHS_DS_NUM_SETTINGS] = {
            [SHS_DS_STAGE] = 1, [SHS_DS_SHARD_GROUP] = 1, [SHS_DS_DTYPE] = 1, [SHS_DS_REDUCE_DTYPE] = 1,
            [SHS_DS_GRAD_ACCUM_DTYPE] = 1, [SHS_DS_MICRO_BATCH] = 1, [SHS_DS_GRAD_ACCUM] = 1, [SHS_DS_WORLD] = 1, [SHS_DS_OFFLOAD] = 1,
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
        if ((rc_ = sim_ds_config_apply("compare", o.str[C_DS_CONFIG], SHS_DS_FOR_COMPARE, given, 0, ds, tc, ds_src)) >= 0) return rc_;
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
    if ((rc_ = parse_gpu(op, gpu, &hw)) >= 0) return rc_;
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
        else if (strcmp(o.str[C_LOSS_KERNEL], "torch"))
            return usage_error("--loss-kernel must be torch or fused, not %s", o.str[C_LOSS_KERNEL]);
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
    int gpn = hw.nccl.gpus_per_node;
    if (N > gpn && N % gpn)
        return usage_error("--world %d spans more than one node but is not a multiple of --gpus-per-node %d (%s); "
                           "whole nodes only", N, gpn, hw.name);
    if (!G && ds && ds_src[SHS_DS_SHARD_GROUP] == SHS_DS_FROM_CONFIG) G = tc->strategy.shard_group_size;
    if (!G) G = N % 8 == 0 ? 8 : N;
    if (N % G) return usage_error("--shard-group-size %ld must divide --world %d", G, N);
    int R = tc->strategy.reshard_after_forward_size, hybrid = strategies && strstr(strategies, "hybrid_shard");
    if (R && (N % R || (hybrid && G % R)))
        return usage_error("--reshard-after-forward %d must divide the shard group (--world %d%s)", R, N,
                           hybrid ? ", --shard-group-size" : "");
    tc->strategy.shard_group_size = (int)G;

    job->base = base;
    snprintf(job->model_name, sizeof job->model_name, "%s", model_name);
    job->hw = hw;
    job->device_mem = device_mem;
    job->gmp = gmp;
    job->board_given = o.given[C_DEVICE_MEM];
    job->framework = framework;
    job->grad_accum_dtype_given = o.given[C_GRAD_ACCUM_DTYPE];
    job->reduce_dtype_given = o.given[C_REDUCE_DTYPE];
    job->eff = eff;
    job->algo = algo;
    job->proto = proto;
    job->format = format;
    job->plot = plot;
    job->output = output;
    job->strategies = strategies;
    job->variants_all = variants_all;
    job->zero_paper = zero_paper;
    job->ds_rows = ds_rows;
    job->ds = ds;
    memcpy(job->ds_src, ds_src, sizeof ds_src);
    job->recompute = recompute;
    return -1;
}
