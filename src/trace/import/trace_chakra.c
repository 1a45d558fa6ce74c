/* trace_chakra.c - import Chakra execution traces (protobuf, one file per
 * rank) through protobuf-c code generated from proto/et_def.proto.
 *
 * A file is a varint32 length then a GlobalMetadata message, then
 * length-prefixed Node messages (the framing of Chakra's protolib). Read:
 *   COMM_COLL_NODE  attrs comm_type (CollectiveCommType), comm_size,
 *                   optional pg_name (its process group)
 *   COMM_SEND_NODE  comm_dst, comm_size, comm_tag
 *   COMM_RECV_NODE  comm_src, comm_size, comm_tag
 *   METADATA_NODE "## process_group:init ##" (Chakra's converter keeps
 *                   PyTorch ET's node: inputs.values is the Python repr of
 *                   its input, a JSON list of {pg_name, ranks, group_size})
 * comm_size is the size ASTRA-sim hands to Sys::generate_<collective>
 * unchanged (workload/Workload.cc issue_comm), the same number an ASTRA-sim
 * 1.0 text workload gives: bytes of one rank's input buffer, i.e. the
 * buffer for all_reduce (Ring: msg = size / N), one rank's part for
 * all_gather (final = size x N), the whole input for reduce_scatter
 * (final = size / N), and a rank's whole send buffer for all_to_all (msg =
 * size / N per peer, N-1 of them): shs_trace_input_scope() of the op.
 * Chakra's converter (PyTorch ET + Kineto, src/converter/pytorch_converter.py)
 * writes each collective twice: a host-side node (the c10d:: or
 * record_param_comms op, attr is_cpu_op true) without comm_type, and the GPU
 * kernel node (is_cpu_op false) with comm_type and comm_size. The
 * communication is taken from the nodes that carry comm_type; a host-side
 * node without it is a duplicate and skipped.
 * Groups: a file that declares process groups (the converter's, one rank
 * of a job) is that process's view (t->views): a collective goes to the
 * group its pg_name names, or to the default group "0" (the world, of its
 * group_size) without one; a pg_name no declaration names is refused.
 * Without declarations (ASTRA-sim's generated workloads, every rank's file)
 * collectives go to the "world" of every rank file.
 * Times: node start_time_micros and duration_micros become start/end
 * times (refused beyond 2^63 ns, SHS_TRACE_MAX_TIME_S). The converter
 * writes no start times (and an is_cpu_op attribute on every node): then
 * the file's GPU nodes (is_cpu_op false) are
 * laid end to end in file order, each lasting its duration_micros, the
 * rank's GPU stream as its kernels ran (the trace's note says so), so the
 * calls keep their measured durations and the compute between them.
 * Every error names the record, the node id and the node name; a call's
 * src_line is its record number (0 the GlobalMetadata, 1 the first node).
 * Other nodes (compute, memory) are skipped; dependencies are not kept, so
 * a rank's calls are in file order. The rank is the number in the file
 * name (all_reduce.3.et -> 3).
 * What it is not: a writer (trace_export_chakra.c) or a dependency-graph simulator.
 */
#include <stdlib.h>
#include <string.h>

#include "shardsim/features.h"
#include "shardsim/trace_import.h"
#include "trace/trace_json.h"
#include "trace/trace_json_scan.h"
#include "trace/trace_util.h"

#ifdef SHS_HAVE_PROTOBUF_C
#include "et_def.pb-c.h"

static int read_varint32(const unsigned char *b, size_t len, size_t *pos, uint32_t *out) {
    uint64_t v = 0;
    for (int k = 0; k < 5; k++) {
        if (*pos >= len) return -1;
        unsigned char c = b[(*pos)++];
        v |= (uint64_t)(c & 0x7f) << (7 * k);
        if (!(c & 0x80)) {
            if (v > UINT32_MAX) return -1;
            *out = (uint32_t)v;
            return 0;
        }
    }
    return -1;
}

