/* trace_replay.c - replay a trace on rank threads with real buffers (see
 * trace_replay.h). What it is not: the consistency analysis. */
#include "shardsim/trace_replay.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/clock.h"
#include "shardsim/trace_net.h"
#include "shardsim/world.h"

typedef struct {
    const shs_trace_t *t;
    const shs_replay_opts_t *o;
    shs_comm_id_t **ids;
    shs_replay_stats_t *per_rank;   /* world entries */
    shs_status_t *status;
    char (*errors)[1024];
    pthread_t *threads;
} replay_t;

typedef struct {
    replay_t *rp;
    int rank;
} arg_t;

/* The call's element type and per-rank element count (NCCL's count), capped. */
static void call_shape(const shs_trace_t *t, const shs_trace_rec_t *r, uint64_t cap, shs_dtype_t *dt, size_t *count,
                       size_t *sendb, size_t *recvb, int *capped) {
    int n = t->comms[r->comm].size;
    *dt = r->dtype != SHS_TRACE_NONE ? (shs_dtype_t)r->dtype : SHS_U8;
    size_t es = shs_dtype_size(*dt);
    uint64_t per = shs_trace_rec_bytes(t, r, SHS_BYTES_PER_RANK);
    uint64_t c = r->dtype != SHS_TRACE_NONE && r->count ? r->count : per / es;
    int gathers = r->op == SHS_OP_ALL_GATHER || r->op == SHS_OP_REDUCE_SCATTER;
    uint64_t biggest = c * es * (gathers ? (uint64_t)n : 1);
    *capped = 0;
    if (cap && biggest > cap) {
        uint64_t cc = cap / (es * (gathers ? (uint64_t)n : 1));
        c = cc ? cc : 1;
        *capped = 1;
    }
    *count = (size_t)c;
    size_t part = (size_t)c * es;
    switch (r->op) {
    case SHS_OP_ALL_GATHER: *sendb = part; *recvb = part * (size_t)n; break;
    case SHS_OP_REDUCE_SCATTER: *sendb = part * (size_t)n; *recvb = part; break;
    case SHS_OP_ALL_REDUCE: case SHS_OP_BROADCAST: case SHS_OP_REDUCE: *sendb = *recvb = part; break;
    case SHS_OP_SEND: *sendb = part; *recvb = 0; break;
    case SHS_OP_RECV: *sendb = 0; *recvb = part; break;
    default: *sendb = *recvb = 0; *count = 0;
    }
}

/* The end of the run of point-to-point records of one communicator that
 * starts at record i (i itself when it is no send or recv): replayed as
 * one group, as NCCL's callers issue consecutive sends and receives
 * (ncclGroupStart/End), so a stage that sends and receives does not wait on
 * itself. */
static size_t p2p_run_end(const shs_trace_rank_t *rk, size_t i) {
    size_t j = i;
    while (j < rk->n && shs_coll_op_is_p2p(rk->recs[j].op) && rk->recs[j].comm == rk->recs[i].comm) j++;
    return j;
}

/* The buffers rank g needs: the largest send and receive buffer of any call,
 * a group's receives side by side (they are written at once). */
static void rank_buffers(const shs_trace_t *t, int g, uint64_t cap, size_t *maxs, size_t *maxr) {
    const shs_trace_rank_t *rk = &t->ranks[g];
    *maxs = *maxr = 1;
    for (size_t i = 0; i < rk->n;) {
        size_t end = shs_coll_op_is_p2p(rk->recs[i].op) ? p2p_run_end(rk, i) : i + 1, sb = 0, rb = 0;
        for (size_t k = i; k < end; k++) {
            shs_dtype_t dt;
            size_t c, s1, r1;
            int cp;
            call_shape(t, &rk->recs[k], cap, &dt, &c, &s1, &r1, &cp);
            if (s1 > sb) sb = s1;
            rb += r1;
        }
        if (sb > *maxs) *maxs = sb;
        if (rb > *maxr) *maxr = rb;
        i = end;
    }
}

