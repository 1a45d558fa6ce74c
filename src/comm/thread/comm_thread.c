/* comm_thread.c - the "thread" communicator backend: N ranks are N threads of
 * one process and collectives move data through shared memory.
 *
 * What it is: direct (one-hop) collectives. Each rank posts its call and
 * buffer pointers in its slot of the shared state; after a barrier every rank
 * reads (or writes) the other ranks' buffers itself. Small calls are staged:
 * each rank copies its input into its staging buffer before the barrier, so
 * the call needs that one barrier only. Barriers are per-rank arrival
 * counters, each on its own cache line (a rank publishes "I entered barrier
 * k" by bumping its own counter; a waiter polls the others' counters), so an
 * arrival costs one cache-line transfer per reader instead of a round trip
 * through one shared counter. Waiting is a short spin (only when ranks <=
 * cores), then sched_yield for a bounded time, then a futex sleep on a
 * shared wake word with the communicator's timeout; an arriving rank wakes
 * sleepers only when there are any; the wake word's low bit marks the
 * communicator failed, which wakes every sleeper.
 * The cross-rank checks (same op, count, dtype, reduce op, root, sequence
 * number, tag: shs__check_calls), the timeout and abort of comm.h live here.
 * What it is not: a model of a network (no link bandwidth, no ring data
 * movement: ring reduce order only reorders the sources), or usable across
 * processes.
 *
 * Vocabulary used by the algorithms below:
 *   slot      per-rank record in the shared state: the posted call (shs__call_t,
 *             with sendbuf/recvbuf), barrier arrival count, last call seen.
 *   parity    seq & 1. Posted calls and staging buffers come in two copies,
 *             one per parity: a rank writes call s's copy before the first
 *             barrier of s, and everyone is done reading call s-2's copy
 *             (same parity) before any barrier of s-1 completes, so no extra
 *             barrier is needed to protect them.
 *   stage     per-rank, per-parity staging buffer of STAGE_BYTES in the shared
 *             state, for the one-barrier algorithms on small calls.
 *   block     the count elements that one rank contributes (all_gather) or
 *             receives (reduce_scatter).
 *   chunk     rank r's share of a count-element buffer when the work of one
 *             buffer is split over ranks: elements [start(r), start(r+1)),
 *             start(j) = floor-balanced j*count/N.
 *   phase     the work between two barriers. A rank reads another rank's
 *             buffer only in a phase where that rank does not write the same
 *             elements, and the exit barrier keeps every buffer alive until
 *             nobody reads it; that is what makes the in-place forms safe.
 *   direct    a call whose data phase reads or writes other ranks' buffers
 *             (through their posted pointers), as opposed to a staged one,
 *             which touches only the shared stages and the rank's own
 *             buffers. Direct calls end with an exit barrier.
 *   left      per-rank counter in the slot: seq + 1 of the last direct call
 *             whose data phase this rank has finished, so it touches no other
 *             rank's buffers of that call any more.
 * The number of barriers of a call depends only on (op, count, dtype, N), the
 * fields every rank checks after the first one, so all ranks agree on it.
 *
 * Files: this one (the rendezvous id, the shared state's lifetime, the
 * vtable), thread_sync.c (barriers, the call protocol, failure: the
 * invariants), then one file per collective: thread_all_gather.c,
 * thread_reduce_scatter.c, thread_all_reduce.c (one-shot and direct, rank
 * and ring order), thread_rooted.c (broadcast, reduce), thread_split.c, and
 * thread_p2p.c (sends and receives, the cycle search).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/thread/thread_impl.h"

static int online_cpus(void) {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- shared state lifetime ------------------------------------------- */

void shs__thread_shared_free(shared_t *sh) {
    pthread_mutex_destroy(&sh->fail_mu);
    pthread_mutex_destroy(&sh->p2p_mu);
    free(sh->fail_involved);
    free(sh->stage);
    free(sh->name);
    free(sh);
}

