/* train_options.c - the options of `shardsim train` (see train_options.h):
 * how they combine, in sections: each applies a few options to the run's
 * config and refuses what conflicts. The rows are in train_option_table.c. */
#include "train_options.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <sys/stat.h>

#include "args.h"
#include "train_option_table.h"
#include "commands.h"
#include "model_choice.h"
#include "options.h"
#include "strategy_names.h"
#include "shardsim/check.h"
#include "shardsim/durable.h"
#include "shardsim/features.h"
#include "shardsim/units.h"

/* A usage error of train (printf format): its line, then exit code 2. */
#define usage(...) sim_usage_error("train", __VA_ARGS__)
/* The name of option id, as its row has it ("--world"). */
#define OPT(id) (sim_train_options[id].name)

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
 * writable parent; an empty path or a link to nothing is refused. NULL
 * when fine. */
static const char *dir_output_problem(const char *path) {
    struct stat sb;
    if (!*path) return "the path is empty";
    /* a dangling link: the writers would mkdir the link's own name and fail
     * at the end of the run */
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode) && stat(path, &sb) != 0)
        return errno == ELOOP ? "is a symbolic link that loops" : "is a symbolic link to nothing (its target does not exist)";
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
    return usage("--shard-group-size %d must divide the world size %d", c->strategy.shard_group_size, c->world_size);
}

/* Each section below applies some options to o and checks them: -1 to go
 * on, else the exit code after a usage error. They run in the order of
 * sim_train_parse_args, which is also the order in which errors are found. */

/* --optimizer, and the options of the other optimizer refused */
static int apply_optimizer(const sim_opts_t *p, train_opts_t *o) {
    shs_optim_config_t *opt = &o->cfg.strategy.optim;
    int rc;
    *opt = shs_optim_default(opt->kind);
    if (p->given[O_OPTIMIZER] && (rc = sim_opt_optimizer("train", p->str[O_OPTIMIZER], opt)) >= 0) return rc;
    const char *opt_name = shs_optim_name(opt->kind);
    static const opt_id_t adamw_only[] = {O_BETA1, O_BETA2, O_EPS}, sgd_only[] = {O_MOMENTUM};
    for (int k = 0; k < 3 && opt->kind != SHS_OPTIM_ADAMW; k++)
        if (p->given[adamw_only[k]]) return usage("%s applies to adamw, not %s", OPT(adamw_only[k]), opt_name);
    if (opt->kind != SHS_OPTIM_SGD && p->given[sgd_only[0]])
        return usage("%s applies to sgd, not %s", OPT(sgd_only[0]), opt_name);
    return -1;
}

/* the numbers (checked by their rows), the loss scaler's kind */
static int apply_numbers(const sim_opts_t *p, train_opts_t *o) {
    shs_train_config_t *c = &o->cfg;
#define SET(id, dst) if (p->given[id]) dst = p->num[id]
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
#undef SET
    if (p->given[O_CLIP_GRAD_NORM] && p->num[O_CLIP_GRAD_NORM] == 0)
        return usage("--clip-grad-norm 0 is ambiguous: torch's clip_grad_norm_(max_norm=0) zeroes every gradient, "
                     "while DeepSpeed's gradient_clipping 0 and the HF Trainer's max_grad_norm 0 turn clipping off; "
                     "shardsim clips as torch does for X > 0: leave the option out for no clipping");
    if (p->given[O_LOSS_SCALER] && shs_scaler_parse(p->str[O_LOSS_SCALER], &c->strategy.scaler.kind))
        return usage("unknown --loss-scaler '%s': use torch, deepspeed or static", p->str[O_LOSS_SCALER]);
    if (!p->given[O_MIN_LOSS_SCALE]) c->strategy.scaler.min_scale = 1.0f; /* DeepSpeed's default (deepspeed kind only) */
    c->strategy.scaler.consecutive_hysteresis = p->given[O_CONSECUTIVE_HYSTERESIS] && p->num[O_CONSECUTIVE_HYSTERESIS];
    return -1;
}

