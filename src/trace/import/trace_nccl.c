/* trace_nccl.c - import NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL logs,
 * streamed: a file is read twice, a window at a time, never held whole.
 *
 * Lines read (NCCL's own log format, "host:pid:tid [cudaDev] NCCL INFO ...",
 * behind any launcher header: srun --label's "0: ", Ray's "(RayTrainWorker
 * pid=..., ip=...) ", torchrun's "[rank0]:" / "[default0]:"):
 *   ... [ncclCommInitRank|ncclCommSplit|...] comm <ptr> rank <r> nranks <n>
 *       ... [commId <id> | parent <ptr> [splitCount <k>] color <c> key <k>]
 *       - Init COMPLETE
 *   ... <Op>: opCount <hex> sendbuff <p> recvbuff <p> count <n> datatype <id>
 *       op <id> root <r> comm <ptr> [nranks=<n>] stream <p>
 * Other lines are ignored. Pass 1 reads the Init lines: the communicators
 * and each process's ("host:pid") global rank, its rank in the largest
 * (trace_nccl_init.c). Pass 2 reads the calls: a call's communicator is
 * the one its process last initialized with that pointer before the line
 * (a pointer freed and reused names the new communicator from its Init
 * line on); a pointer no Init line of the process named is refused when the
 * log has Init lines, and so is a [nranks=N] other than the communicator's
 * size. Without Init lines the rank is the [cudaDev] field and there is one
 * communicator of [nranks=N] (required on every line), and one comm pointer
 * per process (a second one is refused: which ranks it holds is unknown);
 * the trace's note says so, with the NCCL_DEBUG_SUBSYS=INIT,COLL hint.
 * opCount (hex) is the per-communicator sequence number. count is per rank
 * for AllGather (send count) and ReduceScatter (receive count), per peer
 * for AllToAll (the sendcount of MSCCL's / RCCL's ncclAllToAll, nccl-tests'
 * paramcount: stock NCCL has no all-to-all and logs it as one Send and Recv
 * per peer), the whole buffer otherwise, so bytes = count x the datatype's
 * size are PER_RANK; datatype and op ids are ncclDataType_t / ncclRedOp_t.
 * Send/Recv name their peer in `root` (comm-local). A collective or Init
 * line whose prefix is garbage (a [cudaDev] of [-1], no host:pid:tid) is
 * refused, not skipped, and so is a rank two processes claim: the same
 * communicator rank in two processes' Init lines, or, without Init lines,
 * the same [cudaDev] printed by two processes.
 * What it is not: a reader of NCCL's other subsystems (NET, TUNING, ...).
 */
#include <stdlib.h>
#include <string.h>

#include "shardsim/trace_import.h"
#include "trace/import/trace_nccl.h"

