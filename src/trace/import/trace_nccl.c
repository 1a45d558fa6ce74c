/* trace_nccl.c - import NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL logs.
 *
 * Lines read (NCCL's own log format, "host:pid:tid [cudaDev] NCCL INFO ..."):
 *   ... comm <ptr> rank <r> nranks <n> ... commId <id> - Init COMPLETE
 *   ... <Op>: opCount <hex> sendbuff <p> recvbuff <p> count <n> datatype <id>
 *       op <id> root <r> comm <ptr> [nranks=<n>] stream <p>
 * Other lines are ignored. A process is "host:pid"; its global rank is its
 * rank in the largest communicator; each commId becomes a communicator
 * ("world" for the largest, else "comm-<commId>"). Without Init lines the
 * rank is the [cudaDev] field and there is one communicator of [nranks=N]
 * (or the highest rank + 1). opCount (hex) is the per-communicator
 * sequence number. count is per rank for AllGather (send count) and
 * ReduceScatter (receive count), per peer for AllToAll (the sendcount of
 * MSCCL's / RCCL's ncclAllToAll, nccl-tests' paramcount: stock NCCL has no
 * all-to-all and logs it as one Send and Recv per peer), the whole buffer
 * otherwise, so bytes = count x the datatype's size are PER_RANK; datatype and
 * op ids are ncclDataType_t / ncclRedOp_t. Send/Recv name their peer in
 * `root` (comm-local). A collective or Init line whose prefix is garbage
 * (a [cudaDev] of [-1], no host:pid:tid) is refused, not skipped, and so
 * is a rank two processes claim: the same commId rank in two processes'
 * Init lines, or, without Init lines, the same [cudaDev] printed by two
 * processes.
 * What it is not: a reader of NCCL's other subsystems (INIT, NET, ...).
 */
#include <stdlib.h>
#include <string.h>

#include "shardsim/trace_import.h"
#include "trace/trace_util.h"

typedef struct {
    uint64_t ptr;          /* the comm pointer this process printed */
    char proc[96];         /* host:pid */
    int rank, nranks;
    uint64_t comm_id;
    int tcomm;             /* trace comm index, after setup */
} ncomm_t;

typedef struct {
    ncomm_t *v;
    size_t n, cap;
} ncomms_t;

static shs_status_t perr(const shs_trace_input_t *in, long line, const char *what, const char *detail) {
    return shs_set_error(SHS_PARSE, "%s:%ld: %s%s%s", in->name, line, what, detail ? ": " : "", detail ? detail : "");
}

/* Largest [cudaDev] read: a bound on the devices of one node, far above any. */
#define NCCL_MAX_DEV 65535

/* Splits one line into the process key, cudaDev and the token list after
 * "NCCL INFO". Returns 0 for a NCCL INFO line; -1 for any other line; -2
 * for a NCCL INFO line whose prefix is garbage (no host:pid:tid, or a
 * [cudaDev] that is not a device number such as [-1]), with tk / nt set
 * and the reason in why[0..why_cap), so that the caller refuses the lines
 * it reads instead of dropping them. */
static int split_line(const char *line, size_t n, char *proc, size_t proc_cap, long *dev, shs__tok_t **tk, int *nt,
                      char *why, size_t why_cap, shs__tok_t all[40]) {
    int k = shs__tokens(line, n, all, 39);
    if (k < 5 || k > 39 || !shs__tok_is(all[2], "NCCL") || !shs__tok_is(all[3], "INFO")) return -1;
    *nt = k - 4;
    *tk = all + 4;
    /* host:pid:tid -> host:pid */
    const char *s = all[0].s;
    size_t len = all[0].n, colon = len;
    while (colon > 0 && s[colon - 1] != ':') colon--;
    if (colon < 2) {
        snprintf(why, why_cap, "'%.*s' is not host:pid:tid", (int)(len < 60 ? len : 60), s);
        return -2;
    }
    shs__tok_t p = {s, colon - 1};
    shs__tok_copy(p, proc, proc_cap);
    uint64_t d;
    if (all[1].n < 3 || all[1].s[0] != '[' || all[1].s[all[1].n - 1] != ']' ||
        shs__parse_u64(all[1].s + 1, all[1].n - 2, 0, &d) || d > NCCL_MAX_DEV) {
        snprintf(why, why_cap, "cudaDev '%.*s' is not a device number [0..%d]", (int)(all[1].n < 40 ? all[1].n : 40),
                 all[1].s, NCCL_MAX_DEV);
        return -2;
    }
    *dev = (long)d;
    return 0;
}