/* the lr schedule's options as the HF Trainer's arguments (num_training_steps:
 * --lr-total-steps, else --steps; get_warmup_steps: --warmup-steps, else
 * ceil(--warmup-ratio x total)), before --ds-config, whose "auto" scheduler
 * keys take them; --lr-schedule's kind */
static int apply_lr_schedule(const sim_opts_t *p, train_opts_t *o) {
    shs_lr_schedule_t *ls = &o->cfg.strategy.lr_schedule;
    ls->total_steps = p->given[O_LR_TOTAL_STEPS] ? (long)p->num[O_LR_TOTAL_STEPS] : o->steps;
    ls->warmup_steps = p->given[O_WARMUP_STEPS] && p->num[O_WARMUP_STEPS] > 0
                           ? (long)p->num[O_WARMUP_STEPS]
                           : (long)ceil((double)ls->total_steps * (p->given[O_WARMUP_RATIO] ? p->num[O_WARMUP_RATIO] : 0));
    if (!p->given[O_LR_SCHEDULE]) return -1;
    if (shs_lr_schedule_parse(p->str[O_LR_SCHEDULE], &ls->kind))
        return usage("unknown --lr-schedule '%s': use constant, constant_with_warmup, linear, cosine, "
                     "cosine_with_min_lr, WarmupLR, WarmupDecayLR or WarmupCosineLR", p->str[O_LR_SCHEDULE]);
    if (ls->kind == SHS_LR_ONE_CYCLE)
        return usage("--lr-schedule OneCycle takes its cycle (cycle_min_lr, cycle_max_lr, step sizes) from a "
                     "--ds-config scheduler section");
    ls->min_lr = p->given[O_MIN_LR] ? p->num[O_MIN_LR] : 0; /* warmup_min_lr's default, or HF min_lr */
    ls->cos_min_ratio = 1e-4; /* WarmupCosineLR's default */
    return -1;
}

/* after --ds-config (whose optimizer may set the lr): the schedule's
 * remaining defaults, its checks, and what it needs with --resume */
static int check_lr_schedule(const sim_opts_t *p, train_opts_t *o) {
    shs_lr_schedule_t *ls = &o->cfg.strategy.lr_schedule;
    int given = p->given[O_LR_SCHEDULE];
    if (given && (ls->kind == SHS_LR_WARMUP_LR || ls->kind == SHS_LR_WARMUP_DECAY_LR))
        ls->max_lr = (double)o->cfg.strategy.optim.lr; /* warmup_max_lr: the optimizer's lr */
    if (given && ls->kind == SHS_LR_COSINE_WITH_MIN_LR && !p->given[O_MIN_LR])
        return usage("--lr-schedule cosine_with_min_lr needs --min-lr X (HF: min_lr or min_lr_rate must be set)");
    if (given && shs_lr_schedule_check(ls) != SHS_OK) return usage("--lr-schedule: %s", shs_last_error());
    if (ls->kind == SHS_LR_CONSTANT) {
        static const opt_id_t sched_only[] = {O_WARMUP_STEPS, O_WARMUP_RATIO, O_LR_TOTAL_STEPS, O_MIN_LR};
        for (int k = 0; k < 4; k++)
            if (p->given[sched_only[k]]) return usage("%s applies to an lr schedule (--lr-schedule, or a --ds-config "
                                                      "scheduler)", OPT(sched_only[k]));
    }
    if (p->given[O_MIN_LR] && ls->kind != SHS_LR_COSINE_WITH_MIN_LR && ls->kind != SHS_LR_WARMUP_LR &&
        ls->kind != SHS_LR_WARMUP_DECAY_LR)
        return usage("--min-lr applies to cosine_with_min_lr, WarmupLR and WarmupDecayLR, not %s",
                     shs_lr_schedule_name(ls->kind));
    int total_from_steps = !p->given[O_LR_TOTAL_STEPS] && (given || (o->ds_path && (o->ds_src[SHS_DS_TOTAL_STEPS] ==
                                                                                     SHS_DS_FROM_AUTO)));
    if (p->given[O_RESUME] && shs_lr_schedule_uses_total(ls->kind) && total_from_steps)
        return usage("--resume with lr schedule %s needs --lr-total-steps N: its length counts the checkpoint's steps "
                     "too, and --steps counts this run's", shs_lr_schedule_name(ls->kind));
    return -1;
}

