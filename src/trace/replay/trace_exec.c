/* trace_exec.c - a trace's per-rank sequences run as their calls block
 * (see trace_exec.h): a worklist of runnable ranks, per-communicator
 * arrival by sequence number, and per-channel queues of pending sends.
 * What it is not: what is reported about the run (trace_check.c,
 * trace_comm_timeline.c). */
#include "trace/replay/trace_exec.h"

#include <stdlib.h>

/* One channel (comm, src, dst, tag): its pending sends, oldest first, as a
 * list through the engine's send nodes. */
typedef struct {
    int32_t comm, src, dst, tag;
    int used;
    int64_t head, tail;    /* send nodes, -1 when none */
    uint64_t pending;
} chan_t;

struct shs__trace_exec {
    const shs_trace_t *t;
    size_t *pos;           /* per rank: its next record */
    int64_t *waiting;      /* per comm member (woff): the seq it waits at, -1 none */
    size_t *woff;          /* ncomms + 1 offsets into waiting */
    int *arrived;          /* per comm: members waiting at arrived_seq */
    int64_t *arrived_seq;  /* per comm: the seq the first waiting member waits at */
    int *untraced;         /* per comm: members the trace holds no view of (they count as arrived) */
    chan_t *chans;
    size_t cap;            /* channels: a power of two */
    int32_t *node_rank;    /* send nodes: rank and record of the send, next in its channel */
    size_t *node_idx;
    int64_t *node_next;
    size_t nodes;
};

static chan_t *chan_get(shs__trace_exec_t *e, int comm, int src, int dst, int tag) {
    uint64_t k = ((uint64_t)(uint32_t)src * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(uint32_t)dst * 0xC2B2AE3D27D4EB4Full) ^
                 ((uint64_t)(uint32_t)tag * 0x165667B19E3779F9ull); /* comm left out: one comm per pair keeps the
                                                                      * slots (and the report order) as they were */
    size_t i = (size_t)(k ^ (k >> 29)) & (e->cap - 1);
    while (e->chans[i].used && !(e->chans[i].comm == comm && e->chans[i].src == src && e->chans[i].dst == dst &&
                                 e->chans[i].tag == tag))
        i = (i + 1) & (e->cap - 1);
    if (!e->chans[i].used)
        e->chans[i] = (chan_t){.comm = comm, .src = src, .dst = dst, .tag = tag, .used = 1, .head = -1, .tail = -1};
    return &e->chans[i];
}

void shs__trace_exec_free(shs__trace_exec_t *e) {
    if (!e) return;
    free(e->pos);
    free(e->waiting);
    free(e->woff);
    free(e->arrived);
    free(e->arrived_seq);
    free(e->untraced);
    free(e->chans);
    free(e->node_rank);
    free(e->node_idx);
    free(e->node_next);
    free(e);
}

