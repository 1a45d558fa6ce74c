/* comm_p2p.c - point-to-point calls (comm.h POINT-TO-POINT): shs_send,
 * shs_recv, the calling thread's group (shs_group_start/_end), all-to-all
 * built on them, and the pairing rule every backend and the trace analysis
 * apply (shs_p2p_pair_differs).
 *
 * What it is: everything about a send or receive that one rank decides
 * alone, as comm.c is for collectives: argument checks, the per-(comm,
 * peer) sequence numbers, the group's queue, the pairing of a group's sends
 * to this rank itself, stats and the recorder; then the backend's p2p slot
 * pairs the calls across ranks, checks them and moves the data.
 * Vocabulary: a channel is (communicator, source, destination); the k-th
 * send on a channel pairs with the k-th receive on it (k: the call's seq).
 * What it is not: data movement or cross-rank checks (the backends).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "shardsim/clock.h"
#include "shardsim/log.h"

/* This thread's (rank's) group: the calls queued since the outermost
 * shs_group_start, all on `comm`. */
static _Thread_local struct {
    int depth;
    shs_comm_t *comm;
    shs__call_t *calls;
    int n, cap;
} group;

int shs__group_active(void) { return group.depth > 0; }

/* ---- the pairing rule ------------------------------------------------------ */

const char *shs_p2p_pair_differs(const shs_p2p_end_t *send, const shs_p2p_end_t *recv) {
    if (send->op != SHS_OP_SEND || recv->op != SHS_OP_RECV) return "op";
    if (send->rank != recv->peer || send->peer != recv->rank) return "peer";
    if (send->seq != recv->seq) return "seq";
    int dtypes_known = send->dtype >= 0 && recv->dtype >= 0;
    if (dtypes_known && send->dtype != recv->dtype) return "dtype";
    if (dtypes_known && send->count != recv->count) return "count";
    if (!dtypes_known && send->bytes != recv->bytes) return "bytes";
    if (send->tag && recv->tag && send->tag != recv->tag) return "tag";
    return NULL;
}

static shs_p2p_end_t end_of(const shs__call_t *c, int rank) {
    return (shs_p2p_end_t){.op = c->op, .rank = rank, .peer = c->root, .seq = c->seq, .count = c->count,
                           .dtype = (int)c->dtype, .bytes = c->count * shs_dtype_size(c->dtype), .tag = c->tag};
}

int shs__p2p_check_pair(const shs__call_t *send, int send_rank, const shs__call_t *recv, int recv_rank,
                        const char *comm_name, char *detail, size_t size) {
    shs_p2p_end_t s = end_of(send, send_rank), r = end_of(recv, recv_rank);
    const char *why = shs_p2p_pair_differs(&s, &r);
    if (!why) return 1;
    char a[256], b[256];
    shs__call_format(a, sizeof a, send);
    shs__call_format(b, sizeof b, recv);
    snprintf(detail, size, "comm '%s': rank %d's %s seq %llu and rank %d's %s seq %llu are one message but their "
             "%s differs", comm_name, send_rank, a, (unsigned long long)send->seq, recv_rank, b,
             (unsigned long long)recv->seq, why);
    return 0;
}

/* ---- one group to the backend ---------------------------------------------- */

/* The group's sends to this rank itself must pair with its receives from
 * itself: nothing else can ever take them (this rank waits in the group).
 * 1 when they do; else 0 and the error is set. */
static int self_pairs_ok(shs_comm_t *comm, const shs__call_t *calls, int n, shs_status_t *st) {
    char detail[768];
    for (int i = 0; i < n; i++) {
        const shs__call_t *c = &calls[i];
        if (c->root != comm->rank) continue;
        int j = 0;
        while (j < n && !(calls[j].root == comm->rank && calls[j].op != c->op && calls[j].seq == c->seq)) j++;
        const shs__call_t *send = c->op == SHS_OP_SEND ? c : &calls[j], *recv = c->op == SHS_OP_SEND ? &calls[j] : c;
        if (j < n && shs__p2p_check_pair(send, comm->rank, recv, comm->rank, comm->name, detail, sizeof detail))
            continue;
        if (j == n) {
            char a[256];
            shs__call_format(a, sizeof a, c);
            snprintf(detail, sizeof detail, "comm '%s': rank %d's %s seq %llu to itself has no %s from itself in "
                     "its group (nothing else can ever pair with it)", comm->name, comm->rank, a,
                     (unsigned long long)c->seq, c->op == SHS_OP_SEND ? "receive" : "send");
        }
        *st = shs_set_error(SHS_MISMATCH, "rank %d: %s", comm->rank, detail);
        /* the group's other calls were numbered: the communicator cannot go on */
        comm->iface->abort(comm, detail);
        return 0;
    }
    return 1;
}