/* activation checkpointing, recomputation, attention, autocast, dropout, --wrap */
static int apply_activations(const sim_opts_t *p, train_opts_t *o) {
    shs_train_config_t *c = &o->cfg;
    int rc;
    c->checkpoint_activations = p->given[O_CHECKPOINT_ACTIVATIONS] && p->num[O_CHECKPOINT_ACTIVATIONS];
#define STR(id) (p->given[id] ? p->str[id] : NULL)
    const sim_exec_args_t ea = {c->checkpoint_activations, STR(O_RECOMPUTE), STR(O_AC_MODE),
                                STR(O_SELECTIVE_AC_OPTION), STR(O_ATTENTION), STR(O_AUTOCAST),
                                p->given[O_DROPOUT], p->num[O_DROPOUT]};
#undef STR
    if ((rc = sim_opt_exec("train", &ea, c)) >= 0) return rc;
    if (c->recompute == SHS_RECOMPUTE_FULL) c->checkpoint_activations = 0; /* one field says it */
    if (p->given[O_WRAP]) {
        char err[256];
        if (sim_parse_wrap(p->str[O_WRAP], &c->wrap_min_params, err, sizeof err)) return usage("--wrap %s", err);
        if (c->wrap_min_params && (p->given[O_SAVE] || p->given[O_RESUME])) /* checkpoints name units */
            return usage("--wrap %s: checkpoints (--save, --resume) keep one unit per block; use --wrap block",
                         p->str[O_WRAP]);
    }
    return -1;
}

/* --backend (an MPI one only under a launcher, without the options it
 * lacks), --loss-bits, the test suite's planted fault */
static int apply_backend(const sim_opts_t *p, train_opts_t *o) {
    shs_train_config_t *c = &o->cfg;
    o->world_given = p->given[O_WORLD];
    o->loss_bits = p->given[O_LOSS_BITS] && p->num[O_LOSS_BITS];
    const char *backend = p->str[O_BACKEND];
    if (p->given[O_BACKEND]) {
        static const char *const names[] = {"thread", "mpi", "cuda", "cuda-nccl", "mpi-nccl"};
        /* -1: threads, -2: mpi (CPU devices), -3: mpi with one GPU per process over NCCL */
        static const int values[] = {-1, -2, SHS_WORLD_CUDA, SHS_WORLD_CUDA_NCCL, -3};
        int b;
        if (choose(backend, names, values, 5, &b))
            return usage("--backend takes thread, mpi, cuda, cuda-nccl or mpi-nccl (got '%s')", backend);
        if (b == -2 || b == -3) o->backend_mpi = 1;
        if (b == -3) c->backend = SHS_WORLD_CUDA_NCCL;
        else if (b >= 0) c->backend = (shs_world_backend_t)b;
        if (o->backend_mpi && !shs_feature_available(SHS_FEATURE_MPI))
            return usage("--backend %s %s", backend, shs_feature_missing(SHS_FEATURE_MPI));
        if (o->backend_mpi && !getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK")) {
            char np[24] = "N";
            if (p->given[O_WORLD]) snprintf(np, sizeof np, "%ld", (long)p->num[O_WORLD]);
            return usage("--backend %s runs one rank per process under an MPI launcher, and none started this one (no "
                         "OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK in the environment): run mpirun -np %s %s train "
                         "--backend %s ...", backend, np, program_invocation_name, backend);
        }
    }
    if (o->backend_mpi) {
        static const opt_id_t not_mpi[] = {O_SAVE, O_SAVE_EVERY, O_RESUME, O_EXPORT_SAFETENSORS, O_TRACE,
                                           O_INJECT_BITFLIP};
        for (int k = 0; k < 6; k++)
            if (p->given[not_mpi[k]]) return usage("%s is not supported with --backend %s", OPT(not_mpi[k]), backend);
    }
    return sim_test_fault_read("train", o->backend_mpi, &o->fault);
}

