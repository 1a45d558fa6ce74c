/* ds_config_optimizer.c - DeepSpeed's optimizer section (see ds_config.h),
 * read from runtime/config.py (optimizer names, lower-cased for its own) and
 * runtime/engine.py (_configure_basic_optimizer). The mapping:
 *
 *   optimizer.type Adam | AdamW (any case, as DeepSpeed lower-cases its own
 *       names) -> AdamW: DeepSpeed's Adam runs with adam_w_mode true by default
 *       (decoupled weight decay, i.e. AdamW); adam_w_mode false with type
 *       Adam is Adam with L2 decay, not modelled; "SGD" (torch.optim's name,
 *       which DeepSpeed looks up as is) -> SGD
 *   optimizer.params lr, betas [b1, b2], eps, weight_decay, momentum (SGD).
 *       weight_decay when absent: 0 (FusedAdam's and DeepSpeedCPUAdam's
 *       default), 0.01 with torch_adam (torch.optim.AdamW's); lr when
 *       absent: 1e-3 (the optimizers' default). bias_correction false ->
 *       optim.h no_bias_correction. amsgrad true (another state array),
 *       SGD dampening / nesterov, adam_w_mode false with Adam, max_grad_norm:
 *       refused as not modelled (compare: ignored, all but amsgrad change
 *       only the trained values). An unknown param is refused as DeepSpeed
 *       refuses it (the constructor's TypeError); an unknown key beside type
 *       and params is passed over, as DeepSpeed does.
 * What it is not: the other sections (ds_config.c lists them).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "shardsim/optim.h"
#include "train/ds_config_impl.h"

#ifdef SHS_HAVE_JANSSON

/* The section's state while its keys are read. */
typedef struct {
    shs_optim_config_t *o;
    int adam_w_mode;
    const json_t *wd;        /* optimizer.params.weight_decay as given; NULL: absent */
} opt_t;

/* "auto" on lr, weight_decay, betas or eps: the HF Trainer's
 * TrainingArguments defaults (learning_rate, weight_decay, adam_beta1/2,
 * adam_epsilon). Returns 1 when v was taken as "auto". */
static int take_auto(shs__ds_reader_t *r, const char *key, const json_t *v, opt_t *op) {
    if (!shs__ds_is_auto(v)) return 0;
    shs_ds_config_t *ds = r->ds;
    shs_optim_config_t *o = op->o;
    shs_ds_setting_t st0, st1 = SHS_DS_NUM_SETTINGS;
    if (!strcmp(key, "lr")) {
        o->lr = 5e-5f;
        st0 = SHS_DS_LR;
        ds->autos |= 1u << SHS_DS_AUTO_LR;
    } else if (!strcmp(key, "weight_decay")) {
        o->weight_decay = 0.0f;
        op->wd = v;
        st0 = SHS_DS_WEIGHT_DECAY;
        ds->autos |= 1u << SHS_DS_AUTO_WEIGHT_DECAY;
    } else if (!strcmp(key, "betas")) {
        o->beta1 = 0.9f;
        o->beta2 = 0.999f;
        st0 = SHS_DS_BETA1;
        st1 = SHS_DS_BETA2;
        ds->autos |= 1u << SHS_DS_AUTO_BETAS;
    } else if (!strcmp(key, "eps")) {
        o->eps = 1e-8f;
        st0 = SHS_DS_EPS;
        ds->autos |= 1u << SHS_DS_AUTO_EPS;
    } else {
        return 0; /* no default from the Trainer: the reader's error names the key */
    }
    shs__ds_set(ds, st0, SHS_DS_FROM_AUTO);
    if (st1 != SHS_DS_NUM_SETTINGS) shs__ds_set(ds, st1, SHS_DS_FROM_AUTO);
    return 1;
}

/* lr, eps, momentum: "auto" (lr, eps), or a number in [lo, hi] into the
 * optimizer's float at row->at, from the config. */
static shs_status_t read_hyper(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                               void *sec) {
    opt_t *op = sec;
    double d = 0;
    if (take_auto(r, row->key, v, op)) return SHS_OK;
    SHS_CHECK(shs__ds_get_num(r, kp, v, row->lo, row->hi, &d));
    *(float *)((char *)op->o + row->at) = (float)d;
    shs__ds_set(r->ds, !strcmp(row->key, "lr") ? SHS_DS_LR : !strcmp(row->key, "eps") ? SHS_DS_EPS : SHS_DS_MOMENTUM,
                SHS_DS_FROM_CONFIG);
    return SHS_OK;
}