static int is_init_line(const shs__tok_t *tk, int nt) {
    return nt >= 4 && shs__tok_is(tk[0], "comm") && shs__tok_is(tk[nt - 1], "COMPLETE") && shs__tok_is(tk[nt - 2], "Init");
}

/* Value after key `key` in tk (key value pairs), or NULL. */
static const shs__tok_t *find_kv(const shs__tok_t *tk, int nt, const char *key) {
    for (int i = 0; i + 1 < nt; i++)
        if (shs__tok_is(tk[i], key)) return &tk[i + 1];
    return NULL;
}

static int op_from_name(shs__tok_t t, shs_coll_op_t *op) {
    static const struct { const char *n; shs_coll_op_t op; } m[] = {
        {"AllGather:", SHS_OP_ALL_GATHER}, {"ReduceScatter:", SHS_OP_REDUCE_SCATTER},
        {"AllReduce:", SHS_OP_ALL_REDUCE}, {"Broadcast:", SHS_OP_BROADCAST}, {"Reduce:", SHS_OP_REDUCE},
        {"Send:", SHS_OP_SEND}, {"Recv:", SHS_OP_RECV}, {"AllToAll:", SHS_OP_ALL_TO_ALL},
        {"Gather:", SHS_OP_GATHER}, {"Scatter:", SHS_OP_SCATTER}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (shs__tok_is(t, m[i].n)) { *op = m[i].op; return 0; }
    return -1;
}

/* The values of a collective line's keys: each the token after the first
 * occurrence of its key (as find_kv), found in one pass over the tokens. */
typedef struct {
    const shs__tok_t *opcount, *count, *datatype, *op, *root, *comm;
} coll_kv_t;

static void coll_kvs(const shs__tok_t *tk, int nt, coll_kv_t *kv) {
    *kv = (coll_kv_t){0};
#define KV(field, key) if (!kv->field && shs__tok_is(tk[i], key)) kv->field = &tk[i + 1]
    for (int i = 0; i + 1 < nt; i++) {
        switch (tk[i].n) {
        case 2: KV(op, "op"); break;
        case 4: KV(root, "root"); else KV(comm, "comm"); break;
        case 5: KV(count, "count"); break;
        case 7: KV(opcount, "opCount"); break;
        case 8: KV(datatype, "datatype"); break;
        default: break;
        }
    }
#undef KV
}

/* The communicators by comm pointer: a hash of the pointers whose chains
 * run from the latest Init line to the earliest, so that find_comm returns
 * the latest (host:pid, pointer) match, as a backward scan would. */
typedef struct {
    size_t *head;          /* bucket -> index + 1 of its latest comm, 0 none */
    size_t *prev;          /* comm -> index + 1 of the previous comm in its bucket */
    size_t mask;
} comm_index_t;

static size_t ptr_hash(uint64_t p) { return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull >> 20); }

static shs_status_t index_comms(const ncomms_t *c, comm_index_t *ix, const char *name) {
    size_t nb = 16;
    while (nb < 2 * c->n) nb *= 2;
    ix->mask = nb - 1;
    ix->head = calloc(nb, sizeof *ix->head);
    ix->prev = calloc(c->n ? c->n : 1, sizeof *ix->prev);
    if (!ix->head || !ix->prev) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", name);
    for (size_t i = 0; i < c->n; i++) {
        size_t b = ptr_hash(c->v[i].ptr) & ix->mask;
        ix->prev[i] = ix->head[b];
        ix->head[b] = i + 1;
    }
    return SHS_OK;
}

static ncomm_t *find_comm(const ncomms_t *c, const comm_index_t *ix, const char *proc, uint64_t ptr) {
    for (size_t k = ix->head[ptr_hash(ptr) & ix->mask]; k; k = ix->prev[k - 1])
        if (c->v[k - 1].ptr == ptr && strcmp(c->v[k - 1].proc, proc) == 0) return &c->v[k - 1];
    return NULL;
}