/* the strategy and how it gathers, offloads and rounds */
static int apply_strategy(const sim_opts_t *p, train_opts_t *o) {
    shs_train_config_t *c = &o->cfg;
    int rc;
    c->strategy.norm_type = 2;
    c->strategy.keep_after_forward = p->given[O_RESHARD_AFTER_FORWARD] && !p->num[O_RESHARD_AFTER_FORWARD];
    c->strategy.forward_prefetch = p->given[O_FORWARD_PREFETCH] && p->num[O_FORWARD_PREFETCH];
    c->poison_freed = p->given[O_POISON_FREED] && p->num[O_POISON_FREED];
    if (p->given[O_MEMORY_TIMELINE]) {
        o->timeline_path = p->str[O_MEMORY_TIMELINE];
        c->memory_timeline = 1;
    }
    if (p->given[O_OFFLOAD]) {
        static const char *const names[] = {"none", "optimizer", "params"};
        static const int values[] = {SHS_OFFLOAD_NONE, SHS_OFFLOAD_OPTIMIZER, SHS_OFFLOAD_PARAMS};
        int v;
        if (choose(p->str[O_OFFLOAD], names, values, 3, &v))
            return usage("--offload takes none, optimizer or params (got '%s')", p->str[O_OFFLOAD]);
        c->strategy.offload = (shs_offload_t)v;
    }
    if (p->given[O_BACKWARD_PREFETCH]) {
        static const char *const names[] = {"pre", "post", "none"};
        static const int values[] = {SHS_PREFETCH_PRE, SHS_PREFETCH_POST, SHS_PREFETCH_NONE};
        int v;
        if (choose(p->str[O_BACKWARD_PREFETCH], names, values, 3, &v))
            return usage("--backward-prefetch takes pre, post or none (got '%s')", p->str[O_BACKWARD_PREFETCH]);
        c->strategy.backward_prefetch = (shs_prefetch_t)v;
    }
    static const opt_id_t dtype_opts[] = {O_PARAM_DTYPE, O_REDUCE_DTYPE, O_GRAD_ACCUM_DTYPE};
    shs_dtype_t *dtype_dst[] = {&c->strategy.param_dtype, &c->strategy.reduce_dtype, &c->strategy.grad_accum_dtype};
    for (int k = 0; k < 3; k++) {
        if (!p->given[dtype_opts[k]]) continue;
        if ((rc = sim_opt_dtype("train", OPT(dtype_opts[k]), p->str[dtype_opts[k]], dtype_dst[k])) >= 0) return rc;
    }
    if (p->given[O_STRATEGY]) {
        sim_strategy_name_t n;
        if (sim_strategy_lookup(p->str[O_STRATEGY], &n)) return sim_strategy_unknown("train", "--strategy", p->str[O_STRATEGY]);
        int reshard = p->given[O_RESHARD_AFTER_FORWARD] ? (int)p->num[O_RESHARD_AFTER_FORWARD] : -1;
        if ((rc = sim_strategy_apply("train", &n, reshard, &c->strategy)) >= 0) return rc;
        if (n.maps) o->strategy_alias = n.name;
    }
    return -1;
}

