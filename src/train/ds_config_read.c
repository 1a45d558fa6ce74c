/* ds_config_read.c - the DeepSpeed config reader's value readers and
 * messages, shared by every section (ds_config_impl.h): typed values with
 * their ranges, "auto" named as the Hugging Face Trainer's, refusals by key
 * path and value, ignored keys and notes for the header.
 * What it is not: any section's keys (ds_config_zero.c, ...).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "train/ds_config_impl.h"

#ifdef SHS_HAVE_JANSSON

/* The error just shs__ds_set (SHS_UNSUPPORTED, "path: ...") kept for the one error
 * that names every refused key of the file. */
void shs__ds_keep_refused(shs__ds_reader_t *r) {
    const char *e = shs_last_error();
    size_t n = strlen(r->path);
    if (!strncmp(e, r->path, n) && !strncmp(e + n, ": ", 2)) e += n + 2;
    if (r->num_refused < SHS__DS_MAX_REFUSED) snprintf(r->refused[r->num_refused], sizeof r->refused[0], "%s", e);
    r->num_refused++;
}

/* "key" or "parent.key" */
void shs__ds_key_path(char *out, size_t n, const char *parent, const char *key) {
    if (parent && *parent) snprintf(out, n, "%s.%s", parent, key);
    else snprintf(out, n, "%s", key);
}

static char *show(const json_t *v, char *buf, size_t n) {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
    snprintf(buf, n, "%s", s ? s : "?");
    free(s);
    return buf;
}

shs_status_t shs__ds_not_modelled(shs__ds_reader_t *r, const char *kp, const json_t *v, const char *fmt, ...) {
    char val[128], why[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    r->not_modelled = 1;
    return shs_set_error(SHS_UNSUPPORTED, "%s: %s = %s is not modelled: %s", r->path, kp, show(v, val, sizeof val), why);
}

shs_status_t shs__ds_bad_type(shs__ds_reader_t *r, const char *kp, const json_t *v, const char *want) {
    char val[128];
    if (json_is_string(v) && !strcmp(json_string_value(v), "auto"))
        return shs_set_error(SHS_PARSE, "%s: %s = \"auto\": 'auto' is filled in by the Hugging Face Trainer; give %s",
                             r->path, kp, want);
    return shs_set_error(SHS_PARSE, "%s: %s = %s: want %s", r->path, kp, show(v, val, sizeof val), want);
}

shs_status_t shs__ds_get_bool(shs__ds_reader_t *r, const char *kp, const json_t *v, int *out) {
    if (!json_is_boolean(v)) return shs__ds_bad_type(r, kp, v, "true or false");
    *out = json_is_true(v);
    return SHS_OK;
}

shs_status_t shs__ds_get_num(shs__ds_reader_t *r, const char *kp, const json_t *v, double lo, double hi, double *out) {
    char want[96];
    snprintf(want, sizeof want, "a number in [%g, %g]", lo, hi);
    if (!json_is_number(v)) return shs__ds_bad_type(r, kp, v, want);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi) return shs__ds_bad_type(r, kp, v, want);
    *out = d;
    return SHS_OK;
}

/* An integer, or a real with an integral value (5e8 is common in configs). */
shs_status_t shs__ds_get_int(shs__ds_reader_t *r, const char *kp, const json_t *v, double lo, double hi, long *out) {
    char want[96];
    snprintf(want, sizeof want, "an integer in [%.0f, %.0f]", lo, hi);
    if (!json_is_number(v)) return shs__ds_bad_type(r, kp, v, want);
    double d = json_number_value(v);
    if (!isfinite(d) || d != floor(d) || d < lo || d > hi) return shs__ds_bad_type(r, kp, v, want);
    *out = (long)d;
    return SHS_OK;
}

shs_status_t shs__ds_get_str(shs__ds_reader_t *r, const char *kp, const json_t *v, const char **out) {
    if (!json_is_string(v)) return shs__ds_bad_type(r, kp, v, "a string");
    *out = json_string_value(v);
    return SHS_OK;
}

shs_status_t shs__ds_want_object(shs__ds_reader_t *r, const char *kp, const json_t *v) {
    return json_is_object(v) ? SHS_OK : shs__ds_bad_type(r, kp, v, "an object");
}

shs_status_t shs__ds_unknown_key(shs__ds_reader_t *r, const char *kp) {
    return shs_set_error(SHS_UNSUPPORTED, "%s: unknown key %s: DeepSpeed refuses it too (its settings of this section "
                         "are a model that forbids unknown fields)", r->path, kp);
}

shs_status_t shs__ds_unknown_ignored(shs__ds_reader_t *r, const char *kp, const json_t *v, void *sec) {
    shs__ds_ignore(r, kp, "not a DeepSpeed key: DeepSpeed reads this section's keys one by one and passes over it");
    return SHS_OK;
}

void shs__ds_ignore(shs__ds_reader_t *r, const char *kp, const char *why) {
    shs_ds_config_t *ds = r->ds;
    if (ds->num_ignored < SHS_DS_MAX_NOTES)
        snprintf(ds->ignored[ds->num_ignored++], sizeof ds->ignored[0], "%.79s (%s)", kp, why);
}

const shs__ds_key_t *shs__ds_find_key(const shs__ds_key_t *rows, size_t n, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].key, key)) return &rows[i];
    return NULL;
}

shs_status_t shs__ds_read_num_at(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                 void *sec) {
    return shs__ds_get_num(r, kp, v, row->lo, row->hi, (double *)((char *)sec + row->at));
}

