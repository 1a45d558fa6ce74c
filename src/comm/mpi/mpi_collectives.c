/* mpi_collectives.c - the MPI backend's collectives: data moved by MPI's
 * nonblocking calls, reduced by comm_reduce.c in rank or ring order (the
 * vocabulary is in comm_mpi.c), and split.
 * What it is not: the wait and the checks (mpi_sync.c).
 */
#ifdef SHS_HAVE_MPI

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/mpi/mpi_impl.h"

/* ---- all_gather -------------------------------------------------------------
 *   exchange    descriptors, check.
 *   gather      MPI_Iallgather of count elements per rank (MPI_IN_PLACE when
 *               sendbuf is block r of recvbuf), waited on by polling.
 */
shs_status_t shs__mpi_all_gather(shs_comm_t *comm, const shs__call_t *call) {
    mpi_ctx_t *ctx = comm->ctx;
    SHS_CHECK(shs__mpi_exchange(comm, call));
    size_t esize = shs_dtype_size(call->dtype), block = call->count * esize;
    SHS_CHECK(shs__mpi_check_int_count(comm, call, call->count * (size_t)comm->nranks));
    if (!block) return SHS_OK;
    MPI_Datatype t = shs__mpi_move_type(call->dtype);
    int in_place = (const char *)call->sendbuf == (char *)call->recvbuf + (size_t)comm->rank * block;
    MPI_Request req;
    MPI_TRY(comm, MPI_Iallgather(in_place ? MPI_IN_PLACE : call->sendbuf, (int)call->count, t, call->recvbuf,
                                 (int)call->count, t, ctx->mc, &req));
    return shs__mpi_wait_one(comm, call, &req);
}

/* ---- reduce_scatter ---------------------------------------------------------
 * Block j = elements [j*recvcount, (j+1)*recvcount) of every sendbuf.
 *   exchange    descriptors, check.
 *   transpose   MPI_Ialltoall: rank r receives block r of every rank's
 *               sendbuf into its scratch, rank j's copy at j*recvcount.
 *   reduce      rank r reduces its N copies, in rank order (ring order:
 *               r+1, ..., r mod N), into recvbuf (in place is safe: the
 *               copies are in scratch).
 */
shs_status_t shs__mpi_reduce_scatter(shs_comm_t *comm, const shs__call_t *call) {
    mpi_ctx_t *ctx = comm->ctx;
    SHS_CHECK(shs__mpi_exchange(comm, call));
    int n = comm->nranks, r = comm->rank;
    size_t block = call->count * shs_dtype_size(call->dtype);
    SHS_CHECK(shs__mpi_check_int_count(comm, call, call->count * (size_t)n));
    if (!block) return SHS_OK;
    SHS_CHECK(shs__mpi_ensure_scratch(comm, block * (size_t)n));
    MPI_Datatype t = shs__mpi_move_type(call->dtype);
    MPI_Request req;
    MPI_TRY(comm, MPI_Ialltoall(call->sendbuf, (int)call->count, t, ctx->scratch, (int)call->count, t, ctx->mc, &req));
    SHS_CHECK(shs__mpi_wait_one(comm, call, &req));
    int first = call->order == SHS_REDUCE_ORDER_RING ? r + 1 : 0;
    for (int k = 0; k < n; k++) ctx->srcs[k] = ctx->scratch + (size_t)((first + k) % n) * block;
    shs__reduce(call->recvbuf, ctx->srcs, n, call->count, call->dtype, call->redop);
    return SHS_OK;
}

/* ---- all_reduce ---------------------------------------------------------------
 * A reduce-scatter by chunk, then an all-gather:
 *   exchange    descriptors, check.
 *   transpose   MPI_Ialltoallv: rank r receives chunk r of every rank's
 *               sendbuf into its scratch (rank j's copy at j*len(r)).
 *   reduce      rank r reduces its copies in rank order (ring order: the
 *               chain r+1, ..., r mod N of comm.h) into chunk r of recvbuf;
 *               every sendbuf was fully sent before, so in place is safe.
 *   gather      MPI_Iallgatherv in place: every rank gets every chunk.
 * Chunks are those of the thread backend (floor-balanced in rank order,
 * ceil-sized in ring order): an element's sources and their order are the
 * same, so are its bits.
 */