static shs_status_t perr(const char *name, int64_t line, const char *what, const char *detail) {
    return shs_set_error(SHS_PARSE, "%s:%lld: %s%s%s", name, (long long)line, what, detail ? ": " : "",
                         detail ? detail : "");
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
 * occurrence of its key, found in one pass over the tokens. */
typedef struct {
    const shs__tok_t *opcount, *count, *datatype, *op, *root, *comm, *nranks;
} coll_kv_t;

static void coll_kvs(const shs__tok_t *tk, int nt, coll_kv_t *kv) {
    /* NCCL's layout (enqueue.cc, 2.4 to 2.27): every key at its place */
    if (nt >= 18 && shs__tok_is(tk[1], "opCount") && shs__tok_is(tk[7], "count") && shs__tok_is(tk[9], "datatype") &&
        shs__tok_is(tk[11], "op") && shs__tok_is(tk[13], "root") && shs__tok_is(tk[15], "comm")) {
        *kv = (coll_kv_t){&tk[2], &tk[8], &tk[10], &tk[12], &tk[14], &tk[16], NULL};
        if (tk[17].n > 9 && memcmp(tk[17].s, "[nranks=", 8) == 0) kv->nranks = &tk[17];
        return;
    }
    *kv = (coll_kv_t){0};
#define KV(field, key) if (!kv->field && shs__tok_is(tk[i], key)) kv->field = &tk[i + 1]
    for (int i = 0; i < nt; i++) {
        if (tk[i].n > 9 && memcmp(tk[i].s, "[nranks=", 8) == 0) {
            if (!kv->nranks) kv->nranks = &tk[i];
            continue;
        }
        if (i + 1 == nt) break;
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

/* Pass 2's live map: (process, comm pointer) -> the Init line (handle)
 * that process last printed for it; open addressing, overwritten on reuse. */
typedef struct {
    uint64_t ptr;
    int proc;      /* -1: empty */
    int inst;
} live_t;

typedef struct {
    live_t *v;
    size_t mask;
} live_map_t;

static size_t live_hash(int proc, uint64_t ptr) {
    return (size_t)(((ptr >> 4) ^ ((uint64_t)proc * 0x9E3779B97F4A7C15ull)) * 0xff51afd7ed558ccdull >> 17);
}

static live_t *live_slot(live_map_t *m, int proc, uint64_t ptr) {
    for (size_t i = live_hash(proc, ptr) & m->mask;; i = (i + 1) & m->mask)
        if (m->v[i].proc < 0 || (m->v[i].proc == proc && m->v[i].ptr == ptr)) return &m->v[i];
}

/* Everything pass 2 keeps. */
typedef struct {
    shs_trace_t *t;
    const char *name;
    shs__nccl_procs_t procs;
    shs__nccl_comms_t comms;
    live_map_t live;
    size_t next_inst;             /* Init lines seen so far in pass 2 */
    /* without Init lines */
    int *dev_proc;                /* per cudaDev: the process that printed it, -1 none */
    uint64_t *proc_ptr;           /* per process: its one comm pointer */
    size_t nproc_ptr;
    int world_comm;
} reader_t;

/* The communicator, global rank and size of a call without Init lines. */
static shs_status_t no_init_call(reader_t *R, int64_t line, const shs__nccl_line_t *x, int proc, uint64_t ptr,
                                 const shs__tok_t *nranks, shs_trace_rec_t *r, int *size) {
    char m[400];
    uint64_t v;
    if (!nranks) {
        snprintf(m, sizeof m, "the log has no 'Init COMPLETE' lines and this line no [nranks=N]: the communicator's "
                 "size is unknown (" SHS__NCCL_INIT_HINT ")");
        return perr(R->name, line, "communicator size unknown", m);
    }
    if (shs__parse_u64(nranks->s + 8, nranks->n - 9, 0, &v) || v < 1 || v > SHS_TRACE_MAX_WORLD ||
        nranks->s[nranks->n - 1] != ']')
        return perr(R->name, line, "bad [nranks=N]", NULL);
    int nr = (int)v;
    if (x->dev >= nr) {
        snprintf(m, sizeof m, "cudaDev [%ld] of a communicator of %d ranks: without 'Init COMPLETE' lines the rank "
                 "is the cudaDev (" SHS__NCCL_INIT_HINT ")", x->dev, nr);
        return perr(R->name, line, "rank (cudaDev) beyond nranks", m);
    }
    if (R->world_comm >= 0 && R->t->comms[R->world_comm].size != nr) {
        snprintf(m, sizeof m, "[nranks=%d] here, %d before", nr, R->t->comms[R->world_comm].size);
        return perr(R->name, line, "nranks differs from earlier lines", m);
    }
    if (R->world_comm < 0) {
        if (shs_trace_add_comm(R->t, "world", nr, NULL, &R->world_comm) != SHS_OK)
            return perr(R->name, line, "bad world", shs_last_error());
        if (!(R->dev_proc = malloc((size_t)nr * sizeof *R->dev_proc)))
            return shs_set_error(SHS_HOST_OOM, "%s: out of memory", R->name);
        for (int d = 0; d < nr; d++) R->dev_proc[d] = -1;
    }
    /* one comm pointer per process: a second communicator's members are unknown */
    if ((size_t)proc >= R->nproc_ptr) {
        size_t n = (size_t)proc + 64;
        uint64_t *np = realloc(R->proc_ptr, n * sizeof *np);
        if (!np) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", R->name);
        memset(np + R->nproc_ptr, 0, (n - R->nproc_ptr) * sizeof *np);
        R->proc_ptr = np;
        R->nproc_ptr = n;
    }
    if (!R->proc_ptr[proc]) R->proc_ptr[proc] = ptr;
    if (R->proc_ptr[proc] != ptr) {
        snprintf(m, sizeof m, "process %s calls on comm 0x%llx and on comm 0x%llx: without 'Init COMPLETE' lines which "
                 "ranks a second communicator holds is unknown (" SHS__NCCL_INIT_HINT ")", R->procs.keys[proc],
                 (unsigned long long)R->proc_ptr[proc], (unsigned long long)ptr);
        return perr(R->name, line, "two communicators without Init lines", m);
    }
    /* the rank is the cudaDev: two processes printing one cudaDev (two nodes' logs) cannot be one rank */
    if (R->dev_proc[x->dev] < 0) R->dev_proc[x->dev] = proc;
    if (R->dev_proc[x->dev] != proc) {
        snprintf(m, sizeof m, "processes %s and %s both print cudaDev [%ld]; without 'Init COMPLETE' lines "
                 "the rank is the cudaDev, so two processes cannot share one (" SHS__NCCL_INIT_HINT ")",
                 R->procs.keys[R->dev_proc[x->dev]], R->procs.keys[proc], x->dev);
        return perr(R->name, line, "duplicate rank", m);
    }
    r->rank = (int)x->dev;
    r->comm = R->world_comm;
    *size = nr;
    return SHS_OK;
}

/* One collective (or p2p) line of pass 2. */
static shs_status_t call_line(reader_t *R, int64_t line, const shs__nccl_line_t *x) {
    const shs__tok_t *tk = x->tk;
    int nt = x->nt;
    char buf[64], m[300];
    shs_trace_rec_t r = shs_trace_rec_init();
    if (op_from_name(tk[0], &r.op)) return perr(R->name, line, "unknown NCCL operation", shs__tok_copy(tk[0], buf, sizeof buf));
    coll_kv_t kv;
    coll_kvs(tk, nt, &kv);
    uint64_t seq, count, dtv, opv = 0, rootv = 0, ptr = 0;
    if (!kv.opcount || shs__parse_u64(kv.opcount->s, kv.opcount->n, 2, &seq) || seq > (uint64_t)INT64_MAX)
        return perr(R->name, line, "bad opCount (hexadecimal)", NULL);
    if (!kv.count || shs__parse_u64(kv.count->s, kv.count->n, 0, &count))
        return perr(R->name, line, "bad count", "want a non-negative integer");
    if (!kv.datatype || shs__parse_u64(kv.datatype->s, kv.datatype->n, 0, &dtv) ||
        shs_dtype_from_nccl((long long)dtv) == SHS_DTYPE_DEFAULT)
        return perr(R->name, line, "unknown datatype id", kv.datatype ? shs__tok_copy(*kv.datatype, buf, sizeof buf) : "missing");
    if (kv.op && (shs__parse_u64(kv.op->s, kv.op->n, 0, &opv) || opv >= SHS_NUM_REDOPS))
        return perr(R->name, line, "unknown reduction op id", shs__tok_copy(*kv.op, buf, sizeof buf));
    if (kv.root && shs__parse_u64(kv.root->s, kv.root->n, 0, &rootv)) return perr(R->name, line, "bad root", NULL);
    if (!kv.comm || shs__parse_u64(kv.comm->s, kv.comm->n, 2, &ptr))
        return perr(R->name, line, "bad or missing comm pointer", NULL);
    shs_dtype_t dtype = shs_dtype_from_nccl((long long)dtv); /* NCCL's numbering */
    size_t es = shs_dtype_size(dtype);
    if (count > SHS_TRACE_MAX_BYTES / es) return perr(R->name, line, "absurd size", shs__tok_copy(*kv.count, buf, sizeof buf));
    int proc = shs__nccl_proc_id(&R->procs, x->proc, x->proc_n), size = 0;
    if (proc < 0) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", R->name);
    if (R->comms.ninst) {
        live_t *e = live_slot(&R->live, proc, ptr);
        if (e->proc < 0) {
            snprintf(m, sizeof m, "process %s calls on comm 0x%llx, which it initialized on no earlier 'Init COMPLETE' "
                     "line (the log has them for other communicators: cut, or lines lost?)", R->procs.keys[proc],
                     (unsigned long long)ptr);
            return perr(R->name, line, "unknown communicator", m);
        }
        const shs__nccl_inst_t *h = &R->comms.inst[e->inst];
        const shs__nccl_group_t *g = &R->comms.groups[h->group];
        r.comm = g->tcomm;
        r.rank = R->t->comms[g->tcomm].ranks[h->f.rank];
        size = g->nranks;
        uint64_t v;
        if (kv.nranks && (shs__parse_u64(kv.nranks->s + 8, kv.nranks->n - 9, 0, &v) || v != (uint64_t)size)) {
            snprintf(m, sizeof m, "%.*s, but communicator %s of comm 0x%llx has %d ranks (Init COMPLETE at line %lld)",
                     (int)(kv.nranks->n < 40 ? kv.nranks->n : 40), kv.nranks->s, g->name, (unsigned long long)ptr,
                     size, (long long)h->line);
            return perr(R->name, line, "nranks disagrees with the communicator", m);
        }
    } else {
        SHS_CHECK(no_init_call(R, line, x, proc, ptr, kv.nranks, &r, &size));
    }
    r.seq = (int64_t)seq;
    r.src_line = line;
    r.count = count;
    r.dtype = (int32_t)dtype;
    r.bytes = count * es;
    r.scope = SHS_BYTES_PER_RANK;
    if (r.op == SHS_OP_REDUCE_SCATTER || r.op == SHS_OP_ALL_REDUCE || r.op == SHS_OP_REDUCE) r.redop = (int32_t)opv;
    if (r.op == SHS_OP_BROADCAST || r.op == SHS_OP_REDUCE) {
        if (rootv >= (uint64_t)size) return perr(R->name, line, "root outside the communicator", NULL);
        r.root = (int32_t)rootv;
    }
    if (shs_coll_op_is_p2p(r.op)) {
        if (rootv >= (uint64_t)size) return perr(R->name, line, "peer outside the communicator", NULL);
        r.peer = R->t->comms[r.comm].ranks[rootv];
        r.tag = 0;
    }
    if (shs_trace_append(R->t, &r) != SHS_OK) return perr(R->name, line, "bad record", shs_last_error());
    return SHS_OK;
}

/* One pass over the log. Pass 1 reads the Init lines (no other line is
 * split: only one ending in COMPLETE can be one); pass 2 the calls, each
 * Init line updating the live map as it comes (the handle pass 1 made of
 * it is the next one). */
static shs_status_t read_pass(reader_t *R, shs__lines_t *l, int pass) {
    const char *s;
    size_t n;
    shs_status_t st = SHS_OK;
    shs__nccl_line_t x;
    char why[160];
    int k;
    while ((k = shs__lines_next(l, &s, &n, &st)) == 1) {
        if (pass == 1) {
            size_t e = n;
            while (e > 0 && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) e--;
            if (e < 8 || memcmp(s + e - 8, "COMPLETE", 8) != 0) continue;
        }
        int sl = shs__nccl_split_line(s, n, &x, why, sizeof why);
        if (sl == 0) continue;
        if (shs__nccl_is_init(x.tk, x.nt)) {
            if (pass == 2) {
                if (R->next_inst >= R->comms.ninst) /* the stream changed between the passes */
                    return perr(R->name, l->line, "an 'Init COMPLETE' line the first reading did not see (the file "
                                "changed while it was read?)", NULL);
                const shs__nccl_inst_t *h = &R->comms.inst[R->next_inst++];
                *live_slot(&R->live, h->proc, h->f.ptr) = (live_t){.ptr = h->f.ptr, .proc = h->proc,
                                                                   .inst = (int)(h - R->comms.inst)};
                continue;
            }
            shs__nccl_init_t f;
            if (sl < 0 || shs__nccl_parse_init(x.tk, x.nt, &f, why, sizeof why))
                return perr(R->name, l->line, "malformed 'Init COMPLETE' line", why);
            int proc = shs__nccl_proc_id(&R->procs, x.proc, x.proc_n);
            if (proc < 0) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", R->name);
            SHS_CHECK(shs__nccl_comms_add(&R->comms, proc, x.dev, l->line, &f, R->name));
            continue;
        }
        if (pass == 1 || x.nt < 2 || !shs__tok_is(x.tk[1], "opCount")) continue;
        if (sl < 0) return perr(R->name, l->line, "malformed collective line", why);
        SHS_CHECK(call_line(R, l->line, &x));
    }
    return k < 0 ? st : SHS_OK;
}

/* After pass 1: the communicators, and pass 2's live map. */
static shs_status_t build_comms(reader_t *R) {
    SHS_CHECK(shs__nccl_comms_build(&R->comms, &R->procs, R->t, R->name));
    size_t cap = 16;
    while (cap < 2 * R->comms.ninst) cap *= 2;
    if (!(R->live.v = malloc(cap * sizeof *R->live.v))) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", R->name);
    for (size_t i = 0; i < cap; i++) R->live.v[i].proc = -1;
    R->live.mask = cap - 1;
    return SHS_OK;
}

shs_status_t shs__trace_import_nccl_lines(shs_trace_t *t, shs__lines_t *l, const char *name) {
    snprintf(t->format, sizeof t->format, "nccl");
    reader_t R = {.t = t, .name = name, .world_comm = -1};
    shs_status_t st = read_pass(&R, l, 1);
    if (st == SHS_OK) st = build_comms(&R);
    if (st == SHS_OK) st = shs__lines_rewind(l);
    if (st == SHS_OK) st = read_pass(&R, l, 2);
    if (st == SHS_OK && !R.comms.ninst && R.world_comm >= 0)
        snprintf(t->note, sizeof t->note, "ranks are the cudaDev numbers: the log has no 'Init COMPLETE' lines (%s)",
                 SHS__NCCL_INIT_HINT);
    shs__nccl_comms_free(&R.comms);
    shs__nccl_procs_free(&R.procs);
    free(R.live.v);
    free(R.dev_proc);
    free(R.proc_ptr);
    return st;
}

shs_status_t shs_trace_import_nccl(shs_trace_t *t, const shs_trace_input_t *in) {
    shs__stream_t *s;
    SHS_CHECK(shs__stream_open_mem(&s, in->name, in->buf, in->len));
    shs__lines_t l;
    shs_status_t st = shs__lines_init(&l, s);
    if (st == SHS_OK) st = shs__trace_import_nccl_lines(t, &l, in->name);
    shs__lines_free(&l);
    shs__stream_close(s);
    return st;
}
