/* comm_mpi.c - the "mpi" communicator backend (comm_mpi.h): one rank per
 * process, collectives over MPI with shardsim's fixed reduction order.
 *
 * What it is: data movement by MPI's nonblocking collectives, reduction by
 * comm_reduce.c in rank (or ring) order, so every element is combined in
 * exactly the order the thread backend uses and the results are the same
 * bits. Why not MPI_Allreduce: MPI does not fix the order in which it
 * combines contributions (OpenMPI picks among recursive doubling, ring,
 * Rabenseifner, ... by size and process count, and each adds in its own
 * order), and floating-point addition is not associative; a sharded run
 * checked against DDP would then differ in the last bits for reasons that
 * have nothing to do with sharding.
 * What it is not: built without MPI (the functions then return
 * SHS_UNSUPPORTED), thread-safe beyond MPI_THREAD_FUNNELED, or usable for
 * buffers of more than INT_MAX elements in one call (SHS_UNSUPPORTED).
 *
 * Vocabulary of the algorithms below:
 *   descriptor  one call's checked fields (op, count, dtype, reduce op,
 *               root, reduce order, sequence number, tag; split also color
 *               and key, not compared), sent by every rank to every other rank
 *               with MPI_Isend/MPI_Irecv before any data moves.
 *   wait        a polling loop over MPI_Testall with the communicator's
 *               deadline that also watches for an abort message (tag
 *               TAG_ABORT) from any rank. Every MPI operation that could
 *               wait on another process goes through it.
 *   chunk       all_reduce's share of rank j: elements [start(j),
 *               start(j+1)) with start floor-balanced as in the thread
 *               backend, or ring order's ceil-sized chunks (comm.h).
 *   scratch     per-rank host buffer that receives the other ranks' copies
 *               of the elements this rank reduces.
 * Every rank reaches the same verdict on the descriptors (it holds all of
 * them), so either all ranks move data or none does.
 */
#include "shardsim/comm_mpi.h"
#include "shardsim/features.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef SHS_HAVE_MPI

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "comm/comm_impl.h"
#include "shardsim/clock.h"

#define TAG_DESC 1
#define TAG_ABORT 2
#define FAIL_TEXT 768
#define YIELD_SECONDS 2e-3   /* poll with sched_yield this long, then sleep between polls */
#define SLEEP_MIN_S 50e-6
#define SLEEP_MAX_S 1e-3

typedef enum { FAIL_NONE, FAIL_MISMATCH, FAIL_TIMEOUT, FAIL_ABORT, FAIL_MPI } fail_kind_t;

/* One call's fields as sent to the other ranks (fixed layout, all int64). */
typedef struct {
    int64_t op, count, dtype, redop, root, order, seq, color, key, tag;
} desc_t;

typedef struct {
    MPI_Comm mc;
    int timeout_ms;
    char *name;
    fail_kind_t fail;
    char fail_detail[FAIL_TEXT];
    desc_t mine;                 /* send buffer of the current exchange */
    desc_t *descs;               /* (nranks) this call's descriptors */
    desc_t *last;                /* (nranks) last descriptor received from each rank */
    unsigned char *seen;         /* (nranks) last[j] is valid */
    MPI_Request *reqs;           /* (2 * nranks) */
    int *owner;                  /* (2 * nranks) exchange: rank whose descriptor reqs[k] receives, -1 send */
    int *scounts, *sdispls, *rcounts, *rdispls; /* (nranks) each, elements */
    const void **srcs;           /* (nranks) */
    char *scratch;
    size_t scratch_bytes;
    int data_pending;            /* a data-phase wait failed: MPI may still write into user or scratch memory */
    char abort_msg[FAIL_TEXT];   /* send buffer of abort messages */
    MPI_Request *abort_reqs;     /* (nranks) */
} mpi_ctx_t;

static int g_we_initialized;


static shs_status_t mpi_error(const shs_comm_t *comm, const char *what, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    mpi_ctx_t *ctx = comm->ctx;
    if (ctx->fail == FAIL_NONE) {
        ctx->fail = FAIL_MPI;
        snprintf(ctx->fail_detail, sizeof ctx->fail_detail, "rank %d: %s failed: %s", comm->rank, what, msg);
    }
    return shs_set_error(SHS_SYSTEM, "rank %d: comm '%s': %s failed: %s", comm->rank, ctx->name, what, msg);
}

