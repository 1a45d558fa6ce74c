/* trace_kineto_rec.c - one Kineto communication event to a trace record
 * (see trace_kineto.h; the rules are in trace_kineto.c's header).
 * What it is not: the scan of the file (trace_kineto.c). */
#include <stdlib.h>
#include <string.h>

#include "trace/import/trace_kineto.h"
#include "trace/trace_json.h"
#include "trace/trace_util.h"

static shs_status_t eerr(const shs_trace_input_t *in, size_t i, const char *what) {
    return shs_set_error(SHS_PARSE, "%s: traceEvents[%zu]: %s", in->name, i, what);
}

/* An int arg: 1 present and an integer in [lo, hi], 0 absent, -1 otherwise. */
static int arg_int(const shs__js_t *js, const shs__js_span_t *v, int64_t lo, int64_t hi, int64_t *out) {
    if (v->kind == SHS__JS_NONE) return 0;
    return shs__js_int(js, v, out) == 0 && *out >= lo && *out <= hi ? 1 : -1;
}

/* An integer list written as a string ("[0, 1]") or a JSON array. */
static int arg_list(const shs__js_t *js, const shs__js_span_t *v, int64_t **out, int *n, int *truncated) {
    *out = NULL;
    *n = 0;
    *truncated = 0;
    if (v->kind == SHS__JS_NONE) return 0;
    size_t cap = v->kind == SHS__JS_STRING ? v->n + 1 : v->kind == SHS__JS_ARRAY ? v->n + 1 : 0;
    if (!cap) return -1;
    char *s = malloc(cap);
    if (!s) return -1;
    int bad = v->kind == SHS__JS_STRING ? shs__js_str(js, v, s, cap) : (memcpy(s, js->b + v->at, v->n), s[v->n] = 0, 0);
    if (!bad) bad = shs__int_list(s, out, n, truncated);
    free(s);
    return bad ? -1 : 1;
}

/* The process group of the event: the identity world (wc), or a group of
 * its "Process Group Ranks"; the rank's position in it in *self. */
static shs_status_t group_of(shs_trace_t *t, const shs__js_t *js, const shs_trace_input_t *in, const shs__kev_t *e,
                             int rank, int64_t world, int wc, int *comm, int *self) {
    char m[200], name[80];
    int64_t gsize = 0;
    if (arg_int(js, &e->a[SHS__K_GSIZE], 1, SHS_TRACE_MAX_WORLD, &gsize) < 0)
        return eerr(in, e->idx, "'Group size' is not a rank count");
    if (world > 0 && gsize > world) {
        snprintf(m, sizeof m, "'Group size' %lld is beyond distributedInfo.world_size %lld", (long long)gsize,
                 (long long)world);
        return eerr(in, e->idx, m);
    }
    *comm = wc;
    *self = rank;
    int64_t *ranks;
    int nr, cut;
    int k = arg_list(js, &e->a[SHS__K_PGRANKS], &ranks, &nr, &cut);
    if (k < 0) return eerr(in, e->idx, "'Process Group Ranks' is not a list of ranks");
    if (k == 0 || nr == 0) { /* none: the world */
        free(ranks);
        return SHS_OK;
    }
    int isid = 1;
    for (int q = 0; q < nr; q++) {
        if (ranks[q] >= SHS_TRACE_MAX_WORLD || (world > 0 && ranks[q] >= world)) {
            snprintf(m, sizeof m, "'Process Group Ranks' names rank %lld, beyond %s %lld", (long long)ranks[q],
                     world > 0 ? "distributedInfo.world_size" : "the largest world", (long long)(world > 0 ? world : SHS_TRACE_MAX_WORLD));
            free(ranks);
            return eerr(in, e->idx, m);
        }
        isid &= ranks[q] == q;
    }
    if (cut) { /* the profiler listed 30: the members are known only for the whole world in order */
        int whole = isid && world > 0 && gsize == world;
        free(ranks);
        if (whole) return SHS_OK;
        snprintf(m, sizeof m, "'Process Group Ranks' was truncated by the profiler (%d of %lld ranks listed): the "
                 "group's members are unknown", nr, (long long)gsize);
        return eerr(in, e->idx, m);
    }
    char pg[64];
    if (e->a[SHS__K_PGNAME].kind != SHS__JS_STRING || shs__js_str(js, &e->a[SHS__K_PGNAME], pg, sizeof pg)) strcpy(pg, "?");
    snprintf(name, sizeof name, "pg%s", pg);
    int *ri = malloc((size_t)nr * sizeof *ri);
    if (!ri) {
        free(ranks);
        return shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name);
    }
    *self = -1;
    for (int q = 0; q < nr; q++) {
        ri[q] = (int)ranks[q];
        if (ri[q] == rank) *self = q;
    }
    free(ranks);
    shs_status_t st = isid ? shs_trace_grow_identity_comm(t, "world", nr, comm) : shs_trace_add_comm(t, name, nr, ri, comm);
    free(ri);
    if (st != SHS_OK) return eerr(in, e->idx, shs_last_error());
    return SHS_OK;
}

