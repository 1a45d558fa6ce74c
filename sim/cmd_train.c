/* cmd_train.c - `shardsim train`: the main job. Trains the GPT on a world of
 * simulated GPUs under one strategy, prints loss and time per step and a
 * summary of memory and communication; with --check ddp it runs DDP on the
 * same data in the same process and compares every parameter bit for bit
 * after every step.
 * What it is not: the training loop itself (src/train/train.c).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>

#include "args.h"
#include "compare_plot.h"
#include "progress.h"
#include "train_trace.h"
#include "commands.h"
#include "shardsim/shard.h"
#include "shardsim/train.h"
#include "shardsim/units.h"
#include "shardsim/world.h"
#include "shardsim/clock.h"
#include "shardsim/checkpoint.h"
#include "shardsim/features.h"
#include "shardsim/comm_mpi.h"
#include "shardsim/safetensors.h"
#include "shardsim/durable.h"

typedef struct {
    shs_train_config_t cfg;
    const char *data_path;
    const char *model_file;   /* --model-file: a described model instead of the GPT */
    long steps;
    int check_ddp;
    long inject_bitflip;   /* step after which to flip a parameter bit (0: never) */
    int device_mem_given;
    const char *save_dir, *resume_dir, *export_path; /* checkpoint.h, safetensors.h */
    long save_every;       /* also save after every this many steps (0: only at the end) */
    const char *trace_dir; /* --trace: record every collective of every rank */
    const char *timeline_path; /* --memory-timeline: SVG of rank 0's memory over the last step */
    int backend_mpi;       /* --backend mpi: this process is one rank of the MPI job */
    int world_given;
    int loss_bits;         /* --loss-bits: also print each loss as its f32 bits */
    double progress_s;     /* --progress: speak on stderr when a phase runs longer (0: never) */
    long debug_mismatch_rank; /* hidden: this rank issues a different count (tests); -1 none */
    long debug_stall_rank;    /* hidden: this rank stalls past the timeout before step 1 (tests); -1 none */
} train_opts_t;

static void train_usage(FILE *f) {
    shs_train_config_t d = shs_train_default_config();
    fprintf(f,
            "usage: shardsim train [options]\n"
            "\n"
            "Train a GPT-2-style model (byte vocabulary) on N simulated GPUs (threads).\n"
            "Options take their value as '--opt V' or '--opt=V'; a [true|false] option given alone\n"
            "means true (yes/no and 1/0 work too).\n"
            "\n"
            "  --world N              ranks (simulated GPUs), 1..%d (default %d)\n"
            "  --backend B            thread | mpi (default thread). mpi: run under mpirun, one rank\n"
            "                         per process, the world is the MPI job (--world absent or equal);\n"
            "                         same collectives and reduction order, so the same bits.\n"
            "                         cuda: every rank a CUDA device on one GPU (pick it with\n"
            "                         CUDA_VISIBLE_DEVICES), device-local communicator: DDP and ZeRO\n"
            "                         agree bit for bit; cuda-nccl: rank r on GPU r over NCCL;\n"
            "                         mpi-nccl: under mpirun, one process per GPU (GPU = its index on\n"
            "                         the node), NCCL bootstrapped over MPI; same bits as cuda-nccl\n"
            "  --loss-bits [true|false]  also print each step's loss as its f32 bits in hex\n"
            "  --strategy S           ddp | zero1 | zero2 | zero3 | hybrid_shard | hybrid_shard_zero2\n"
            "                         (default %s)\n"
            "  --shard-group-size G   hybrid_*: shard within groups of G consecutive ranks, replicate\n"
            "                         across the N/G groups (default N)\n"
            "  --reshard-after-forward [true|false] free gathered units after forward use (default true;\n"
            "                         false keeps them until backward, FSDP SHARD_GRAD_OP)\n"
            "  --backward-prefetch pre|post|none    gather the next unit before / after the current\n"
            "                         unit's backward, or when needed (default pre, FSDP's)\n"
            "  --forward-prefetch [true|false]      gather the next unit during forward (default false)\n"
            "  --limit-all-gathers N  at most N units gathered ahead (default 0: no limit)\n"
            "  --offload none|optimizer|params      CPU offload: optimizer state and master weights on\n"
            "                         the host, the optimizer step there (ZeRO-Offload); params: the\n"
            "                         parameter shards too (zero3, hybrid_shard; FSDP CPUOffload)\n"
            "  --memory-timeline FILE.svg           draw rank 0's device memory over the last step,\n"
            "                         per phase (forward/backward of each unit, optimizer), as SVG\n"
            "  --poison-freed-buffers [true|false]  debugging: fill freed communication buffers with\n"
            "                         NaN so that a use after free shows in the results\n"
            "  --data PATH            training text (default: built-in corpus)\n"
            "  --model-file PATH      train the model a description file lists instead of the GPT\n"
            "                         (README: Model-description files); --layers, --heads and\n"
            "                         --channels then do not apply, --context still sets T\n"
            "  --steps N              training steps of this run (default 50); with --resume, steps\n"
            "                         after the checkpoint's (numbered from it). 0: initialize only,\n"
            "                         then --save / --export-safetensors write the initial weights\n"
            "  --check ddp            also run DDP on the same data; compare loss and every\n"
            "                         parameter bit for bit after each step (exit 3 on a difference)\n"
            "  --reduce-order O       rank | ring: order in which all-reduce and reduce-scatter add\n"
            "                         ranks (default rank, exact). ring: as NCCL's ring algorithm;\n"
            "                         with --check ddp, print the drift from DDP each step (exit 0)\n"
            "  --layers L             transformer blocks (default %d)\n"
            "  --heads NH             attention heads, must divide channels (default %d)\n"
            "  --channels C           model width (default %d)\n"
            "  --context T            sequence length (default %d)\n"
            "  --micro-batch B        sequences per rank per step (default %d)\n"
            "  --optimizer O          adamw | sgd (default adamw)\n"
            "  --lr X                 learning rate (default 1e-3)\n"
            "  --weight-decay X       (default: 0.01 adamw, 0 sgd)\n"
            "  --beta1 X, --beta2 X, --eps X   AdamW (defaults 0.9, 0.999, 1e-8)\n"
            "  --momentum X           SGD momentum (default 0)\n"
            "  --seed N               initialization and data order (default %llu)\n"
            "  --device-mem SIZE      memory per simulated GPU, e.g. 80GiB, 512MiB\n"
            "                         (default: this machine's RAM x 0.75 shared by the ranks)\n"
            "  --bucket-mb X          DDP gradient bucket size in MiB (default 25)\n"
            "  --timeout SEC          collective timeout (default %d)\n"
            "  --grad-accum K         micro-batches per step; gradients are only reduced on the last\n"
            "                         (torch no_sync); the step's gradient is their mean (default 1)\n"
            "  --clip-grad-norm X     clip the global gradient norm to X (torch clip_grad_norm_),\n"
            "                         computed exactly so it is the same bits at every world size\n"
            "  --norm-type P          1 | 2 | inf, with --clip-grad-norm (default 2)\n"
            "  --replicate-below N    keep units of fewer than N elements unsharded on every rank\n"
            "                         (all-reduced like DDP; DeepSpeed's persistence threshold)\n"
            "  --shard-align E        every shard starts on a multiple of E elements (default 1)\n"
            "  --param-dtype D        f32 | bf16 | f16: parameters as the model computes with them\n"
            "                         (FSDP MixedPrecision param_dtype; f32 master weights stay on the\n"
            "                         shards; ZeRO-3 all-gathers in D). f16 turns on dynamic loss scaling\n"
            "  --reduce-dtype D       f32 | bf16 | f16: gradient reduction dtype (default: param dtype)\n"
            "  --init-scale X         f16 loss scaling: initial scale (default 65536, GradScaler's)\n"
            "  --growth-interval N    f16 loss scaling: grow the scale after N good steps (default 2000)\n"
            "  --growth-factor X      f16 loss scaling: multiply the scale by X on growth (default 2)\n"
            "  --backoff-factor X     f16 loss scaling: multiply it by X (0 < X < 1) on overflow (default 0.5)\n"
            "  --checkpoint-activations [true|false]  activation checkpointing per block: keep only\n"
            "                         each block's input, recompute its forward in backward (same results,\n"
            "                         less memory); the GPT only, not with --model-file\n"
            "  --inject-bitflip STEP  after step STEP flip the lowest bit of wte[0][0] in one rank's\n"
            "                         memory (the last replica, or the ZeRO-3 owner) to show what\n"
            "                         --check reports; needs --check ddp\n"
            "  --save DIR             save a sharded checkpoint into DIR at the end (crash-safe)\n"
            "  --save-every N         also save after every N steps (needs --save); each save prints\n"
            "                         its directory, step and size\n"
            "  --resume DIR           continue from the checkpoint in DIR, at any --world,\n"
            "                         --strategy and --shard-align (model and optimizer must match)\n"
            "  --export-safetensors FILE  write the final full weights as safetensors\n"
            "  --progress SEC         while setup, a step or a save runs longer than SEC seconds, say\n"
            "                         so on stderr (again at 2x, 4x, ... SEC; default 5; 0: never)\n"
            "  --trace DIR            record every collective of every rank to DIR/rank<k>.trace\n"
            "                         (shardsim's trace format; see shardsim replay)\n"
            "  -h, --help             this text\n",
            SHS_MAX_WORLD, d.world_size, shs_strategy_name(d.strategy), d.model.num_layers, d.model.num_heads,
            d.model.channels, d.model.context, d.micro_batch, (unsigned long long)d.seed,
            SHS_COMM_DEFAULT_TIMEOUT_MS / 1000);
}

