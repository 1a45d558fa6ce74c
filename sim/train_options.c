/* train_options.c - the options of `shardsim train` (see train_options.h):
 * the table's rows, their --help defaults, and how they combine. */
#include "train_options.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <sys/stat.h>

#include "args.h"
#include "commands.h"
#include "model_choice.h"
#include "options.h"
#include "shardsim/check.h"
#include "shardsim/durable.h"
#include "shardsim/features.h"
#include "shardsim/units.h"

/* fmt takes the two strings a and b (either may be unused) */
static int usage_error(const char *fmt, const char *a, const char *b) {
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, a, b);
    return sim_usage_error("train", "%s", msg);
}

/* The options of `train`: each checked by its row (args.h), then applied in
 * parse_train_args() so that their order on the command line never matters.
 * The rows' order is --help's. */
typedef enum {
    O_WORLD, O_BACKEND, O_LOSS_BITS, O_STRATEGY, O_SHARD_GROUP_SIZE, O_RESHARD_AFTER_FORWARD, O_BACKWARD_PREFETCH,
    O_FORWARD_PREFETCH, O_LIMIT_ALL_GATHERS, O_OFFLOAD, O_MEMORY_TIMELINE, O_POISON_FREED, O_DATA, O_DOC_SEP, O_PACK, O_PAD,
    O_LOSS_NORM, O_MODEL_FILE, O_HF_CONFIG,
    O_STEPS, O_CHECK, O_REDUCE_ORDER, O_LAYERS, O_HEADS, O_CHANNELS, O_CONTEXT, O_MICRO_BATCH, O_OPTIMIZER, O_LR,
    O_WEIGHT_DECAY, O_BETA1, O_BETA2, O_EPS, O_MOMENTUM, O_SEED, O_DEVICE_MEM, O_BUCKET_MB, O_TIMEOUT, O_GRAD_ACCUM,
    O_CLIP_GRAD_NORM, O_NORM_TYPE, O_REPLICATE_BELOW, O_SHARD_ALIGN, O_PARAM_DTYPE, O_REDUCE_DTYPE, O_GRAD_ACCUM_DTYPE,
    O_INIT_SCALE, O_GROWTH_INTERVAL, O_GROWTH_FACTOR, O_BACKOFF_FACTOR, O_LOSS_SCALER, O_HYSTERESIS,
    O_CONSECUTIVE_HYSTERESIS, O_MIN_LOSS_SCALE, O_CHECKPOINT_ACTIVATIONS, O_RECOMPUTE, O_ATTENTION,
    O_AUTOCAST, O_DROPOUT, O_WRAP, O_INJECT_BITFLIP, O_SAVE,
    O_SAVE_EVERY, O_RESUME, O_EXPORT_SAFETENSORS, O_PROGRESS, O_TRACE, O_DS_CONFIG,
    O_NUM_OPTIONS
} opt_id_t;