static shs_status_t read_weight_decay(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                      void *sec) {
    opt_t *op = sec;
    double d = 0;
    if (take_auto(r, row->key, v, op)) return SHS_OK;
    SHS_CHECK(shs__ds_get_num(r, kp, v, 0, 1e6, &d));
    op->wd = v;
    op->o->weight_decay = (float)d;
    return SHS_OK;
}

static shs_status_t read_betas(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                               void *sec) {
    opt_t *op = sec;
    double b1, b2;
    if (take_auto(r, row->key, v, op)) return SHS_OK;
    if (!json_is_array(v) || json_array_size(v) != 2) return shs__ds_bad_type(r, kp, v, "[beta1, beta2]");
    SHS_CHECK(shs__ds_get_num(r, "optimizer.params.betas[0]", json_array_get(v, 0), 0, 0.999999999, &b1));
    SHS_CHECK(shs__ds_get_num(r, "optimizer.params.betas[1]", json_array_get(v, 1), 0, 0.999999999, &b2));
    op->o->beta1 = (float)b1;
    op->o->beta2 = (float)b2;
    shs__ds_set(r->ds, SHS_DS_BETA1, SHS_DS_FROM_CONFIG);
    shs__ds_set(r->ds, SHS_DS_BETA2, SHS_DS_FROM_CONFIG);
    return SHS_OK;
}

static shs_status_t read_bias_correction(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp,
                                         const json_t *v, void *sec) {
    int on = 1;
    SHS_CHECK(shs__ds_get_bool(r, kp, v, &on));
    ((opt_t *)sec)->o->no_bias_correction = !on;
    shs__ds_set(r->ds, SHS_DS_BIAS_CORRECTION, SHS_DS_FROM_CONFIG);
    return SHS_OK;
}

static shs_status_t read_adam_w_mode(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                     void *sec) {
    return shs__ds_get_bool(r, kp, v, &((opt_t *)sec)->adam_w_mode);
}

/* read before the other keys (it decides weight_decay's default) */
static shs_status_t read_nothing(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                 void *sec) {
    return SHS_OK;
}

#define ROW_LR SHS__DS_MAP_AT("lr", "learning rate (default 1e-3)", "lr", read_hyper, shs_optim_config_t, lr, 1e-30, 1e6)
#define ROW_WEIGHT_DECAY                                                                                           \
    SHS__DS_MAP("weight_decay", "decay (default 0; torch_adam AdamW 0.01)", "weight decay", read_weight_decay)
#define ROW_MAX_GRAD_NORM                                                                                          \
    SHS__DS_REFUSE_V("max_grad_norm", "fp32: set to 0 with a warning; fp16: the non-ZeRO fp16 optimizer clips "    \
                     "to it", "the fp16 wrapper's own clipping; use gradient_clipping")

/* Adam / AdamW (FusedAdam, DeepSpeedCPUAdam, torch.optim.AdamW with torch_adam) */
static const shs__ds_key_t adam_keys[] = {
    ROW_LR,
    ROW_WEIGHT_DECAY,
    ROW_MAX_GRAD_NORM,
    SHS__DS_MAP("betas", "[beta1, beta2] (default [0.9, 0.999])", "beta1, beta2", read_betas),
    SHS__DS_MAP_AT("eps", "denominator term (default 1e-8)", "eps", read_hyper, shs_optim_config_t, eps, 1e-30, 1),
    SHS__DS_MAP("adam_w_mode", "type Adam: decoupled decay (AdamW) when true (default true)",
        "true -> AdamW; false (L2 decay) refused", read_adam_w_mode),
    SHS__DS_MAP("torch_adam", "torch.optim.Adam(W) instead of FusedAdam",
        "the same update; weight decay's default 0.01", read_nothing),
    SHS__DS_MAP_V("bias_correction", "false: no bias correction of m and v (default true)",
        "optim.h no_bias_correction", read_bias_correction),
    SHS__DS_REFUSE_IF_TRUE("amsgrad", "AMSGrad's running maximum of v", "AMSGrad"),
};

/* SGD (torch.optim.SGD) */
static const shs__ds_key_t sgd_keys[] = {
    ROW_LR,
    ROW_WEIGHT_DECAY,
    ROW_MAX_GRAD_NORM,
    SHS__DS_MAP_AT("momentum", "momentum (default 0)", "momentum", read_hyper, shs_optim_config_t, momentum, 0, 1),
    SHS__DS_DEFAULT_ONLY_V("dampening", "dampening of the momentum (default 0)", "SGD dampening", 0),
    SHS__DS_REFUSE_IF_TRUE_V("nesterov", "Nesterov momentum", "Nesterov momentum"),
};

