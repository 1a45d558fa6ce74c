/* ds_config_impl.h - private to the DeepSpeed config reader
 * (src/train/ds_config*.c): the reading state, the value readers and
 * messages every section shares, and each section's entry points.
 * What it is not: the mapping itself (each section's file says it) or the
 * public API (include/shardsim/ds_config.h).
 */
#ifndef SHARDSIM_TRAIN_DS_CONFIG_IMPL_H
#define SHARDSIM_TRAIN_DS_CONFIG_IMPL_H

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

/* Keys accepted without effect, with the reason the header shows. */
typedef struct {
    const char *key, *why;
} shs__ds_ignored_key_t;

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
/* SHS_UNSUPPORTED "path: unknown key KP (...)" */
shs_status_t shs__ds_unknown_key(shs__ds_reader_t *r, const char *kp);
/* An ignored key: noted with its reason; 1 if `key` is in the table. */
int shs__ds_try_ignored(shs__ds_reader_t *r, const shs__ds_ignored_key_t *t, size_t n, const char *parent,
                        const char *key);
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

#endif /* SHS_HAVE_JANSSON */

#endif
