/* thread_sync.c - the thread backend's sync core: per-rank barriers, the
 * call protocol (post, barrier, check ... exit), failure (abort, timeout,
 * mismatch) and its texts. The collectives (thread_*.c) are built on it.
 * What it is not: any data movement but the staging copy.
 *
 * FAILURE INVARIANTS (abort, timeout, mismatch can strike at any barrier):
 *   1. A barrier completes for every rank or for none. A rank returns from
 *      barrier k with SHS_OK only after seeing all N counters >= k. One that
 *      gives up does so only after making sure some counter can never reach
 *      k: it never arrived itself, or it poisoned (CAS from k-1) the counter
 *      of a rank that had not arrived, which then cannot arrive (timeout and
 *      failure alike: declare_timeout, give_up). If its CAS finds that every
 *      rank arrived meanwhile, the barrier is complete and it passes it.
 *   2. No call returns, in success or failure, while another rank can touch
 *      its buffers. Staged calls touch no other rank's buffers. A direct
 *      call's buffers are touched by others only after its entry barrier
 *      completed, so by (1) when it fails there, nobody touches them. When
 *      its exit barrier fails, every rank passed the entry barrier and so
 *      runs its data phase and then publishes `left` before it tries the
 *      exit barrier; the failing rank returns only once every rank's `left`
 *      reached its call (wait_peers_left). That wait is bounded: the ranks
 *      it waits for are past their entry barrier, doing a bounded copy or
 *      reduction with no wait in it; a rank that never arrived (the timeout
 *      case) never passed the entry barrier, so nobody waits for it.
 * The MPI and meta backends need neither: no rank there touches another's
 * buffers (comm_mpi.c's pending collectives after a failure are its own).
 */
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "comm/thread/thread_impl.h"
#include "shardsim/clock.h"

/* ---- small helpers ----------------------------------------------------- */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void futex_wait(_Atomic uint32_t *word, uint32_t expected, double seconds) {
#ifdef __linux__
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
#else
    (void)word; (void)expected;
    struct timespec ts = {0, seconds < 1e-4 ? (long)(seconds * 1e9) : 100000L};
    nanosleep(&ts, NULL);
#endif
}

static void futex_wake_all(_Atomic uint32_t *word) {
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
#endif
}

static uint64_t pack_call(uint64_t seq, shs_coll_op_t op, int done) {
    return seq << 8 | (uint64_t)op << 1 | (uint64_t)(done != 0);
}

/* ---- failure ----------------------------------------------------------- */

/* Publish the first failure and wake everyone. Caller holds fail_mu. */
static void fail_locked(shared_t *sh, fail_kind_t kind, int rank, uint64_t seq, shs_coll_op_t op) {
    sh->fail_kind = kind;
    sh->fail_rank = rank;
    sh->fail_seq = seq;
    sh->fail_op = op;
    atomic_fetch_or(&sh->wake, WAKE_FAILED);
    futex_wake_all(&sh->wake);
}

int shs__thread_fail(shared_t *sh, fail_kind_t kind, int rank, const shs__call_t *call, const char *detail,
                     const int *involved, int ninv) {
    pthread_mutex_lock(&sh->fail_mu);
    int first = sh->fail_kind == FAIL_NONE;
    if (first) {
        snprintf(sh->fail_detail, sizeof sh->fail_detail, "%s", detail);
        for (int k = 0; k < ninv; k++) sh->fail_involved[involved[k]] = 1;
        fail_locked(sh, kind, rank, call ? call->seq : 0, call ? call->op : SHS_OP_BARRIER);
    }
    pthread_mutex_unlock(&sh->fail_mu);
    return first;
}

void shs__thread_job_failed(shs_comm_t *comm, const char *detail) {
    shs__thread_fail(((rank_ctx_t *)comm->ctx)->sh, FAIL_JOB, -1, NULL, detail, NULL, 0);
}

void shs__thread_wake(shared_t *sh) {
    if (atomic_load(&sh->sleepers)) {
        atomic_fetch_add(&sh->wake, 2);
        futex_wake_all(&sh->wake);
    }
}

void shs__thread_sleep(shared_t *sh, uint32_t seen, double seconds) { futex_wait(&sh->wake, seen, seconds); }

void shs__thread_abort(shs_comm_t *comm, const char *reason) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    pthread_mutex_lock(&sh->fail_mu);
    if (sh->fail_kind == FAIL_NONE) {
        snprintf(sh->fail_detail, sizeof sh->fail_detail, "aborted by rank %d: %s", comm->rank, reason);
        fail_locked(sh, FAIL_ABORT, comm->rank, 0, SHS_OP_BARRIER);
    }
    pthread_mutex_unlock(&sh->fail_mu);
}