/* type and params are read after the walk (params by their optimizer's table) */
static const shs__ds_key_t optimizer_keys[] = {
    SHS__DS_MAP("type", "DeepSpeed's (any case) or torch.optim's name", "Adam, AdamW -> adamw; SGD -> sgd",
        read_nothing),
    SHS__DS_MAP("params", "the optimizer's constructor arguments", "by the optimizer's table", read_nothing),
    SHS__DS_REFUSE_IF_TRUE("legacy_fusion", "the legacy fused fp16 optimizer", "legacy fused fp16 optimizer"),
};

/* DeepSpeed passes the params to the optimizer's constructor as keyword arguments */
static shs_status_t param_unknown(shs__ds_reader_t *r, const char *kp, const json_t *v, void *sec) {
    return shs_set_error(SHS_UNSUPPORTED, "%s: unknown key %s: DeepSpeed refuses it too (the optimizer's constructor "
                         "takes no such argument: a TypeError)", r->path, kp);
}

shs_status_t shs__ds_read_optimizer(shs__ds_reader_t *r, const json_t *obj) {
    shs_ds_config_t *ds = r->ds;
    SHS_CHECK(shs__ds_read_keys(r, "optimizer", obj, SHS__DS_ROWS(optimizer_keys), NULL, shs__ds_unknown_ignored));
    json_t *type = json_object_get(obj, "type"), *params = json_object_get(obj, "params");
    if (!type) return shs_set_error(SHS_PARSE, "%s: optimizer has no \"type\"", r->path);
    const char *t = NULL;
    SHS_CHECK(shs__ds_get_str(r, "optimizer.type", type, &t));
    int adam = !strcasecmp(t, "adam"), adamw = !strcasecmp(t, "adamw"), sgd = !strcmp(t, "SGD");
    if (!adam && !adamw && !sgd) {
        if (!strcasecmp(t, "sgd"))
            SHS__DS_KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: optimizer.type = \"%s\": DeepSpeed looks non-DeepSpeed "
                                         "optimizers up as torch.optim.%s; write \"SGD\"", r->path, t, t));
        SHS__DS_KEY(r, shs__ds_not_modelled(r, "optimizer.type", type, "shardsim has Adam/AdamW (adam_w_mode) and SGD"));
        return SHS_OK; /* its params are another optimizer's */
    }
    opt_t op = {.o = &ds->vals.strategy.optim, .adam_w_mode = 1};
    *op.o = shs_optim_default(sgd ? SHS_OPTIM_SGD : SHS_OPTIM_ADAMW);
    shs__ds_set(ds, SHS_DS_OPTIMIZER, SHS_DS_FROM_CONFIG);
    int torch_adam = 0;
    if (params) {
        SHS_CHECK(shs__ds_want_object(r, "optimizer.params", params));
        json_t *ta = json_object_get(params, "torch_adam");
        if (ta && !sgd) SHS_CHECK(shs__ds_get_bool(r, "optimizer.params.torch_adam", ta, &torch_adam));
        if (sgd) SHS_CHECK(shs__ds_read_keys(r, "optimizer.params", params, SHS__DS_ROWS(sgd_keys), &op, param_unknown));
        else SHS_CHECK(shs__ds_read_keys(r, "optimizer.params", params, SHS__DS_ROWS(adam_keys), &op, param_unknown));
    }
    /* engine.py: effective_adam_w_mode = type is AdamW or adam_w_mode */
    if (adam && !op.adam_w_mode) /* the same state as AdamW: only the trained values differ */
        SHS__DS_KEY(r, shs__ds_values_only(r, "optimizer.params.adam_w_mode",
                                           shs__ds_not_modelled(r, "optimizer.params.adam_w_mode",
                                                                json_object_get(params, "adam_w_mode"),
                                                                "Adam with L2 weight decay added to the gradient "
                                                                "(shardsim's Adam is AdamW, decoupled)")));
    if (op.wd) shs__ds_set(ds, SHS_DS_WEIGHT_DECAY, shs__ds_is_auto(op.wd) ? SHS_DS_FROM_AUTO : SHS_DS_FROM_CONFIG);
    else {
        /* FusedAdam / DeepSpeedCPUAdam default 0; torch.optim.AdamW 0.01; torch.optim.SGD 0 */
        op.o->weight_decay = (!sgd && torch_adam) ? 0.01f : 0.0f;
        shs__ds_set(ds, SHS_DS_WEIGHT_DECAY, SHS_DS_FROM_DS_DEFAULT);
    }
    if (!json_object_get(params ? params : obj, "lr") || !params) shs__ds_set(ds, SHS_DS_LR, SHS_DS_FROM_DS_DEFAULT);
    return SHS_OK;
}

#endif