static const sim_opt_t options[O_NUM_OPTIONS] = {
    [O_WORLD] = SIM_ROW_WORLD,
    [O_BACKEND] = {"--backend", NULL, SIM_OPT_STR, 0, 0, 0, 0, "B",
                   "thread | mpi | cuda | cuda-nccl | mpi-nccl. mpi: run under mpirun, one rank\n"
                   "per process, the world is the MPI job (--world absent or equal);\n"
                   "same collectives and reduction order, so the same bits.\n"
                   "cuda: every rank a CUDA device on one GPU (pick it with\n"
                   "CUDA_VISIBLE_DEVICES), device-local communicator: DDP and ZeRO\n"
                   "agree bit for bit; cuda-nccl: rank r on GPU r over NCCL;\n"
                   "mpi-nccl: under mpirun, one process per GPU (GPU = its index on\n"
                   "the node), NCCL bootstrapped over MPI; same bits as cuda-nccl"},
    [O_LOSS_BITS] = {"--loss-bits", NULL, SIM_OPT_BOOL, 0, 0, 0, 0, NULL, "also print each step's loss as its f32 bits in hex"},
    [O_STRATEGY] = {"--strategy", NULL, SIM_OPT_STR, 0, 0, 0, 0, "S", "ddp | zero1 | zero2 | zero3 | hybrid_shard | hybrid_shard_zero2"},
    [O_SHARD_GROUP_SIZE] = SIM_ROW_SHARD_GROUP_SIZE,
    [O_RESHARD_AFTER_FORWARD] = {"--reshard-after-forward", NULL, SIM_OPT_BOOL, 0, 0, 0, 0, NULL,
                                 "free gathered units after forward use; false keeps\n"
                                 "them until backward, FSDP SHARD_GRAD_OP"},
    [O_BACKWARD_PREFETCH] = {"--backward-prefetch", NULL, SIM_OPT_STR, 0, 0, 0, 0, "pre|post|none",
                             "gather the next unit before / after the current\n"
                             "unit's backward, or when needed (FSDP's default)"},
    [O_FORWARD_PREFETCH] = {"--forward-prefetch", NULL, SIM_OPT_BOOL, 0, 0, 0, 0, NULL, "gather the next unit during forward"},
    [O_LIMIT_ALL_GATHERS] = {"--limit-all-gathers", NULL, SIM_OPT_INT, 0, 1 << 20, 0, 0, "N", "at most N units gathered ahead (0: no limit)"},
    [O_OFFLOAD] = {"--offload", NULL, SIM_OPT_STR, 0, 0, 0, 0, "none|optimizer|params",
                   "CPU offload: optimizer state and master weights on\n"
                   "the host, the optimizer step there (ZeRO-Offload); params: the\n"
                   "parameter shards too (zero3, hybrid_shard; FSDP CPUOffload)"},
    [O_MEMORY_TIMELINE] = {"--memory-timeline", NULL, SIM_OPT_STR, 0, 0, 0, 0, "FILE.svg",
                           "draw rank 0's device memory over the last step,\n"
                           "per phase (forward/backward of each unit, optimizer), as SVG"},
    [O_POISON_FREED] = {"--poison-freed-buffers", NULL, SIM_OPT_BOOL, 0, 0, 0, 0, NULL,
                        "debugging: fill freed communication buffers with\n"
                        "NaN so that a use after free shows in the results"},
    [O_DATA] = {"--data", NULL, SIM_OPT_STR, 0, 0, 0, 0, "PATH", "training text"},
    [O_DOC_SEP] = {"--doc-sep", NULL, SIM_OPT_STR, 0, 0, 0, 0, "BYTE",
                   "with --pack or --pad: the byte that ends each document\n"
                   "(kept as its last token, an EOS): a byte value 0-255 or\n"
                   "0xHH (digits are a value: 9 is byte 0x09, a tab; write\n"
                   "'\\x39' for the character '9'), one other character, or a\n"
                   "C escape (\\n \\t \\r \\0 \\\\ \\xHH)"},
    [O_PACK] = {"--pack", NULL, SIM_OPT_BOOL, 0, 0, 0, 0, NULL,
                "documents back to back in each sequence, positions\n"
                "restarting per document, attention within a document\n"
                "(needs a Llama model); a target never crosses documents"},
    [O_PAD] = {"--pad", NULL, SIM_OPT_BOOL, 0, 0, 0, 0, NULL,
               "one document per sequence (its first T tokens), padded\n"
               "with the separator; padded targets are ignored"},
    [O_LOSS_NORM] = {"--loss-norm", NULL, SIM_OPT_STR, 0, 0, 0, 0, "N",
                     "per-micro-batch: the mean of each micro-batch's mean;\n"
                     "global-tokens: the sum over the global batch's real\n"
                     "targets / their count (all-reduced before backward)"},
    [O_MODEL_FILE] = {"--model-file", NULL, SIM_OPT_STR, 0, 0, 0, 0, "PATH",
                      "train the model a description file lists instead of the GPT\n"
                      "(README: Model-description files); --layers, --heads and\n"
                      "--channels then do not apply, --context still sets T"},
    [O_HF_CONFIG] = SIM_ROW_HF_CONFIG,
    [O_STEPS] = {"--steps", NULL, SIM_OPT_INT, 0, 100000000, 0, 0, "N",
                 "training steps of this run; with --resume, steps\n"
                 "after the checkpoint's (numbered from it). 0: initialize only,\n"
                 "then --save / --export-safetensors write the initial weights"},
    [O_CHECK] = {"--check", NULL, SIM_OPT_STR, 0, 0, 0, 0, "ddp",
                 "also run DDP on the same data; compare loss and every\n"
                 "parameter bit for bit after each step (exit 3 on a difference)"},
    [O_REDUCE_ORDER] = {"--reduce-order", NULL, SIM_OPT_STR, 0, 0, 0, 0, "O",
                        "rank | ring: order in which all-reduce and reduce-scatter add\n"
                        "ranks (rank is exact). ring: as NCCL's ring algorithm;\n"
                        "with --check ddp, print the drift from DDP each step (exit 0)"},
    [O_LAYERS] = SIM_ROW_LAYERS,
    [O_HEADS] = SIM_ROW_HEADS,
    [O_CHANNELS] = SIM_ROW_CHANNELS,
    [O_CONTEXT] = SIM_ROW_CONTEXT,
    [O_MICRO_BATCH] = SIM_ROW_MICRO_BATCH,
    [O_OPTIMIZER] = SIM_ROW_OPTIMIZER,
    [O_LR] = {"--lr", NULL, SIM_OPT_F32, 0, 1e6, 0, 0, "X", "learning rate"},
    [O_WEIGHT_DECAY] = {"--weight-decay", NULL, SIM_OPT_F32, 0, 1e6, 0, 0, "X", "weight decay (adamw 0.01, sgd 0)"},
    [O_BETA1] = {"--beta1", NULL, SIM_OPT_F32, 0, 1, 1, 0, "X", "AdamW beta1"}, /* torch: 0 <= beta < 1 */
    [O_BETA2] = {"--beta2", NULL, SIM_OPT_F32, 0, 1, 1, 0, "X", "AdamW beta2"},
    [O_EPS] = {"--eps", NULL, SIM_OPT_F32, 0, 1, 0, 0, "X", "AdamW epsilon"},
    [O_MOMENTUM] = SIM_ROW_MOMENTUM,
    [O_SEED] = {"--seed", NULL, SIM_OPT_INT, 0, 4611686018427387904.0 /* 2^62: exact as a double and a long */, 0, 0,
                "N", "initialization and data order"},
    [O_DEVICE_MEM] = SIM_ROW_DEVICE_MEM,
    [O_BUCKET_MB] = {"--bucket-mb", NULL, SIM_OPT_FLOAT, 0.001, 1048576, 0, 0, "X", "DDP gradient bucket size in MiB"},
    [O_TIMEOUT] = SIM_ROW_TIMEOUT,
    [O_GRAD_ACCUM] = {"--grad-accum", NULL, SIM_OPT_INT, 1, 65536, 0, 0, "K",
                      "micro-batches per step; gradients are only reduced on the last\n"
                      "(torch no_sync); the step's gradient is their mean"},
    [O_CLIP_GRAD_NORM] = {"--clip-grad-norm", NULL, SIM_OPT_F32, 0, 1e30, 0, 0, "X",
                          "clip the global gradient norm to X (torch clip_grad_norm_),\n"
                          "computed exactly so it is the same bits at every world size"},
    [O_NORM_TYPE] = {"--norm-type", NULL, SIM_OPT_STR, 0, 0, 0, 0, "P", "1 | 2 | inf, with --clip-grad-norm"},
    [O_REPLICATE_BELOW] = {"--replicate-below", NULL, SIM_OPT_INT, 0, 1e15, 0, 0, "N",
                           "keep units of fewer than N elements unsharded on every rank\n"
                           "(all-reduced like DDP; DeepSpeed's persistence threshold)"},
    [O_SHARD_ALIGN] = {"--shard-align", NULL, SIM_OPT_INT, 1, 1 << 20, 0, 0, "E", "every shard starts on a multiple of E elements"},
    [O_PARAM_DTYPE] = SIM_ROW_PARAM_DTYPE,
    [O_REDUCE_DTYPE] = SIM_ROW_REDUCE_DTYPE,
    [O_GRAD_ACCUM_DTYPE] = SIM_ROW_GRAD_ACCUM_DTYPE,
    [O_INIT_SCALE] = {"--init-scale", NULL, SIM_OPT_F32, 1e-30, 1e30, 0, 0, "X", "f16 loss scaling: initial scale (GradScaler's)"},
    [O_GROWTH_INTERVAL] = {"--growth-interval", NULL, SIM_OPT_INT, 1, 1000000000, 0, 0, "N",
                           "f16 loss scaling: grow the scale after N good steps"},
    [O_GROWTH_FACTOR] = {"--growth-factor", NULL, SIM_OPT_F32, 1.0, 1e6, 0, 0, "X",
                         "f16 loss scaling: multiply the scale by X on growth"},
    [O_BACKOFF_FACTOR] = {"--backoff-factor", NULL, SIM_OPT_F32, 1e-6, 0.999999, 0, 0, "X",
                          "f16 loss scaling: multiply it by X (0 < X < 1) on overflow"},
    [O_LOSS_SCALER] = {"--loss-scaler", NULL, SIM_OPT_STR, 0, 0, 0, 0, "torch|deepspeed|static",
                       "f16 loss scaling rule: torch's GradScaler, DeepSpeed's\n"
                       "DynamicLossScaler (hysteresis, window from the last overflow,\n"
                       "floor), or a fixed --init-scale (overflow steps skipped)"},
    [O_HYSTERESIS] = {"--hysteresis", NULL, SIM_OPT_INT, 1, 1000000000, 0, 0, "N",
                      "--loss-scaler deepspeed: overflows before the scale halves"},
    [O_CONSECUTIVE_HYSTERESIS] = {"--consecutive-hysteresis", NULL, SIM_OPT_BOOL, 0, 0, 0, 0, NULL,
                                  "--loss-scaler deepspeed: refill the hysteresis on every good step"},
    [O_MIN_LOSS_SCALE] = {"--min-loss-scale", NULL, SIM_OPT_F32, 0, 1e30, 0, 0, "X",
                          "--loss-scaler deepspeed: floor of the scale; an overflow at it\n"
                          "stops the run, as DeepSpeed does (0: no floor)"},
    [O_CHECKPOINT_ACTIVATIONS] = {"--checkpoint-activations", NULL, SIM_OPT_BOOL, 0, 0, 0, 0, NULL,
                                  "activation checkpointing per block: keep only\n"
                                  "each block's input, recompute its forward in backward (same results,\n"
                                  "less memory); the GPT and the Llama, not with --model-file"},
    [O_RECOMPUTE] = SIM_ROW_RECOMPUTE,
    [O_ATTENTION] = SIM_ROW_ATTENTION,
    [O_AUTOCAST] = SIM_ROW_AUTOCAST,
    [O_DROPOUT] = SIM_ROW_DROPOUT,
    [O_WRAP] = {"--wrap", NULL, SIM_OPT_STR, 0, 0, 0, 0, "block|size:N",
                "wrap units: one per block (default), or consecutive blocks grouped\n"
                "until a unit holds >= N parameters (FSDP size_based_auto_wrap_policy,\n"
                "min_num_params); the GPT and the Llama, not with --model-file, --save,\n"
                "--resume"},
    [O_INJECT_BITFLIP] = {"--inject-bitflip", NULL, SIM_OPT_INT, 1, 100000000, 0, 0, "STEP",
                          "after step STEP flip the lowest bit of wte[0][0] in one rank's\n"
                          "memory (the last replica, or the ZeRO-3 owner) to show what\n"
                          "--check reports; needs --check ddp"},
    [O_SAVE] = {"--save", NULL, SIM_OPT_STR, 0, 0, 0, 0, "DIR", "save a sharded checkpoint into DIR at the end (crash-safe)"},
    [O_SAVE_EVERY] = {"--save-every", NULL, SIM_OPT_INT, 1, 100000000, 0, 0, "N",
                      "also save after every N steps (needs --save); each save prints\n"
                      "its directory, step and size"},
    [O_RESUME] = {"--resume", NULL, SIM_OPT_STR, 0, 0, 0, 0, "DIR",
                  "continue from the checkpoint in DIR, at any --world,\n"
                  "--strategy and --shard-align (model and optimizer must match)"},
    [O_EXPORT_SAFETENSORS] = {"--export-safetensors", NULL, SIM_OPT_STR, 0, 0, 0, 0, "FILE",
                              "write the final full weights as safetensors"},
    [O_PROGRESS] = {"--progress", NULL, SIM_OPT_FLOAT, 0, 86400, 0, 0, "SEC",
                    "while setup, a step or a save runs longer than SEC seconds, say\n"
                    "so on stderr (again at 2x, 4x, ... SEC; 0: never)"},
    [O_TRACE] = {"--trace", NULL, SIM_OPT_STR, 0, 0, 0, 0, "DIR",
                 "record every collective of every rank to DIR/rank<k>.trace\n"
                 "(shardsim's trace format; see shardsim replay)"},
    [O_DS_CONFIG] = SIM_ROW_DS_CONFIG,
};

