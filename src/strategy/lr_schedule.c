/* lr_schedule.c - the learning rate of each optimizer step (see
 * lr_schedule.h for the formulas and their sources). Every expression keeps
 * the Python original's order of operations in f64, so the f32 the optimizer
 * takes is the one PyTorch would hand its kernel.
 * What it is not: where the schedule is applied (strategy_step.c).
 */
#include "shardsim/lr_schedule.h"

#include <math.h>
#include <stdio.h>

#include "core/names.h"

static const char *const schedule_names[] = {
#define SHS_LR_SCHEDULE_NAME(id, name) name,
    SHS_LR_SCHEDULE_MAP(SHS_LR_SCHEDULE_NAME)
#undef SHS_LR_SCHEDULE_NAME
};

const char *shs_lr_schedule_name(shs_lr_schedule_kind_t k) {
    return shs__name_of(schedule_names, SHS_LR_NUM_SCHEDULES, (int)k, "invalid");
}

int shs_lr_schedule_parse(const char *name, shs_lr_schedule_kind_t *out) {
    int k = shs__name_find(schedule_names, SHS_LR_NUM_SCHEDULES, name);
    if (k >= 0) *out = (shs_lr_schedule_kind_t)k;
    return k >= 0 ? 0 : -1;
}

int shs_lr_schedule_is_deepspeed(shs_lr_schedule_kind_t k) {
    return k == SHS_LR_WARMUP_LR || k == SHS_LR_WARMUP_DECAY_LR || k == SHS_LR_WARMUP_COSINE_LR ||
           k == SHS_LR_ONE_CYCLE;
}

int shs_lr_schedule_uses_warmup(shs_lr_schedule_kind_t k) {
    return k != SHS_LR_CONSTANT && k != SHS_LR_ONE_CYCLE && k < SHS_LR_NUM_SCHEDULES;
}

int shs_lr_schedule_uses_total(shs_lr_schedule_kind_t k) {
    return k == SHS_LR_LINEAR || k == SHS_LR_COSINE || k == SHS_LR_COSINE_WITH_MIN_LR || k == SHS_LR_WARMUP_DECAY_LR ||
           k == SHS_LR_WARMUP_COSINE_LR;
}

shs_status_t shs_lr_schedule_check(const shs_lr_schedule_t *s) {
    const char *name = shs_lr_schedule_name(s->kind);
    if ((unsigned)s->kind >= SHS_LR_NUM_SCHEDULES)
        return shs_set_error(SHS_INVALID_ARG, "lr schedule: kind %d is not a schedule", (int)s->kind);
    if (shs_lr_schedule_uses_warmup(s->kind)) {
        long lo = shs_lr_schedule_is_deepspeed(s->kind) ? 1 : 0; /* DeepSpeed: "a positive integer" */
        if (s->warmup_steps < lo)
            return shs_set_error(SHS_INVALID_ARG, "lr schedule %s: warmup steps %ld must be >= %ld%s", name,
                                 s->warmup_steps, lo, lo ? " (DeepSpeed's warmup_num_steps is a positive integer)" : "");
    }
    if (shs_lr_schedule_uses_total(s->kind) && s->total_steps < 0) /* 0 or below W: DeepSpeed only warns */
        return shs_set_error(SHS_INVALID_ARG, "lr schedule %s: total steps %ld must be >= 0", name, s->total_steps);
    const double nums[] = {s->min_lr, s->max_lr, s->warmup_min_ratio, s->cos_min_ratio, s->cycle.min_lr,
                           s->cycle.max_lr, s->cycle.decay_lr_rate, s->cycle.first_step_size,
                           s->cycle.second_step_size, s->cycle.decay_step_size, s->cycle.min_mom, s->cycle.max_mom,
                           s->cycle.decay_mom_rate};
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++)
        if (!isfinite(nums[k])) return shs_set_error(SHS_INVALID_ARG, "lr schedule %s: a parameter is not finite", name);
    if (s->kind == SHS_LR_ONE_CYCLE) {
        if (!(s->cycle.first_step_size > 0))
            return shs_set_error(SHS_INVALID_ARG, "lr schedule OneCycle: cycle_first_step_size %g must be positive "
                                 "(DeepSpeed's ValueError)", s->cycle.first_step_size);
        if (s->cycle.second_step_size < 0)
            return shs_set_error(SHS_INVALID_ARG, "lr schedule OneCycle: cycle_second_step_size %g must be >= 0 "
                                 "(DeepSpeed's ValueError)", s->cycle.second_step_size);
        if (s->cycle.first_stair_count < 0 || s->cycle.second_stair_count < 0)
            return shs_set_error(SHS_INVALID_ARG, "lr schedule OneCycle: stair counts must be >= 0");
    }
    return SHS_OK;
}

