/* trace_perfetto.c - Chrome / Perfetto trace-event JSON export (see
 * trace_perfetto.h for the layout and where each slice's times come from).
 * What it is not: a reader; no JSON is built as a whole tree (events are
 * dumped one by one so a million-record trace needs no more memory than
 * the trace itself). */
#include "shardsim/trace_perfetto.h"
#include "shardsim/features.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shardsim/durable.h"

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>

/* 17 significant digits: every double prints as a decimal that reads back
 * as the same double (15 digits moved epoch-microsecond times by up to 5 us) */
#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(17))

/* The microseconds u that a reader of the Trace Event Format (ts in us,
 * the seconds u x 1e-6, as the Kineto reader computes them) turns back
 * into exactly s: s x 1e6, or a neighbouring double when that product
 * rounded. Times read from microseconds (Kineto, the text format, a
 * Horovod timeline) always have one; for another s the nearest is kept. */
static double us_of(double s) {
    double u = s * 1e6;
    if (u * 1e-6 == s) return u;
    double lo = u, hi = u;
    for (int k = 0; k < 4; k++) {
        lo = nextafter(lo, -INFINITY);
        hi = nextafter(hi, INFINITY);
        if (lo * 1e-6 == s) return lo;
        if (hi * 1e-6 == s) return hi;
    }
    return u;
}

/* dur d such that (ts + d) reads back as end_us exactly (ts + d == end_us). */
static double dur_of(double ts, double end_us) {
    double d = end_us - ts;
    for (int k = 0; k < 4 && ts + d != end_us; k++) d = nextafter(d, ts + d < end_us ? INFINITY : -INFINITY);
    return d < 0 ? 0 : d;
}

/* Dump one event (stealing the reference), comma-separated from the previous. */
static int put_event(FILE *f, json_t *ev, int *first) {
    if (!ev) return -1;
    if (!*first && fputs(",\n", f) == EOF) { json_decref(ev); return -1; }
    *first = 0;
    int rc = json_dumpf(ev, f, DUMP_FLAGS);
    json_decref(ev);
    return rc;
}

static json_t *meta_event(const char *name, int rank, const char *key, json_t *value) {
    json_t *args = json_object();
    json_object_set_new(args, key, value);
    return json_pack("{s:s,s:s,s:i,s:i,s:o}", "name", name, "ph", "M", "pid", rank, "tid", rank, "args", args);
}

/* A JSON string of s; bytes that are not valid UTF-8 (names from imported
 * files) become '?' rather than failing the export. */
static json_t *safe_string(const char *s) {
    json_t *j = json_string(s);
    if (j) return j;
    char buf[256];
    size_t n = 0;
    for (; s[n] && n + 1 < sizeof buf; n++) buf[n] = (unsigned char)s[n] < 0x80 ? s[n] : '?';
    buf[n] = 0;
    return json_string(buf);
}

static const char *category(shs_coll_op_t op) {
    return op == SHS_OP_WAIT ? "wait" : shs_coll_op_is_p2p(op) ? "p2p" : "collective";
}

static json_t *rec_args(const shs_trace_t *t, const shs_trace_rec_t *r, const char *time_src) {
    const char *marker = shs_trace_str(t, r->marker);
    json_t *a = json_pack("{s:o,s:I,s:s,s:I,s:o,s:I,s:s,s:o,s:o}", "comm", safe_string(t->comms[r->comm].name), "seq",
                          (json_int_t)r->seq, "op", shs_coll_op_name(r->op), "count", (json_int_t)r->count, "dtype",
                          r->dtype == SHS_TRACE_NONE ? json_null() : json_string(shs_dtype_name((shs_dtype_t)r->dtype)),
                          "bytes", (json_int_t)r->bytes, "bytes_scope", r->scope == SHS_BYTES_TOTAL ? "total" : "rank",
                          "marker", *marker ? safe_string(marker) : json_null(), "time", safe_string(time_src));
    if (!a) return NULL;
    if (r->redop != SHS_TRACE_NONE) json_object_set_new(a, "redop", json_string(shs_redop_name((shs_redop_t)r->redop)));
    if (r->root != SHS_TRACE_NONE) json_object_set_new(a, "root", json_integer(r->root));
    if (r->peer != SHS_TRACE_NONE) json_object_set_new(a, "peer", json_integer(r->peer));
    if (r->tag != SHS_TRACE_NONE) json_object_set_new(a, "tag", json_integer(r->tag));
    return a;
}

