/* mpi_sync.c - the MPI backend's sync core: MPI errors, failure (abort
 * messages, timeout texts), the polling wait every MPI operation goes
 * through, and the descriptor exchange and check before any data moves.
 * What it is not: data movement (mpi_collectives.c).
 */
#ifdef SHS_HAVE_MPI

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/mpi/mpi_impl.h"
#include "shardsim/clock.h"

shs_status_t shs__mpi_error(const shs_comm_t *comm, const char *what, int rc) {
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

/* The element type MPI moves: an unsigned integer of the dtype's size (no
 * MPI arithmetic ever happens, so only the size matters). */
MPI_Datatype shs__mpi_move_type(shs_dtype_t dtype) {
    switch (shs_dtype_size(dtype)) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
    }
}

shs_status_t shs__mpi_ensure_scratch(shs_comm_t *comm, size_t bytes) {
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

void shs__mpi_call_prefix(char *buf, size_t size, const shs_comm_t *comm, const shs__call_t *call) {
    shs__call_prefix(buf, size, comm->rank, call, ((mpi_ctx_t *)comm->ctx)->name);
}

shs_status_t shs__mpi_failed_earlier(const shs_comm_t *comm, const shs__call_t *call) {
    const mpi_ctx_t *ctx = comm->ctx;
    char prefix[256];
    shs__mpi_call_prefix(prefix, sizeof prefix, comm, call);
    if (ctx->fail == FAIL_ABORT) return shs_set_error(SHS_ABORTED, "%s%s", prefix, ctx->fail_detail);
    if (ctx->fail == FAIL_JOB) return shs_set_error(SHS_ABORTED, "%sthe job failed: %s", prefix, ctx->fail_detail);
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

shs_status_t shs__mpi_poll(shs_comm_t *comm, const shs__call_t *call, MPI_Request *reqs, int n, int data_phase,
                           int *timed_out) {
    mpi_ctx_t *ctx = comm->ctx;
    double start = shs_now_seconds(), deadline = start + ctx->timeout_ms / 1000.0, nap = SLEEP_MIN_S;
    *timed_out = 0;
    for (;;) {
        int flag = 0;
        MPI_TRY(comm, MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE));
        if (flag) return SHS_OK;
        char prefix[256];
        if (abort_arrived(comm)) {
            if (data_phase) ctx->data_pending = 1;
            shs__mpi_call_prefix(prefix, sizeof prefix, comm, call);
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
    if (data_phase) ctx->data_pending = 1;
    *timed_out = 1;
    return SHS_TIMEOUT;
}

void shs__mpi_record_timeout(shs_comm_t *comm, const shs__call_t *call, const char *detail) {
    mpi_ctx_t *ctx = comm->ctx;
    if (ctx->fail != FAIL_NONE) return;
    ctx->fail = FAIL_TIMEOUT;
    snprintf(ctx->fail_detail, sizeof ctx->fail_detail, "rank %d timed out in %s seq %llu: %.600s", comm->rank,
             shs_coll_op_name(call->op), (unsigned long long)call->seq, detail);
}

/* Wait for reqs[0..n) to complete, polling (MPI_Testall) until the
 * communicator's deadline: spin with sched_yield first, then sleep between
 * polls (so oversubscribed processes leave the cores to the ranks that
 * compute). `recv_of[k]`: for the descriptor exchange, the rank whose
 * descriptor reqs[k] receives (-1 for sends); NULL in the data phase. */
static shs_status_t wait_all(shs_comm_t *comm, const shs__call_t *call, MPI_Request *reqs, int n,
                             const int *recv_of) {
    mpi_ctx_t *ctx = comm->ctx;
    int timed_out;
    shs_status_t st = shs__mpi_poll(comm, call, reqs, n, recv_of == NULL, &timed_out);
    if (!timed_out) return st;
    /* timed out: which descriptors are in? */
    char detail[FAIL_TEXT], prefix[256];
    shs__mpi_call_prefix(prefix, sizeof prefix, comm, call);
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
        snprintf(detail, sizeof detail, "timed out after %.3f s moving data (every rank had arrived; a process "
                 "died or stopped making progress)", ctx->timeout_ms / 1000.0);
    }
    shs__mpi_record_timeout(comm, call, detail);
    return shs_set_error(SHS_TIMEOUT, "%s%s", prefix, detail);
}

/* ---- descriptor exchange and check ---------------------------------------- */

desc_t shs__mpi_desc_of(const shs__call_t *call) {
    return (desc_t){.op = call->op, .count = (int64_t)call->count, .dtype = call->dtype, .redop = call->redop,
                    .root = call->root, .order = call->order, .seq = (int64_t)call->seq, .color = call->color,
                    .key = call->key, .tag = (int64_t)call->tag};
}

shs__call_t shs__mpi_call_of(const desc_t *d) {
    return (shs__call_t){.op = (shs_coll_op_t)d->op, .count = (size_t)d->count, .dtype = (shs_dtype_t)d->dtype,
                         .redop = (shs_redop_t)d->redop, .root = (int)d->root, .order = (shs_reduce_order_t)d->order,
                         .seq = (uint64_t)d->seq, .tag = (uint64_t)d->tag};
}

/* shs__check_calls' view of rank j's received descriptor. */
static const shs__call_t *desc_call(const void *descs, int rank, shs__call_t *buf) {
    *buf = shs__mpi_call_of(&((const desc_t *)descs)[rank]);
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
shs_status_t shs__mpi_exchange(shs_comm_t *comm, const shs__call_t *call) {
    mpi_ctx_t *ctx = comm->ctx;
    if (ctx->fail != FAIL_NONE) return shs__mpi_failed_earlier(comm, call);
    int n = comm->nranks, r = comm->rank, k = 0;
    ctx->mine = shs__mpi_desc_of(call);
    ctx->descs[r] = ctx->mine;
    int *owner = ctx->owner;
    shs_status_t s = SHS_OK;
    for (int j = 0; j < n && s == SHS_OK; j++) {
        if (j == r) continue;
        int rc = MPI_Irecv(&ctx->descs[j], (int)sizeof(desc_t), MPI_BYTE, j, TAG_DESC, ctx->mc, &ctx->reqs[k]);
        if (rc != MPI_SUCCESS) s = shs__mpi_error(comm, "MPI_Irecv", rc);
        owner[k++] = j;
    }
    for (int j = 0; j < n && s == SHS_OK; j++) {
        if (j == r) continue;
        int rc = MPI_Isend(&ctx->mine, (int)sizeof(desc_t), MPI_BYTE, j, TAG_DESC, ctx->mc, &ctx->reqs[k]);
        if (rc != MPI_SUCCESS) s = shs__mpi_error(comm, "MPI_Isend", rc);
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
shs_status_t shs__mpi_check_int_count(const shs_comm_t *comm, const shs__call_t *call, size_t elements) {
    if (elements <= (size_t)INT_MAX) return SHS_OK;
    char prefix[256];
    shs__mpi_call_prefix(prefix, sizeof prefix, comm, call);
    return shs_set_error(SHS_UNSUPPORTED, "%s%zu elements in one call exceed the MPI backend's limit of %d",
                         prefix, elements, INT_MAX);
}

shs_status_t shs__mpi_wait_one(shs_comm_t *comm, const shs__call_t *call, MPI_Request *req) {
    return wait_all(comm, call, req, 1, NULL);
}

#endif /* SHS_HAVE_MPI */