/* An all_to_allv's v_bytes from its split sizes. */
static shs_status_t split_bytes(const shs__js_t *js, const shs_trace_input_t *in, const shs__kev_t *e, int g, int self,
                                uint64_t in_n, uint64_t out_n, size_t es, uint64_t *v, int *truncated) {
    int64_t *a = NULL, *b = NULL;
    int na, nb, ca, cb;
    char why[160], m[220];
    *v = 0;
    if (arg_list(js, &e->a[SHS__K_INSPLIT], &a, &na, &ca) < 0 || arg_list(js, &e->a[SHS__K_OUTSPLIT], &b, &nb, &cb) < 0) {
        free(a);
        free(b);
        return eerr(in, e->idx, "'In split size' / 'Out split size' is not a list of sizes");
    }
    shs_status_t st = SHS_OK;
    if (ca || cb) *truncated = 1; /* cut by the profiler: timed as even (the note says so) */
    else if ((na || nb) && shs__a2av_bytes(a, na, b, nb, g, self, in_n, out_n, es, v, why, sizeof why)) {
        snprintf(m, sizeof m, "all_to_allv split sizes: %s", why);
        st = eerr(in, e->idx, m);
    }
    free(a);
    free(b);
    return st;
}

shs_status_t shs__kineto_record(shs_trace_t *t, const shs__js_t *js, const shs_trace_input_t *in, const shs__kev_t *e,
                                int form, int rank, int64_t world, int wc, int *truncated) {
    shs_trace_rec_t r = shs_trace_rec_init();
    char why[200], buf[96];
    r.op = e->op;
    r.rank = rank;
    r.comm = wc;
    r.src_line = (int64_t)e->idx + 1; /* traceEvents[idx], from 1 (0 is "unknown") */
    if (shs_coll_op_is_p2p(r.op)) return eerr(in, e->idx, "send/recv: the profiler does not record the peer");
    r.t_start = e->tsv * 1e-6;
    r.t_end = (e->tsv + e->durv) * 1e-6;
    int sized = r.op != SHS_OP_BARRIER && r.op != SHS_OP_WAIT; /* the ops that move data */
    uint64_t nel = 0;
    size_t es = 1; /* no dtype given: elements counted as bytes */
    if (form == FORM_KERNEL_ARGS || form == FORM_PARAM_COMMS) {
        int64_t v = 0, outn;
        int k = arg_int(js, &e->a[SHS__K_IN], 0, (int64_t)SHS_TRACE_MAX_BYTES, &v);
        if (k < 0) return eerr(in, e->idx, "'In msg nelems' negative or absurd");
        if (k == 0 && sized) {
            snprintf(why, sizeof why, "%s without 'In msg nelems': the call's size is unknown",
                     shs_coll_op_name(r.op));
            return eerr(in, e->idx, why);
        }
        nel = (uint64_t)v;
        outn = (int64_t)nel;
        if (arg_int(js, &e->a[SHS__K_OUT], 0, (int64_t)SHS_TRACE_MAX_BYTES, &outn) < 0)
            return eerr(in, e->idx, "'Out msg nelems' negative or absurd");
        const shs__js_span_t *dt = &e->a[SHS__K_DTYPE];
        if (dt->kind == SHS__JS_STRING &&
            (shs__js_str(js, dt, buf, sizeof buf) || shs__torch_dtype(buf, &r.dtype, &es))) {
            snprintf(why, sizeof why, "dtype '%.60s' is not a torch dtype", buf);
            return eerr(in, e->idx, why);
        }
        int self = -1;
        SHS_CHECK(group_of(t, js, in, e, rank, world, wc, &r.comm, &self));
        if (r.op == SHS_OP_ALL_TO_ALLV && self >= 0)
            SHS_CHECK(split_bytes(js, in, e, t->comms[r.comm].size, self, nel, (uint64_t)outn, es, &r.v_bytes,
                                  truncated));
        r.count = r.op == SHS_OP_REDUCE_SCATTER ? (uint64_t)outn : nel;
    } else { /* FORM_NCCL_ANNOTATION */
        const shs__js_span_t *dims = &e->a[SHS__K_DIMS];
        shs__js_t sub;
        shs_status_t st;
        int have = 0;
        if (dims->kind == SHS__JS_ARRAY) { /* [[d0, d1, ...], ...]: the first input's shape */
            shs__js_init(&sub, in->name, js->b + dims->at, dims->n);
            if (shs__js_enter(&sub, SHS__JS_ARRAY) == SHS_OK && shs__js_element(&sub, &st) == 1 &&
                shs__js_peek(&sub) == SHS__JS_ARRAY && shs__js_enter(&sub, SHS__JS_ARRAY) == SHS_OK) {
                have = 1;
                nel = 1;
                int k;
                while ((k = shs__js_element(&sub, &st)) == 1) {
                    shs__js_span_t d;
                    int64_t v;
                    if (shs__js_value(&sub, &d) != SHS_OK || shs__js_int(&sub, &d, &v) || v < 0 ||
                        (v && nel > SHS_TRACE_MAX_BYTES / (uint64_t)v))
                        return eerr(in, e->idx, "'Input Dims' negative or absurd");
                    nel *= (uint64_t)v;
                }
                if (k < 0) return eerr(in, e->idx, "'Input Dims' negative or absurd");
            }
        }
        if (!have && sized) {
            snprintf(why, sizeof why, "nccl:%s without 'Input Dims': the call's size is unknown (the profiler "
                     "records shapes with record_shapes=True)", shs_coll_op_name(r.op));
            return eerr(in, e->idx, why);
        }
        const shs__js_span_t *ty = &e->a[SHS__K_ITYPE];
        shs__js_span_t t0 = *ty;
        if (ty->kind == SHS__JS_ARRAY) { /* ["float", ...]: the first input's */
            shs__js_init(&sub, in->name, js->b + ty->at, ty->n);
            t0.kind = SHS__JS_NONE;
            if (shs__js_enter(&sub, SHS__JS_ARRAY) == SHS_OK && shs__js_element(&sub, &st) == 1 &&
                shs__js_value(&sub, &t0) == SHS_OK)
                t0.at += ty->at;
        }
        if (t0.kind == SHS__JS_STRING &&
            (shs__js_str(js, &t0, buf, sizeof buf) || shs__torch_dtype(buf, &r.dtype, &es))) {
            snprintf(why, sizeof why, "'Input type' '%.60s' is not a torch dtype", buf);
            return eerr(in, e->idx, why);
        }
        r.count = nel;
    }
    r.bytes = nel * es;
    r.scope = shs_trace_input_scope(r.op);
    if (r.op == SHS_OP_ALL_REDUCE || r.op == SHS_OP_REDUCE_SCATTER || r.op == SHS_OP_REDUCE) r.redop = SHS_SUM;
    if (r.op == SHS_OP_BROADCAST || r.op == SHS_OP_REDUCE || r.op == SHS_OP_GATHER || r.op == SHS_OP_SCATTER) r.root = 0;
    if (shs_trace_comm_local(t, r.comm, r.rank) < 0) return eerr(in, e->idx, "rank is not in its process group");
    if (shs_trace_append(t, &r) != SHS_OK) return eerr(in, e->idx, shs_last_error());
    return SHS_OK;
}