/* fmt takes the two strings a and b (either may be unused) */
static int usage_error(const char *fmt, const char *a, const char *b) {
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, a, b);
    return sim_usage_error("train", "%s", msg);
}

/* The options of `train`: each parsed by type and range, then applied in
 * apply_options() so that their order on the command line never matters. */
typedef enum {
    O_WORLD, O_STEPS, O_LAYERS, O_HEADS, O_CHANNELS, O_CONTEXT, O_MICRO_BATCH, O_SEED, O_INJECT_BITFLIP,
    O_LR, O_BETA1, O_BETA2, O_EPS, O_MOMENTUM, O_WEIGHT_DECAY, O_TIMEOUT, O_BUCKET_MB,
    O_DEVICE_MEM, O_STRATEGY, O_OPTIMIZER, O_DATA, O_CHECK,
    O_GRAD_ACCUM, O_CLIP_GRAD_NORM, O_NORM_TYPE, O_REPLICATE_BELOW, O_SHARD_ALIGN,
    O_PARAM_DTYPE, O_REDUCE_DTYPE, O_INIT_SCALE, O_GROWTH_INTERVAL, O_GROWTH_FACTOR, O_BACKOFF_FACTOR, O_SHARD_GROUP_SIZE,
    O_RESHARD_AFTER_FORWARD, O_BACKWARD_PREFETCH, O_FORWARD_PREFETCH, O_LIMIT_ALL_GATHERS, O_POISON_FREED,
    O_OFFLOAD, O_MEMORY_TIMELINE, O_REDUCE_ORDER,
    O_MODEL_FILE, O_CHECKPOINT_ACTIVATIONS,
    O_SAVE, O_SAVE_EVERY, O_RESUME, O_EXPORT_SAFETENSORS,
    O_TRACE,
    O_BACKEND, O_LOSS_BITS, O_PROGRESS, O_DEBUG_MISMATCH_RANK, O_DEBUG_STALL_RANK,
    O_NUM_OPTIONS
} opt_id_t;

typedef enum { T_INT, T_F32, T_FLOAT, T_STR, T_BOOL /* bare (true), or true|false (sim_args_bool) */ } opt_type_t;

static const struct {
    const char *name;
    opt_type_t type;
    double lo, hi;           /* inclusive range (T_INT, T_F32, T_FLOAT) */
    int hi_open;             /* the upper bound itself is excluded */
} options[O_NUM_OPTIONS] = {
    [O_WORLD] = {"--world", T_INT, 1, SHS_MAX_WORLD, 0},
    [O_STEPS] = {"--steps", T_INT, 0, 100000000, 0}, /* 0: initialize, then save or export */
    [O_LAYERS] = {"--layers", T_INT, 1, SHS_GPT_MAX_LAYERS, 0},
    [O_HEADS] = {"--heads", T_INT, 1, 65536, 0},
    [O_CHANNELS] = {"--channels", T_INT, 1, 65536, 0},
    [O_CONTEXT] = {"--context", T_INT, 1, 65536, 0},
    [O_MICRO_BATCH] = {"--micro-batch", T_INT, 1, 65536, 0},
    [O_SEED] = {"--seed", T_INT, 0, 4611686018427387904.0 /* 2^62: exact as a double and as a long */, 0},
    [O_INJECT_BITFLIP] = {"--inject-bitflip", T_INT, 1, 100000000, 0},
    [O_LR] = {"--lr", T_F32, 0, 1e6, 0},
    [O_BETA1] = {"--beta1", T_F32, 0, 1, 1},       /* torch: 0 <= beta < 1 */
    [O_BETA2] = {"--beta2", T_F32, 0, 1, 1},
    [O_EPS] = {"--eps", T_F32, 0, 1, 0},
    [O_MOMENTUM] = {"--momentum", T_F32, 0, 1, 0},
    [O_WEIGHT_DECAY] = {"--weight-decay", T_F32, 0, 1e6, 0},
    [O_TIMEOUT] = {"--timeout", T_FLOAT, 0.001, 86400, 0},
    [O_BUCKET_MB] = {"--bucket-mb", T_FLOAT, 0.001, 1048576, 0},
    [O_DEVICE_MEM] = {"--device-mem", T_STR, 0, 0, 0},
    [O_STRATEGY] = {"--strategy", T_STR, 0, 0, 0},
    [O_OPTIMIZER] = {"--optimizer", T_STR, 0, 0, 0},
    [O_DATA] = {"--data", T_STR, 0, 0, 0},
    [O_CHECK] = {"--check", T_STR, 0, 0, 0},
    [O_SAVE] = {"--save", T_STR, 0, 0, 0},
    [O_SAVE_EVERY] = {"--save-every", T_INT, 1, 100000000, 0},
    [O_RESUME] = {"--resume", T_STR, 0, 0, 0},
    [O_EXPORT_SAFETENSORS] = {"--export-safetensors", T_STR, 0, 0, 0},
    [O_REDUCE_ORDER] = {"--reduce-order", T_STR, 0, 0, 0},
    [O_GRAD_ACCUM] = {"--grad-accum", T_INT, 1, 65536, 0},
    [O_CLIP_GRAD_NORM] = {"--clip-grad-norm", T_F32, 0, 1e30, 0},
    [O_NORM_TYPE] = {"--norm-type", T_STR, 0, 0, 0},
    [O_REPLICATE_BELOW] = {"--replicate-below", T_INT, 0, 1e15, 0},
    [O_SHARD_ALIGN] = {"--shard-align", T_INT, 1, 1 << 20, 0},
    [O_PARAM_DTYPE] = {"--param-dtype", T_STR, 0, 0, 0},
    [O_REDUCE_DTYPE] = {"--reduce-dtype", T_STR, 0, 0, 0},
    [O_INIT_SCALE] = {"--init-scale", T_F32, 1e-30, 1e30, 0},
    [O_GROWTH_INTERVAL] = {"--growth-interval", T_INT, 1, 1000000000, 0},
    [O_GROWTH_FACTOR] = {"--growth-factor", T_F32, 1.0, 1e6, 0},
    [O_BACKOFF_FACTOR] = {"--backoff-factor", T_F32, 1e-6, 0.999999, 0},
    [O_SHARD_GROUP_SIZE] = {"--shard-group-size", T_INT, 1, SHS_MAX_WORLD, 0},
    [O_RESHARD_AFTER_FORWARD] = {"--reshard-after-forward", T_BOOL, 0, 0, 0},
    [O_BACKWARD_PREFETCH] = {"--backward-prefetch", T_STR, 0, 0, 0},
    [O_FORWARD_PREFETCH] = {"--forward-prefetch", T_BOOL, 0, 0, 0},
    [O_LIMIT_ALL_GATHERS] = {"--limit-all-gathers", T_INT, 0, 1 << 20, 0},
    [O_POISON_FREED] = {"--poison-freed-buffers", T_BOOL, 0, 0, 0},
    [O_OFFLOAD] = {"--offload", T_STR, 0, 0, 0},
    [O_MEMORY_TIMELINE] = {"--memory-timeline", T_STR, 0, 0, 0},
    [O_MODEL_FILE] = {"--model-file", T_STR, 0, 0, 0},
    [O_CHECKPOINT_ACTIVATIONS] = {"--checkpoint-activations", T_BOOL, 0, 0, 0},
    [O_TRACE] = {"--trace", T_STR, 0, 0, 0},
    [O_BACKEND] = {"--backend", T_STR, 0, 0, 0},
    [O_LOSS_BITS] = {"--loss-bits", T_BOOL, 0, 0, 0},
    [O_PROGRESS] = {"--progress", T_FLOAT, 0, 86400, 0},
    /* hidden, for tests of the MPI backend's failure paths */
    [O_DEBUG_MISMATCH_RANK] = {"--debug-mismatch-rank", T_INT, 0, SHS_MAX_WORLD - 1, 0},
    [O_DEBUG_STALL_RANK] = {"--debug-stall-rank", T_INT, 0, SHS_MAX_WORLD - 1, 0},
};

