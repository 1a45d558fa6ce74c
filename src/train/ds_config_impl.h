/* ds_config_impl.h - private to the DeepSpeed config reader
 * (src/train/ds_config*.c): the reading state, the value readers and
 * messages every section shares, and each section's entry points.
 * What it is not: the mapping itself (each section's file says it) or the
 * public API (include/shardsim/ds_config.h).
 */
#ifndef SHARDSIM_TRAIN_DS_CONFIG_IMPL_H
#define SHARDSIM_TRAIN_DS_CONFIG_IMPL_H

#include <stddef.h>
#include <string.h>

#include "shardsim/ds_config.h"

static inline int shs__ds_has_auto(const shs_ds_config_t *ds, shs_ds_auto_t a) { return (ds->autos >> a) & 1u; }

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>

#define SHS__DS_MAX_REFUSED 16

/* One file being read. */
typedef struct {
    const char *path;
    shs_ds_config_t *ds;
    int num_refused;                 /* keys refused so far (all are named in one error) */
    char refused[SHS__DS_MAX_REFUSED][320];
    int values_only;                 /* reading a key that changes only the trained values (row values_only) */
    int not_modelled;                /* the refusal just made is shs__ds_not_modelled's */
} shs__ds_reader_t;

/* The error just set (SHS_UNSUPPORTED, "path: ...") kept for the one error
 * that names every refused key of the file. */
void shs__ds_keep_refused(shs__ds_reader_t *r);

/* A check whose SHS_UNSUPPORTED (a refused key) is kept and reading goes on;
 * any other error returns. */
#define SHS__DS_KEY(r, expr)                                     \
    do {                                                         \
        shs_status_t key_st_ = (expr);                           \
        if (key_st_ == SHS_UNSUPPORTED) shs__ds_keep_refused(r); \
        else if (key_st_ != SHS_OK) return key_st_;              \
    } while (0)

static inline int shs__ds_is_auto(const json_t *v) {
    return json_is_string(v) && !strcmp(json_string_value(v), "auto");
}
static inline void shs__ds_set(shs_ds_config_t *ds, shs_ds_setting_t s, shs_ds_source_t from) { ds->src[s] = from; }

/* ---- key tables ------------------------------------------------------------
 * Each section lists its keys in a table, one row per key (an alias is a row
 * of its own): what DeepSpeed does with it and what shardsim does, and how
 * the key is taken. shs__ds_read_keys walks an object against its table. */
typedef enum {
    SHS__DS_MAPPED,       /* read by the row's `read`; `shardsim` says onto what */
    SHS__DS_IGNORED,      /* accepted and listed as ignored; `shardsim` is the reason */
    SHS__DS_REFUSE_TRUE,  /* a flag: false accepted, true refused as not modelled (`shardsim`: why) */
    SHS__DS_REFUSE_FALSE, /* a flag: true accepted, false refused as not modelled (`shardsim`: why) */
    SHS__DS_ONLY_DEFAULT, /* a number accepted at DeepSpeed's default `dflt` only (`shardsim`: why) */
    SHS__DS_REFUSED,      /* any value refused as not modelled (`shardsim`: why) */
} shs__ds_take_t;

typedef struct shs__ds_key shs__ds_key_t;
/* A MAPPED row's reader: `kp` is the key path, `sec` the section's state. */
typedef shs_status_t (*shs__ds_read_fn)(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                         void *sec);

struct shs__ds_key {
    const char *key;          /* as DeepSpeed spells it */
    shs__ds_take_t take;
    const char *deepspeed;    /* what DeepSpeed does with it (and its default) */
    const char *shardsim;     /* what shardsim does: the mapping, or why ignored / refused */
    shs__ds_read_fn read;     /* MAPPED */
    double dflt;              /* ONLY_DEFAULT: DeepSpeed's default */
    size_t at;                /* shs__ds_read_*_at: the field's offset in the section's state */
    double lo, hi;            /* shs__ds_read_num_at / _int_at: the range */
    int values_only;          /* changes only the trained values (lr, gradient values): for compare
                               * listed as ignored, its "not modelled" refusals dropped (its
                               * DeepSpeed refusals kept); the _V row macros */
};

/* MAPPED readers of a plain value into the section state's field at
 * row->at: a double in [lo, hi], a long in [lo, hi], an int 0/1. */
shs_status_t shs__ds_read_num_at(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                 void *sec);
shs_status_t shs__ds_read_int_at(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                 void *sec);
shs_status_t shs__ds_read_bool_at(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                  void *sec);

#define SHS__DS_ROWS(t) (t), sizeof(t) / sizeof((t)[0])

