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
 * fp16.auto_cast is ignored: DeepSpeed's engine (_cast_inputs_half) casts
 * only floating-point inputs, and shardsim's inputs are token ids.
 * Refused as not modelled (they change the numbers): the
 * *_master_weights_* / optimizer-state keys enabled, bf16's immediate
 * update and overflow check.
 * What it is not: the other sections (ds_config.c lists them).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "shardsim/strategy.h"
#include "train/ds_config_impl.h"

#ifdef SHS_HAVE_JANSSON

/* ---- fp16 (DeepSpeedFP16Config) ---------------------------------------------- */

static shs_status_t read_fp16_enabled(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                      void *sec) {
    shs__ds_fp16_t *f = sec;
    if (!shs__ds_is_auto(v)) return shs__ds_get_bool(r, kp, v, &f->enabled);
    f->is_auto = 1;
    r->ds->autos |= 1u << SHS_DS_AUTO_FP16;
    return SHS_OK;
}

/* not DeepSpeed's: its FP16 model forbids unknown fields */
static shs_status_t read_consistent(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                    void *sec) {
    return shs_set_error(SHS_UNSUPPORTED, "%s: unknown key %s (DeepSpeed refuses it too); fix: "
                         "fp16.consecutive_hysteresis is DeepSpeed's key", r->path, kp);
}

static const shs__ds_key_t fp16_keys[] = {
    SHS__DS_MAP("enabled", "fp16 weights and activations, fp32 master weights (default false)",
        "param dtype f16 with DeepSpeed's loss scaler", read_fp16_enabled),
    SHS__DS_MAP_AT("loss_scale", "0: dynamic loss scaling; > 0: that static scale (default 0)",
        "static scale, or DeepSpeed's DynamicLossScaler", shs__ds_read_num_at, shs__ds_fp16_t, loss_scale, 0, 1e38),
    SHS__DS_MAP_AT("initial_scale_power", "dynamic: initial scale 2^p (default 16)", "initial scale 2^p",
        shs__ds_read_int_at, shs__ds_fp16_t, power, 0, 126),
    SHS__DS_MAP_AT("loss_scale_window", "dynamic: steps without overflow before the scale doubles (default 1000)",
        "scale window", shs__ds_read_int_at, shs__ds_fp16_t, window, 1, 1e9),
    SHS__DS_MAP_AT("hysteresis", "dynamic: overflows tolerated before the scale halves (default 2)",
        "hysteresis (delayed_shift)", shs__ds_read_int_at, shs__ds_fp16_t, hysteresis, 1, 1e9),
    SHS__DS_MAP_AT("consecutive_hysteresis", "dynamic: refill the hysteresis on every good step (default false)",
        "consecutive hysteresis", shs__ds_read_bool_at, shs__ds_fp16_t, consecutive, 0, 0),
    SHS__DS_MAP_AT("min_loss_scale", "dynamic: the scale's floor; an overflow there stops the run (default 1)",
        "min loss scale", shs__ds_read_num_at, shs__ds_fp16_t, min_scale, 0, 1e38),
    SHS__DS_IGNORE("auto_cast", "casts the engine's floating-point inputs to fp16 (default false; integer inputs "
        "are left as they are)", "shardsim's inputs are token ids (integers): no effect"),
    SHS__DS_REFUSE_IF_TRUE("fp16_master_weights_and_grads", "fp16 master weights and gradients (ZeRO-Offload)",
        "shardsim keeps f32 master weights; fix: set it false or remove it"),
    SHS__DS_MAP("consistent_hysteresis", "not a DeepSpeed key: refused (its model forbids unknown fields)",
        "refused, naming consecutive_hysteresis", read_consistent),
};

static shs_status_t fp16_unknown(shs__ds_reader_t *r, const char *kp, const json_t *v, void *sec) {
    return shs_set_error(SHS_UNSUPPORTED, "%s: unknown key %s; fix: fp16 takes enabled, loss_scale, "
                         "initial_scale_power, loss_scale_window, hysteresis, consecutive_hysteresis, "
                         "min_loss_scale (DeepSpeed's precision_config.py)", r->path, kp);
}

shs_status_t shs__ds_read_fp16(shs__ds_reader_t *r, const json_t *obj, shs__ds_fp16_t *f) {
    f->has = 1;
    return shs__ds_read_keys(r, "fp16", obj, SHS__DS_ROWS(fp16_keys), f, fp16_unknown);
}

/* ---- bf16, old name bfloat16 (DeepSpeedBF16Config) -------------------------------- */

static shs_status_t read_bf16_enabled(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                      void *sec) {
    if (!shs__ds_is_auto(v)) return shs__ds_get_bool(r, kp, v, (int *)sec);
    r->ds->autos |= 1u << SHS_DS_AUTO_BF16;
    return SHS_OK;
}

#define F32_MASTER "shardsim keeps f32 master weights and optimizer state"
static const shs__ds_key_t bf16_keys[] = {
    SHS__DS_MAP("enabled", "bf16 weights and activations, fp32 master weights (default false)", "param dtype bf16",
        read_bf16_enabled),
    SHS__DS_REFUSE_IF_TRUE("immediate_grad_update", "applies gradients as backward produces them",
        "updates during backward"),
    SHS__DS_REFUSE_IF_TRUE("check_grad_overflow", "skips steps with inf/NaN gradients under bf16",
        "bf16 overflow skipping"),
    SHS__DS_REFUSE_IF_TRUE("bf16_master_weights_and_grads", "bf16 master weights and gradients", F32_MASTER),
    SHS__DS_REFUSE_IF_TRUE("bf16_optimizer_states", "bf16 optimizer states", F32_MASTER),
};

shs_status_t shs__ds_read_bf16(shs__ds_reader_t *r, const char *name, const json_t *obj, int *enabled) {
    *enabled = 0;
    return shs__ds_read_keys(r, name, obj, SHS__DS_ROWS(bf16_keys), enabled, NULL);
}

/* ---- data_types ---------------------------------------------------------------------- */

static shs_status_t read_grad_accum_dtype(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp,
                                          const json_t *v, void *sec) {
    if (json_is_null(v)) return SHS_OK;
    SHS_CHECK(shs__ds_dtype(r, kp, v, &r->ds->vals.strategy.grad_accum_dtype));
    shs__ds_set(r->ds, SHS_DS_GRAD_ACCUM_DTYPE, SHS_DS_FROM_CONFIG);
    return SHS_OK;
}

static const shs__ds_key_t data_types_keys[] = {
    SHS__DS_MAP("grad_accum_dtype", "gradients accumulated in fp32, fp16 or bf16 (default: the param dtype)",
        "grad accum dtype", read_grad_accum_dtype),
};

shs_status_t shs__ds_read_data_types(shs__ds_reader_t *r, const json_t *obj) {
    return shs__ds_read_keys(r, "data_types", obj, SHS__DS_ROWS(data_types_keys), NULL, shs__ds_unknown_ignored);
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
