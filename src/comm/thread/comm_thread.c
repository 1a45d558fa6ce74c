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
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "comm/comm_impl.h"
#include "shardsim/clock.h"

#define WAKE_FAILED 1u         /* low bit of the wake word: the communicator failed */
#define POISONED (UINT64_C(1) << 63) /* in a rank's arrival counter: a waiter timed out on it */
#define SPIN_POLLS 256         /* pause-loop polls before yielding (only when ranks <= cores) */
#define YIELD_SECONDS 100e-6   /* then sched_yield polls for this long before sleeping in the futex
                                * (a futex wake-up costs tens of us on a VM; a yield ~1 us) */
#define STAGE_BYTES SHS__STAGE_BYTES               /* thresholds: see comm_impl.h */
#define ONE_SHOT_MAX_BYTES SHS__ONE_SHOT_MAX_BYTES
#define STREAM_MIN_BYTES SHS__STREAM_MIN_BYTES
#define FAIL_TEXT 768
#define NO_CALL UINT64_MAX

typedef enum { FAIL_NONE, FAIL_MISMATCH, FAIL_TIMEOUT, FAIL_ABORT } fail_kind_t;

typedef struct shared shared_t;

/* Three kinds of cache line per rank, so that the line every other rank
 * polls (arrivals) is written once per barrier and by nobody else (except
 * once, to poison it, by a rank that timed out waiting for this one). */
typedef struct {
    alignas(64) shs__call_t call[2];  /* by parity; written by its rank before the entry barrier */
    alignas(64) _Atomic uint64_t arrivals; /* barriers this rank has entered (| POISONED) */
    alignas(64) _Atomic uint64_t last_call; /* pack_call(seq, op, done) or NO_CALL */
    _Atomic uint64_t left;            /* seq + 1 of the last direct call whose data phase is done */
    _Atomic(shared_t *) split_child;  /* split: the leader's new shared state, or NULL */
    atomic_int taken;                 /* a handle joined as this rank */
} slot_t;

struct shared {
    atomic_int refs;                  /* the id + one per rank handle */
    int nranks;
    int timeout_ms;
    int spin_iters;                   /* 0 when ranks outnumber cores */
    char *name;
    char *stage;                      /* (nranks + 1, 2, STAGE_BYTES): "rank" nranks holds
                                       * the reduced result of a shared one-shot all_reduce */
    /* Shared one-shot all_reduce: seq + 1 of the last call whose reduction a
     * rank claimed, and of the last whose result is in the result stage. */
    alignas(64) _Atomic uint64_t reduce_claimed;
    alignas(64) _Atomic uint64_t reduce_done;
    /* Read-mostly line: written only when someone sleeps or on failure. */
    alignas(64) _Atomic uint32_t wake;      /* futex word: 2 * wake-ups | WAKE_FAILED */
    _Atomic uint32_t sleepers;              /* ranks in or entering FUTEX_WAIT */
    /* Failure record: written under fail_mu before WAKE_FAILED is set, read
     * by anyone who has seen WAKE_FAILED, never changed after that. */
    pthread_mutex_t fail_mu;
    fail_kind_t fail_kind;
    int fail_rank;
    uint64_t fail_seq;
    shs_coll_op_t fail_op;
    char fail_detail[FAIL_TEXT];
    slot_t slots[];                   /* (nranks) */
};

/* One rank's backend state (comm->ctx). */
typedef struct {
    shared_t *sh;
    uint64_t arrivals;                /* mirror of this rank's slot counter */
    const void **srcs;                /* (nranks) source pointers for shs__reduce */
    void **dsts;                      /* (nranks) destination pointers */
} rank_ctx_t;

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

static int online_cpus(void) {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static uint64_t pack_call(uint64_t seq, shs_coll_op_t op, int done) {
    return seq << 8 | (uint64_t)op << 1 | (uint64_t)(done != 0);
}


static void copy_bytes(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src) memcpy(dst, src, bytes);
}

/* ---- shared state lifetime ------------------------------------------- */

static void shared_free(shared_t *sh) {
    pthread_mutex_destroy(&sh->fail_mu);
    free(sh->stage);
    free(sh->name);
    free(sh);
}

static void shared_unref(shared_t *sh) {
    if (atomic_fetch_sub_explicit(&sh->refs, 1, memory_order_acq_rel) == 1) shared_free(sh);
}