/* Rows, one macro per way a key is taken: the key, what DeepSpeed does with
 * it, what shardsim does (then the reader, the default, or the field). */
#define SHS__DS_MAP(k, ds, shs, fn) {.key = (k), .take = SHS__DS_MAPPED, .deepspeed = (ds), .shardsim = (shs), .read = (fn)}
#define SHS__DS_MAP_AT(k, ds, shs, fn, type, field, l, h)                                                          \
    {.key = (k), .take = SHS__DS_MAPPED, .deepspeed = (ds), .shardsim = (shs), .read = (fn),                     \
     .at = offsetof(type, field), .lo = (l), .hi = (h)}
#define SHS__DS_IGNORE(k, ds, why) {.key = (k), .take = SHS__DS_IGNORED, .deepspeed = (ds), .shardsim = (why)}
#define SHS__DS_REFUSE_IF_TRUE(k, ds, why) {.key = (k), .take = SHS__DS_REFUSE_TRUE, .deepspeed = (ds), .shardsim = (why)}
#define SHS__DS_REFUSE_IF_FALSE(k, ds, why) {.key = (k), .take = SHS__DS_REFUSE_FALSE, .deepspeed = (ds), .shardsim = (why)}
#define SHS__DS_DEFAULT_ONLY(k, ds, why, d)                                                                        \
    {.key = (k), .take = SHS__DS_ONLY_DEFAULT, .deepspeed = (ds), .shardsim = (why), .dflt = (d)}
#define SHS__DS_REFUSE(k, ds, why) {.key = (k), .take = SHS__DS_REFUSED, .deepspeed = (ds), .shardsim = (why)}
/* The same for keys that change only the trained values (values_only). */
#define SHS__DS_MAP_V(k, ds, shs, fn)                                                                              \
    {.key = (k), .take = SHS__DS_MAPPED, .deepspeed = (ds), .shardsim = (shs), .read = (fn), .values_only = 1}
#define SHS__DS_REFUSE_IF_TRUE_V(k, ds, why)                                                                       \
    {.key = (k), .take = SHS__DS_REFUSE_TRUE, .deepspeed = (ds), .shardsim = (why), .values_only = 1}
#define SHS__DS_DEFAULT_ONLY_V(k, ds, why, d)                                                                      \
    {.key = (k), .take = SHS__DS_ONLY_DEFAULT, .deepspeed = (ds), .shardsim = (why), .dflt = (d), .values_only = 1}
#define SHS__DS_REFUSE_V(k, ds, why)                                                                               \
    {.key = (k), .take = SHS__DS_REFUSED, .deepspeed = (ds), .shardsim = (why), .values_only = 1}

/* The reason compare lists a values_only key as ignored. */
#define SHS__DS_VALUES_ONLY_WHY "changes only the trained values, which compare does not compute"

/* A values_only check made outside a row (`st` its result, kp its key): for
 * compare a "not modelled" refusal becomes an ignored key. Returns the
 * status to keep (SHS__DS_KEY). */
shs_status_t shs__ds_values_only(shs__ds_reader_t *r, const char *kp, shs_status_t st);

/* A key the table does not have; NULL in shs__ds_read_keys means
 * shs__ds_unknown_key. */
typedef shs_status_t (*shs__ds_unknown_fn)(shs__ds_reader_t *r, const char *kp, const json_t *v, void *sec);

/* Walk the object `obj` (named `section`, the key path's parent; "" at the
 * top level) against `rows`: each key taken as its row says, in the file's
 * order; refusals kept (SHS__DS_KEY), any other error returned. Errors:
 * SHS_PARSE when `obj` is not an object. */
shs_status_t shs__ds_read_keys(shs__ds_reader_t *r, const char *section, const json_t *obj, const shs__ds_key_t *rows,
                               size_t n, void *sec, shs__ds_unknown_fn unknown);
/* The row of `key` in `rows`, or NULL. */
const shs__ds_key_t *shs__ds_find_key(const shs__ds_key_t *rows, size_t n, const char *key);
/* List `kp` as ignored with `why` (the header's "ignored:" lines). */
void shs__ds_ignore(shs__ds_reader_t *r, const char *kp, const char *why);

