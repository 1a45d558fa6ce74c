/* thread_reduce_scatter.c - the thread backend's reduce_scatter: staged or
 * direct, rank or ring order.
 * What it is not: the sync core (thread_sync.c).
 */
#include "comm/thread/thread_impl.h"

/* ---- reduce_scatter ---------------------------------------------------
 * Block r = elements [r*recvcount, (r+1)*recvcount) of every sendbuf.
 * Staged, when a whole sendbuf (N blocks) fits STAGE_BYTES (one barrier):
 *   post+stage  every rank posts its call and copies its sendbuf to its stage.
 *   check       barrier, compare calls.
 *   reduce      rank r reduces block r of every stage, in rank order, into
 *               its recvbuf.
 * Direct, otherwise:
 *   post+check  every rank posts (sendbuf, recvbuf), barrier, compare calls.
 *   reduce      rank r reduces block r of every rank's sendbuf, in rank order,
 *               into its recvbuf. In place (recvbuf == block r of its own
 *               sendbuf) each tile is read from all ranks before it is
 *               written, and the others read only their own blocks.
 *   exit        barrier: no sendbuf is reused while another rank reads it.
 * Ring order (comm.h) changes only the order of the sources: rank r reduces
 * block r over ranks r+1, r+2, ..., r (mod N) instead of 0, ..., N-1.
 */
shs_status_t shs__thread_reduce_scatter(shs_comm_t *comm, const shs__call_t *call) {
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    int n = sh->nranks, r = comm->rank;
    size_t block = call->count * shs_dtype_size(call->dtype);
    int staged = block * (size_t)n <= STAGE_BYTES;
    /* ring order: block r's chain is ranks r+1, ..., r (mod N) */
    int first = call->order == SHS_REDUCE_ORDER_RING ? r + 1 : 0;
    SHS_CHECK(shs__thread_begin_staged(comm, call, call->sendbuf, staged ? block * (size_t)n : 0));
    if (block) {
        for (int k = 0; k < n; k++) {
            int j = (first + k) % n;
            const char *src = staged ? STAGE(sh, j, call) : (const char *)POSTED(sh, j, call)->sendbuf;
            ctx->srcs[k] = src + (size_t)r * block;
        }
        shs__reduce_multi(&call->recvbuf, 1, ctx->srcs, n, call->count, call->dtype, call->redop,
                          shs__thread_use_stream(block * (size_t)n));
    }
    return shs__thread_finish(comm, call, !staged);
}
