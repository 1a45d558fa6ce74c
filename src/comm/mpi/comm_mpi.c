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
 * Files: this one (the handle's lifetime, the public entry points),
 * mpi_sync.c (failure, the wait, the descriptor exchange),
 * mpi_collectives.c (the collectives, split), mpi_p2p.c (sends and
 * receives).
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

#include "comm/mpi/mpi_impl.h"
#include "shardsim/clock.h"

static int g_we_initialized;

/* ---- abort and lifetime ------------------------------------------------------------ */

/* Record the failure and send `msg` to every other rank as an abort
 * message (nonblocking; their waits pick it up). Call from the thread that
 * uses the communicator (MPI_THREAD_FUNNELED). */
static void fail_and_tell(shs_comm_t *comm, fail_kind_t kind, const char *detail, const char *msg) {
    mpi_ctx_t *ctx = comm->ctx;
    if (ctx->fail != FAIL_NONE) return;
    ctx->fail = kind;
    snprintf(ctx->fail_detail, sizeof ctx->fail_detail, "%s", detail);
    snprintf(ctx->abort_msg, sizeof ctx->abort_msg, "%s", msg);
    for (int j = 0; j < comm->nranks; j++) {
        ctx->abort_reqs[j] = MPI_REQUEST_NULL;
        if (j != comm->rank)
            MPI_Isend(ctx->abort_msg, (int)strlen(ctx->abort_msg) + 1, MPI_CHAR, j, TAG_ABORT, ctx->mc,
                      &ctx->abort_reqs[j]);
    }
}

/* "aborted by rank r: reason" to every other rank. */
static void mpi_abort_comm(shs_comm_t *comm, const char *reason) {
    char detail[FAIL_TEXT];
    snprintf(detail, sizeof detail, "aborted by rank %d: %s", comm->rank, reason);
    fail_and_tell(comm, FAIL_ABORT, detail, detail);
}

/* The job failed in this process: the other processes hear it on this
 * communicator too (their jobs then fail in turn). */
static void mpi_job_failed(shs_comm_t *comm, const char *detail) {
    char msg[FAIL_TEXT];
    snprintf(msg, sizeof msg, "the job failed: %s", detail);
    fail_and_tell(comm, FAIL_JOB, detail, msg);
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
    free(ctx->p2p_descs);
    free(ctx->p2p_reqs);
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
    for (int k = 0; k < ctx->p2p_nreqs; k++) { /* a group's exchange: odd ones receive a peer's descriptor */
        int flag = 0;
        if (ctx->p2p_reqs[k] == MPI_REQUEST_NULL) continue;
        if (k & 1) {
            MPI_Cancel(&ctx->p2p_reqs[k]);
            MPI_Wait(&ctx->p2p_reqs[k], MPI_STATUS_IGNORE);
        } else if (MPI_Test(&ctx->p2p_reqs[k], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) {
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

shs_status_t shs__mpi_ctx_create(shs_comm_t *comm, MPI_Comm mc, int timeout_ms, const char *name) {
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
    .all_gather = shs__mpi_all_gather,
    .reduce_scatter = shs__mpi_reduce_scatter,
    .all_reduce = shs__mpi_all_reduce,
    .broadcast = shs__mpi_broadcast,
    .reduce = shs__mpi_reduce,
    .barrier = shs__mpi_barrier,
    .split = shs__mpi_split,
    .p2p = shs__mpi_p2p,
    .abort = mpi_abort_comm,
    .job_failed = mpi_job_failed,
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
    shs_status_t s = c ? shs__mpi_ctx_create(c, mc, timeout_ms > 0 ? timeout_ms : SHS_COMM_DEFAULT_TIMEOUT_MS,
                                    name ? name : "world")
                       : shs_set_error(SHS_HOST_OOM, "shs_comm_mpi_create: out of host memory");
    if (s != SHS_OK) {
        free(c);
        MPI_Comm_free(&mc);
        return s;
    }
    /* a job of its own: the communicators of this process that share it fail together */
    shs__job_t *job = shs__job_create();
    s = job ? shs__job_join(c, job, NULL) : shs_set_error(SHS_HOST_OOM, "shs_comm_mpi_create: out of host memory");
    shs__job_unref(job);
    if (s != SHS_OK) {
        shs_comm_destroy(c);
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
