/* ds_config_apply.c - a read DeepSpeed config applied to a run's
 * configuration (see ds_config.h, shs_ds_config_apply): the command line's
 * precedence, the settings the effective strategy and dtype take, the
 * Hugging Face Trainer's "auto" values, and DeepSpeed's batch-size rule
 * (runtime/config.py, _set_batch_related_parameters and _batch_assertion).
 * What it is not: reading the file (ds_config.c and its sections).
 */
#include <stdio.h>
#include <string.h>

#include "shardsim/lr_schedule.h"
#include "shardsim/strategy.h"
#include "train/ds_config_impl.h"

/* Copy setting s from the file's values into cfg. */
static void copy_setting(shs_ds_setting_t s, const shs_train_config_t *from, shs_train_config_t *cfg) {
    shs_strategy_config_t *d = &cfg->strategy;
    const shs_strategy_config_t *f = &from->strategy;
    switch (s) {
    case SHS_DS_STAGE: d->kind = f->kind; break;
    case SHS_DS_SHARD_GROUP: d->shard_group_size = f->shard_group_size; break;
    case SHS_DS_DTYPE: d->param_dtype = f->param_dtype; break;
    case SHS_DS_REDUCE_DTYPE: d->reduce_dtype = f->reduce_dtype; break;
    case SHS_DS_GRAD_ACCUM_DTYPE: d->grad_accum_dtype = f->grad_accum_dtype; break;
    case SHS_DS_MICRO_BATCH: cfg->micro_batch = from->micro_batch; break;
    case SHS_DS_GRAD_ACCUM: cfg->grad_accum = from->grad_accum; break;
    case SHS_DS_WORLD: break; /* never from the file */
    case SHS_DS_OFFLOAD: d->offload = f->offload; break;
    case SHS_DS_CLIP: d->clip_norm = f->clip_norm; break;
    case SHS_DS_OPTIMIZER: d->optim.kind = f->optim.kind; break;
    case SHS_DS_LR: d->optim.lr = f->optim.lr; break;
    case SHS_DS_BETA1: d->optim.beta1 = f->optim.beta1; break;
    case SHS_DS_BETA2: d->optim.beta2 = f->optim.beta2; break;
    case SHS_DS_EPS: d->optim.eps = f->optim.eps; break;
    case SHS_DS_WEIGHT_DECAY: d->optim.weight_decay = f->optim.weight_decay; break;
    case SHS_DS_MOMENTUM: d->optim.momentum = f->optim.momentum; break;
    case SHS_DS_REPLICATE_BELOW: cfg->replicate_below = from->replicate_below; break;
    case SHS_DS_PREFETCH: d->backward_prefetch = f->backward_prefetch; break;
    case SHS_DS_ZERO_KNOBS: d->zero = f->zero; break;
    case SHS_DS_INIT_SCALE: d->scaler.init_scale = f->scaler.init_scale; break;
    case SHS_DS_GROWTH_INTERVAL: d->scaler.growth_interval = f->scaler.growth_interval; break;
    case SHS_DS_LOSS_SCALER: d->scaler.kind = f->scaler.kind; break;
    case SHS_DS_HYSTERESIS:
        d->scaler.hysteresis = f->scaler.hysteresis;
        d->scaler.consecutive_hysteresis = f->scaler.consecutive_hysteresis;
        break;
    case SHS_DS_MIN_LOSS_SCALE: d->scaler.min_scale = f->scaler.min_scale; break;
    case SHS_DS_BIAS_CORRECTION: d->optim.no_bias_correction = f->optim.no_bias_correction; break;
    case SHS_DS_GRAD_AVERAGING:
        d->prescale_gradients = f->prescale_gradients;
        d->gradient_predivide_factor = f->gradient_predivide_factor;
        break;
    default: break; /* the lr schedule's three: apply_schedule */
    }
}

/* Whether a setting is one of the scaler's (they act only with param dtype f16). */
static int scaler_setting(int s) {
    return s == SHS_DS_INIT_SCALE || s == SHS_DS_GROWTH_INTERVAL || s == SHS_DS_LOSS_SCALER || s == SHS_DS_HYSTERESIS ||
           s == SHS_DS_MIN_LOSS_SCALE;
}

/* Settings that change only the trained values: compare takes none of them. */
static int values_only(int s) {
    return s == SHS_DS_BIAS_CORRECTION || s == SHS_DS_LR_SCHEDULE || s == SHS_DS_WARMUP_STEPS ||
           s == SHS_DS_TOTAL_STEPS || s == SHS_DS_GRAD_AVERAGING;
}