/* --hf-config: the model's shape from a config.json */
static int apply_hf_config(const sim_opts_t *p, train_opts_t *o) {
    if (!p->given[O_HF_CONFIG]) return -1;
    static const opt_id_t shape[] = {O_MODEL_FILE, O_LAYERS, O_HEADS, O_CHANNELS};
    for (int k = 0; k < 4; k++)
        if (p->given[shape[k]])
            return usage("--hf-config and %s exclude each other (the file gives the shape)", OPT(shape[k]));
    o->hf_config = p->str[O_HF_CONFIG];
    if (shs_hf_config_load(o->hf_config, &o->hf) != SHS_OK) {
        sim_error("train", "--hf-config: %s", shs_last_error());
        return SIM_EXIT_ERROR;
    }
    int vocab = o->hf.arch == SHS_ARCH_LLAMA ? o->hf.llama.vocab : shs_gpt_vocab(&o->hf.gpt);
    if (vocab < 256) /* train feeds byte tokens 0..255 */
        return usage("--hf-config %s: vocab_size %d is below 256, and train's tokens are bytes", o->hf_config, vocab);
    return sim_model_set_hf("train", o->hf_config, &o->hf, p->given[O_CONTEXT] ? (int)p->num[O_CONTEXT] : 0,
                            shs_train_default_config().model.context, &o->cfg);
}

/* --ds-config: after the model (--hf-config), whose hidden size fills the
 * "auto" bucket keys; the options given beside the config win over its keys */
static int apply_ds_config(const sim_opts_t *p, train_opts_t *o) {
    if (!p->given[O_DS_CONFIG]) return -1;
    shs_train_config_t *c = &o->cfg;
    int rc;
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
        [SHS_DS_MIN_LOSS_SCALE] = O_MIN_LOSS_SCALE, [SHS_DS_BIAS_CORRECTION] = O_NUM_OPTIONS,
        [SHS_DS_LR_SCHEDULE] = O_LR_SCHEDULE, [SHS_DS_WARMUP_STEPS] = O_WARMUP_STEPS,
        [SHS_DS_TOTAL_STEPS] = O_LR_TOTAL_STEPS, [SHS_DS_GRAD_AVERAGING] = O_NUM_OPTIONS};
    if (o->backend_mpi && !p->given[O_WORLD])
        return usage("--ds-config %s with --backend %s needs --world (train_batch_size is checked against it)",
                     p->str[O_DS_CONFIG], p->str[O_BACKEND]);
    int given[SHS_DS_NUM_SETTINGS];
    for (int k = 0; k < SHS_DS_NUM_SETTINGS; k++) given[k] = by_setting[k] < O_NUM_OPTIONS && p->given[by_setting[k]];
    given[SHS_DS_HYSTERESIS] |= p->given[O_CONSECUTIVE_HYSTERESIS];
    given[SHS_DS_WARMUP_STEPS] |= p->given[O_WARMUP_RATIO];
    o->ds_path = p->str[O_DS_CONFIG];
    if ((rc = sim_ds_config_apply("train", o->ds_path, SHS_DS_FOR_TRAIN, given, p->given[O_MODEL_FILE], &o->ds, c,
                                  o->ds_src)) >= 0)
        return rc;
    static const opt_id_t adamw_opts[] = {O_BETA1, O_BETA2, O_EPS};
    for (int k = 0; k < 3 && c->strategy.optim.kind != SHS_OPTIM_ADAMW; k++)
        if (p->given[adamw_opts[k]])
            return usage("%s applies to adamw, not %s (the optimizer of --ds-config)", OPT(adamw_opts[k]),
                         shs_optim_name(c->strategy.optim.kind));
    if (p->given[O_MOMENTUM] && c->strategy.optim.kind != SHS_OPTIM_SGD)
        return usage("--momentum applies to sgd, not %s (the optimizer of --ds-config)",
                     shs_optim_name(c->strategy.optim.kind));
    return -1;
}

/* the gradient dtypes and loss scaling (after --ds-config, which sets them
 * too), the norm, the timeout, DDP's buckets, the device memory */