/* --help: the rows with their defaults from shs_train_default_config() */
static void train_help_defaults(const char *defaults[O_NUM_OPTIONS]) {
    static char buf[8][32];
    shs_train_config_t d = shs_train_default_config();
    const struct {
        opt_id_t id;
        long v;
    } nums[] = {{O_WORLD, d.world_size}, {O_LAYERS, d.model.num_layers}, {O_HEADS, d.model.num_heads},
                {O_CHANNELS, d.model.channels}, {O_CONTEXT, d.model.context}, {O_MICRO_BATCH, d.micro_batch},
                {O_TIMEOUT, SHS_COMM_DEFAULT_TIMEOUT_MS / 1000}};
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
        snprintf(buf[k], sizeof buf[k], "%ld", nums[k].v);
        defaults[nums[k].id] = buf[k];
    }
    snprintf(buf[7], sizeof buf[7], "%llu", (unsigned long long)d.strategy.seed);
    defaults[O_SEED] = buf[7];
    defaults[O_STRATEGY] = shs_strategy_name(d.strategy.kind);
    defaults[O_BACKEND] = "thread";
    defaults[O_LOSS_BITS] = defaults[O_FORWARD_PREFETCH] = defaults[O_POISON_FREED] =
        defaults[O_CHECKPOINT_ACTIVATIONS] = "false";
    defaults[O_RESHARD_AFTER_FORWARD] = "true";
    defaults[O_SHARD_GROUP_SIZE] = "N";
    defaults[O_BACKWARD_PREFETCH] = "pre";
    defaults[O_LIMIT_ALL_GATHERS] = "0";
    defaults[O_OFFLOAD] = "none";
    defaults[O_DATA] = "built-in corpus";
    defaults[O_PACK] = defaults[O_PAD] = "false";
    defaults[O_LOSS_NORM] = "global-tokens with --pack/--pad, else per-micro-batch";
    defaults[O_STEPS] = "50";
    defaults[O_REDUCE_ORDER] = "rank";
    defaults[O_OPTIMIZER] = "adamw";
    defaults[O_LR] = "1e-3";
    defaults[O_BETA1] = "0.9";
    defaults[O_BETA2] = "0.999";
    defaults[O_EPS] = "1e-8";
    defaults[O_MOMENTUM] = "0";
    defaults[O_DEVICE_MEM] = "this machine's RAM x 0.75 shared by the ranks";
    defaults[O_BUCKET_MB] = "25";
    defaults[O_GRAD_ACCUM] = "1";
    defaults[O_NORM_TYPE] = "2";
    defaults[O_SHARD_ALIGN] = "1";
    defaults[O_PARAM_DTYPE] = "f32";
    defaults[O_REDUCE_DTYPE] = "param dtype";
    defaults[O_GRAD_ACCUM_DTYPE] = "param dtype";
    defaults[O_INIT_SCALE] = "65536";
    defaults[O_GROWTH_INTERVAL] = "2000";
    defaults[O_GROWTH_FACTOR] = "2";
    defaults[O_BACKOFF_FACTOR] = "0.5";
    defaults[O_LOSS_SCALER] = "torch";
    defaults[O_HYSTERESIS] = "2";
    defaults[O_MIN_LOSS_SCALE] = "1";
    defaults[O_PROGRESS] = "5";
    defaults[O_RECOMPUTE] = "none";
    defaults[O_ATTENTION] = "eager";
    defaults[O_AUTOCAST] = "off";
    defaults[O_DROPOUT] = "0";
}