shs_status_t shs__mpi_all_reduce(shs_comm_t *comm, const shs__call_t *call) {
    mpi_ctx_t *ctx = comm->ctx;
    SHS_CHECK(shs__mpi_exchange(comm, call));
    int n = comm->nranks, r = comm->rank, ring = call->order == SHS_REDUCE_ORDER_RING;
    size_t esize = shs_dtype_size(call->dtype);
    SHS_CHECK(shs__mpi_check_int_count(comm, call, call->count));
    if (!call->count) return SHS_OK;
    for (int j = 0; j < n; j++) {
        size_t off, len;
        if (ring) shs__ring_chunk(call->count, n, j, &off, &len);
        else off = shs__chunk_start(call->count, n, j), len = shs__chunk_start(call->count, n, j + 1) - off;
        ctx->scounts[j] = (int)len;
        ctx->sdispls[j] = (int)off;
    }
    size_t mine = (size_t)ctx->scounts[r], off_r = (size_t)ctx->sdispls[r];
    for (int j = 0; j < n; j++) {
        ctx->rcounts[j] = (int)mine;
        ctx->rdispls[j] = (int)((size_t)j * mine);
    }
    SHS_CHECK(shs__mpi_ensure_scratch(comm, (mine ? mine : 1) * esize * (size_t)n));
    MPI_Datatype t = shs__mpi_move_type(call->dtype);
    MPI_Request req;
    MPI_TRY(comm, MPI_Ialltoallv(call->sendbuf, ctx->scounts, ctx->sdispls, t, ctx->scratch, ctx->rcounts,
                                 ctx->rdispls, t, ctx->mc, &req));
    SHS_CHECK(shs__mpi_wait_one(comm, call, &req));
    if (mine) {
        int first = ring ? r + 1 : 0;
        for (int k = 0; k < n; k++) ctx->srcs[k] = ctx->scratch + (size_t)((first + k) % n) * mine * esize;
        shs__reduce((char *)call->recvbuf + off_r * esize, ctx->srcs, n, mine, call->dtype, call->redop);
    }
    MPI_TRY(comm, MPI_Iallgatherv(MPI_IN_PLACE, 0, t, call->recvbuf, ctx->scounts, ctx->sdispls, t, ctx->mc, &req));
    return shs__mpi_wait_one(comm, call, &req);
}

/* ---- broadcast ------------------------------------------------------------------
 *   exchange    descriptors, check.
 *   copy        the root copies sendbuf into recvbuf (unless in place).
 *   bcast       MPI_Ibcast of recvbuf from the root.
 */
shs_status_t shs__mpi_broadcast(shs_comm_t *comm, const shs__call_t *call) {
    mpi_ctx_t *ctx = comm->ctx;
    SHS_CHECK(shs__mpi_exchange(comm, call));
    size_t bytes = call->count * shs_dtype_size(call->dtype);
    SHS_CHECK(shs__mpi_check_int_count(comm, call, call->count));
    if (!bytes) return SHS_OK;
    if (comm->rank == call->root && call->sendbuf != call->recvbuf) memcpy(call->recvbuf, call->sendbuf, bytes);
    MPI_Request req;
    MPI_TRY(comm, MPI_Ibcast(call->recvbuf, (int)call->count, shs__mpi_move_type(call->dtype), call->root, ctx->mc, &req));
    return shs__mpi_wait_one(comm, call, &req);
}

/* ---- reduce -----------------------------------------------------------------------
 *   exchange    descriptors, check.
 *   gather      MPI_Igather of every sendbuf into the root's scratch.
 *   reduce      the root reduces the N copies in rank order into recvbuf
 *               (reduce keeps rank order whatever the handle's order, as on
 *               threads).
 */
