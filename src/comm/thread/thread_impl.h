/* thread_impl.h - private to src/comm/thread/: the thread backend's shared
 * state (slots, stages, failure record), its encodings and the sync core's
 * entry points (thread_sync.c) that the per-collective files build on.
 * The vocabulary (slot, parity, stage, block, chunk, phase, direct, left) is
 * defined in comm_thread.c; the failure invariants in thread_sync.c.
 * What it is not: an interface for other backends (comm_impl.h is that).
 */
#ifndef SHARDSIM_THREAD_IMPL_H
#define SHARDSIM_THREAD_IMPL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "comm/comm_impl.h"

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

typedef enum { FAIL_NONE, FAIL_MISMATCH, FAIL_TIMEOUT, FAIL_ABORT, FAIL_JOB } fail_kind_t;

typedef struct shared shared_t;

/* One of a rank's point-to-point calls while it is posted (thread_p2p.c). */
typedef struct {
    shs__call_t call;
    _Atomic int state;                /* POST_OPEN, _CLAIMED, _DONE, _WITHDRAWN (thread_p2p.c) */
} p2p_post_t;

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
    /* Under p2p_mu: the rank's posted point-to-point calls (NULL: none) and
     * the sequence number of its next collective when it posted them. */
    p2p_post_t *p2p_posts;
    int p2p_n;
    uint64_t p2p_coll_seq;
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
    unsigned char *fail_involved;     /* (nranks) a point-to-point mismatch's or cycle's ranks:
                                       * they return SHS_MISMATCH, not SHS_ABORTED */
    pthread_mutex_t p2p_mu;           /* the slots' p2p fields and every post's claim */
    slot_t slots[];                   /* (nranks) */
};

/* One rank's backend state (comm->ctx). */
typedef struct {
    shared_t *sh;
    uint64_t arrivals;                /* mirror of this rank's slot counter */
    const void **srcs;                /* (nranks) source pointers for shs__reduce */
    void **dsts;                      /* (nranks) destination pointers */
    p2p_post_t *posts;                /* (posts_cap) this rank's posted calls (thread_p2p.c) */
    void **pairs;                     /* (2 posts_cap) the messages it copies: send, recv posts */
    int *walk;                        /* (3 nranks) the cycle search's state */
    int posts_cap;
} rank_ctx_t;

#define PARITY(call) ((int)((call)->seq & 1))
#define POSTED(sh, j, call) (&(sh)->slots[(j)].call[PARITY(call)])
/* Rank j's staging buffer for `call`. */
#define STAGE(sh, j, call) ((sh)->stage + ((size_t)(j) * 2 + (size_t)PARITY(call)) * STAGE_BYTES)

static inline void shs__thread_copy_bytes(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src) memcpy(dst, src, bytes);
}

/* Streaming stores for outputs that cannot stay in cache anyway. */
static inline int shs__thread_use_stream(size_t output_bytes_all_ranks) {
    return output_bytes_all_ranks > STREAM_MIN_BYTES;
}

/* ---- shared state lifetime (comm_thread.c) ---- */
/* A shared state for `nranks` ranks holding `refs` references, or NULL. */
shared_t *shs__thread_shared_create(int nranks, int timeout_ms, const char *name, int refs);
void shs__thread_shared_free(shared_t *sh);
void shs__thread_shared_unref(shared_t *sh);
/* Give `comm` rank `rank` of `sh`; the caller already holds the reference. */
shs_status_t shs__thread_attach(shs_comm_t *comm, shared_t *sh, int rank);
void shs__thread_destroy(shs_comm_t *comm);

/* ---- the sync core (thread_sync.c) ---- */
/* Is the communicator failed (the wake word's WAKE_FAILED bit)? */
int shs__thread_failed(const shared_t *sh);
/* Record the communicator's first failure: `kind`, by `rank` in `call`,
 * text `detail`, the ranks involved[0 .. ninv) (a point-to-point mismatch
 * or cycle: they return SHS_MISMATCH); wake everyone. Returns 1 if this was
 * the first failure (a later one changes nothing). */
int shs__thread_fail(shared_t *sh, fail_kind_t kind, int rank, const shs__call_t *call, const char *detail,
                     const int *involved, int ninv);
/* Wake every sleeper (after a change some rank may wait for). */
void shs__thread_wake(shared_t *sh);
/* Sleep on the wake word while it still reads `seen`, at most `seconds`. */
void shs__thread_sleep(shared_t *sh, uint32_t seen, double seconds);

/* The status and text for a rank that found the communicator failed;
 * `waiting`: it was inside a barrier when the failure happened. */
shs_status_t shs__thread_failed_status(const shs_comm_t *comm, const shs__call_t *call, int waiting);
/* Enter the next barrier and wait for every rank (or fail: SHS_TIMEOUT,
 * SHS_ABORTED), with invariant 1 of thread_sync.c. */
shs_status_t shs__thread_barrier_wait(shs_comm_t *comm, const shs__call_t *call);
/* Post `call` (and stage `stage_bytes` of `stage_src`), wait for all, compare
 * all calls; begin is begin_staged with nothing staged. */
shs_status_t shs__thread_begin_staged(shs_comm_t *comm, const shs__call_t *call, const void *stage_src,
                                      size_t stage_bytes);
shs_status_t shs__thread_begin(shs_comm_t *comm, const shs__call_t *call);
/* End a call: for direct calls (`exit_barrier`), publish `left` and pass the
 * exit barrier, or on its failure wait for the others to leave too. */
shs_status_t shs__thread_finish(shs_comm_t *comm, const shs__call_t *call, int exit_barrier);
void shs__thread_abort(shs_comm_t *comm, const char *reason);

/* ---- the collectives, one file each (comm.h contracts) ---- */
shs_status_t shs__thread_all_gather(shs_comm_t *comm, const shs__call_t *call);
shs_status_t shs__thread_reduce_scatter(shs_comm_t *comm, const shs__call_t *call);
shs_status_t shs__thread_all_reduce(shs_comm_t *comm, const shs__call_t *call);
shs_status_t shs__thread_broadcast(shs_comm_t *comm, const shs__call_t *call);
shs_status_t shs__thread_reduce(shs_comm_t *comm, const shs__call_t *call);
shs_status_t shs__thread_split(shs_comm_t *comm, const shs__call_t *call, shs_comm_t **newcomm, int *members);
shs_status_t shs__thread_p2p(shs_comm_t *comm, const shs__call_t *calls, int n, shs__copy_fn copy);
void shs__thread_job_failed(shs_comm_t *comm, const char *detail);

#endif