static int apply_precision(const sim_opts_t *p, train_opts_t *o) {
    shs_train_config_t *c = &o->cfg;
    shs_strategy_config_t *st = &c->strategy;
    shs_dtype_t param = st->param_dtype ? st->param_dtype : SHS_F32;
    if (p->given[O_GRAD_ACCUM_DTYPE] && st->grad_accum_dtype != SHS_F32 && st->grad_accum_dtype != param)
        return usage("--grad-accum-dtype takes f32 or the param dtype %s (got '%s')", shs_dtype_name(param),
                     p->str[O_GRAD_ACCUM_DTYPE]);
    if (p->given[O_GROWTH_FACTOR] && !(st->scaler.growth_factor > 1.0f)) /* GradScaler requires > 1 */
        return usage("--growth-factor must be > 1 (got '%g')", (double)st->scaler.growth_factor);
    if ((p->given[O_HYSTERESIS] || p->given[O_CONSECUTIVE_HYSTERESIS] || p->given[O_MIN_LOSS_SCALE]) &&
        st->scaler.kind != SHS_SCALER_DEEPSPEED)
        return usage("--hysteresis, --consecutive-hysteresis and --min-loss-scale apply to --loss-scaler deepspeed, "
                     "not %s", shs_scaler_name(st->scaler.kind));
    if ((p->given[O_GROWTH_FACTOR] || p->given[O_BACKOFF_FACTOR]) && st->scaler.kind != SHS_SCALER_TORCH)
        return usage("--growth-factor and --backoff-factor apply to --loss-scaler torch (DeepSpeed's factor is 2), "
                     "not %s", shs_scaler_name(st->scaler.kind));
    if ((p->given[O_INIT_SCALE] || p->given[O_GROWTH_INTERVAL] || p->given[O_GROWTH_FACTOR] ||
         p->given[O_BACKOFF_FACTOR] || p->given[O_LOSS_SCALER]) &&
        st->param_dtype != SHS_F16)
        return usage("--init-scale, --growth-interval, --growth-factor, --backoff-factor and --loss-scaler apply to "
                     "--param-dtype f16 (loss scaling)");
    if (p->given[O_NORM_TYPE]) {
        static const char *const names[] = {"1", "2", "inf"};
        static const int values[] = {1, 2, SHS_NORM_INF};
        if (choose(p->str[O_NORM_TYPE], names, values, 3, &st->norm_type))
            return usage("--norm-type takes 1, 2 or inf (got '%s')", p->str[O_NORM_TYPE]);
        if (!p->given[O_CLIP_GRAD_NORM]) return usage("--norm-type needs --clip-grad-norm");
    }
    if (p->given[O_TIMEOUT]) c->timeout_ms = (int)ceil(p->num[O_TIMEOUT] * 1000.0);
    if (p->given[O_BUCKET_MB]) st->bucket_bytes = (size_t)(p->num[O_BUCKET_MB] * 1048576.0);
    if (p->given[O_DEVICE_MEM]) {
        c->device_mem = p->bytes[O_DEVICE_MEM];
        o->device_mem_given = 1;
    }
    return -1;
}

/* --data and how it is cut: --pack, --pad, --doc-sep, --loss-norm */
static int apply_data(const sim_opts_t *p, train_opts_t *o) {
    shs_train_config_t *c = &o->cfg;
    o->data_path = p->str[O_DATA];
    int pack = p->given[O_PACK] && p->num[O_PACK], pad = p->given[O_PAD] && p->num[O_PAD];
    if (pack && pad) return usage("--pack and --pad exclude each other");
    if ((pack || pad) && !p->given[O_DOC_SEP])
        return usage("%s needs --doc-sep BYTE (where documents end)", pack ? "--pack" : "--pad");
    if (p->given[O_DOC_SEP] && !pack && !pad) return usage("--doc-sep %s applies with --pack or --pad", p->str[O_DOC_SEP]);
    if (p->given[O_DOC_SEP] && shs_doc_sep_parse(p->str[O_DOC_SEP], &c->doc_sep))
        return usage("--doc-sep takes a byte: 0-255, 0xHH, one character or a C escape like '\\n' (got '%s')",
                     p->str[O_DOC_SEP]);
    c->data_mode = pack ? SHS_DATA_PACK : pad ? SHS_DATA_PAD : SHS_DATA_STREAM;
    if (p->given[O_LOSS_NORM]) {
        static const char *const names[] = {"per-micro-batch", "global-tokens"};
        static const int values[] = {SHS_LOSS_NORM_PER_MICRO_BATCH, SHS_LOSS_NORM_GLOBAL_TOKENS};
        int v;
        if (choose(p->str[O_LOSS_NORM], names, values, 2, &v))
            return usage("--loss-norm takes per-micro-batch or global-tokens (got '%s')", p->str[O_LOSS_NORM]);
        c->loss_norm = (shs_loss_norm_t)v;
    }
    return -1;
}