/* Run a group's calls (or one call): self pairs, the backend, stats and
 * the recorder per call, the job on failure. */
static shs_status_t run_group(shs_comm_t *comm, const shs__call_t *calls, int n) {
    SHS_LOG(TRACE, COMM, "%d point-to-point call%s on comm '%s'", n, n == 1 ? "" : "s", comm->name);
    double t0 = shs_now_seconds();
    shs_status_t st = SHS_OK;
    if (self_pairs_ok(comm, calls, n, &st)) st = comm->iface->p2p(comm, calls, n, shs__copy_host);
    if (st != SHS_OK) shs__job_fail(comm, shs_last_error());
    for (int i = 0; i < n; i++) shs__comm_account(comm, &calls[i], calls[i].count * shs_dtype_size(calls[i].dtype), st, t0);
    return st;
}

/* ---- send, recv, groups ------------------------------------------------------ */

static shs_status_t p2p_call(shs_coll_op_t op, const void *sendbuf, void *recvbuf, size_t count, shs_dtype_t dtype,
                             int peer, shs_comm_t *comm) {
    if (!comm) return shs_set_error(SHS_INVALID_ARG, "%s: comm is NULL", shs_coll_op_name(op));
    shs__call_t c = {.op = op, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count, .dtype = dtype,
                     .redop = SHS_SUM, .root = peer, .tag = comm->tag};
    size_t bytes;
    SHS_CHECK(shs__comm_check_call(comm, &c, 0, &bytes));
    char what[160];
    if (peer < 0 || peer >= comm->nranks) {
        snprintf(what, sizeof what, "peer %d out of range [0, %d)", peer, comm->nranks);
        return shs__comm_arg_error(comm, op, what);
    }
    if (bytes && !(op == SHS_OP_SEND ? sendbuf : recvbuf)) return shs__comm_arg_error(comm, op, "NULL buffer with count > 0");
    if (peer == comm->rank && group.depth == 0)
        return shs__comm_arg_error(comm, op, op == SHS_OP_SEND ? "a send to itself outside a group: no receive could "
                                   "ever take it (put the send and its receive in one group)"
                                   : "a receive from itself outside a group: no send could ever reach it (put the "
                                   "send and its receive in one group)");
    if (group.depth > 0 && group.comm && group.comm != comm) {
        snprintf(what, sizeof what, "the group already holds calls on comm '%s' (a group holds one communicator's)",
                 group.comm->name);
        return shs__comm_arg_error(comm, op, what);
    }
    if (!comm->p2p_seq && !(comm->p2p_seq = calloc(2 * (size_t)comm->nranks, sizeof *comm->p2p_seq)))
        return shs_set_error(SHS_HOST_OOM, "rank %d: %s on comm '%s': out of host memory", comm->rank,
                             shs_coll_op_name(op), comm->name);
    if (group.depth > 0 && group.n == group.cap) {
        int cap = group.cap ? 2 * group.cap : 16;
        shs__call_t *nc = realloc(group.calls, (size_t)cap * sizeof *nc);
        if (!nc)
            return shs_set_error(SHS_HOST_OOM, "rank %d: %s on comm '%s': out of host memory for the group",
                                 comm->rank, shs_coll_op_name(op), comm->name);
        group.calls = nc;
        group.cap = cap;
    }
    c.seq = comm->p2p_seq[(op == SHS_OP_RECV ? (size_t)comm->nranks : 0) + (size_t)peer]++;
    if (group.depth == 0) return run_group(comm, &c, 1);
    group.comm = comm;
    group.calls[group.n++] = c;
    return SHS_OK;
}

shs_status_t shs_send(const void *sendbuf, size_t count, shs_dtype_t dtype, int peer, shs_comm_t *comm) {
    return p2p_call(SHS_OP_SEND, sendbuf, NULL, count, dtype, peer, comm);
}

