/* trace_flight.c - import PyTorch Flight Recorder JSON dumps (one file per
 * rank; torch.distributed's NCCL flight recorder, TORCH_NCCL_TRACE_BUFFER_SIZE).
 *
 * Read: "pg_config" {id: {name, desc, ranks}} (ranks a list or a string
 * "[0, 1]") and "entries", each with collective_seq_id (the sequence
 * number in its group), profiling_name ("nccl:all_reduce"),
 * process_group [name, desc], input_sizes / input_dtypes, output_sizes,
 * state (scheduled / started / completed, kept as the marker
 * "fr:<state>"), time_created_ns, duration_ms, is_p2p. The dumping rank is
 * the top-level "rank", else the file name's number. p2p entries
 * ("nccl:send 0->1", "nccl:recv 1<-0") are matched by peer. The default
 * group (pg_config key or name "0", or desc "default_pg") declares the
 * world size: a group member, p2p peer or dumping rank beyond it is refused.
 * Negative or malformed input / output sizes, a negative or absurd
 * time_created_ns or duration_ms (beyond 2^63 ns: SHS_TRACE_MAX_TIME_S) and
 * a group listing a rank twice are refused, not dropped.
 * Sizes: input_sizes are the shapes of the rank's input tensors (their
 * element counts summed, x the input_dtypes[0] size): one rank's input, so
 * one rank's part for all_gather, the whole input for reduce_scatter and a
 * rank's whole send buffer for all_to_all (shs_trace_input_scope()).
 * What it is not: a reader of the pickle dumps (convert them to JSON first,
 * as torch's fr_trace tool does).
 */
#include <stdlib.h>
#include <string.h>

#include "shardsim/trace_import.h"
#include "shardsim/features.h"
#include "trace/trace_json.h"
#include "trace/trace_util.h"

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>

static shs_status_t ferr(const shs_trace_input_t *in, size_t i, const char *what) {
    return shs_set_error(SHS_PARSE, "%s: entries[%zu]: %s", in->name, i, what);
}

/* Product of a dims list, or -1. */
static int64_t numel(json_t *dims) {
    if (!json_is_array(dims)) return -1;
    uint64_t n = 1;
    size_t i;
    json_t *x;
    json_array_foreach(dims, i, x) {
        int64_t v;
        if (shs__json_int(x, &v) || v < 0 || (v && n > SHS_TRACE_MAX_BYTES / (uint64_t)v)) return -1;
        n *= (uint64_t)v;
    }
    return (int64_t)n;
}

/* The world declared by pg_config's default group (key or name "0", or
 * desc "default_pg"): its rank count; 0 when absent or malformed. */
static int declared_world(json_t *pgc) {
    const char *key;
    json_t *cfg;
    json_object_foreach(pgc, key, cfg) {
        json_t *nm = json_object_get(cfg, "name"), *desc = json_object_get(cfg, "desc");
        if (strcmp(key, "0") != 0 && !(json_is_string(nm) && strcmp(json_string_value(nm), "0") == 0) &&
            !(json_is_string(desc) && strcmp(json_string_value(desc), "default_pg") == 0))
            continue;
        int *ranks, n;
        if (shs__json_rank_list(json_object_get(cfg, "ranks"), &ranks, &n)) n = 0;
        free(ranks);
        return n > 0 ? n : 0;
    }
    return 0;
}

/* 0 ok; -1 ranks malformed or refused by the trace model (duplicates),
 * the reason in shs_last_error(); -2 group not in pg_config; -3 a member at
 * or beyond `world` (> 0), *bad set to it. */
static int comm_of(shs_trace_t *t, json_t *pgc, const char *pgname, int world, int *comm, int *bad) {
    const char *key;
    json_t *cfg;
    json_object_foreach(pgc, key, cfg) {
        json_t *nm = json_object_get(cfg, "name");
        if (strcmp(key, pgname) != 0 && !(json_is_string(nm) && strcmp(json_string_value(nm), pgname) == 0)) continue;
        int *ranks, n;
        if (shs__json_rank_list(json_object_get(cfg, "ranks"), &ranks, &n) || n < 1) {
            free(ranks);
            shs_set_error(SHS_PARSE, "'ranks' is not a non-empty list of ranks in 0..%d", SHS_TRACE_MAX_WORLD - 1);
            return -1;
        }
        int isid = 1;
        for (int q = 0; q < n; q++) {
            isid &= ranks[q] == q;
            if (world > 0 && ranks[q] >= world) {
                *bad = ranks[q];
                free(ranks);
                return -3;
            }
        }
        char cname[96];
        snprintf(cname, sizeof cname, "pg%s", pgname);
        shs_status_t st = isid ? shs_trace_grow_identity_comm(t, "world", n, comm) : shs_trace_add_comm(t, cname, n, ranks, comm);
        free(ranks);
        return st == SHS_OK ? 0 : -1;
    }
    return -2;
}