shs_status_t shs_trace_export_perfetto(const shs_trace_t *t, const char *path, shs_perfetto_opts_t *opts) {
    shs_perfetto_opts_t dflt = {0};
    if (!opts) opts = &dflt;
    opts->slices = opts->recorded = opts->estimated = opts->sequential = 0;
    char est_src[192];
    if (opts->net)
        snprintf(est_src, sizeof est_src, "estimate (%s, %s)", shs_net_algo_name(opts->algo), opts->net->name);
    shs_afile_t af; /* written whole or not at all */
    SHS_CHECK(shs_afile_open(&af, path, "w"));
    FILE *f = af.fp;
    int bad = fputs("{\"traceEvents\":[\n", f) == EOF, first = 1;
    for (int r = 0; r < t->world && !bad; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank %d", r);
        bad |= put_event(f, meta_event("process_name", r, "name", json_string(name)), &first);
        bad |= put_event(f, meta_event("process_sort_index", r, "sort_index", json_integer(r)), &first);
        bad |= put_event(f, meta_event("thread_name", r, "name", json_string(name)), &first);
        bad |= put_event(f, meta_event("thread_sort_index", r, "sort_index", json_integer(r)), &first);
    }
    for (int r = 0; r < t->world && !bad; r++) {
        double prev_end = 0; /* seconds: where the rank's last slice ended */
        for (size_t i = 0; i < t->ranks[r].n && !bad; i++) {
            const shs_trace_rec_t *x = &t->ranks[r].recs[i];
            double ts, dur;
            const char *src;
            int rec = 0;
            if (x->t_start >= 0 && x->t_end >= x->t_start) {
                rec = 1;
                ts = x->t_start;
                dur = x->t_end - x->t_start;
                src = "recorded";
                opts->recorded++;
            } else if (opts->net) {
                ts = prev_end;
                dur = shs_net_rec_time(opts->net, opts->algo, t, x);
                if (!isfinite(dur) || dur < 0) dur = 0;
                src = est_src;
                opts->estimated++;
            } else {
                ts = prev_end;
                dur = 1e-6;
                src = "sequential";
                opts->sequential++;
            }
            prev_end = ts + dur;
            /* a recorded slice ends at the recorded end, not at ts + dur rounded */
            double ts_us = us_of(ts), dur_us = dur_of(ts_us, us_of(rec ? x->t_end : ts + dur));
            json_t *args = rec_args(t, x, src);
            json_t *ev = args ? json_pack("{s:s,s:s,s:s,s:f,s:f,s:i,s:i,s:o}", "name", shs_coll_op_name(x->op), "cat",
                                          category(x->op), "ph", "X", "ts", ts_us, "dur", dur_us, "pid", r,
                                          "tid", r, "args", args)
                              : NULL;
            if (!ev) {
                shs_afile_discard(&af);
                return shs_set_error(SHS_HOST_OOM, "%s: out of memory building event %zu of rank %d", path, i, r);
            }
            bad |= put_event(f, ev, &first);
            opts->slices++;
        }
    }
    const char *timing = opts->sequential ? "sequential 1 us slices where the trace has no times"
                         : opts->estimated ? "network estimate where the trace has no times" : "recorded";
    json_t *other = json_pack("{s:s,s:o,s:i,s:I,s:s}", "generator", "shardsim", "source_format", safe_string(t->format), "world",
                              t->world, "records", (json_int_t)opts->slices, "timing", timing);
    if (!bad) bad |= fputs("\n],\"displayTimeUnit\":\"ms\",\"otherData\":", f) == EOF;
    if (!bad) bad |= !other || json_dumpf(other, f, DUMP_FLAGS) != 0;
    json_decref(other);
    if (!bad) bad |= fputs("}\n", f) == EOF;
    if (bad) {
        int err = errno;
        return shs_afile_fail(&af, err ? strerror(err) : NULL);
    }
    return shs_afile_commit(&af);
}

#else

shs_status_t shs_trace_export_perfetto(const shs_trace_t *t, const char *path, shs_perfetto_opts_t *opts) {
    (void)t;
    (void)opts;
    return shs_set_error(SHS_UNSUPPORTED, "%s: Perfetto export writes JSON: it %s", path,
                         shs_feature_missing(SHS_FEATURE_JANSSON));
}

#endif