void shs__thread_shared_unref(shared_t *sh) {
    if (atomic_fetch_sub_explicit(&sh->refs, 1, memory_order_acq_rel) == 1) shs__thread_shared_free(sh);
}

shared_t *shs__thread_shared_create(int nranks, int timeout_ms, const char *name, int refs) {
    size_t size = sizeof(shared_t) + (size_t)nranks * sizeof(slot_t);
    size = (size + 63) / 64 * 64;
    shared_t *sh = aligned_alloc(64, size);
    char *name_copy = strdup(name);
    char *stage = aligned_alloc(64, ((size_t)nranks + 1) * 2 * STAGE_BYTES);
    unsigned char *involved = calloc((size_t)nranks, 1);
    if (!sh || !name_copy || !stage || !involved) {
        free(sh);
        free(name_copy);
        free(stage);
        free(involved);
        return NULL;
    }
    memset(sh, 0, size);
    sh->stage = stage;
    sh->fail_involved = involved;
    atomic_init(&sh->refs, refs);
    sh->nranks = nranks;
    sh->timeout_ms = timeout_ms;
    sh->spin_iters = nranks <= online_cpus() ? SPIN_POLLS : 0;
    sh->name = name_copy;
    atomic_init(&sh->wake, 0);
    atomic_init(&sh->reduce_claimed, 0);
    atomic_init(&sh->reduce_done, 0);
    atomic_init(&sh->sleepers, 0);
    pthread_mutex_init(&sh->fail_mu, NULL);
    pthread_mutex_init(&sh->p2p_mu, NULL);
    sh->fail_kind = FAIL_NONE;
    for (int r = 0; r < nranks; r++) {
        atomic_init(&sh->slots[r].split_child, NULL);
        atomic_init(&sh->slots[r].arrivals, 0);
        atomic_init(&sh->slots[r].last_call, NO_CALL);
        atomic_init(&sh->slots[r].left, 0);
        atomic_init(&sh->slots[r].taken, 0);
    }
    return sh;
}

/* ---- the rendezvous (shs_comm_id_t), for this backend and the CUDA ones ---- */

shs_status_t shs__comm_thread_id_new(shs_comm_id_t **id, const shs__comm_iface_t *iface, int nranks, int timeout_ms,
                                     const char *name, const char *who) {
    if (!id) return shs_set_error(SHS_INVALID_ARG, "%s: id is NULL", who);
    *id = NULL;
    if (nranks < 1) return shs_set_error(SHS_INVALID_ARG, "%s: nranks %d < 1", who, nranks);
    shs_comm_id_t *out = calloc(1, sizeof *out);
    shared_t *sh = out ? shs__thread_shared_create(nranks, timeout_ms > 0 ? timeout_ms : SHS_COMM_DEFAULT_TIMEOUT_MS,
                                                   name ? name : "world", 1)
                       : NULL;
    shs__job_t *job = sh ? shs__job_create() : NULL;
    if (!job) {
        if (sh) shs__thread_shared_free(sh);
        free(out);
        return shs_set_error(SHS_HOST_OOM, "%s: out of host memory for %d ranks", who, nranks);
    }
    *out = (shs_comm_id_t){.iface = iface, .ctx = sh, .job = job};
    *id = out;
    return SHS_OK;
}

shs_status_t shs_comm_id_create(shs_comm_id_t **id, int nranks, int timeout_ms, const char *name) {
    return shs__comm_thread_id_new(id, &shs__comm_thread_iface, nranks, timeout_ms, name, "shs_comm_id_create");
}

static void thread_id_release(void *ctx) { shs__thread_shared_unref(ctx); }

