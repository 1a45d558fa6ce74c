/* trace_horovod.c - import a Horovod timeline (HOROVOD_TIMELINE=FILE).
 *
 * What Horovod writes (docs/timeline.rst; horovod/common/timeline.cc,
 * message.cc, common.cc), and what this reader relies on:
 *   - one file, written by rank 0 only, holding what rank 0 saw of every
 *     worker: a Chrome-trace JSON array of events, written incrementally.
 *     Horovod before the writer thread (<= 0.16) writes "[" and then every
 *     event followed by ",\n", never closing the array; later versions
 *     keep it closed by writing "}]" after each event and seeking back one
 *     byte before the next. A file read while the job runs, or after a
 *     crash, therefore ends after any whole event, with or without "]"
 *     and with or without a trailing ",": all accepted. A value cut in the
 *     middle (a truncated event) is refused with file, line and column.
 *   - every tensor is a "process": a metadata event {"name":
 *     "process_name", "ph": "M", "pid": P, "args": {"name": TENSOR}}
 *     before its first event (pid 0 carries only
 *     start_time_since_epoch_in_micros in later versions); events of
 *     that tensor carry "pid": P and "ts" in integer microseconds since
 *     the timeline started.
 *   - per tensor operation, nested "B"/"E" pairs on its pid:
 *       B NEGOTIATE_<REQUEST> ... E      rank 0 collecting readiness; each
 *                                        rank's readiness is a tick: an
 *                                        "X" event (dur 0) named by the
 *                                        rank's number ("0", "1", ...)
 *       B <RESPONSE>                     the operation: ALLREDUCE,
 *                                        ALLGATHER, BROADCAST,
 *                                        REDUCESCATTER, ALLTOALL, ADASUM,
 *                                        BARRIER, JOIN or ERROR
 *         B <ACTIVITY> ... E             QUEUE, MEMCPY_IN_FUSION_BUFFER,
 *                                        NCCL_ALLREDUCE, MPI_ALLREDUCE, ...
 *       E {"args": {"dtype": D, "shape": "[d0, d1, ...]"}}
 *     The closing E's args describe the operation's output tensor
 *     (Timeline::End(name, e.output)); they are absent when Horovod
 *     closes a failed operation (End(name, nullptr)). Responses served
 *     from Horovod's response cache skip the negotiation.
 *   - dtype names (DataType_Name): uint8 int8 uint16 int16 int32 int64
 *     float16 float32 float64 bool (byte), with sizes 1 1 2 2 4 8 2 4 8 1
 *     (1); or the DataType enum's names, HOROVOD_UINT8 ... HOROVOD_BOOL.
 *   - shape: TensorShape::DebugString, "[2, 3]" ("[]" a scalar).
 *   - cycle markers ("ph": "i", "CYCLE_START", no pid) are not tensors.
 *
 * What becomes a record: one collective call per completed top-level
 * phase, on every rank of one "world" communicator (Horovod's operations
 * are collectives over all ranks), in the order rank 0 started them
 * (top-level B time, then file position; fused tensors are separate
 * calls). op from the phase name: ALLREDUCE all_reduce (sum), ADASUM
 * all_reduce (no reduce op: Adasum is not a sum), ALLGATHER all_gather,
 * BROADCAST broadcast (root not in the timeline: none), REDUCESCATTER
 * reduce_scatter, ALLTOALL all_to_all, BARRIER barrier. JOIN and ERROR
 * phases move no tensor of the model and give no record. count = the
 * product of the shape, bytes = count x the dtype's size, as the output
 * tensor: the whole gathered buffer for all_gather (scope total); rank
 * 0's part for reduce_scatter (per rank); for all_to_all rank 0's whole
 * receive buffer, which equals its send buffer when the splits are even,
 * so the size is what every other format's all_to_all size counts (one
 * rank's input, scope total: shs_trace_input_scope()); the buffer for the
 * others. uint16 and int16 have no shardsim dtype: the dtype is left
 * unknown and bytes are 2 x count. all_gather's count is NCCL's, one
 * rank's part: the output's elements / world, or 0 (unknown) when they do
 * not divide evenly (Horovod gathers uneven first dimensions, and the
 * timeline shows only their sum). A closing E without args gives an
 * unknown size (count and bytes 0). Times are the top-level B and E,
 * rank 0's clock: every rank's record carries them (the timeline has no
 * other clock). The marker is the tensor name (blanks as '_').
 * World size: the readiness ticks name the ranks; the world is the
 * largest rank ticked + 1. Without ticks (every response cached) the
 * world is --world, and without --world the file is refused saying so.
 * Operations still open at the end of the file (the job was running)
 * give no record. Refused with file:line and the tensor: an unknown
 * top-level phase or dtype, a malformed shape, an E without a B, a tick
 * that is not a rank, a negative or absurd ts, an end before its start,
 * more than HVD_MAX_RECORDS records in all.
 * What it is not: a reader of the activities' own times (the record spans
 * the whole operation) or of other Chrome-trace producers (Kineto: trace_kineto.c).
 */
