/* thread_p2p.c - the thread backend's sends and receives (comm.h
 * POINT-TO-POINT): a rendezvous per message through the shared state, and
 * the search for ranks blocked on each other.
 *
 * Vocabulary:
 *   post      one of a rank's calls (a group's, or its one call) while the
 *             rank is inside shs__thread_p2p, listed in its slot. States:
 *             OPEN (no partner yet), CLAIMED (its message is being copied),
 *             DONE, WITHDRAWN (its rank gave up after a failure: nobody may
 *             claim it any more).
 *   partner   the other end of a post's message by the pairing rule
 *             (shs_p2p_pair_differs): the peer's post of the opposite op,
 *             with this rank as its peer and the same sequence number.
 *   copier    the second of two partners to post: under p2p_mu it finds
 *             the first's OPEN post, checks the pair and claims both; then,
 *             outside the lock, it copies the message and marks both DONE.
 *             The first partner only waits.
 *   blocked   rank q waits on rank p when q has an OPEN post whose peer p
 *             is itself stuck: p is in a point-to-point call of this
 *             communicator without the partner (it cannot post anything
 *             else before that call ends), or p is in a collective of this
 *             communicator that q has not entered (p waits there for q).
 *   cycle     ranks each blocked on the next: none can move again (a rank
 *             leaves its call only when all its posts are DONE). Searched
 *             from a rank whenever it posts with OPEN posts left, and every
 *             CYCLE_RECHECK_S while it sleeps (a collective entered later
 *             can close a cycle).
 * All bookkeeping is under p2p_mu; copies are not. Lock order: p2p_mu, then
 * fail_mu. A call returns only when no rank can touch its buffers any more
 * (thread_sync.c's invariant 2): on failure its OPEN posts are withdrawn
 * under the lock and its CLAIMED ones waited for (a copy in progress,
 * bounded).
 * What it is not: the collectives' protocol (thread_sync.c); p2p calls take
 * no barrier and leave the collective sequence numbers alone.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/thread/thread_impl.h"
#include "shardsim/clock.h"

enum { POST_OPEN, POST_CLAIMED, POST_DONE, POST_WITHDRAWN };

#define CYCLE_RECHECK_S 10e-3

static int state_of(const p2p_post_t *p) { return atomic_load_explicit(&((p2p_post_t *)p)->state, memory_order_acquire); }

/* ---- partners --------------------------------------------------------------- */

/* Rank q's OPEN post that is the partner of `c` (a call of rank r), or NULL. */
static p2p_post_t *find_partner(shared_t *sh, int q, int r, const shs__call_t *c) {
    slot_t *s = &sh->slots[q];
    for (int k = 0; k < s->p2p_n; k++) {
        p2p_post_t *p = &s->p2p_posts[k];
        if (p->call.op != c->op && p->call.root == r && p->call.seq == c->seq && state_of(p) == POST_OPEN) return p;
    }
    return NULL;
}

/* ---- the cycle search (under p2p_mu) ----------------------------------------- */

/* Rank q's first OPEN post, or NULL: q is stuck in a point-to-point call. */
static const p2p_post_t *open_post(const shared_t *sh, int q) {
    const slot_t *s = &sh->slots[q];
    for (int k = 0; k < s->p2p_n; k++)
        if (state_of(&s->p2p_posts[k]) == POST_OPEN) return &s->p2p_posts[k];
    return NULL;
}

/* Is rank q inside a collective of this communicator (*seq its number)?
 * Its last_call may lag behind; a lagging one names a collective every
 * p2p-stuck rank has finished, so it adds no edge (see successor). */
static int in_collective(const shared_t *sh, int q, uint64_t *seq, shs_coll_op_t *op) {
    uint64_t lc = atomic_load_explicit(&sh->slots[q].last_call, memory_order_relaxed);
    if (lc == NO_CALL || (lc & 1) || sh->slots[q].p2p_posts) return 0;
    *seq = lc >> 8;
    *op = (shs_coll_op_t)((lc >> 1) & 0x7f);
    return 1;
}

/* The k-th rank q waits on (k counts candidates, not hits), -1 when it has
 * no candidate k, -2 when candidate k is not a stuck rank. */
static int successor(const shared_t *sh, int q, int k) {
    const slot_t *s = &sh->slots[q];
    if (s->p2p_posts) {
        if (k >= s->p2p_n) return -1;
        const p2p_post_t *p = &s->p2p_posts[k];
        int peer = p->call.root;
        if (state_of(p) != POST_OPEN) return -2;
        uint64_t seq;
        shs_coll_op_t op;
        return open_post(sh, peer) || in_collective(sh, peer, &seq, &op) ? peer : -2;
    }
    uint64_t seq;
    shs_coll_op_t op;
    if (!in_collective(sh, q, &seq, &op) || k >= sh->nranks) return -1;
    /* a collective waits for every rank stuck in a p2p call before entering it */
    return open_post(sh, k) && sh->slots[k].p2p_coll_seq <= seq ? k : -2;
}