/* Give `comm` rank `rank` of `sh`; the caller already holds the reference. */
shs_status_t shs__thread_attach(shs_comm_t *comm, shared_t *sh, int rank) {
    size_t srcs_off = (sizeof(rank_ctx_t) + 63) / 64 * 64;
    size_t dsts_off = srcs_off + ((size_t)sh->nranks * sizeof(void *) + 63) / 64 * 64;
    char *mem = aligned_alloc(64, dsts_off + ((size_t)sh->nranks * sizeof(void *) + 63) / 64 * 64);
    if (!mem) return shs_set_error(SHS_HOST_OOM, "rank %d: comm '%s': out of host memory", rank, sh->name);
    rank_ctx_t *ctx = (rank_ctx_t *)mem;
    ctx->sh = sh;
    ctx->arrivals = 0;
    ctx->posts = NULL;
    ctx->pairs = NULL;
    ctx->walk = NULL;
    ctx->posts_cap = 0;
    ctx->srcs = (const void **)(mem + srcs_off);
    ctx->dsts = (void **)(mem + dsts_off);
    comm->ctx = ctx;
    comm->rank = rank;
    comm->nranks = sh->nranks;
    comm->name = sh->name;
    return SHS_OK;
}

static shs_status_t thread_init_rank(shs_comm_t *comm, void *id_ctx, int rank) {
    shared_t *sh = id_ctx;
    if (rank < 0 || rank >= sh->nranks)
        return shs_set_error(SHS_INVALID_ARG, "shs_comm_init_rank: rank %d out of range [0, %d) for comm '%s'", rank,
                             sh->nranks, sh->name);
    int expected = 0;
    if (!atomic_compare_exchange_strong(&sh->slots[rank].taken, &expected, 1))
        return shs_set_error(SHS_INVALID_ARG, "shs_comm_init_rank: rank %d of comm '%s' is already taken", rank,
                             sh->name);
    atomic_fetch_add_explicit(&sh->refs, 1, memory_order_relaxed);
    shs_status_t s = shs__thread_attach(comm, sh, rank);
    if (s != SHS_OK) {
        atomic_store(&sh->slots[rank].taken, 0);
        shs__thread_shared_unref(sh);
    }
    return s;
}

void shs__thread_destroy(shs_comm_t *comm) {
    rank_ctx_t *ctx = comm->ctx;
    shs__thread_shared_unref(ctx->sh);
    free(ctx->posts);
    free(ctx->pairs);
    free(ctx->walk);
    free(ctx);
}

/* ---- barrier ----------------------------------------------------------
 *   post+check  every rank posts its call, barrier, compare calls. One
 *               barrier: the next call posts into the other parity.
 */
static shs_status_t thread_barrier(shs_comm_t *comm, const shs__call_t *call) {
    SHS_CHECK(shs__thread_begin(comm, call));
    return shs__thread_finish(comm, call, 0);
}

const shs__comm_iface_t shs__comm_thread_iface = {
    .name = "thread",
    .init_rank = thread_init_rank,
    .id_release = thread_id_release,
    .all_gather = shs__thread_all_gather,
    .reduce_scatter = shs__thread_reduce_scatter,
    .all_reduce = shs__thread_all_reduce,
    .broadcast = shs__thread_broadcast,
    .reduce = shs__thread_reduce,
    .barrier = thread_barrier,
    .split = shs__thread_split,
    .p2p = shs__thread_p2p,
    .abort = shs__thread_abort,
    .job_failed = shs__thread_job_failed,
    .destroy = shs__thread_destroy,
};

/* ---- the rendezvous, reused by the CUDA communicators (comm_impl.h) ---- */

shs_status_t shs__comm_thread_begin(shs_comm_t *tcomm, const shs__call_t *call) {
    return shs__thread_begin(tcomm, call);
}

const shs__call_t *shs__comm_thread_posted(const shs_comm_t *tcomm, int rank, const shs__call_t *call) {
    return POSTED(((rank_ctx_t *)tcomm->ctx)->sh, rank, call);
}

shs_status_t shs__comm_thread_finish(shs_comm_t *tcomm, const shs__call_t *call, int exit_barrier) {
    return shs__thread_finish(tcomm, call, exit_barrier);
}

shs_status_t shs__comm_thread_p2p(shs_comm_t *tcomm, const shs__call_t *calls, int n, shs__copy_fn copy) {
    return shs__thread_p2p(tcomm, calls, n, copy);
}