shs_status_t shs_recv(void *recvbuf, size_t count, shs_dtype_t dtype, int peer, shs_comm_t *comm) {
    return p2p_call(SHS_OP_RECV, NULL, recvbuf, count, dtype, peer, comm);
}

shs_status_t shs_group_start(void) {
    group.depth++;
    return SHS_OK;
}

shs_status_t shs_group_end(void) {
    if (group.depth == 0) return shs_set_error(SHS_INVALID_ARG, "shs_group_end without shs_group_start");
    if (--group.depth > 0) return SHS_OK;
    shs_status_t st = group.n ? run_group(group.comm, group.calls, group.n) : SHS_OK;
    free(group.calls); /* nothing outlives the thread: a rank thread may end after any group */
    group.calls = NULL;
    group.n = group.cap = 0;
    group.comm = NULL;
    return st;
}

/* ---- all-to-all ------------------------------------------------------------------ */

/* Block j of sendbuf (send_counts[j] elements, or `count` when NULL) to
 * rank j and rank j's block into block j of recvbuf, as one group. */
static shs_status_t all_to_all(shs_coll_op_t op, const void *sendbuf, const size_t *send_counts, void *recvbuf,
                               const size_t *recv_counts, size_t count, shs_dtype_t dtype, shs_comm_t *comm) {
    if (!comm) return shs_set_error(SHS_INVALID_ARG, "%s: comm is NULL", shs_coll_op_name(op));
    size_t esize = shs_dtype_size(dtype), n = (size_t)comm->nranks, sent = 0, received = 0;
    if (!esize) return shs__comm_arg_error(comm, op, "invalid dtype");
    if (op == SHS_OP_ALL_TO_ALLV && (!send_counts || !recv_counts))
        return shs__comm_arg_error(comm, op, send_counts ? "recv_counts is NULL" : "send_counts is NULL");
    size_t limit = SIZE_MAX / esize;
    for (size_t j = 0; j < n; j++) {
        size_t s = send_counts ? send_counts[j] : count, r = recv_counts ? recv_counts[j] : count;
        if (s > limit - sent || r > limit - received)
            return shs__comm_arg_error(comm, op, "counts too large (byte size overflows)");
        sent += s;
        received += r;
    }
    if ((sent && !sendbuf) || (received && !recvbuf)) return shs__comm_arg_error(comm, op, "NULL buffer with count > 0");
    uintptr_t ps = (uintptr_t)sendbuf, pr = (uintptr_t)recvbuf;
    if (sent && received && ps < pr + received * esize && pr < ps + sent * esize)
        return shs__comm_arg_error(comm, op, "sendbuf and recvbuf overlap");
    if (group.depth > 0 && group.comm && group.comm != comm) {
        char what[160];
        snprintf(what, sizeof what, "the group already holds calls on comm '%s' (a group holds one communicator's)",
                 group.comm->name);
        return shs__comm_arg_error(comm, op, what);
    }
    SHS_CHECK(shs_group_start());
    shs_status_t st = SHS_OK;
    size_t soff = 0, roff = 0;
    for (size_t j = 0; j < n && st == SHS_OK; j++) {
        size_t s = send_counts ? send_counts[j] : count, r = recv_counts ? recv_counts[j] : count;
        st = shs_send((const char *)sendbuf + soff * esize, s, dtype, (int)j, comm);
        if (st == SHS_OK) st = shs_recv((char *)recvbuf + roff * esize, r, dtype, (int)j, comm);
        soff += s;
        roff += r;
    }
    shs_status_t end = shs_group_end(); /* runs the group (queued calls are numbered: they must run) */
    return st != SHS_OK ? st : end;
}

shs_status_t shs_all_to_all(const void *sendbuf, void *recvbuf, size_t count, shs_dtype_t dtype, shs_comm_t *comm) {
    return all_to_all(SHS_OP_ALL_TO_ALL, sendbuf, NULL, recvbuf, NULL, count, dtype, comm);
}

shs_status_t shs_all_to_allv(const void *sendbuf, const size_t *send_counts, void *recvbuf, const size_t *recv_counts,
                             shs_dtype_t dtype, shs_comm_t *comm) {
    return all_to_all(SHS_OP_ALL_TO_ALLV, sendbuf, send_counts, recvbuf, recv_counts, 0, dtype, comm);
}
