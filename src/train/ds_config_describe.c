/* ds_config_describe.c - the run header's lines about a DeepSpeed config
 * (see ds_config.h, shs_ds_config_describe): each effective setting with its
 * source, the "auto" keys as resolved, the keys without effect and the
 * notes.
 * What it is not: reading or applying the file.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "shardsim/lr_schedule.h"
#include "shardsim/strategy.h"
#include "train/ds_config_impl.h"

static size_t add(char *buf, size_t n, size_t at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(at < n ? buf + at : NULL, at < n ? n - at : 0, fmt, ap);
    va_end(ap);
    return at + (k > 0 ? (size_t)k : 0);
}

size_t shs_ds_config_describe(const shs_ds_config_t *ds, const shs_train_config_t *cfg,
                              const shs_ds_source_t src[SHS_DS_NUM_SETTINGS], const char *prefix, char *buf,
                              size_t n) {
    const shs_strategy_config_t *s = &cfg->strategy;
    size_t at = 0;
    if (n) buf[0] = 0;
    at = add(buf, n, at, "%sDeepSpeed config %s, effective settings (source):\n", prefix, ds->path);
#define SRC(x) shs_ds_source_name(src[SHS_DS_##x])
    at = add(buf, n, at, "%s  strategy %s (%s)", prefix, shs_strategy_name(s->kind), SRC(STAGE));
    if (shs_strategy_is_hybrid(s->kind))
        at = add(buf, n, at, ", shard group %d (%s)", s->shard_group_size, SRC(SHARD_GROUP));
    if (src[SHS_DS_OFFLOAD] == SHS_DS_FROM_PER_ROW) at = add(buf, n, at, "; offload: each row's own\n");
    else
        at = add(buf, n, at, "; offload %s (%s)\n",
                 s->offload == SHS_OFFLOAD_PARAMS ? "params+optimizer" : s->offload == SHS_OFFLOAD_OPTIMIZER ? "optimizer" : "none",
                 SRC(OFFLOAD));
    at = add(buf, n, at, "%s  param dtype %s (%s); reduce dtype %s (%s); grad accum dtype %s (%s)\n", prefix,
             shs_dtype_name(s->param_dtype ? s->param_dtype : SHS_F32), SRC(DTYPE),
             s->reduce_dtype ? shs_dtype_name(s->reduce_dtype) : "param dtype", SRC(REDUCE_DTYPE),
             s->grad_accum_dtype ? shs_dtype_name(s->grad_accum_dtype) : "param dtype", SRC(GRAD_ACCUM_DTYPE));
    if (s->param_dtype == SHS_F16) {
        shs_loss_scaler_config_t sc = s->scaler;
        shs_loss_scaler_fill_defaults(&sc);
        at = add(buf, n, at, "%s  loss scaler %s (%s): initial scale %g (%s)", prefix, shs_scaler_name(sc.kind),
                 SRC(LOSS_SCALER), (double)sc.init_scale, SRC(INIT_SCALE));
        if (sc.kind == SHS_SCALER_DEEPSPEED)
            at = add(buf, n, at, ", scale window %d (%s), hysteresis %d%s (%s), min loss scale %g (%s)",
                     sc.growth_interval, SRC(GROWTH_INTERVAL), sc.hysteresis,
                     sc.consecutive_hysteresis ? " consecutive" : "", SRC(HYSTERESIS), (double)sc.min_scale,
                     SRC(MIN_LOSS_SCALE));
        else if (sc.kind == SHS_SCALER_TORCH)
            at = add(buf, n, at, ", growth every %d good steps (%s)", sc.growth_interval, SRC(GROWTH_INTERVAL));
        at = add(buf, n, at, "\n");
    }
    int ga = cfg->grad_accum > 0 ? cfg->grad_accum : 1;
    at = add(buf, n, at, "%s  micro-batch %d (%s) x accumulation %d (%s) x world %d (%s) = train_batch_size %ld\n",
             prefix, cfg->micro_batch, SRC(MICRO_BATCH), ga, SRC(GRAD_ACCUM), cfg->world_size, SRC(WORLD),
             (long)cfg->micro_batch * ga * cfg->world_size);
    if (s->clip_norm > 0) at = add(buf, n, at, "%s  clipping: global 2-norm to %g (%s)\n", prefix, (double)s->clip_norm, SRC(CLIP));
    else at = add(buf, n, at, "%s  clipping: off (%s)\n", prefix, SRC(CLIP));
    const shs_optim_config_t *o = &s->optim;
    at = add(buf, n, at, "%s  optimizer %s (%s): lr %g (%s)", prefix, shs_optim_name(o->kind), SRC(OPTIMIZER),
             (double)o->lr, SRC(LR));
    if (o->kind == SHS_OPTIM_ADAMW)
        at = add(buf, n, at, ", betas %g (%s) %g (%s), eps %g (%s)", (double)o->beta1, SRC(BETA1), (double)o->beta2,
                 SRC(BETA2), (double)o->eps, SRC(EPS));
    else at = add(buf, n, at, ", momentum %g (%s)", (double)o->momentum, SRC(MOMENTUM));
    at = add(buf, n, at, ", weight decay %g (%s)", (double)o->weight_decay, SRC(WEIGHT_DECAY));
    if (o->kind == SHS_OPTIM_ADAMW && src[SHS_DS_BIAS_CORRECTION] != SHS_DS_FROM_SHARDSIM)
        at = add(buf, n, at, ", bias correction %s (%s)", o->no_bias_correction ? "off" : "on", SRC(BIAS_CORRECTION));
    at = add(buf, n, at, "\n");
    const shs_lr_schedule_t *ls = &s->lr_schedule;
    if (src[SHS_DS_LR_SCHEDULE] != SHS_DS_FROM_SHARDSIM) {
        at = add(buf, n, at, "%s  lr schedule %s (%s)", prefix, shs_lr_schedule_name(ls->kind), SRC(LR_SCHEDULE));
        if (shs_lr_schedule_uses_warmup(ls->kind))
            at = add(buf, n, at, ", warmup steps %ld (%s)", ls->warmup_steps, SRC(WARMUP_STEPS));
        if (shs_lr_schedule_uses_total(ls->kind))
            at = add(buf, n, at, ", total steps %ld (%s)", ls->total_steps, SRC(TOTAL_STEPS));
        at = add(buf, n, at, "\n");
    }
    if (src[SHS_DS_GRAD_AVERAGING] != SHS_DS_FROM_SHARDSIM) {
        if (s->prescale_gradients)
            at = add(buf, n, at, "%s  gradient averaging: prescale_gradients (%s): x 1/%d before the sum\n", prefix,
                     SRC(GRAD_AVERAGING), cfg->world_size);
        else if (s->gradient_predivide_factor != 0 && s->gradient_predivide_factor != 1)
            at = add(buf, n, at, "%s  gradient averaging: gradient_predivide_factor %g (%s): x 1/%g before the sum, "
                     "x %g/%d after\n", prefix, (double)s->gradient_predivide_factor, SRC(GRAD_AVERAGING),
                     (double)s->gradient_predivide_factor, (double)s->gradient_predivide_factor, cfg->world_size);
    }
    if (src[SHS_DS_REPLICATE_BELOW] != SHS_DS_FROM_SHARDSIM || src[SHS_DS_PREFETCH] != SHS_DS_FROM_SHARDSIM)
        at = add(buf, n, at, "%s  replicate units below %zu elements (%s); backward prefetch %s (%s)\n", prefix,
                 cfg->replicate_below, SRC(REPLICATE_BELOW),
                 s->backward_prefetch == SHS_PREFETCH_NONE ? "none" : s->backward_prefetch == SHS_PREFETCH_POST ? "post" : "pre",
                 SRC(PREFETCH));
    if (src[SHS_DS_ZERO_KNOBS] != SHS_DS_FROM_SHARDSIM) {
        const shs_zero_knobs_t *k = &s->zero;
        at = add(buf, n, at, "%s  ZeRO granularity (%s): reduce bucket %zu elements (contiguous gradients %s, overlap comm "
                 "%s), all-gather bucket %zu", prefix, SRC(ZERO_KNOBS), k->reduce_bucket,
                 k->contiguous_gradients ? "yes" : "no", k->overlap_comm ? "yes" : "no", k->allgather_bucket);
        if (shs_strategy_stage(s->kind)->shards_params)
            at = add(buf, n, at, "; stage 3: prefetch bucket %zu, max live %zu%s, max reuse distance %zu", k->prefetch_bucket,
                     k->max_live <= 1 ? 0 : k->max_live, k->max_live <= 1 ? " (nothing prefetched)" : "", k->max_reuse);
        at = add(buf, n, at, "\n");
    }
    /* "auto" keys with what they became */
    for (int a = 0; a < SHS_DS_NUM_AUTOS; a++) {
        if (!shs__ds_has_auto(ds, (shs_ds_auto_t)a)) continue;
        static const char *const keys[] = {
#define SHS_DS_AUTO_KEY(id, key) key,
            SHS_DS_AUTO_MAP(SHS_DS_AUTO_KEY)
#undef SHS_DS_AUTO_KEY
        };
        char v[96];
        const shs_optim_config_t *op = &s->optim;
        long h = cfg->arch == SHS_ARCH_LLAMA ? cfg->llama.hidden : cfg->model.channels;
        int st3 = src[SHS_DS_REPLICATE_BELOW] != SHS_DS_FROM_SHARDSIM;
        switch ((shs_ds_auto_t)a) {
        case SHS_DS_AUTO_MICRO: snprintf(v, sizeof v, "%d (%s)", cfg->micro_batch, SRC(MICRO_BATCH)); break;
        case SHS_DS_AUTO_ACCUM: snprintf(v, sizeof v, "%d (%s)", ga, SRC(GRAD_ACCUM)); break;
        case SHS_DS_AUTO_TRAIN_BATCH:
            snprintf(v, sizeof v, "%ld (micro-batch x accumulation x world)", (long)cfg->micro_batch * ga * cfg->world_size);
            break;
        case SHS_DS_AUTO_CLIP: snprintf(v, sizeof v, "%g (%s)", (double)s->clip_norm, src[SHS_DS_CLIP] == SHS_DS_FROM_AUTO ? "max_grad_norm default" : SRC(CLIP)); break;
        case SHS_DS_AUTO_LR: snprintf(v, sizeof v, "%g (%s)", (double)op->lr, SRC(LR)); break;
        case SHS_DS_AUTO_BETAS: snprintf(v, sizeof v, "[%g, %g] (%s)", (double)op->beta1, (double)op->beta2, SRC(BETA1)); break;
        case SHS_DS_AUTO_EPS: snprintf(v, sizeof v, "%g (%s)", (double)op->eps, SRC(EPS)); break;
        case SHS_DS_AUTO_WEIGHT_DECAY: snprintf(v, sizeof v, "%g (%s)", (double)op->weight_decay, SRC(WEIGHT_DECAY)); break;
        case SHS_DS_AUTO_FP16: snprintf(v, sizeof v, "%s (--param-dtype %s)", s->param_dtype == SHS_F16 ? "true" : "false",
                                        shs_dtype_name(s->param_dtype ? s->param_dtype : SHS_F32)); break;
        case SHS_DS_AUTO_BF16: snprintf(v, sizeof v, "%s (--param-dtype %s)", s->param_dtype == SHS_BF16 ? "true" : "false",
                                        shs_dtype_name(s->param_dtype ? s->param_dtype : SHS_F32)); break;
        case SHS_DS_AUTO_REDUCE_BUCKET: snprintf(v, sizeof v, "%ld (hidden %ld squared)", h * h, h); break;
        case SHS_DS_AUTO_PREFETCH:
            if (st3) snprintf(v, sizeof v, "%ld (0.9 x hidden %ld squared)", (long)(0.9 * (double)h * (double)h), h);
            else snprintf(v, sizeof v, "not filled (stage 3 only)");
            break;
        case SHS_DS_AUTO_PERSISTENCE:
            if (st3) snprintf(v, sizeof v, "%ld (10 x hidden %ld)", 10 * h, h);
            else snprintf(v, sizeof v, "not filled (stage 3 only)");
            break;
        case SHS_DS_AUTO_WARMUP_MIN_LR:
        case SHS_DS_AUTO_WARMUP_MAX_LR:
        case SHS_DS_AUTO_WARMUP_NUM_STEPS:
        case SHS_DS_AUTO_TOTAL_NUM_STEPS:
            if (src[SHS_DS_LR_SCHEDULE] != SHS_DS_FROM_CONFIG) snprintf(v, sizeof v, "not filled (no scheduler applied)");
            else if (a == SHS_DS_AUTO_WARMUP_MIN_LR) snprintf(v, sizeof v, "0 (fill_only)");
            else if (a == SHS_DS_AUTO_WARMUP_MAX_LR)
                snprintf(v, sizeof v, "%g (learning_rate: --lr, else 5e-5)", ls->max_lr);
            else if (a == SHS_DS_AUTO_WARMUP_NUM_STEPS)
                snprintf(v, sizeof v, "%ld (warmup steps: %s)", ls->warmup_steps, SRC(WARMUP_STEPS));
            else snprintf(v, sizeof v, "%ld (total steps: %s)", ls->total_steps, SRC(TOTAL_STEPS));
            break;
        default: v[0] = 0; break;
        }
        at = add(buf, n, at, "%s  auto (HF Trainer rule): %s = %s\n", prefix, keys[a], v);
    }