typedef struct {
    int given[O_NUM_OPTIONS];
    double num[O_NUM_OPTIONS];
    const char *str[O_NUM_OPTIONS];
} parsed_t;

static int parse_value(opt_id_t id, const char *val, parsed_t *p) {
    char err[256];
    const char *name = options[id].name;
    long iv;
    double fv;
    switch (options[id].type) {
    case T_INT:
        if (sim_parse_int(val, (long)options[id].lo, (long)options[id].hi, &iv, err, sizeof err))
            return usage_error("%s: %s", name, err);
        p->num[id] = (double)iv;
        break;
    case T_F32:
    case T_FLOAT:
        if (sim_parse_float(val, options[id].lo, options[id].hi, &fv, err, sizeof err))
            return usage_error("%s: %s", name, err);
        if (options[id].hi_open && fv >= options[id].hi) {
            snprintf(err, sizeof err, "%g is out of range [%g, %g)", fv, options[id].lo, options[id].hi);
            return usage_error("%s: %s", name, err);
        }
        if (options[id].type == T_F32 && fv != 0.0 && (float)fv == 0.0f) {
            snprintf(err, sizeof err, "%g is below the smallest f32 (about 1.4e-45)", fv);
            return usage_error("%s: %s", name, err);
        }
        p->num[id] = fv;
        break;
    case T_STR:
        p->str[id] = val;
        break;
    case T_BOOL: /* read by sim_args_bool */
        break;
    }
    p->given[id] = 1;
    return -1;
}

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

/* Hybrid sharding's group size must divide the world size: a usage error
 * (exit 2) with the sizes named; -1 when fine. */
static int check_shard_group(const shs_train_config_t *c) {
    int hybrid = c->strategy == SHS_HYBRID_SHARD || c->strategy == SHS_HYBRID_SHARD_ZERO2;
    if (!hybrid || c->shard_group_size <= 0 || c->world_size % c->shard_group_size == 0) return -1;
    char g[16], w[16];
    snprintf(g, sizeof g, "%d", c->shard_group_size);
    snprintf(w, sizeof w, "%d", c->world_size);
    return usage_error("--shard-group-size %s must divide the world size %s", g, w);
}