#include <stdlib.h>
#include <string.h>

#include "shardsim/trace_import.h"
#include "shardsim/features.h"
#include "trace/trace_json.h"
#include "trace/trace_util.h"

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>

/* Records in all (operations x world): 2^24 records are ~1.2 GB. */
#define HVD_MAX_RECORDS ((uint64_t)1 << 24)
/* Nesting of B events on one tensor (Horovod writes at most 2). */
#define HVD_MAX_DEPTH 4

typedef struct {
    int used;
    int64_t pid;
    uint32_t marker;        /* interned tensor name, 0 until named */
    char *name;             /* tensor name, or NULL */
    int depth;
    char *open[HVD_MAX_DEPTH]; /* names of the open B events, outermost first */
    double t_open;          /* ts of the outermost open B */
    size_t pos_open;        /* its event index */
} tensor_t;

typedef struct {
    double t0, t1;
    size_t pos;
    shs_coll_op_t op;
    int redop;
    int dtype;
    shs_bytes_scope_t scope;
    uint64_t count, bytes;
    uint32_t marker;
} hop_t;

typedef struct {
    const shs_trace_input_t *in;
    const char *line_base;  /* newline counting: bytes before line_at are counted */
    size_t line_at;
    long line;
    tensor_t *ts;           /* open-addressed by pid */
    size_t ts_cap, ts_n;
    hop_t *ops;
    size_t nops, ops_cap;
    int max_rank;           /* largest rank ticked, -1 none */
} hvd_t;

/* Line number (1-based) of byte `at`; positions only grow. */
static long line_of(hvd_t *h, size_t at) {
    for (; h->line_at < at && h->line_at < h->in->len; h->line_at++)
        if (h->in->buf[h->line_at] == '\n') h->line++;
    return h->line;
}

static shs_status_t ev_err(hvd_t *h, size_t at, const tensor_t *x, const char *fmt, const char *arg) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    if (x)
        return shs_set_error(SHS_PARSE, "%s:%ld: tensor '%s' (pid %lld): %s", h->in->name, line_of(h, at),
                             x->name ? x->name : "?", (long long)x->pid, msg);
    return shs_set_error(SHS_PARSE, "%s:%ld: %s", h->in->name, line_of(h, at), msg);
}

static size_t hash_pid(int64_t pid, size_t cap) { return (size_t)((uint64_t)pid * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1); }

/* The tensor of pid (created on first sight), or NULL when out of memory. */
static tensor_t *tensor_of(hvd_t *h, int64_t pid) {
    if (2 * (h->ts_n + 1) > h->ts_cap) {
        size_t cap = h->ts_cap ? 2 * h->ts_cap : 64;
        tensor_t *nt = calloc(cap, sizeof *nt);
        if (!nt) return NULL;
        for (size_t i = 0; i < h->ts_cap; i++) {
            if (!h->ts[i].used) continue;
            size_t k = hash_pid(h->ts[i].pid, cap);
            while (nt[k].used) k = (k + 1) & (cap - 1);
            nt[k] = h->ts[i];
        }
        free(h->ts);
        h->ts = nt;
        h->ts_cap = cap;
    }
    size_t k = hash_pid(pid, h->ts_cap);
    while (h->ts[k].used && h->ts[k].pid != pid) k = (k + 1) & (h->ts_cap - 1);
    if (!h->ts[k].used) {
        h->ts[k].used = 1;
        h->ts[k].pid = pid;
        h->ts_n++;
    }
    return &h->ts[k];
}