/* The end of the line that starts at buf[i]: its '\n', or len. */
static size_t line_end(const char *buf, size_t i, size_t len) {
    const char *nl = memchr(buf + i, '\n', len - i);
    return nl ? (size_t)(nl - buf) : len;
}

/* Whether line[0..n)'s last blank-separated token is "COMPLETE": no other
 * line can be an Init line, so pass 1 splits no other. */
static int ends_complete(const char *line, size_t n) {
    while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r')) n--;
    return n >= 8 && memcmp(line + n - 8, "COMPLETE", 8) == 0;
}

shs_status_t shs_trace_import_nccl(shs_trace_t *t, const shs_trace_input_t *in) {
    snprintf(t->format, sizeof t->format, "nccl");
    ncomms_t cs = {0};
    shs_status_t st = SHS_OK;
    char proc[96], buf[64], why[96];
    shs__tok_t all[40], *tk = all;
    comm_index_t ix = {0};
    int nt = 0;
    long dev, lineno = 0;
    char **dev_proc = NULL; /* without Init lines: the process that printed each cudaDev */
    int ndev_proc = 0;
    /* pass 1: Init lines */
    for (size_t i = 0; i < in->len && st == SHS_OK;) {
        size_t j = line_end(in->buf, i, in->len);
        lineno++;
        if (!ends_complete(in->buf + i, j - i)) {
            i = j + 1;
            continue;
        }
        int sl = split_line(in->buf + i, j - i, proc, sizeof proc, &dev, &tk, &nt, why, sizeof why, all);
        if (sl == -2 && is_init_line(tk, nt)) {
            st = perr(in, lineno, "malformed 'Init COMPLETE' line", why);
            break;
        }
        if (sl == 0 && is_init_line(tk, nt)) {
            const shs__tok_t *r = find_kv(tk, nt, "rank"), *n = find_kv(tk, nt, "nranks"), *id = find_kv(tk, nt, "commId");
            uint64_t ptr, rv, nv, idv = 0;
            if (!r || !n || shs__parse_u64(tk[1].s, tk[1].n, 2, &ptr) || shs__parse_u64(r->s, r->n, 0, &rv) ||
                shs__parse_u64(n->s, n->n, 0, &nv) || nv < 1 || nv > SHS_TRACE_MAX_WORLD || rv >= nv ||
                (id && shs__parse_u64(id->s, id->n, 1, &idv))) {
                st = perr(in, lineno, "malformed 'Init COMPLETE' line", "want comm <ptr> rank <r> nranks <n> ... commId <id>");
                break;
            }
            if (cs.n == cs.cap) {
                size_t cap = cs.cap ? 2 * cs.cap : 16;
                ncomm_t *nv2 = realloc(cs.v, cap * sizeof *nv2);
                if (!nv2) { st = shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name); break; }
                cs.v = nv2;
                cs.cap = cap;
            }
            /* one process per rank of a communicator: a second Init line for the
             * same commId and rank from another process is not a second rank */
            for (size_t q = 0; q < cs.n && st == SHS_OK; q++)
                if (id && cs.v[q].comm_id == idv && cs.v[q].rank == (int)rv && strcmp(cs.v[q].proc, proc) != 0) {
                    char m[256];
                    snprintf(m, sizeof m, "rank %d of commId %llx is claimed by process %s and, earlier, by %s", (int)rv,
                             (unsigned long long)idv, proc, cs.v[q].proc);
                    st = perr(in, lineno, "duplicate rank", m);
                }
            if (st != SHS_OK) break;
            ncomm_t *c = &cs.v[cs.n++];
            *c = (ncomm_t){.ptr = ptr, .rank = (int)rv, .nranks = (int)nv, .comm_id = id ? idv : ptr, .tcomm = -1};
            snprintf(c->proc, sizeof c->proc, "%s", proc);
        }
        i = j + 1;
    }
    /* communicators: the largest commId is the world; a process's global rank is its rank there */
    int world_size = 0;
    uint64_t world_id = 0;
    for (size_t k = 0; k < cs.n; k++)
        if (cs.v[k].nranks > world_size) { world_size = cs.v[k].nranks; world_id = cs.v[k].comm_id; }
    for (size_t k = 0; k < cs.n && st == SHS_OK; k++) {
        if (cs.v[k].tcomm >= 0) continue;
        uint64_t id = cs.v[k].comm_id;
        int size = cs.v[k].nranks;
        int *members = malloc((size_t)size * sizeof(int));
        if (!members) { st = shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name); break; }
        /* the world is the identity (a per-rank file shows one member only) */
        for (int m = 0; m < size; m++) members[m] = id == world_id ? m : -1;
        for (size_t q = 0; q < cs.n; q++) {
            if (cs.v[q].comm_id != id) continue;
            if (cs.v[q].nranks != size) { st = perr(in, 0, "communicator with two sizes", NULL); break; }
            int global = -1;
            for (size_t w = 0; w < cs.n && global < 0; w++)
                if (cs.v[w].comm_id == world_id && strcmp(cs.v[w].proc, cs.v[q].proc) == 0) global = cs.v[w].rank;
            if (global < 0) global = cs.v[q].rank;
            members[cs.v[q].rank] = global;
        }
        char name[64];
        if (id == world_id) snprintf(name, sizeof name, "world");
        else snprintf(name, sizeof name, "comm-%llx", (unsigned long long)id);
        for (int m = 0; m < size && st == SHS_OK; m++)
            if (members[m] < 0) {
                snprintf(buf, sizeof buf, "rank %d of commId %llx has no Init line", m, (unsigned long long)id);
                st = perr(in, 0, "incomplete communicator", buf);
            }
        int tc = -1;
        if (st == SHS_OK && shs_trace_add_comm(t, name, size, members, &tc) != SHS_OK)
            st = perr(in, 0, "bad communicator", shs_last_error());
        free(members);
        for (size_t q = 0; q < cs.n; q++)
            if (cs.v[q].comm_id == id) cs.v[q].tcomm = tc;
    }
    if (st == SHS_OK) st = index_comms(&cs, &ix, in->name);
    /* pass 2: collectives */
    lineno = 0;
    for (size_t i = 0; i < in->len && st == SHS_OK;) {
        size_t j = line_end(in->buf, i, in->len);
        lineno++;
        const char *line = in->buf + i;
        size_t len = j - i;
        i = j + 1;
        int sl = split_line(line, len, proc, sizeof proc, &dev, &tk, &nt, why, sizeof why, all);
        if (sl == -1 || nt < 2 || !shs__tok_is(tk[1], "opCount")) continue;
        if (sl == -2) { st = perr(in, lineno, "malformed collective line", why); break; }
        shs_trace_rec_t r = shs_trace_rec_init();
        if (op_from_name(tk[0], &r.op)) {
            st = perr(in, lineno, "unknown NCCL operation", shs__tok_copy(tk[0], buf, sizeof buf));
            break;
        }
        coll_kv_t kv;
        coll_kvs(tk, nt, &kv);
        const shs__tok_t *oc = kv.opcount, *cnt = kv.count, *dt = kv.datatype, *op = kv.op, *root = kv.root,
                         *cm = kv.comm;
        uint64_t seq, count, dtv, opv = 0, rootv = 0, ptr = 0;
        if (!oc || shs__parse_u64(oc->s, oc->n, 2, &seq) || seq > (uint64_t)INT64_MAX) { st = perr(in, lineno, "bad opCount (hexadecimal)", NULL); break; }
        if (!cnt || shs__parse_u64(cnt->s, cnt->n, 0, &count)) { st = perr(in, lineno, "bad count", "want a non-negative integer"); break; }
        if (!dt || shs__parse_u64(dt->s, dt->n, 0, &dtv) || shs_dtype_from_nccl((long long)dtv) == SHS_DTYPE_DEFAULT) { st = perr(in, lineno, "unknown datatype id", dt ? shs__tok_copy(*dt, buf, sizeof buf) : "missing"); break; }
        if (op && (shs__parse_u64(op->s, op->n, 0, &opv) || opv >= SHS_NUM_REDOPS)) { st = perr(in, lineno, "unknown reduction op id", shs__tok_copy(*op, buf, sizeof buf)); break; }
        if (root && shs__parse_u64(root->s, root->n, 0, &rootv)) { st = perr(in, lineno, "bad root", NULL); break; }
        if (!cm || shs__parse_u64(cm->s, cm->n, 2, &ptr)) { st = perr(in, lineno, "bad or missing comm pointer", NULL); break; }
        shs_dtype_t dtype = shs_dtype_from_nccl((long long)dtv); /* NCCL's numbering */
        size_t es = shs_dtype_size(dtype);
        if (count > SHS_TRACE_MAX_BYTES / es) { st = perr(in, lineno, "absurd size", shs__tok_copy(*cnt, buf, sizeof buf)); break; }
        ncomm_t *c = cs.n ? find_comm(&cs, &ix, proc, ptr) : NULL;
        int size;
        if (c) {
            r.rank = c->tcomm >= 0 ? t->comms[c->tcomm].ranks[c->rank] : c->rank;
            r.comm = c->tcomm;
            size = c->nranks;
        } else {
            /* no Init line: rank = cudaDev, one world of [nranks=N] */
            int nr = (int)dev + 1;
            for (int q = 0; q < nt; q++)
                if (tk[q].n > 9 && memcmp(tk[q].s, "[nranks=", 8) == 0) {
                    uint64_t v;
                    if (shs__parse_u64(tk[q].s + 8, tk[q].n - 9, 0, &v) || v < 1 || v > SHS_TRACE_MAX_WORLD) {
                        st = perr(in, lineno, "bad [nranks=N]", NULL);
                        break;
                    }
                    nr = (int)v;
                }
            if (st != SHS_OK) break;
            if (dev >= nr) { st = perr(in, lineno, "rank (cudaDev) beyond nranks", NULL); break; }
            int wc = shs_trace_find_comm(t, "world");
            if (wc >= 0 && t->comms[wc].size != nr) { st = perr(in, lineno, "nranks differs from earlier lines", NULL); break; }
            if (wc < 0 && shs_trace_add_comm(t, "world", nr, NULL, &wc) != SHS_OK) { st = perr(in, lineno, "bad world", shs_last_error()); break; }
            /* the rank is the cudaDev: two processes printing one cudaDev
             * (two nodes' logs, say) would silently become one rank */
            if (!dev_proc) {
                if (!(dev_proc = calloc((size_t)nr, sizeof *dev_proc))) {
                    st = shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name);
                    break;
                }
                ndev_proc = nr; /* nr is the same on every line (checked above) */
            }
            if (!dev_proc[dev] && !(dev_proc[dev] = strdup(proc))) {
                st = shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name);
                break;
            }
            if (strcmp(dev_proc[dev], proc) != 0) {
                char m[300];
                snprintf(m, sizeof m, "processes %s and %s both print cudaDev [%ld]; without 'Init COMPLETE' lines "
                         "(NCCL_DEBUG_SUBSYS=INIT,COLL) the rank is the cudaDev, so two processes cannot share one",
                         dev_proc[dev], proc, dev);
                st = perr(in, lineno, "duplicate rank", m);
                break;
            }
            r.rank = (int)dev;
            r.comm = wc;
            size = nr;
        }
        r.seq = (int64_t)seq;
        r.src_line = lineno;
        r.count = count;
        r.dtype = (int32_t)dtype;
        r.bytes = count * es;
        r.scope = SHS_BYTES_PER_RANK;
        if (r.op == SHS_OP_REDUCE_SCATTER || r.op == SHS_OP_ALL_REDUCE || r.op == SHS_OP_REDUCE) r.redop = (int32_t)opv;
        if (r.op == SHS_OP_BROADCAST || r.op == SHS_OP_REDUCE) {
            if (rootv >= (uint64_t)size) { st = perr(in, lineno, "root outside the communicator", NULL); break; }
            r.root = (int32_t)rootv;
        }
        if (shs_coll_op_is_p2p(r.op)) {
            if (rootv >= (uint64_t)size) { st = perr(in, lineno, "peer outside the communicator", NULL); break; }
            r.peer = t->comms[r.comm].ranks[rootv];
            r.tag = 0;
        }
        if (shs_trace_append(t, &r) != SHS_OK) st = perr(in, lineno, "bad record", shs_last_error());
    }
    for (int q = 0; q < ndev_proc; q++) free(dev_proc[q]);
    free(dev_proc);
    free(ix.head);
    free(ix.prev);
    free(cs.v);
    return st;
}