/* Parse argv into o. Returns -1 to continue, or an exit code. */
static int parse_train_args(int argc, char **argv, train_opts_t *o) {
    parsed_t p = {0};
    sim_args_t a = sim_args_start("train", argc, argv);
    int kind, rc;
    while ((kind = sim_args_next(&a)) >= 0) {
        if (kind == 0) return sim_args_unexpected(&a);
        if (strcmp(a.name, "-h") == 0 || strcmp(a.name, "--help") == 0) {
            train_usage(stdout);
            return SIM_EXIT_OK;
        }
        int id = -1;
        for (int k = 0; k < O_NUM_OPTIONS; k++)
            if (strcmp(a.name, options[k].name) == 0) id = k;
        if (id < 0) return sim_args_unknown(&a);
        if (options[id].type == T_BOOL) {
            int v;
            if ((rc = sim_args_bool(&a, &v)) >= 0) return rc;
            p.given[id] = 1;
            p.num[id] = v;
            continue;
        }
        const char *val;
        if ((rc = sim_args_value(&a, &val)) >= 0) return rc;
        if ((rc = parse_value((opt_id_t)id, val, &p)) >= 0) return rc;
    }

    shs_train_config_t *c = &o->cfg;
    *c = shs_train_default_config();
    o->steps = 50;
    o->progress_s = p.given[O_PROGRESS] ? p.num[O_PROGRESS] : 5.0;
    if (p.given[O_OPTIMIZER] && shs_optim_parse(p.str[O_OPTIMIZER], &c->optim.kind))
        return usage_error("unknown optimizer '%s'%s: use adamw or sgd", p.str[O_OPTIMIZER], "");
    c->optim = shs_optim_default(c->optim.kind);
    const char *opt_name = shs_optim_name(c->optim.kind);
    static const opt_id_t adamw_only[] = {O_BETA1, O_BETA2, O_EPS}, sgd_only[] = {O_MOMENTUM};
    for (int k = 0; k < 3 && c->optim.kind != SHS_OPTIM_ADAMW; k++)
        if (p.given[adamw_only[k]]) return usage_error("%s applies to adamw, not %s", options[adamw_only[k]].name, opt_name);
    if (c->optim.kind != SHS_OPTIM_SGD && p.given[sgd_only[0]])
        return usage_error("%s applies to sgd, not %s", options[sgd_only[0]].name, opt_name);

#define SET(id, dst) if (p.given[id]) dst = p.num[id]
    SET(O_WORLD, c->world_size);
    SET(O_STEPS, o->steps);
    SET(O_LAYERS, c->model.num_layers);
    SET(O_HEADS, c->model.num_heads);
    SET(O_CHANNELS, c->model.channels);
    SET(O_CONTEXT, c->model.context);
    SET(O_MICRO_BATCH, c->micro_batch);
    SET(O_SEED, c->seed);
    SET(O_INJECT_BITFLIP, o->inject_bitflip);
    SET(O_LR, c->optim.lr);
    SET(O_BETA1, c->optim.beta1);
    SET(O_BETA2, c->optim.beta2);
    SET(O_EPS, c->optim.eps);
    SET(O_MOMENTUM, c->optim.momentum);
    SET(O_WEIGHT_DECAY, c->optim.weight_decay);
    SET(O_GRAD_ACCUM, c->grad_accum);
    SET(O_CLIP_GRAD_NORM, c->clip_norm);
    SET(O_REPLICATE_BELOW, c->replicate_below);
    SET(O_SHARD_ALIGN, c->shard_align);
    SET(O_SHARD_GROUP_SIZE, c->shard_group_size);
    SET(O_LIMIT_ALL_GATHERS, c->limit_all_gathers);
    SET(O_INIT_SCALE, c->scaler.init_scale);
    SET(O_GROWTH_INTERVAL, c->scaler.growth_interval);
    SET(O_GROWTH_FACTOR, c->scaler.growth_factor);
    SET(O_BACKOFF_FACTOR, c->scaler.backoff_factor);
#undef SET
    c->checkpoint_activations = p.given[O_CHECKPOINT_ACTIVATIONS] && p.num[O_CHECKPOINT_ACTIVATIONS];
    o->world_given = p.given[O_WORLD];
    o->loss_bits = p.given[O_LOSS_BITS] && p.num[O_LOSS_BITS];
    o->debug_mismatch_rank = p.given[O_DEBUG_MISMATCH_RANK] ? (long)p.num[O_DEBUG_MISMATCH_RANK] : -1;
    o->debug_stall_rank = p.given[O_DEBUG_STALL_RANK] ? (long)p.num[O_DEBUG_STALL_RANK] : -1;
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
    } else if (o->debug_mismatch_rank >= 0 || o->debug_stall_rank >= 0) {
        return usage_error("--debug-mismatch-rank and --debug-stall-rank need --backend mpi%s%s", "", "");
    }
    c->norm_type = 2;
    c->keep_after_forward = p.given[O_RESHARD_AFTER_FORWARD] && !p.num[O_RESHARD_AFTER_FORWARD];
    c->forward_prefetch = p.given[O_FORWARD_PREFETCH] && p.num[O_FORWARD_PREFETCH];
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
        c->offload = (shs_offload_t)v;
    }
    if (p.given[O_BACKWARD_PREFETCH]) {
        static const char *const names[] = {"pre", "post", "none"};
        static const int values[] = {SHS_PREFETCH_PRE, SHS_PREFETCH_POST, SHS_PREFETCH_NONE};
        int v;
        if (choose(p.str[O_BACKWARD_PREFETCH], names, values, 3, &v))
            return usage_error("--backward-prefetch takes pre, post or none (got '%s')%s", p.str[O_BACKWARD_PREFETCH], "");
        c->backward_prefetch = (shs_prefetch_t)v;
    }
    static const opt_id_t dtype_opts[] = {O_PARAM_DTYPE, O_REDUCE_DTYPE};
    for (int k = 0; k < 2; k++) {
        if (!p.given[dtype_opts[k]]) continue;
        shs_dtype_t t;
        if (shs_dtype_parse(p.str[dtype_opts[k]], &t) || (t != SHS_F32 && t != SHS_BF16 && t != SHS_F16))
            return usage_error("%s takes f32, bf16 or f16 (got '%s')", options[dtype_opts[k]].name, p.str[dtype_opts[k]]);
        if (k) c->reduce_dtype = t;
        else c->param_dtype = t;
    }
    if (p.given[O_GROWTH_FACTOR] && !(c->scaler.growth_factor > 1.0f)) { /* GradScaler requires > 1 */
        char got[32];
        snprintf(got, sizeof got, "%g", (double)c->scaler.growth_factor);
        return usage_error("--growth-factor must be > 1 (got '%s')%s", got, "");
    }
    if ((p.given[O_INIT_SCALE] || p.given[O_GROWTH_INTERVAL] || p.given[O_GROWTH_FACTOR] || p.given[O_BACKOFF_FACTOR]) &&
        c->param_dtype != SHS_F16)
        return usage_error("--init-scale, --growth-interval, --growth-factor and --backoff-factor apply to --param-dtype "
                           "f16 (loss scaling)%s%s", "", "");
    if (p.given[O_NORM_TYPE]) {
        static const char *const names[] = {"1", "2", "inf"};
        static const int values[] = {1, 2, SHS_NORM_INF};
        if (choose(p.str[O_NORM_TYPE], names, values, 3, &c->norm_type))
            return usage_error("--norm-type takes 1, 2 or inf (got '%s')%s", p.str[O_NORM_TYPE], "");
        if (!p.given[O_CLIP_GRAD_NORM]) return usage_error("--norm-type needs --clip-grad-norm%s%s", "", "");
    }
    if (p.given[O_TIMEOUT]) c->timeout_ms = (int)ceil(p.num[O_TIMEOUT] * 1000.0);
    if (p.given[O_BUCKET_MB]) c->bucket_bytes = (size_t)(p.num[O_BUCKET_MB] * 1048576.0);
    if (p.given[O_DEVICE_MEM]) {
        char err[256];
        if (shs_parse_bytes(p.str[O_DEVICE_MEM], &c->device_mem, err, sizeof err))
            return usage_error("%s: %s", "--device-mem", err);
        o->device_mem_given = 1;
    }
    if (p.given[O_STRATEGY] && shs_strategy_parse(p.str[O_STRATEGY], &c->strategy))
        return usage_error("unknown strategy '%s'%s: use ddp, zero1, zero2, zero3, hybrid_shard or hybrid_shard_zero2", p.str[O_STRATEGY], "");
    o->data_path = p.str[O_DATA];
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
    static const opt_id_t gpt_only[] = {O_LAYERS, O_HEADS, O_CHANNELS, O_CHECKPOINT_ACTIVATIONS};
    for (int k = 0; k < 4 && o->model_file; k++)
        if (p.given[gpt_only[k]] && (options[gpt_only[k]].type != T_BOOL || p.num[gpt_only[k]])) return usage_error("%s does not apply with --model-file%s", options[gpt_only[k]].name, "");
    if (p.given[O_REDUCE_ORDER] && shs_reduce_order_parse(p.str[O_REDUCE_ORDER], &c->reduce_order))
        return usage_error("unknown reduce order '%s'%s: use rank or ring", p.str[O_REDUCE_ORDER], "");
    if (p.given[O_CHECK]) {
        if (strcmp(p.str[O_CHECK], "ddp") != 0) return usage_error("--check takes 'ddp' (got '%s')%s", p.str[O_CHECK], "");
        o->check_ddp = 1;
    }
    int hybrid = c->strategy == SHS_HYBRID_SHARD || c->strategy == SHS_HYBRID_SHARD_ZERO2;
    if (p.given[O_SHARD_GROUP_SIZE] && !hybrid)
        return usage_error("--shard-group-size applies to hybrid_shard and hybrid_shard_zero2, not %s%s",
                           shs_strategy_name(c->strategy), "");
    /* under MPI the world size is the job's, known after mpi_start */
    int sg = o->backend_mpi ? -1 : check_shard_group(c);
    if (sg >= 0) return sg;
    if (o->inject_bitflip && (c->reduce_order == SHS_REDUCE_ORDER_RING ||
                              (hybrid && c->shard_group_size > 1 && c->shard_group_size < c->world_size)))
        return usage_error("--inject-bitflip needs an exact --check (not ring order or hybrid with 1 < G < N)%s%s",
                           "", "");
    /* with --resume the step is the checkpoint's plus this run's: checked once resumed */
    if (o->inject_bitflip && (!o->check_ddp || (!o->resume_dir && o->inject_bitflip > o->steps)))
        return usage_error("--inject-bitflip needs --check ddp and a step within --steps%s%s", "", "");
    if (o->timeline_path && o->steps == 0)
        return usage_error("--memory-timeline %s needs a step to draw (--steps 0 runs none)%s", o->timeline_path, "");
    if (!o->model_file && c->model.channels % c->model.num_heads != 0) {
        char h[16], ch[16];
        snprintf(h, sizeof h, "%d", c->model.num_heads);
        snprintf(ch, sizeof ch, "%d", c->model.channels);
        return usage_error("--heads %s must divide --channels %s", h, ch);
    }
    return -1;
}