/* the outputs, refused before training when they cannot be written */
static int apply_outputs(const sim_opts_t *p, train_opts_t *o) {
    o->model_file = p->str[O_MODEL_FILE];
    o->save_dir = p->str[O_SAVE];
    o->resume_dir = p->str[O_RESUME];
    o->export_path = p->str[O_EXPORT_SAFETENSORS];
    o->trace_dir = p->str[O_TRACE];
    o->metrics_path = p->str[O_METRICS];
    if (p->given[O_SAVE_EVERY]) o->save_every = (long)p->num[O_SAVE_EVERY];
    /* outputs written at the end: refuse an unwritable place before training
     * (files by the writers' own policy, durable.h) */
    const char *dirs[] = {o->save_dir, o->trace_dir}, *dir_opts[] = {"--save", "--trace"};
    for (int k = 0; k < 2; k++) {
        const char *why = dirs[k] ? dir_output_problem(dirs[k]) : NULL;
        if (why) return usage("%s %s: %s", dir_opts[k], dirs[k], why);
    }
    const char *files[] = {o->export_path, o->timeline_path, o->metrics_path},
               *file_opts[] = {"--export-safetensors", "--memory-timeline", "--metrics"};
    shs_out_named_t outs[3];
    size_t nouts = 0;
    for (int k = 0; k < 3; k++) {
        shs_out_target_t to;
        if (!files[k]) continue;
        if (shs_out_resolve(files[k], &to) != SHS_OK) return usage("%s %s", file_opts[k], shs_last_error());
        outs[nouts++] = (shs_out_named_t){file_opts[k], files[k]};
    }
    /* no output may be an input, nor two outputs one file */
    const char *inputs[4];
    size_t nin = 0;
    const char *maybe_in[] = {o->data_path, o->model_file, p->str[O_HF_CONFIG], p->str[O_DS_CONFIG]};
    for (int k = 0; k < 4; k++)
        if (maybe_in[k]) inputs[nin++] = maybe_in[k];
    if (shs_out_check(outs, nouts, inputs, nin) != SHS_OK) return usage("%s", shs_last_error());
    if (o->save_every && !o->save_dir) return usage("--save-every needs --save DIR");
    return -1;
}