static void tensors_free(hvd_t *h) {
    for (size_t i = 0; i < h->ts_cap; i++) {
        if (!h->ts[i].used) continue;
        free(h->ts[i].name);
        for (int d = 0; d < h->ts[i].depth; d++) free(h->ts[i].open[d]);
    }
    free(h->ts);
}

/* Horovod's DataType_Name ("float32") or its enum's name (HOROVOD_FLOAT32,
 * horovod/common/message.h) to a dtype and element size; dtype NONE for the
 * 16-bit integers (no shardsim dtype, size still known). 0 ok, -1 unknown. */
static int hvd_dtype(const char *s, int *dtype, uint64_t *size) {
    static const struct { const char *n; int d; unsigned sz; } m[] = {
        {"uint8", SHS_U8, 1}, {"int8", SHS_I8, 1}, {"uint16", SHS_TRACE_NONE, 2}, {"int16", SHS_TRACE_NONE, 2},
        {"int32", SHS_I32, 4}, {"int64", SHS_I64, 8}, {"float16", SHS_F16, 2}, {"float32", SHS_F32, 4},
        {"float64", SHS_F64, 8}, {"bool", SHS_U8, 1}, {"byte", SHS_U8, 1}};
    char low[32];
    if (strncmp(s, "HOROVOD_", 8) == 0) { /* the enum's spelling: upper case after the prefix */
        size_t k = 0;
        for (const char *p = s + 8; *p && k + 1 < sizeof low; p++) {
            if (*p >= 'a' && *p <= 'z') return -1;
            low[k++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        }
        low[k] = 0;
        s = low;
    }
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (strcmp(s, m[i].n) == 0) { *dtype = m[i].d; *size = m[i].sz; return 0; }
    return -1;
}

/* "[d0, d1, ...]" (or a JSON array of integers) to the element count; 0 ok. */
static int hvd_shape(json_t *v, uint64_t *count) {
    uint64_t n = 1;
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            int64_t d;
            if (shs__json_int(x, &d) || d < 0 || (d && n > SHS_TRACE_MAX_BYTES / (uint64_t)d)) return -1;
            n *= (uint64_t)d;
        }
        *count = n;
        return 0;
    }
    if (!json_is_string(v)) return -1;
    const char *s = json_string_value(v);
    size_t len = strlen(s), i = 1;
    if (len < 2 || s[0] != '[' || s[len - 1] != ']') return -1;
    while (i < len - 1 && s[i] == ' ') i++;
    if (i == len - 1) { *count = 1; return 0; } /* a scalar */
    while (i < len - 1) {
        size_t j = i;
        while (j < len - 1 && s[j] >= '0' && s[j] <= '9') j++;
        uint64_t d;
        if (shs__parse_u64(s + i, j - i, 0, &d) || (d && n > SHS_TRACE_MAX_BYTES / d)) return -1;
        n *= d;
        while (j < len - 1 && s[j] == ' ') j++;
        if (j < len - 1) {
            if (s[j] != ',') return -1;
            j++;
            while (j < len - 1 && s[j] == ' ') j++;
            if (j == len - 1) return -1;
        }
        i = j;
    }
    *count = n;
    return 0;
}

