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
 *       absent: 1e-3 (the optimizers' default). bias_correction false,
 *       amsgrad true, SGD dampening / nesterov: refused; max_grad_norm
 *       refused as DeepSpeed refuses it (use gradient_clipping).
 * What it is not: the other sections (ds_config.c lists them).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "shardsim/optim.h"
#include "train/ds_config_impl.h"

#ifdef SHS_HAVE_JANSSON

shs_status_t shs__ds_read_optimizer(shs__ds_reader_t *r, const json_t *obj) {
    shs_ds_config_t *ds = r->ds;
    SHS_CHECK(shs__ds_want_object(r, "optimizer", obj));
    json_t *type = json_object_get(obj, "type"), *params = json_object_get(obj, "params");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        if (strcmp(key, "type") && strcmp(key, "params")) {
            char kp[128];
            shs__ds_key_path(kp, sizeof kp, "optimizer", key);
            if (!strcmp(key, "legacy_fusion")) SHS__DS_KEY(r, shs__ds_refuse_true(r, kp, v, "legacy fused fp16 optimizer"));
            else SHS__DS_KEY(r, shs__ds_unknown_key(r, kp));
        }
    }
    if (!type) return shs_set_error(SHS_PARSE, "%s: optimizer has no \"type\"", r->path);
    const char *t = NULL;
    SHS_CHECK(shs__ds_get_str(r, "optimizer.type", type, &t));
    int adam = !strcasecmp(t, "adam"), adamw = !strcasecmp(t, "adamw"), sgd = !strcmp(t, "SGD");
    if (!adam && !adamw && !sgd) {
        if (!strcasecmp(t, "sgd"))
            SHS__DS_KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: optimizer.type = \"%s\": DeepSpeed looks non-DeepSpeed optimizers "
                                 "up as torch.optim.%s; write \"SGD\"", r->path, t, t));
        SHS__DS_KEY(r, shs__ds_not_modelled(r, "optimizer.type", type, "shardsim has Adam/AdamW (adam_w_mode) and SGD"));
    }
    shs_optim_config_t *o = &ds->vals.strategy.optim;
    *o = shs_optim_default(sgd ? SHS_OPTIM_SGD : SHS_OPTIM_ADAMW);
    shs__ds_set(ds, SHS_DS_OPTIMIZER, SHS_DS_FROM_CONFIG);
    int torch_adam = 0, adam_w_mode = 1;
    json_t *wd = NULL;
    if (params) {
        SHS_CHECK(shs__ds_want_object(r, "optimizer.params", params));
        json_t *ta = json_object_get(params, "torch_adam");
        if (ta && !sgd) SHS_CHECK(shs__ds_get_bool(r, "optimizer.params.torch_adam", ta, &torch_adam));
        json_object_foreach(params, key, v) {
            char kp[128];
            double d = 0;
            shs__ds_key_path(kp, sizeof kp, "optimizer.params", key);
            /* the HF Trainer's TrainingArguments defaults (learning_rate, adam_beta1/2, adam_epsilon, weight_decay) */
            if (shs__ds_is_auto(v) && (!strcmp(key, "lr") || !strcmp(key, "weight_decay") ||
                               (!sgd && (!strcmp(key, "betas") || !strcmp(key, "eps"))))) {
                shs_ds_setting_t st0 = SHS_DS_LR, st1 = SHS_DS_NUM_SETTINGS;
                if (!strcmp(key, "lr")) {
                    o->lr = 5e-5f;
                    ds->autos |= 1u << SHS_DS_AUTO_LR;
                } else if (!strcmp(key, "weight_decay")) {
                    o->weight_decay = 0.0f;
                    wd = v;
                    st0 = SHS_DS_WEIGHT_DECAY;
                    ds->autos |= 1u << SHS_DS_AUTO_WEIGHT_DECAY;
                } else if (!strcmp(key, "betas")) {
                    o->beta1 = 0.9f;
                    o->beta2 = 0.999f;
                    st0 = SHS_DS_BETA1;
                    st1 = SHS_DS_BETA2;
                    ds->autos |= 1u << SHS_DS_AUTO_BETAS;
                } else {
                    o->eps = 1e-8f;
                    st0 = SHS_DS_EPS;
                    ds->autos |= 1u << SHS_DS_AUTO_EPS;
                }
                shs__ds_set(ds, st0, SHS_DS_FROM_AUTO);
                if (st1 != SHS_DS_NUM_SETTINGS) shs__ds_set(ds, st1, SHS_DS_FROM_AUTO);
            } else if (!strcmp(key, "lr")) {
                SHS_CHECK(shs__ds_get_num(r, kp, v, 1e-30, 1e6, &d));
                o->lr = (float)d;
                shs__ds_set(ds, SHS_DS_LR, SHS_DS_FROM_CONFIG);
            } else if (!strcmp(key, "weight_decay")) {
                SHS_CHECK(shs__ds_get_num(r, kp, v, 0, 1e6, &d));
                wd = v;
                o->weight_decay = (float)d;
            } else if (!strcmp(key, "max_grad_norm")) {
                SHS__DS_KEY(r, shs__ds_not_modelled(r, kp, v, "DeepSpeed refuses it too: use gradient_clipping"));
            } else if (sgd && !strcmp(key, "momentum")) {
                SHS_CHECK(shs__ds_get_num(r, kp, v, 0, 1, &d));
                o->momentum = (float)d;
                shs__ds_set(ds, SHS_DS_MOMENTUM, SHS_DS_FROM_CONFIG);
            } else if (sgd && !strcmp(key, "dampening")) {
                SHS__DS_KEY(r, shs__ds_only_default(r, kp, v, 0, "SGD dampening"));
            } else if (sgd && !strcmp(key, "nesterov")) {
                SHS__DS_KEY(r, shs__ds_refuse_true(r, kp, v, "Nesterov momentum"));
            } else if (!sgd && !strcmp(key, "betas")) {
                double b1, b2;
                if (!json_is_array(v) || json_array_size(v) != 2) return shs__ds_bad_type(r, kp, v, "[beta1, beta2]");
                SHS_CHECK(shs__ds_get_num(r, "optimizer.params.betas[0]", json_array_get(v, 0), 0, 0.999999999, &b1));
                SHS_CHECK(shs__ds_get_num(r, "optimizer.params.betas[1]", json_array_get(v, 1), 0, 0.999999999, &b2));
                o->beta1 = (float)b1;
                o->beta2 = (float)b2;
                shs__ds_set(ds, SHS_DS_BETA1, SHS_DS_FROM_CONFIG);
                shs__ds_set(ds, SHS_DS_BETA2, SHS_DS_FROM_CONFIG);
            } else if (!sgd && !strcmp(key, "eps")) {
                SHS_CHECK(shs__ds_get_num(r, kp, v, 1e-30, 1, &d));
                o->eps = (float)d;
                shs__ds_set(ds, SHS_DS_EPS, SHS_DS_FROM_CONFIG);
            } else if (!sgd && !strcmp(key, "adam_w_mode")) {
                SHS_CHECK(shs__ds_get_bool(r, kp, v, &adam_w_mode));
            } else if (!sgd && !strcmp(key, "torch_adam")) {
            } else if (!sgd && !strcmp(key, "bias_correction")) {
                int b = 0;
                SHS_CHECK(shs__ds_get_bool(r, kp, v, &b));
                if (!b) SHS__DS_KEY(r, shs__ds_not_modelled(r, kp, v, "Adam without bias correction"));
            } else if (!sgd && !strcmp(key, "amsgrad")) {
                SHS__DS_KEY(r, shs__ds_refuse_true(r, kp, v, "AMSGrad"));
            } else {
                SHS__DS_KEY(r, shs__ds_unknown_key(r, kp));
            }
        }
    }
    /* engine.py: effective_adam_w_mode = type is AdamW or adam_w_mode */
    if (adam && !adam_w_mode)
        SHS__DS_KEY(r, shs__ds_not_modelled(r, "optimizer.params.adam_w_mode", json_object_get(params, "adam_w_mode"),
                            "Adam with L2 weight decay added to the gradient (shardsim's Adam is AdamW, decoupled)"));
    if (wd) shs__ds_set(ds, SHS_DS_WEIGHT_DECAY, shs__ds_is_auto(wd) ? SHS_DS_FROM_AUTO : SHS_DS_FROM_CONFIG);
    else {
        /* FusedAdam / DeepSpeedCPUAdam default 0; torch.optim.AdamW 0.01; torch.optim.SGD 0 */
        o->weight_decay = (!sgd && torch_adam) ? 0.01f : 0.0f;
        shs__ds_set(ds, SHS_DS_WEIGHT_DECAY, SHS_DS_FROM_DS_DEFAULT);
    }
    if (!json_object_get(params ? params : obj, "lr") || !params) shs__ds_set(ds, SHS_DS_LR, SHS_DS_FROM_DS_DEFAULT);
    return SHS_OK;
}

#endif