static const char train_usage_head[] =
    "usage: shardsim train [options]\n"
    "\n"
    "Train a GPT-2-style model, or a Llama-family one (--hf-config), on byte tokens\n"
    "on N simulated GPUs (threads).\n"
    "Options take their value as '--opt V' or '--opt=V'; a [true|false] option given alone\n"
    "means true (yes/no and 1/0 work too).\n"
    "\n";

/* A keyword option: *out = values[i] for names[i] == v. 0, or -1 if none matches. */
static int choose(const char *v, const char *const *names, const int *values, int n, int *out) {
    for (int i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = values[i];
            return 0;
        }
    return -1;
}

/* Why an output directory (--save, --trace) cannot be written: an existing
 * directory (or a link to one) must be writable, a new one needs a
 * writable parent. NULL when fine. */
static const char *dir_output_problem(const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0)
        return !S_ISDIR(sb.st_mode) ? "exists and is not a directory"
               : access(path, W_OK | X_OK) != 0 ? "is not writable" : NULL;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') dir[--n] = 0; /* "ck/" names ck */
    char parent[4096];
    shs_dirname(dir, parent, sizeof parent);
    return access(parent, W_OK | X_OK) == 0 ? NULL : "its directory does not exist or is not writable";
}

int sim_train_check_shard_group(const shs_train_config_t *c) {
    int hybrid = c->strategy.kind == SHS_HYBRID_SHARD || c->strategy.kind == SHS_HYBRID_SHARD_ZERO2;
    if (!hybrid || c->strategy.shard_group_size <= 0 || c->world_size % c->strategy.shard_group_size == 0) return -1;
    char g[16], w[16];
    snprintf(g, sizeof g, "%d", c->strategy.shard_group_size);
    snprintf(w, sizeof w, "%d", c->world_size);
    return usage_error("--shard-group-size %s must divide the world size %s", g, w);
}