shs_status_t shs__ds_read_int_at(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                 void *sec) {
    return shs__ds_get_int(r, kp, v, row->lo, row->hi, (long *)((char *)sec + row->at));
}

shs_status_t shs__ds_read_bool_at(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                  void *sec) {
    return shs__ds_get_bool(r, kp, v, (int *)((char *)sec + row->at));
}

/* One key taken as its row says. */
static shs_status_t take_key(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                             void *sec) {
    switch (row->take) {
    case SHS__DS_MAPPED: return row->read(r, row, kp, v, sec);
    case SHS__DS_IGNORED: shs__ds_ignore(r, kp, row->shardsim); return SHS_OK;
    case SHS__DS_REFUSE_TRUE: return shs__ds_refuse_true(r, kp, v, row->shardsim);
    case SHS__DS_REFUSE_FALSE: {
        int b = 0;
        SHS_CHECK(shs__ds_get_bool(r, kp, v, &b));
        return b ? SHS_OK : shs__ds_not_modelled(r, kp, v, "%s", row->shardsim);
    }
    case SHS__DS_ONLY_DEFAULT: return shs__ds_only_default(r, kp, v, row->dflt, row->shardsim);
    case SHS__DS_REFUSED: return shs__ds_not_modelled(r, kp, v, "%s", row->shardsim);
    }
    return SHS_OK;
}

shs_status_t shs__ds_values_only(shs__ds_reader_t *r, const char *kp, shs_status_t st) {
    if (r->ds->use == SHS_DS_FOR_COMPARE && st == SHS_UNSUPPORTED && r->not_modelled) {
        shs__ds_ignore(r, kp, SHS__DS_VALUES_ONLY_WHY);
        st = SHS_OK;
    }
    r->not_modelled = 0;
    return st;
}

/* A row's key: for compare, a values_only key (or one inside such a key) is
 * read as for train (DeepSpeed's refusals stay), its "not modelled"
 * refusals are dropped, and the outermost such key is listed as ignored. */
static shs_status_t take_row(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                             void *sec) {
    int outer = !r->values_only && row->values_only, saved = r->values_only;
    r->values_only |= row->values_only;
    r->not_modelled = 0;
    shs_status_t st = take_key(r, row, kp, v, sec);
    if (r->ds->use == SHS_DS_FOR_COMPARE && r->values_only) {
        if (st == SHS_UNSUPPORTED && r->not_modelled) st = SHS_OK;
        size_t kl = strlen(kp);
        const char *last = r->ds->num_ignored ? r->ds->ignored[r->ds->num_ignored - 1] : "";
        int listed = !strncmp(last, kp, kl) && last[kl] == ' '; /* the reader listed it already */
        if (st == SHS_OK && outer && row->take != SHS__DS_IGNORED && !listed)
            shs__ds_ignore(r, kp, SHS__DS_VALUES_ONLY_WHY);
    }
    r->not_modelled = 0;
    r->values_only = saved;
    return st;
}

shs_status_t shs__ds_read_keys(shs__ds_reader_t *r, const char *section, const json_t *obj, const shs__ds_key_t *rows,
                               size_t n, void *sec, shs__ds_unknown_fn unknown) {
    SHS_CHECK(shs__ds_want_object(r, section, obj));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        char kp[128];
        shs__ds_key_path(kp, sizeof kp, section, key);
        const shs__ds_key_t *row = shs__ds_find_key(rows, n, key);
        if (row) SHS__DS_KEY(r, take_row(r, row, kp, v, sec));
        else SHS__DS_KEY(r, unknown ? unknown(r, kp, v, sec) : shs__ds_unknown_key(r, kp));
    }
    return SHS_OK;
}

void shs__ds_note(shs_ds_config_t *ds, const char *fmt, ...) {
    if (ds->num_notes >= SHS_DS_MAX_NOTES) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ds->notes[ds->num_notes++], sizeof ds->notes[0], fmt, ap);
    va_end(ap);
}

/* A flag that is refused when true (default false). */
shs_status_t shs__ds_refuse_true(shs__ds_reader_t *r, const char *kp, const json_t *v, const char *why) {
    int b = 0;
    SHS_CHECK(shs__ds_get_bool(r, kp, v, &b));
    return b ? shs__ds_not_modelled(r, kp, v, "%s", why) : SHS_OK;
}

/* A number accepted only at DeepSpeed's default `dflt`. */
shs_status_t shs__ds_only_default(shs__ds_reader_t *r, const char *kp, const json_t *v, double dflt, const char *why) {
    double d = 0;
    SHS_CHECK(shs__ds_get_num(r, kp, v, -1e300, 1e300, &d));
    return d == dflt ? SHS_OK : shs__ds_not_modelled(r, kp, v, "%s (only DeepSpeed's default %g is)", why, dflt);
}

shs_status_t shs__ds_dtype(shs__ds_reader_t *r, const char *kp, const json_t *v, shs_dtype_t *out) {
    const char *s = NULL;
    SHS_CHECK(shs__ds_get_str(r, kp, v, &s));
    if (!strcasecmp(s, "fp32") || !strcasecmp(s, "float32") || !strcasecmp(s, "float")) *out = SHS_F32;
    else if (!strcasecmp(s, "fp16") || !strcasecmp(s, "float16") || !strcasecmp(s, "half")) *out = SHS_F16;
    else if (!strcasecmp(s, "bf16") || !strcasecmp(s, "bfloat16")) *out = SHS_BF16;
    else return shs__ds_bad_type(r, kp, v, "\"fp32\", \"fp16\" or \"bf16\"");
    return SHS_OK;
}

#endif
