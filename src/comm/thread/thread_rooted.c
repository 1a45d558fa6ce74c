/* thread_rooted.c - the thread backend's rooted collectives: broadcast
 * and reduce, each staged or direct.
 * What it is not: the sync core (thread_sync.c).
 */
#include "comm/thread/thread_impl.h"

/* ---- broadcast ----------------------------------------------------------
 * Staged, when the buffer fits STAGE_BYTES (one barrier):
 *   post+stage  every rank posts its call; the root copies its sendbuf to
 *               its stage.
 *   check       barrier, compare calls.
 *   copy        every rank copies the root's stage into its recvbuf.
 * Direct, otherwise:
 *   post+check  every rank posts (sendbuf, recvbuf), barrier, compare calls.
 *   copy        every rank copies the root's sendbuf into its recvbuf (the
 *               root too, unless in place).
 *   exit        barrier: the root's sendbuf is read until everyone is done.
 */
shs_status_t shs__thread_broadcast(shs_comm_t *comm, const shs__call_t *call) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    size_t bytes = call->count * shs_dtype_size(call->dtype);
    int staged = bytes <= STAGE_BYTES, is_root = comm->rank == call->root;
    SHS_CHECK(shs__thread_begin_staged(comm, call, call->sendbuf, staged && is_root ? bytes : 0));
    if (staged) {
        shs__thread_copy_bytes(call->recvbuf, is_root ? call->sendbuf : STAGE(sh, call->root, call), bytes);
        return shs__thread_finish(comm, call, 0);
    }
    /* libc memcpy, not streaming stores: faster for this one large copy per
     * rank (make bench: 0.7-0.85x the naive design with SSE2 streaming
     * stores at >= 16 MiB, about 1x with memcpy, which the naive design uses) */
    shs__thread_copy_bytes(call->recvbuf, POSTED(sh, call->root, call)->sendbuf, bytes);
    return shs__thread_finish(comm, call, 1);
}

/* ---- reduce ---------------------------------------------------------------
 * Staged, when the buffer fits STAGE_BYTES (one barrier):
 *   post+stage  every rank posts its call and copies its sendbuf to its stage.
 *   check       barrier, compare calls.
 *   reduce      the root reduces every stage into its recvbuf.
 * Direct, the work split over all ranks, otherwise:
 *   post+check  every rank posts (sendbuf, recvbuf), barrier, compare calls.
 *   reduce      rank r reduces chunk r of every sendbuf into chunk r of the
 *               root's recvbuf (in place at the root safe as in
 *               reduce_scatter).
 *   exit        barrier: the root's recvbuf is complete, sendbufs are free.
 */
shs_status_t shs__thread_reduce(shs_comm_t *comm, const shs__call_t *call) {
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    int n = sh->nranks, r = comm->rank;
    size_t esize = shs_dtype_size(call->dtype), bytes = call->count * esize;
    if (bytes <= STAGE_BYTES) {
        SHS_CHECK(shs__thread_begin_staged(comm, call, call->sendbuf, bytes));
        if (r == call->root && bytes) {
            for (int j = 0; j < n; j++) ctx->srcs[j] = STAGE(sh, j, call);
            shs__reduce(call->recvbuf, ctx->srcs, n, call->count, call->dtype, call->redop);
        }
        return shs__thread_finish(comm, call, 0);
    }
    SHS_CHECK(shs__thread_begin(comm, call));
    size_t off = shs__chunk_start(call->count, n, r), len = shs__chunk_start(call->count, n, r + 1) - off;
    if (len) {
        for (int j = 0; j < n; j++) ctx->srcs[j] = (const char *)POSTED(sh, j, call)->sendbuf + off * esize;
        shs__reduce((char *)POSTED(sh, call->root, call)->recvbuf + off * esize, ctx->srcs, n, len, call->dtype,
                    call->redop);
    }
    return shs__thread_finish(comm, call, 1);
}
