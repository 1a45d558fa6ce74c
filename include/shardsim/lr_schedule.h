/* lr_schedule.h - learning-rate schedules: the learning rate (and, for
 * DeepSpeed's OneCycle, Adam's betas) of each optimizer step, as Hugging
 * Face's get_scheduler (torch LambdaLR) and DeepSpeed's lr_schedules.py
 * compute them.
 *
 * What it is: the schedule's parameters and one pure function of the number
 * of optimizer steps already applied, in f64 as the Python originals compute
 * (the optimizer then takes the f32 rounding, as the kernels do). The
 * strategy applies it before each optimizer step and counts only applied
 * steps (an fp16 overflow's skipped step advances no schedule, as DeepSpeed's
 * engine and the HF Trainer do); checkpoints save that count.
 * What it is not: the optimizer (optim.h), or schedules that read the loss
 * (ReduceLROnPlateau).
 *
 * With j the optimizer steps applied before this one, base the optimizer's
 * lr, W warmup steps and T total steps:
 *   HF (transformers optimization.py; LambdaLR gives base * lambda(j)):
 *     constant              1
 *     constant_with_warmup  j < W: j / max(1, W); else 1
 *     linear                j < W: j / max(1, W); else max(0, (T - j) / max(1, T - W))
 *     cosine                j < W: j / max(1, W); else max(0, (1 + cos(pi p)) / 2),
 *                           p = (j - W) / max(1, T - W)
 *     cosine_with_min_lr    as cosine, the factor f made f (1 - m) + m, m = min_lr / base
 *   DeepSpeed (runtime/lr_schedules.py, deepspeedai/DeepSpeed edaa722): the
 *   scheduler sets the lr at construction (iteration -1) and steps after each
 *   applied step, so step j uses iteration i = j - 1; W' = max(2, W):
 *     WarmupLR        i < 0: min; else min + (max - min) g,
 *                     g = i < W': log: ln(i + 1) / ln W' (as (1 / ln W') ln(i + 1)),
 *                                 linear: i / W'; else 1
 *     WarmupDecayLR   as WarmupLR, and for i >= W': g = max(0, (T - i) / max(1, T - W'))
 *     WarmupCosineLR  base r: i < 0: r = 0; i < W': r = wmin + g (1 - wmin);
 *                     else r = max(0, cmin + (1 - cmin)(1 + cos(pi p)) / 2),
 *                     p = min(1, (i - W' + 1) / max(1, T - W'))
 *     OneCycle        i < 0: cycle_min_lr; i below the cycle's length: min + (max - min) s
 *                     with s the cycle's triangle (stairs if counts are given); after
 *                     it min / (1 + rate k / decay_step_size), k the steps past the cycle;
 *                     with cycle_momentum Adam's betas become (m, 0.99), m cycling
 *                     inversely between cycle_max_mom and cycle_min_mom.
 */
#ifndef SHARDSIM_LR_SCHEDULE_H
#define SHARDSIM_LR_SCHEDULE_H

#include <stddef.h>

#include "shardsim/status.h"

/* The schedules, one row each: enum suffix, name (as --lr-schedule and a
 * DeepSpeed config's scheduler.type spell it). */
#define SHS_LR_SCHEDULE_MAP(X)                                                                                     \
    X(CONSTANT, "constant")                         /* HF get_constant_schedule; no schedule */                   \
    X(CONSTANT_WITH_WARMUP, "constant_with_warmup") /* HF get_constant_schedule_with_warmup */                    \
    X(LINEAR, "linear")                             /* HF get_linear_schedule_with_warmup */                      \
    X(COSINE, "cosine")                             /* HF get_cosine_schedule_with_warmup, num_cycles 0.5 */      \
    X(COSINE_WITH_MIN_LR, "cosine_with_min_lr")     /* HF get_cosine_with_min_lr_schedule_with_warmup */          \
    X(WARMUP_LR, "WarmupLR")                        /* DeepSpeed */                                               \
    X(WARMUP_DECAY_LR, "WarmupDecayLR")             /* DeepSpeed */                                               \
    X(WARMUP_COSINE_LR, "WarmupCosineLR")           /* DeepSpeed */                                               \
    X(ONE_CYCLE, "OneCycle")                        /* DeepSpeed */

