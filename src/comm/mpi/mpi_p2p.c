/* mpi_p2p.c - the MPI backend's sends and receives (comm.h POINT-TO-POINT).
 *
 * What it is: per call, two phases, both through the polling wait:
 *   exchange  the call's descriptor goes to the peer and the peer's comes
 *             back: a send's descriptor with TAG_SEND_DESC, a receive's
 *             with TAG_RECV_DESC. MPI keeps the messages of one (source,
 *             tag, communicator) in order, so the k-th send descriptor from
 *             a reaches b's k-th receive: exactly the pairing rule
 *             (shs_p2p_pair_differs), which both ends then check on the
 *             same two descriptors and so reach the same verdict and text.
 *   data      MPI_Isend / MPI_Irecv of the message (TAG_P2P_DATA), in the
 *             same order, so the k-th message lands in the k-th receive.
 * All calls of a group post their exchange together, then their data
 * together, so a group's sends and receives never wait on each other. A
 * message to this rank itself is copied with `copy` (comm_p2p.c checked
 * its pair). copy NULL: the exchange only (the NCCL communicator's host
 * handle, which then moves the data itself).
 * What it is not: a search for cycles (each process sees its own calls
 * only): ranks blocked on each other fail when the timeout ends, naming
 * the peer whose descriptor never came.
 */
#ifdef SHS_HAVE_MPI

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/mpi/mpi_impl.h"

static shs_status_t ensure_p2p(shs_comm_t *comm, int n) {
    mpi_ctx_t *ctx = comm->ctx;
    if (n <= ctx->p2p_cap) return SHS_OK;
    desc_t *d = realloc(ctx->p2p_descs, 2 * (size_t)n * sizeof *d);
    if (d) ctx->p2p_descs = d;
    MPI_Request *q = d ? realloc(ctx->p2p_reqs, 2 * (size_t)n * sizeof *q) : NULL;
    if (q) ctx->p2p_reqs = q;
    if (!d || !q)
        return shs_set_error(SHS_HOST_OOM, "rank %d: comm '%s': out of host memory for %d calls", comm->rank, ctx->name, n);
    ctx->p2p_cap = n;
    return SHS_OK;
}

/* The first call whose peer's descriptor has not come, for a timeout's text. */
static void name_missing(shs_comm_t *comm, const shs__call_t *calls, int n, char *detail, size_t size) {
    mpi_ctx_t *ctx = comm->ctx;
    for (int i = 0; i < n; i++) {
        int flag = 1;
        if (ctx->p2p_reqs[2 * i + 1] != MPI_REQUEST_NULL) MPI_Test(&ctx->p2p_reqs[2 * i + 1], &flag, MPI_STATUS_IGNORE);
        if (flag) continue;
        char c[200];
        const shs__call_t *x = &calls[i];
        shs__call_format(c, sizeof c, x);
        snprintf(detail, size, "timed out after %.3f s: rank %d's %s seq %llu waits for rank %d's %s %s rank %d seq "
                 "%llu, which never came", ctx->timeout_ms / 1000.0, comm->rank, c, (unsigned long long)x->seq, x->root,
                 x->op == SHS_OP_SEND ? "receive" : "send", x->op == SHS_OP_SEND ? "from" : "to", comm->rank,
                 (unsigned long long)x->seq);
        return;
    }
    snprintf(detail, size, "timed out after %.3f s", ctx->timeout_ms / 1000.0);
}

