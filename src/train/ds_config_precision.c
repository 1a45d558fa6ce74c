/* ds_config_precision.c - DeepSpeed's precision sections (see ds_config.h):
 * fp16, bf16 (old name bfloat16), communication_data_type's dtype names and
 * data_types, read from runtime/precision_config.py (fields and defaults)
 * and runtime/fp16/loss_scaler.py (DynamicLossScaler.update_scale). The
 * mapping:
 *
 *   bf16.enabled (alias bfloat16)             -> param dtype bf16
 *   fp16.enabled                              -> param dtype f16 with DeepSpeed's loss
 *       scaler (strategy.h SHS_SCALER_DEEPSPEED, DynamicLossScaler's rule):
 *       initial_scale_power p -> initial scale 2^p (default 16);
 *       loss_scale_window W (default 1000) -> scale_window W (counted from
 *       the last overflow); hysteresis (default 2) -> delayed_shift;
 *       consecutive_hysteresis (default false); min_loss_scale m (default
 *       1) -> the floor max(scale/2, m), and an overflow at m stops the run
 *       as DeepSpeed's raise_error_at_min_scale (0: no floor, as DeepSpeed
 *       before it required m > 0). loss_scale x > 0 -> a static scale x
 *       (SHS_SCALER_STATIC: overflow steps still skipped, as ZeRO's step()
 *       does); the dynamic keys then have no effect (a header note says so).
 *   data_types.grad_accum_dtype               -> grad accum dtype
 *
 * Refused as not modelled (they change the numbers): fp16.auto_cast and
 * the *_master_weights_* / optimizer-state keys enabled, bf16's immediate
 * update and overflow check.
 * What it is not: the other sections (ds_config.c lists them).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shardsim/strategy.h"
#include "train/ds_config_impl.h"

#ifdef SHS_HAVE_JANSSON

shs_status_t shs__ds_read_fp16(shs__ds_reader_t *r, const json_t *obj, shs__ds_fp16_t *f) {
    SHS_CHECK(shs__ds_want_object(r, "fp16", obj));
    const char *key;
    json_t *v;
    f->has = 1;
    json_object_foreach((json_t *)obj, key, v) {
        char kp[128];
        shs__ds_key_path(kp, sizeof kp, "fp16", key);
        if (!strcmp(key, "enabled")) {
            if (shs__ds_is_auto(v)) {
                f->is_auto = 1;
                r->ds->autos |= 1u << SHS_DS_AUTO_FP16;
            } else SHS_CHECK(shs__ds_get_bool(r, kp, v, &f->enabled));
        } else if (!strcmp(key, "loss_scale")) SHS_CHECK(shs__ds_get_num(r, kp, v, 0, 1e38, &f->loss_scale));
        else if (!strcmp(key, "initial_scale_power")) SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 126, &f->power));
        else if (!strcmp(key, "loss_scale_window")) SHS_CHECK(shs__ds_get_int(r, kp, v, 1, 1e9, &f->window));
        else if (!strcmp(key, "hysteresis")) SHS_CHECK(shs__ds_get_int(r, kp, v, 1, 1e9, &f->hysteresis));
        else if (!strcmp(key, "min_loss_scale")) SHS_CHECK(shs__ds_get_num(r, kp, v, 0, 1e38, &f->min_scale));
        else if (!strcmp(key, "consecutive_hysteresis")) SHS_CHECK(shs__ds_get_bool(r, kp, v, &f->consecutive));
        else if (!strcmp(key, "auto_cast"))
            SHS__DS_KEY(r, shs__ds_refuse_true(r, kp, v, "inputs cast to fp16 by the engine; fix: set it false or remove it (the "
                                         "model then runs in the param dtype f16)"));
        else if (!strcmp(key, "fp16_master_weights_and_grads"))
            SHS__DS_KEY(r, shs__ds_refuse_true(r, kp, v, "shardsim keeps f32 master weights; fix: set it false or remove it"));
        else if (!strcmp(key, "consistent_hysteresis")) /* not DeepSpeed's: its FP16 model forbids unknown fields */
            SHS__DS_KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: unknown key %s (DeepSpeed refuses it too); fix: "
                                 "fp16.consecutive_hysteresis is DeepSpeed's key", r->path, kp));
        else
            SHS__DS_KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: unknown key %s; fix: fp16 takes enabled, loss_scale, "
                                 "initial_scale_power, loss_scale_window, hysteresis, consecutive_hysteresis, "
                                 "min_loss_scale (DeepSpeed's precision_config.py)", r->path, kp));
    }
    return SHS_OK;
}

