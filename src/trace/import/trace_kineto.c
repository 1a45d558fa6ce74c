/* trace_kineto.c - import PyTorch profiler (Kineto) Chrome-trace JSON, one
 * file per rank, read by a pull scanner (trace_json_scan.h): the file and
 * the communication events it holds stay in memory, no tree of its
 * millions of other events.
 *
 * Read from "traceEvents" (complete events, "ph": "X"), in time order:
 *   GPU kernels ("cat": "kernel") whose args carry "Collective name" and
 *     the record_param_comms args below, as Holistic Trace Analysis reads
 *     them: their ts/dur are when the collective ran on the device, and
 *     any kernel name (ncclDevKernel_Generic too) is taken; preferred;
 *   else record_param_comms with args "Collective name", "In msg nelems",
 *     "Out msg nelems", "Group size", "dtype", "Process Group Name",
 *     "Process Group Ranks", "In split size", "Out split size" (PyTorch >=
 *     2.1, torch/csrc/profiler/util.cpp saveNcclMeta);
 *   else the older "nccl:<op>" annotations with args "Input Dims" (element
 *     counts are their product) and "Input type".
 * A call's size is required: an event without "In msg nelems" (or an
 * annotation without "Input Dims") is refused, and so is a file whose only
 * communication events are ncclKernel_<Op>_* / ncclDevKernel_<Op>_*
 * kernels without args (sizes unknown), each naming the event, not read
 * as calls of 0 bytes; barrier and wait move no data and need none.
 * The rank is distributedInfo.rank, else the file name's number;
 * distributedInfo.world_size declares the world: a "Process Group Ranks"
 * member or a "Group size" beyond it is refused. A file is one process's
 * view (t->views), as the profiler writes it per rank: the other members
 * of its groups were not traced here, unless their files are read too.
 * ts/dur (microseconds) become start/end times; a communication event's ts
 * must be a number and dur, when present, too, both >= 0 and ts + dur at
 * most 2^63 ns (SHS_TRACE_MAX_TIME_S, the range of the profiler's 64-bit
 * nanosecond clock): a negative, absurd or non-numeric one is refused, not
 * dropped. Sequence numbers are positions.
 * Sizes: "In msg nelems" (record_param_comms, as PyTorch ET's
 * in_msg_nelems) and "Input Dims"[0] count the elements of the rank's input
 * tensor: one rank's part for all_gather, the whole input for
 * reduce_scatter, a rank's whole send buffer for all_to_all
 * (shs_trace_input_scope()); bytes = elements x the dtype's size. An
 * all_to_allv's "In split size" / "Out split size" (rows of dim 0 per
 * peer) give v_bytes (trace.h); a list the profiler truncated (beyond 30
 * ranks) leaves it even, and the trace's note says so.
 * What it is not: a reader of CPU ops, memory events or flows.
 */
#include <stdlib.h>
#include <string.h>

#include "shardsim/trace_import.h"
#include "trace/trace_json.h"
#include "trace/import/trace_kineto.h"
#include "trace/trace_util.h"

static const char *const arg_names[SHS__K_NARGS] = {"Collective name", "In msg nelems", "Out msg nelems", "dtype",
                                                    "Group size", "Process Group Name", "Process Group Ranks",
                                                    "In split size", "Out split size", "Input Dims", "Input type"};

typedef struct {
    shs__kev_t *v;
    size_t n, cap;
    size_t err_idx;                /* the first bad event of this kind (array order), SIZE_MAX none */
    char err[200];
} form_t;

typedef struct {
    const shs_trace_input_t *in;
    shs__js_t js;
    form_t form[NUM_FORMS];
    shs__js_span_t di_rank, di_world;
    int have_events;
} kin_t;

static shs_status_t eerr(const shs_trace_input_t *in, size_t i, const char *what) {
    return shs_set_error(SHS_PARSE, "%s: traceEvents[%zu]: %s", in->name, i, what);
}

/* A span's string into buf (decoded), or "" when absent or not a string. */
static const char *str_of(const kin_t *K, const shs__js_span_t *v, char *buf, size_t cap) {
    if (v->kind != SHS__JS_STRING || shs__js_str(&K->js, v, buf, cap)) buf[0] = 0;
    return buf;
}

/* 0: not a comm event of `form`; 1: is, op set; -1: is, with an unknown op. */
static int classify(const kin_t *K, const shs__kev_t *e, int form, shs_coll_op_t *op) {
    char nm[256], cn[128], cat[32];
    if (!shs__js_is(&K->js, &e->ph, "X") || e->name.kind != SHS__JS_STRING) return 0;
    const char *s = str_of(K, &e->name, nm, sizeof nm);
    if (form == FORM_KERNEL_ARGS || form == FORM_PARAM_COMMS) {
        if (e->a[SHS__K_COLL].kind != SHS__JS_STRING) return 0;
        if (form == FORM_KERNEL_ARGS && strcmp(str_of(K, &e->cat, cat, sizeof cat), "kernel") != 0) return 0;
        if (form == FORM_PARAM_COMMS && strcmp(s, "record_param_comms") != 0) return 0;
        return shs__torch_coll_op(str_of(K, &e->a[SHS__K_COLL], cn, sizeof cn), op) ? -1 : 1;
    }
    if (form == FORM_NCCL_ANNOTATION) {
        if (strncmp(s, "nccl:", 5) != 0) return 0;
        return shs__torch_coll_op(s + 5, op) ? -1 : 1;
    }
    const char *k = strncmp(s, "ncclKernel_", 11) == 0 ? s + 11 : strncmp(s, "ncclDevKernel_", 14) == 0 ? s + 14 : NULL;
    if (!k) return 0;
    char opname[32];
    size_t n = strcspn(k, "_(");
    if (n >= sizeof opname) return -1;
    memcpy(opname, k, n);
    opname[n] = 0;
    return shs__torch_coll_op(opname, op) ? -1 : 1;
}