shs_status_t shs__mpi_p2p(shs_comm_t *comm, const shs__call_t *calls, int n, shs__copy_fn copy) {
    mpi_ctx_t *ctx = comm->ctx;
    if (ctx->fail != FAIL_NONE) return shs__mpi_failed_earlier(comm, &calls[0]);
    SHS_CHECK(ensure_p2p(comm, n));
    int r = comm->rank, remote = 0;
    for (int i = 0; i < n; i++) remote += calls[i].root != r;
    /* exchange: reqs[2i] my descriptor out, reqs[2i+1] the peer's in */
    MPI_Request *reqs = ctx->p2p_reqs;
    for (int i = 0; i < 2 * n; i++) reqs[i] = MPI_REQUEST_NULL;
    ctx->p2p_nreqs = 2 * n;
    for (int i = 0; i < n; i++) {
        const shs__call_t *c = &calls[i];
        if (c->root == r) continue;
        int sends = c->op == SHS_OP_SEND;
        ctx->p2p_descs[2 * i] = shs__mpi_desc_of(c);
        MPI_TRY(comm, MPI_Irecv(&ctx->p2p_descs[2 * i + 1], (int)sizeof(desc_t), MPI_BYTE, c->root,
                                sends ? TAG_RECV_DESC : TAG_SEND_DESC, ctx->mc, &reqs[2 * i + 1]));
        MPI_TRY(comm, MPI_Isend(&ctx->p2p_descs[2 * i], (int)sizeof(desc_t), MPI_BYTE, c->root,
                                sends ? TAG_SEND_DESC : TAG_RECV_DESC, ctx->mc, &reqs[2 * i]));
    }
    int timed_out = 0;
    char detail[FAIL_TEXT], prefix[256];
    shs_status_t st = remote ? shs__mpi_poll(comm, &calls[0], reqs, 2 * n, 0, &timed_out) : SHS_OK;
    if (timed_out) {
        name_missing(comm, calls, n, detail, sizeof detail);
        shs__mpi_record_timeout(comm, &calls[0], detail);
        shs__mpi_call_prefix(prefix, sizeof prefix, comm, &calls[0]);
        return shs_set_error(SHS_TIMEOUT, "%s%s", prefix, detail);
    }
    SHS_CHECK(st);
    for (int i = 0; i < n; i++) {
        const shs__call_t *c = &calls[i];
        if (c->root == r) continue;
        shs__call_t theirs = shs__mpi_call_of(&ctx->p2p_descs[2 * i + 1]);
        int sends = c->op == SHS_OP_SEND;
        if (!shs__p2p_check_pair(sends ? c : &theirs, sends ? r : c->root, sends ? &theirs : c, sends ? c->root : r,
                                 ctx->name, detail, sizeof detail)) {
            if (ctx->fail == FAIL_NONE) {
                ctx->fail = FAIL_MISMATCH;
                snprintf(ctx->fail_detail, sizeof ctx->fail_detail, "%s", detail);
            }
            return shs_set_error(SHS_MISMATCH, "rank %d: %s", r, detail);
        }
        SHS_CHECK(shs__mpi_check_int_count(comm, c, c->count));
    }
    if (!copy) return SHS_OK;
    /* data: the same order on both ends */
    for (int i = 0; i < 2 * n; i++) reqs[i] = MPI_REQUEST_NULL;
    for (int i = 0; i < n; i++) {
        const shs__call_t *c = &calls[i];
        size_t bytes = c->count * shs_dtype_size(c->dtype);
        if (c->root == r) {
            if (c->op == SHS_OP_SEND) continue;
            for (int j = 0; j < n; j++) /* its send: comm_p2p.c paired it */
                if (calls[j].op == SHS_OP_SEND && calls[j].root == r && calls[j].seq == c->seq)
                    SHS_CHECK(copy(c->recvbuf, calls[j].sendbuf, bytes));
            continue;
        }
        if (!bytes) continue;
        MPI_Datatype t = shs__mpi_move_type(c->dtype);
        if (c->op == SHS_OP_SEND)
            MPI_TRY(comm, MPI_Isend(c->sendbuf, (int)c->count, t, c->root, TAG_P2P_DATA, ctx->mc, &reqs[i]));
        else
            MPI_TRY(comm, MPI_Irecv(c->recvbuf, (int)c->count, t, c->root, TAG_P2P_DATA, ctx->mc, &reqs[i]));
    }
    st = remote ? shs__mpi_poll(comm, &calls[0], reqs, n, 1, &timed_out) : SHS_OK;
    if (timed_out) {
        snprintf(detail, sizeof detail, "timed out after %.3f s moving a message (both ends had arrived; a process "
                 "died or stopped making progress)", ctx->timeout_ms / 1000.0);
        shs__mpi_record_timeout(comm, &calls[0], detail);
        shs__mpi_call_prefix(prefix, sizeof prefix, comm, &calls[0]);
        return shs_set_error(SHS_TIMEOUT, "%s%s", prefix, detail);
    }
    if (st == SHS_OK) ctx->p2p_nreqs = 0;
    return st;
}

#endif /* SHS_HAVE_MPI */