/* what applies only to some models, strategies or runs */
static int check_conflicts(const sim_opts_t *p, train_opts_t *o) {
    shs_train_config_t *c = &o->cfg;
    static const opt_id_t gpt_only[] = {O_LAYERS, O_HEADS,   O_CHANNELS, O_CHECKPOINT_ACTIVATIONS, O_RECOMPUTE,
                                        O_AC_MODE, O_SELECTIVE_AC_OPTION, O_ATTENTION, O_AUTOCAST, O_DROPOUT};
    for (size_t k = 0; k < sizeof gpt_only / sizeof gpt_only[0] && o->model_file; k++)
        if (p->given[gpt_only[k]] && (sim_train_options[gpt_only[k]].type != SIM_OPT_BOOL || p->num[gpt_only[k]]))
            return usage("%s does not apply with --model-file", OPT(gpt_only[k]));
    if (c->data_mode == SHS_DATA_PACK && (o->model_file || c->arch != SHS_ARCH_LLAMA))
        return usage("--pack needs per-document attention masks and positions, which only a Llama model has (the %s "
                     "would attend across documents): use --pad, or --hf-config with a Llama",
                     o->model_file ? "network of --model-file" : "GPT");
    if (o->model_file && c->wrap_min_params)
        return usage("--wrap %s: size-based wrapping applies to the GPT and the Llama only, not to --model-file (its "
                     "units are the file's)",
                     p->str[O_WRAP]);
    if (c->strategy.offload == SHS_OFFLOAD_PARAMS && !shs_strategy_stage(c->strategy.kind)->shards_params)
        return usage("--offload params needs sharded parameters (zero3 or hybrid_shard), not %s: use --offload "
                     "optimizer", shs_strategy_name(c->strategy.kind));
    if (p->given[O_REDUCE_ORDER] && shs_reduce_order_parse(p->str[O_REDUCE_ORDER], &c->reduce_order))
        return usage("unknown reduce order '%s': use rank or ring", p->str[O_REDUCE_ORDER]);
    if (p->given[O_CHECK]) {
        if (strcmp(p->str[O_CHECK], "ddp") != 0) return usage("--check takes 'ddp' (got '%s')", p->str[O_CHECK]);
        o->check_ddp = 1;
    }
    int hybrid = c->strategy.kind == SHS_HYBRID_SHARD || c->strategy.kind == SHS_HYBRID_SHARD_ZERO2;
    if (p->given[O_SHARD_GROUP_SIZE] && !hybrid)
        return usage("--shard-group-size applies to hybrid_shard and hybrid_shard_zero2, not %s",
                     shs_strategy_name(c->strategy.kind));
    /* under MPI the world size is the job's, known after mpi_start */
    int sg = o->backend_mpi ? -1 : sim_train_check_shard_group(c);
    if (sg >= 0) return sg;
    if (o->inject_bitflip && shs_check_inexact_reason(c))
        return usage("--inject-bitflip needs an exact --check (not ring order or hybrid with 1 < G < N)");
    /* with --resume the step is the checkpoint's plus this run's: checked once resumed */
    if (o->inject_bitflip && (!o->check_ddp || (!o->resume_dir && o->inject_bitflip > o->steps)))
        return usage("--inject-bitflip needs --check ddp and a step within --steps");
    if (o->timeline_path && o->steps == 0)
        return usage("--memory-timeline %s needs a step to draw (--steps 0 runs none)", o->timeline_path);
    if (!o->model_file && !o->hf_config && c->model.channels % c->model.num_heads != 0)
        return usage("--heads %d must divide --channels %d", c->model.num_heads, c->model.channels);
    if (!o->model_file && (sg = sim_opt_exec_check_model("train", c)) >= 0) return sg;
    return -1;
}

int sim_train_parse_args(int argc, char **argv, train_opts_t *o) {
    const char *defaults[O_NUM_OPTIONS] = {0};
    sim_train_help_defaults(defaults);
    const sim_command_t cmd = {"train", sim_train_usage_head, sim_train_options, O_NUM_OPTIONS, defaults, NULL, NULL};
    sim_opts_t p;
    int rc = sim_opts_parse(&cmd, argc, argv, &p);
    if (rc >= 0) return rc;

    for (int id = 0; id < O_NUM_OPTIONS; id++) /* a path or a keyword: none is empty */
        if (p.given[id] && sim_train_options[id].type == SIM_OPT_STR && !*p.str[id])
            return usage("%s: the value is empty", OPT(id));
    o->cfg = shs_train_default_config();
    o->steps = 50;
    o->progress_s = p.given[O_PROGRESS] ? p.num[O_PROGRESS] : 5.0;
    int (*const sections[])(const sim_opts_t *, train_opts_t *) = {
        apply_optimizer, apply_numbers,   apply_lr_schedule, apply_activations, apply_backend, apply_strategy,
        apply_hf_config, apply_ds_config, check_lr_schedule, apply_precision,   apply_data,    apply_outputs,
        check_conflicts};
    for (size_t k = 0; k < sizeof sections / sizeof sections[0]; k++)
        if ((rc = sections[k](&p, o)) >= 0) return rc;
    return -1;
}