/* Top-level phase name to op; 1 an op, 0 no record (JOIN, ERROR), -1 unknown. */
static int hvd_op(const char *s, shs_coll_op_t *op, int *redop, shs_bytes_scope_t *scope) {
    *redop = SHS_TRACE_NONE;
    *scope = SHS_BYTES_PER_RANK;
    if (strcmp(s, "ALLREDUCE") == 0) { *op = SHS_OP_ALL_REDUCE; *redop = SHS_SUM; }
    else if (strcmp(s, "ADASUM") == 0) *op = SHS_OP_ALL_REDUCE;
    else if (strcmp(s, "ALLGATHER") == 0) { *op = SHS_OP_ALL_GATHER; *scope = SHS_BYTES_TOTAL; }
    else if (strcmp(s, "BROADCAST") == 0) *op = SHS_OP_BROADCAST;
    else if (strcmp(s, "REDUCESCATTER") == 0) { *op = SHS_OP_REDUCE_SCATTER; *redop = SHS_SUM; }
    else if (strcmp(s, "ALLTOALL") == 0) { *op = SHS_OP_ALL_TO_ALL; *scope = shs_trace_input_scope(*op); }
    else if (strcmp(s, "BARRIER") == 0) *op = SHS_OP_BARRIER;
    else if (strcmp(s, "JOIN") == 0 || strcmp(s, "ERROR") == 0) return 0;
    else return -1;
    return 1;
}

static int is_negotiate(const char *s) { return strncmp(s, "NEGOTIATE_", 10) == 0; }

/* The event's ts in seconds; 0 ok. */
static int ev_time(json_t *ev, double *s) {
    json_t *ts = json_object_get(ev, "ts");
    return json_is_number(ts) ? shs__trace_time(json_number_value(ts), 1e-6, s) : -1;
}

/* A top-level phase of x closes with event ev (index pos, at byte `at`). */
static shs_status_t close_op(hvd_t *h, tensor_t *x, json_t *ev, size_t at, const char *phase, double t1) {
    hop_t o = {.t0 = x->t_open, .t1 = t1, .pos = x->pos_open, .dtype = SHS_TRACE_NONE, .marker = x->marker};
    int k = hvd_op(phase, &o.op, &o.redop, &o.scope);
    if (k < 0) return ev_err(h, at, x, "unknown Horovod operation '%s' (ALLREDUCE, ALLGATHER, BROADCAST, "
                             "REDUCESCATTER, ALLTOALL, ADASUM, BARRIER, JOIN, ERROR)", phase);
    if (k == 0) return SHS_OK;
    if (t1 < o.t0) return ev_err(h, at, x, "the operation %s ends before it starts", phase);
    json_t *args = json_object_get(ev, "args"), *dt = json_object_get(args, "dtype"), *sh = json_object_get(args, "shape");
    if (dt || sh) {
        uint64_t es = 0;
        if (!json_is_string(dt) || hvd_dtype(json_string_value(dt), &o.dtype, &es)) {
            char m[96];
            snprintf(m, sizeof m, "%s", json_is_string(dt) ? json_string_value(dt) : "(not a string)");
            return ev_err(h, at, x, "unknown dtype '%s' (uint8, int8, uint16, int16, int32, int64, float16, "
                          "float32, float64, bool, byte, or the enum's HOROVOD_FLOAT32, ...)", m);
        }
        if (hvd_shape(sh, &o.count)) return ev_err(h, at, x, "shape is not \"[d0, d1, ...]\" of sizes up to 2^50%s", "");
        if (o.count > SHS_TRACE_MAX_BYTES / es) return ev_err(h, at, x, "shape x dtype size is above 2^50 bytes%s", "");
        o.bytes = o.count * es;
    }
    if (h->nops == h->ops_cap) {
        size_t cap = h->ops_cap ? 2 * h->ops_cap : 256;
        hop_t *no = realloc(h->ops, cap * sizeof *no);
        if (!no) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", h->in->name);
        h->ops = no;
        h->ops_cap = cap;
    }
    h->ops[h->nops++] = o;
    return SHS_OK;
}