static int schedule_setting(int s) {
    return s == SHS_DS_LR_SCHEDULE || s == SHS_DS_WARMUP_STEPS || s == SHS_DS_TOTAL_STEPS;
}

/* The file's prescale_gradients / gradient_predivide_factor change the averaging. */
static int averaging_on(const shs_strategy_config_t *f) {
    return f->prescale_gradients || (f->gradient_predivide_factor != 0.0f && f->gradient_predivide_factor != 1.0f);
}

/* The file's scheduler onto cfg's lr_schedule, which holds the command
 * line's (--lr-schedule) or the constant one, with the HF Trainer's warmup
 * and total steps (--warmup-steps / --warmup-ratio, --lr-total-steps /
 * --steps): those fill "auto" and win where given. */
static shs_status_t apply_schedule(const shs_ds_config_t *ds, const int given[SHS_DS_NUM_SETTINGS],
                                   shs_train_config_t *cfg, shs_ds_source_t src[SHS_DS_NUM_SETTINGS]) {
#define GIVEN(x) (given && given[SHS_DS_##x])
    shs_lr_schedule_t *run = &cfg->strategy.lr_schedule;
    src[SHS_DS_LR_SCHEDULE] = GIVEN(LR_SCHEDULE) ? SHS_DS_FROM_COMMAND_LINE : SHS_DS_FROM_SHARDSIM;
    src[SHS_DS_WARMUP_STEPS] = GIVEN(WARMUP_STEPS) ? SHS_DS_FROM_COMMAND_LINE : SHS_DS_FROM_SHARDSIM;
    src[SHS_DS_TOTAL_STEPS] = GIVEN(TOTAL_STEPS) ? SHS_DS_FROM_COMMAND_LINE : SHS_DS_FROM_SHARDSIM;
    if (ds->use == SHS_DS_FOR_COMPARE || GIVEN(LR_SCHEDULE) || ds->src[SHS_DS_LR_SCHEDULE] == SHS_DS_FROM_SHARDSIM)
        return SHS_OK;
    shs_lr_schedule_t s = ds->vals.strategy.lr_schedule;
    src[SHS_DS_LR_SCHEDULE] = SHS_DS_FROM_CONFIG;
    if (ds->sched_max_lr_is_lr) s.max_lr = (double)cfg->strategy.optim.lr; /* WarmupLR: the optimizer's lr */
    if (shs__ds_has_auto(ds, SHS_DS_AUTO_WARMUP_MIN_LR)) s.min_lr = 0; /* fill_only(..., 0) */
    if (shs__ds_has_auto(ds, SHS_DS_AUTO_WARMUP_MAX_LR)) /* learning_rate: --lr, else TrainingArguments' 5e-5 */
        s.max_lr = GIVEN(LR) ? (double)cfg->strategy.optim.lr : 5e-5;
    int auto_w = shs__ds_has_auto(ds, SHS_DS_AUTO_WARMUP_NUM_STEPS), auto_t = shs__ds_has_auto(ds, SHS_DS_AUTO_TOTAL_NUM_STEPS);
    if (shs_lr_schedule_uses_warmup(s.kind)) {
        if (GIVEN(WARMUP_STEPS) || auto_w) s.warmup_steps = run->warmup_steps;
        if (!GIVEN(WARMUP_STEPS)) src[SHS_DS_WARMUP_STEPS] = auto_w ? SHS_DS_FROM_AUTO : ds->src[SHS_DS_WARMUP_STEPS];
    }
    if (shs_lr_schedule_uses_total(s.kind)) {
        if (GIVEN(TOTAL_STEPS) || auto_t) s.total_steps = run->total_steps;
        if (!GIVEN(TOTAL_STEPS)) src[SHS_DS_TOTAL_STEPS] = auto_t ? SHS_DS_FROM_AUTO : ds->src[SHS_DS_TOTAL_STEPS];
    }
    if (auto_w && !GIVEN(WARMUP_STEPS) && s.warmup_steps < 1)
        return shs_set_error(SHS_INVALID_ARG, "%s: scheduler.params.warmup_num_steps = \"auto\" is %ld here (the HF "
                             "Trainer's warmup steps: --warmup-steps, else --warmup-ratio x the total): DeepSpeed's %s "
                             "takes a positive integer; give --warmup-steps N or --warmup-ratio R", ds->path,
                             s.warmup_steps, shs_lr_schedule_name(s.kind));
    if (shs_lr_schedule_check(&s) != SHS_OK)
        return shs_set_error(SHS_INVALID_ARG, "%s: scheduler: %s", ds->path, shs_last_error());
    *run = s;
    return SHS_OK;
#undef GIVEN
}