/* What a record's call took, into the rank's stats (sec: its share of the time). */
static void account(const shs_trace_t *t, const shs_trace_rec_t *r, shs_replay_stats_t *s, size_t sb, size_t rb,
                    int capped, double sec) {
    uint64_t per = shs_trace_rec_bytes(t, r, SHS_BYTES_PER_RANK);
    size_t moved = shs_coll_op_is_p2p(r->op) ? sb + rb : sb < rb ? sb : rb, whole = sb > rb ? sb : rb;
    int n = t->comms[r->comm].size;
    s->moved_bytes[r->op] += moved;
    s->call_seconds[r->op] += sec;
    s->scaled_seconds[r->op] += capped && moved ? sec * ((double)per / (double)moved) : sec;
    s->alg_bytes[r->op] += (double)whole;
    s->bus_bytes[r->op] += (double)whole * shs_net_busbw_factor(r->op, n);
    s->ranks[r->op] = 1;
}

/* Records [i, end) of rank g, all sends and receives of one communicator,
 * as one group: receives side by side in recvbuf. */
static shs_status_t run_p2p(const replay_t *rp, int g, shs_comm_t *cm, size_t i, size_t end, const char *sendbuf,
                            char *recvbuf, shs_replay_stats_t *s) {
    const shs_trace_t *t = rp->t;
    const shs_trace_rank_t *rk = &t->ranks[g];
    shs_status_t st = shs_group_start();
    size_t off = 0;
    double t0 = shs_now_seconds();
    for (size_t k = i; k < end && st == SHS_OK; k++) {
        const shs_trace_rec_t *r = &rk->recs[k];
        shs_dtype_t dt;
        size_t c, sb, rb;
        int cp, peer = shs_trace_comm_local(t, r->comm, r->peer);
        call_shape(t, r, rp->o->max_bytes, &dt, &c, &sb, &rb, &cp);
        if (peer < 0) {
            st = shs_set_error(SHS_INVALID_ARG, "rank %d: record %zu: %s peer %d is no member of comm %s", g, k,
                               shs_coll_op_name(r->op), r->peer, t->comms[r->comm].name);
            break;
        }
        st = r->op == SHS_OP_SEND ? shs_send(sendbuf, c, dt, peer, cm) : shs_recv(recvbuf + off, c, dt, peer, cm);
        off += rb;
        s->calls[r->op]++;
        s->trace_bytes[r->op] += shs_trace_rec_bytes(t, r, SHS_BYTES_PER_RANK);
        s->capped += (uint64_t)cp;
    }
    shs_status_t end_st = shs_group_end(); /* the calls queued so far run (their peers wait for them) */
    if (st != SHS_OK) return st;
    SHS_CHECK(end_st);
    double share = (shs_now_seconds() - t0) / (double)(end - i);
    for (size_t k = i; k < end; k++) {
        shs_dtype_t dt;
        size_t c, sb, rb;
        int cp;
        call_shape(t, &rk->recs[k], rp->o->max_bytes, &dt, &c, &sb, &rb, &cp);
        account(t, &rk->recs[k], s, sb, rb, cp, share);
    }
    return SHS_OK;
}