/* What rank q does on the way to `next`, for the cycle's text. */
static void describe_wait(const shared_t *sh, int q, int next, char *buf, size_t size, size_t *len) {
    const slot_t *s = &sh->slots[q];
    for (int k = 0; k < s->p2p_n; k++) {
        const p2p_post_t *p = &s->p2p_posts[k];
        if (p->call.root != next || state_of(p) != POST_OPEN) continue;
        char c[200];
        shs__call_format(c, sizeof c, &p->call);
        shs__appendf(buf, size, len, "rank %d's %s seq %llu waits for rank %d", q, c, (unsigned long long)p->call.seq,
                     next);
        return;
    }
    uint64_t seq = 0;
    shs_coll_op_t op = SHS_OP_BARRIER;
    in_collective(sh, q, &seq, &op);
    shs__appendf(buf, size, len, "rank %d is in %s seq %llu, which waits for rank %d", q, shs_coll_op_name(op),
                 (unsigned long long)seq, next);
}

/* A depth-first search from rank r over "waits on" edges; on a cycle,
 * fail the communicator naming it and return SHS_MISMATCH. */
static shs_status_t find_cycle(shs_comm_t *comm) {
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    int n = sh->nranks, r = comm->rank;
    int *mark = ctx->walk, *next = mark + n, *path = next + n; /* mark: 0 new, 1 on the path, 2 done */
    for (int q = 0; q < n; q++) mark[q] = next[q] = 0;
    int depth = 0;
    path[depth++] = r;
    mark[r] = 1;
    while (depth > 0) {
        int q = path[depth - 1], s = successor(sh, q, next[q]++);
        if (s == -1) {
            mark[q] = 2;
            depth--;
            continue;
        }
        if (s < 0 || mark[s] == 2) continue;
        if (mark[s] == 0) {
            mark[s] = 1;
            path[depth++] = s;
            continue;
        }
        /* s is on the path: path[from .. depth) and back to s is a cycle */
        int from = 0;
        while (path[from] != s) from++;
        char detail[FAIL_TEXT];
        size_t len = 0;
        unsigned char *in_set = calloc((size_t)n, 1);
        detail[0] = '\0';
        shs__appendf(detail, sizeof detail, &len, "comm '%s': ranks ", sh->name);
        if (in_set) {
            for (int i = from; i < depth; i++) in_set[path[i]] = 1;
            shs__append_rank_set(detail, sizeof detail, &len, in_set, n);
            free(in_set);
        }
        shs__appendf(detail, sizeof detail, &len, " wait on each other in a cycle, a deadlock: ");
        for (int i = from; i < depth; i++) {
            describe_wait(sh, path[i], i + 1 < depth ? path[i + 1] : s, detail, sizeof detail, &len);
            shs__appendf(detail, sizeof detail, &len, i + 1 < depth ? "; " : " (put the calls that must run "
                                                                     "together in one group)");
        }
        const p2p_post_t *mine = open_post(sh, r);
        shs__thread_fail(sh, FAIL_MISMATCH, r, mine ? &mine->call : NULL, detail, path + from, depth - from);
        return shs_set_error(SHS_MISMATCH, "rank %d: %s", r, detail);
    }
    return SHS_OK;
}

/* ---- timeout --------------------------------------------------------------- */

/* The deadline passed with an OPEN post left: fail the communicator naming
 * the peer that never posted its partner and what that peer does. */
