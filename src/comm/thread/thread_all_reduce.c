/* thread_all_reduce.c - the thread backend's all_reduce: staged one-shot
 * (redundant or shared reduction) or direct fused reduce + broadcast, in
 * rank order and in ring order.
 * What it is not: the sync core (thread_sync.c).
 */
#include <sched.h>

#include "comm/thread/thread_impl.h"

/* ---- all_reduce -------------------------------------------------------
 * Two algorithms, chosen from (count, dtype, N) alone so every rank agrees.
 * Staged one-shot, for small buffers (count*size <= STAGE_BYTES and
 * count*size*N <= ONE_SHOT_MAX_BYTES), one barrier:
 *   post+stage  every rank posts its call and copies its sendbuf to its stage.
 *   check       barrier, compare calls.
 *   reduce      every rank reduces the whole buffer from all stages into its
 *               recvbuf (N-fold redundant work, no further barrier; in place
 *               is safe because the stages are copies).
 *   When ranks outnumber cores, the N-fold work is paid on few cores, so the
 *   reduction is shared instead: the first rank to claim the call (a CAS on
 *   reduce_claimed) reduces once into the result stage and publishes
 *   reduce_done; the others wait for that (as in a barrier), then copy the
 *   result. The result stage of parity p is rewritten two calls later, after
 *   a barrier every rank enters only once it has copied. Same sums, same
 *   order: only who computes them changes.
 * Direct fused reduce + broadcast, otherwise. Chunk r is rank r's share:
 *   post+check  every rank posts (sendbuf, recvbuf), barrier, compare calls.
 *   reduce+put  rank r reduces chunk r of every sendbuf, tile by tile, and
 *               stores each tile into chunk r of every rank's recvbuf
 *               (streaming stores when the output exceeds the cache): every
 *               input byte is read once and every output byte written once.
 *               Only rank r touches chunk r of any buffer, and a tile is
 *               stored after all its sources were read, so in place is safe.
 *   exit        barrier: every recvbuf is complete, sendbufs are free.
 * Both produce per element op over ranks 0..N-1, so results are identical.
 * Ring order (comm.h) is a separate path, ring_all_reduce(), so the rank-order
 * path above stays as it is.
 */
static shs_status_t ring_all_reduce(shs_comm_t *comm, const shs__call_t *call);

/* Reduce every rank's stage of `call` into dst, in rank or ring order. */
static void reduce_stages(rank_ctx_t *ctx, const shs__call_t *call, void *dst) {
    shared_t *sh = ctx->sh;
    int n = sh->nranks;
    size_t esize = shs_dtype_size(call->dtype), off, len;
    if (call->order != SHS_REDUCE_ORDER_RING) {
        for (int j = 0; j < n; j++) ctx->srcs[j] = STAGE(sh, j, call);
        shs__reduce(dst, ctx->srcs, n, call->count, call->dtype, call->redop);
        return;
    }
    for (int c = 0; c < n; c++) { /* ring chunk c, sources in its chain order */
        shs__ring_chunk(call->count, n, c, &off, &len);
        if (!len) continue;
        for (int k = 0; k < n; k++) ctx->srcs[k] = STAGE(sh, (c + 1 + k) % n, call) + off * esize;
        shs__reduce((char *)dst + off * esize, ctx->srcs, n, len, call->dtype, call->redop);
    }
}

/* The reduce step of the staged one-shot all_reduce (both orders), after
 * shs__thread_begin_staged: redundant on every rank, or shared when ranks outnumber cores. */
static shs_status_t one_shot_reduce(shs_comm_t *comm, const shs__call_t *call) {
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    if (sh->spin_iters) {
        reduce_stages(ctx, call, call->recvbuf);
        return SHS_OK;
    }
    uint64_t tag = call->seq + 1;
    void *result = STAGE(sh, sh->nranks, call);
    uint64_t claimed = atomic_load_explicit(&sh->reduce_claimed, memory_order_relaxed);
    if (claimed < tag && atomic_compare_exchange_strong(&sh->reduce_claimed, &claimed, tag)) {
        reduce_stages(ctx, call, result);
        atomic_store_explicit(&sh->reduce_done, tag, memory_order_release);
    } else {
        /* The claimant is a rank of this call past its barrier, doing a
         * bounded reduction: wait by yielding, watching for failure only. */
        while (atomic_load_explicit(&sh->reduce_done, memory_order_acquire) < tag) {
            if (shs__thread_failed(sh)) return shs__thread_failed_status(comm, call, 1);
            sched_yield();
        }
    }
    shs__thread_copy_bytes(call->recvbuf, result, call->count * shs_dtype_size(call->dtype));
    return SHS_OK;
}