shs_status_t shs__trace_exec_run(const shs_trace_t *t, const shs__exec_hooks_t *h, shs__trace_exec_t **out) {
    static const shs__exec_hooks_t none = {0};
    if (!h) h = &none;
    *out = NULL;
    int W = t->world, maxsize = 1;
    size_t nw = W > 0 ? (size_t)W : 1;
    size_t np2p = 0;
    for (int r = 0; r < W; r++)
        for (size_t i = 0; i < t->ranks[r].n; i++) np2p += shs_coll_op_is_p2p(t->ranks[r].recs[i].op);
    for (int c = 0; c < t->ncomms; c++)
        if (t->comms[c].size > maxsize) maxsize = t->comms[c].size;
    shs__trace_exec_t *e = calloc(1, sizeof *e);
    int *stack = malloc(nw * sizeof *stack);
    char *queued = calloc(nw, 1);
    size_t *idxs = malloc((size_t)maxsize * sizeof *idxs);
    int *members = malloc((size_t)maxsize * sizeof *members); /* a collective's traced members */
    if (e) {
        e->t = t;
        e->cap = 16;
        while (e->cap < 2 * np2p + 16) e->cap *= 2;
        e->pos = calloc(nw, sizeof *e->pos);
        e->woff = calloc((size_t)t->ncomms + 1, sizeof *e->woff);
        e->chans = calloc(e->cap, sizeof *e->chans);
        e->node_rank = malloc((np2p ? np2p : 1) * sizeof *e->node_rank);
        e->node_idx = malloc((np2p ? np2p : 1) * sizeof *e->node_idx);
        e->node_next = malloc((np2p ? np2p : 1) * sizeof *e->node_next);
        size_t nc = (size_t)t->ncomms + 1;
        e->arrived = calloc(nc, sizeof *e->arrived);
        e->arrived_seq = calloc(nc, sizeof *e->arrived_seq);
        e->untraced = calloc(nc, sizeof *e->untraced);
        if (e->untraced)
            for (int c = 0; c < t->ncomms; c++)
                for (int k = 0; k < t->comms[c].size; k++) e->untraced[c] += !shs_trace_rank_traced(t, t->comms[c].ranks[k]);
        if (e->woff)
            for (int c = 0; c < t->ncomms; c++) e->woff[c + 1] = e->woff[c] + (size_t)t->comms[c].size;
        if (e->woff) e->waiting = malloc((e->woff[t->ncomms] ? e->woff[t->ncomms] : 1) * sizeof *e->waiting);
    }
    if (!e || !stack || !queued || !idxs || !members || !e->pos || !e->woff || !e->chans || !e->node_rank || !e->node_idx ||
        !e->node_next || !e->waiting || !e->arrived || !e->arrived_seq || !e->untraced) {
        shs__trace_exec_free(e);
        free(stack);
        free(queued);
        free(idxs);
        free(members);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate the analysis");
    }
    for (size_t i = 0; i < e->woff[t->ncomms]; i++) e->waiting[i] = -1;
    int top = 0;
    for (int r = W - 1; r >= 0; r--) {
        stack[top++] = r;
        queued[r] = 1;
    }
    size_t *pos = e->pos;
    while (top > 0) {
        int r = stack[--top];
        queued[r] = 0;
        const shs_trace_rank_t *rk = &t->ranks[r];
        while (pos[r] < rk->n) {
            const shs_trace_rec_t *x = &rk->recs[pos[r]];
            if (x->op == SHS_OP_WAIT) {
                if (h->call) h->call(h->ctx, r, pos[r]);
                pos[r]++;
            } else if (x->op == SHS_OP_SEND) {
                chan_t *c = chan_get(e, x->comm, r, x->peer, x->tag);
                size_t nd = e->nodes++;
                e->node_rank[nd] = r;
                e->node_idx[nd] = pos[r];
                e->node_next[nd] = -1;
                if (c->tail >= 0) e->node_next[c->tail] = (int64_t)nd;
                else c->head = (int64_t)nd;
                c->tail = (int64_t)nd;
                c->pending++;
                if (h->call) h->call(h->ctx, r, pos[r]);
                pos[r]++;
                int d = x->peer; /* wake the receiver if this is what it waits for */
                if (d >= 0 && d < W && !queued[d] && pos[d] < t->ranks[d].n) {
                    const shs_trace_rec_t *y = &t->ranks[d].recs[pos[d]];
                    if (y->op == SHS_OP_RECV && y->comm == x->comm && y->peer == r && y->tag == x->tag) {
                        stack[top++] = d;
                        queued[d] = 1;
                    }
                }
            } else if (x->op == SHS_OP_RECV) {
                chan_t *c = chan_get(e, x->comm, x->peer, r, x->tag);
                if (!c->pending) break;
                int64_t nd = c->head;
                c->head = e->node_next[nd];
                if (c->head < 0) c->tail = -1;
                c->pending--;
                if (h->recv) h->recv(h->ctx, r, pos[r], e->node_rank[nd], e->node_idx[nd]);
                pos[r]++;
            } else {
                const shs_trace_comm_t *cm = &t->comms[x->comm];
                int64_t *wv = e->waiting + e->woff[x->comm];
                int local = shs_trace_comm_local(t, x->comm, r), n = 0;
                /* arrivals at the comm's current seq, counted as they come (a member that was not traced
                 * counts as arrived): a scan of the members per arrival would cost size^2 per call */
                if (wv[local] != x->seq) {
                    wv[local] = x->seq;
                    if (e->arrived[x->comm] == 0 || e->arrived_seq[x->comm] == x->seq) {
                        e->arrived_seq[x->comm] = x->seq;
                        e->arrived[x->comm]++;
                    } /* else another seq is waited for here: a mismatch that never completes */
                }
                if (e->arrived_seq[x->comm] != x->seq || e->arrived[x->comm] + e->untraced[x->comm] < cm->size) break;
                e->arrived[x->comm] = 0;
                for (int k = 0; k < cm->size; k++)
                    if (shs_trace_rank_traced(t, cm->ranks[k])) {
                        members[n] = cm->ranks[k];
                        idxs[n++] = pos[cm->ranks[k]];
                    }
                if (h->collective) h->collective(h->ctx, x->comm, members, idxs, n);
                for (int k = 0; k < cm->size; k++) {
                    int g = cm->ranks[k];
                    wv[k] = -1;
                    if (!shs_trace_rank_traced(t, g)) continue;
                    pos[g]++;
                    if (g != r && !queued[g]) {
                        stack[top++] = g;
                        queued[g] = 1;
                    }
                }
            }
        }
    }
    free(stack);
    free(queued);
    free(idxs);
    free(members);
    *out = e;
    return SHS_OK;
}

size_t shs__trace_exec_pos(const shs__trace_exec_t *e, int rank) { return e->pos[rank]; }

int64_t shs__trace_exec_waiting(const shs__trace_exec_t *e, int comm, int local) {
    return e->waiting[e->woff[comm] + (size_t)local];
}

void shs__trace_exec_unreceived(const shs__trace_exec_t *e,
                                void (*fn)(void *ctx, int comm, int src, int dst, int tag, uint64_t n), void *ctx) {
    for (size_t i = 0; i < e->cap; i++) {
        const chan_t *c = &e->chans[i];
        if (c->used && c->pending) fn(ctx, c->comm, c->src, c->dst, c->tag, c->pending);
    }
}