shs_status_t shs__ds_read_bf16(shs__ds_reader_t *r, const char *name, const json_t *obj, int *enabled) {
    *enabled = 0;
    SHS_CHECK(shs__ds_want_object(r, name, obj));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        char kp[128];
        shs__ds_key_path(kp, sizeof kp, name, key);
        if (!strcmp(key, "enabled")) {
            if (shs__ds_is_auto(v)) r->ds->autos |= 1u << SHS_DS_AUTO_BF16;
            else SHS_CHECK(shs__ds_get_bool(r, kp, v, enabled));
        } else if (!strcmp(key, "immediate_grad_update")) SHS__DS_KEY(r, shs__ds_refuse_true(r, kp, v, "updates during backward"));
        else if (!strcmp(key, "check_grad_overflow")) SHS__DS_KEY(r, shs__ds_refuse_true(r, kp, v, "bf16 overflow skipping"));
        else if (!strcmp(key, "bf16_master_weights_and_grads") || !strcmp(key, "bf16_optimizer_states"))
            SHS__DS_KEY(r, shs__ds_refuse_true(r, kp, v, "shardsim keeps f32 master weights and optimizer state"));
        else SHS__DS_KEY(r, shs__ds_unknown_key(r, kp));
    }
    return SHS_OK;
}

shs_status_t shs__ds_read_data_types(shs__ds_reader_t *r, const json_t *obj) {
    SHS_CHECK(shs__ds_want_object(r, "data_types", obj));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        char kp[128];
        shs__ds_key_path(kp, sizeof kp, "data_types", key);
        if (!strcmp(key, "grad_accum_dtype")) {
            if (json_is_null(v)) continue;
            SHS_CHECK(shs__ds_dtype(r, kp, v, &r->ds->vals.strategy.grad_accum_dtype));
            shs__ds_set(r->ds, SHS_DS_GRAD_ACCUM_DTYPE, SHS_DS_FROM_CONFIG);
        } else {
            SHS__DS_KEY(r, shs__ds_unknown_key(r, kp));
        }
    }
    return SHS_OK;
}

shs_status_t shs__ds_precision_finish(shs__ds_reader_t *r, const json_t *fp16, const shs__ds_fp16_t *f, int bf16) {
    shs_ds_config_t *ds = r->ds;
    /* precision: DeepSpeed trains in fp32 unless fp16 or bf16 is enabled */
    if (f->enabled && bf16)
        return shs_set_error(SHS_INVALID_ARG, "%s: fp16.enabled and bf16.enabled are both true (DeepSpeed refuses "
                             "this too); fix: enable one of them", r->path);
    int dtype_auto = (ds->autos >> SHS_DS_AUTO_FP16 & 1) || (ds->autos >> SHS_DS_AUTO_BF16 & 1);
    ds->vals.strategy.param_dtype = f->enabled ? SHS_F16 : bf16 ? SHS_BF16 : SHS_F32;
    shs__ds_set(ds, SHS_DS_DTYPE, (f->enabled || bf16) ? SHS_DS_FROM_CONFIG : dtype_auto ? SHS_DS_FROM_AUTO : SHS_DS_FROM_DS_DEFAULT);
    if (f->enabled || f->is_auto) { /* "auto": the scaler applies if --param-dtype f16 turns fp16 on */
        shs_loss_scaler_config_t *sc = &ds->vals.strategy.scaler;
#define FP16_SRC(key) (json_object_get(fp16, key) ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT)
        if (f->loss_scale > 0) { /* CreateLossScaler: a static LossScaler */
            sc->kind = SHS_SCALER_STATIC;
            sc->init_scale = (float)f->loss_scale;
            shs__ds_set(ds, SHS_DS_LOSS_SCALER, SHS_DS_FROM_CONFIG);
            shs__ds_set(ds, SHS_DS_INIT_SCALE, SHS_DS_FROM_CONFIG);
            static const char *const dyn[] = {"initial_scale_power", "loss_scale_window", "hysteresis",
                                              "consecutive_hysteresis", "min_loss_scale"};
            for (int k = 0; k < 5; k++)
                if (json_object_get(fp16, dyn[k]))
                    shs__ds_note(ds, "fp16.%s: no effect beside the static fp16.loss_scale %g", dyn[k], f->loss_scale);
        } else {
            sc->kind = SHS_SCALER_DEEPSPEED;
            sc->init_scale = (float)ldexp(1.0, (int)f->power);
            sc->growth_interval = (int)f->window;
            sc->hysteresis = (int)f->hysteresis;
            sc->consecutive_hysteresis = f->consecutive;
            sc->min_scale = (float)f->min_scale;
            shs__ds_set(ds, SHS_DS_LOSS_SCALER, FP16_SRC("loss_scale"));
            shs__ds_set(ds, SHS_DS_INIT_SCALE, FP16_SRC("initial_scale_power"));
            shs__ds_set(ds, SHS_DS_GROWTH_INTERVAL, FP16_SRC("loss_scale_window"));
            shs__ds_set(ds, SHS_DS_HYSTERESIS, json_object_get(fp16, "hysteresis") || json_object_get(fp16, "consecutive_hysteresis")
                                           ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT);
            shs__ds_set(ds, SHS_DS_MIN_LOSS_SCALE, FP16_SRC("min_loss_scale"));
        }
#undef FP16_SRC
    } else if (f->has) {
        const char *k2;
        json_t *v2;
        json_object_foreach((json_t *)fp16, k2, v2)
            if (strcmp(k2, "enabled")) shs__ds_note(ds, "fp16.%s: no effect, fp16.enabled is false", k2);
    }
    return SHS_OK;
}

#endif
