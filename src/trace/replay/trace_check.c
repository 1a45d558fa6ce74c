/* trace_check.c - sequence-number matching and a blocking execution of a
 * trace's per-rank sequences (see trace_check.h).
 *
 * Vocabulary: a rank's "list" on a communicator is the indices of its
 * collective records there, in issue order; an "instance" is one sequence
 * number on one communicator, complete when every member arrived at it.
 * What it is not: a replay with data (trace_replay.c).
 */
#include "shardsim/trace_check.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "trace/replay/trace_exec.h"

void shs_trace_rec_format(const shs_trace_t *t, const shs_trace_rec_t *r, char *buf, size_t n) {
    int k = snprintf(buf, n, "%s(", shs_coll_op_name(r->op));
    const char *sep = "";
#define ADD(...)                                                              \
    do {                                                                      \
        if (k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, __VA_ARGS__); \
        sep = ", ";                                                           \
    } while (0)
    if (r->count || r->dtype != SHS_TRACE_NONE) ADD("%scount=%llu", sep, (unsigned long long)r->count);
    if (r->dtype != SHS_TRACE_NONE) ADD("%sdtype=%s", sep, shs_dtype_name((shs_dtype_t)r->dtype));
    if (r->redop != SHS_TRACE_NONE) ADD("%sop=%s", sep, shs_redop_name((shs_redop_t)r->redop));
    if (r->root != SHS_TRACE_NONE) ADD("%sroot=%d", sep, r->root);
    if (r->peer != SHS_TRACE_NONE) ADD("%s%s=%d", sep, r->op == SHS_OP_SEND ? "to" : "from", r->peer);
    if (r->tag != SHS_TRACE_NONE) ADD("%stag=%d", sep, r->tag);
    ADD("%sbytes=%llu/%s", sep, (unsigned long long)r->bytes, r->scope == SHS_BYTES_TOTAL ? "total" : "rank");
    const char *m = shs_trace_str(t, r->marker);
    if (*m) ADD("%smarker=%s", sep, m);
    if (k >= 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, ")");
#undef ADD
}