/* DeepSpeed's gradient averaging where the effective stage takes it: stage 0
 * (engine.py allreduce_bucket); ZeRO-1 reduce-scatters after a division by
 * the world and reads neither key (stage_1_and_2.py average_tensor); ZeRO-2
 * and ZeRO-3 assert both away (stage_1_and_2.py, stage3.py __init__). */
static shs_status_t apply_averaging(const shs_ds_config_t *ds, shs_strategy_kind_t kind, const char *by,
                                    shs_train_config_t *cfg, shs_ds_source_t src[SHS_DS_NUM_SETTINGS]) {
    const shs_strategy_config_t *f = &ds->vals.strategy;
    if (ds->src[SHS_DS_GRAD_AVERAGING] != SHS_DS_FROM_CONFIG || !averaging_on(f)) return SHS_OK;
    const shs_stage_t *st = shs_strategy_stage(kind);
    if (st && st->shards_grads) {
        char what[96];
        if (f->prescale_gradients) snprintf(what, sizeof what, "prescale_gradients = true");
        else snprintf(what, sizeof what, "gradient_predivide_factor = %g", (double)f->gradient_predivide_factor);
        return shs_set_error(SHS_INVALID_ARG, "%s: %s under %s (%s): DeepSpeed refuses it too (\"%s is not yet "
                             "supported with ZeRO-%s with reduce scatter enabled\")", ds->path, what,
                             shs_strategy_name(kind), by,
                             f->prescale_gradients ? "pre-scale gradients" : "gradient_predivide_factor != 1.0",
                             st->shards_params ? "3" : "2");
    }
    if (kind != SHS_DDP) { /* ZeRO-1: no effect (describe's note) */
        cfg->strategy.prescale_gradients = 0;
        cfg->strategy.gradient_predivide_factor = 0;
        src[SHS_DS_GRAD_AVERAGING] = SHS_DS_FROM_SHARDSIM;
    }
    return SHS_OK;
}

static int shards_params(shs_strategy_kind_t k) {
    const shs_stage_t *st = shs_strategy_stage(k);
    return st && st->shards_params;
}

