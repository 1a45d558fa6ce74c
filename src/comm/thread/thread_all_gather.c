/* thread_all_gather.c - the thread backend's all_gather: staged or direct push.
 * What it is not: the sync core (thread_sync.c).
 */
#include "comm/thread/thread_impl.h"

/* ---- all_gather -------------------------------------------------------
 * Block j = sendcount elements of rank j. Two algorithms, chosen from
 * (count, dtype) alone:
 * Staged, when a block fits STAGE_BYTES (one barrier):
 *   post+stage  every rank posts its call and copies its sendbuf to its stage.
 *   check       barrier, compare calls.
 *   copy        rank r copies every rank's stage into its recvbuf.
 * Direct push, otherwise:
 *   post+check  every rank posts (sendbuf, recvbuf), barrier, compare calls.
 *   push        rank r copies its sendbuf into block r of every rank's
 *               recvbuf, chunk by chunk (each chunk read once), streaming
 *               stores when the output exceeds the cache. In place, rank r's
 *               sendbuf is its recvbuf block r, which it skips; nobody else
 *               writes or reads block r of recvbuf r.
 *   exit        barrier: every recvbuf is complete, no sendbuf is reused
 *               while another rank could read it.
 */
shs_status_t shs__thread_all_gather(shs_comm_t *comm, const shs__call_t *call) {
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    int n = sh->nranks;
    size_t block = call->count * shs_dtype_size(call->dtype);
    if (block <= STAGE_BYTES) {
        SHS_CHECK(shs__thread_begin_staged(comm, call, call->sendbuf, block));
        for (int j = 0; j < n; j++)
            shs__thread_copy_bytes((char *)call->recvbuf + (size_t)j * block, STAGE(sh, j, call), block);
        return shs__thread_finish(comm, call, 0);
    }
    SHS_CHECK(shs__thread_begin(comm, call));
    for (int j = 0; j < n; j++) ctx->dsts[j] = (char *)POSTED(sh, j, call)->recvbuf + (size_t)comm->rank * block;
    shs__copy_multi(ctx->dsts, n, call->sendbuf, block, shs__thread_use_stream(block * (size_t)n * (size_t)n));
    return shs__thread_finish(comm, call, 1);
}
