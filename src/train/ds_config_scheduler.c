/* ds_config_scheduler.c - DeepSpeed's scheduler section (see ds_config.h),
 * read from runtime/config.py (get_scheduler_name / _params), runtime/
 * engine.py (_scheduler_from_config: DeepSpeed's own schedulers, else
 * torch.optim.lr_scheduler's class of that name, constructed with the params
 * as keyword arguments; stepped after each applied optimizer step) and
 * runtime/lr_schedules.py (each scheduler's arguments, defaults and checks).
 * The mapping, onto lr_schedule.h:
 *
 *   type WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle -> that schedule,
 *       with its params (defaults as DeepSpeed's constructors: warmup_min_lr
 *       0, warmup_max_lr the optimizer's lr (WarmupLR) or 0.001
 *       (WarmupDecayLR), warmup_num_steps 1000 (a positive integer, else
 *       DeepSpeed's ValueError), warmup_type log; WarmupCosineLR
 *       warmup_min_ratio 0, cos_min_ratio 1e-4; OneCycle as lr_schedule.h)
 *   "auto" on warmup_min_lr, warmup_max_lr, warmup_num_steps,
 *       total_num_steps: the HF Trainer's values (ds_config.h)
 *
 * Refused as DeepSpeed refuses them: a type neither DeepSpeed's nor
 * torch's (its assertion), params missing (it passes None as keyword
 * arguments), an argument the constructor does not take (TypeError), a
 * required one left out (total_num_steps, cycle_min_lr, cycle_max_lr),
 * warmup_num_steps not a positive integer. Refused as not modelled (train;
 * compare lists them as ignored, the lr changing nothing it reports):
 * LRRangeTest and torch.optim.lr_scheduler's classes, per-param-group lists,
 * last_batch_iteration other than -1.
 * What it is not: the schedules' formulas (src/strategy/lr_schedule.c).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "shardsim/lr_schedule.h"
#include "train/ds_config_impl.h"

#ifdef SHS_HAVE_JANSSON

/* The section's state while its params are read. */
typedef struct {
    shs_lr_schedule_t *s;
    int has_total, has_max_lr, has_first_stairs, has_second_step, has_second_stairs;
    int has_cycle_min_lr, has_cycle_max_lr;
} sched_t;

/* A learning rate: a number ("auto" for the Trainer's keys: bit `a`, else
 * -1), not a per-param-group list. */
static shs_status_t read_rate(shs__ds_reader_t *r, const char *kp, const json_t *v, int a, double *out) {
    if (a >= 0 && shs__ds_is_auto(v)) {
        r->ds->autos |= 1u << a;
        return SHS_OK;
    }
    if (json_is_array(v))
        return shs__ds_not_modelled(r, kp, v, "a value per parameter group; shardsim's optimizer has one group");
    return shs__ds_get_num(r, kp, v, -1e30, 1e30, out);
}

static shs_status_t read_min_lr(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                void *sec) {
    return read_rate(r, kp, v, SHS_DS_AUTO_WARMUP_MIN_LR, &((sched_t *)sec)->s->min_lr);
}

static shs_status_t read_max_lr(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                void *sec) {
    ((sched_t *)sec)->has_max_lr = 1;
    return read_rate(r, kp, v, SHS_DS_AUTO_WARMUP_MAX_LR, &((sched_t *)sec)->s->max_lr);
}