/* One event (index pos, at byte `at`). */
static shs_status_t on_event(hvd_t *h, shs_trace_t *t, json_t *ev, size_t pos, size_t at) {
    if (!json_is_object(ev)) return ev_err(h, at, NULL, "an event is not a JSON object%s", "");
    json_t *ph = json_object_get(ev, "ph"), *pidv = json_object_get(ev, "pid"), *nm = json_object_get(ev, "name");
    if (!json_is_string(ph)) return ev_err(h, at, NULL, "event without a \"ph\" string%s", "");
    const char *p = json_string_value(ph);
    int M = strcmp(p, "M") == 0, B = strcmp(p, "B") == 0, E = strcmp(p, "E") == 0, X = strcmp(p, "X") == 0;
    if (!M && !B && !E && !X) return SHS_OK; /* cycle markers ("i"), others: not tensor phases */
    int64_t pid;
    if (shs__json_int(pidv, &pid) || pid < 0)
        return ev_err(h, at, NULL, "\"%s\" event without a non-negative integer pid", p);
    tensor_t *x = tensor_of(h, pid);
    if (!x) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", h->in->name);
    if (M) {
        json_t *a = json_object_get(json_object_get(ev, "args"), "name");
        if (!json_is_string(nm) || strcmp(json_string_value(nm), "process_name") != 0 || !json_is_string(a)) return SHS_OK;
        char *d = strdup(json_string_value(a));
        if (!d) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", h->in->name);
        for (char *c = d; *c; c++)
            if ((unsigned char)*c <= ' ' || *c == '#') *c = '_';
        free(x->name);
        x->name = d;
        x->marker = shs_trace_intern(t, d);
        if (x->marker == UINT32_MAX) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", h->in->name);
        return SHS_OK;
    }
    double s;
    if (ev_time(ev, &s)) return ev_err(h, at, x, "\"ts\" is not a time in microseconds in 0..2^63 ns%s", "");
    if (X) { /* a readiness tick while negotiating */
        if (x->depth != 1 || !is_negotiate(x->open[0])) return SHS_OK;
        const char *r = json_is_string(nm) ? json_string_value(nm) : "";
        uint64_t rk;
        if (shs__parse_u64(r, strlen(r), 0, &rk) || rk >= SHS_TRACE_MAX_WORLD)
            return ev_err(h, at, x, "readiness tick '%s' is not a rank number below 65536", r);
        if ((int)rk > h->max_rank) h->max_rank = (int)rk;
        return SHS_OK;
    }
    if (B) {
        if (!json_is_string(nm)) return ev_err(h, at, x, "\"B\" event without a name%s", "");
        if (x->depth == HVD_MAX_DEPTH) return ev_err(h, at, x, "\"B\" events nested deeper than %s", "4");
        char *d = strdup(json_string_value(nm));
        if (!d) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", h->in->name);
        if (x->depth == 0) { x->t_open = s; x->pos_open = pos; }
        x->open[x->depth++] = d;
        return SHS_OK;
    }
    if (x->depth == 0) return ev_err(h, at, x, "\"E\" event without an open \"B\"%s", "");
    char *phase = x->open[--x->depth];
    shs_status_t st = SHS_OK;
    if (x->depth == 0 && !is_negotiate(phase)) st = close_op(h, x, ev, at, phase, s);
    else if (x->depth == 0 && s < x->t_open) st = ev_err(h, at, x, "%s ends before it starts", phase);
    free(phase);
    return st;
}

static int cmp_op(const void *a, const void *b) {
    const hop_t *x = a, *y = b;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0 ? 1 : (x->pos > y->pos) - (x->pos < y->pos);
}

static int blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