shs_status_t shs_trace_import_flight(shs_trace_t *t, const shs_trace_input_t *in) {
    snprintf(t->format, sizeof t->format, "flight");
    json_error_t jerr;
    json_t *root = json_loadb(in->buf, in->len, 0, &jerr);
    if (!root) return shs_set_error(SHS_PARSE, "%s:%d: malformed JSON: %s", in->name, jerr.line, jerr.text);
    shs_status_t st = SHS_OK;
    json_t *entries = json_object_get(root, "entries"), *pgc = json_object_get(root, "pg_config");
    int64_t rank = in->rank >= 0 ? in->rank : 0;
    if (!json_is_array(entries)) { st = shs_set_error(SHS_PARSE, "%s: no \"entries\" array", in->name); goto out; }
    if (json_object_get(root, "rank") && (shs__json_int(json_object_get(root, "rank"), &rank) || rank < 0 || rank >= SHS_TRACE_MAX_WORLD)) {
        st = shs_set_error(SHS_PARSE, "%s: top-level \"rank\" is not a rank from 0 to %d (negative, absurd or not an integer)",
                           in->name, SHS_TRACE_MAX_WORLD - 1);
        goto out;
    }
    int world = json_is_object(pgc) ? declared_world(pgc) : 0;
    if (world > 0 && rank >= world) {
        st = shs_set_error(SHS_PARSE, "%s: the dumping rank %lld is beyond the world of %d ranks (pg_config's default "
                           "group)", in->name, (long long)rank, world);
        goto out;
    }
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        shs_trace_rec_t r = shs_trace_rec_init();
        json_t *pn = json_object_get(e, "profiling_name"), *pg = json_object_get(e, "process_group");
        if (!json_is_object(e) || !json_is_string(pn)) { st = ferr(in, i, "no profiling_name"); break; }
        const char *name = json_string_value(pn);
        char opname[64];
        size_t l = strcspn(name, " ");
        snprintf(opname, sizeof opname, "%.*s", (int)(l < 60 ? l : 60), name);
        if (shs__torch_coll_op(opname, &r.op)) { st = ferr(in, i, "unknown collective in profiling_name"); break; }
        r.rank = (int)rank;
        const char *pgname = "0";
        if (json_is_array(pg) && json_is_string(json_array_get(pg, 0))) pgname = json_string_value(json_array_get(pg, 0));
        int bad = -1;
        int c = json_is_object(pgc) ? comm_of(t, pgc, pgname, world, &r.comm, &bad) : -2;
        if (c == -1) {
            char m[256];
            snprintf(m, sizeof m, "process group '%.40s': %s", pgname, shs_last_error());
            st = ferr(in, i, m);
            break;
        }
        if (c == -3) {
            char m[160];
            snprintf(m, sizeof m, "process group '%.40s' names rank %d, beyond the world of %d ranks (pg_config's "
                     "default group)", pgname, bad, world);
            st = ferr(in, i, m);
            break;
        }
        if (c == -2 && shs_trace_grow_identity_comm(t, "world", (int)rank + 1, &r.comm) != SHS_OK) { st = ferr(in, i, shs_last_error()); break; }
        int64_t seq;
        json_t *sq = json_object_get(e, shs_coll_op_is_p2p(r.op) ? "p2p_seq_id" : "collective_seq_id");
        if (!sq || shs__json_int(sq, &seq) || seq < 0) { st = ferr(in, i, "collective_seq_id missing or negative"); break; }
        r.seq = seq;
        if (shs_coll_op_is_p2p(r.op)) {
            const char *arrow = strstr(name, r.op == SHS_OP_SEND ? "->" : "<-");
            long peer = arrow ? strtol(arrow + 2, NULL, 10) : -1;
            if (peer < 0 || peer >= SHS_TRACE_MAX_WORLD) { st = ferr(in, i, "p2p entry without 'A->B' / 'A<-B' peers"); break; }
            if (world > 0 && peer >= world) {
                char m[128];
                snprintf(m, sizeof m, "p2p peer %ld is beyond the world of %d ranks (pg_config's default group)", peer, world);
                st = ferr(in, i, m);
                break;
            }
            r.peer = (int32_t)peer;
            r.tag = 0;
            if (shs_trace_ensure_world(t, (int)peer + 1) != SHS_OK) { st = ferr(in, i, shs_last_error()); break; }
        }
        json_t *isz = json_object_get(e, "input_sizes"), *osz = json_object_get(e, "output_sizes"),
               *idt = json_object_get(e, "input_dtypes");
        int64_t ne = 0, no = 0;
        size_t q;
        json_t *x;
        if (isz && !json_is_array(isz)) { st = ferr(in, i, "input_sizes is not a list"); break; }
        json_array_foreach(isz, q, x) {
            int64_t k = numel(x);
            if (k < 0 || (uint64_t)(ne + k) > SHS_TRACE_MAX_BYTES) { st = ferr(in, i, "input_sizes negative, malformed or absurd"); break; }
            ne += k;
        }
        if (st != SHS_OK) break;
        if (osz && !json_is_array(osz)) { st = ferr(in, i, "output_sizes is not a list"); break; }
        json_array_foreach(osz, q, x) {
            int64_t k = numel(x);
            if (k < 0 || (uint64_t)(no + k) > SHS_TRACE_MAX_BYTES) { st = ferr(in, i, "output_sizes negative, malformed or absurd"); break; }
            no += k;
        }
        if (st != SHS_OK) break;
        size_t es = 1; /* no dtype given: elements counted as bytes */
        json_t *d0 = json_is_array(idt) ? json_array_get(idt, 0) : NULL;
        if (json_is_string(d0) && shs__torch_dtype(json_string_value(d0), &r.dtype, &es)) {
            char why[160];
            snprintf(why, sizeof why, "input_dtypes[0] '%.60s' is not a torch dtype", json_string_value(d0));
            st = ferr(in, i, why);
            break;
        }
        r.count = (uint64_t)(r.op == SHS_OP_REDUCE_SCATTER && no ? no : ne);
        r.bytes = (uint64_t)ne * es;
        r.scope = shs_trace_input_scope(r.op);
        if (r.op == SHS_OP_ALL_REDUCE || r.op == SHS_OP_REDUCE_SCATTER || r.op == SHS_OP_REDUCE) r.redop = SHS_SUM;
        if (r.op == SHS_OP_BROADCAST || r.op == SHS_OP_REDUCE) r.root = 0;
        /* times: absent or null is unknown (duration_ms is null without
         * timing); present, a number >= 0 within 2^63 ns, else refused */
        json_t *tcj = json_object_get(e, "time_created_ns"), *dm = json_object_get(e, "duration_ms");
        double ts = -1, ds = 0;
        if (tcj && !json_is_null(tcj) && (!json_is_number(tcj) || shs__trace_time(json_number_value(tcj), 1e-9, &ts))) {
            char m[128];
            snprintf(m, sizeof m, "time_created_ns %g is not a time in 0..2^63 ns",
                     json_is_number(tcj) ? json_number_value(tcj) : -1.0);
            st = ferr(in, i, json_is_number(tcj) ? m : "time_created_ns is not a number");
            break;
        }
        if (dm && !json_is_null(dm) && (!json_is_number(dm) || shs__trace_time(json_number_value(dm), 1e-3, &ds) ||
                                        (ts >= 0 && ts + ds > SHS_TRACE_MAX_TIME_S))) {
            char m[128];
            snprintf(m, sizeof m, "duration_ms %g is negative or ends the call beyond 2^63 ns",
                     json_is_number(dm) ? json_number_value(dm) : -1.0);
            st = ferr(in, i, json_is_number(dm) ? m : "duration_ms is not a number");
            break;
        }
        if (ts >= 0) {
            r.t_start = ts;
            r.t_end = ts + ds;
        }
        json_t *state = json_object_get(e, "state");
        if (state && !(json_is_string(state) && (!strcmp(json_string_value(state), "scheduled") ||
                                                 !strcmp(json_string_value(state), "started") ||
                                                 !strcmp(json_string_value(state), "completed")))) {
            char m[128];
            snprintf(m, sizeof m, "state '%.40s' is not one Flight Recorder writes (scheduled, started, completed)",
                     json_is_string(state) ? json_string_value(state) : "(not a string)");
            st = ferr(in, i, m);
            break;
        }
        if (json_is_string(state)) {
            char m[64];
            snprintf(m, sizeof m, "fr:%.40s", json_string_value(state));
            for (char *p = m; *p; p++) if (*p == ' ' || *p == '\t') *p = '_';
            r.marker = shs_trace_intern(t, m);
            if (r.marker == UINT32_MAX) { st = shs_set_error(SHS_HOST_OOM, "out of memory"); break; }
        }
        if (shs_trace_comm_local(t, r.comm, r.rank) < 0) { st = ferr(in, i, "the dumping rank is not in this entry's process group"); break; }
        r.src_line = (int64_t)i + 1; /* entries[i], from 1 (0 is "unknown") */
        if (shs_trace_append(t, &r) != SHS_OK) { st = ferr(in, i, shs_last_error()); break; }
    }
out:
    json_decref(root);
    return st;
}

#else

shs_status_t shs_trace_import_flight(shs_trace_t *t, const shs_trace_input_t *in) {
    (void)t;
    return shs_set_error(SHS_UNSUPPORTED, "%s: Flight Recorder dumps are JSON: reading them %s", in->name,
                         shs_feature_missing(SHS_FEATURE_JANSSON));
}

#endif