static shared_t *shared_create(int nranks, int timeout_ms, const char *name, int refs) {
    size_t size = sizeof(shared_t) + (size_t)nranks * sizeof(slot_t);
    size = (size + 63) / 64 * 64;
    shared_t *sh = aligned_alloc(64, size);
    char *name_copy = strdup(name);
    char *stage = aligned_alloc(64, ((size_t)nranks + 1) * 2 * STAGE_BYTES);
    if (!sh || !name_copy || !stage) { free(sh); free(name_copy); free(stage); return NULL; }
    memset(sh, 0, size);
    sh->stage = stage;
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

shs_status_t shs__comm_thread_id_create(void **ctx, int nranks, int timeout_ms, const char *name) {
    shared_t *sh = shared_create(nranks, timeout_ms, name, 1);
    if (!sh) return shs_set_error(SHS_HOST_OOM, "shs_comm_id_create: out of host memory for %d ranks", nranks);
    *ctx = sh;
    return SHS_OK;
}

static void thread_id_release(void *ctx) { shared_unref(ctx); }

/* Give `comm` rank `rank` of `sh`; the caller already holds the reference. */
static shs_status_t attach(shs_comm_t *comm, shared_t *sh, int rank) {
    size_t srcs_off = (sizeof(rank_ctx_t) + 63) / 64 * 64;
    size_t dsts_off = srcs_off + ((size_t)sh->nranks * sizeof(void *) + 63) / 64 * 64;
    char *mem = aligned_alloc(64, dsts_off + ((size_t)sh->nranks * sizeof(void *) + 63) / 64 * 64);
    if (!mem) return shs_set_error(SHS_HOST_OOM, "rank %d: comm '%s': out of host memory", rank, sh->name);
    rank_ctx_t *ctx = (rank_ctx_t *)mem;
    ctx->sh = sh;
    ctx->arrivals = 0;
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
    shs_status_t s = attach(comm, sh, rank);
    if (s != SHS_OK) {
        atomic_store(&sh->slots[rank].taken, 0);
        shared_unref(sh);
    }
    return s;
}

static void thread_destroy(shs_comm_t *comm) {
    rank_ctx_t *ctx = comm->ctx;
    shared_unref(ctx->sh);
    free(ctx);
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

static void thread_abort(shs_comm_t *comm, const char *reason) {
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
static shs_status_t failed_status(const shs_comm_t *comm, const shs__call_t *call, int waiting) {
    const shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    char prefix[192];
    snprintf(prefix, sizeof prefix, "rank %d: %s seq %llu on comm '%s': ", comm->rank, shs_coll_op_name(call->op),
             (unsigned long long)call->seq, sh->name);
    switch (sh->fail_kind) {
    case FAIL_TIMEOUT:
        if (waiting) return shs_set_error(SHS_TIMEOUT, "%s%s", prefix, sh->fail_detail);
        return shs_set_error(SHS_ABORTED, "%scommunicator failed earlier (rank %d timed out in %s seq %llu): %s",
                             prefix, sh->fail_rank, shs_coll_op_name(sh->fail_op),
                             (unsigned long long)sh->fail_seq, sh->fail_detail);
    case FAIL_ABORT: return shs_set_error(SHS_ABORTED, "%s%s", prefix, sh->fail_detail);
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

static int failed(const shared_t *sh) {
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
            return failed_status(comm, call, 1);
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
static shs_status_t barrier(shs_comm_t *comm, const shs__call_t *call) {
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    if (failed(sh)) return failed_status(comm, call, 0);
    uint64_t k = ++ctx->arrivals, expected = k - 1;
    if (!atomic_compare_exchange_strong(&sh->slots[comm->rank].arrivals, &expected, k)) {
        /* poisoned: a waiter timed out on this rank; its record is written under fail_mu */
        pthread_mutex_lock(&sh->fail_mu);
        pthread_mutex_unlock(&sh->fail_mu);
        return failed_status(comm, call, 0);
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
        if (failed(sh)) return give_up(comm, call, k, next);
    }
    double start = shs_now_seconds();
    while (shs_now_seconds() - start < YIELD_SECONDS) {
        sched_yield();
        if (all_arrived(sh, k, &next)) return SHS_OK;
        if (failed(sh)) return give_up(comm, call, k, next);
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

#define PARITY(call) ((int)((call)->seq & 1))
#define POSTED(sh, j, call) (&(sh)->slots[(j)].call[PARITY(call)])
/* Rank j's staging buffer for `call`. */
#define STAGE(sh, j, call) ((sh)->stage + ((size_t)(j) * 2 + (size_t)PARITY(call)) * STAGE_BYTES)

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
static shs_status_t begin_staged(shs_comm_t *comm, const shs__call_t *call, const void *stage_src,
                                 size_t stage_bytes) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    slot_t *me = &sh->slots[comm->rank];
    atomic_store_explicit(&me->last_call, pack_call(call->seq, call->op, 0), memory_order_relaxed);
    /* A failed communicator may still have ranks reading the slots (mismatch
     * verdict), so slot and stage are written only while it is healthy. */
    if (failed(sh)) return failed_status(comm, call, 0);
    me->call[PARITY(call)] = *call;
    if (stage_bytes) memcpy(STAGE(sh, comm->rank, call), stage_src, stage_bytes);
    SHS_CHECK(barrier(comm, call));
    return check_calls(comm, call);
}

static shs_status_t begin(shs_comm_t *comm, const shs__call_t *call) { return begin_staged(comm, call, NULL, 0); }

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
static shs_status_t finish(shs_comm_t *comm, const shs__call_t *call, int exit_barrier) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    slot_t *me = &sh->slots[comm->rank];
    if (exit_barrier) {
        atomic_store_explicit(&me->left, call->seq + 1, memory_order_release);
        shs_status_t s = barrier(comm, call);
        if (s != SHS_OK) {
            wait_peers_left(sh, call);
            return s;
        }
    }
    atomic_store_explicit(&me->last_call, pack_call(call->seq, call->op, 1), memory_order_relaxed);
    return SHS_OK;
}

/* Streaming stores for outputs that cannot stay in cache anyway. */
static int use_stream(size_t output_bytes_all_ranks) { return output_bytes_all_ranks > STREAM_MIN_BYTES; }

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
static shs_status_t thread_all_gather(shs_comm_t *comm, const shs__call_t *call) {
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    int n = sh->nranks;
    size_t block = call->count * shs_dtype_size(call->dtype);
    if (block <= STAGE_BYTES) {
        SHS_CHECK(begin_staged(comm, call, call->sendbuf, block));
        for (int j = 0; j < n; j++) copy_bytes((char *)call->recvbuf + (size_t)j * block, STAGE(sh, j, call), block);
        return finish(comm, call, 0);
    }
    SHS_CHECK(begin(comm, call));
    for (int j = 0; j < n; j++) ctx->dsts[j] = (char *)POSTED(sh, j, call)->recvbuf + (size_t)comm->rank * block;
    shs__copy_multi(ctx->dsts, n, call->sendbuf, block, use_stream(block * (size_t)n * (size_t)n));
    return finish(comm, call, 1);
}

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
static shs_status_t thread_reduce_scatter(shs_comm_t *comm, const shs__call_t *call) {
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    int n = sh->nranks, r = comm->rank;
    size_t block = call->count * shs_dtype_size(call->dtype);
    int staged = block * (size_t)n <= STAGE_BYTES;
    /* ring order: block r's chain is ranks r+1, ..., r (mod N) */
    int first = call->order == SHS_REDUCE_ORDER_RING ? r + 1 : 0;
    SHS_CHECK(begin_staged(comm, call, call->sendbuf, staged ? block * (size_t)n : 0));
    if (block) {
        for (int k = 0; k < n; k++) {
            int j = (first + k) % n;
            ctx->srcs[k] = (staged ? STAGE(sh, j, call) : (const char *)POSTED(sh, j, call)->sendbuf) + (size_t)r * block;
        }
        shs__reduce_multi(&call->recvbuf, 1, ctx->srcs, n, call->count, call->dtype, call->redop,
                          use_stream(block * (size_t)n));
    }
    return finish(comm, call, !staged);
}

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
 * begin_staged: redundant on every rank, or shared when ranks outnumber cores. */
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
            if (failed(sh)) return failed_status(comm, call, 1);
            sched_yield();
        }
    }
    copy_bytes(call->recvbuf, result, call->count * shs_dtype_size(call->dtype));
    return SHS_OK;
}

static shs_status_t thread_all_reduce(shs_comm_t *comm, const shs__call_t *call) {
    if (call->order == SHS_REDUCE_ORDER_RING) return ring_all_reduce(comm, call);
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    int n = sh->nranks, r = comm->rank;
    size_t esize = shs_dtype_size(call->dtype), bytes = call->count * esize;

    if (bytes <= STAGE_BYTES && bytes * (size_t)n <= ONE_SHOT_MAX_BYTES) {
        SHS_CHECK(begin_staged(comm, call, call->sendbuf, bytes));
        if (bytes) SHS_CHECK(one_shot_reduce(comm, call));
        return finish(comm, call, 0);
    }

    SHS_CHECK(begin(comm, call));
    size_t off = shs__chunk_start(call->count, n, r), len = shs__chunk_start(call->count, n, r + 1) - off;
    if (len) {
        for (int j = 0; j < n; j++) {
            ctx->srcs[j] = (const char *)POSTED(sh, j, call)->sendbuf + off * esize;
            ctx->dsts[j] = (char *)POSTED(sh, j, call)->recvbuf + off * esize;
        }
        shs__reduce_multi(ctx->dsts, n, ctx->srcs, n, len, call->dtype, call->redop,
                          use_stream(bytes * (size_t)n));
    }
    return finish(comm, call, 1);
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
        SHS_CHECK(begin_staged(comm, call, call->sendbuf, bytes));
        if (bytes) SHS_CHECK(one_shot_reduce(comm, call));
        return finish(comm, call, 0);
    }

    SHS_CHECK(begin(comm, call));
    shs__ring_chunk(call->count, n, r, &off, &len);
    if (len) {
        for (int k = 0; k < n; k++) {
            ctx->srcs[k] = (const char *)POSTED(sh, (r + 1 + k) % n, call)->sendbuf + off * esize;
            ctx->dsts[k] = (char *)POSTED(sh, k, call)->recvbuf + off * esize;
        }
        shs__reduce_multi(ctx->dsts, n, ctx->srcs, n, len, call->dtype, call->redop,
                          use_stream(bytes * (size_t)n));
    }
    return finish(comm, call, 1);
}

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
static shs_status_t thread_broadcast(shs_comm_t *comm, const shs__call_t *call) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    size_t bytes = call->count * shs_dtype_size(call->dtype);
    int staged = bytes <= STAGE_BYTES, is_root = comm->rank == call->root;
    SHS_CHECK(begin_staged(comm, call, call->sendbuf, staged && is_root ? bytes : 0));
    if (staged) {
        copy_bytes(call->recvbuf, is_root ? call->sendbuf : STAGE(sh, call->root, call), bytes);
        return finish(comm, call, 0);
    }
    /* libc memcpy, not streaming stores: faster for this one large copy per
     * rank (make bench: 0.7-0.85x the naive design with SSE2 streaming
     * stores at >= 16 MiB, about 1x with memcpy, which the naive design uses) */
    copy_bytes(call->recvbuf, POSTED(sh, call->root, call)->sendbuf, bytes);
    return finish(comm, call, 1);
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
static shs_status_t thread_reduce(shs_comm_t *comm, const shs__call_t *call) {
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    int n = sh->nranks, r = comm->rank;
    size_t esize = shs_dtype_size(call->dtype), bytes = call->count * esize;
    if (bytes <= STAGE_BYTES) {
        SHS_CHECK(begin_staged(comm, call, call->sendbuf, bytes));
        if (r == call->root && bytes) {
            for (int j = 0; j < n; j++) ctx->srcs[j] = STAGE(sh, j, call);
            shs__reduce(call->recvbuf, ctx->srcs, n, call->count, call->dtype, call->redop);
        }
        return finish(comm, call, 0);
    }
    SHS_CHECK(begin(comm, call));
    size_t off = shs__chunk_start(call->count, n, r), len = shs__chunk_start(call->count, n, r + 1) - off;
    if (len) {
        for (int j = 0; j < n; j++) ctx->srcs[j] = (const char *)POSTED(sh, j, call)->sendbuf + off * esize;
        shs__reduce((char *)POSTED(sh, call->root, call)->recvbuf + off * esize, ctx->srcs, n, len, call->dtype,
                    call->redop);
    }
    return finish(comm, call, 1);
}

/* ---- barrier ----------------------------------------------------------
 *   post+check  every rank posts its call, barrier, compare calls. One
 *               barrier: the next call posts into the other parity.
 */
static shs_status_t thread_barrier(shs_comm_t *comm, const shs__call_t *call) {
    SHS_CHECK(begin(comm, call));
    return finish(comm, call, 0);
}

/* ---- split ------------------------------------------------------------
 * Like ncclCommSplit. A color's members are the ranks posting that color,
 * ranked by (key, parent rank); its leader is the member of lowest parent rank.
 *   post+check  every rank posts (color, key), barrier, compare calls.
 *   create      each leader builds the child's shared state holding one
 *               reference per member and posts it in its slot; barrier.
 *   attach      each member takes its reference through a new handle.
 *   exit        barrier: leaders' slots stay readable until all attached.
 * If the create barrier fails nobody attached and the leader frees the child;
 * if the exit barrier fails every member drops its new handle.
 */
static shs_status_t thread_split(shs_comm_t *comm, const shs__call_t *call, shs_comm_t **newcomm) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    int n = sh->nranks, r = comm->rank, color = call->color;
    SHS_CHECK(begin(comm, call));

    int leader = -1, members = 0, newrank = 0;
    if (color != SHS_SPLIT_NOCOLOR) {
        for (int j = 0; j < n; j++) {
            const shs__call_t *c = POSTED(sh, j, call);
            if (c->color != color) continue;
            if (leader < 0) leader = j;
            members++;
            if (c->key < call->key || (c->key == call->key && j < r)) newrank++;
        }
    }
    shared_t *child = NULL;
    if (leader == r) {
        char name[256];
        snprintf(name, sizeof name, "%s/%d", sh->name, color);
        child = shared_create(members, sh->timeout_ms, name, members);
        atomic_store_explicit(&sh->slots[r].split_child, child, memory_order_release);
    }
    shs_status_t s = barrier(comm, call);
    if (s != SHS_OK) {
        if (child) shared_free(child);
        return s;
    }

    shs_comm_t *mine = NULL;
    shs_status_t attach_status = SHS_OK;
    if (leader >= 0) {
        child = atomic_load_explicit(&sh->slots[leader].split_child, memory_order_acquire);
        if (!child) {
            attach_status = shs_set_error(SHS_HOST_OOM, "rank %d: split seq %llu on comm '%s': out of host memory "
                                          "creating the child for color %d", r, (unsigned long long)call->seq,
                                          sh->name, color);
        } else if (!(mine = shs__comm_new(&shs__comm_thread_iface))) {
            shared_unref(child);
            attach_status = shs_set_error(SHS_HOST_OOM, "rank %d: split seq %llu on comm '%s': out of host memory",
                                          r, (unsigned long long)call->seq, sh->name);
        } else {
            atomic_store(&child->slots[newrank].taken, 1);
            attach_status = attach(mine, child, newrank);
            if (attach_status != SHS_OK) {
                free(mine);
                mine = NULL;
                shared_unref(child);
            }
        }
    }
    s = finish(comm, call, 1);
    if (s == SHS_OK) s = attach_status;
    if (s != SHS_OK) {
        if (mine) {
            thread_destroy(mine);
            free(mine);
        }
        return s;
    }
    *newcomm = mine;
    return SHS_OK;
}

const shs__comm_iface_t shs__comm_thread_iface = {
    .name = "thread",
    .init_rank = thread_init_rank,
    .id_release = thread_id_release,
    .all_gather = thread_all_gather,
    .reduce_scatter = thread_reduce_scatter,
    .all_reduce = thread_all_reduce,
    .broadcast = thread_broadcast,
    .reduce = thread_reduce,
    .barrier = thread_barrier,
    .split = thread_split,
    .abort = thread_abort,
    .destroy = thread_destroy,
};

/* ---- the rendezvous, reused by the CUDA communicators (comm_impl.h) ---- */

shs_status_t shs__comm_thread_begin(shs_comm_t *tcomm, const shs__call_t *call) { return begin(tcomm, call); }

const shs__call_t *shs__comm_thread_posted(const shs_comm_t *tcomm, int rank, const shs__call_t *call) {
    return POSTED(((rank_ctx_t *)tcomm->ctx)->sh, rank, call);
}

shs_status_t shs__comm_thread_finish(shs_comm_t *tcomm, const shs__call_t *call, int exit_barrier) {
    return finish(tcomm, call, exit_barrier);
}