/* "key" or "parent.key" */
void shs__ds_key_path(char *out, size_t n, const char *parent, const char *key);
/* SHS_UNSUPPORTED "path: KP = VALUE is not modelled: WHY" */
shs_status_t shs__ds_not_modelled(shs__ds_reader_t *r, const char *kp, const json_t *v, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* SHS_PARSE "path: KP = VALUE: want WANT" (for "auto": who fills it in) */
shs_status_t shs__ds_bad_type(shs__ds_reader_t *r, const char *kp, const json_t *v, const char *want);
shs_status_t shs__ds_get_bool(shs__ds_reader_t *r, const char *kp, const json_t *v, int *out);
/* A finite number in [lo, hi]. */
shs_status_t shs__ds_get_num(shs__ds_reader_t *r, const char *kp, const json_t *v, double lo, double hi, double *out);
/* An integer, or a real with an integral value (5e8 is common in configs), in [lo, hi]. */
shs_status_t shs__ds_get_int(shs__ds_reader_t *r, const char *kp, const json_t *v, double lo, double hi, long *out);
shs_status_t shs__ds_get_str(shs__ds_reader_t *r, const char *kp, const json_t *v, const char **out);
shs_status_t shs__ds_want_object(shs__ds_reader_t *r, const char *kp, const json_t *v);
/* SHS_UNSUPPORTED "path: unknown key KP: DeepSpeed refuses it too ..." (a
 * section DeepSpeed reads as a pydantic model with extra="forbid") */
shs_status_t shs__ds_unknown_key(shs__ds_reader_t *r, const char *kp);
/* An unknown key of a section DeepSpeed reads key by key (data_types, the
 * optimizer's own keys): accepted and listed as ignored (shs__ds_unknown_fn). */
shs_status_t shs__ds_unknown_ignored(shs__ds_reader_t *r, const char *kp, const json_t *v, void *sec);
/* A note for the header (how an approximate mapping was made). */
void shs__ds_note(shs_ds_config_t *ds, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A flag that is refused when true (default false). */
shs_status_t shs__ds_refuse_true(shs__ds_reader_t *r, const char *kp, const json_t *v, const char *why);
/* A number accepted only at DeepSpeed's default `dflt`. */
shs_status_t shs__ds_only_default(shs__ds_reader_t *r, const char *kp, const json_t *v, double dflt, const char *why);
/* "fp32" | "fp16" | "bf16" (and their torch spellings) */
shs_status_t shs__ds_dtype(shs__ds_reader_t *r, const char *kp, const json_t *v, shs_dtype_t *out);

/* ---- sections ---------------------------------------------------------------- */

/* zero_optimization as read (ds_config_zero.c) */
typedef struct {
    long stage;
    int has_stage;
    int off_opt, off_param;
    long mics;
    long persistence;
    int has_persistence;
    long prefetch;
    int has_prefetch;
    /* the ZeRO granularity keys (strategy.h shs_zero_knobs_t): value and whether the file gives it */
    long reduce_bucket, allgather_bucket, max_live, max_reuse;
    int has_reduce_bucket, has_allgather_bucket, has_max_live, has_max_reuse;
    int contiguous, overlap, has_contiguous, has_overlap;
} shs__ds_zero_t;

shs_status_t shs__ds_read_zero(shs__ds_reader_t *r, const json_t *obj, shs__ds_zero_t *z);
/* The file's stage, MiCS group, offload and stage-3 settings into ds->vals
 * (shs_ds_config_apply keeps what the effective strategy takes). */
shs_status_t shs__ds_zero_finish(shs__ds_reader_t *r, const shs__ds_zero_t *z);

/* fp16 / bf16 as read (ds_config_precision.c) */
typedef struct {
    int enabled, has, is_auto;
    double loss_scale;
    long power, window, hysteresis;
    double min_scale;
    int consecutive;
} shs__ds_fp16_t;

shs_status_t shs__ds_read_fp16(shs__ds_reader_t *r, const json_t *obj, shs__ds_fp16_t *f);
shs_status_t shs__ds_read_bf16(shs__ds_reader_t *r, const char *name, const json_t *obj, int *enabled);
shs_status_t shs__ds_read_data_types(shs__ds_reader_t *r, const json_t *obj);
/* The param dtype and the fp16 loss scaler into ds->vals; `fp16` is the
 * file's fp16 object (NULL: none). Errors: SHS_INVALID_ARG for fp16 and
 * bf16 both enabled. */
shs_status_t shs__ds_precision_finish(shs__ds_reader_t *r, const json_t *fp16, const shs__ds_fp16_t *f, int bf16);

/* optimizer (ds_config_optimizer.c) */
shs_status_t shs__ds_read_optimizer(shs__ds_reader_t *r, const json_t *obj);

/* scheduler (ds_config_scheduler.c): into ds->vals.strategy.lr_schedule */
shs_status_t shs__ds_read_scheduler(shs__ds_reader_t *r, const json_t *obj);

#endif /* SHS_HAVE_JANSSON */

#endif