int sim_train_parse_args(int argc, char **argv, train_opts_t *o) {
    const char *defaults[O_NUM_OPTIONS] = {0};
    train_help_defaults(defaults);
    const sim_command_t cmd = {"train", train_usage_head, options, O_NUM_OPTIONS, defaults, NULL, NULL};
    sim_opts_t p;
    int rc = sim_opts_parse(&cmd, argc, argv, &p);
    if (rc >= 0) return rc;

    shs_train_config_t *c = &o->cfg;
    *c = shs_train_default_config();
    o->steps = 50;
    o->progress_s = p.given[O_PROGRESS] ? p.num[O_PROGRESS] : 5.0;
    c->strategy.optim = shs_optim_default(c->strategy.optim.kind);
    if (p.given[O_OPTIMIZER] && (rc = sim_opt_optimizer("train", p.str[O_OPTIMIZER], &c->strategy.optim)) >= 0) return rc;
    const char *opt_name = shs_optim_name(c->strategy.optim.kind);
    static const opt_id_t adamw_only[] = {O_BETA1, O_BETA2, O_EPS}, sgd_only[] = {O_MOMENTUM};
    for (int k = 0; k < 3 && c->strategy.optim.kind != SHS_OPTIM_ADAMW; k++)
        if (p.given[adamw_only[k]]) return usage_error("%s applies to adamw, not %s", options[adamw_only[k]].name, opt_name);
    if (c->strategy.optim.kind != SHS_OPTIM_SGD && p.given[sgd_only[0]])
        return usage_error("%s applies to sgd, not %s", options[sgd_only[0]].name, opt_name);

#define SET(id, dst) if (p.given[id]) dst = p.num[id]
    SET(O_WORLD, c->world_size);
    SET(O_STEPS, o->steps);
    SET(O_LAYERS, c->model.num_layers);
    SET(O_HEADS, c->model.num_heads);
    SET(O_CHANNELS, c->model.channels);
    SET(O_CONTEXT, c->model.context);
    SET(O_MICRO_BATCH, c->micro_batch);
    SET(O_SEED, c->strategy.seed);
    SET(O_INJECT_BITFLIP, o->inject_bitflip);
    SET(O_LR, c->strategy.optim.lr);
    SET(O_BETA1, c->strategy.optim.beta1);
    SET(O_BETA2, c->strategy.optim.beta2);
    SET(O_EPS, c->strategy.optim.eps);
    SET(O_MOMENTUM, c->strategy.optim.momentum);
    SET(O_WEIGHT_DECAY, c->strategy.optim.weight_decay);
    SET(O_GRAD_ACCUM, c->grad_accum);
    SET(O_CLIP_GRAD_NORM, c->strategy.clip_norm);
    SET(O_REPLICATE_BELOW, c->replicate_below);
    SET(O_SHARD_ALIGN, c->strategy.shard_align);
    SET(O_SHARD_GROUP_SIZE, c->strategy.shard_group_size);
    SET(O_LIMIT_ALL_GATHERS, c->strategy.limit_all_gathers);
    SET(O_INIT_SCALE, c->strategy.scaler.init_scale);
    SET(O_GROWTH_INTERVAL, c->strategy.scaler.growth_interval);
    SET(O_GROWTH_FACTOR, c->strategy.scaler.growth_factor);
    SET(O_BACKOFF_FACTOR, c->strategy.scaler.backoff_factor);
    SET(O_HYSTERESIS, c->strategy.scaler.hysteresis);
    SET(O_MIN_LOSS_SCALE, c->strategy.scaler.min_scale);
    if (p.given[O_LOSS_SCALER] && shs_scaler_parse(p.str[O_LOSS_SCALER], &c->strategy.scaler.kind))
        return usage_error("unknown --loss-scaler '%s'%s: use torch, deepspeed or static", p.str[O_LOSS_SCALER], "");
    if (!p.given[O_MIN_LOSS_SCALE]) c->strategy.scaler.min_scale = 1.0f; /* DeepSpeed's default (deepspeed kind only) */
    c->strategy.scaler.consecutive_hysteresis = p.given[O_CONSECUTIVE_HYSTERESIS] && p.num[O_CONSECUTIVE_HYSTERESIS];
#undef SET
    c->checkpoint_activations = p.given[O_CHECKPOINT_ACTIVATIONS] && p.num[O_CHECKPOINT_ACTIVATIONS];
    if ((rc = sim_opt_exec("train", p.given[O_CHECKPOINT_ACTIVATIONS] && p.num[O_CHECKPOINT_ACTIVATIONS],
                           p.given[O_RECOMPUTE] ? p.str[O_RECOMPUTE] : NULL, p.given[O_ATTENTION] ? p.str[O_ATTENTION] : NULL,
                           p.given[O_AUTOCAST] ? p.str[O_AUTOCAST] : NULL, p.given[O_DROPOUT], p.num[O_DROPOUT],
                           &c->recompute, &c->attention, &c->autocast, &c->dropout)) >= 0)
        return rc;
    if (c->recompute == SHS_RECOMPUTE_FULL) c->checkpoint_activations = 0; /* one field says it */
    if (p.given[O_WRAP]) {
        char err[256];
        if (sim_parse_wrap(p.str[O_WRAP], &c->wrap_min_params, err, sizeof err))
            return usage_error("--wrap %s%s", err, "");
        if (c->wrap_min_params && (p.given[O_SAVE] || p.given[O_RESUME])) /* checkpoints name units */
            return usage_error("--wrap %s: checkpoints (--save, --resume) keep one unit per block; use --wrap block%s",
                               p.str[O_WRAP], "");
    }
    o->world_given = p.given[O_WORLD];
    o->loss_bits = p.given[O_LOSS_BITS] && p.num[O_LOSS_BITS];
    if (p.given[O_BACKEND]) {
        static const char *const names[] = {"thread", "mpi", "cuda", "cuda-nccl", "mpi-nccl"};
        /* -1: threads, -2: mpi (CPU devices), -3: mpi with one GPU per process over NCCL */
        static const int values[] = {-1, -2, SHS_WORLD_CUDA, SHS_WORLD_CUDA_NCCL, -3};
        int b;
        if (choose(p.str[O_BACKEND], names, values, 5, &b))
            return usage_error("--backend takes thread, mpi, cuda, cuda-nccl or mpi-nccl (got '%s')%s", p.str[O_BACKEND], "");
        if (b == -2 || b == -3) o->backend_mpi = 1;
        if (b == -3) c->backend = SHS_WORLD_CUDA_NCCL;
        else if (b >= 0) c->backend = (shs_world_backend_t)b;
        if (o->backend_mpi && !shs_feature_available(SHS_FEATURE_MPI))
            return usage_error("--backend %s %s", p.str[O_BACKEND], shs_feature_missing(SHS_FEATURE_MPI));
        if (o->backend_mpi && !getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK")) {
            char how[256], np[24] = "N";
            if (p.given[O_WORLD]) snprintf(np, sizeof np, "%ld", (long)p.num[O_WORLD]);
            snprintf(how, sizeof how, "mpirun -np %s %s train --backend %s ...", np, program_invocation_name,
                     p.str[O_BACKEND]);
            return usage_error("--backend %s runs one rank per process under an MPI launcher, and none started this "
                               "one (no OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK in the environment): run %s",
                               p.str[O_BACKEND], how);
        }
    }
    if (o->backend_mpi) {
        static const opt_id_t not_mpi[] = {O_SAVE, O_SAVE_EVERY, O_RESUME, O_EXPORT_SAFETENSORS, O_TRACE,
                                           O_INJECT_BITFLIP};
        for (int k = 0; k < 6; k++)
            if (p.given[not_mpi[k]])
                return usage_error("%s is not supported with --backend %s", options[not_mpi[k]].name, p.str[O_BACKEND]);
    }
    if ((rc = sim_test_fault_read("train", o->backend_mpi, &o->fault)) >= 0) return rc;
    c->strategy.norm_type = 2;
    c->strategy.keep_after_forward = p.given[O_RESHARD_AFTER_FORWARD] && !p.num[O_RESHARD_AFTER_FORWARD];
    c->strategy.forward_prefetch = p.given[O_FORWARD_PREFETCH] && p.num[O_FORWARD_PREFETCH];
    c->poison_freed = p.given[O_POISON_FREED] && p.num[O_POISON_FREED];
    if (p.given[O_MEMORY_TIMELINE]) {
        o->timeline_path = p.str[O_MEMORY_TIMELINE];
        c->memory_timeline = 1;
    }
    if (p.given[O_OFFLOAD]) {
        static const char *const names[] = {"none", "optimizer", "params"};
        static const int values[] = {SHS_OFFLOAD_NONE, SHS_OFFLOAD_OPTIMIZER, SHS_OFFLOAD_PARAMS};
        int v;
        if (choose(p.str[O_OFFLOAD], names, values, 3, &v))
            return usage_error("--offload takes none, optimizer or params (got '%s')%s", p.str[O_OFFLOAD], "");
        c->strategy.offload = (shs_offload_t)v;
    }
    if (p.given[O_BACKWARD_PREFETCH]) {
        static const char *const names[] = {"pre", "post", "none"};
        static const int values[] = {SHS_PREFETCH_PRE, SHS_PREFETCH_POST, SHS_PREFETCH_NONE};
        int v;
        if (choose(p.str[O_BACKWARD_PREFETCH], names, values, 3, &v))
            return usage_error("--backward-prefetch takes pre, post or none (got '%s')%s", p.str[O_BACKWARD_PREFETCH], "");
        c->strategy.backward_prefetch = (shs_prefetch_t)v;
    }
    static const opt_id_t dtype_opts[] = {O_PARAM_DTYPE, O_REDUCE_DTYPE, O_GRAD_ACCUM_DTYPE};
    shs_dtype_t *dtype_dst[] = {&c->strategy.param_dtype, &c->strategy.reduce_dtype, &c->strategy.grad_accum_dtype};
    for (int k = 0; k < 3; k++) {
        if (!p.given[dtype_opts[k]]) continue;
        if ((rc = sim_opt_dtype("train", options[dtype_opts[k]].name, p.str[dtype_opts[k]], dtype_dst[k])) >= 0) return rc;
    }
    if (p.given[O_STRATEGY] && shs_strategy_parse(p.str[O_STRATEGY], &c->strategy.kind))
        return usage_error("unknown strategy '%s'%s: use ddp, zero1, zero2, zero3, hybrid_shard or hybrid_shard_zero2", p.str[O_STRATEGY], "");
    if (p.given[O_HF_CONFIG]) {
        static const opt_id_t shape[] = {O_MODEL_FILE, O_LAYERS, O_HEADS, O_CHANNELS};
        for (int k = 0; k < 4; k++)
            if (p.given[shape[k]]) return usage_error("--hf-config and %s exclude each other (the file gives the shape)%s",
                                                      options[shape[k]].name, "");
        o->hf_config = p.str[O_HF_CONFIG];
        if (shs_hf_config_load(o->hf_config, &o->hf) != SHS_OK) {
            sim_error("train", "--hf-config: %s", shs_last_error());
            return SIM_EXIT_ERROR;
        }
        int vocab = o->hf.arch == SHS_ARCH_LLAMA ? o->hf.llama.vocab : shs_gpt_vocab(&o->hf.gpt);
        if (vocab < 256) { /* train feeds byte tokens 0..255 */
            char v[16];
            snprintf(v, sizeof v, "%d", vocab);
            return usage_error("--hf-config %s: vocab_size %s is below 256, and train's tokens are bytes", o->hf_config, v);
        }
        if ((rc = sim_model_set_hf("train", o->hf_config, &o->hf, p.given[O_CONTEXT] ? (int)p.num[O_CONTEXT] : 0,
                                   shs_train_default_config().model.context, c)) >= 0)
            return rc;
    }
    if (p.given[O_DS_CONFIG]) {
        /* the options given beside the config win over its keys */
        static const opt_id_t by_setting[SHS_DS_NUM_SETTINGS] = {
            [SHS_DS_STAGE] = O_STRATEGY, [SHS_DS_SHARD_GROUP] = O_SHARD_GROUP_SIZE, [SHS_DS_DTYPE] = O_PARAM_DTYPE,
            [SHS_DS_REDUCE_DTYPE] = O_REDUCE_DTYPE, [SHS_DS_GRAD_ACCUM_DTYPE] = O_GRAD_ACCUM_DTYPE,
            [SHS_DS_MICRO_BATCH] = O_MICRO_BATCH, [SHS_DS_GRAD_ACCUM] = O_GRAD_ACCUM, [SHS_DS_WORLD] = O_WORLD,
            [SHS_DS_OFFLOAD] = O_OFFLOAD, [SHS_DS_CLIP] = O_CLIP_GRAD_NORM, [SHS_DS_OPTIMIZER] = O_OPTIMIZER,
            [SHS_DS_LR] = O_LR, [SHS_DS_BETA1] = O_BETA1, [SHS_DS_BETA2] = O_BETA2, [SHS_DS_EPS] = O_EPS,
            [SHS_DS_WEIGHT_DECAY] = O_WEIGHT_DECAY, [SHS_DS_MOMENTUM] = O_MOMENTUM,
            [SHS_DS_REPLICATE_BELOW] = O_REPLICATE_BELOW, [SHS_DS_PREFETCH] = O_BACKWARD_PREFETCH,
            [SHS_DS_INIT_SCALE] = O_INIT_SCALE, [SHS_DS_GROWTH_INTERVAL] = O_GROWTH_INTERVAL,
            [SHS_DS_LOSS_SCALER] = O_LOSS_SCALER, [SHS_DS_HYSTERESIS] = O_HYSTERESIS,
            [SHS_DS_MIN_LOSS_SCALE] = O_MIN_LOSS_SCALE};
        if (o->backend_mpi && !p.given[O_WORLD])
            return usage_error("--ds-config %s with --backend %s needs --world (train_batch_size is checked against it)",
                               p.str[O_DS_CONFIG], p.str[O_BACKEND]);
        int given[SHS_DS_NUM_SETTINGS];
        for (int k = 0; k < SHS_DS_NUM_SETTINGS; k++) given[k] = p.given[by_setting[k]];
        given[SHS_DS_HYSTERESIS] |= p.given[O_CONSECUTIVE_HYSTERESIS];
        o->ds_path = p.str[O_DS_CONFIG];
        /* after the model (--hf-config above): its hidden size fills the "auto" bucket keys */
        if ((rc = sim_ds_config_apply("train", o->ds_path, given, p.given[O_MODEL_FILE], &o->ds, c, o->ds_src)) >= 0)
            return rc;
        static const opt_id_t adamw_opts[] = {O_BETA1, O_BETA2, O_EPS};
        for (int k = 0; k < 3 && c->strategy.optim.kind != SHS_OPTIM_ADAMW; k++)
            if (p.given[adamw_opts[k]])
                return usage_error("%s applies to adamw, not %s (the optimizer of --ds-config)", options[adamw_opts[k]].name,
                                   shs_optim_name(c->strategy.optim.kind));
        if (p.given[O_MOMENTUM] && c->strategy.optim.kind != SHS_OPTIM_SGD)
            return usage_error("--momentum applies to sgd, not %s (the optimizer of --ds-config)%s",
                               shs_optim_name(c->strategy.optim.kind), "");
    }
    if (p.given[O_GRAD_ACCUM_DTYPE] && c->strategy.grad_accum_dtype != SHS_F32 &&
        c->strategy.grad_accum_dtype != (c->strategy.param_dtype ? c->strategy.param_dtype : SHS_F32))
        return usage_error("--grad-accum-dtype takes f32 or the param dtype %s (got '%s')",
                           shs_dtype_name(c->strategy.param_dtype ? c->strategy.param_dtype : SHS_F32),
                           p.str[O_GRAD_ACCUM_DTYPE]);
    if (p.given[O_GROWTH_FACTOR] && !(c->strategy.scaler.growth_factor > 1.0f)) { /* GradScaler requires > 1 */
        char got[32];
        snprintf(got, sizeof got, "%g", (double)c->strategy.scaler.growth_factor);
        return usage_error("--growth-factor must be > 1 (got '%s')%s", got, "");
    }
    if ((p.given[O_HYSTERESIS] || p.given[O_CONSECUTIVE_HYSTERESIS] || p.given[O_MIN_LOSS_SCALE]) &&
        c->strategy.scaler.kind != SHS_SCALER_DEEPSPEED)
        return usage_error("--hysteresis, --consecutive-hysteresis and --min-loss-scale apply to --loss-scaler deepspeed, "
                           "not %s%s", shs_scaler_name(c->strategy.scaler.kind), "");
    if ((p.given[O_GROWTH_FACTOR] || p.given[O_BACKOFF_FACTOR]) && c->strategy.scaler.kind != SHS_SCALER_TORCH)
        return usage_error("--growth-factor and --backoff-factor apply to --loss-scaler torch (DeepSpeed's factor is 2), "
                           "not %s%s", shs_scaler_name(c->strategy.scaler.kind), "");
    if ((p.given[O_INIT_SCALE] || p.given[O_GROWTH_INTERVAL] || p.given[O_GROWTH_FACTOR] || p.given[O_BACKOFF_FACTOR] ||
         p.given[O_LOSS_SCALER]) &&
        c->strategy.param_dtype != SHS_F16)
        return usage_error("--init-scale, --growth-interval, --growth-factor, --backoff-factor and --loss-scaler apply to "
                           "--param-dtype f16 (loss scaling)%s%s", "", "");
    if (p.given[O_NORM_TYPE]) {
        static const char *const names[] = {"1", "2", "inf"};
        static const int values[] = {1, 2, SHS_NORM_INF};
        if (choose(p.str[O_NORM_TYPE], names, values, 3, &c->strategy.norm_type))
            return usage_error("--norm-type takes 1, 2 or inf (got '%s')%s", p.str[O_NORM_TYPE], "");
        if (!p.given[O_CLIP_GRAD_NORM]) return usage_error("--norm-type needs --clip-grad-norm%s%s", "", "");
    }
    if (p.given[O_TIMEOUT]) c->timeout_ms = (int)ceil(p.num[O_TIMEOUT] * 1000.0);
    if (p.given[O_BUCKET_MB]) c->strategy.bucket_bytes = (size_t)(p.num[O_BUCKET_MB] * 1048576.0);
    if (p.given[O_DEVICE_MEM]) {
        c->device_mem = p.bytes[O_DEVICE_MEM];
        o->device_mem_given = 1;
    }
    o->data_path = p.str[O_DATA];
    int pack = p.given[O_PACK] && p.num[O_PACK], pad = p.given[O_PAD] && p.num[O_PAD];
    if (pack && pad) return usage_error("--pack and --pad exclude each other%s%s", "", "");
    if ((pack || pad) && !p.given[O_DOC_SEP])
        return usage_error("%s needs --doc-sep BYTE (where documents end)%s", pack ? "--pack" : "--pad", "");
    if (p.given[O_DOC_SEP] && !pack && !pad)
        return usage_error("--doc-sep %s applies with --pack or --pad%s", p.str[O_DOC_SEP], "");
    if (p.given[O_DOC_SEP] && shs_doc_sep_parse(p.str[O_DOC_SEP], &c->doc_sep))
        return usage_error("--doc-sep takes a byte: 0-255, 0xHH, one character or a C escape like '\\n' (got "
                           "'%s')%s", p.str[O_DOC_SEP], "");
    c->data_mode = pack ? SHS_DATA_PACK : pad ? SHS_DATA_PAD : SHS_DATA_STREAM;
    if (p.given[O_LOSS_NORM]) {
        static const char *const names[] = {"per-micro-batch", "global-tokens"};
        static const int values[] = {SHS_LOSS_NORM_PER_MICRO_BATCH, SHS_LOSS_NORM_GLOBAL_TOKENS};
        int v;
        if (choose(p.str[O_LOSS_NORM], names, values, 2, &v))
            return usage_error("--loss-norm takes per-micro-batch or global-tokens (got '%s')%s", p.str[O_LOSS_NORM],
                               "");
        c->loss_norm = (shs_loss_norm_t)v;
    }
    if (pack && o->model_file)
        return usage_error("--pack needs per-document attention, which the network of --model-file lacks: use "
                           "--pad%s%s", "", "");
    o->model_file = p.str[O_MODEL_FILE];
    o->save_dir = p.str[O_SAVE];
    o->resume_dir = p.str[O_RESUME];
    o->export_path = p.str[O_EXPORT_SAFETENSORS];
    o->trace_dir = p.str[O_TRACE];
    if (p.given[O_SAVE_EVERY]) o->save_every = (long)p.num[O_SAVE_EVERY];
    /* outputs written at the end: refuse an unwritable place before training
     * (files by the writers' own policy, durable.h) */
    const char *dirs[] = {o->save_dir, o->trace_dir}, *dir_opts[] = {"--save", "--trace"};
    for (int k = 0; k < 2; k++) {
        const char *why = dirs[k] ? dir_output_problem(dirs[k]) : NULL;
        if (!why) continue;
        return sim_usage_error("train", "%s %s: %s", dir_opts[k], dirs[k], why);
    }
    const char *files[] = {o->export_path, o->timeline_path}, *file_opts[] = {"--export-safetensors", "--memory-timeline"};
    for (int k = 0; k < 2; k++) {
        shs_out_target_t to;
        if (files[k] && shs_out_resolve(files[k], &to) != SHS_OK) return usage_error("%s %s", file_opts[k], shs_last_error());
    }
    if (o->save_every && !o->save_dir) return usage_error("--save-every needs --save DIR%s%s", "", "");
    static const opt_id_t gpt_only[] = {O_LAYERS, O_HEADS, O_CHANNELS, O_CHECKPOINT_ACTIVATIONS, O_RECOMPUTE,
                                        O_ATTENTION, O_AUTOCAST, O_DROPOUT};
    for (int k = 0; k < 8 && o->model_file; k++)
        if (p.given[gpt_only[k]] && (options[gpt_only[k]].type != SIM_OPT_BOOL || p.num[gpt_only[k]])) return usage_error("%s does not apply with --model-file%s", options[gpt_only[k]].name, "");
    if (p.given[O_REDUCE_ORDER] && shs_reduce_order_parse(p.str[O_REDUCE_ORDER], &c->reduce_order))
        return usage_error("unknown reduce order '%s'%s: use rank or ring", p.str[O_REDUCE_ORDER], "");
    if (p.given[O_CHECK]) {
        if (strcmp(p.str[O_CHECK], "ddp") != 0) return usage_error("--check takes 'ddp' (got '%s')%s", p.str[O_CHECK], "");
        o->check_ddp = 1;
    }
    int hybrid = c->strategy.kind == SHS_HYBRID_SHARD || c->strategy.kind == SHS_HYBRID_SHARD_ZERO2;
    if (p.given[O_SHARD_GROUP_SIZE] && !hybrid)
        return usage_error("--shard-group-size applies to hybrid_shard and hybrid_shard_zero2, not %s%s",
                           shs_strategy_name(c->strategy.kind), "");
    /* under MPI the world size is the job's, known after mpi_start */
    int sg = o->backend_mpi ? -1 : sim_train_check_shard_group(c);
    if (sg >= 0) return sg;
    if (o->inject_bitflip && shs_check_inexact_reason(c))
        return usage_error("--inject-bitflip needs an exact --check (not ring order or hybrid with 1 < G < N)%s%s",
                           "", "");
    /* with --resume the step is the checkpoint's plus this run's: checked once resumed */
    if (o->inject_bitflip && (!o->check_ddp || (!o->resume_dir && o->inject_bitflip > o->steps)))
        return usage_error("--inject-bitflip needs --check ddp and a step within --steps%s%s", "", "");
    if (o->timeline_path && o->steps == 0)
        return usage_error("--memory-timeline %s needs a step to draw (--steps 0 runs none)%s", o->timeline_path, "");
    if (!o->model_file && !o->hf_config && c->model.channels % c->model.num_heads != 0) {
        char h[16], ch[16];
        snprintf(h, sizeof h, "%d", c->model.num_heads);
        snprintf(ch, sizeof ch, "%d", c->model.channels);
        return usage_error("--heads %s must divide --channels %s", h, ch);
    }
    return -1;
}
