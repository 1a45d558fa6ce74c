/* train_option_table.c - the rows of `shardsim train`'s option table, their
 * --help defaults and the usage text (see train_option_table.h). */
#include "train_option_table.h"

#include <stdio.h>

#include "model_choice.h"
#include "options.h"
#include "strategy_names.h"
#include "shardsim/train.h"

_Static_assert(O_NUM_OPTIONS <= SIM_MAX_OPTIONS, "SIM_MAX_OPTIONS (args.h) must hold train's options");

const sim_opt_t sim_train_options[O_NUM_OPTIONS] = {
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
    [O_STRATEGY] = {"--strategy", NULL, SIM_OPT_STR, 0, 0, 0, 0, "S",
                    "ddp | zero1 | zero2 | zero3 | hybrid_shard | hybrid_shard_zero2,\n"
                    "or another tool's name for one of them:" SIM_STRATEGY_ALIASES_HELP},
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
    [O_LR_SCHEDULE] = {"--lr-schedule", NULL, SIM_OPT_STR, 0, 0, 0, 0, "S",
                       "the lr per optimizer step (lr_schedule.h): HF get_scheduler's\n"
                       "constant | constant_with_warmup | linear | cosine | cosine_with_min_lr,\n"
                       "or DeepSpeed's WarmupLR | WarmupDecayLR (warmup_min_lr --min-lr to\n"
                       "--lr, log warmup) | WarmupCosineLR; OneCycle via --ds-config"},
    [O_WARMUP_STEPS] = {"--warmup-steps", NULL, SIM_OPT_INT, 0, 1e9, 0, 0, "N",
                        "warmup optimizer steps (HF warmup_steps, DeepSpeed warmup_num_steps)"},
    [O_WARMUP_RATIO] = {"--warmup-ratio", NULL, SIM_OPT_FLOAT, 0, 1, 0, 1, "R",
                        "warmup of ceil(R x the total steps) when --warmup-steps is 0\n"
                        "(HF warmup_ratio)"},
    [O_LR_TOTAL_STEPS] = {"--lr-total-steps", NULL, SIM_OPT_INT, 1, 1e12, 0, 0, "N",
                          "the schedule's length in optimizer steps (HF num_training_steps,\n"
                          "DeepSpeed total_num_steps); default --steps; needed with --resume"},
    [O_MIN_LR] = {"--min-lr", NULL, SIM_OPT_FLOAT, 0, 1e6, 0, 0, "X",
                  "cosine_with_min_lr's floor (HF min_lr); WarmupLR / WarmupDecayLR's\n"
                  "warmup_min_lr (default 0)"},
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
                          "clip the global gradient norm to X > 0 (torch clip_grad_norm_),\n"
                          "computed exactly so it is the same bits at every world size;\n"
                          "0 is refused: torch would zero every gradient, DeepSpeed and\n"
                          "the HF Trainer turn clipping off (leave the option out)"},
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
    [O_AC_MODE] = SIM_ROW_AC_MODE,
    [O_SELECTIVE_AC_OPTION] = SIM_ROW_SELECTIVE_AC_OPTION,
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
    [O_METRICS] = {"--metrics", NULL, SIM_OPT_STR, 0, 0, 0, 0, "FILE.jsonl",
                   "one JSON object per step, one a line: step, loss, grad_norm, lr,\n"
                   "loss_scale, step_skipped, tokens, seconds, tokens_per_s,\n"
                   "device_mem_bytes, device_mem_peak_bytes (sim/train_metrics.h);\n"
                   "written to FILE.jsonl.tmp as steps end, renamed at the end (after\n"
                   "a failure too, with the steps that completed)"},
    [O_PROGRESS] = {"--progress", NULL, SIM_OPT_FLOAT, 0, 86400, 0, 0, "SEC",
                    "while setup, a step or a save runs longer than SEC seconds, say\n"
                    "so on stderr (again at 2x, 4x, ... SEC; 0: never)"},
    [O_TRACE] = {"--trace", NULL, SIM_OPT_STR, 0, 0, 0, 0, "DIR",
                 "record every collective of every rank to DIR/rank<k>.trace\n"
                 "(shardsim's trace format; see shardsim replay)"},
    [O_DS_CONFIG] = SIM_ROW_DS_CONFIG,
};

/* --help: the rows with their defaults from shs_train_default_config() */
void sim_train_help_defaults(const char *defaults[O_NUM_OPTIONS]) {
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
    defaults[O_AC_MODE] = "none";
    defaults[O_ATTENTION] = "eager";
    defaults[O_AUTOCAST] = "off";
    defaults[O_DROPOUT] = "0";
}

const char sim_train_usage_head[] =
    "usage: shardsim train [options]\n"
    "\n"
    "Train a GPT-2-style model, or a Llama-family one (--hf-config), on byte tokens\n"
    "on N simulated GPUs (threads).\n"
    "Options take their value as '--opt V' or '--opt=V'; a [true|false] option given alone\n"
    "means true (yes/no and 1/0 work too).\n"
    "\n";

