/* loss_scale.c - the fp16 loss-scale rules of strategy.h: defaults, the
 * initial state and the update after each step's overflow check, for torch's
 * GradScaler, DeepSpeed's DynamicLossScaler and a static scale.
 *
 * DeepSpeed's rule as read in deepspeedai/DeepSpeed
 * deepspeed/runtime/fp16/loss_scaler.py (DynamicLossScaler.__init__ and
 * update_scale; scale_factor 2, raise_error_at_min_scale true as
 * CreateLossScaler builds it), with the fp16 keys of
 * deepspeed/runtime/precision_config.py (dynamic_loss_scale_args:
 * init_scale 2^initial_scale_power, scale_window loss_scale_window,
 * delayed_shift hysteresis, consecutive_hysteresis, min_scale
 * min_loss_scale). The static scale: LossScaler never changes its scale;
 * ZeRO's step() (runtime/zero/stage_1_and_2.py) checks the gradients for
 * overflow itself and skips the step whatever the scaler.
 * What it is not: the overflow check (strategy_step.c) or the checkpoint's
 * copy of the state (src/checkpoint/).
 */
#include <string.h>

#include "core/names.h"
#include "shardsim/strategy.h"

static const char *const scaler_names[] = {"torch", "deepspeed", "static"};
#define NUM_SCALERS ((int)(sizeof scaler_names / sizeof scaler_names[0]))

const char *shs_scaler_name(shs_scaler_kind_t k) { return shs__name_of(scaler_names, NUM_SCALERS, (int)k, "invalid"); }

int shs_scaler_parse(const char *name, shs_scaler_kind_t *out) {
    int k = shs__name_find(scaler_names, NUM_SCALERS, name);
    if (k >= 0) *out = (shs_scaler_kind_t)k;
    return k >= 0 ? 0 : -1;
}

void shs_loss_scaler_fill_defaults(shs_loss_scaler_config_t *c) {
    if (c->init_scale <= 0) c->init_scale = 65536.0f;
    if (c->kind == SHS_SCALER_DEEPSPEED) {
        c->growth_factor = 2.0f; /* DynamicLossScaler.scale_factor, both ways */
        c->backoff_factor = 0.5f;
        if (c->growth_interval <= 0) c->growth_interval = 1000;
        if (c->hysteresis <= 0) c->hysteresis = 2;
        if (c->min_scale < 0) c->min_scale = 0;
    } else { /* DeepSpeed's fields mean nothing here: zeros, so that equal rules compare equal */
        if (c->growth_factor <= 0) c->growth_factor = 2.0f;
        if (c->backoff_factor <= 0) c->backoff_factor = 0.5f;
        if (c->growth_interval <= 0) c->growth_interval = 2000;
        c->hysteresis = c->consecutive_hysteresis = 0;
        c->min_scale = 0;
    }
}

shs_loss_scale_state_t shs_loss_scale_initial(const shs_loss_scaler_config_t *c) {
    shs_loss_scale_state_t st;
    memset(&st, 0, sizeof st);
    st.scale = c->init_scale;
    st.last_overflow_iter = -1;
    st.hysteresis = c->kind == SHS_SCALER_DEEPSPEED ? c->hysteresis : 0;
    return st;
}

/* DynamicLossScaler.update_scale. */
static shs_status_t update_deepspeed(const shs_loss_scaler_config_t *c, shs_loss_scale_state_t *st, int overflow) {
    if (overflow) {
        if (c->hysteresis == 1 || st->hysteresis == 1) {
            if (c->min_scale > 0 && st->scale == c->min_scale)
                return shs_set_error(SHS_INVALID_ARG, "loss scale: overflow at iteration %ld with the scale already at "
                                     "its minimum %g: DeepSpeed stops the run here (\"Current loss scale already at "
                                     "minimum\", raise_error_at_min_scale)", st->iter, (double)c->min_scale);
            float next = st->scale / 2.0f;
            st->scale = next > c->min_scale ? next : c->min_scale;
        } else {
            st->hysteresis--;
        }
        st->last_overflow_iter = st->iter;
    } else {
        if (c->consecutive_hysteresis) st->hysteresis = c->hysteresis;
        long stable = st->iter - st->last_overflow_iter - 1;
        if (stable > 0 && stable % c->growth_interval == 0) {
            if (!c->consecutive_hysteresis) st->hysteresis = c->hysteresis;
            st->scale *= 2.0f;
        }
    }
    st->iter++;
    return SHS_OK;
}

shs_status_t shs_loss_scale_update(const shs_loss_scaler_config_t *c, shs_loss_scale_state_t *st, int overflow) {
    if (overflow) {
        st->good_steps = 0;
        st->skipped_steps++;
    }
    switch (c->kind) {
    case SHS_SCALER_DEEPSPEED:
        if (!overflow) st->good_steps++;
        return update_deepspeed(c, st, overflow);
    case SHS_SCALER_STATIC:
        if (!overflow) st->good_steps++;
        return SHS_OK;
    default: /* GradScaler.update() */
        if (overflow) st->scale *= c->backoff_factor;
        else if (++st->good_steps == c->growth_interval) {
            st->scale *= c->growth_factor;
            st->good_steps = 0;
        }
        return SHS_OK;
    }
}