#define MPI_TRY(comm, call)                                              \
    do {                                                                 \
        int mpi__rc = (call);                                            \
        if (mpi__rc != MPI_SUCCESS) return mpi_error((comm), #call, mpi__rc); \
    } while (0)

/* The element type MPI moves: an unsigned integer of the dtype's size (no
 * MPI arithmetic ever happens, so only the size matters). */
static MPI_Datatype move_type(shs_dtype_t dtype) {
    switch (shs_dtype_size(dtype)) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
    }
}

static shs_status_t ensure_scratch(shs_comm_t *comm, size_t bytes) {
    mpi_ctx_t *ctx = comm->ctx;
    if (bytes <= ctx->scratch_bytes) return SHS_OK;
    char *p = realloc(ctx->scratch, bytes);
    if (!p)
        return shs_set_error(SHS_HOST_OOM, "rank %d: comm '%s': out of host memory for %zu bytes of scratch",
                             comm->rank, ctx->name, bytes);
    ctx->scratch = p;
    ctx->scratch_bytes = bytes;
    return SHS_OK;
}

/* ---- failure -------------------------------------------------------------- */

static void call_prefix(char *buf, size_t size, const shs_comm_t *comm, const shs__call_t *call) {
    snprintf(buf, size, "rank %d: %s seq %llu on comm '%s': ", comm->rank, shs_coll_op_name(call->op),
             (unsigned long long)call->seq, ((mpi_ctx_t *)comm->ctx)->name);
}

/* The status for a call made on a communicator that failed earlier. */
static shs_status_t failed_earlier(const shs_comm_t *comm, const shs__call_t *call) {
    const mpi_ctx_t *ctx = comm->ctx;
    char prefix[192];
    call_prefix(prefix, sizeof prefix, comm, call);
    if (ctx->fail == FAIL_ABORT) return shs_set_error(SHS_ABORTED, "%s%s", prefix, ctx->fail_detail);
    return shs_set_error(SHS_ABORTED, "%scommunicator failed earlier: %s", prefix, ctx->fail_detail);
}

/* An abort message from any rank ends the wait: returns 1 and records it. */
static int abort_arrived(shs_comm_t *comm) {
    mpi_ctx_t *ctx = comm->ctx;
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_ABORT, ctx->mc, &flag, &st) != MPI_SUCCESS || !flag) return 0;
    char msg[FAIL_TEXT];
    int len = 0;
    MPI_Get_count(&st, MPI_CHAR, &len);
    if (len < 0 || len >= (int)sizeof msg) len = (int)sizeof msg - 1;
    MPI_Recv(msg, (int)sizeof msg - 1, MPI_CHAR, st.MPI_SOURCE, TAG_ABORT, ctx->mc, MPI_STATUS_IGNORE);
    msg[len] = 0;
    if (ctx->fail == FAIL_NONE) {
        ctx->fail = FAIL_ABORT;
        snprintf(ctx->fail_detail, sizeof ctx->fail_detail, "%s", msg);
    }
    return 1;
}

/* "timed out after 0.300 s waiting for ranks [3]; last calls: ranks [0-2]
 * all_reduce seq 7 (in progress); ranks [3] barrier seq 6 (called)". A rank
 * is missing when its descriptor for this call has not arrived (its request
 * in reqs[] is still pending); `arrived[j]` says which did. */