/* steps: this run's; the trainer knows how many the checkpoint had before */
static void print_summary(shs_trainer_t *t, float final_loss, long steps) {
    int first, n; /* the ranks this process runs: all of them on threads, its own under MPI */
    shs_trainer_local_ranks(t, &first, &n);
    char b[32];
    long done = shs_trainer_steps_done(t);
    if (steps == 0)
        printf("\nsummary\n  no step run (--steps 0): the weights as of step %ld\n", done);
    else if (done != steps)
        printf("\nsummary\n  final loss %.6f after step %ld (%ld step%s in this run)\n", final_loss, done, steps,
               steps == 1 ? "" : "s");
    else
        printf("\nsummary\n  final loss %.6f after %ld step%s\n", final_loss, steps, steps == 1 ? "" : "s");
    printf("  peak device memory per rank (MiB)\n    %-6s", "rank");
    for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) printf(" %11s", shs_mem_category_name((shs_mem_category_t)c));
    printf(" %11s\n", "total");
    int shown = n <= 16 ? n : 8;
    for (int i = 0; i < n; i++) {
        if (i == shown && i < n - 1) {
            printf("    ... (%d more ranks)\n", n - shown - 1);
            i = n - 1;
        }
        shs_mem_stats_t m;
        shs_trainer_mem_stats(t, first + i, &m);
        printf("    %-6d", first + i);
        for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) printf(" %11.3f", (double)m.peak[c] / 1048576.0);
        printf(" %11.3f\n", (double)m.total_peak / 1048576.0);
    }
    if (shs_trainer_config(t)->offload != SHS_OFFLOAD_NONE) {
        uint64_t h2d, d2h;
        shs_mem_stats_t hm;
        shs_strategy_offload_stats(shs_trainer_strategy(t, first), &h2d, &d2h, &hm);
        char b2[32], b3[32];
        printf("  offload (rank 0): peak host memory params %s, grads %s, optim %s; copied host->device %s, "
               "device->host %s over the run\n", shs_format_bytes(b, sizeof b, (double)hm.peak[SHS_MEM_PARAMS]),
               shs_format_bytes(b2, sizeof b2, (double)hm.peak[SHS_MEM_GRADS]),
               shs_format_bytes(b3, sizeof b3, (double)hm.peak[SHS_MEM_OPTIM]),
               shs_format_bytes((char[32]){0}, 32, (double)h2d), shs_format_bytes((char[32]){0}, 32, (double)d2h));
    }
    shs_comm_stats_t cs, sum = {0};
    for (int i = 0; i < n; i++) {
        shs_trainer_comm_stats(t, first + i, &cs);
        for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
            sum.calls[op] += cs.calls[op];
            sum.bytes[op] += cs.bytes[op];
            sum.bytes_sent[op] += cs.bytes_sent[op];
        }
    }
    printf("  communication per rank over the run (bytes sent: ring algorithm, as nccl-tests busbw)\n");
    printf("    %-16s %8s %14s %14s\n", "collective", "calls", "buffer", "sent/rank");
    for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
        if (!sum.calls[op]) continue;
        char b2[32];
        printf("    %-16s %8llu %14s %14s\n", shs_coll_op_name((shs_coll_op_t)op),
               (unsigned long long)(sum.calls[op] / (uint64_t)n), shs_format_bytes(b, sizeof b, (double)sum.bytes[op] / n),
               shs_format_bytes(b2, sizeof b2, (double)sum.bytes_sent[op] / n));
    }
}

/* --reduce-order ring with --check ddp: how far snapshot a (the strategy)
 * is from b (DDP) over the real elements (padding skipped): the largest
 * |a - b| and the largest |a - b| / max(|a|, |b|) (0 where both are 0); a NaN
 * difference counts as infinite. */
typedef struct {
    double max_abs, max_rel;
} drift_t;

static drift_t param_drift(const shs_layout_t *lo, int nranks, size_t align, const float *a, const float *b) {
    drift_t d = {0, 0};
    size_t base = 0;
    for (int u = 0; u < lo->num_units; u++) {
        size_t numel = lo->units[u].numel;
        for (size_t i = 0; i < numel; i++) {
            double x = a[base + i], y = b[base + i], ad = fabs(x - y), m = fmax(fabs(x), fabs(y));
            if (isnan(ad)) ad = INFINITY;
            double rel = ad == 0 ? 0 : m > 0 && isfinite(m) ? ad / m : INFINITY;
            if (ad > d.max_abs) d.max_abs = ad;
            if (rel > d.max_rel) d.max_rel = rel;
        }
        base += shs_padded_numel(numel, nranks, align ? align : 1);
    }
    return d;
}

static void report_error(const char *what) {
    sim_error("train", "%s%s%s", what ? what : "", what ? ": " : "", shs_last_error());
}

/* Total bytes of the regular files in dir (a saved checkpoint), and how many. */
static double dir_bytes(const char *dir, int *files) {
    double total = 0;
    *files = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    char path[4352];
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            total += (double)st.st_size;
            (*files)++;
        }
    }
    closedir(d);
    return total;
}

/* Save a checkpoint of t into dir and say so: "saved checkpoint DIR (step S,
 * SIZE in N files)". what names the option in an error. 0, or -1 reported. */
static int save_checkpoint(shs_trainer_t *t, const char *dir, const char *what, sim_progress_t *pg) {
    long step = shs_trainer_steps_done(t);
    sim_progress_begin(pg, "saving checkpoint %s (step %ld)", dir, step);
    shs_status_t st = shs_checkpoint_save(t, dir);
    sim_progress_end(pg);
    if (st != SHS_OK) {
        report_error(what);
        return -1;
    }
    int files;
    char b[32];
    double bytes = dir_bytes(dir, &files);
    printf("saved checkpoint %s (step %ld, %s in %d files)\n", dir, step, shs_format_bytes(b, sizeof b, bytes), files);
    fflush(stdout);
    return 0;
}

/* --backend mpi: the communicators of this process's rank (comm_mpi.h). */
typedef struct {
    shs_comm_t *world;     /* the trained run */
    shs_comm_t *ref;       /* --check ddp: the DDP run's own world */
    shs_comm_t *check;     /* --check ddp: merging snapshots and verdicts across processes */
    int rank;
} mpi_job_t;

/* Join the MPI job: the world size is the job's, rank 0 alone writes stdout.
 * Returns -1 to go on, else an exit code (usage errors: 2, as on threads). */
static int mpi_start(train_opts_t *o, mpi_job_t *m) {
    if (shs_mpi_init(NULL, NULL) != SHS_OK) {
        report_error("--backend mpi");
        return SIM_EXIT_ERROR;
    }
    int size = shs_mpi_world_size();
    m->rank = shs_mpi_world_rank();
    if (o->world_given && o->cfg.world_size != size) {
        char a[16], b[16];
        snprintf(a, sizeof a, "%d", o->cfg.world_size);
        snprintf(b, sizeof b, "%d", size);
        char msg[160];
        snprintf(msg, sizeof msg, "--world %s differs from the MPI job's %s processes (start as many: mpirun -np %s ...; "
                 "or leave --world out)", a, b, a);
        return usage_error("%s%s", msg, "");
    }
    o->cfg.world_size = size;
    int rc = check_shard_group(&o->cfg);
    if (rc >= 0) return rc;
    if (m->rank != 0 && !freopen("/dev/null", "w", stdout)) {
        sim_error("train", "rank %d: cannot silence stdout: %s", m->rank, strerror(errno));
        return SIM_EXIT_ERROR;
    }
    if (shs_comm_mpi_create(&m->world, o->cfg.timeout_ms, "world") != SHS_OK ||
        (o->check_ddp && (shs_comm_mpi_create(&m->ref, o->cfg.timeout_ms, "world") != SHS_OK ||
                          shs_comm_mpi_create(&m->check, o->cfg.timeout_ms, "check") != SHS_OK))) {
        report_error("--backend mpi");
        return SIM_EXIT_ERROR;
    }
    o->cfg.comm = m->world;
    return -1;
}

