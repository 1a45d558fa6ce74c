/* trace_timeline.c - per-rank total and exposed communication of a trace
 * under a network model, by a dataflow replay of its blocking calls (see
 * trace_timeline.h for the model).
 * What it is not: the consistency analysis (trace_check.c) or the
 * per-call cost (trace_net.c). */
#include "shardsim/trace_timeline.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One send or recv, for pairing: the k-th send a->b with tag t meets the
 * k-th recv on b from a with tag t. */
typedef struct {
    int32_t src, dst, tag;
    size_t g; /* global record index: program order within a rank */
} p2p_t;

static int cmp_p2p(const void *a, const void *b) {
    const p2p_t *x = a, *y = b;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
    if (x->tag != y->tag) return x->tag < y->tag ? -1 : 1;
    return x->g < y->g ? -1 : x->g > y->g;
}

static int same_channel(const p2p_t *x, const p2p_t *y) {
    return x->src == y->src && x->dst == y->dst && x->tag == y->tag;
}

typedef struct {
    const shs_trace_t *t;
    const shs_net_t *net;
    shs_net_algo_t algo;
    shs_trace_timeline_t *out;
    size_t *offset;       /* first global index of each rank */
    size_t *head;         /* next record of each rank */
    double *clock;
    int64_t *match;       /* send <-> recv partner (global index), -1 none */
    double *send_end;     /* a send's end time; < 0 not run yet */
    int *arrived;         /* per comm: members waiting in its current call */
    double *ready;        /* per comm: the latest of their arrival clocks */
    int *stack, nstack;   /* runnable ranks */
    char *queued;
    char *in_call;        /* the rank has arrived in a collective that has not run yet */
} sim_t;

static double gap_before(const shs_trace_rank_t *tr, size_t i) {
    if (i == 0 || i >= tr->n) return 0;
    double s = tr->recs[i].t_start, e = tr->recs[i - 1].t_end;
    return s >= 0 && e >= 0 && s > e ? s - e : 0;
}

/* The rank's record is done: move on and add the compute gap before the next. */
static void advance(sim_t *m, int r) {
    const shs_trace_rank_t *tr = &m->t->ranks[r];
    shs_rank_timeline_t *o = &m->out->ranks[r];
    m->head[r]++;
    o->done = m->head[r];
    double g = gap_before(tr, m->head[r]);
    if (g > 0) m->out->timed = 1;
    m->clock[r] += g;
    o->compute_s += g;
}

static void wake(sim_t *m, int r) {
    if (!m->queued[r]) {
        m->queued[r] = 1;
        m->stack[m->nstack++] = r;
    }
}

/* Run rank r until it blocks or ends. */
static void run_rank(sim_t *m, int r) {
    const shs_trace_t *t = m->t;
    const shs_trace_rank_t *tr = &t->ranks[r];
    shs_rank_timeline_t *o = &m->out->ranks[r];
    if (m->in_call[r]) return; /* woken while it waits in a collective: it still waits */
    while (m->head[r] < tr->n) {
        const shs_trace_rec_t *x = &tr->recs[m->head[r]];
        size_t g = m->offset[r] + m->head[r];
        if (x->op == SHS_TOP_WAIT) {
            advance(m, r);
        } else if (x->op == SHS_TOP_SEND) {
            double d = shs_net_rec_time(m->net, m->algo, t, x);
            o->comm_s += d;
            m->clock[r] += d;
            m->send_end[g] = m->clock[r];
            advance(m, r);
            if (m->match[g] >= 0) { /* wake the receiver if it waits for this send */
                size_t rg = (size_t)m->match[g];
                int dst = x->peer;
                if (dst >= 0 && dst < t->world && m->offset[dst] + m->head[dst] == rg) wake(m, dst);
            }
        } else if (x->op == SHS_TOP_RECV) {
            int64_t s = m->match[g];
            if (s < 0 || m->send_end[s] < 0) return; /* never matched, or its send has not run */
            if (m->send_end[s] > m->clock[r]) {
                o->wait_s += m->send_end[s] - m->clock[r];
                m->clock[r] = m->send_end[s];
            }
            advance(m, r);
        } else {
            const shs_trace_comm_t *c = &t->comms[x->comm];
            if (m->arrived[x->comm] == 0 || m->clock[r] > m->ready[x->comm]) m->ready[x->comm] = m->clock[r];
            if (++m->arrived[x->comm] < c->size) { /* wait for the others */
                m->in_call[r] = 1;
                return;
            }
            /* the last member arrived: the call runs on all of them */
            double d = shs_net_rec_time(m->net, m->algo, t, x), start = m->ready[x->comm];
            m->arrived[x->comm] = 0;
            for (int k = 0; k < c->size; k++) {
                int q = c->ranks[k];
                shs_rank_timeline_t *oq = &m->out->ranks[q];
                m->in_call[q] = 0;
                oq->wait_s += start - m->clock[q];
                oq->comm_s += d;
                m->clock[q] = start + d;
                advance(m, q);
                if (q != r) wake(m, q);
            }
        }
    }
}