static void format_timeout(const shs_comm_t *comm, const unsigned char *arrived, char *d, size_t size) {
    const mpi_ctx_t *ctx = comm->ctx;
    int n = comm->nranks;
    size_t len = 0;
    unsigned char *in_set = calloc(n > 0 ? (size_t)n : 1, 2), *printed = in_set ? in_set + n : NULL;
    shs__appendf(d, size, &len, "timed out after %.3f s waiting for ranks ", ctx->timeout_ms / 1000.0);
    if (!in_set) {
        shs__appendf(d, size, &len, "(out of host memory listing them)");
        return;
    }
    for (int j = 0; j < n; j++) in_set[j] = !arrived[j];
    shs__append_rank_set(d, size, &len, in_set, n);
    shs__appendf(d, size, &len, "; last calls:");
    /* group ranks by the last call seen from them: this call for arrived
     * ranks, their previous descriptor (or none) for the missing ones */
    for (int j = 0; j < n; j++) {
        if (printed[j]) continue;
        for (int k = 0; k < n; k++) {
            int same = arrived[k] == arrived[j] && ctx->seen[k] == ctx->seen[j];
            if (same && ctx->seen[k]) same = ctx->last[k].seq == ctx->last[j].seq && ctx->last[k].op == ctx->last[j].op;
            in_set[k] = k >= j && same;
        }
        for (int k = j; k < n; k++) printed[k] |= in_set[k];
        shs__appendf(d, size, &len, "%s ranks ", j ? ";" : "");
        shs__append_rank_set(d, size, &len, in_set, n);
        if (!ctx->seen[j]) shs__appendf(d, size, &len, " no call yet");
        else
            shs__appendf(d, size, &len, " %s seq %llu (%s)", shs_coll_op_name((shs_coll_op_t)ctx->last[j].op),
                    (unsigned long long)ctx->last[j].seq, arrived[j] ? "in progress" : "called");
    }
    free(in_set);
}

/* Wait for reqs[0..n) to complete, polling (MPI_Testall) until the
 * communicator's deadline: spin with sched_yield first, then sleep between
 * polls (so oversubscribed processes leave the cores to the ranks that
 * compute). `recv_of[k]`: for the descriptor exchange, the rank whose
 * descriptor reqs[k] receives (-1 for sends); NULL in the data phase. */
static shs_status_t wait_all(shs_comm_t *comm, const shs__call_t *call, MPI_Request *reqs, int n,
                             const int *recv_of) {
    mpi_ctx_t *ctx = comm->ctx;
    double start = shs_now_seconds(), deadline = start + ctx->timeout_ms / 1000.0, nap = SLEEP_MIN_S;
    for (;;) {
        int flag = 0;
        MPI_TRY(comm, MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE));
        if (flag) return SHS_OK;
        char prefix[192];
        if (abort_arrived(comm)) {
            if (!recv_of) ctx->data_pending = 1;
            call_prefix(prefix, sizeof prefix, comm, call);
            return shs_set_error(SHS_ABORTED, "%s%s", prefix, ctx->fail_detail);
        }
        double now = shs_now_seconds();
        if (now >= deadline) break;
        if (now - start < YIELD_SECONDS) {
            sched_yield();
        } else {
            struct timespec ts = {0, (long)(nap * 1e9)};
            nanosleep(&ts, NULL);
            if (nap < SLEEP_MAX_S) nap *= 2;
        }
    }
    /* timed out: which descriptors are in? */
    char detail[FAIL_TEXT], prefix[192];
    call_prefix(prefix, sizeof prefix, comm, call);
    if (recv_of) {
        unsigned char *arrived = calloc((size_t)comm->nranks, 1);
        if (arrived) {
            arrived[comm->rank] = 1;
            for (int k = 0; k < n; k++) {
                int flag = 0;
                if (recv_of[k] < 0) continue;
                MPI_Test(&reqs[k], &flag, MPI_STATUS_IGNORE);
                arrived[recv_of[k]] = (unsigned char)(flag != 0);
            }
            for (int j = 0; j < comm->nranks; j++)
                if (arrived[j]) { ctx->last[j] = ctx->descs[j]; ctx->seen[j] = 1; }
            format_timeout(comm, arrived, detail, sizeof detail);
            free(arrived);
        } else {
            snprintf(detail, sizeof detail, "timed out after %.3f s (out of host memory listing the ranks)",
                     ctx->timeout_ms / 1000.0);
        }
    } else {
        ctx->data_pending = 1;
        snprintf(detail, sizeof detail, "timed out after %.3f s moving data (every rank had arrived; a process "
                 "died or stopped making progress)", ctx->timeout_ms / 1000.0);
    }
    if (ctx->fail == FAIL_NONE) {
        ctx->fail = FAIL_TIMEOUT;
        snprintf(ctx->fail_detail, sizeof ctx->fail_detail, "rank %d timed out in %s seq %llu: %.600s", comm->rank,
                 shs_coll_op_name(call->op), (unsigned long long)call->seq, detail);
    }
    return shs_set_error(SHS_TIMEOUT, "%s%s", prefix, detail);
}

