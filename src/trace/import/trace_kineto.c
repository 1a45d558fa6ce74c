/* trace_kineto.c - import PyTorch profiler (Kineto) Chrome-trace JSON, one
 * file per rank.
 *
 * Read from "traceEvents" (complete events, "ph": "X"), in time order:
 *   GPU kernels ("cat": "kernel") whose args carry "Collective name" and
 *     the record_param_comms args below, as Holistic Trace Analysis reads
 *     them: their ts/dur are when the collective ran on the device, and
 *     any kernel name (ncclDevKernel_Generic too) is taken; preferred;
 *   else record_param_comms with args "Collective name", "In msg nelems",
 *     "Out msg nelems", "Group size", "dtype", "Process Group Name",
 *     "Process Group Ranks" (PyTorch >= 2.1);
 *   else the older "nccl:<op>" annotations with args "Input Dims" (element
 *     counts are their product) and "Input type";
 *   else ncclKernel_<Op>_* / ncclDevKernel_<Op>_* GPU kernels (op only,
 *     sizes unknown).
 * The rank is distributedInfo.rank, else the file name's number;
 * distributedInfo.world_size declares the world: a "Process Group Ranks"
 * member or a "Group size" beyond it is refused. ts/dur
 * (microseconds) become start/end times; a communication event's ts must
 * be a number and dur, when present, too, both >= 0 and ts + dur at most
 * 2^63 ns (SHS_TRACE_MAX_TIME_S, the range of the profiler's 64-bit
 * nanosecond clock): a negative, absurd or non-numeric one is refused, not
 * dropped. Sequence numbers are positions.
 * Sizes: "In msg nelems" (record_param_comms, as PyTorch ET's
 * in_msg_nelems) and "Input Dims"[0] count the elements of the rank's input
 * tensor: one rank's part for all_gather, the whole input for
 * reduce_scatter, a rank's whole send buffer for all_to_all
 * (shs_trace_input_scope()); bytes = elements x the dtype's size.
 * What it is not: a reader of CPU ops, memory events or flows.
 */
#include <stdlib.h>
#include <string.h>

#include "shardsim/trace_import.h"
#include "shardsim/features.h"
#include "trace/trace_json.h"
#include "trace/trace_util.h"

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>

typedef struct {
    double ts;
    size_t idx;
} ev_t;

static int cmp_ev(const void *a, const void *b) {
    const ev_t *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts ? 1 : (x->idx > y->idx) - (x->idx < y->idx);
}

static shs_status_t eerr(const shs_trace_input_t *in, size_t i, const char *what) {
    return shs_set_error(SHS_PARSE, "%s: traceEvents[%zu]: %s", in->name, i, what);
}

/* The kinds of communication event, most informative first: a file is
 * read from the first kind it has. */
enum { FORM_KERNEL_ARGS, FORM_PARAM_COMMS, FORM_NCCL_ANNOTATION, FORM_KERNEL_NAME, NUM_FORMS };

/* 0: not a comm event of `form`; 1: is; op set; -1: is, with an unknown op. */
static int classify(json_t *ev, int form, shs_coll_op_t *op) {
    json_t *nm = json_object_get(ev, "name"), *ph = json_object_get(ev, "ph");
    if (!json_is_string(nm) || !json_is_string(ph) || strcmp(json_string_value(ph), "X") != 0) return 0;
    const char *s = json_string_value(nm);
    json_t *args = json_object_get(ev, "args");
    if (form == FORM_KERNEL_ARGS) {
        json_t *cat = json_object_get(ev, "cat"), *cn = json_object_get(args, "Collective name");
        if (!json_is_string(cat) || strcmp(json_string_value(cat), "kernel") != 0 || !json_is_string(cn)) return 0;
        return shs__torch_coll_op(json_string_value(cn), op) ? -1 : 1;
    }
    if (form == FORM_PARAM_COMMS) {
        json_t *cn = json_object_get(args, "Collective name");
        if (strcmp(s, "record_param_comms") != 0 || !json_is_string(cn)) return 0;
        return shs__torch_coll_op(json_string_value(cn), op) ? -1 : 1;
    }
    if (form == FORM_NCCL_ANNOTATION) {
        if (strncmp(s, "nccl:", 5) != 0) return 0;
        return shs__torch_coll_op(s + 5, op) ? -1 : 1;
    }
    const char *k = NULL;
    if (strncmp(s, "ncclKernel_", 11) == 0) k = s + 11;
    else if (strncmp(s, "ncclDevKernel_", 14) == 0) k = s + 14;
    if (!k) return 0;
    char opname[32];
    size_t n = strcspn(k, "_(");
    if (n >= sizeof opname) return -1;
    memcpy(opname, k, n);
    opname[n] = 0;
    return shs__torch_coll_op(opname, op) ? -1 : 1;
}