/* Every process has its own rank's replica verdict; all agree on the lowest
 * rank whose replica differs and where (MIN over ranks, then a broadcast). */
static shs_status_t mpi_agree_replicas(shs_comm_t *check, int *ok, shs_replica_diff_t *rd) {
    int64_t bad = *ok ? INT64_MAX : (int64_t)rd->rank;
    SHS_CHECK(shs_all_reduce(&bad, &bad, 1, SHS_I64, SHS_MIN, check));
    if (bad == INT64_MAX) {
        *ok = 1;
        return SHS_OK;
    }
    int64_t where[2] = {rd->unit, (int64_t)rd->index};
    SHS_CHECK(shs_broadcast(where, where, 2, SHS_I64, (int)bad, check));
    *ok = 0;
    *rd = (shs_replica_diff_t){.rank = (int)bad, .unit = (int)where[0], .index = (size_t)where[1]};
    return SHS_OK;
}

int sim_cmd_train(int argc, char **argv) {
    train_opts_t o = {0};
    int rc = parse_train_args(argc, argv, &o);
    if (rc >= 0) return rc;
    shs_train_config_t *cfg = &o.cfg;
    mpi_job_t mpi = {0};
    if (o.backend_mpi && (rc = mpi_start(&o, &mpi)) >= 0) shs_mpi_abort(rc);
    if (cfg->backend != SHS_WORLD_CPU) { /* --backend cuda: fail early and clearly without a GPU */
        int gpus;
        if (shs_cuda_device_count(&gpus) != SHS_OK) {
            report_error(cfg->backend == SHS_WORLD_CUDA ? "--backend cuda"
                         : o.backend_mpi                ? "--backend mpi-nccl"
                                                        : "--backend cuda-nccl");
            if (o.backend_mpi) shs_mpi_abort(SIM_EXIT_ERROR); /* every process, none left waiting */
            return SIM_EXIT_ERROR;
        }
    }

    if (!o.device_mem_given && cfg->backend == SHS_WORLD_CPU) { /* CUDA: the GPU's own limit */
        /* Simulated devices live in host RAM: share 3/4 of it among all ranks
         * (of both runs under --check), so an oversized model or world fails
         * with a clean out-of-memory error naming the rank. */
        double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        if (ram > 0) cfg->device_mem = (size_t)(ram * 0.75 / cfg->world_size / (o.check_ddp ? 2 : 1));
    }

    shs_model_file_t *nd = NULL;  /* outlives the trainers */
    if (o.model_file) {
        if (shs_model_file_load(&nd, o.model_file) != SHS_OK) {
            report_error(NULL);
            return SIM_EXIT_ERROR;
        }
        cfg->model_file = nd;
    }

    shs_corpus_t corpus;
    if (o.data_path) {
        if (shs_corpus_load(&corpus, o.data_path) != SHS_OK) {
            report_error(NULL);
            shs_model_file_free(nd);
            return SIM_EXIT_ERROR;
        }
    } else {
        shs_corpus_builtin(&corpus);
    }

    shs_trainer_t *main_run = NULL, *ref_run = NULL;
    /* not exact by design, so --check ddp reports the drift instead of failing:
     * ring reduce order, and hybrid sharding with 1 < G < N (a sum of group
     * sums is not DDP's rank-order sum; strategy.h) */
    int G = cfg->shard_group_size ? cfg->shard_group_size : cfg->world_size;
    int hybrid_inexact = (cfg->strategy == SHS_HYBRID_SHARD || cfg->strategy == SHS_HYBRID_SHARD_ZERO2) && G > 1 &&
                         G < cfg->world_size;
    int drift_mode = o.check_ddp && (cfg->reduce_order == SHS_REDUCE_ORDER_RING || hybrid_inexact);
    const char *drift_why = cfg->reduce_order == SHS_REDUCE_ORDER_RING ? "reduce order ring" /* NCCL's ring order */
                                                                        : "hybrid sharding (a sum of group sums)";
    double worst_loss_drift = 0;
    drift_t worst = {0, 0};
    float *snap_a = NULL, *snap_b = NULL;
    shs_trace_recorder_t *trace_rec = NULL;
    int exit_code = SIM_EXIT_ERROR;
    char b1[32], b2[32];

    sim_progress_t *pg = sim_progress_start("train", o.progress_s);
    if (o.trace_dir && sim_trace_start(cfg, &trace_rec) != SHS_OK) {
        report_error("--trace");
        goto done;
    }
    sim_progress_begin(pg, "setting up %d rank%s (devices, model, strategy state)", cfg->world_size,
                       cfg->world_size == 1 ? "" : "s");
    shs_status_t create_st = shs_trainer_create(&main_run, cfg, &corpus);
    sim_progress_end(pg);
    if (create_st != SHS_OK) {
        report_error(NULL);
        if (!o.device_mem_given && strstr(shs_last_error(), "out of device memory"))
            sim_note("train", "the %d simulated devices share this machine's RAM (%s each); "
                            "use a smaller --world or model, or set --device-mem\n",
                    cfg->world_size * (o.check_ddp ? 2 : 1), shs_format_bytes(b1, sizeof b1, (double)cfg->device_mem));
        goto done;
    }
    const shs_layout_t *lo = shs_trainer_layout(main_run);
    char model_desc[320];
    if (nd)
        snprintf(model_desc, sizeof model_desc, "model %s T=%d, %zu params", o.model_file, cfg->model.context,
                 lo->num_params);
    else
        snprintf(model_desc, sizeof model_desc, "model L=%d C=%d NH=%d T=%d, %.3fM params", cfg->model.num_layers,
                 cfg->model.channels, cfg->model.num_heads, cfg->model.context, (double)lo->num_params / 1e6);
    printf("shardsim train: %d ranks (%s%s), strategy %s, %s in %d units\n", cfg->world_size,
           cfg->backend == SHS_WORLD_CUDA ? "cuda, one GPU" : cfg->backend == SHS_WORLD_CUDA_NCCL ? "cuda, nccl" : "cpu",
           o.backend_mpi ? ", mpi: one process per rank" : "",
           shs_strategy_name(cfg->strategy), model_desc, lo->num_units);
    char optim_desc[128];
    if (cfg->optim.kind == SHS_OPTIM_ADAMW)
        snprintf(optim_desc, sizeof optim_desc, "adamw lr %g betas (%g, %g) eps %g wd %g", (double)cfg->optim.lr,
                 (double)cfg->optim.beta1, (double)cfg->optim.beta2, (double)cfg->optim.eps,
                 (double)cfg->optim.weight_decay);
    else
        snprintf(optim_desc, sizeof optim_desc, "sgd lr %g momentum %g wd %g", (double)cfg->optim.lr,
                 (double)cfg->optim.momentum, (double)cfg->optim.weight_decay);
    printf("  data %s (%s), micro-batch %d x %d tokens per rank, %s, seed %llu, device memory %s per rank\n",
           corpus.source, shs_format_bytes(b1, sizeof b1, (double)corpus.len), cfg->micro_batch, cfg->model.context,
           optim_desc, (unsigned long long)cfg->seed,
           cfg->device_mem == SIZE_MAX ? "unlimited" : shs_format_bytes(b2, sizeof b2, (double)cfg->device_mem));
    if (o.resume_dir) {
        sim_progress_begin(pg, "loading checkpoint %s", o.resume_dir);
        shs_status_t st = shs_checkpoint_resume(main_run, o.resume_dir);
        sim_progress_end(pg);
        if (st != SHS_OK) {
            report_error("--resume");
            goto done;
        }
        printf("  resumed from %s after step %ld: steps %ld..%ld\n", o.resume_dir, shs_trainer_steps_done(main_run),
               shs_trainer_steps_done(main_run) + 1, shs_trainer_steps_done(main_run) + o.steps);
    }
    /* steps are numbered from the checkpoint's: step first+1 .. last */
    const long first = shs_trainer_steps_done(main_run), last = first + o.steps;
    if (o.inject_bitflip && (o.inject_bitflip <= first || o.inject_bitflip > last)) {
        char a[24], b[48];
        snprintf(a, sizeof a, "%ld", o.inject_bitflip);
        snprintf(b, sizeof b, "%ld..%ld", first + 1, last);
        exit_code = usage_error("--inject-bitflip %s is not a step of this run (%s)", a, b);
        goto done;
    }
    if (o.check_ddp) {
        shs_train_config_t rc_cfg = *cfg;
        rc_cfg.strategy = SHS_DDP;
        rc_cfg.offload = SHS_OFFLOAD_NONE; /* offloading must not change a bit: compare with plain DDP */
        rc_cfg.checkpoint_activations = 0; /* the reference keeps every activation */
        rc_cfg.comm = mpi.ref;
        rc_cfg.trace = NULL; /* --trace records the run under test */
        sim_progress_begin(pg, "setting up the reference DDP run (%d ranks)", cfg->world_size);
        shs_status_t st = shs_trainer_create(&ref_run, &rc_cfg, &corpus);
        if (st == SHS_OK && o.resume_dir) st = shs_checkpoint_resume(ref_run, o.resume_dir);
        sim_progress_end(pg);
        if (st != SHS_OK) {
            report_error("reference DDP run");
            goto done;
        }
        size_t len = shs_trainer_snapshot_len(main_run);
        snap_a = malloc(len * sizeof(float));
        snap_b = malloc(len * sizeof(float));
        if (!snap_a || !snap_b) {
            sim_error("train", "out of host memory for --check snapshots");
            goto done;
        }
        if (drift_mode)
            printf("  check: DDP on the same data%s; %s is not bit-exact by design: drift of the loss and of all "
                   "%zu parameters from DDP each step (replicas still compared bit for bit)\n",
                   cfg->reduce_order == SHS_REDUCE_ORDER_RING ? ", both in ring reduce order" : "", drift_why,
                   (size_t)lo->num_params);
        else
            printf("  check: DDP on the same data, loss and all %zu parameters compared bit for bit each step\n",
                   (size_t)lo->num_params);
    }
    fflush(stdout);

    int first_rank, local_count; /* this process's ranks: 0.. on threads, its own under MPI */
    shs_trainer_local_ranks(main_run, &first_rank, &local_count);
    if (o.debug_mismatch_rank >= 0) {
        /* hidden test hook: one rank issues a different count, every rank must fail with SHS_MISMATCH */
        float probe[2] = {0, 0};
        size_t count = mpi.rank == o.debug_mismatch_rank ? 2 : 1;
        if (shs_all_reduce(probe, probe, count, SHS_F32, SHS_SUM, mpi.world) != SHS_OK) {
            report_error("--debug-mismatch-rank");
            goto done;
        }
    }
    float loss = NAN;
    double total_time = 0;
    long tokens_per_step = (long)cfg->world_size * cfg->micro_batch * cfg->model.context *
                           (cfg->grad_accum > 1 ? cfg->grad_accum : 1);
    double run_start = shs_now_seconds();
    const int step_width = (int)snprintf(NULL, 0, "%ld", last);
    for (long step = 0; step < o.steps; step++) {
        const long gstep = first + step + 1; /* the step's number, counted from the first run */
        if (step == 0 && mpi.rank == o.debug_stall_rank) {
            /* hidden test hook: never arrive in time; the others time out and MPI_Abort ends this one */
            double timeout_s = (cfg->timeout_ms > 0 ? cfg->timeout_ms : SHS_COMM_DEFAULT_TIMEOUT_MS) / 1000.0;
            struct timespec ts = {(time_t)(3 * timeout_s) + 10, 0};
            while (nanosleep(&ts, &ts) != 0) {}
        }
        double t0 = shs_now_seconds();
        sim_progress_begin(pg, "running step %ld/%ld on %d rank%s", gstep, last, local_count,
                           cfg->backend == SHS_WORLD_CPU ? " threads" : "s");
        shs_status_t step_st = shs_trainer_step(main_run, &loss);
        sim_progress_end(pg);
        if (step_st != SHS_OK) {
            char what[64];
            snprintf(what, sizeof what, "step %ld", gstep);
            report_error(what);
            goto done;
        }
        double dt = shs_now_seconds() - t0;
        total_time += dt;
        if (!isfinite(loss)) {
            sim_error("train", "step %ld: the loss is %g: training diverged (try a lower --lr)", gstep, (double)loss);
            goto done;
        }
        printf("step %*ld/%ld | loss %.6f | %8.1f ms | %7.0f tok/s", step_width, gstep, last, (double)loss, dt * 1e3,
               (double)tokens_per_step / dt);
        if (o.loss_bits) {
            uint32_t bits;
            memcpy(&bits, &loss, sizeof bits);
            printf(" | loss bits 0x%08" PRIx32, bits);
        }
        if (cfg->param_dtype == SHS_F16) {
            shs_strategy_t *s0 = shs_trainer_strategy(main_run, first_rank);
            printf(" | scale %g%s", (double)shs_strategy_loss_scale(s0).scale,
                   shs_strategy_step_skipped(s0) ? " (overflow: step skipped)" : "");
        }
        if (cfg->clip_norm > 0 && !shs_strategy_step_skipped(shs_trainer_strategy(main_run, first_rank)))
            printf(" | grad norm %.6g", (double)shs_trainer_last_grad_norm(main_run));
        if (o.inject_bitflip == gstep) {
            if (shs_trainer_flip_param_bit(main_run, 0, 0) != SHS_OK) { /* wte[0][0] */
                printf("\n");
                report_error("bit flip");
                goto done;
            }
        }
        if (ref_run) {
            float ref_loss;
            shs_param_diff_t diff;
            sim_progress_begin(pg, "running step %ld/%ld of the reference DDP run", gstep, last);
            shs_status_t ref_st = shs_trainer_step(ref_run, &ref_loss);
            sim_progress_end(pg);
            if (ref_st != SHS_OK) {
                printf("\n");
                report_error("reference DDP run");
                goto done;
            }
            /* under MPI each process fills its ranks' shards; the others hold zero bits, so an integer sum
             * over processes assembles every snapshot exactly */
            size_t snap_len = shs_trainer_snapshot_len(main_run);
            if (shs_trainer_snapshot(main_run, snap_a) != SHS_OK || shs_trainer_snapshot(ref_run, snap_b) != SHS_OK ||
                (mpi.check && (shs_all_reduce(snap_a, snap_a, snap_len, SHS_I32, SHS_SUM, mpi.check) != SHS_OK ||
                               shs_all_reduce(snap_b, snap_b, snap_len, SHS_I32, SHS_SUM, mpi.check) != SHS_OK))) {
                printf("\n");
                report_error("snapshot");
                goto done;
            }
            float norm = shs_trainer_last_grad_norm(main_run), ref_norm = shs_trainer_last_grad_norm(ref_run);
            if (!drift_mode && memcmp(&norm, &ref_norm, sizeof norm) != 0) {
                printf("\n");
                fprintf(stderr, "shardsim train: check failed at step %ld: gradient norm differs: %s %.9g, ddp %.9g\n", gstep,
                        shs_strategy_name(cfg->strategy), (double)norm, (double)ref_norm);
                exit_code = SIM_EXIT_NOT_EQUAL;
                goto done;
            }
            if (!drift_mode && memcmp(&loss, &ref_loss, sizeof loss) != 0) {
                printf(" | ddp check: LOSS DIFFERS\n");
                fprintf(stderr, "shardsim train: check failed at step %ld: loss %.9g (%s) != %.9g (ddp)\n", gstep,
                        (double)loss, shs_strategy_name(cfg->strategy), (double)ref_loss);
                exit_code = SIM_EXIT_NOT_EQUAL;
                goto done;
            }
            if (!drift_mode && !shs_compare_snapshots(lo, cfg->world_size, cfg->shard_align, snap_a, snap_b, &diff)) {
                printf(" | ddp check: PARAMETERS DIFFER\n");
                char where[160];
                if (diff.tensor >= 0) {
                    const shs_tensor_info_t *ti = &lo->tensors[diff.tensor];
                    snprintf(where, sizeof where, "tensor %s, element %zu (row %zu, col %zu)", ti->name, diff.index,
                             diff.index / (size_t)ti->cols, diff.index % (size_t)ti->cols);
                } else {
                    snprintf(where, sizeof where, "padding element %zu (must stay 0)", diff.index);
                }
                fprintf(stderr, "shardsim train: check failed at step %ld: first difference in unit %s, %s: %.9g (%s) != %.9g (ddp)\n",
                        gstep, lo->units[diff.unit].name, where, (double)diff.a, shs_strategy_name(cfg->strategy),
                        (double)diff.b);
                exit_code = SIM_EXIT_NOT_EQUAL;
                goto done;
            }
            const char *which[2] = {shs_strategy_name(cfg->strategy), "ddp"};
            shs_trainer_t *runs[2] = {main_run, ref_run};
            float *snaps[2] = {snap_a, snap_b};
            for (int k = 0; k < 2; k++) {
                shs_replica_diff_t rd;
                int ok = shs_trainer_check_replicas(runs[k], snaps[k], &rd);
                if (ok >= 0 && mpi.check && mpi_agree_replicas(mpi.check, &ok, &rd) != SHS_OK) ok = -1;
                if (ok < 0) {
                    printf("\n");
                    report_error("replica check");
                    goto done;
                }
                if (!ok) {
                    printf(" | ddp check: REPLICAS DIFFER\n");
                    int ti = shs_layout_tensor_at(lo, rd.unit, rd.index);
                    fprintf(stderr,
                            "shardsim train: check failed at step %ld: in the %s run, rank %d's copy of unit %s, tensor %s, "
                            "element %zu differs from the shard owner's\n",
                            gstep, which[k], rd.rank, lo->units[rd.unit].name, lo->tensors[ti].name,
                            rd.index - lo->tensors[ti].offset);
                    exit_code = SIM_EXIT_NOT_EQUAL;
                    goto done;
                }
            }
            if (drift_mode) {
                drift_t d = param_drift(lo, cfg->world_size, cfg->shard_align, snap_a, snap_b);
                double dl = (double)loss - (double)ref_loss;
                printf(" | drift vs ddp: loss %+.3e, params max abs %.3e, max rel %.3e", dl, d.max_abs, d.max_rel);
                worst_loss_drift = fmax(worst_loss_drift, fabs(dl));
                worst.max_abs = fmax(worst.max_abs, d.max_abs);
                worst.max_rel = fmax(worst.max_rel, d.max_rel);
            } else {
                printf(" | ddp check: bit-identical");
            }
        }
        printf(" | eta %.0f s\n", (shs_now_seconds() - run_start) / (double)(step + 1) * (double)(o.steps - step - 1));
        fflush(stdout);
        if (o.save_every && gstep % o.save_every == 0 && step + 1 < o.steps &&
            save_checkpoint(main_run, o.save_dir, "--save-every", pg) != 0)
            goto done;
    }
    if (o.steps > 0)
        printf("mean step time %.1f ms\n", total_time / (double)o.steps * 1e3);
    if (o.save_dir && save_checkpoint(main_run, o.save_dir, "--save", pg) != 0) goto done;
    if (o.export_path) {
        sim_progress_begin(pg, "exporting %s", o.export_path);
        shs_status_t st = shs_export_safetensors(main_run, o.export_path);
        sim_progress_end(pg);
        if (st != SHS_OK) {
            report_error("--export-safetensors");
            goto done;
        }
        printf("exported %s\n", o.export_path);
    }
    if (trace_rec) {
        shs_status_t trace_st = sim_trace_finish(trace_rec, o.trace_dir);
        trace_rec = NULL;
        if (trace_st != SHS_OK) {
            report_error("--trace");
            goto done;
        }
    }
    if (o.timeline_path && (!o.backend_mpi || mpi.rank == 0)) { /* rank 0's timeline: under MPI, rank 0's process */
        shs_meta_rank_result_t r0 = {0};
        r0.segments = (shs_step_segment_t *)shs_trainer_timeline(main_run, &r0.num_segments);
        char title[128];
        snprintf(title, sizeof title, "train: %s, world %d, rank 0, step %ld", shs_strategy_name(cfg->strategy),
                 cfg->world_size, shs_trainer_steps_done(main_run));
        sim_plot_row_t row = {shs_strategy_name(cfg->strategy), &r0,
                              cfg->device_mem == SIZE_MAX ? 0 : cfg->device_mem};
        if (r0.num_segments == 0 || sim_compare_plot(o.timeline_path, title, &row, 1) != 0) {
            sim_error("train", "--memory-timeline: cannot write %s: %s", o.timeline_path,
                    r0.num_segments ? shs_last_error() : "no step was recorded");
            goto done;
        }
        printf("wrote %s (%d phases of rank 0's last step)\n", o.timeline_path, r0.num_segments);
    }
    print_summary(main_run, loss, o.steps);
    if (o.backend_mpi)
        printf("  (MPI: rank 0's own memory and traffic; every process measures its own rank)\n");
    if (ref_run && drift_mode)
        printf("check: %s: %s drifted from DDP by at most %.3e in loss, %.3e (abs) and %.3e (rel) "
               "in parameters over %ld steps\n", drift_why, shs_strategy_name(cfg->strategy), worst_loss_drift, worst.max_abs,
               worst.max_rel, o.steps);
    else if (ref_run)
        printf("check: %s matched DDP bit for bit at all %ld steps\n", shs_strategy_name(cfg->strategy), o.steps);
    exit_code = SIM_EXIT_OK;
done:
    sim_progress_stop(pg);
    exit_code = sim_finish_output("train", exit_code); /* before MPI's abort below: a lost report fails the job */
    /* MPI: after an error other processes may wait in a collective that will
     * never complete; MPI_Abort ends them all (comm_mpi.h) */
    if (o.backend_mpi && exit_code != SIM_EXIT_OK) shs_mpi_abort(exit_code);
    shs_trainer_destroy(ref_run);
    shs_trace_recorder_free(trace_rec);
    shs_trainer_destroy(main_run);
    free(snap_a);
    free(snap_b);
    shs_corpus_free(&corpus);
    shs_model_file_free(nd);
    if (o.backend_mpi) {
        shs_comm_destroy(mpi.check);
        shs_comm_destroy(mpi.ref);
        shs_comm_destroy(mpi.world);
        shs_mpi_finalize();
    }
    return exit_code;
}
