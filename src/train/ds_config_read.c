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
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
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
    return shs_set_error(SHS_UNSUPPORTED,
                         "%s: unknown key %s (shardsim refuses keys it does not know rather than ignore a "
                         "misspelt one; see include/shardsim/ds_config.h)", r->path, kp);
}

/* An ignored key: noted with its reason; 1 if `key` is in the table. */
int shs__ds_try_ignored(shs__ds_reader_t *r, const shs__ds_ignored_key_t *t, size_t n, const char *parent, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].key, key)) {
            shs_ds_config_t *ds = r->ds;
            if (ds->num_ignored < SHS_DS_MAX_NOTES) {
                char kp[80];
                shs__ds_key_path(kp, sizeof kp, parent, key);
                snprintf(ds->ignored[ds->num_ignored++], sizeof ds->ignored[0], "%s (%s)", kp, t[i].why);
            }
            return 1;
        }
    return 0;
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