shs_status_t shs_ds_config_apply(const shs_ds_config_t *ds, const int given[SHS_DS_NUM_SETTINGS], long hidden,
                                 shs_train_config_t *cfg, shs_ds_source_t src_out[SHS_DS_NUM_SETTINGS]) {
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
#define GIVEN(x) (given && given[SHS_DS_##x])
    /* the effective strategy and dtype decide which of the file's settings apply */
    shs_strategy_kind_t kind = GIVEN(STAGE) ? cfg->strategy.kind : ds->vals.strategy.kind;
    shs_dtype_t dtype = GIVEN(DTYPE) ? cfg->strategy.param_dtype : ds->vals.strategy.param_dtype;
    if (ds->autos & (1u << SHS_DS_AUTO_REDUCE_BUCKET | 1u << SHS_DS_AUTO_PREFETCH | 1u << SHS_DS_AUTO_PERSISTENCE) &&
        hidden <= 0) {
        char keys[200] = "";
        for (int a = SHS_DS_AUTO_REDUCE_BUCKET; a <= SHS_DS_AUTO_PERSISTENCE; a++)
            if (shs__ds_has_auto(ds, (shs_ds_auto_t)a))
                snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", keys[0] ? ", " : "",
                         a == SHS_DS_AUTO_REDUCE_BUCKET ? "zero_optimization.reduce_bucket_size"
                         : a == SHS_DS_AUTO_PREFETCH    ? "zero_optimization.stage3_prefetch_bucket_size"
                                                        : "zero_optimization.stage3_param_persistence_threshold");
        return shs_set_error(SHS_INVALID_ARG, "%s: %s = \"auto\": the Hugging Face Trainer fills it from the model's "
                             "hidden size, which this model (--model-file) does not have; give an integer", ds->path,
                             keys);
    }
    for (int s = 0; s < SHS_DS_NUM_SETTINGS; s++) {
        if (given && given[s]) src[s] = SHS_DS_FROM_COMMAND_LINE;
        else if (ds->src[s] != SHS_DS_FROM_SHARDSIM) {
            /* an optimizer chosen on the command line keeps its own parameters' defaults */
            int other_optim = ((s >= SHS_DS_LR && s <= SHS_DS_MOMENTUM) || s == SHS_DS_BIAS_CORRECTION) &&
                              GIVEN(OPTIMIZER);
            /* settings the effective strategy or dtype does not take */
            int not_taken = ((s == SHS_DS_REPLICATE_BELOW || s == SHS_DS_PREFETCH) && !shards_params(kind)) ||
                            (s == SHS_DS_ZERO_KNOBS && kind == SHS_DDP) ||
                            (s == SHS_DS_SHARD_GROUP && !shs_strategy_is_hybrid(kind)) ||
                            (scaler_setting(s) && dtype != SHS_F16) ||
                            (values_only(s) && ds->use == SHS_DS_FOR_COMPARE) || schedule_setting(s);
            if (other_optim || not_taken) src[s] = SHS_DS_FROM_SHARDSIM;
            else {
                copy_setting((shs_ds_setting_t)s, &ds->vals, cfg);
                src[s] = ds->src[s];
            }
        } else src[s] = SHS_DS_FROM_SHARDSIM;
    }
    const char *by = GIVEN(STAGE) ? "command line" : "config";
    SHS_CHECK(apply_averaging(ds, kind, by, cfg, src));
    SHS_CHECK(apply_schedule(ds, given, cfg, src));
    /* "auto" stage-3 keys from the hidden size (trainer_config_finalize) */
    if (src[SHS_DS_REPLICATE_BELOW] == SHS_DS_FROM_CONFIG && shs__ds_has_auto(ds, SHS_DS_AUTO_PERSISTENCE)) {
        cfg->replicate_below = (size_t)(10 * hidden);
        src[SHS_DS_REPLICATE_BELOW] = SHS_DS_FROM_AUTO;
    }
    if (src[SHS_DS_PREFETCH] == SHS_DS_FROM_CONFIG && shs__ds_has_auto(ds, SHS_DS_AUTO_PREFETCH)) {
        cfg->strategy.backward_prefetch = (long)(0.9 * (double)hidden * (double)hidden) > 0 ? SHS_PREFETCH_PRE
                                                                                             : SHS_PREFETCH_NONE;
        src[SHS_DS_PREFETCH] = SHS_DS_FROM_AUTO;
    }
    /* the ZeRO granularity: "auto" sizes as the HF Trainer fills them; the stage-3 budgets only where
     * parameters are sharded; a prefetch chosen on the command line replaces the file's budget */
    if (src[SHS_DS_ZERO_KNOBS] != SHS_DS_FROM_SHARDSIM) {
        shs_zero_knobs_t *k = &cfg->strategy.zero;
        if (shs__ds_has_auto(ds, SHS_DS_AUTO_REDUCE_BUCKET)) k->reduce_bucket = (size_t)(hidden * hidden);
        if (shs__ds_has_auto(ds, SHS_DS_AUTO_PREFETCH)) k->prefetch_bucket = (size_t)(0.9 * (double)hidden * (double)hidden);
        if (!shards_params(kind) || GIVEN(PREFETCH)) k->prefetch_bucket = k->max_live = k->max_reuse = 0;
    }
    /* the file's offload under a strategy that does not take it */
    if (!GIVEN(OFFLOAD) && ds->vals.strategy.offload != SHS_OFFLOAD_NONE) {
        if (kind == SHS_DDP)
            return shs_set_error(SHS_INVALID_ARG, "%s: zero_optimization.offload_optimizer = cpu needs a ZeRO stage, and "
                                 "the strategy is ddp (--strategy, over the file's %s); give --offload none beside it, "
                                 "or a ZeRO strategy", ds->path, shs_strategy_name(ds->vals.strategy.kind));
        if (ds->vals.strategy.offload == SHS_OFFLOAD_PARAMS && !shards_params(kind))
            cfg->strategy.offload = SHS_OFFLOAD_OPTIMIZER; /* offload_param: no effect (a header shs__ds_note says so) */
    }
    /* a MiCS group must divide the world (DeepSpeed's MiCS_CommGroups asserts it) */
    if (src[SHS_DS_SHARD_GROUP] == SHS_DS_FROM_CONFIG && cfg->world_size % ds->vals.strategy.shard_group_size)
        return shs_set_error(SHS_INVALID_ARG, "%s: zero_optimization.mics_shard_size %d must divide the world %d (%s)",
                             ds->path, ds->vals.strategy.shard_group_size, cfg->world_size,
                             GIVEN(WORLD) ? "command line" : "shardsim default");
    /* "auto" batch keys: the Trainer's arguments, i.e. the command line or shardsim's defaults */
    int auto_tb = shs__ds_has_auto(ds, SHS_DS_AUTO_TRAIN_BATCH);
    int auto_micro = (shs__ds_has_auto(ds, SHS_DS_AUTO_MICRO) || auto_tb) && !ds->has_micro;
    int auto_accum = (shs__ds_has_auto(ds, SHS_DS_AUTO_ACCUM) || auto_tb) && !ds->has_accum;
    if (auto_micro && !GIVEN(MICRO_BATCH)) src[SHS_DS_MICRO_BATCH] = SHS_DS_FROM_AUTO;
    if (auto_accum && !GIVEN(GRAD_ACCUM)) src[SHS_DS_GRAD_ACCUM] = SHS_DS_FROM_AUTO;
    /* the batch rule (runtime/config.py): "given" = in the file, on the command line, or "auto" */
    int has_micro = ds->has_micro || GIVEN(MICRO_BATCH) || auto_micro;
    int has_accum = ds->has_accum || GIVEN(GRAD_ACCUM) || auto_accum;
    long tb = ds->train_batch, W = cfg->world_size;
    long mb = cfg->micro_batch, ga = cfg->grad_accum > 0 ? cfg->grad_accum : 1;
    const char *wsrc = GIVEN(WORLD) ? "command line" : "shardsim default";
    if (tb && has_micro && has_accum) {
        /* all three: only checked */
    } else if (tb && has_micro) {
        if (tb % (mb * W))
            return shs_set_error(SHS_INVALID_ARG, "%s: train_batch_size %ld is not divisible by "
                                 "train_micro_batch_size_per_gpu %ld (%s) x world %ld (%s): DeepSpeed derives "
                                 "gradient_accumulation_steps as their quotient", ds->path, tb, mb,
                                 shs_ds_source_name(src[SHS_DS_MICRO_BATCH]), W, wsrc);
        ga = tb / mb / W;
        src[SHS_DS_GRAD_ACCUM] = SHS_DS_FROM_DERIVED;
    } else if (tb && has_accum) {
        if (tb % (W * ga))
            return shs_set_error(SHS_INVALID_ARG, "%s: train_batch_size %ld is not divisible by world %ld (%s) x "
                                 "gradient_accumulation_steps %ld (%s): DeepSpeed derives the micro-batch as their "
                                 "quotient", ds->path, tb, W, wsrc, ga, shs_ds_source_name(src[SHS_DS_GRAD_ACCUM]));
        mb = tb / W / ga;
        src[SHS_DS_MICRO_BATCH] = SHS_DS_FROM_DERIVED;
    } else if (has_micro && has_accum) {
        tb = mb * ga * W;
    } else if (tb) {
        if (tb % W)
            return shs_set_error(SHS_INVALID_ARG, "%s: train_batch_size %ld is not divisible by world %ld (%s) x "
                                 "accumulation 1 (DeepSpeed's, with neither train_micro_batch_size_per_gpu nor "
                                 "gradient_accumulation_steps given)", ds->path, tb, W, wsrc);
        ga = 1;
        mb = tb / W;
        src[SHS_DS_GRAD_ACCUM] = src[SHS_DS_MICRO_BATCH] = SHS_DS_FROM_DERIVED;
    } else if (has_micro) {
        ga = 1;
        tb = mb * W;
        if (src[SHS_DS_GRAD_ACCUM] == SHS_DS_FROM_SHARDSIM) src[SHS_DS_GRAD_ACCUM] = SHS_DS_FROM_DERIVED;
    } else {
        return shs_set_error(SHS_INVALID_ARG, "%s: neither train_batch_size nor train_micro_batch_size_per_gpu is given "
                             "(nor --micro-batch): DeepSpeed needs one of them", ds->path);
    }
    if (mb < 1 || ga < 1 || tb != mb * ga * W)
        return shs_set_error(SHS_INVALID_ARG, "%s: train_batch_size %ld != train_micro_batch_size_per_gpu %ld (%s) x "
                             "gradient_accumulation_steps %ld (%s) x world %ld (%s): DeepSpeed requires them equal",
                             ds->path, tb, mb, shs_ds_source_name(src[SHS_DS_MICRO_BATCH]), ga,
                             shs_ds_source_name(src[SHS_DS_GRAD_ACCUM]), W, wsrc);
    if (mb > 65536 || ga > 65536)
        return shs_set_error(SHS_INVALID_ARG, "%s: derived micro-batch %ld or accumulation %ld is out of range", ds->path,
                             mb, ga);
    cfg->micro_batch = (int)mb;
    cfg->grad_accum = (int)ga;
    src[SHS_DS_WORLD] = GIVEN(WORLD) ? SHS_DS_FROM_COMMAND_LINE : SHS_DS_FROM_SHARDSIM;
#undef GIVEN
    if (src_out) memcpy(src_out, src, sizeof src);
    return SHS_OK;
}