static void *rank_main(void *p) {
    arg_t *a = p;
    replay_t *rp = a->rp;
    const shs_trace_t *t = rp->t;
    int g = a->rank;
    shs_replay_stats_t *s = &rp->per_rank[g];
    shs_status_t st = SHS_OK;
    shs_comm_t **h = calloc((size_t)t->ncomms + 1, sizeof *h);
    const shs_trace_rank_t *rk = &t->ranks[g];
    size_t maxs, maxr;
    rank_buffers(t, g, rp->o->max_bytes, &maxs, &maxr);
    char *sendbuf = malloc(maxs), *recvbuf = malloc(maxr);
    if (!h || !sendbuf || !recvbuf) st = shs_set_error(SHS_HOST_OOM, "rank %d: cannot allocate replay buffers", g);
    if (sendbuf) memset(sendbuf, 1, maxs); /* small positive values in every dtype */
    for (int c = 0; c < t->ncomms && st == SHS_OK; c++) {
        int local = shs_trace_comm_local(t, c, g);
        if (local >= 0) st = shs_comm_init_rank(&h[c], rp->ids[c], local);
    }
    for (size_t i = 0; i < rk->n && st == SHS_OK; i++) {
        const shs_trace_rec_t *r = &rk->recs[i];
        if (shs_coll_op_is_p2p(r->op)) {
            size_t end = p2p_run_end(rk, i);
            st = run_p2p(rp, g, h[r->comm], i, end, sendbuf, recvbuf, s);
            i = end - 1;
            continue;
        }
        shs_dtype_t dt;
        size_t c, sb, rb;
        int cp;
        call_shape(t, r, rp->o->max_bytes, &dt, &c, &sb, &rb, &cp);
        shs_comm_t *cm = h[r->comm];
        shs_redop_t op = r->redop != SHS_TRACE_NONE ? (shs_redop_t)r->redop : SHS_SUM;
        int root = r->root != SHS_TRACE_NONE ? r->root : 0;
        uint64_t per = shs_trace_rec_bytes(t, r, SHS_BYTES_PER_RANK);
        s->calls[r->op]++;
        s->trace_bytes[r->op] += per;
        s->capped += (uint64_t)cp;
        double t0 = shs_now_seconds();
        switch (r->op) {
        case SHS_OP_ALL_GATHER: st = shs_all_gather(sendbuf, recvbuf, c, dt, cm); break;
        case SHS_OP_REDUCE_SCATTER: st = shs_reduce_scatter(sendbuf, recvbuf, c, dt, op, cm); break;
        case SHS_OP_ALL_REDUCE: st = shs_all_reduce(sendbuf, recvbuf, c, dt, op, cm); break;
        case SHS_OP_BROADCAST: st = shs_broadcast(sendbuf, recvbuf, c, dt, root, cm); break;
        case SHS_OP_REDUCE: st = shs_reduce(sendbuf, recvbuf, c, dt, op, root, cm); break;
        case SHS_OP_BARRIER: st = shs_barrier(cm); break;
        case SHS_OP_WAIT: s->not_run[r->op]++; continue;
        default: s->sync_only[r->op]++; st = shs_barrier(cm); continue;
        }
        account(t, r, s, sb, rb, cp, shs_now_seconds() - t0);
    }
    s->buffer_bytes = maxs + maxr;
    rp->status[g] = st;
    if (st != SHS_OK) {
        snprintf(rp->errors[g], sizeof rp->errors[g], "%s", shs_last_error());
        for (int c = 0; c < t->ncomms; c++)
            if (h && h[c]) shs_comm_abort(h[c], rp->errors[g]);
    }
    for (int c = 0; h && c < t->ncomms; c++) shs_comm_destroy(h[c]);
    free(h);
    free(sendbuf);
    free(recvbuf);
    return NULL;
}