/* ---- descriptor exchange and check ---------------------------------------- */

/* shs__check_calls' view of rank j's received descriptor. */
static const shs__call_t *desc_call(const void *descs, int rank, shs__call_t *buf) {
    const desc_t *d = &((const desc_t *)descs)[rank];
    *buf = (shs__call_t){.op = (shs_coll_op_t)d->op, .count = (size_t)d->count, .dtype = (shs_dtype_t)d->dtype,
                         .redop = (shs_redop_t)d->redop, .root = (int)d->root,
                         .order = (shs_reduce_order_t)d->order, .seq = (uint64_t)d->seq, .tag = (uint64_t)d->tag};
    return buf;
}

/* The thread backend's check on the exchanged descriptors (same verdict and text). */
static shs_status_t check_descs(shs_comm_t *comm) {
    mpi_ctx_t *ctx = comm->ctx;
    char detail[FAIL_TEXT];
    if (shs__check_calls(comm->nranks, desc_call, ctx->descs, ctx->name, detail, sizeof detail)) return SHS_OK;
    if (ctx->fail == FAIL_NONE) {
        ctx->fail = FAIL_MISMATCH;
        snprintf(ctx->fail_detail, sizeof ctx->fail_detail, "%s", detail);
    }
    return shs_set_error(SHS_MISMATCH, "rank %d: %s", comm->rank, detail);
}

/* Send this call's descriptor to every other rank, receive theirs, compare.
 * Returns once every rank has called (so it is also the barrier). */
static shs_status_t exchange(shs_comm_t *comm, const shs__call_t *call) {
    mpi_ctx_t *ctx = comm->ctx;
    if (ctx->fail != FAIL_NONE) return failed_earlier(comm, call);
    int n = comm->nranks, r = comm->rank, k = 0;
    ctx->mine = (desc_t){.op = call->op, .count = (int64_t)call->count, .dtype = call->dtype, .redop = call->redop,
                         .root = call->root, .order = call->order, .seq = (int64_t)call->seq, .color = call->color,
                         .key = call->key, .tag = (int64_t)call->tag};
    ctx->descs[r] = ctx->mine;
    int *owner = ctx->owner;
    shs_status_t s = SHS_OK;
    for (int j = 0; j < n && s == SHS_OK; j++) {
        if (j == r) continue;
        int rc = MPI_Irecv(&ctx->descs[j], (int)sizeof(desc_t), MPI_BYTE, j, TAG_DESC, ctx->mc, &ctx->reqs[k]);
        if (rc != MPI_SUCCESS) s = mpi_error(comm, "MPI_Irecv", rc);
        owner[k++] = j;
    }
    for (int j = 0; j < n && s == SHS_OK; j++) {
        if (j == r) continue;
        int rc = MPI_Isend(&ctx->mine, (int)sizeof(desc_t), MPI_BYTE, j, TAG_DESC, ctx->mc, &ctx->reqs[k]);
        if (rc != MPI_SUCCESS) s = mpi_error(comm, "MPI_Isend", rc);
        owner[k++] = -1;
    }
    if (s == SHS_OK) s = wait_all(comm, call, ctx->reqs, k, owner);
    SHS_CHECK(s);
    for (int j = 0; j < n; j++) {
        ctx->last[j] = ctx->descs[j];
        ctx->seen[j] = 1;
    }
    return check_descs(comm);
}

/* Buffers beyond INT_MAX elements do not fit MPI's int counts. Every rank
 * checks the same (compared) count after the exchange, so all agree. */
static shs_status_t check_int_count(const shs_comm_t *comm, const shs__call_t *call, size_t elements) {
    if (elements <= (size_t)INT_MAX) return SHS_OK;
    char prefix[192];
    call_prefix(prefix, sizeof prefix, comm, call);
    return shs_set_error(SHS_UNSUPPORTED, "%s%zu elements in one call exceed the MPI backend's limit of %d",
                         prefix, elements, INT_MAX);
}

static shs_status_t wait_one(shs_comm_t *comm, const shs__call_t *call, MPI_Request *req) {
    return wait_all(comm, call, req, 1, NULL);
}