/* Pair sends with recvs (m->match both ways). */
static shs_status_t pair_p2p(sim_t *m, size_t total) {
    const shs_trace_t *t = m->t;
    size_t ns = 0, nr = 0;
    for (int r = 0; r < t->world; r++)
        for (size_t i = 0; i < t->ranks[r].n; i++) {
            shs_trace_op_t op = t->ranks[r].recs[i].op;
            ns += op == SHS_TOP_SEND;
            nr += op == SHS_TOP_RECV;
        }
    for (size_t g = 0; g < total; g++) m->match[g] = -1;
    if (!ns || !nr) return SHS_OK;
    p2p_t *S = malloc(ns * sizeof *S), *R = malloc(nr * sizeof *R);
    if (!S || !R) {
        free(S);
        free(R);
        return shs_set_error(SHS_HOST_OOM, "trace timeline: out of memory pairing %zu sends and %zu recvs", ns, nr);
    }
    ns = nr = 0;
    for (int r = 0; r < t->world; r++)
        for (size_t i = 0; i < t->ranks[r].n; i++) {
            const shs_trace_rec_t *x = &t->ranks[r].recs[i];
            if (x->op == SHS_TOP_SEND) S[ns++] = (p2p_t){r, x->peer, x->tag, m->offset[r] + i};
            else if (x->op == SHS_TOP_RECV) R[nr++] = (p2p_t){x->peer, r, x->tag, m->offset[r] + i};
        }
    qsort(S, ns, sizeof *S, cmp_p2p);
    qsort(R, nr, sizeof *R, cmp_p2p);
    size_t a = 0, b = 0;
    while (a < ns && b < nr) {
        int c = cmp_p2p(&S[a], &R[b]);
        if (same_channel(&S[a], &R[b])) {
            m->match[S[a].g] = (int64_t)R[b].g;
            m->match[R[b].g] = (int64_t)S[a].g;
            a++;
            b++;
        } else if (c < 0) {
            a++;
        } else {
            b++;
        }
    }
    free(S);
    free(R);
    return SHS_OK;
}

shs_status_t shs_trace_timeline(const shs_trace_t *t, const shs_net_t *net, shs_net_algo_t algo,
                                shs_trace_timeline_t *out) {
    memset(out, 0, sizeof *out);
    int W = t->world, C = t->ncomms;
    size_t total = 0;
    for (int r = 0; r < W; r++) total += t->ranks[r].n;
    sim_t m = {.t = t, .net = net, .algo = algo, .out = out};
    out->world = W;
    out->ranks = calloc(W ? (size_t)W : 1, sizeof *out->ranks);
    m.offset = calloc(W ? (size_t)W : 1, sizeof *m.offset);
    m.head = calloc(W ? (size_t)W : 1, sizeof *m.head);
    m.clock = calloc(W ? (size_t)W : 1, sizeof *m.clock);
    m.stack = malloc((W ? (size_t)W : 1) * sizeof *m.stack);
    m.queued = calloc(W ? (size_t)W : 1, 1);
    m.in_call = calloc(W ? (size_t)W : 1, 1);
    m.arrived = calloc(C ? (size_t)C : 1, sizeof *m.arrived);
    m.ready = calloc(C ? (size_t)C : 1, sizeof *m.ready);
    m.match = malloc((total ? total : 1) * sizeof *m.match);
    m.send_end = malloc((total ? total : 1) * sizeof *m.send_end);
    shs_status_t st = SHS_OK;
    if (!out->ranks || !m.offset || !m.head || !m.clock || !m.stack || !m.queued || !m.in_call || !m.arrived || !m.ready ||
        !m.match || !m.send_end) {
        st = shs_set_error(SHS_HOST_OOM, "trace timeline: out of memory for %zu records", total);
        goto done;
    }
    for (int r = 1; r < W; r++) m.offset[r] = m.offset[r - 1] + t->ranks[r - 1].n;
    for (size_t g = 0; g < total; g++) m.send_end[g] = -1;
    if ((st = pair_p2p(&m, total)) != SHS_OK) goto done;
    for (int r = W - 1; r >= 0; r--) wake(&m, r);
    while (m.nstack > 0) {
        int r = m.stack[--m.nstack];
        m.queued[r] = 0;
        run_rank(&m, r);
    }
    out->complete = 1;
    for (int r = 0; r < W; r++) {
        shs_rank_timeline_t *o = &out->ranks[r];
        o->wall_s = m.clock[r];
        o->exposed_s = o->wall_s - o->compute_s;
        if (o->wall_s > out->wall_s) out->wall_s = o->wall_s;
        if (m.head[r] < t->ranks[r].n) out->complete = 0;
    }
done:
    free(m.offset);
    free(m.head);
    free(m.clock);
    free(m.stack);
    free(m.queued);
    free(m.in_call);
    free(m.arrived);
    free(m.ready);
    free(m.match);
    free(m.send_end);
    if (st != SHS_OK) shs_trace_timeline_free(out);
    return st;
}

void shs_trace_timeline_free(shs_trace_timeline_t *tl) {
    free(tl->ranks);
    tl->ranks = NULL;
}