shs_status_t shs_trace_replay(const shs_trace_t *t, const shs_replay_opts_t *o, shs_replay_stats_t *out) {
    memset(out, 0, sizeof *out);
    if (t->world < 1 || t->world > SHS_MAX_WORLD)
        return shs_set_error(SHS_INVALID_ARG, "replay runs one thread per rank: %d ranks is outside 1..%d", t->world,
                             SHS_MAX_WORLD);
    for (int g = 0; g < t->world; g++)
        if (!shs_trace_rank_traced(t, g))
            return shs_set_error(SHS_INVALID_ARG, "rank %d was not traced (the trace holds %s views of single processes): "
                                 "a replay needs every member's calls; check it only (--check-only)", g, t->format);
    /* buffer budget, before any allocation */
    uint64_t limit = o->mem_limit ? o->mem_limit : ((uint64_t)4 << 30), need = 0;
    for (int g = 0; g < t->world; g++) {
        size_t maxs, maxr;
        rank_buffers(t, g, o->max_bytes, &maxs, &maxr);
        need += maxs + maxr;
        if (need > limit)
            return shs_set_error(SHS_INVALID_ARG, "replay would need more than %llu bytes of buffers (ranks 0..%d "
                                 "alone need %llu); cap each call with --max-bytes",
                                 (unsigned long long)limit, g, (unsigned long long)need);
    }
    replay_t rp = {.t = t, .o = o};
    int W = t->world;
    rp.ids = calloc((size_t)t->ncomms + 1, sizeof *rp.ids);
    rp.per_rank = calloc((size_t)W, sizeof *rp.per_rank);
    rp.status = calloc((size_t)W, sizeof *rp.status);
    rp.errors = calloc((size_t)W, sizeof *rp.errors);
    rp.threads = calloc((size_t)W, sizeof *rp.threads);
    arg_t *args = calloc((size_t)W, sizeof *args);
    shs_status_t st = SHS_OK;
    if (!rp.ids || !rp.per_rank || !rp.status || !rp.errors || !rp.threads || !args)
        st = shs_set_error(SHS_HOST_OOM, "cannot allocate the replay");
    for (int c = 0; c < t->ncomms && st == SHS_OK; c++)
        st = shs_comm_id_create(&rp.ids[c], t->comms[c].size, o->timeout_ms, t->comms[c].name);
    double t0 = shs_now_seconds();
    int started = 0;
    for (int g = 0; g < W && st == SHS_OK; g++) {
        args[g] = (arg_t){&rp, g};
        if (pthread_create(&rp.threads[g], NULL, rank_main, &args[g]) != 0)
            st = shs_set_error(SHS_SYSTEM, "cannot start replay thread %d", g);
        else
            started++;
    }
    for (int g = 0; g < started; g++) pthread_join(rp.threads[g], NULL);
    out->seconds = shs_now_seconds() - t0;
    if (st == SHS_OK && started < W) st = SHS_SYSTEM;
    /* report the first non-ABORTED failure (the cause), else the first */
    int first = -1;
    for (int g = 0; g < started && st == SHS_OK; g++)
        if (rp.status[g] != SHS_OK && (first < 0 || (rp.status[first] == SHS_ABORTED && rp.status[g] != SHS_ABORTED))) first = g;
    if (first >= 0) st = shs_set_error(rp.status[first], "%s", rp.errors[first]);
    for (int g = 0; g < started; g++) {
        const shs_replay_stats_t *s = &rp.per_rank[g];
        int timed = 0;
        for (int k = 0; k < SHS_NUM_OPS; k++) {
            out->calls[k] += s->calls[k];
            out->trace_bytes[k] += s->trace_bytes[k];
            out->moved_bytes[k] += s->moved_bytes[k];
            out->sync_only[k] += s->sync_only[k];
            out->not_run[k] += s->not_run[k];
            out->ranks[k] += s->ranks[k];
            out->call_seconds[k] += s->call_seconds[k];
            out->scaled_seconds[k] += s->scaled_seconds[k];
            out->alg_bytes[k] += s->alg_bytes[k];
            out->bus_bytes[k] += s->bus_bytes[k];
            timed |= s->ranks[k] != 0;
        }
        out->timed_ranks += timed;
        out->capped += s->capped;
        out->buffer_bytes += s->buffer_bytes;
    }
    for (int c = 0; rp.ids && c < t->ncomms; c++) shs_comm_id_release(rp.ids[c]);
    free(rp.ids);
    free(rp.per_rank);
    free(rp.status);
    free(rp.errors);
    free(rp.threads);
    free(args);
    return st;
}