/* The attribute's integer value (any integer or bool oneof case). */
static int attr_int(const ChakraProtoMsg__AttributeProto *a, int64_t *out) {
    switch (a->value_case) {
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT32_VAL: *out = a->int32_val; return 0;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL: *out = a->int64_val; return 0;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT32_VAL: *out = a->uint32_val; return 0;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL:
        if (a->uint64_val > INT64_MAX) return -1;
        *out = (int64_t)a->uint64_val;
        return 0;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SINT32_VAL: *out = a->sint32_val; return 0;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SINT64_VAL: *out = a->sint64_val; return 0;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_FIXED32_VAL: *out = a->fixed32_val; return 0;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SFIXED32_VAL: *out = a->sfixed32_val; return 0;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SFIXED64_VAL: *out = a->sfixed64_val; return 0;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_BOOL_VAL: *out = a->bool_val; return 0;
    default: return -1;
    }
}

/* 1 found, 0 absent, -1 present but not an integer. */
static int find_attr(const ChakraProtoMsg__Node *n, const char *name, int64_t *out) {
    for (size_t i = 0; i < n->n_attr; i++)
        if (n->attr[i]->name && strcmp(n->attr[i]->name, name) == 0) return attr_int(n->attr[i], out) == 0 ? 1 : -1;
    return 0;
}

static shs_status_t rerr(const shs_trace_input_t *in, size_t rec, const char *what) {
    return shs_set_error(SHS_PARSE, "%s: record %zu: %s", in->name, rec, what);
}

/* An error about node n: "<file>: record <k> (node <id> '<name>'): <what>". */
static shs_status_t nerr(const shs_trace_input_t *in, size_t rec, const ChakraProtoMsg__Node *n, const char *what) {
    return shs_set_error(SHS_PARSE, "%s: record %zu (node %llu '%.80s'): %s", in->name, rec, (unsigned long long)n->id,
                         n->name ? n->name : "", what);
}

/* A process group the file declares. */
typedef struct {
    char name[64];
    int size;
    int *ranks;          /* NULL: 0..size-1 */
    int comm;            /* trace comm, -1 until used */
} pg_t;

typedef struct {
    const shs_trace_input_t *in;
    shs_trace_t *t;
    int rank;
    pg_t *pgs;
    int npgs;
    int laid;            /* no start times: GPU nodes laid end to end */
    double clock;        /* seconds, for `laid` */
} chk_t;

static int64_t attr_of(const ChakraProtoMsg__Node *n, const char *name, int64_t dflt) {
    int64_t v;
    return find_attr(n, name, &v) == 1 ? v : dflt;
}

static const char *str_attr(const ChakraProtoMsg__Node *n, const char *name) {
    for (size_t i = 0; i < n->n_attr; i++)
        if (n->attr[i]->name && strcmp(n->attr[i]->name, name) == 0 &&
            n->attr[i]->value_case == CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL)
            return n->attr[i]->string_val;
    return NULL;
}

/* "## process_group:init ##": inputs.values holds the JSON list of groups
 * (inside the Python repr the converter wrote: "['[{...}]']"). */