shs_status_t shs_trace_import_horovod(shs_trace_t *t, const shs_trace_input_t *in) {
    snprintf(t->format, sizeof t->format, "horovod");
    hvd_t h = {.in = in, .line = 1, .max_rank = -1};
    const char *b = in->buf;
    size_t len = in->len, i = 0, pos = 0;
    shs_status_t st = SHS_OK;
    while (i < len && blank(b[i])) i++;
    if (i == len || b[i] != '[')
        return shs_set_error(SHS_PARSE, "%s:%ld: a Horovod timeline is a JSON array: expected '['", in->name, line_of(&h, i));
    i++;
    for (;;) {
        while (i < len && blank(b[i])) i++;
        if (i == len || b[i] == ']') break; /* the array's end, written or not yet */
        size_t at = i;
        json_error_t jerr;
        json_t *ev = json_loadb(b + i, len - i, JSON_DISABLE_EOF_CHECK, &jerr);
        if (!ev) {
            /* jansson's line and column count from the event's first byte */
            size_t ls = at;
            while (ls > 0 && b[ls - 1] != '\n') ls--;
            long l = line_of(&h, at) + jerr.line - 1;
            long col = jerr.line == 1 ? (long)(at - ls) + jerr.column : jerr.column;
            st = shs_set_error(SHS_PARSE, "%s:%ld:%ld: event %zu (from byte %zu) is %s: %s", in->name, l, col, pos, at,
                               (size_t)jerr.position >= len - at ? "truncated: the file ends inside it" : "malformed JSON",
                               jerr.text);
            break;
        }
        i += (size_t)jerr.position;
        st = on_event(&h, t, ev, pos++, at);
        json_decref(ev);
        if (st != SHS_OK) break;
        while (i < len && blank(b[i])) i++;
        if (i < len && b[i] == ',') i++;
        else if (i < len && b[i] != ']') {
            st = shs_set_error(SHS_PARSE, "%s:%ld: expected ',' or ']' after event %zu", in->name, line_of(&h, i), pos - 1);
            break;
        }
    }
    if (st == SHS_OK) {
        if (i < len && b[i] == ']') i++;
        while (i < len && blank(b[i])) i++;
        if (i < len) st = shs_set_error(SHS_PARSE, "%s:%ld: data after the timeline's closing ']'", in->name, line_of(&h, i));
    }
    int world = h.max_rank + 1;
    if (st == SHS_OK && world == 0) {
        if (in->world > 0) world = in->world;
        else if (h.nops)
            st = shs_set_error(SHS_PARSE, "%s: no readiness ticks name the ranks (every response came from Horovod's "
                               "cache): give the world size (--world N)", in->name);
    }
    if (st == SHS_OK && in->world > world) world = in->world;
    if (st == SHS_OK && h.nops && (uint64_t)h.nops * (uint64_t)world > HVD_MAX_RECORDS)
        st = shs_set_error(SHS_PARSE, "%s: %zu operations on %d ranks are %llu records, above the limit of %llu",
                           in->name, h.nops, world, (unsigned long long)h.nops * (unsigned long long)world,
                           (unsigned long long)HVD_MAX_RECORDS);
    int wc = 0;
    if (st == SHS_OK && world > 0) st = shs_trace_grow_identity_comm(t, "world", world, &wc);
    if (st == SHS_OK && h.nops) qsort(h.ops, h.nops, sizeof *h.ops, cmp_op);
    for (size_t k = 0; k < h.nops && st == SHS_OK; k++) {
        const hop_t *o = &h.ops[k];
        shs_trace_rec_t r = shs_trace_rec_init();
        r.comm = wc;
        r.seq = (int64_t)k;
        r.src_line = (int64_t)o->pos + 1; /* the event opening the operation, from 1 (0 is "unknown") */
        r.op = o->op;
        r.dtype = o->dtype;
        r.redop = o->redop;
        r.scope = o->scope;
        r.count = o->count;
        if (o->op == SHS_OP_ALL_GATHER) /* NCCL's count: one rank's part */
            r.count = o->count % (uint64_t)world == 0 ? o->count / (uint64_t)world : 0;
        r.bytes = o->bytes;
        r.t_start = o->t0;
        r.t_end = o->t1;
        r.marker = o->marker;
        for (int q = 0; q < world && st == SHS_OK; q++) {
            r.rank = q;
            if (shs_trace_append(t, &r) != SHS_OK)
                st = shs_set_error(SHS_PARSE, "%s: operation %zu: %s", in->name, k, shs_last_error());
        }
    }
    free(h.ops);
    tensors_free(&h);
    return st;
}

#else

shs_status_t shs_trace_import_horovod(shs_trace_t *t, const shs_trace_input_t *in) {
    (void)t;
    return shs_set_error(SHS_UNSUPPORTED, "%s: Horovod timelines are JSON: reading them %s", in->name,
                         shs_feature_missing(SHS_FEATURE_JANSSON));
}

#endif