static void declare_timeout(shs_comm_t *comm, const p2p_post_t *posts, int n) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    pthread_mutex_lock(&sh->p2p_mu);
    const p2p_post_t *late = NULL;
    for (int i = 0; i < n && !late; i++)
        if (state_of(&posts[i]) == POST_OPEN) late = &posts[i];
    if (late) {
        char detail[FAIL_TEXT], c[200];
        size_t len = 0;
        int q = late->call.root;
        detail[0] = '\0';
        shs__call_format(c, sizeof c, &late->call);
        shs__appendf(detail, sizeof detail, &len, "timed out after %.3f s: rank %d's %s seq %llu waits for rank %d's "
                     "%s %s rank %d seq %llu, which ", sh->timeout_ms / 1000.0, comm->rank, c,
                     (unsigned long long)late->call.seq, q, late->call.op == SHS_OP_SEND ? "receive" : "send",
                     late->call.op == SHS_OP_SEND ? "from" : "to", comm->rank, (unsigned long long)late->call.seq);
        const p2p_post_t *theirs = open_post(sh, q);
        uint64_t seq, lc = atomic_load_explicit(&sh->slots[q].last_call, memory_order_relaxed);
        shs_coll_op_t op;
        if (theirs) {
            shs__call_format(c, sizeof c, &theirs->call);
            shs__appendf(detail, sizeof detail, &len, "is in %s seq %llu instead", c, (unsigned long long)theirs->call.seq);
        } else if (in_collective(sh, q, &seq, &op)) {
            shs__appendf(detail, sizeof detail, &len, "is in %s seq %llu instead", shs_coll_op_name(op),
                         (unsigned long long)seq);
        } else if (lc == NO_CALL) {
            shs__appendf(detail, sizeof detail, &len, "has made no collective call and is in no send or receive");
        } else {
            shs__appendf(detail, sizeof detail, &len, "is in no call here (its last collective: %s seq %llu)",
                         shs_coll_op_name((shs_coll_op_t)((lc >> 1) & 0x7f)), (unsigned long long)(lc >> 8));
        }
        shs__thread_fail(sh, FAIL_TIMEOUT, comm->rank, &late->call, detail, NULL, 0);
    }
    pthread_mutex_unlock(&sh->p2p_mu);
}

/* ---- the call -------------------------------------------------------------- */

static int all_done(const p2p_post_t *posts, int n) {
    for (int i = 0; i < n; i++)
        if (state_of(&posts[i]) != POST_DONE) return 0;
    return 1;
}

/* Wait until every post is DONE, the communicator fails, or the timeout:
 * spin briefly, yield, then sleep on the wake word, searching for a cycle
 * every CYCLE_RECHECK_S. */
static shs_status_t wait_posts(shs_comm_t *comm, const p2p_post_t *posts, int n) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    const shs__call_t *first = &posts[0].call; /* the call an error names: the first not yet done */
    for (int i = 0; i < n; i++)
        if (state_of(&posts[i]) != POST_DONE) {
            first = &posts[i].call;
            break;
        }
    for (int i = 0; i < sh->spin_iters; i++) {
        if (all_done(posts, n)) return SHS_OK;
        if (shs__thread_failed(sh)) return shs__thread_failed_status(comm, first, 1);
    }
    double start = shs_now_seconds(), deadline = start + sh->timeout_ms / 1000.0, recheck = start + CYCLE_RECHECK_S;
    while (shs_now_seconds() - start < YIELD_SECONDS) {
        sched_yield();
        if (all_done(posts, n)) return SHS_OK;
        if (shs__thread_failed(sh)) return shs__thread_failed_status(comm, first, 1);
    }
    shs_status_t st = SHS_OK;
    atomic_fetch_add(&sh->sleepers, 1);
    atomic_thread_fence(memory_order_seq_cst); /* the states below are read after the count is seen */
    for (;;) {
        uint32_t w = atomic_load(&sh->wake);
        if (all_done(posts, n)) break;
        if (w & WAKE_FAILED) {
            st = shs__thread_failed_status(comm, first, 1);
            break;
        }
        double now = shs_now_seconds();
        if (now >= deadline) {
            declare_timeout(comm, posts, n); /* then: failed, or everything arrived meanwhile */
        } else if (now >= recheck) {
            pthread_mutex_lock(&sh->p2p_mu);
            shs_status_t cyc = find_cycle(comm);
            pthread_mutex_unlock(&sh->p2p_mu);
            if (cyc != SHS_OK) {
                st = cyc;
                break;
            }
            recheck = now + CYCLE_RECHECK_S;
        } else {
            shs__thread_sleep(sh, w, (deadline < recheck ? deadline : recheck) - now);
        }
    }
    atomic_fetch_sub(&sh->sleepers, 1);
    return st;
}

static shs_status_t ensure_room(shs_comm_t *comm, int n) {
    rank_ctx_t *ctx = comm->ctx;
    if (!ctx->walk && !(ctx->walk = malloc(3 * (size_t)comm->nranks * sizeof *ctx->walk)))
        return shs_set_error(SHS_HOST_OOM, "rank %d: comm '%s': out of host memory", comm->rank, comm->name);
    if (n <= ctx->posts_cap) return SHS_OK;
    p2p_post_t *posts = malloc((size_t)n * sizeof *posts);
    void **pairs = malloc(2 * (size_t)n * sizeof *pairs);
    if (!posts || !pairs) {
        free(posts);
        free(pairs);
        return shs_set_error(SHS_HOST_OOM, "rank %d: comm '%s': out of host memory for %d calls", comm->rank,
                             comm->name, n);
    }
    free(ctx->posts);
    free(ctx->pairs);
    ctx->posts = posts;
    ctx->pairs = pairs;
    ctx->posts_cap = n;
    return SHS_OK;
}