/* The status and text for a rank that found the communicator failed.
 * `waiting`: it was inside a barrier when the failure happened (as opposed
 * to arriving after it), which makes a timeout SHS_TIMEOUT, not SHS_ABORTED. */
shs_status_t shs__thread_failed_status(const shs_comm_t *comm, const shs__call_t *call, int waiting) {
    const shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    char prefix[256];
    shs__call_prefix(prefix, sizeof prefix, comm->rank, call, sh->name);
    switch (sh->fail_kind) {
    case FAIL_TIMEOUT:
        if (waiting) return shs_set_error(SHS_TIMEOUT, "%s%s", prefix, sh->fail_detail);
        return shs_set_error(SHS_ABORTED, "%scommunicator failed earlier (rank %d timed out in %s seq %llu): %s",
                             prefix, sh->fail_rank, shs_coll_op_name(sh->fail_op),
                             (unsigned long long)sh->fail_seq, sh->fail_detail);
    case FAIL_ABORT: return shs_set_error(SHS_ABORTED, "%s%s", prefix, sh->fail_detail);
    case FAIL_JOB: return shs_set_error(SHS_ABORTED, "%sthe job failed: %s", prefix, sh->fail_detail);
    case FAIL_MISMATCH:
        /* a point-to-point mismatch or cycle names the ranks it holds: they
         * fail with it as a collective's ranks do with theirs */
        if (waiting && sh->fail_involved[comm->rank]) return shs_set_error(SHS_MISMATCH, "rank %d: %s", comm->rank,
                                                                           sh->fail_detail);
        return shs_set_error(SHS_ABORTED, "%scommunicator failed earlier: %s", prefix, sh->fail_detail);
    default: return shs_set_error(SHS_ABORTED, "%scommunicator failed earlier: %s", prefix, sh->fail_detail);
    }
}

/* "timed out after 0.300 s waiting for ranks [3]; last calls: ranks [0-2]
 * all_reduce seq 7 (in progress); ranks [3] barrier seq 6 (completed)", as
 * seen by `rank`: missing are the ranks that entered fewer barriers. */
static void format_timeout(const shared_t *sh, int rank, char *d, size_t size) {
    int n = sh->nranks;
    size_t len = 0;
    shs__appendf(d, size, &len, "timed out after %.3f s waiting for ranks ", sh->timeout_ms / 1000.0);
    uint64_t *last = malloc((size_t)n * sizeof *last);
    unsigned char *in_set = calloc((size_t)n, 2), *printed = in_set ? in_set + n : NULL;
    if (!last || !in_set) {
        shs__appendf(d, size, &len, "(out of host memory listing them)");
        free(last);
        free(in_set);
        return;
    }
    uint64_t mine = atomic_load_explicit(&sh->slots[rank].arrivals, memory_order_relaxed) & ~POISONED;
    for (int j = 0; j < n; j++) {
        in_set[j] = (atomic_load_explicit(&sh->slots[j].arrivals, memory_order_relaxed) & ~POISONED) < mine;
        last[j] = atomic_load_explicit(&sh->slots[j].last_call, memory_order_relaxed);
    }
    shs__append_rank_set(d, size, &len, in_set, n);
    shs__appendf(d, size, &len, "; last calls:");
    for (int j = 0; j < n; j++) {
        if (printed[j]) continue;
        for (int k = 0; k < n; k++) in_set[k] = k >= j && last[k] == last[j];
        for (int k = j; k < n; k++) printed[k] |= in_set[k];
        shs__appendf(d, size, &len, "%s ranks ", j ? ";" : "");
        shs__append_rank_set(d, size, &len, in_set, n);
        if (last[j] == NO_CALL) shs__appendf(d, size, &len, " no call yet");
        else
            shs__appendf(d, size, &len, " %s seq %llu (%s)", shs_coll_op_name((shs_coll_op_t)((last[j] >> 1) & 0x7f)),
                    (unsigned long long)(last[j] >> 8), last[j] & 1 ? "completed" : "in progress");
    }
    free(last);
    free(in_set);
}

/* Called by a rank whose wait in barrier k ran out while rank `missing` had
 * not arrived (its counter read k-1). It poisons that rank's counter with a
 * CAS that fails only if the rank arrived meanwhile, so barrier k either
 * completes for every rank or for none: nobody can see all N counters reach
 * k once one of them is poisoned, and the missing rank's own arrival (a CAS
 * from k-1) then fails. The failure record is complete before WAKE_FAILED can
 * be seen; when the CAS fails nothing is recorded and the caller waits on. */