typedef enum {
#define SHS_LR_SCHEDULE_ENUM(id, name) SHS_LR_##id,
    SHS_LR_SCHEDULE_MAP(SHS_LR_SCHEDULE_ENUM)
#undef SHS_LR_SCHEDULE_ENUM
    SHS_LR_NUM_SCHEDULES
} shs_lr_schedule_kind_t;

/* A schedule. Zero is the constant schedule (the optimizer's lr). Learning
 * rates are absolute (the optimizer's units); steps count optimizer steps. */
typedef struct {
    shs_lr_schedule_kind_t kind;
    long warmup_steps;           /* W: HF num_warmup_steps; DeepSpeed warmup_num_steps (>= 1) */
    long total_steps;            /* T: HF num_training_steps; DeepSpeed total_num_steps */
    double min_lr;               /* WarmupLR/WarmupDecayLR warmup_min_lr (default 0); cosine_with_min_lr min_lr */
    double max_lr;               /* WarmupLR/WarmupDecayLR warmup_max_lr (the caller fills DeepSpeed's default:
                                  * WarmupLR the optimizer's lr, WarmupDecayLR 0.001) */
    int warmup_linear;           /* DeepSpeed warmup_type: 0 "log" (its default), 1 "linear" */
    double warmup_min_ratio;     /* WarmupCosineLR (default 0) */
    double cos_min_ratio;        /* WarmupCosineLR (default 1e-4: the caller fills it) */
    struct {                     /* OneCycle's arguments, its defaults the caller's to fill */
        double min_lr, max_lr;   /* cycle_min_lr, cycle_max_lr (required) */
        double decay_lr_rate;    /* 0 */
        double first_step_size;  /* 2000 */
        double second_step_size; /* cycle_second_step_size; its default is first_step_size */
        long first_stair_count;  /* 0: no stairs */
        long second_stair_count; /* its default is first_stair_count */
        double decay_step_size;  /* 0: no decay */
        int momentum;            /* cycle_momentum (true; only optimizers with betas: Adam) */
        double min_mom, max_mom; /* 0.8, 0.9 */
        double decay_mom_rate;   /* 0 */
    } cycle;
} shs_lr_schedule_t;

/* The hyperparameters of one optimizer step. */
typedef struct {
    double lr;
    int has_betas;               /* OneCycle with cycle_momentum: Adam's betas are (beta1, beta2) */
    double beta1, beta2;
} shs_lr_point_t;

const char *shs_lr_schedule_name(shs_lr_schedule_kind_t k); /* "linear", "WarmupLR", ...; "invalid" otherwise */
int shs_lr_schedule_parse(const char *name, shs_lr_schedule_kind_t *out); /* 0 ok, -1 unknown */
/* Whether k is one of DeepSpeed's (WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle). */
int shs_lr_schedule_is_deepspeed(shs_lr_schedule_kind_t k);
/* Whether k uses W / T (the warmup and total steps). */
int shs_lr_schedule_uses_warmup(shs_lr_schedule_kind_t k);
int shs_lr_schedule_uses_total(shs_lr_schedule_kind_t k);

/* Check s as DeepSpeed and transformers check their arguments: W >= 1 for
 * DeepSpeed's warmup schedules (its ValueError), W >= 0 and T >= 0 where used,
 * OneCycle's first_step_size > 0 and second_step_size >= 0, stair counts
 * >= 0, finite numbers. Errors: SHS_INVALID_ARG naming the parameter. */
shs_status_t shs_lr_schedule_check(const shs_lr_schedule_t *s);

/* The step that follows `applied` applied optimizer steps (0 for the first),
 * with the optimizer's lr `base` (and betas for OneCycle's cycle_momentum).
 * Pure; s must pass shs_lr_schedule_check. */
shs_lr_point_t shs_lr_schedule_at(const shs_lr_schedule_t *s, double base, long applied);

/* One line (no newline) saying the schedule and its parameters, e.g.
 * "linear (HF): warmup 10 steps, total 100; lr at steps 1, 11, 100: 0, 0.001, 1e-05".
 * Returns the characters written (as snprintf: the length it needed). */
size_t shs_lr_schedule_describe(const shs_lr_schedule_t *s, double base, char *buf, size_t n);

#endif