static void add_issue(shs_trace_report_t *rep, size_t max, shs_issue_kind_t kind, int comm, int64_t seq, int rank,
                      int other, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
static void add_issue(shs_trace_report_t *rep, size_t max, shs_issue_kind_t kind, int comm, int64_t seq, int rank,
                      int other, const char *fmt, ...) {
    rep->total++;
    if (rep->n >= max) return;
    shs_trace_issue_t *is = &rep->issues[rep->n++];
    *is = (shs_trace_issue_t){.kind = kind, .comm = comm, .seq = seq, .rank = rank, .other = other};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(is->text, sizeof is->text, fmt, ap);
    va_end(ap);
}

/* The first field in which two calls at one sequence number differ, or NULL. */
static const char *differs(const shs_trace_t *t, const shs_trace_rec_t *a, const shs_trace_rec_t *b) {
    if (a->op != b->op) return "op";
    int dtypes_known = a->dtype != SHS_TRACE_NONE && b->dtype != SHS_TRACE_NONE;
    if (dtypes_known && a->dtype != b->dtype) return "dtype";
    if (dtypes_known && a->count != b->count && a->op != SHS_OP_ALL_TO_ALLV) return "count";
    if (a->redop != SHS_TRACE_NONE && b->redop != SHS_TRACE_NONE && a->redop != b->redop) return "reduce op";
    if (a->root != SHS_TRACE_NONE && b->root != SHS_TRACE_NONE && a->root != b->root) return "root";
    if (a->op != SHS_OP_ALL_TO_ALLV &&
        shs_trace_rec_bytes(t, a, SHS_BYTES_PER_RANK) != shs_trace_rec_bytes(t, b, SHS_BYTES_PER_RANK))
        return "bytes";
    return NULL;
}

typedef struct {
    const shs_trace_t *t;
    size_t *start;     /* (world * (ncomms + 1)): start[r*(C+1)+c] .. start[r*(C+1)+c+1] in idx */
    size_t *idx;       /* record indices grouped by (rank, comm) */
} lists_t;

static shs_status_t build_lists(const shs_trace_t *t, lists_t *L) {
    size_t C = (size_t)t->ncomms, W = (size_t)t->world, total = shs_trace_num_records(t);
    if (W * (C + 1) > ((size_t)1 << 28)) return shs_set_error(SHS_HOST_OOM, "trace has too many ranks x communicators");
    L->t = t;
    L->start = calloc(W * (C + 1) + 1, sizeof *L->start);
    L->idx = malloc((total ? total : 1) * sizeof *L->idx);
    if (!L->start || !L->idx) return shs_set_error(SHS_HOST_OOM, "cannot allocate the analysis of %zu records", total);
    size_t base = 0;
    for (size_t r = 0; r < W; r++) {
        size_t *st = L->start + r * (C + 1);
        const shs_trace_rank_t *rk = &t->ranks[r];
        size_t *cnt = st; /* count into st[c+1], then prefix */
        for (size_t i = 0; i < rk->n; i++)
            if (shs_coll_op_is_collective(rk->recs[i].op)) cnt[rk->recs[i].comm + 1]++;
        st[0] = base;
        for (size_t c = 0; c < C; c++) st[c + 1] += st[c];
        size_t *fill = malloc((C ? C : 1) * sizeof *fill);
        if (!fill) return shs_set_error(SHS_HOST_OOM, "cannot allocate the analysis");
        for (size_t c = 0; c < C; c++) fill[c] = st[c];
        for (size_t i = 0; i < rk->n; i++)
            if (shs_coll_op_is_collective(rk->recs[i].op)) L->idx[fill[rk->recs[i].comm]++] = i;
        free(fill);
        base = st[C];
    }
    return SHS_OK;
}

/* How a diagnosis names a sequence number: "opCount 0xf" for an NCCL log
 * (hexadecimal, NCCL's own name for it), "seq 15" otherwise. */
static const char *seq_name(const shs_trace_t *t, int64_t seq, char *buf, size_t n) {
    if (strcmp(t->format, "nccl") == 0) snprintf(buf, n, "opCount 0x%llx", (unsigned long long)seq);
    else snprintf(buf, n, "seq %lld", (long long)seq);
    return buf;
}

/* Where a call was read, for a diagnosis, as the importer's own errors
 * name positions: " (log line 40)" in an NCCL log, " (line 40)" in another
 * line-oriented input (shardsim's text format, ASTRA-sim's text workloads),
 * " (record 40)" in a Chakra file (node messages from 1), " (nodes[39])",
 * " (traceEvents[39])", " (entries[39])" or " (event 39)" in PyTorch ET,
 * Kineto, flight-recorder or Horovod JSON (src_line = array index + 1),
 * "" when the record does not say (src_line 0). */
static const char *at_line(const shs_trace_t *t, const shs_trace_rec_t *r, char *buf, size_t n) {
    static const struct {
        const char *format, *pre, *post;
        int from0; /* the position printed is src_line - 1 */
    } where[] = {{"nccl", "log line ", "", 0},       {"shardsim", "line ", "", 0},      {"astra", "line ", "", 0},
                 {"chakra", "record ", "", 0},       {"pytorch-et", "nodes[", "]", 1}, {"kineto", "traceEvents[", "]", 1},
                 {"flight", "entries[", "]", 1},     {"horovod", "event ", "", 1}};
    const char *pre = "record ", *post = "";
    int from0 = 0;
    for (size_t k = 0; k < sizeof where / sizeof where[0]; k++)
        if (strcmp(t->format, where[k].format) == 0) {
            pre = where[k].pre;
            post = where[k].post;
            from0 = where[k].from0;
        }
    if (r->src_line > 0) snprintf(buf, n, " (%s%lld%s)", pre, (long long)(r->src_line - from0), post);
    else if (n) buf[0] = 0;
    return buf;
}

/* Rank g's i-th call on the communicator of the lists (see check_sequences). */
#define CALL(g, i) (&t->ranks[(g)].recs[L->idx[(i)]])

/* The first divergence on comm c, with its members' lists at p[m]..e[m]
 * (each at its first call at or after the divergence), explained as calls
 * skipped: one member h with the most calls left; every other member has
 * either as many left, each agreeing with h's, or k fewer, agreeing with
 * h's calls after its first k (a rank that skipped k consecutive calls
 * and then went on, or stopped). Reports each skipping rank and returns 1;
 * returns 0 (nothing reported) when the lists are not so explained. */
static int report_skips(const lists_t *L, int c, const size_t *p, const size_t *e, shs_trace_report_t *rep,
                        size_t max) {
    const shs_trace_t *t = L->t;
    const shs_trace_comm_t *cm = &t->comms[c];
    int h = -1;
    size_t most = 0;
    for (int m = 0; m < cm->size; m++)
        if (shs_trace_rank_traced(t, cm->ranks[m]) && (h < 0 || e[m] - p[m] > most)) {
            h = m;
            most = e[m] - p[m];
        }
    if (h < 0) return 0;
    int gh = cm->ranks[h], skippers = 0;
    for (int m = 0; m < cm->size; m++) {
        int g = cm->ranks[m];
        if (!shs_trace_rank_traced(t, g)) continue; /* another process's view: not in the trace */
        size_t left = e[m] - p[m], k = most - left;
        for (size_t i = 0; i < left; i++)
            if (differs(t, CALL(gh, p[h] + k + i), CALL(g, p[m] + i))) return 0;
        skippers += k > 0;
    }
    if (!skippers) return 0;
    char sq[48], ln[48];
    for (int m = 0; m < cm->size; m++) {
        size_t k = most - (e[m] - p[m]);
        if (!k || !shs_trace_rank_traced(t, cm->ranks[m])) continue;
        const shs_trace_rec_t *first = CALL(gh, p[h]);
        char more[64] = "";
        if (k > 1) snprintf(more, sizeof more, " and the %zu call%s after it", k - 1, k > 2 ? "s" : "");
        add_issue(rep, max, SHS_ISSUE_MISSING, c, first->seq, cm->ranks[m], gh,
                  "comm %s: rank %d skipped %s %s%s%s, which rank %d issued", cm->name, cm->ranks[m],
                  shs_coll_op_name(first->op), seq_name(t, first->seq, sq, sizeof sq),
                  at_line(t, first, ln, sizeof ln), more, gh);
    }
    return 1;
}

/* (1) sequence-number matching, communicator by communicator. */
static shs_status_t check_sequences(const lists_t *L, shs_trace_report_t *rep, size_t max) {
    const shs_trace_t *t = L->t;
    size_t C = (size_t)t->ncomms;
    char a[160], b[160], sq[48], sq2[48], la[48], lb[48];
    for (int c = 0; c < t->ncomms; c++) {
        const shs_trace_comm_t *cm = &t->comms[c];
        size_t *p = malloc((size_t)cm->size * 2 * sizeof *p);
        if (!p) return shs_set_error(SHS_HOST_OOM, "cannot allocate the analysis");
        size_t *e = p + cm->size;
        int bad = 0;
        for (int m = 0; m < cm->size && !bad; m++) {
            int g = cm->ranks[m];
            p[m] = L->start[(size_t)g * (C + 1) + (size_t)c];
            e[m] = L->start[(size_t)g * (C + 1) + (size_t)c + 1];
            for (size_t k = p[m] + 1; k < e[m] && !bad; k++) {
                const shs_trace_rec_t *x = CALL(g, k), *prev = CALL(g, k - 1);
                if (x->seq <= prev->seq) {
                    add_issue(rep, max, SHS_ISSUE_ORDER, c, x->seq, g, -1,
                              "comm %s: rank %d's sequence numbers do not increase (%s%s after %s%s)", cm->name, g,
                              seq_name(t, x->seq, sq, sizeof sq), at_line(t, x, la, sizeof la),
                              seq_name(t, prev->seq, sq2, sizeof sq2), at_line(t, prev, lb, sizeof lb));
                    bad = 1;
                }
            }
        }
        while (!bad) {
            int64_t s = INT64_MAX;
            for (int m = 0; m < cm->size; m++)
                if (p[m] < e[m]) {
                    int64_t q = CALL(cm->ranks[m], p[m])->seq;
                    if (q < s) s = q;
                }
            if (s == INT64_MAX) break;
            const shs_trace_rec_t *ref = NULL;
            int ref_rank = -1;
            for (int m = 0; m < cm->size; m++) {
                int g = cm->ranks[m];
                const shs_trace_rec_t *r = p[m] < e[m] ? CALL(g, p[m]) : NULL;
                if (r && r->seq == s && !ref) {
                    ref = r;
                    ref_rank = g;
                }
            }
            /* the first member that lacks seq s, or whose call there differs from ref's */
            int odd = -1;
            const char *f = NULL;
            for (int m = 0; m < cm->size && odd < 0; m++) {
                if (!shs_trace_rank_traced(t, cm->ranks[m])) continue; /* another process's view: not in the trace */
                const shs_trace_rec_t *r = p[m] < e[m] ? CALL(cm->ranks[m], p[m]) : NULL;
                if (!r || r->seq != s || (r != ref && (f = differs(t, ref, r)) != NULL)) odd = m;
            }
            if (odd >= 0) {
                bad = 1;
                if (report_skips(L, c, p, e, rep, max)) break;
                int g = cm->ranks[odd];
                const shs_trace_rec_t *r = p[odd] < e[odd] ? CALL(g, p[odd]) : NULL;
                shs_trace_rec_format(t, ref, a, sizeof a);
                seq_name(t, s, sq, sizeof sq);
                at_line(t, ref, la, sizeof la);
                if (!r || r->seq != s) {
                    add_issue(rep, max, SHS_ISSUE_MISSING, c, s, g, ref_rank,
                              "comm %s %s: rank %d never issues %s, which rank %d issued%s%s", cm->name, sq, g, a,
                              ref_rank, la, r ? "" : " (rank has no later calls on this comm)");
                } else {
                    shs_trace_rec_format(t, r, b, sizeof b);
                    add_issue(rep, max, SHS_ISSUE_MISMATCH, c, s, g, ref_rank,
                              "comm %s %s: %s differs: rank %d %s%s vs rank %d %s%s", cm->name, sq, f, ref_rank, a, la,
                              g, b, at_line(t, r, lb, sizeof lb));
                }
                break;
            }
            for (int m = 0; m < cm->size; m++)
                if (p[m] < e[m] && CALL(cm->ranks[m], p[m])->seq == s) p[m]++;
        }
        free(p);
    }
    return SHS_OK;
}

#undef CALL

/* ---- (2) blocking execution (trace_exec.h) ---------------------------------- */

typedef struct {
    const shs_trace_t *t;
    shs_trace_report_t *rep;
    size_t max;
} exec_ctx_t;

/* One end of a message for the pairing rule (comm.h, shs_p2p_pair_differs):
 * in global ranks; the channel's FIFO made the two ends the k-th of their
 * channel alike, so both take k = 0; the tag is part of the channel. */
static shs_p2p_end_t p2p_end(const shs_trace_t *t, const shs_trace_rec_t *r) {
    int known = r->dtype != SHS_TRACE_NONE && r->count;
    return (shs_p2p_end_t){.op = r->op, .rank = r->rank, .peer = r->peer, .count = known ? r->count : 0,
                           .dtype = known ? r->dtype : -1, .bytes = shs_trace_rec_bytes(t, r, SHS_BYTES_PER_RANK)};
}

/* A recv took a send: one message; its two ends must agree. */
static void on_recv(void *ctx, int rank, size_t idx, int src, size_t send_idx) {
    exec_ctx_t *x = ctx;
    x->rep->p2p_matched++;
    const shs_trace_rec_t *recv = &x->t->ranks[rank].recs[idx], *send = &x->t->ranks[src].recs[send_idx];
    shs_p2p_end_t s = p2p_end(x->t, send), r = p2p_end(x->t, recv);
    const char *why = shs_p2p_pair_differs(&s, &r);
    if (!why) return;
    char a[160], b[160], la[48], lb[48];
    shs_trace_rec_format(x->t, send, a, sizeof a);
    shs_trace_rec_format(x->t, recv, b, sizeof b);
    add_issue(x->rep, x->max, SHS_ISSUE_MISMATCH, recv->comm, -1, rank, src,
              "comm %s: rank %d's %s%s and rank %d's %s%s are one message but their %s differs",
              x->t->comms[recv->comm].name, src, a, at_line(x->t, send, la, sizeof la), rank, b,
              at_line(x->t, recv, lb, sizeof lb), why);
}

static void count_collective(void *ctx, int comm, const int *ranks, const size_t *idxs, int n) {
    (void)comm, (void)ranks, (void)idxs, (void)n;
    ((exec_ctx_t *)ctx)->rep->coll_completed++;
}

static void report_unreceived(void *ctx, int comm, int src, int dst, int tag, uint64_t n) {
    exec_ctx_t *x = ctx;
    add_issue(x->rep, x->max, SHS_ISSUE_UNMATCHED_SEND, comm, -1, src, dst,
              "%llu send(s) on comm %s from rank %d to rank %d with tag %d are never received", (unsigned long long)n,
              x->t->comms[comm].name, src, dst, tag);
}

static shs_status_t execute(const shs_trace_t *t, shs_trace_report_t *rep, size_t max) {
    exec_ctx_t cx = {t, rep, max};
    shs__exec_hooks_t hooks = {.ctx = &cx, .recv = on_recv, .collective = count_collective};
    shs__trace_exec_t *e;
    SHS_CHECK(shs__trace_exec_run(t, &hooks, &e));
    char a[160], b[260], sq[48], la[48], lb[48];
    for (int r = 0; r < t->world; r++) {
        const shs_trace_rank_t *rk = &t->ranks[r];
        size_t pr = shs__trace_exec_pos(e, r);
        if (pr >= rk->n) continue;
        rep->ranks_blocked++;
        const shs_trace_rec_t *x = &rk->recs[pr];
        shs_trace_rec_format(t, x, a, sizeof a);
        if (x->op == SHS_OP_RECV) {
            add_issue(rep, max, SHS_ISSUE_DEADLOCK, x->comm, -1, r, x->peer,
                      "rank %d blocks forever in call #%zu %s%s: rank %d never sends it a message on comm %s with "
                      "tag %d", r, pr, a, at_line(t, x, la, sizeof la), x->peer, t->comms[x->comm].name, x->tag);
            continue;
        }
        const shs_trace_comm_t *cm = &t->comms[x->comm];
        int miss = -1;
        for (int k = 0; k < cm->size && miss < 0; k++)
            if (shs__trace_exec_waiting(e, x->comm, k) != x->seq) miss = cm->ranks[k];
        if (miss < 0) miss = r;
        size_t pm = shs__trace_exec_pos(e, miss);
        if (pm >= t->ranks[miss].n)
            snprintf(b, sizeof b, "rank %d has finished its %zu calls", miss, t->ranks[miss].n);
        else {
            char c2[160];
            shs_trace_rec_format(t, &t->ranks[miss].recs[pm], c2, sizeof c2);
            snprintf(b, sizeof b, "rank %d is blocked in %s%s", miss, c2, at_line(t, &t->ranks[miss].recs[pm], lb, sizeof lb));
        }
        add_issue(rep, max, SHS_ISSUE_DEADLOCK, x->comm, x->seq, r, miss, "rank %d blocks forever in comm %s %s %s%s: %s",
                  r, cm->name, seq_name(t, x->seq, sq, sizeof sq), a, at_line(t, x, la, sizeof la), b);
    }
    shs__trace_exec_unreceived(e, report_unreceived, &cx);
    shs__trace_exec_free(e);
    return SHS_OK;
}

shs_status_t shs_trace_check(const shs_trace_t *t, shs_trace_report_t *rep, size_t max_issues) {
    memset(rep, 0, sizeof *rep);
    rep->issues = calloc(max_issues ? max_issues : 1, sizeof *rep->issues);
    if (!rep->issues) return shs_set_error(SHS_HOST_OOM, "cannot allocate the analysis");
    lists_t L = {0};
    shs_status_t st = build_lists(t, &L);
    if (st == SHS_OK) st = check_sequences(&L, rep, max_issues);
    free(L.start);
    free(L.idx);
    if (st == SHS_OK) st = execute(t, rep, max_issues);
    if (st != SHS_OK) shs_trace_report_free(rep);
    return st;
}

void shs_trace_report_free(shs_trace_report_t *rep) {
    free(rep->issues);
    memset(rep, 0, sizeof *rep);
}