/* warmup_num_steps: an int > 0 (isinstance(int), so 1e3 is refused too) */
static shs_status_t read_warmup_steps(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                      void *sec) {
    if (shs__ds_is_auto(v)) {
        r->ds->autos |= 1u << SHS_DS_AUTO_WARMUP_NUM_STEPS;
        return SHS_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return shs__ds_bad_type(r, kp, v, "a positive integer (DeepSpeed raises ValueError otherwise; 1e3 is a float "
                                          "to it)");
    ((sched_t *)sec)->s->warmup_steps = (long)json_integer_value(v);
    return SHS_OK;
}

static shs_status_t read_total(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                               void *sec) {
    sched_t *sc = sec;
    sc->has_total = 1;
    if (shs__ds_is_auto(v)) {
        r->ds->autos |= 1u << SHS_DS_AUTO_TOTAL_NUM_STEPS;
        return SHS_OK;
    }
    return shs__ds_get_int(r, kp, v, 0, 1e15, &sc->s->total_steps);
}

static shs_status_t read_warmup_type(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                     void *sec) {
    const char *t;
    SHS_CHECK(shs__ds_get_str(r, kp, v, &t));
    ((sched_t *)sec)->s->warmup_linear = !strcmp(t, "linear");
    if (strcmp(t, "linear") && strcmp(t, "log")) /* DeepSpeed warns and takes log */
        shs__ds_note(r->ds, "%s \"%.40s\": not log or linear; DeepSpeed warns and uses log", kp, t);
    return SHS_OK;
}

static shs_status_t read_last_iteration(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp,
                                        const json_t *v, void *sec) {
    long it;
    SHS_CHECK(shs__ds_get_int(r, kp, v, -1, 1e15, &it));
    return it == -1 ? SHS_OK : shs__ds_not_modelled(r, kp, v, "%s", row->shardsim);
}

/* a plain number of the schedule (row->at: its offset in shs_lr_schedule_t) */
static shs_status_t read_sched_num(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                   void *sec) {
    sched_t *sc = sec;
    if (!strcmp(row->key, "cycle_min_lr")) sc->has_cycle_min_lr = 1;
    if (!strcmp(row->key, "cycle_max_lr")) sc->has_cycle_max_lr = 1;
    if (!strcmp(row->key, "cycle_second_step_size")) sc->has_second_step = 1;
    if (json_is_array(v))
        return shs__ds_not_modelled(r, kp, v, "a value per parameter group; shardsim's optimizer has one group");
    return shs__ds_get_num(r, kp, v, row->lo, row->hi, (double *)((char *)sc->s + row->at));
}

static shs_status_t read_stairs(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                void *sec) {
    sched_t *sc = sec;
    int second = !strcmp(row->key, "cycle_second_stair_count");
    if (second) sc->has_second_stairs = 1;
    return shs__ds_get_int(r, kp, v, 0, 1e9, second ? &sc->s->cycle.second_stair_count : &sc->s->cycle.first_stair_count);
}

static shs_status_t read_cycle_momentum(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp,
                                        const json_t *v, void *sec) {
    return shs__ds_get_bool(r, kp, v, &((sched_t *)sec)->s->cycle.momentum);
}

#define ROW_MIN_LR SHS__DS_MAP("warmup_min_lr", "lr at the start of warmup (default 0)", "min_lr", read_min_lr)
#define ROW_WARMUP_STEPS                                                                                           \
    SHS__DS_MAP("warmup_num_steps", "warmup length, a positive int (default 1000; used as max(2, it))",           \
                "warmup_steps", read_warmup_steps)
#define ROW_WARMUP_TYPE                                                                                            \
    SHS__DS_MAP("warmup_type", "log (default) or linear warmup curve", "warmup_linear", read_warmup_type)
#define ROW_LAST_ITERATION                                                                                         \
    SHS__DS_MAP("last_batch_iteration", "the iteration to resume the schedule at (default -1: start)",           \
                "-1 only: resume a shardsim checkpoint instead", read_last_iteration)
#define ROW_TOTAL SHS__DS_MAP("total_num_steps", "the schedule's length (required)", "total_steps", read_total)

static const shs__ds_key_t warmup_lr_keys[] = {
    ROW_MIN_LR,
    SHS__DS_MAP("warmup_max_lr", "lr at the end of warmup (default: the optimizer's lr)", "max_lr", read_max_lr),
    ROW_WARMUP_STEPS,
    ROW_WARMUP_TYPE,
    ROW_LAST_ITERATION,
};

static const shs__ds_key_t warmup_decay_lr_keys[] = {
    ROW_TOTAL,
    ROW_MIN_LR,
    SHS__DS_MAP("warmup_max_lr", "lr at the end of warmup (default 0.001)", "max_lr", read_max_lr),
    ROW_WARMUP_STEPS,
    ROW_WARMUP_TYPE,
    ROW_LAST_ITERATION,
};

static const shs__ds_key_t warmup_cosine_lr_keys[] = {
    ROW_TOTAL,
    SHS__DS_MAP_AT("warmup_min_ratio", "lr ratio at the start of warmup (default 0)", "warmup_min_ratio",
                   read_sched_num, shs_lr_schedule_t, warmup_min_ratio, -1e30, 1e30),
    ROW_WARMUP_STEPS,
    SHS__DS_MAP_AT("cos_min_ratio", "lr ratio at the end of the cosine (default 1e-4)", "cos_min_ratio",
                   read_sched_num, shs_lr_schedule_t, cos_min_ratio, -1e30, 1e30),
    ROW_WARMUP_TYPE,
    ROW_LAST_ITERATION,
};

static const shs__ds_key_t one_cycle_keys[] = {
    SHS__DS_MAP_AT("cycle_min_lr", "lr at the cycle's ends (required)", "cycle.min_lr", read_sched_num,
                   shs_lr_schedule_t, cycle.min_lr, -1e30, 1e30),
    SHS__DS_MAP_AT("cycle_max_lr", "lr at the cycle's peak (required)", "cycle.max_lr", read_sched_num,
                   shs_lr_schedule_t, cycle.max_lr, -1e30, 1e30),
    SHS__DS_MAP_AT("decay_lr_rate", "lr decay after the cycle (default 0)", "cycle.decay_lr_rate", read_sched_num,
                   shs_lr_schedule_t, cycle.decay_lr_rate, -1e30, 1e30),
    SHS__DS_MAP_AT("cycle_first_step_size", "steps of the rising half (default 2000, > 0)",
                   "cycle.first_step_size", read_sched_num, shs_lr_schedule_t, cycle.first_step_size, -1e30, 1e30),
    SHS__DS_MAP_AT("cycle_second_step_size", "steps of the falling half (default: the first's, >= 0)",
                   "cycle.second_step_size", read_sched_num, shs_lr_schedule_t, cycle.second_step_size, -1e30, 1e30),
    SHS__DS_MAP("cycle_first_stair_count", "stairs in the rising half (default 0: none)", "cycle.first_stair_count",
                read_stairs),
    SHS__DS_MAP("cycle_second_stair_count", "stairs in the falling half (default: the first's)",
                "cycle.second_stair_count", read_stairs),
    SHS__DS_MAP_AT("decay_step_size", "steps per decay interval after the cycle (default 0: no decay)",
                   "cycle.decay_step_size", read_sched_num, shs_lr_schedule_t, cycle.decay_step_size, -1e30, 1e30),
    SHS__DS_MAP("cycle_momentum", "cycle Adam's beta1 inversely, beta2 set to 0.99 (default true)",
                "cycle.momentum", read_cycle_momentum),
    SHS__DS_MAP_AT("cycle_min_mom", "beta1 at the cycle's peak (default 0.8)", "cycle.min_mom", read_sched_num,
                   shs_lr_schedule_t, cycle.min_mom, -1e30, 1e30),
    SHS__DS_MAP_AT("cycle_max_mom", "beta1 at the cycle's ends (default 0.9)", "cycle.max_mom", read_sched_num,
                   shs_lr_schedule_t, cycle.max_mom, -1e30, 1e30),
    SHS__DS_MAP_AT("decay_mom_rate", "beta1 growth after the cycle (default 0)", "cycle.decay_mom_rate",
                   read_sched_num, shs_lr_schedule_t, cycle.decay_mom_rate, -1e30, 1e30),
    ROW_LAST_ITERATION,
};

/* torch.optim.lr_scheduler's classes, which DeepSpeed builds by name */
static const char *const torch_schedulers[] = {
    "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR",
    "SequentialLR", "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR",
    "CosineAnnealingWarmRestarts", "OneCycleLR", "PolynomialLR", "LRScheduler",
};

static shs_status_t param_unknown(shs__ds_reader_t *r, const char *kp, const json_t *v, void *sec) {
    return shs_set_error(SHS_UNSUPPORTED, "%s: unknown key %s: DeepSpeed passes the params to the scheduler's "
                         "constructor, which takes no such argument (a TypeError)", r->path, kp);
}

/* A required argument left out: DeepSpeed's constructor call fails. */
static shs_status_t missing(shs__ds_reader_t *r, const char *type, const char *param) {
    return shs_set_error(SHS_UNSUPPORTED, "%s: scheduler.params.%s is missing: DeepSpeed's %s requires it (a TypeError)",
                         r->path, param, type);
}

/* `type` and `params` are read after the walk; other keys DeepSpeed does not read */
static shs_status_t read_nothing(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                 void *sec) {
    return SHS_OK;
}

static shs_status_t scheduler_unknown(shs__ds_reader_t *r, const char *kp, const json_t *v, void *sec) {
    shs__ds_ignore(r, kp, "DeepSpeed reads only the scheduler's type and params");
    return SHS_OK;
}

static const shs__ds_key_t scheduler_keys[] = {
    SHS__DS_MAP("type", "DeepSpeed's scheduler class, else torch.optim.lr_scheduler's", "lr_schedule.h kind",
                read_nothing),
    SHS__DS_MAP("params", "the constructor's keyword arguments", "by the type's table", read_nothing),
};

static shs_status_t read_params(shs__ds_reader_t *r, const char *type, const json_t *params, sched_t *sc) {
    shs_lr_schedule_t *s = sc->s;
    switch (s->kind) {
    case SHS_LR_WARMUP_LR:
        SHS_CHECK(shs__ds_read_keys(r, "scheduler.params", params, SHS__DS_ROWS(warmup_lr_keys), sc, param_unknown));
        break;
    case SHS_LR_WARMUP_DECAY_LR:
        SHS_CHECK(shs__ds_read_keys(r, "scheduler.params", params, SHS__DS_ROWS(warmup_decay_lr_keys), sc,
                                    param_unknown));
        break;
    case SHS_LR_WARMUP_COSINE_LR:
        SHS_CHECK(shs__ds_read_keys(r, "scheduler.params", params, SHS__DS_ROWS(warmup_cosine_lr_keys), sc,
                                    param_unknown));
        break;
    default:
        SHS_CHECK(shs__ds_read_keys(r, "scheduler.params", params, SHS__DS_ROWS(one_cycle_keys), sc, param_unknown));
        break;
    }
    if ((s->kind == SHS_LR_WARMUP_DECAY_LR || s->kind == SHS_LR_WARMUP_COSINE_LR) && !sc->has_total)
        SHS__DS_KEY(r, missing(r, type, "total_num_steps"));
    if (s->kind == SHS_LR_ONE_CYCLE) {
        if (!sc->has_cycle_min_lr) SHS__DS_KEY(r, missing(r, type, "cycle_min_lr"));
        if (!sc->has_cycle_max_lr) SHS__DS_KEY(r, missing(r, type, "cycle_max_lr"));
        if (!sc->has_second_step) s->cycle.second_step_size = s->cycle.first_step_size;
        if (!sc->has_second_stairs) s->cycle.second_stair_count = s->cycle.first_stair_count;
    }
    return SHS_OK;
}

/* The scheduler section: into ds->vals.strategy.lr_schedule; "auto" values
 * are resolved by shs_ds_config_apply. */
shs_status_t shs__ds_read_scheduler(shs__ds_reader_t *r, const json_t *obj) {
    shs_ds_config_t *ds = r->ds;
    SHS_CHECK(shs__ds_read_keys(r, "scheduler", obj, SHS__DS_ROWS(scheduler_keys), NULL, scheduler_unknown));
    json_t *type = json_object_get(obj, "type"), *params = json_object_get(obj, "params");
    if (!type) { /* get_scheduler_name: no type, no scheduler */
        shs__ds_ignore(r, "scheduler", "no type: DeepSpeed builds no scheduler");
        return SHS_OK;
    }
    const char *t;
    SHS_CHECK(shs__ds_get_str(r, "scheduler.type", type, &t));
    shs_lr_schedule_kind_t kind;
    if (shs_lr_schedule_parse(t, &kind) || !shs_lr_schedule_is_deepspeed(kind)) {
        int torch = 0;
        for (size_t k = 0; k < sizeof torch_schedulers / sizeof torch_schedulers[0]; k++)
            torch |= !strcmp(t, torch_schedulers[k]);
        if (torch || !strcmp(t, "LRRangeTest"))
            return shs__ds_not_modelled(r, "scheduler.type", type, "shardsim models DeepSpeed's WarmupLR, "
                                        "WarmupDecayLR, WarmupCosineLR and OneCycle (and --lr-schedule's HF schedules)");
        return shs_set_error(SHS_UNSUPPORTED, "%s: scheduler.type = \"%s\": DeepSpeed refuses it too (\"DeepSpeed does "
                             "not recognize LR scheduler\": neither its lr_schedules nor torch.optim.lr_scheduler "
                             "has it)", r->path, t);
    }
    if (!params)
        return shs_set_error(SHS_UNSUPPORTED, "%s: scheduler (type %s) has no params: DeepSpeed passes them to the "
                             "constructor as keyword arguments, and its engine fails without them", r->path, t);
    shs_lr_schedule_t *s = &ds->vals.strategy.lr_schedule;
    *s = (shs_lr_schedule_t){.kind = kind, .warmup_steps = 1000, .max_lr = kind == SHS_LR_WARMUP_DECAY_LR ? 0.001 : 0,
                             .cos_min_ratio = 1e-4,
                             .cycle = {.first_step_size = 2000, .momentum = 1, .min_mom = 0.8, .max_mom = 0.9}};
    sched_t sc = {.s = s};
    SHS_CHECK(read_params(r, t, params, &sc));
    ds->sched_max_lr_is_lr = kind == SHS_LR_WARMUP_LR && !sc.has_max_lr;
    shs__ds_set(ds, SHS_DS_LR_SCHEDULE, SHS_DS_FROM_CONFIG);
    if (shs_lr_schedule_uses_warmup(kind)) shs__ds_set(ds, SHS_DS_WARMUP_STEPS, json_object_get(params,
                                                   "warmup_num_steps") ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT);
    if (shs_lr_schedule_uses_total(kind)) shs__ds_set(ds, SHS_DS_TOTAL_STEPS, SHS_DS_FROM_CONFIG);
    return SHS_OK;
}

#endif