static void form_error(form_t *f, size_t idx, const char *what) {
    if (f->err_idx != SIZE_MAX) return;
    f->err_idx = idx;
    snprintf(f->err, sizeof f->err, "%s", what);
}

/* An event read: kept for each kind it is a communication event of. */
static shs_status_t keep(kin_t *K, shs__kev_t *e) {
    for (int form = 0; form < NUM_FORMS; form++) {
        form_t *f = &K->form[form];
        int c = classify(K, e, form, &e->op);
        if (c == 0) continue;
        if (c < 0) { form_error(f, e->idx, "unknown collective name"); continue; }
        char m[200];
        if (e->ts.kind != SHS__JS_NUMBER || shs__js_num(&K->js, &e->ts, &e->tsv)) {
            form_error(f, e->idx, "communication event without a numeric ts");
            continue;
        }
        e->durv = 0;
        if (e->dur.kind != SHS__JS_NONE && (e->dur.kind != SHS__JS_NUMBER || shs__js_num(&K->js, &e->dur, &e->durv))) {
            form_error(f, e->idx, "'dur' is not a number");
            continue;
        }
        double s;
        if (shs__trace_time(e->tsv, 1e-6, &s)) {
            snprintf(m, sizeof m, "'ts' %g us is negative or beyond 2^63 ns (the profiler's clock range)", e->tsv);
            form_error(f, e->idx, m);
            continue;
        }
        if (shs__trace_time(e->durv, 1e-6, &s) || shs__trace_time(e->tsv + e->durv, 1e-6, &s)) {
            snprintf(m, sizeof m, "'dur' %g us is negative, or ends the call beyond 2^63 ns (the profiler's clock "
                     "range)", e->durv);
            form_error(f, e->idx, m);
            continue;
        }
        if (f->n == f->cap) {
            size_t cap = f->cap ? 2 * f->cap : 64;
            shs__kev_t *nv = realloc(f->v, cap * sizeof *nv);
            if (!nv) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", K->in->name);
            f->v = nv;
            f->cap = cap;
        }
        f->v[f->n++] = *e;
    }
    return SHS_OK;
}

/* traceEvents[idx], at the scanner's position: its fields, then keep(). */
static shs_status_t read_event(kin_t *K, size_t idx) {
    shs__js_t *js = &K->js;
    if (shs__js_peek(js) != SHS__JS_OBJECT) return shs__js_skip(js);
    shs__kev_t e;
    memset(&e, 0, sizeof e);
    e.idx = idx;
    SHS_CHECK(shs__js_enter(js, SHS__JS_OBJECT));
    shs__js_span_t key;
    shs_status_t st;
    int k;
    while ((k = shs__js_member(js, &key, &st)) == 1) {
        shs__js_span_t *slot = shs__js_is(js, &key, "name") ? &e.name : shs__js_is(js, &key, "ph") ? &e.ph
                               : shs__js_is(js, &key, "cat") ? &e.cat : shs__js_is(js, &key, "ts") ? &e.ts
                               : shs__js_is(js, &key, "dur") ? &e.dur : NULL;
        if (slot) {
            SHS_CHECK(shs__js_value(js, slot));
            continue;
        }
        if (!shs__js_is(js, &key, "args") || shs__js_peek(js) != SHS__JS_OBJECT) {
            SHS_CHECK(shs__js_skip(js));
            continue;
        }
        SHS_CHECK(shs__js_enter(js, SHS__JS_OBJECT));
        int ka;
        while ((ka = shs__js_member(js, &key, &st)) == 1) {
            int a = 0;
            while (a < SHS__K_NARGS && !shs__js_is(js, &key, arg_names[a])) a++;
            if (a < SHS__K_NARGS) SHS_CHECK(shs__js_value(js, &e.a[a]));
            else SHS_CHECK(shs__js_skip(js));
        }
        if (ka < 0) return st;
    }
    if (k < 0) return st;
    return keep(K, &e);
}