shs_status_t shs__thread_all_reduce(shs_comm_t *comm, const shs__call_t *call) {
    if (call->order == SHS_REDUCE_ORDER_RING) return ring_all_reduce(comm, call);
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    int n = sh->nranks, r = comm->rank;
    size_t esize = shs_dtype_size(call->dtype), bytes = call->count * esize;

    if (bytes <= STAGE_BYTES && bytes * (size_t)n <= ONE_SHOT_MAX_BYTES) {
        SHS_CHECK(shs__thread_begin_staged(comm, call, call->sendbuf, bytes));
        if (bytes) SHS_CHECK(one_shot_reduce(comm, call));
        return shs__thread_finish(comm, call, 0);
    }

    SHS_CHECK(shs__thread_begin(comm, call));
    size_t off = shs__chunk_start(call->count, n, r), len = shs__chunk_start(call->count, n, r + 1) - off;
    if (len) {
        for (int j = 0; j < n; j++) {
            ctx->srcs[j] = (const char *)POSTED(sh, j, call)->sendbuf + off * esize;
            ctx->dsts[j] = (char *)POSTED(sh, j, call)->recvbuf + off * esize;
        }
        shs__reduce_multi(ctx->dsts, n, ctx->srcs, n, len, call->dtype, call->redop,
                          shs__thread_use_stream(bytes * (size_t)n));
    }
    return shs__thread_finish(comm, call, 1);
}

/* ---- all_reduce in ring order ------------------------------------------
 * Vocabulary of comm.h's RING REDUCTION ORDER: S = ceil(count/N); ring chunk
 * c = elements [min(c*S, count), min((c+1)*S, count)); its chain is ranks
 * c+1, c+2, ..., c (mod N). The same two algorithms as the rank order, with
 * the same thresholds (so all ranks agree), but the work is cut by ring chunk:
 * Staged one-shot:
 *   post+stage, check  as in rank order.
 *   reduce      every rank reduces each ring chunk c of all stages, sources
 *               in c's chain order, into its recvbuf.
 * Direct fused reduce + broadcast:
 *   post+check  as in rank order.
 *   reduce+put  rank r reduces ring chunk r of every sendbuf in chunk r's
 *               chain order and stores each tile into chunk r of every rank's
 *               recvbuf (in place is safe as in rank order: only rank r
 *               touches chunk r).
 *   exit        barrier.
 */
static shs_status_t ring_all_reduce(shs_comm_t *comm, const shs__call_t *call) {
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    int n = sh->nranks, r = comm->rank;
    size_t esize = shs_dtype_size(call->dtype), bytes = call->count * esize, off, len;

    if (bytes <= STAGE_BYTES && bytes * (size_t)n <= ONE_SHOT_MAX_BYTES) {
        SHS_CHECK(shs__thread_begin_staged(comm, call, call->sendbuf, bytes));
        if (bytes) SHS_CHECK(one_shot_reduce(comm, call));
        return shs__thread_finish(comm, call, 0);
    }

    SHS_CHECK(shs__thread_begin(comm, call));
    shs__ring_chunk(call->count, n, r, &off, &len);
    if (len) {
        for (int k = 0; k < n; k++) {
            ctx->srcs[k] = (const char *)POSTED(sh, (r + 1 + k) % n, call)->sendbuf + off * esize;
            ctx->dsts[k] = (char *)POSTED(sh, k, call)->recvbuf + off * esize;
        }
        shs__reduce_multi(ctx->dsts, n, ctx->srcs, n, len, call->dtype, call->redop,
                          shs__thread_use_stream(bytes * (size_t)n));
    }
    return shs__thread_finish(comm, call, 1);
}
