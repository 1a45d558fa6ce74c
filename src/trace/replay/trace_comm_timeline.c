/* trace_comm_timeline.c - per-rank total and exposed communication of a trace
 * under a network model (see trace_comm_timeline.h for the model): clocks kept
 * in the hooks of the blocking execution the analysis also uses
 * (trace_exec.h).
 * What it is not: the execution itself (trace_exec.c) or the per-call cost
 * (src/net/net_alpha_beta.c). */
#include "shardsim/trace_comm_timeline.h"

#include <stdlib.h>
#include <string.h>

#include "trace/replay/trace_exec.h"

typedef struct {
    const shs_trace_t *t;
    const shs_net_t *net;
    shs_net_algo_t algo;
    shs_trace_comm_timeline_t *out;
    size_t *offset;       /* first global record index of each rank */
    double *clock;        /* per rank */
    double *send_end;     /* per global record index: when that send ended */
} sim_t;

/* The compute the trace recorded before the rank's record i: the gap since
 * its previous call ended, when both times are known. */
static double gap_before(const shs_trace_rank_t *tr, size_t i) {
    if (i == 0 || i >= tr->n) return 0;
    double s = tr->recs[i].t_start, e = tr->recs[i - 1].t_end;
    return s >= 0 && e >= 0 && s > e ? s - e : 0;
}

/* The rank reaches its record idx: its compute before it passes. */
static void arrive(sim_t *m, int r, size_t idx) {
    double g = gap_before(&m->t->ranks[r], idx);
    if (g > 0) m->out->timed = 1;
    m->clock[r] += g;
    m->out->ranks[r].compute_s += g;
}

static void on_call(void *ctx, int r, size_t idx) { /* a wait (no time) or an eager send */
    sim_t *m = ctx;
    arrive(m, r, idx);
    const shs_trace_rec_t *x = &m->t->ranks[r].recs[idx];
    if (x->op != SHS_OP_SEND) return;
    double d = shs_net_rec_time(m->net, m->algo, m->t, x);
    m->out->ranks[r].comm_s += d;
    m->clock[r] += d;
    m->send_end[m->offset[r] + idx] = m->clock[r];
}

static void on_recv(void *ctx, int r, size_t idx, int src, size_t send_idx) { /* ends when its send has */
    sim_t *m = ctx;
    arrive(m, r, idx);
    double e = m->send_end[m->offset[src] + send_idx];
    if (e > m->clock[r]) {
        m->out->ranks[r].wait_s += e - m->clock[r];
        m->clock[r] = e;
    }
}

static void on_collective(void *ctx, int comm, const int *ranks, const size_t *idxs, int n) {
    sim_t *m = ctx;
    (void)comm;
    double start = 0;
    for (int k = 0; k < n; k++) { /* starts when the last member arrives */
        arrive(m, ranks[k], idxs[k]);
        if (k == 0 || m->clock[ranks[k]] > start) start = m->clock[ranks[k]];
    }
    double d = shs_net_rec_time(m->net, m->algo, m->t, &m->t->ranks[ranks[0]].recs[idxs[0]]);
    for (int k = 0; k < n; k++) {
        shs_rank_comm_timeline_t *o = &m->out->ranks[ranks[k]];
        o->wait_s += start - m->clock[ranks[k]];
        o->comm_s += d;
        m->clock[ranks[k]] = start + d;
    }
}

shs_status_t shs_trace_comm_timeline(const shs_trace_t *t, const shs_net_t *net, shs_net_algo_t algo,
                                shs_trace_comm_timeline_t *out) {
    memset(out, 0, sizeof *out);
    int W = t->world;
    size_t nw = W > 0 ? (size_t)W : 1, total = 0;
    for (int r = 0; r < W; r++) total += t->ranks[r].n;
    sim_t m = {.t = t, .net = net, .algo = algo, .out = out};
    out->world = W;
    out->ranks = calloc(nw, sizeof *out->ranks);
    m.offset = calloc(nw, sizeof *m.offset);
    m.clock = calloc(nw, sizeof *m.clock);
    m.send_end = malloc((total ? total : 1) * sizeof *m.send_end);
    shs_status_t st = SHS_OK;
    shs__trace_exec_t *e = NULL;
    if (!out->ranks || !m.offset || !m.clock || !m.send_end) {
        st = shs_set_error(SHS_HOST_OOM, "trace timeline: out of memory for %zu records", total);
        goto done;
    }
    for (int r = 1; r < W; r++) m.offset[r] = m.offset[r - 1] + t->ranks[r - 1].n;
    shs__exec_hooks_t hooks = {.ctx = &m, .call = on_call, .recv = on_recv, .collective = on_collective};
    if ((st = shs__trace_exec_run(t, &hooks, &e)) != SHS_OK) goto done;
    out->complete = 1;
    for (int r = 0; r < W; r++) {
        shs_rank_comm_timeline_t *o = &out->ranks[r];
        o->done = shs__trace_exec_pos(e, r);
        o->wall_s = m.clock[r];
        o->exposed_s = o->wall_s - o->compute_s;
        if (o->wall_s > out->wall_s) out->wall_s = o->wall_s;
        if (o->done < t->ranks[r].n) out->complete = 0;
    }
done:
    shs__trace_exec_free(e);
    free(m.offset);
    free(m.clock);
    free(m.send_end);
    if (st != SHS_OK) shs_trace_comm_timeline_free(out);
    return st;
}

void shs_trace_comm_timeline_free(shs_trace_comm_timeline_t *tl) {
    free(tl->ranks);
    tl->ranks = NULL;
}