/* ---- Hugging Face: base * lambda(j) ----------------------------------------------- */

static double hf_lambda(const shs_lr_schedule_t *s, double base, long j) {
    double W = (double)s->warmup_steps, T = (double)s->total_steps;
    if (s->kind == SHS_LR_CONSTANT) return 1.0;
    if (j < s->warmup_steps) return (double)j / fmax(1.0, W);
    if (s->kind == SHS_LR_CONSTANT_WITH_WARMUP) return 1.0;
    if (s->kind == SHS_LR_LINEAR) return fmax(0.0, (T - (double)j) / fmax(1.0, T - W));
    double progress = ((double)j - W) / fmax(1.0, T - W);
    double factor = 0.5 * (1.0 + cos(M_PI * 0.5 * 2.0 * progress));
    if (s->kind == SHS_LR_COSINE) return fmax(0.0, factor);
    double min_lr_rate = s->min_lr / base; /* get_cosine_with_min_lr_schedule_with_warmup(min_lr=) */
    factor = factor * (1.0 - min_lr_rate) + min_lr_rate;
    return fmax(0.0, factor);
}

/* ---- DeepSpeed: the scheduler's get_lr at iteration i = j - 1 -------------------------- */

/* WarmupLR's gamma during warmup (i < W') */
static double warmup_gamma(const shs_lr_schedule_t *s, long i, double Wp) {
    if (s->warmup_linear) return (double)i / Wp;
    double inverse_log_warm_up = 1.0 / log(Wp);
    return inverse_log_warm_up * log((double)i + 1.0);
}

/* OneCycle's _get_scale_factor at batch_iteration i + 1 */
static double cycle_scale(const shs_lr_schedule_t *s, long i) {
    double first = s->cycle.first_step_size, second = s->cycle.second_step_size;
    double total = first + second, step_ratio = first / total;
    double bi = (double)i + 1.0;
    double cycle = floor(1.0 + bi / total);
    double x = 1.0 + bi / total - cycle, scale;
    long stairs;
    if (x <= step_ratio) {
        scale = x / step_ratio;
        stairs = s->cycle.first_stair_count;
    } else {
        scale = (x - 1.0) / (step_ratio - 1.0);
        stairs = s->cycle.second_stair_count;
    }
    if (stairs > 0) { /* from the integer offset, as DeepSpeed does since its stair fix */
        double ci = fmod(bi, total), pos;
        if (ci <= first) pos = ci * (double)stairs / first;
        else pos = (total - ci) * (double)stairs / second;
        scale = floor(pos) / (double)stairs;
    }
    return scale;
}

static shs_lr_point_t one_cycle(const shs_lr_schedule_t *s, long i) {
    shs_lr_point_t p = {.has_betas = s->cycle.momentum, .beta2 = 0.99};
    double min_lr = s->cycle.min_lr, max_lr = s->cycle.max_lr, total = s->cycle.first_step_size +
                                                                           s->cycle.second_step_size;
    if (i < 0) { /* set at construction: cycle_min_lr, betas (cycle_min_mom, 0.99) */
        p.lr = min_lr;
        p.beta1 = s->cycle.min_mom;
        return p;
    }
    if ((double)i < total) {
        double scale = cycle_scale(s, i);
        p.lr = min_lr + (max_lr - min_lr) * scale;
        p.beta1 = s->cycle.max_mom - (s->cycle.max_mom - s->cycle.min_mom) * scale;
        return p;
    }
    /* past the cycle: _get_decay_lr / _get_decay_mom with k = i - total + 1 */
    double k = (double)i - total + 1.0;
    int no_decay = s->cycle.decay_step_size == 0; /* math.isclose(x, 0): x == 0 */
    if (no_decay || s->cycle.decay_lr_rate == 0) p.lr = min_lr;
    else p.lr = min_lr / (1.0 + s->cycle.decay_lr_rate * (k / s->cycle.decay_step_size));
    if (no_decay || s->cycle.decay_mom_rate == 0) p.beta1 = s->cycle.max_mom;
    else p.beta1 = s->cycle.max_mom * (1.0 + s->cycle.decay_mom_rate * (k / s->cycle.decay_step_size));
    return p;
}