static void declare_timeout(const shs_comm_t *comm, const shs__call_t *call, uint64_t k, int missing) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    pthread_mutex_lock(&sh->fail_mu);
    uint64_t expected = k - 1;
    if (sh->fail_kind == FAIL_NONE &&
        atomic_compare_exchange_strong(&sh->slots[missing].arrivals, &expected, (k - 1) | POISONED)) {
        format_timeout(sh, comm->rank, sh->fail_detail, sizeof sh->fail_detail);
        fail_locked(sh, FAIL_TIMEOUT, comm->rank, call->seq, call->op);
    }
    pthread_mutex_unlock(&sh->fail_mu);
}

/* ---- barrier ----------------------------------------------------------- */

/* Have all ranks entered barrier k? Ranks [0, *next) are known to have (a
 * counter never goes back within a barrier), so each poll starts at the
 * first one not seen yet; on 0, *next is that rank. A counter poisoned at
 * k-1 stays below k for good; one poisoned later (at a barrier after k that
 * rank j did not enter) still counts for k. */
static int all_arrived(const shared_t *sh, uint64_t k, int *next) {
    for (int j = *next; j < sh->nranks; j++) {
        uint64_t a = atomic_load_explicit(&sh->slots[j].arrivals, memory_order_acquire);
        if ((a & ~POISONED) < k) {
            *next = j;
            return 0;
        }
    }
    return 1;
}

int shs__thread_failed(const shared_t *sh) {
    return atomic_load_explicit(&sh->wake, memory_order_acquire) & WAKE_FAILED;
}

/* Called by a rank that entered barrier k, saw ranks [0, next) enter it too
 * and then found the communicator failed. Seals barrier k (invariant 1 at
 * the top): poisons the counter of the first rank that has not entered it
 * (the CAS of declare_timeout: it fails only if that rank entered meanwhile,
 * then the next one is tried), so nobody can pass barrier k; if every rank
 * entered before it could be sealed, barrier k is complete and this rank
 * passes it (SHS_OK) like the others; the failure shows at its next one. */
static shs_status_t give_up(shs_comm_t *comm, const shs__call_t *call, uint64_t k, int next) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    for (int j = next; j < sh->nranks; j++) {
        uint64_t a = k - 1;
        /* a rank's counter reads k-1 (not entered), k or more (entered), or
         * (k-1) | POISONED (sealed by someone else) */
        if (atomic_compare_exchange_strong(&sh->slots[j].arrivals, &a, a | POISONED) || (a & ~POISONED) < k)
            return shs__thread_failed_status(comm, call, 1);
    }
    return SHS_OK;
}

/* Rank r enters barrier k by moving its own counter from k-1 to k (a CAS:
 * it fails only if a waiter timed out on r and poisoned it), wakes sleepers
 * if there are any, and waits until every counter reads >= k. Waiters poll:
 * spin briefly (unless ranks outnumber cores: then the ranks they wait for
 * need the core), yield for up to YIELD_SECONDS, then FUTEX_WAIT on the wake
 * word with the remaining timeout. The sleeper count and the counters form a
 * Dekker pair (both sides seq_cst: store own counter then read sleepers;
 * count self a sleeper, read the wake word, then read the counters), so an
 * arrival is never missed by a sleeper. */
shs_status_t shs__thread_barrier_wait(shs_comm_t *comm, const shs__call_t *call) {
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    if (shs__thread_failed(sh)) return shs__thread_failed_status(comm, call, 0);
    uint64_t k = ++ctx->arrivals, expected = k - 1;
    if (!atomic_compare_exchange_strong(&sh->slots[comm->rank].arrivals, &expected, k)) {
        /* poisoned: a waiter timed out on this rank; its record is written under fail_mu */
        pthread_mutex_lock(&sh->fail_mu);
        pthread_mutex_unlock(&sh->fail_mu);
        return shs__thread_failed_status(comm, call, 0);
    }
    if (atomic_load(&sh->sleepers)) {
        atomic_fetch_add(&sh->wake, 2);
        futex_wake_all(&sh->wake);
    }
    int next = 0;
    if (all_arrived(sh, k, &next)) return SHS_OK;

    for (int i = 0; i < sh->spin_iters; i++) {
        cpu_relax();
        if (all_arrived(sh, k, &next)) return SHS_OK;
        if (shs__thread_failed(sh)) return give_up(comm, call, k, next);
    }
    double start = shs_now_seconds();
    while (shs_now_seconds() - start < YIELD_SECONDS) {
        sched_yield();
        if (all_arrived(sh, k, &next)) return SHS_OK;
        if (shs__thread_failed(sh)) return give_up(comm, call, k, next);
    }
    double deadline = start + sh->timeout_ms / 1000.0;
    int done = 0;
    atomic_fetch_add(&sh->sleepers, 1);
    atomic_thread_fence(memory_order_seq_cst); /* the counters below are read after the count is seen */
    for (;;) {
        uint32_t w = atomic_load(&sh->wake);
        if (all_arrived(sh, k, &next)) { done = 1; break; }
        if (w & WAKE_FAILED) break;
        double left = deadline - shs_now_seconds();
        if (left <= 0) declare_timeout(comm, call, k, next); /* then: failed, or rank `next` arrived */
        else futex_wait(&sh->wake, w, left);
    }
    atomic_fetch_sub(&sh->sleepers, 1);
    return done ? SHS_OK : give_up(comm, call, k, next);
}