shs_status_t shs__mpi_reduce(shs_comm_t *comm, const shs__call_t *call) {
    mpi_ctx_t *ctx = comm->ctx;
    SHS_CHECK(shs__mpi_exchange(comm, call));
    int n = comm->nranks, is_root = comm->rank == call->root;
    size_t bytes = call->count * shs_dtype_size(call->dtype);
    SHS_CHECK(shs__mpi_check_int_count(comm, call, call->count * (size_t)n));
    if (!bytes) return SHS_OK;
    if (is_root) SHS_CHECK(shs__mpi_ensure_scratch(comm, bytes * (size_t)n));
    MPI_Datatype t = shs__mpi_move_type(call->dtype);
    MPI_Request req;
    MPI_TRY(comm, MPI_Igather(call->sendbuf, (int)call->count, t, is_root ? ctx->scratch : NULL, (int)call->count, t,
                              call->root, ctx->mc, &req));
    SHS_CHECK(shs__mpi_wait_one(comm, call, &req));
    if (is_root) {
        for (int j = 0; j < n; j++) ctx->srcs[j] = ctx->scratch + (size_t)j * bytes;
        shs__reduce(call->recvbuf, ctx->srcs, n, call->count, call->dtype, call->redop);
    }
    return SHS_OK;
}

/* ---- barrier: the descriptor exchange alone (it completes only when every
 * rank has sent its descriptor, i.e. has called). */
shs_status_t shs__mpi_barrier(shs_comm_t *comm, const shs__call_t *call) { return shs__mpi_exchange(comm, call); }

/* ---- split --------------------------------------------------------------------------
 *   exchange    descriptors (color and key travel along, not compared).
 *   split       MPI_Comm_split(color or MPI_UNDEFINED, key): MPI ranks the
 *               members by (key, parent rank), as ncclCommSplit and the
 *               thread backend do. Every rank has arrived, so this blocking
 *               call cannot wait for a missing one.
 *   attach      a new handle named by shs__split_name with the parent's
 *               timeout; its members (known from the descriptors) for its job.
 */

/* Every rank of `color` (from the exchanged descriptors), in the child's
 * rank order; returns how many, -1 when out of host memory. */
static int split_members(const mpi_ctx_t *ctx, int n, int color, int *members) {
    shs__split_member_t *m = malloc((size_t)n * sizeof *m);
    if (!m) return -1;
    int k = 0;
    for (int j = 0; j < n; j++)
        if (ctx->descs[j].color == color) m[k++] = (shs__split_member_t){(int)ctx->descs[j].key, j};
    shs__split_order(m, k, members);
    free(m);
    return k;
}

shs_status_t shs__mpi_split(shs_comm_t *comm, const shs__call_t *call, shs_comm_t **newcomm, int *members) {
    mpi_ctx_t *ctx = comm->ctx;
    SHS_CHECK(shs__mpi_exchange(comm, call));
    MPI_Comm child;
    MPI_TRY(comm, MPI_Comm_split(ctx->mc, call->color == SHS_SPLIT_NOCOLOR ? MPI_UNDEFINED : call->color, call->key,
                                 &child));
    if (child == MPI_COMM_NULL) return SHS_OK;
    char name[256];
    int m = split_members(ctx, comm->nranks, call->color, members);
    if (m < 0) {
        MPI_Comm_free(&child);
        return shs_set_error(SHS_HOST_OOM, "rank %d: split seq %llu on comm '%s': out of host memory", comm->rank,
                             (unsigned long long)call->seq, ctx->name);
    }
    shs__split_name(comm, call->color, members, m, name, sizeof name);
    shs_comm_t *mine = shs__comm_new(comm->iface);
    shs_status_t s = mine ? shs__mpi_ctx_create(mine, child, ctx->timeout_ms, name)
                          : shs_set_error(SHS_HOST_OOM, "rank %d: split seq %llu on comm '%s': out of host memory",
                                          comm->rank, (unsigned long long)call->seq, ctx->name);
    if (s != SHS_OK) {
        free(mine);
        MPI_Comm_free(&child);
        return s;
    }
    *newcomm = mine;
    return SHS_OK;
}

#endif /* SHS_HAVE_MPI */