/* post (claim what has a partner), search for a cycle, copy what was
 * claimed, wait for the rest; on failure withdraw; unpost. */
shs_status_t shs__thread_p2p(shs_comm_t *comm, const shs__call_t *calls, int n, shs__copy_fn copy) {
    rank_ctx_t *ctx = comm->ctx;
    shared_t *sh = ctx->sh;
    int r = comm->rank;
    if (shs__thread_failed(sh)) return shs__thread_failed_status(comm, &calls[0], 0);
    SHS_CHECK(ensure_room(comm, n));
    p2p_post_t *posts = ctx->posts;
    for (int i = 0; i < n; i++) {
        posts[i].call = calls[i];
        atomic_init(&posts[i].state, POST_OPEN);
    }
    int npairs = 0;
    shs_status_t st = SHS_OK;
    pthread_mutex_lock(&sh->p2p_mu);
    if (shs__thread_failed(sh)) {
        pthread_mutex_unlock(&sh->p2p_mu);
        return shs__thread_failed_status(comm, &calls[0], 0);
    }
    slot_t *me = &sh->slots[r];
    me->p2p_posts = posts;
    me->p2p_n = n;
    me->p2p_coll_seq = comm->seq;
    for (int i = 0; i < n && st == SHS_OK; i++) {
        const shs__call_t *c = &posts[i].call;
        if (state_of(&posts[i]) != POST_OPEN) continue; /* claimed as a partner of an earlier one of mine */
        p2p_post_t *p = find_partner(sh, c->root, r, c);
        if (!p) continue;
        int sends = c->op == SHS_OP_SEND;
        p2p_post_t *send = sends ? &posts[i] : p, *recv = sends ? p : &posts[i];
        char detail[FAIL_TEXT];
        if (!shs__p2p_check_pair(&send->call, sends ? r : c->root, &recv->call, sends ? c->root : r, sh->name, detail,
                                 sizeof detail)) {
            int both[2] = {r, c->root};
            shs__thread_fail(sh, FAIL_MISMATCH, r, c, detail, both, 2);
            st = shs_set_error(SHS_MISMATCH, "rank %d: %s", r, detail);
            break;
        }
        atomic_store_explicit(&send->state, POST_CLAIMED, memory_order_relaxed);
        atomic_store_explicit(&recv->state, POST_CLAIMED, memory_order_relaxed);
        ctx->pairs[2 * npairs] = send;
        ctx->pairs[2 * npairs + 1] = recv;
        npairs++;
    }
    if (st == SHS_OK && open_post(sh, r)) st = find_cycle(comm);
    pthread_mutex_unlock(&sh->p2p_mu);

    /* the claimed messages are finished whatever happened (their partners
     * wait for them), and copied while nothing failed */
    for (int k = 0; k < npairs; k++) {
        p2p_post_t *send = ctx->pairs[2 * k], *recv = ctx->pairs[2 * k + 1];
        size_t bytes = send->call.count * shs_dtype_size(send->call.dtype);
        if (st == SHS_OK && copy && bytes && (st = copy(recv->call.recvbuf, send->call.sendbuf, bytes)) != SHS_OK)
            shs__thread_abort(comm, shs_last_error()); /* the partner must not take the message as moved */
        atomic_store_explicit(&send->state, POST_DONE, memory_order_seq_cst);
        atomic_store_explicit(&recv->state, POST_DONE, memory_order_seq_cst);
    }
    if (npairs) shs__thread_wake(sh);
    if (st == SHS_OK) st = wait_posts(comm, posts, n);
    if (st != SHS_OK) {
        /* nobody may claim an OPEN post after this; a CLAIMED one is being copied */
        pthread_mutex_lock(&sh->p2p_mu);
        for (int i = 0; i < n; i++) {
            int open = POST_OPEN;
            atomic_compare_exchange_strong(&posts[i].state, &open, POST_WITHDRAWN);
        }
        pthread_mutex_unlock(&sh->p2p_mu);
        for (int i = 0; i < n; i++)
            while (state_of(&posts[i]) == POST_CLAIMED) sched_yield();
    }
    pthread_mutex_lock(&sh->p2p_mu);
    me->p2p_posts = NULL;
    me->p2p_n = 0;
    pthread_mutex_unlock(&sh->p2p_mu);
    return st;
}