/* The document: its "traceEvents" and "distributedInfo"; every other value skipped. */
static shs_status_t scan(kin_t *K) {
    shs__js_t *js = &K->js;
    SHS_CHECK(shs__js_enter(js, SHS__JS_OBJECT));
    shs__js_span_t key;
    shs_status_t st;
    int k;
    while ((k = shs__js_member(js, &key, &st)) == 1) {
        if (shs__js_is(js, &key, "traceEvents") && shs__js_peek(js) == SHS__JS_ARRAY) {
            SHS_CHECK(shs__js_enter(js, SHS__JS_ARRAY));
            K->have_events = 1;
            int ke;
            for (size_t i = 0; (ke = shs__js_element(js, &st)) == 1; i++) SHS_CHECK(read_event(K, i));
            if (ke < 0) return st;
        } else if (shs__js_is(js, &key, "distributedInfo") && shs__js_peek(js) == SHS__JS_OBJECT) {
            SHS_CHECK(shs__js_enter(js, SHS__JS_OBJECT));
            int kd;
            while ((kd = shs__js_member(js, &key, &st)) == 1) {
                if (shs__js_is(js, &key, "rank")) SHS_CHECK(shs__js_value(js, &K->di_rank));
                else if (shs__js_is(js, &key, "world_size")) SHS_CHECK(shs__js_value(js, &K->di_world));
                else SHS_CHECK(shs__js_skip(js));
            }
            if (kd < 0) return st;
        } else {
            SHS_CHECK(shs__js_skip(js));
        }
    }
    if (k < 0) return st;
    shs__js_kind_t after = shs__js_peek(js);
    if (after != SHS__JS_NONE || js->i < js->n) return shs__js_error(js, js->i, "more after the document's end");
    return SHS_OK;
}

static int cmp_ev(const void *a, const void *b) {
    const shs__kev_t *x = a, *y = b;
    return x->tsv < y->tsv ? -1 : x->tsv > y->tsv ? 1 : (x->idx > y->idx) - (x->idx < y->idx);
}

shs_status_t shs_trace_import_kineto(shs_trace_t *t, const shs_trace_input_t *in) {
    snprintf(t->format, sizeof t->format, "kineto");
    kin_t *K = calloc(1, sizeof *K);
    if (!K) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name);
    K->in = in;
    shs__js_init(&K->js, in->name, in->buf, in->len);
    for (int f = 0; f < NUM_FORMS; f++) K->form[f].err_idx = SIZE_MAX;
    shs_status_t st = scan(K);
    int64_t rank = in->rank >= 0 ? in->rank : 0, world = 0;
    if (st == SHS_OK && !K->have_events) st = shs_set_error(SHS_PARSE, "%s: no \"traceEvents\" array", in->name);
    if (st == SHS_OK && K->di_rank.kind != SHS__JS_NONE &&
        (shs__js_int(&K->js, &K->di_rank, &rank) || rank < 0 || rank >= SHS_TRACE_MAX_WORLD))
        st = shs_set_error(SHS_PARSE, "%s: distributedInfo.rank is not a rank from 0 to %d (negative, absurd or not an "
                           "integer)", in->name, SHS_TRACE_MAX_WORLD - 1);
    if (st == SHS_OK && K->di_world.kind != SHS__JS_NONE &&
        (shs__js_int(&K->js, &K->di_world, &world) || world < 1 || world > SHS_TRACE_MAX_WORLD || rank >= world))
        st = shs_set_error(SHS_PARSE, "%s: distributedInfo.world_size is not a rank count from 1 to %d above "
                           "distributedInfo.rank %lld", in->name, SHS_TRACE_MAX_WORLD, (long long)rank);
    /* the first kind of event the file has; its first bad event, if any, is the error */
    int form = 0;
    while (form < NUM_FORMS && K->form[form].n == 0 && K->form[form].err_idx == SIZE_MAX) form++;
    form_t *f = form < NUM_FORMS ? &K->form[form] : NULL;
    if (st == SHS_OK && f && f->err_idx != SIZE_MAX) st = eerr(in, f->err_idx, f->err);
    if (st == SHS_OK && form == FORM_KERNEL_NAME) {
        char nm[64], m[320];
        snprintf(m, sizeof m, "kernel '%s' carries no 'In msg nelems' args, and no other event of the file gives the "
                 "call's size (PyTorch >= 2.1 records them on the kernel and on record_param_comms)",
                 str_of(K, &f->v[0].name, nm, sizeof nm));
        st = eerr(in, f->v[0].idx, m);
    }
    int wc, truncated = 0;
    if (st == SHS_OK) st = shs_trace_grow_identity_comm(t, "world", (int)(world > rank ? world : rank + 1), &wc);
    if (st == SHS_OK) t->views = 1; /* one process's view: the other members were traced in other files, if at all */
    if (st == SHS_OK && f) {
        qsort(f->v, f->n, sizeof *f->v, cmp_ev);
        for (size_t k = 0; k < f->n && st == SHS_OK; k++)
            st = shs__kineto_record(t, &K->js, in, &f->v[k], form, (int)rank, world, wc, &truncated);
    }
    if (st == SHS_OK && truncated)
        snprintf(t->note, sizeof t->note, "%s: an all_to_allv's split sizes were truncated by the profiler (more "
                 "than 30 ranks): timed as an even exchange", in->name);
    for (int k = 0; k < NUM_FORMS; k++) free(K->form[k].v);
    free(K);
    return st;
}