/* ---- call protocol: post, barrier, check ... exit ---------------------- */

/* shs__check_calls' view of the posted calls of one parity. */
typedef struct {
    const shared_t *sh;
    const shs__call_t *call;
} posted_view_t;

static const shs__call_t *posted_call(const void *view, int rank, shs__call_t *buf) {
    (void)buf;
    const posted_view_t *v = view;
    const shs__call_t *call = v->call; /* POSTED's parameter is named after the slot's member */
    return POSTED(v->sh, rank, call);
}

/* Every rank runs this on the same posted calls, so all reach the same verdict. */
static shs_status_t check_calls(shs_comm_t *comm, const shs__call_t *call) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    posted_view_t view = {sh, call};
    char detail[FAIL_TEXT];
    if (shs__check_calls(sh->nranks, posted_call, &view, sh->name, detail, sizeof detail)) return SHS_OK;

    pthread_mutex_lock(&sh->fail_mu);
    if (sh->fail_kind == FAIL_NONE) {
        memcpy(sh->fail_detail, detail, sizeof detail);
        fail_locked(sh, FAIL_MISMATCH, comm->rank, call->seq, call->op);
    }
    pthread_mutex_unlock(&sh->fail_mu);
    return shs_set_error(SHS_MISMATCH, "rank %d: %s", comm->rank, detail);
}

/* Post this rank's call (and copy `stage_bytes` of `stage_src` into its
 * staging buffer), wait for all, compare all calls. After it returns SHS_OK
 * the slots and staging buffers of this parity hold every rank's call and
 * data until the next call's first barrier completes. */
shs_status_t shs__thread_begin_staged(shs_comm_t *comm, const shs__call_t *call, const void *stage_src,
                                      size_t stage_bytes) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    slot_t *me = &sh->slots[comm->rank];
    atomic_store_explicit(&me->last_call, pack_call(call->seq, call->op, 0), memory_order_relaxed);
    /* A failed communicator may still have ranks reading the slots (mismatch
     * verdict), so slot and stage are written only while it is healthy. */
    if (shs__thread_failed(sh)) return shs__thread_failed_status(comm, call, 0);
    me->call[PARITY(call)] = *call;
    if (stage_bytes) memcpy(STAGE(sh, comm->rank, call), stage_src, stage_bytes);
    SHS_CHECK(shs__thread_barrier_wait(comm, call));
    return check_calls(comm, call);
}

shs_status_t shs__thread_begin(shs_comm_t *comm, const shs__call_t *call) {
    return shs__thread_begin_staged(comm, call, NULL, 0);
}

/* After a failed exit barrier of `call`: wait until every rank has left its
 * data phase (invariant 2 at the top), so none touches this rank's buffers
 * any more. Bounded: every rank passed the entry barrier of `call`. The
 * acquire pairs with each rank's release of `left`, so their copies into and
 * out of this rank's buffers happen before this rank reuses or frees them. */
static void wait_peers_left(const shared_t *sh, const shs__call_t *call) {
    for (int j = 0; j < sh->nranks; j++)
        while (atomic_load_explicit(&sh->slots[j].left, memory_order_acquire) <= call->seq) sched_yield();
}

/* End a call: for direct calls (`exit_barrier`), publish `left` and pass the
 * exit barrier, or on its failure wait for the others to leave too. */
shs_status_t shs__thread_finish(shs_comm_t *comm, const shs__call_t *call, int exit_barrier) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    slot_t *me = &sh->slots[comm->rank];
    if (exit_barrier) {
        atomic_store_explicit(&me->left, call->seq + 1, memory_order_release);
        shs_status_t s = shs__thread_barrier_wait(comm, call);
        if (s != SHS_OK) {
            wait_peers_left(sh, call);
            return s;
        }
    }
    atomic_store_explicit(&me->last_call, pack_call(call->seq, call->op, 1), memory_order_relaxed);
    return SHS_OK;
}