static shs_status_t read_pgs(chk_t *C, size_t recno, const ChakraProtoMsg__Node *n) {
    const char *v = n->inputs && n->inputs->values ? n->inputs->values : "";
    const char *lo = strstr(v, "[{"), *hi = NULL;
    for (const char *p = v; (p = strstr(p, "}]")) != NULL; p++) hi = p + 2;
    if (!lo || !hi || hi <= lo) return nerr(C->in, recno, n, "process_group:init without its list of groups");
    shs__js_t *js = malloc(sizeof *js);
    if (!js) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", C->in->name);
    shs__js_init(js, C->in->name, lo, (size_t)(hi - lo));
    shs_status_t st = shs__js_enter(js, SHS__JS_ARRAY);
    int k;
    while (st == SHS_OK && (k = shs__js_element(js, &st)) == 1) {
        pg_t g = {.comm = -1};
        shs__js_span_t key, val;
        int64_t x, *ranks = NULL;
        int nr = 0, km;
        if ((st = shs__js_enter(js, SHS__JS_OBJECT)) != SHS_OK) break;
        while (st == SHS_OK && (km = shs__js_member(js, &key, &st)) == 1) {
            if ((st = shs__js_value(js, &val)) != SHS_OK) break;
            if (shs__js_is(js, &key, "pg_name")) {
                if (val.kind == SHS__JS_NUMBER && !shs__js_int(js, &val, &x)) snprintf(g.name, sizeof g.name, "%lld", (long long)x);
                else if (shs__js_str(js, &val, g.name, sizeof g.name)) st = nerr(C->in, recno, n, "a group's pg_name is not a name");
            } else if (shs__js_is(js, &key, "group_size")) {
                if (shs__js_int(js, &val, &x) || x < 1 || x > SHS_TRACE_MAX_WORLD)
                    st = nerr(C->in, recno, n, "a group's group_size is not a rank count");
                else g.size = (int)x;
            } else if (shs__js_is(js, &key, "ranks")) {
                char *txt = val.kind == SHS__JS_ARRAY ? strndup(js->b + val.at, val.n) : NULL;
                int cut = 0;
                if (!txt || shs__int_list(txt, &ranks, &nr, &cut) || cut)
                    st = nerr(C->in, recno, n, "a group's ranks are not a list of ranks");
                free(txt);
            }
        }
        if (st == SHS_OK && nr) {
            if (!(g.ranks = malloc((size_t)nr * sizeof *g.ranks))) st = shs_set_error(SHS_HOST_OOM, "out of memory");
            for (int q = 0; st == SHS_OK && q < nr; q++) {
                if (ranks[q] >= SHS_TRACE_MAX_WORLD) st = nerr(C->in, recno, n, "a group names a rank beyond 65535");
                else g.ranks[q] = (int)ranks[q];
            }
            g.size = nr;
        }
        free(ranks);
        if (st == SHS_OK && g.size < 1) st = nerr(C->in, recno, n, "a group without ranks or group_size");
        pg_t *np = st == SHS_OK ? realloc(C->pgs, (size_t)(C->npgs + 1) * sizeof *np) : NULL;
        if (st == SHS_OK && !np) st = shs_set_error(SHS_HOST_OOM, "out of memory");
        if (st != SHS_OK) {
            free(g.ranks);
            break;
        }
        C->pgs = np;
        C->pgs[C->npgs++] = g;
    }
    free(js);
    return st;
}

/* The comm of a collective node: its pg_name's group, the default group
 * "0" without one, or (no declarations) the world of the rank files. */
static shs_status_t coll_comm(chk_t *C, size_t recno, const ChakraProtoMsg__Node *n, int *comm) {
    if (!C->npgs) return shs_trace_grow_identity_comm(C->t, "world", C->rank + 1, comm);
    const char *want = str_attr(n, "pg_name");
    pg_t *g = NULL;
    for (int k = 0; k < C->npgs && !g; k++)
        if (strcmp(C->pgs[k].name, want ? want : "0") == 0) g = &C->pgs[k];
    if (!g) {
        char m[160];
        snprintf(m, sizeof m, "process group '%.60s' is not declared by the file's process_group:init", want ? want : "0");
        return nerr(C->in, recno, n, m);
    }
    if (g->comm < 0) {
        char name[80];
        snprintf(name, sizeof name, "pg%s", g->name);
        shs_status_t st = strcmp(g->name, "0") == 0 && !g->ranks
                              ? shs_trace_grow_identity_comm(C->t, "world", g->size, &g->comm)
                              : shs_trace_add_comm(C->t, name, g->size, g->ranks, &g->comm);
        if (st != SHS_OK) return nerr(C->in, recno, n, shs_last_error());
    }
    *comm = g->comm;
    return SHS_OK;
}