static double deepspeed_lr(const shs_lr_schedule_t *s, double base, long i) {
    double Wp = (double)(s->warmup_steps > 2 ? s->warmup_steps : 2), T = (double)s->total_steps;
    if (s->kind == SHS_LR_WARMUP_COSINE_LR) {
        if (i < 0) return 0.0;
        double ratio;
        if ((double)i < Wp) {
            ratio = warmup_gamma(s, i, Wp);
            double ratio_delta = 1.0 - s->warmup_min_ratio;
            ratio = s->warmup_min_ratio + ratio * ratio_delta;
        } else {
            double real_last_step = (double)i - Wp + 1.0, real_total_steps = fmax(1.0, T - Wp);
            double cosine_progress = fmin(1.0, real_last_step / real_total_steps);
            double ratio_delta = 1.0 - s->cos_min_ratio;
            ratio = (1.0 + cos(M_PI * cosine_progress)) / 2.0;
            ratio = fmax(0.0, s->cos_min_ratio + ratio_delta * ratio);
        }
        return base * ratio;
    }
    if (i < 0) return s->min_lr;
    double gamma;
    if ((double)i < Wp) gamma = warmup_gamma(s, i, Wp);
    else if (s->kind == SHS_LR_WARMUP_DECAY_LR) gamma = fmax(0.0, (T - (double)i) / fmax(1.0, T - Wp));
    else gamma = 1.0;
    double delta_lr = s->max_lr - s->min_lr;
    return s->min_lr + delta_lr * gamma;
}

shs_lr_point_t shs_lr_schedule_at(const shs_lr_schedule_t *s, double base, long applied) {
    if (s->kind == SHS_LR_ONE_CYCLE) return one_cycle(s, applied - 1);
    shs_lr_point_t p = {0};
    if (shs_lr_schedule_is_deepspeed(s->kind)) p.lr = deepspeed_lr(s, base, applied - 1);
    else p.lr = s->kind == SHS_LR_CONSTANT ? base : base * hf_lambda(s, base, applied);
    return p;
}

size_t shs_lr_schedule_describe(const shs_lr_schedule_t *s, double base, char *buf, size_t n) {
    int at = 0;
#define ADD(...) at += snprintf((size_t)at < n ? buf + at : NULL, (size_t)at < n ? n - (size_t)at : 0, __VA_ARGS__)
    if (n) buf[0] = 0;
    ADD("%s (%s)", shs_lr_schedule_name(s->kind), shs_lr_schedule_is_deepspeed(s->kind) ? "DeepSpeed" : "HF");
    if (s->kind == SHS_LR_CONSTANT) {
        ADD(": lr %g", base);
        return (size_t)at;
    }
    if (s->kind == SHS_LR_ONE_CYCLE)
        ADD(": cycle_min_lr %g, cycle_max_lr %g, steps %g + %g", s->cycle.min_lr, s->cycle.max_lr,
            s->cycle.first_step_size, s->cycle.second_step_size);
    else if (s->kind == SHS_LR_WARMUP_LR || s->kind == SHS_LR_WARMUP_DECAY_LR)
        ADD(": warmup_min_lr %g to warmup_max_lr %g over %ld steps (%s)", s->min_lr, s->max_lr, s->warmup_steps,
            s->warmup_linear ? "linear" : "log");
    else if (s->kind == SHS_LR_WARMUP_COSINE_LR)
        ADD(": lr %g x ratio, warmup %ld steps (%s) from %g, cosine to %g", base, s->warmup_steps,
            s->warmup_linear ? "linear" : "log", s->warmup_min_ratio, s->cos_min_ratio);
    else
        ADD(": lr %g, warmup %ld steps", base, s->warmup_steps);
    if (s->kind == SHS_LR_COSINE_WITH_MIN_LR) ADD(", min_lr %g", s->min_lr);
    if (shs_lr_schedule_uses_total(s->kind)) ADD(", total %ld steps", s->total_steps);
    /* the lr of a few steps (1-based, no step skipped): the first, the end of warmup, the last */
    long last = shs_lr_schedule_uses_total(s->kind) ? s->total_steps : 0;
    long w = s->kind == SHS_LR_ONE_CYCLE ? (long)s->cycle.first_step_size : s->warmup_steps;
    long steps[3] = {1, w + 1, last};
    ADD("; lr at step");
    for (int k = 0, shown = 0; k < 3; k++) {
        if (steps[k] < 1 || (k > 0 && steps[k] <= steps[k - 1])) continue;
        ADD("%s %ld: %g", shown++ ? "," : "", steps[k], shs_lr_schedule_at(s, base, steps[k] - 1).lr);
    }
#undef ADD
    return (size_t)at;
}