#undef SRC
    /* the file's settings the effective strategy or dtype does not take */
    const char *by = src[SHS_DS_STAGE] == SHS_DS_FROM_COMMAND_LINE ? "command line" : "config";
    if (src[SHS_DS_REPLICATE_BELOW] != SHS_DS_FROM_SHARDSIM) {
        at = add(buf, n, at, "%s  note: stage3_param_persistence_threshold %zu: applied per wrap unit (DeepSpeed: per "
                 "parameter)\n", prefix, cfg->replicate_below);

    } else if (ds->stage3_keys) {
        at = add(buf, n, at, "%s  note: stage3_* keys: no effect, they apply to stage 3 and the strategy is %s (%s)\n",
                 prefix, shs_strategy_name(s->kind), by);
    }
    if (shs_strategy_is_hybrid(ds->vals.strategy.kind) && src[SHS_DS_SHARD_GROUP] != SHS_DS_FROM_CONFIG)
        at = add(buf, n, at, "%s  note: zero_optimization.mics_shard_size %d: no effect, the strategy is %s (%s)%s\n",
                 prefix, ds->vals.strategy.shard_group_size, shs_strategy_name(s->kind), by,
                 shs_strategy_is_hybrid(s->kind) ? " and --shard-group-size gives the group" : "");
    if (ds->vals.strategy.offload == SHS_OFFLOAD_PARAMS && src[SHS_DS_OFFLOAD] == SHS_DS_FROM_CONFIG &&
        s->offload != SHS_OFFLOAD_PARAMS)
        at = add(buf, n, at, "%s  note: zero_optimization.offload_param: no effect, %s (%s) keeps parameters unsharded; "
                 "offload_optimizer applies\n", prefix, shs_strategy_name(s->kind), by);
    if (ds->src[SHS_DS_LOSS_SCALER] != SHS_DS_FROM_SHARDSIM && src[SHS_DS_LOSS_SCALER] == SHS_DS_FROM_SHARDSIM &&
        !(src[SHS_DS_DTYPE] == SHS_DS_FROM_COMMAND_LINE && s->param_dtype == SHS_F16))
        at = add(buf, n, at, "%s  note: fp16 loss-scaling keys: no effect, the param dtype is %s (%s)\n", prefix,
                 shs_dtype_name(s->param_dtype ? s->param_dtype : SHS_F32), shs_ds_source_name(src[SHS_DS_DTYPE]));
    if (ds->src[SHS_DS_GRAD_AVERAGING] == SHS_DS_FROM_CONFIG && src[SHS_DS_GRAD_AVERAGING] == SHS_DS_FROM_SHARDSIM &&
        ds->use == SHS_DS_FOR_TRAIN && (ds->vals.strategy.prescale_gradients ||
                                        (ds->vals.strategy.gradient_predivide_factor != 0 &&
                                         ds->vals.strategy.gradient_predivide_factor != 1)))
        at = add(buf, n, at, "%s  note: prescale_gradients / gradient_predivide_factor: no effect under %s (%s): "
                 "DeepSpeed's ZeRO-1 divides by the world before its reduce-scatter and reads neither\n", prefix,
                 shs_strategy_name(s->kind), by);
    if (ds->src[SHS_DS_LR_SCHEDULE] == SHS_DS_FROM_CONFIG && src[SHS_DS_LR_SCHEDULE] == SHS_DS_FROM_COMMAND_LINE)
        at = add(buf, n, at, "%s  note: scheduler (type %s): no effect, --lr-schedule %s (command line)\n", prefix,
                 shs_lr_schedule_name(ds->vals.strategy.lr_schedule.kind), shs_lr_schedule_name(ls->kind));
    for (int i = 0; i < ds->num_ignored; i++)
        at = add(buf, n, at, "%s  ignored: %s\n", prefix, ds->ignored[i]);
    for (int i = 0; i < ds->num_notes; i++) at = add(buf, n, at, "%s  note: %s\n", prefix, ds->notes[i]);
    return at;
}