shs_status_t shs_trace_import_kineto(shs_trace_t *t, const shs_trace_input_t *in) {
    snprintf(t->format, sizeof t->format, "kineto");
    json_error_t jerr;
    json_t *root = json_loadb(in->buf, in->len, 0, &jerr);
    if (!root) return shs_set_error(SHS_PARSE, "%s:%d: malformed JSON: %s", in->name, jerr.line, jerr.text);
    shs_status_t st = SHS_OK;
    ev_t *evs = NULL;
    json_t *events = json_object_get(root, "traceEvents");
    if (!json_is_array(events)) { st = shs_set_error(SHS_PARSE, "%s: no \"traceEvents\" array", in->name); goto out; }
    int64_t rank = in->rank >= 0 ? in->rank : 0, world = 0;
    json_t *di = json_object_get(root, "distributedInfo");
    if (json_is_object(di)) {
        if (json_object_get(di, "rank") && (shs__json_int(json_object_get(di, "rank"), &rank) || rank < 0 || rank >= SHS_TRACE_MAX_WORLD)) {
            st = shs_set_error(SHS_PARSE, "%s: distributedInfo.rank is not a rank from 0 to %d (negative, absurd or not an "
                               "integer)", in->name, SHS_TRACE_MAX_WORLD - 1);
            goto out;
        }
        if (json_object_get(di, "world_size") &&
            (shs__json_int(json_object_get(di, "world_size"), &world) || world < 1 || world > SHS_TRACE_MAX_WORLD || rank >= world)) {
            st = shs_set_error(SHS_PARSE, "%s: distributedInfo.world_size is not a rank count from 1 to %d above "
                               "distributedInfo.rank %lld", in->name, SHS_TRACE_MAX_WORLD, (long long)rank);
            goto out;
        }
    }
    size_t n = json_array_size(events), nev = 0;
    evs = malloc((n ? n : 1) * sizeof *evs);
    if (!evs) { st = shs_set_error(SHS_HOST_OOM, "out of memory"); goto out; }
    int form;
    for (form = 0; form < NUM_FORMS && nev == 0; form++) {
        for (size_t i = 0; i < n; i++) {
            json_t *ev = json_array_get(events, i);
            shs_coll_op_t op;
            int c = json_is_object(ev) ? classify(ev, form, &op) : 0;
            if (c < 0) { st = eerr(in, i, "unknown collective name"); goto out; }
            if (!c) continue;
            json_t *ts = json_object_get(ev, "ts"), *dur = json_object_get(ev, "dur");
            if (!json_is_number(ts)) { st = eerr(in, i, "communication event without a numeric ts"); goto out; }
            if (dur && !json_is_number(dur)) { st = eerr(in, i, "'dur' is not a number"); goto out; }
            double tsv = json_number_value(ts), durv = dur ? json_number_value(dur) : 0, s;
            char m[160];
            if (shs__trace_time(tsv, 1e-6, &s)) {
                snprintf(m, sizeof m, "'ts' %g us is negative or beyond 2^63 ns (the profiler's clock range)", tsv);
                st = eerr(in, i, m);
                goto out;
            }
            if (shs__trace_time(durv, 1e-6, &s) || shs__trace_time(tsv + durv, 1e-6, &s)) {
                snprintf(m, sizeof m, "'dur' %g us is negative, or ends the call beyond 2^63 ns (the profiler's clock "
                         "range)", durv);
                st = eerr(in, i, m);
                goto out;
            }
            evs[nev++] = (ev_t){tsv, i};
        }
    }
    form--;
    qsort(evs, nev, sizeof *evs, cmp_ev);
    int wc;
    if ((st = shs_trace_grow_identity_comm(t, "world", (int)(world > rank ? world : rank + 1), &wc)) != SHS_OK) goto out;
    for (size_t k = 0; k < nev && st == SHS_OK; k++) {
        json_t *ev = json_array_get(events, evs[k].idx), *args = json_object_get(ev, "args");
        shs_trace_rec_t r = shs_trace_rec_init();
        classify(ev, form, &r.op);
        r.rank = (int)rank;
        r.comm = wc;
        r.src_line = (int64_t)evs[k].idx + 1; /* traceEvents[idx], from 1 (0 is "unknown") */
        if (shs_coll_op_is_p2p(r.op)) { st = eerr(in, evs[k].idx, "send/recv: the profiler does not record the peer"); break; }
        /* checked when collected: 0 <= ts, 0 <= dur, ts + dur within range */
        double ts = json_number_value(json_object_get(ev, "ts")), dur = 0;
        if (json_is_number(json_object_get(ev, "dur"))) dur = json_number_value(json_object_get(ev, "dur"));
        r.t_start = ts * 1e-6;
        r.t_end = (ts + dur) * 1e-6;
        uint64_t nel = 0;
        size_t es = 1; /* no dtype given: elements counted as bytes */
        char why[160];
        if (form == FORM_KERNEL_ARGS || form == FORM_PARAM_COMMS) {
            int64_t v;
            json_t *a = json_object_get(args, "In msg nelems"), *o = json_object_get(args, "Out msg nelems");
            if (a && (shs__json_int(a, &v) || v < 0 || (uint64_t)v > SHS_TRACE_MAX_BYTES)) { st = eerr(in, evs[k].idx, "'In msg nelems' negative or absurd"); break; }
            nel = a ? (uint64_t)v : 0;
            int64_t outn = (int64_t)nel;
            if (o && (shs__json_int(o, &outn) || outn < 0 || (uint64_t)outn > SHS_TRACE_MAX_BYTES)) { st = eerr(in, evs[k].idx, "'Out msg nelems' negative or absurd"); break; }
            json_t *dt = json_object_get(args, "dtype");
            if (json_is_string(dt) && shs__torch_dtype(json_string_value(dt), &r.dtype, &es)) {
                snprintf(why, sizeof why, "dtype '%.60s' is not a torch dtype", json_string_value(dt));
                st = eerr(in, evs[k].idx, why);
                break;
            }
            json_t *pr = json_object_get(args, "Process Group Ranks"), *gs = json_object_get(args, "Group size");
            int64_t gsize = 0;
            if (gs && (shs__json_int(gs, &gsize) || gsize < 1 || gsize > SHS_TRACE_MAX_WORLD)) { st = eerr(in, evs[k].idx, "'Group size' is not a rank count"); break; }
            if (world > 0 && gsize > world) {
                char m[128];
                snprintf(m, sizeof m, "'Group size' %lld is beyond distributedInfo.world_size %lld", (long long)gsize, (long long)world);
                st = eerr(in, evs[k].idx, m);
                break;
            }
            int *ranks = NULL, nr = 0;
            if (pr && !shs__json_rank_list(pr, &ranks, &nr) && nr > 0) {
                int bad = -1;
                for (int q = 0; q < nr && bad < 0; q++)
                    if (world > 0 && ranks[q] >= world) bad = ranks[q];
                if (bad >= 0) {
                    char m[128];
                    snprintf(m, sizeof m, "'Process Group Ranks' names rank %d, beyond distributedInfo.world_size %lld", bad, (long long)world);
                    free(ranks);
                    st = eerr(in, evs[k].idx, m);
                    break;
                }
                char cname[96];
                json_t *pn = json_object_get(args, "Process Group Name");
                snprintf(cname, sizeof cname, "pg%s", json_is_string(pn) ? json_string_value(pn) : "?");
                int isid = 1;
                for (int q = 0; q < nr; q++) isid &= ranks[q] == q;
                st = isid ? shs_trace_grow_identity_comm(t, "world", nr, &r.comm) : shs_trace_add_comm(t, cname, nr, ranks, &r.comm);
                free(ranks);
                if (st != SHS_OK) { st = eerr(in, evs[k].idx, shs_last_error()); break; }
            } else {
                free(ranks);
            }
            r.count = r.op == SHS_OP_REDUCE_SCATTER ? (uint64_t)outn : nel;
        } else if (form == FORM_NCCL_ANNOTATION) {
            json_t *dims = json_object_get(args, "Input Dims"), *ty = json_object_get(args, "Input type");
            json_t *first = json_is_array(dims) ? json_array_get(dims, 0) : NULL;
            if (json_is_array(first)) {
                nel = 1;
                size_t q;
                json_t *x;
                json_array_foreach(first, q, x) {
                    int64_t v;
                    if (shs__json_int(x, &v) || v < 0 || (v && nel > SHS_TRACE_MAX_BYTES / (uint64_t)v)) { st = eerr(in, evs[k].idx, "'Input Dims' negative or absurd"); break; }
                    nel *= (uint64_t)v;
                }
                if (st != SHS_OK) break;
            }
            json_t *t0 = json_is_array(ty) ? json_array_get(ty, 0) : ty;
            if (json_is_string(t0) && shs__torch_dtype(json_string_value(t0), &r.dtype, &es)) {
                snprintf(why, sizeof why, "'Input type' '%.60s' is not a torch dtype", json_string_value(t0));
                st = eerr(in, evs[k].idx, why);
                break;
            }
            r.count = nel;
        }
        r.bytes = nel * es;
        r.scope = shs_trace_input_scope(r.op);
        if (r.op == SHS_OP_ALL_REDUCE || r.op == SHS_OP_REDUCE_SCATTER || r.op == SHS_OP_REDUCE) r.redop = SHS_SUM;
        if (r.op == SHS_OP_BROADCAST || r.op == SHS_OP_REDUCE || r.op == SHS_OP_GATHER || r.op == SHS_OP_SCATTER) r.root = 0;
        if (shs_trace_comm_local(t, r.comm, r.rank) < 0) { st = eerr(in, evs[k].idx, "rank is not in its process group"); break; }
        if (shs_trace_append(t, &r) != SHS_OK) st = eerr(in, evs[k].idx, shs_last_error());
    }
out:
    free(evs);
    json_decref(root);
    return st;
}

#else

shs_status_t shs_trace_import_kineto(shs_trace_t *t, const shs_trace_input_t *in) {
    (void)t;
    return shs_set_error(SHS_UNSUPPORTED, "%s: Kineto traces are JSON: reading them %s", in->name,
                         shs_feature_missing(SHS_FEATURE_JANSSON));
}

#endif