/* ---- all_gather -------------------------------------------------------------
 *   exchange    descriptors, check.
 *   gather      MPI_Iallgather of count elements per rank (MPI_IN_PLACE when
 *               sendbuf is block r of recvbuf), waited on by polling.
 */
static shs_status_t mpi_all_gather(shs_comm_t *comm, const shs__call_t *call) {
    mpi_ctx_t *ctx = comm->ctx;
    SHS_CHECK(exchange(comm, call));
    size_t esize = shs_dtype_size(call->dtype), block = call->count * esize;
    SHS_CHECK(check_int_count(comm, call, call->count * (size_t)comm->nranks));
    if (!block) return SHS_OK;
    MPI_Datatype t = move_type(call->dtype);
    int in_place = (const char *)call->sendbuf == (char *)call->recvbuf + (size_t)comm->rank * block;
    MPI_Request req;
    MPI_TRY(comm, MPI_Iallgather(in_place ? MPI_IN_PLACE : call->sendbuf, (int)call->count, t, call->recvbuf,
                                 (int)call->count, t, ctx->mc, &req));
    return wait_one(comm, call, &req);
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
static shs_status_t mpi_reduce_scatter(shs_comm_t *comm, const shs__call_t *call) {
    mpi_ctx_t *ctx = comm->ctx;
    SHS_CHECK(exchange(comm, call));
    int n = comm->nranks, r = comm->rank;
    size_t block = call->count * shs_dtype_size(call->dtype);
    SHS_CHECK(check_int_count(comm, call, call->count * (size_t)n));
    if (!block) return SHS_OK;
    SHS_CHECK(ensure_scratch(comm, block * (size_t)n));
    MPI_Datatype t = move_type(call->dtype);
    MPI_Request req;
    MPI_TRY(comm, MPI_Ialltoall(call->sendbuf, (int)call->count, t, ctx->scratch, (int)call->count, t, ctx->mc, &req));
    SHS_CHECK(wait_one(comm, call, &req));
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
static shs_status_t mpi_all_reduce(shs_comm_t *comm, const shs__call_t *call) {
    mpi_ctx_t *ctx = comm->ctx;
    SHS_CHECK(exchange(comm, call));
    int n = comm->nranks, r = comm->rank, ring = call->order == SHS_REDUCE_ORDER_RING;
    size_t esize = shs_dtype_size(call->dtype);
    SHS_CHECK(check_int_count(comm, call, call->count));
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
    SHS_CHECK(ensure_scratch(comm, (mine ? mine : 1) * esize * (size_t)n));
    MPI_Datatype t = move_type(call->dtype);
    MPI_Request req;
    MPI_TRY(comm, MPI_Ialltoallv(call->sendbuf, ctx->scounts, ctx->sdispls, t, ctx->scratch, ctx->rcounts,
                                 ctx->rdispls, t, ctx->mc, &req));
    SHS_CHECK(wait_one(comm, call, &req));
    if (mine) {
        int first = ring ? r + 1 : 0;
        for (int k = 0; k < n; k++) ctx->srcs[k] = ctx->scratch + (size_t)((first + k) % n) * mine * esize;
        shs__reduce((char *)call->recvbuf + off_r * esize, ctx->srcs, n, mine, call->dtype, call->redop);
    }
    MPI_TRY(comm, MPI_Iallgatherv(MPI_IN_PLACE, 0, t, call->recvbuf, ctx->scounts, ctx->sdispls, t, ctx->mc, &req));
    return wait_one(comm, call, &req);
}

/* ---- broadcast ------------------------------------------------------------------
 *   exchange    descriptors, check.
 *   copy        the root copies sendbuf into recvbuf (unless in place).
 *   bcast       MPI_Ibcast of recvbuf from the root.
 */
static shs_status_t mpi_broadcast(shs_comm_t *comm, const shs__call_t *call) {
    mpi_ctx_t *ctx = comm->ctx;
    SHS_CHECK(exchange(comm, call));
    size_t bytes = call->count * shs_dtype_size(call->dtype);
    SHS_CHECK(check_int_count(comm, call, call->count));
    if (!bytes) return SHS_OK;
    if (comm->rank == call->root && call->sendbuf != call->recvbuf) memcpy(call->recvbuf, call->sendbuf, bytes);
    MPI_Request req;
    MPI_TRY(comm, MPI_Ibcast(call->recvbuf, (int)call->count, move_type(call->dtype), call->root, ctx->mc, &req));
    return wait_one(comm, call, &req);
}

/* ---- reduce -----------------------------------------------------------------------
 *   exchange    descriptors, check.
 *   gather      MPI_Igather of every sendbuf into the root's scratch.
 *   reduce      the root reduces the N copies in rank order into recvbuf
 *               (reduce keeps rank order whatever the handle's order, as on
 *               threads).
 */
static shs_status_t mpi_reduce(shs_comm_t *comm, const shs__call_t *call) {
    mpi_ctx_t *ctx = comm->ctx;
    SHS_CHECK(exchange(comm, call));
    int n = comm->nranks, is_root = comm->rank == call->root;
    size_t bytes = call->count * shs_dtype_size(call->dtype);
    SHS_CHECK(check_int_count(comm, call, call->count * (size_t)n));
    if (!bytes) return SHS_OK;
    if (is_root) SHS_CHECK(ensure_scratch(comm, bytes * (size_t)n));
    MPI_Datatype t = move_type(call->dtype);
    MPI_Request req;
    MPI_TRY(comm, MPI_Igather(call->sendbuf, (int)call->count, t, is_root ? ctx->scratch : NULL, (int)call->count, t,
                              call->root, ctx->mc, &req));
    SHS_CHECK(wait_one(comm, call, &req));
    if (is_root) {
        for (int j = 0; j < n; j++) ctx->srcs[j] = ctx->scratch + (size_t)j * bytes;
        shs__reduce(call->recvbuf, ctx->srcs, n, call->count, call->dtype, call->redop);
    }
    return SHS_OK;
}

/* ---- barrier: the descriptor exchange alone (it completes only when every
 * rank has sent its descriptor, i.e. has called). */
static shs_status_t mpi_barrier(shs_comm_t *comm, const shs__call_t *call) { return exchange(comm, call); }

/* ---- split --------------------------------------------------------------------------
 *   exchange    descriptors (color and key travel along, not compared).
 *   split       MPI_Comm_split(color or MPI_UNDEFINED, key): MPI ranks the
 *               members by (key, parent rank), as ncclCommSplit and the
 *               thread backend do. Every rank has arrived, so this blocking
 *               call cannot wait for a missing one.
 *   attach      a new handle named "<parent>/<color>" with the parent's
 *               timeout.
 */
static shs_status_t ctx_create(shs_comm_t *comm, MPI_Comm mc, int timeout_ms, const char *name);

static shs_status_t mpi_split(shs_comm_t *comm, const shs__call_t *call, shs_comm_t **newcomm) {
    mpi_ctx_t *ctx = comm->ctx;
    SHS_CHECK(exchange(comm, call));
    MPI_Comm child;
    MPI_TRY(comm, MPI_Comm_split(ctx->mc, call->color == SHS_SPLIT_NOCOLOR ? MPI_UNDEFINED : call->color, call->key,
                                 &child));
    if (child == MPI_COMM_NULL) return SHS_OK;
    char name[256];
    snprintf(name, sizeof name, "%s/%d", ctx->name, call->color);
    shs_comm_t *mine = shs__comm_new(comm->iface);
    shs_status_t s = mine ? ctx_create(mine, child, ctx->timeout_ms, name)
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

/* ---- abort and lifetime ------------------------------------------------------------ */

/* Record the failure and send "aborted by rank r: reason" to every other
 * rank (nonblocking; their waits pick it up). Call from the thread that
 * uses the communicator (MPI_THREAD_FUNNELED). */
static void mpi_abort_comm(shs_comm_t *comm, const char *reason) {
    mpi_ctx_t *ctx = comm->ctx;
    if (ctx->fail != FAIL_NONE) return;
    ctx->fail = FAIL_ABORT;
    snprintf(ctx->fail_detail, sizeof ctx->fail_detail, "aborted by rank %d: %s", comm->rank, reason);
    snprintf(ctx->abort_msg, sizeof ctx->abort_msg, "%s", ctx->fail_detail);
    for (int j = 0; j < comm->nranks; j++) {
        ctx->abort_reqs[j] = MPI_REQUEST_NULL;
        if (j != comm->rank)
            MPI_Isend(ctx->abort_msg, (int)strlen(ctx->abort_msg) + 1, MPI_CHAR, j, TAG_ABORT, ctx->mc,
                      &ctx->abort_reqs[j]);
    }
}

static void ctx_free(mpi_ctx_t *ctx) {
    free(ctx->descs);
    free(ctx->last);
    free(ctx->seen);
    free(ctx->reqs);
    free(ctx->owner);
    free(ctx->scounts);
    free(ctx->srcs);
    free(ctx->abort_reqs);
    free(ctx->scratch);
    free(ctx->name);
    free(ctx);
}

/* After a failure: cancel the descriptor receives still pending; 1 when no
 * request can still touch the context's memory. */
static int release_requests(const shs_comm_t *comm) {
    mpi_ctx_t *ctx = comm->ctx;
    if (ctx->data_pending) return 0; /* a collective cannot be cancelled */
    int done = 1, n = comm->nranks;
    for (int k = 0; k < 2 * n; k++) {
        if (ctx->reqs[k] == MPI_REQUEST_NULL) continue;
        int flag = 0;
        if (ctx->owner[k] >= 0) {
            MPI_Cancel(&ctx->reqs[k]);
            MPI_Wait(&ctx->reqs[k], MPI_STATUS_IGNORE);
        } else if (MPI_Test(&ctx->reqs[k], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) {
            done = 0;
        }
    }
    for (int j = 0; j < n; j++) {
        int flag = 0;
        if (ctx->abort_reqs[j] != MPI_REQUEST_NULL &&
            (MPI_Test(&ctx->abort_reqs[j], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag))
            done = 0;
    }
    return done;
}

/* After a failure whose requests cannot all be released (an unfinished
 * collective, a send not yet delivered) the context is left allocated, since
 * MPI may still write into it; the program is expected to end with
 * shs_mpi_abort() anyway. */
static void mpi_destroy(shs_comm_t *comm) {
    mpi_ctx_t *ctx = comm->ctx;
    if (!ctx) return;
    if (ctx->fail != FAIL_NONE && !release_requests(comm)) return;
    MPI_Comm_free(&ctx->mc);
    ctx_free(ctx);
}

static shs_status_t ctx_create(shs_comm_t *comm, MPI_Comm mc, int timeout_ms, const char *name) {
    int n, r;
    MPI_Comm_size(mc, &n);
    MPI_Comm_rank(mc, &r);
    mpi_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (ctx) {
        ctx->mc = mc;
        ctx->timeout_ms = timeout_ms;
        ctx->name = strdup(name);
        ctx->descs = calloc((size_t)n, sizeof *ctx->descs);
        ctx->last = calloc((size_t)n, sizeof *ctx->last);
        ctx->seen = calloc((size_t)n, 1);
        ctx->reqs = calloc(2 * (size_t)n, sizeof *ctx->reqs);
        ctx->owner = calloc(2 * (size_t)n, sizeof *ctx->owner);
        ctx->scounts = calloc(4 * (size_t)n, sizeof *ctx->scounts);
        ctx->srcs = calloc((size_t)n, sizeof *ctx->srcs);
        ctx->abort_reqs = calloc((size_t)n, sizeof *ctx->abort_reqs);
    }
    if (!ctx || !ctx->name || !ctx->descs || !ctx->last || !ctx->seen || !ctx->reqs || !ctx->owner || !ctx->scounts || !ctx->srcs ||
        !ctx->abort_reqs) {
        if (ctx) ctx_free(ctx);
        return shs_set_error(SHS_HOST_OOM, "comm '%s': out of host memory for %d ranks", name, n);
    }
    for (int k = 0; k < 2 * n; k++) ctx->reqs[k] = MPI_REQUEST_NULL;
    for (int j = 0; j < n; j++) ctx->abort_reqs[j] = MPI_REQUEST_NULL;
    ctx->sdispls = ctx->scounts + n;
    ctx->rcounts = ctx->scounts + 2 * n;
    ctx->rdispls = ctx->scounts + 3 * n;
    /* errors come back as codes, turned into SHS_SYSTEM with MPI's text */
    MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN);
    comm->ctx = ctx;
    comm->rank = r;
    comm->nranks = n;
    comm->name = ctx->name;
    return SHS_OK;
}

static shs_status_t mpi_init_rank(shs_comm_t *comm, void *id_ctx, int rank) {
    return shs_set_error(SHS_UNSUPPORTED, "the MPI backend has no rendezvous ids: use shs_comm_mpi_create()");
}
static void mpi_id_release(void *id_ctx) {}

static const shs__comm_iface_t mpi_iface = {
    .name = "mpi",
    .init_rank = mpi_init_rank,
    .id_release = mpi_id_release,
    .all_gather = mpi_all_gather,
    .reduce_scatter = mpi_reduce_scatter,
    .all_reduce = mpi_all_reduce,
    .broadcast = mpi_broadcast,
    .reduce = mpi_reduce,
    .barrier = mpi_barrier,
    .split = mpi_split,
    .abort = mpi_abort_comm,
    .destroy = mpi_destroy,
};

/* ---- public ------------------------------------------------------------------------- */

static int mpi_live(void) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

int shs_mpi_available(void) { return 1; }

shs_status_t shs_mpi_init(int *argc, char ***argv) {
    if (mpi_live()) return SHS_OK;
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return shs_set_error(SHS_SYSTEM, "MPI_Init_thread failed (code %d)", rc);
    g_we_initialized = 1;
    if (provided < MPI_THREAD_FUNNELED)
        return shs_set_error(SHS_SYSTEM, "MPI provides thread level %d, shardsim needs MPI_THREAD_FUNNELED", provided);
    return SHS_OK;
}

void shs_mpi_finalize(void) {
    if (g_we_initialized && mpi_live()) MPI_Finalize();
}

_Noreturn void shs_mpi_abort(int code) {
    fflush(stdout);
    fflush(stderr);
    if (mpi_live()) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

int shs_mpi_world_rank(void) {
    int r = 0;
    if (mpi_live()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int shs_mpi_world_size(void) {
    int n = 1;
    if (mpi_live()) MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

shs_status_t shs_comm_mpi_create(shs_comm_t **comm, int timeout_ms, const char *name) {
    if (!comm) return shs_set_error(SHS_INVALID_ARG, "shs_comm_mpi_create: comm is NULL");
    *comm = NULL;
    if (!mpi_live()) return shs_set_error(SHS_UNSUPPORTED, "shs_comm_mpi_create: MPI is not initialized (shs_mpi_init)");
    MPI_Comm mc;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &mc);
    if (rc != MPI_SUCCESS) return shs_set_error(SHS_SYSTEM, "shs_comm_mpi_create: MPI_Comm_dup failed (code %d)", rc);
    shs_comm_t *c = shs__comm_new(&mpi_iface);
    shs_status_t s = c ? ctx_create(c, mc, timeout_ms > 0 ? timeout_ms : SHS_COMM_DEFAULT_TIMEOUT_MS,
                                    name ? name : "world")
                       : shs_set_error(SHS_HOST_OOM, "shs_comm_mpi_create: out of host memory");
    if (s != SHS_OK) {
        free(c);
        MPI_Comm_free(&mc);
        return s;
    }
    *comm = c;
    return SHS_OK;
}

#else /* !SHS_HAVE_MPI: every entry point says so */

#include "shardsim/status.h"

#define NO_MPI "shardsim was built without MPI: the MPI backend %s", shs_feature_missing(SHS_FEATURE_MPI)

int shs_mpi_available(void) { return 0; }
shs_status_t shs_mpi_init(int *argc, char ***argv) {
    (void)argc; (void)argv;
    return shs_set_error(SHS_UNSUPPORTED, NO_MPI);
}
void shs_mpi_finalize(void) {}
_Noreturn void shs_mpi_abort(int code) {
    fflush(stdout);
    fflush(stderr);
    exit(code);
}
int shs_mpi_world_rank(void) { return 0; }
int shs_mpi_world_size(void) { return 1; }
shs_status_t shs_comm_mpi_create(shs_comm_t **comm, int timeout_ms, const char *name) {
    (void)timeout_ms; (void)name;
    if (comm) *comm = NULL;
    return shs_set_error(SHS_UNSUPPORTED, NO_MPI);
}

#endif