static shs_status_t node_to_rec(chk_t *C, size_t recno, const ChakraProtoMsg__Node *n) {
    const shs_trace_input_t *in = C->in;
    shs_trace_t *t = C->t;
    int rank = C->rank;
    int is_send = n->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE;
    int is_recv = n->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE;
    int is_coll = n->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
    double start = C->clock;
    if (C->laid && attr_of(n, "is_cpu_op", 1) == 0) /* a GPU node: it runs after the one before */
        C->clock += (double)n->duration_micros * 1e-6;
    if (!is_send && !is_recv && !is_coll) return SHS_OK;
    shs_trace_rec_t r = shs_trace_rec_init();
    int64_t v;
    int k = find_attr(n, "comm_size", &v);
    if (k < 0 || (k == 1 && (v < 0 || (uint64_t)v > SHS_TRACE_MAX_BYTES))) return nerr(in, recno, n, "comm_size is negative, absurd or not an integer");
    r.bytes = k == 1 ? (uint64_t)v : 0;
    r.rank = rank;
    r.src_line = (int64_t)recno; /* the record number errors name (1 = the first node) */
    if (is_coll) {
        static const shs_coll_op_t map[] = {SHS_OP_ALL_REDUCE, SHS_OP_REDUCE, SHS_OP_ALL_GATHER,
                                             SHS_OP_GATHER, SHS_OP_SCATTER, SHS_OP_BROADCAST,
                                             SHS_OP_ALL_TO_ALL, SHS_OP_REDUCE_SCATTER, SHS_OP_REDUCE_SCATTER,
                                             SHS_OP_BARRIER};
        int64_t cpu = 0;
        int has_type = find_attr(n, "comm_type", &v);
        if (has_type == 0 && find_attr(n, "is_cpu_op", &cpu) == 1 && cpu) return SHS_OK; /* host-side duplicate */
        if (has_type != 1 || v < 0 || v > 9) {
            char m[128];
            if (has_type == 1) snprintf(m, sizeof m, "comm_type %lld is not a CollectiveCommType (0..9)", (long long)v);
            else snprintf(m, sizeof m, "GPU collective node without %s comm_type", has_type ? "an integer" : "a");
            return nerr(in, recno, n, m);
        }
        r.op = map[v];
        r.scope = shs_trace_input_scope(r.op);
        if (r.op == SHS_OP_ALL_REDUCE || r.op == SHS_OP_REDUCE || r.op == SHS_OP_REDUCE_SCATTER) r.redop = SHS_SUM;
        if (r.op == SHS_OP_BROADCAST || r.op == SHS_OP_REDUCE || r.op == SHS_OP_GATHER || r.op == SHS_OP_SCATTER) r.root = 0;
        SHS_CHECK(coll_comm(C, recno, n, &r.comm));
        if (shs_trace_comm_local(t, r.comm, rank) < 0) {
            char m[160];
            snprintf(m, sizeof m, "rank %d (from the file name) is not a member of its process group %s", rank,
                     t->comms[r.comm].name);
            return nerr(in, recno, n, m);
        }
    } else {
        if (find_attr(n, is_send ? "comm_dst" : "comm_src", &v) != 1 || v < 0 || v >= SHS_TRACE_MAX_WORLD)
            return nerr(in, recno, n, is_send ? "send without a valid comm_dst" : "recv without a valid comm_src");
        r.op = is_send ? SHS_OP_SEND : SHS_OP_RECV;
        r.peer = (int32_t)v;
        int64_t tag = 0;
        if (find_attr(n, "comm_tag", &tag) < 0 || tag < 0 || tag > INT32_MAX) return nerr(in, recno, n, "bad comm_tag");
        r.tag = (int32_t)tag;
        int hi = (r.peer > rank ? r.peer : rank) + 1;
        SHS_CHECK(shs_trace_grow_identity_comm(t, "world", hi, &r.comm));
    }
    if (C->laid || n->start_time_micros || n->duration_micros) {
        /* uint64 microseconds: beyond 2^63 ns is no clock's reading */
        double s, d;
        if (shs__trace_time(C->laid ? start * 1e6 : (double)n->start_time_micros, 1e-6, &s) ||
            shs__trace_time((double)n->duration_micros, 1e-6, &d) || s + d > SHS_TRACE_MAX_TIME_S) {
            char m[160];
            snprintf(m, sizeof m, "start_time_micros %llu + duration_micros %llu is beyond 2^63 ns",
                     (unsigned long long)n->start_time_micros, (unsigned long long)n->duration_micros);
            return nerr(in, recno, n, m);
        }
        r.t_start = s;
        r.t_end = s + d;
    }
    if (n->name && *n->name) {
        r.marker = shs_trace_intern(t, n->name);
        if (r.marker == UINT32_MAX) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name);
    }
    if (shs_trace_append(t, &r) != SHS_OK) return nerr(in, recno, n, shs_last_error());
    return SHS_OK;
}

/* One pass over the file's records: pass 0 finds the groups and whether
 * nodes carry start times, pass 1 reads the calls. */
static shs_status_t walk(chk_t *C, int pass, size_t *records, int *starts, int *durations) {
    const shs_trace_input_t *in = C->in;
    const unsigned char *b = (const unsigned char *)in->buf;
    size_t pos = 0, recno = 0;
    shs_status_t st = SHS_OK;
    char msg[128];
    while (pos < in->len && st == SHS_OK) {
        uint32_t n;
        if (read_varint32(b, in->len, &pos, &n)) return rerr(in, recno, "truncated or bad length prefix");
        if (n > in->len - pos) {
            snprintf(msg, sizeof msg, "truncated: message of %u bytes but only %zu left", n, in->len - pos);
            return rerr(in, recno, msg);
        }
        if (recno == 0) {
            ChakraProtoMsg__GlobalMetadata *gm = chakra_proto_msg__global_metadata__unpack(NULL, n, b + pos);
            if (!gm) return rerr(in, recno, "malformed GlobalMetadata message");
            chakra_proto_msg__global_metadata__free_unpacked(gm, NULL);
        } else {
            ChakraProtoMsg__Node *node = chakra_proto_msg__node__unpack(NULL, n, b + pos);
            if (!node) return rerr(in, recno, "malformed Node message");
            if (pass == 0) {
                int64_t cpu;
                *starts |= node->start_time_micros != 0;
                *durations |= node->duration_micros != 0 && find_attr(node, "is_cpu_op", &cpu) == 1; /* the converter's */
                if (node->type == CHAKRA_PROTO_MSG__NODE_TYPE__METADATA_NODE && node->name &&
                    strstr(node->name, "process_group:init"))
                    st = read_pgs(C, recno, node);
            } else {
                st = node_to_rec(C, recno, node);
            }
            chakra_proto_msg__node__free_unpacked(node, NULL);
        }
        pos += n;
        recno++;
    }
    *records = recno;
    return st;
}

shs_status_t shs_trace_import_chakra(shs_trace_t *t, const shs_trace_input_t *in) {
    snprintf(t->format, sizeof t->format, "chakra");
    chk_t C = {.in = in, .t = t, .rank = in->rank >= 0 ? in->rank : 0};
    size_t records = 0;
    int starts = 0, durations = 0;
    shs_status_t st = walk(&C, 0, &records, &starts, &durations);
    if (st == SHS_OK && records == 0) st = rerr(in, 0, "empty file");
    C.laid = !starts && durations;
    if (st == SHS_OK) st = walk(&C, 1, &records, &starts, &durations);
    if (st == SHS_OK && C.npgs) t->views = 1; /* a job's rank: its groups' other members are other files */
    if (st == SHS_OK && C.laid)
        snprintf(t->note, sizeof t->note, "%s has no start times: its GPU nodes are laid end to end in file order, "
                 "each lasting its duration_micros", in->name);
    if (st == SHS_OK) st = shs_trace_grow_identity_comm(t, "world", C.rank + 1, NULL);
    for (int k = 0; k < C.npgs; k++) free(C.pgs[k].ranks);
    free(C.pgs);
    return st;
}

#else

shs_status_t shs_trace_import_chakra(shs_trace_t *t, const shs_trace_input_t *in) {
    (void)t;
    return shs_set_error(SHS_UNSUPPORTED, "%s: Chakra ET import %s", in->name,
                         shs_feature_missing(SHS_FEATURE_PROTOBUF_C));
}

#endif
